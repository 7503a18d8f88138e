//! End-to-end tests of modelling and solving on small C files compiled with clang.
