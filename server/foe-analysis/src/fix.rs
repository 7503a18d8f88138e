//! The quick fix that turns fast-math off for one function, as plain text edits (no LSP types).
//!
//! Measured with clang 19: `#pragma float_control(precise, on)` is accepted at the start of a compound
//! statement and restores plain semantics in that block; `precise` turns contraction back on, so
//! `#pragma clang fp contract(off)` follows it.

/// Inserts `text` before the character at (line, column), both 1-based; column counts bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceEdit {
    pub line: u32,
    pub column: u32,
    pub text: String,
}
