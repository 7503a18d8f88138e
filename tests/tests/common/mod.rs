//! Helpers shared by the end-to-end test binaries.

pub mod lsp_session;
