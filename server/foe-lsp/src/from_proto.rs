//! Conversions of LSP values to what the server looks up: file paths, 1-based lines, the functions a code
//! action would edit.

use crate::state::Analysis;
use foe_analysis::fix;
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

/// Whether a foe diagnostic's cause is one no source edit reaches (flush-to-zero, set at link): no quick fix
/// claims it.
fn only_a_build_change_removes(d: &Diagnostic) -> bool {
    d.data
        .as_ref()
        .and_then(|data| data.get("cause")?.get("build_change"))
        .is_some_and(|change| !change.is_null())
}

/// The function a foe diagnostic belongs to (from its `data`).
pub fn diagnostic_function(d: &Diagnostic) -> Option<String> {
    d.data
        .as_ref()?
        .get("function")?
        .as_str()
        .map(str::to_string)
}

/// The functions a code-action request would edit (the fixes' targets, `fix::target`: a helper the fast-math
/// build inlined where its operation is flagged), each with the request's diagnostics it aims at: the targets of
/// the foe divergence diagnostics in the context, and the targets whose body holds the cursor or whose flagged
/// operations are on its line.
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
    let report = analysis.report();
    let target_of = |function: &str, at: u32| {
        report
            .and_then(|r| fix::target(r, function, Some(at)))
            .map_or_else(|| function.to_string(), |t| t.function)
    };
    for d in params
        .context
        .diagnostics
        .iter()
        .filter(|d| is_divergence(d) && !only_a_build_change_removes(d))
    {
        if let Some(name) = diagnostic_function(d) {
            add(target_of(&name, line(d.range.start)), Some(d.clone()));
        }
    }
    let cursor = line(params.range.start);
    for t in report.map(fix::targets).unwrap_or_default() {
        let inside = t.span.line <= cursor && cursor <= t.span.end_line;
        let flagged_here = analysis.shown.findings.iter().any(|x| {
            x.line == cursor
                && x.code.is_divergence()
                && target_of(&x.function, x.line) == t.function
        });
        if inside || flagged_here {
            add(t.function, None);
        }
    }
    out
}
