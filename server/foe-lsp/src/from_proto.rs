//! Conversions of LSP values to what the server looks up: file paths, 1-based lines, the functions a code
//! action is about.

use crate::state::Analysis;
use std::path::PathBuf;
use tower_lsp::lsp_types::{CodeActionParams, Diagnostic, NumberOrString, Position, Url};

/// The file behind a `file:` URI (others, such as `untitled:`, are not analysed).
pub fn path(uri: &Url) -> Option<PathBuf> {
    uri.to_file_path().ok()
}

/// The engine's 1-based line of a position.
pub fn line(position: Position) -> u32 {
    position.line + 1
}

/// Whether a diagnostic is one of foe's divergence diagnostics.
pub fn is_divergence(d: &Diagnostic) -> bool {
    d.source.as_deref() == Some("foe")
        && matches!(&d.code, Some(NumberOrString::String(c)) if c.starts_with("fast-math-"))
}

/// The function a foe diagnostic belongs to (from its `data`).
pub fn diagnostic_function(d: &Diagnostic) -> Option<String> {
    d.data
        .as_ref()?
        .get("function")?
        .as_str()
        .map(str::to_string)
}

/// The functions a code-action request is about, each with the request's diagnostics that belong to it: the
/// functions of the foe divergence diagnostics in the context, and the diverging function whose body holds
/// the cursor.
pub fn code_action_functions(
    analysis: &Analysis,
    params: &CodeActionParams,
) -> Vec<(String, Vec<Diagnostic>)> {
    let mut out: Vec<(String, Vec<Diagnostic>)> = vec![];
    let mut add = |name: String, d: Option<Diagnostic>| {
        let i = match out.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                out.push((name, vec![]));
                out.len() - 1
            }
        };
        out[i].1.extend(d);
    };
    for d in params
        .context
        .diagnostics
        .iter()
        .filter(|d| is_divergence(d))
    {
        if let Some(name) = diagnostic_function(d) {
            add(name, Some(d.clone()));
        }
    }
    let cursor = line(params.range.start);
    if let Some(report) = analysis.report() {
        let diverging = report
            .functions
            .iter()
            .filter(|f| f.status.ran() && !f.divergences.is_empty());
        for f in diverging {
            let inside = f
                .span
                .as_ref()
                .is_some_and(|s| s.line <= cursor && cursor <= s.end_line);
            let flagged_here = analysis
                .shown
                .findings
                .iter()
                .any(|x| x.function == f.name && x.line == cursor && x.code.is_divergence());
            if inside || flagged_here {
                add(f.name.clone(), None);
            }
        }
    }
    out
}
