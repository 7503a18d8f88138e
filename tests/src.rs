//! Shared helpers live in each test file; this crate only hosts end-to-end tests.
