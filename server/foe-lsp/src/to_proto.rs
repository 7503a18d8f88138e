//! Conversions of engine values to LSP values: positions, diagnostics, hovers, code actions, statistics.
//!
//! The engine speaks 1-based lines and 1-based byte columns of the analysed text; LSP speaks 0-based lines and
//! UTF-16 columns. What is shown (grouping, codes, severities, messages, hover text) is decided by the
//! engine's findings (`foe_analysis::findings`); this module only converts them.

use crate::state::{Analysis, ClientCaps, Fix, FixCheck, Outcome, State};
use foe_analysis::findings::{Finding, Severity};
use foe_analysis::fix::SourceEdit;
use foe_analysis::report::FunctionStatus;
use foe_analysis::types::SourceLoc;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use tower_lsp::lsp_types::{
    CodeAction, CodeActionDisabled, CodeActionKind, CodeActionOrCommand, CodeDescription,
    Diagnostic, DiagnosticRelatedInformation, DiagnosticSeverity, DocumentChanges, Hover,
    HoverContents, Location, MarkupContent, MarkupKind, NumberOrString, OneOf,
    OptionalVersionedTextDocumentIdentifier, Position, Range, TextDocumentEdit, TextEdit, Url,
    WorkspaceEdit,
};

/// The suffix of a stale finding's message.
pub const STALE: &str = " (stale: the file does not compile)";

/// Line starts of a text, to turn (line, byte column) into LSP positions.
pub struct LineIndex<'a> {
    lines: Vec<&'a str>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> LineIndex<'a> {
        LineIndex {
            lines: text
                .split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l))
                .collect(),
        }
    }

    /// The text of a 1-based line ("" past the end).
    pub fn line(&self, line: u32) -> &'a str {
        self.lines
            .get((line as usize).wrapping_sub(1))
            .copied()
            .unwrap_or("")
    }

    /// The LSP position of a 1-based line and 1-based byte column (0 means the line's first non-blank).
    pub fn position(&self, line: u32, column: u32) -> Position {
        let text = self.line(line);
        let byte = if column == 0 {
            text.len() - text.trim_start().len()
        } else {
            floor_char_boundary(text, (column - 1) as usize)
        };
        Position::new(
            line.saturating_sub(1),
            text[..byte].encode_utf16().count() as u32,
        )
    }

    /// The range flagged for an event: the token at the column (an operator character, or an identifier such
    /// as a called function), or the whole line without its indentation when there is no column.
    pub fn token_range(&self, loc: SourceLoc) -> Range {
        let text = self.line(loc.line);
        if loc.column == 0 || loc.column as usize > text.len() {
            return self.line_range(loc.line);
        }
        let start = floor_char_boundary(text, (loc.column - 1) as usize);
        let rest = &text[start..];
        let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '.';
        let len = match rest.chars().next() {
            Some(c) if is_ident(c) => rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len()),
            Some(c) => c.len_utf8(),
            None => 0,
        };
        let utf16 = |b: usize| text[..b].encode_utf16().count() as u32;
        let line = loc.line.saturating_sub(1);
        Range::new(
            Position::new(line, utf16(start)),
            Position::new(line, utf16(start + len)),
        )
    }

    /// A whole 1-based line without leading and trailing blanks.
    pub fn line_range(&self, line: u32) -> Range {
        let text = self.line(line);
        let start = text.len() - text.trim_start().len();
        let end = text.trim_end().len().max(start);
        let utf16 = |b: usize| text[..b].encode_utf16().count() as u32;
        let l = line.saturating_sub(1);
        Range::new(Position::new(l, utf16(start)), Position::new(l, utf16(end)))
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

pub fn severity(s: Severity) -> DiagnosticSeverity {
    match s {
        Severity::Error => DiagnosticSeverity::ERROR,
        Severity::Warning => DiagnosticSeverity::WARNING,
        Severity::Information => DiagnosticSeverity::INFORMATION,
        Severity::Hint => DiagnosticSeverity::HINT,
    }
}

fn docs_href(base: &str, code: &str) -> Option<Url> {
    Url::parse(&format!("{base}#{code}")).ok()
}

/// The range of a finding: its token, or its line.
pub fn range(idx: &LineIndex<'_>, f: &Finding) -> Range {
    idx.token_range(f.loc())
}

/// One finding as a diagnostic.
pub fn diagnostic(
    f: &Finding,
    idx: &LineIndex<'_>,
    uri: &Url,
    docs: &str,
    stale: bool,
) -> Diagnostic {
    let code = f.code.as_string();
    let message = if stale {
        format!("{}{STALE}", f.message)
    } else {
        f.message.clone()
    };
    Diagnostic {
        range: range(idx, f),
        severity: Some(severity(f.severity)),
        code_description: docs_href(docs, &code).map(|href| CodeDescription { href }),
        code: Some(NumberOrString::String(code.clone())),
        source: Some("foe".into()),
        message,
        related_information: f.related.as_ref().map(|r| {
            vec![DiagnosticRelatedInformation {
                location: Location::new(
                    uri.clone(),
                    idx.token_range(SourceLoc {
                        line: r.line,
                        column: r.column.unwrap_or(0),
                    }),
                ),
                message: r.message.clone(),
            }]
        }),
        data: Some(json!({
            "function": f.function,
            "alsoIn": f.also_in,
            "code": code,
            "cause": f.cause,
            "inputs": f.inputs,
            "rank": f.rank,
            "fingerprint": f.fingerprint,
            "stale": stale,
        })),
        ..Default::default()
    }
}

/// The diagnostics of one analysis.
pub fn diagnostics(analysis: &Analysis, uri: &Url) -> Vec<Diagnostic> {
    let shown = &analysis.shown;
    let idx = LineIndex::new(&shown.text);
    let docs = analysis.config.docs_url.as_str();
    shown
        .findings
        .iter()
        .map(|f| diagnostic(f, &idx, uri, docs, shown.stale))
        .collect()
}

/// The findings at a position: those of its line whose token holds it, else those flagging the whole line,
/// else every one of the line; best first.
pub fn findings_at(analysis: &Analysis, position: Position) -> Vec<&Finding> {
    let idx = LineIndex::new(&analysis.shown.text);
    let on_line: Vec<&Finding> = analysis
        .shown
        .findings
        .iter()
        .filter(|f| f.line == position.line + 1)
        .collect();
    let on_token = |f: &&Finding| {
        let r = range(&idx, f);
        f.column.is_some()
            && r.start.character <= position.character
            && position.character < r.end.character.max(r.start.character + 1)
    };
    if on_line.iter().any(on_token) {
        return on_line.into_iter().filter(on_token).collect();
    }
    if on_line.iter().any(|f| f.column.is_none()) {
        return on_line.into_iter().filter(|f| f.column.is_none()).collect();
    }
    on_line
}

/// The hover at a position on a line holding findings: the best one's hover text (and how many more are
/// there), its range.
pub fn hover(analysis: &Analysis, position: Position) -> Option<Hover> {
    let here = findings_at(analysis, position);
    let first = here.first()?;
    let mut markdown = first.hover.clone();
    if here.len() > 1 {
        let more = here.len() - 1;
        markdown.push_str(&format!(
            "\n\n{more} more finding{} here: see the Problems list or the trace command.",
            plural(more)
        ));
    }
    if analysis.shown.stale {
        markdown = format!(
            "*Stale: the file does not compile; these are the last findings.*\n\n{markdown}"
        );
    }
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: markdown,
        }),
        range: Some(range(&LineIndex::new(&analysis.shown.text), first)),
    })
}

/// The markdown of `foe/trace` at a position: every input of the findings there with both full traces.
pub fn trace_markdown(analysis: &Analysis, position: Position) -> Option<String> {
    let report = analysis.shown.report.as_ref()?;
    let here = findings_at(analysis, position);
    let here: Vec<&Finding> = here
        .into_iter()
        .filter(|f| f.code.is_divergence())
        .collect();
    (!here.is_empty()).then(|| foe_analysis::findings::hover::trace_markdown(report, &here))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The quick fix for one function, titled by its verification, with the diagnostics it resolves.
pub fn code_action(
    uri: &Url,
    analysis: &Analysis,
    function: &str,
    check: &FixCheck,
    diagnostics: Vec<Diagnostic>,
    caps: ClientCaps,
) -> Option<CodeActionOrCommand> {
    // Short titles: what it turns off, where, and the verdict in a few words (the hover has the rest).
    let title = |fix: &Fix, verdict: String| {
        if fix.whole_file {
            return format!("Turn off {} in this file ({verdict})", fix.scope.what());
        }
        let also: String = fix.also.iter().map(|f| format!(" and `{f}`")).collect();
        format!(
            "Turn off {} in `{function}`{also} ({verdict})",
            fix.scope.what()
        )
    };
    let (fix, title, preferred) = match check {
        FixCheck::Verified {
            fix,
            build_only,
            added,
        } => {
            let mut verdict = "verified".to_string();
            if *build_only > 0 {
                verdict.push_str(&format!(
                    "; flush-to-zero left at {build_only} place{}",
                    plural(*build_only)
                ));
            }
            if *added > 0 {
                verdict.push_str(&format!("; {added} new hint{}", plural(*added)));
            }
            (fix, title(fix, verdict), true)
        }
        FixCheck::Remains { fix, remaining } => (
            fix,
            title(
                fix,
                format!("{remaining} finding{} would remain", plural(*remaining)),
            ),
            false,
        ),
        FixCheck::Unchecked { fix, .. } => (fix, title(fix, "not verified".into()), false),
        FixCheck::Pending(fix) => (fix, title(fix, "verifying…".into()), false),
        // A fix that adds findings is never offered: shown greyed with the reason where the client can.
        FixCheck::Worse {
            fix,
            added,
            moved_to,
        } => {
            return caps.disabled_code_actions.then(|| {
                let title = title(fix, format!("would add {added} warning{}", plural(*added)));
                let reason = worse_reason(fix, function, *added, moved_to);
                not_offered(title, reason, diagnostics)
            })
        }
        FixCheck::Unavailable => return None,
    };
    let idx = LineIndex::new(&analysis.text);
    let text_edits: Vec<TextEdit> = fix.edits.iter().map(|e| text_edit(&idx, e)).collect();
    let workspace_edit = if caps.document_changes {
        WorkspaceEdit {
            document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
                text_document: OptionalVersionedTextDocumentIdentifier {
                    uri: uri.clone(),
                    version: Some(analysis.version),
                },
                edits: text_edits.into_iter().map(OneOf::Left).collect(),
            }])),
            ..Default::default()
        }
    } else {
        WorkspaceEdit {
            changes: Some(HashMap::from([(uri.clone(), text_edits)])),
            ..Default::default()
        }
    };
    Some(CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(CodeActionKind::QUICKFIX),
        diagnostics: (!diagnostics.is_empty()).then_some(diagnostics),
        edit: Some(workspace_edit),
        is_preferred: Some(preferred),
        ..Default::default()
    }))
}

/// A quick fix shown greyed (LSP `disabled`), with no edit: the client shows `reason` when it is picked.
fn not_offered(title: String, reason: String, diagnostics: Vec<Diagnostic>) -> CodeActionOrCommand {
    CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(CodeActionKind::QUICKFIX),
        diagnostics: (!diagnostics.is_empty()).then_some(diagnostics),
        disabled: Some(CodeActionDisabled { reason }),
        ..Default::default()
    })
}

/// Why a fix that would add warnings is not offered, in a sentence: where the warnings would appear.
fn worse_reason(fix: &Fix, function: &str, added: usize, moved_to: &[String]) -> String {
    let warnings = format!("{added} warning{}", plural(added));
    let inside = match moved_to {
        [] => String::new(),
        [only] if only == function => " further on in it".to_string(),
        names => {
            let names: Vec<String> = names.iter().map(|f| format!("`{f}`")).collect();
            format!(" in {}", names.join(", "))
        }
    };
    if fix.whole_file {
        return format!(
            "Not offered: with {} off in this file, re-analysing it shows {warnings}{inside} that it does not \
             show now",
            fix.scope.what()
        );
    }
    format!(
        "Not offered: with {} off in `{function}`, re-analysing the file shows {warnings}{inside} that it does \
         not show now (what fast-math still does outside `{function}` changes the values it computes)",
        fix.scope.what()
    )
}

/// `actions` without the repeats of an earlier one's title: the fix of the whole file is the same whichever
/// function's diagnostics asked for it.
pub fn distinct_actions(actions: Vec<CodeActionOrCommand>) -> Vec<CodeActionOrCommand> {
    let mut seen = std::collections::HashSet::new();
    actions
        .into_iter()
        .filter(|a| {
            let title = match a {
                CodeActionOrCommand::CodeAction(a) => a.title.clone(),
                CodeActionOrCommand::Command(c) => c.title.clone(),
            };
            seen.insert(title)
        })
        .collect()
}

/// An insertion at a 1-based (line, byte column).
pub fn text_edit(idx: &LineIndex<'_>, edit: &SourceEdit) -> TextEdit {
    let at = idx.position(edit.line, edit.column.max(1));
    TextEdit {
        range: Range::new(at, at),
        new_text: edit.text.clone(),
    }
}

/// `foe/status`: what the server is doing for a document, for the editors' status items.
pub enum StatusNotification {}

impl tower_lsp::lsp_types::notification::Notification for StatusNotification {
    type Params = Value;
    const METHOD: &'static str = "foe/status";
}

/// The parameters of `foe/status`: `state` is `analysing`, `idle`, `incomplete` (done, but a function was hardly
/// compared: `incomplete` counts them), `stale`, `error` or `disabled`.
pub fn status(
    uri: &Url,
    version: i32,
    state: &str,
    message: &str,
    analysis: Option<&Analysis>,
) -> Value {
    let mut v =
        json!({ "uri": uri.as_str(), "version": version, "state": state, "message": message });
    if let Some(a) = analysis {
        let count = |s: Severity| a.shown.findings.iter().filter(|f| f.severity == s).count();
        let skipped = a.report().map_or(0, |r| {
            r.functions
                .iter()
                .filter(|f| f.status == FunctionStatus::Skipped && f.reason != "not selected")
                .count()
        });
        v["warnings"] = json!(count(Severity::Warning));
        v["information"] = json!(count(Severity::Information));
        v["hints"] = json!(count(Severity::Hint));
        v["skipped"] = json!(skipped);
        v["incomplete"] = json!(a.report().map_or(0, foe_analysis::findings::left_unchecked));
        v["elapsedMs"] = json!(a.elapsed.as_millis() as u64);
    }
    v
}

/// The state and one-line message of `foe/status` after an analysis.
pub fn status_summary(analysis: &Analysis) -> (&'static str, String) {
    match &analysis.outcome {
        Outcome::CompileError { message, .. } => (
            "stale",
            format!(
                "does not compile{}: {}",
                if analysis.shown.stale {
                    ", showing the last findings"
                } else {
                    ""
                },
                message.lines().next().unwrap_or("")
            ),
        ),
        // Done, but some function was hardly compared: not shown as all clear.
        Outcome::Report(r) if foe_analysis::findings::left_unchecked(r) > 0 => (
            "incomplete",
            foe_analysis::findings::summary(r, &analysis.shown.findings),
        ),
        Outcome::Report(r) => (
            "idle",
            foe_analysis::findings::summary(r, &analysis.shown.findings),
        ),
    }
}

/// One line for `window/logMessage` after an analysis.
pub fn analysis_summary(file: &str, analysis: &Analysis) -> String {
    let ms = analysis.elapsed.as_millis();
    match &analysis.outcome {
        Outcome::CompileError { message, .. } => format!(
            "foe: {file} v{} does not compile ({ms} ms): {message}",
            analysis.version
        ),
        Outcome::Report(r) => {
            let analysed = r.functions.iter().filter(|f| f.status.ran()).count();
            let cached = r.functions.iter().filter(|f| f.cached).count();
            format!(
                "foe: {file} v{} analysed in {ms} ms: {} functions ({analysed} analysed, {cached} from cache), {} divergences, {} findings shown",
                analysis.version,
                r.functions.len(),
                r.divergence_count(),
                analysis.shown.findings.len()
            )
        }
    }
}

/// The answer to `foe/stats`: cache counters and, per open document, what its latest analysis found.
pub fn stats(state: &State) -> Value {
    let mut documents: Vec<Value> = state
        .docs
        .iter()
        .map(|e| {
            let doc = e.value();
            let analysis = doc.analysis.as_ref().map(|a| {
                let functions: Vec<Value> = a
                    .report()
                    .map(|r| {
                        r.functions
                            .iter()
                            .map(|f| {
                                json!({
                                    "name": f.name,
                                    "status": f.status,
                                    "cached": f.cached,
                                    "divergences": f.divergences.len(),
                                    // A wall-clock safety net stopped it: another run may differ, and it
                                    // is not cached.
                                    "stoppedByTheClock": f.stopped_by_the_clock(),
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                json!({
                    "version": a.version,
                    "elapsedMs": a.elapsed.as_millis() as u64,
                    "compileError": matches!(a.outcome, Outcome::CompileError { .. }),
                    "functions": functions,
                })
            });
            json!({ "uri": e.key().as_str(), "version": doc.version, "analysis": analysis })
        })
        .collect();
    documents.sort_by(|a, b| a["uri"].as_str().cmp(&b["uri"].as_str()));
    json!({
        "analyses": state.analyses.load(Ordering::Relaxed),
        "jobsRunning": crate::scheduler::jobs_running(),
        "cache": {
            "hits": state.cache.hits.load(Ordering::Relaxed),
            "misses": state.cache.misses.load(Ordering::Relaxed),
            "entries": state.cache.len(),
        },
        "documents": documents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16() {
        let idx = LineIndex::new("int x;\n  /* é */ a*b\n");
        assert_eq!(idx.position(2, 12), Position::new(1, 10));
        assert_eq!(
            idx.token_range(SourceLoc {
                line: 2,
                column: 12
            }),
            Range::new(Position::new(1, 10), Position::new(1, 11))
        );
        assert_eq!(
            idx.token_range(SourceLoc {
                line: 2,
                column: 11
            }),
            Range::new(Position::new(1, 9), Position::new(1, 10))
        );
        assert_eq!(
            idx.line_range(2),
            Range::new(Position::new(1, 2), Position::new(1, 13))
        );
        assert_eq!(idx.position(9, 3), Position::new(8, 0));
    }

    #[test]
    fn a_fix_that_would_add_warnings_says_where_they_would_appear() {
        let fix = Fix {
            scope: foe_analysis::fix::FixScope::FastMath,
            edits: vec![],
            also: vec![],
            whole_file: false,
        };
        let own = worse_reason(&fix, "lngamma", 2, &["lngamma".to_string()]);
        assert!(own.contains("2 warnings further on in it"), "{own}");
        assert!(own.contains("fast-math off in `lngamma`"), "{own}");
        let elsewhere = worse_reason(
            &fix,
            "helper",
            1,
            &["caller".to_string(), "other".to_string()],
        );
        assert!(
            elsewhere.contains("1 warning in `caller`, `other`"),
            "{elsewhere}"
        );
        let CodeActionOrCommand::CodeAction(action) =
            not_offered("t".into(), elsewhere.clone(), vec![])
        else {
            panic!("a code action")
        };
        assert!(action.edit.is_none(), "a greyed fix edits nothing");
        assert_eq!(action.disabled.map(|d| d.reason), Some(elsewhere));
    }
}
