//! Neighbourhood search and trace comparison (in progress).
