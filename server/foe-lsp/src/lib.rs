//! foe-lsp: the language server over the foe engine (the only crate that knows LSP).

/// Serves the Language Server Protocol on stdin/stdout until the client exits.
pub fn run_stdio() -> anyhow::Result<()> {
    anyhow::bail!("the language server is not built yet")
}
