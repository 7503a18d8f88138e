//! Every conversion of engine values to LSP values: positions, diagnostics, hovers, code actions, statistics.
//!
//! The engine speaks 1-based lines and 1-based byte columns of the analysed text; LSP speaks 0-based lines and
//! UTF-16 columns. Divergences are grouped into *sites*, one per source location where the traces diverge;
//! each site becomes one diagnostic. Codes are documented in `docs/diagnostics.md`, one heading per code.

use crate::state::{Analysis, FixCheck, Outcome, State};
use foe_analysis::fix::SourceEdit;
use foe_analysis::report::{
    Divergence, DivergenceClass, FileReport, FunctionReport, FunctionStatus, NamedValue, TraceEvent,
};
use foe_analysis::types::{ExceptionKind, SourceLoc};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use tower_lsp::lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeDescription, Diagnostic,
    DiagnosticRelatedInformation, DiagnosticSeverity, DocumentChanges, Hover, HoverContents,
    Location, MarkupContent, MarkupKind, NumberOrString, OneOf,
    OptionalVersionedTextDocumentIdentifier, Position, Range, TextDocumentEdit, TextEdit, Url,
    WorkspaceEdit,
};

/// Most inputs listed in a hover.
const HOVER_INPUTS: usize = 5;
/// Most events of one trace listed in a hover.
const HOVER_EVENTS: usize = 12;

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

/// The divergences at one source location, the best first (inside the declared domain before outside).
pub struct Site<'r> {
    pub loc: SourceLoc,
    pub function: &'r FunctionReport,
    pub divergences: Vec<&'r Divergence>,
}

impl<'r> Site<'r> {
    pub fn primary(&self) -> &'r Divergence {
        self.divergences[0]
    }

    /// Whether the function declares an input domain and some input here satisfies it.
    pub fn in_declared_domain(&self) -> Option<bool> {
        (!self.function.domain.is_empty()).then(|| self.divergences.iter().any(|d| d.in_domain))
    }

    /// The diagnostic code: [`divergence_code`] of the primary divergence, with `-in-domain` when the function
    /// declares a domain and an input here lies inside it.
    pub fn code(&self) -> String {
        let base = divergence_code(self.primary());
        match self.in_declared_domain() {
            Some(true) => format!("{base}-in-domain"),
            _ => base,
        }
    }
}

/// Groups every divergence of the report by the location where the editor should flag it (divergences without
/// one go to the function's declaration). Sites come in source order.
pub fn sites(report: &FileReport) -> Vec<Site<'_>> {
    let mut by_loc: BTreeMap<(SourceLoc, &str), Site<'_>> = BTreeMap::new();
    for f in &report.functions {
        for d in &f.divergences {
            let Some(loc) = d.location.or_else(|| {
                f.span.as_ref().map(|s| SourceLoc {
                    line: s.line,
                    column: 0,
                })
            }) else {
                continue;
            };
            by_loc
                .entry((loc, f.name.as_str()))
                .or_insert_with(|| Site {
                    loc,
                    function: f,
                    divergences: vec![],
                })
                .divergences
                .push(d);
        }
    }
    let mut sites: Vec<Site<'_>> = by_loc.into_values().collect();
    for s in &mut sites {
        s.divergences.sort_by_key(|d| !d.in_domain); // stable: keeps the engine's ranking otherwise
    }
    sites
}

/// The stable code of a divergence: `fast-math-<kind>-appears` (P' raises a kind P never does),
/// `fast-math-<kind>-disappears` (the reverse), `fast-math-<kind>-count` (a kind is raised a different number of
/// times) or `fast-math-exception-order` (same exceptions, other order).
pub fn divergence_code(d: &Divergence) -> String {
    let counts = |t: &[TraceEvent]| {
        let mut m: HashMap<ExceptionKind, usize> = HashMap::new();
        for e in t {
            *m.entry(e.kind).or_default() += 1;
        }
        m
    };
    let (p, q) = (counts(&d.trace_p), counts(&d.trace_p_prime));
    let at = |t: &[TraceEvent]| t.get(d.first_divergence).map(|e| e.kind);
    let first = at(&d.trace_p_prime).into_iter().chain(at(&d.trace_p));
    match d.class {
        DivergenceClass::Order => "fast-math-exception-order".into(),
        DivergenceClass::Appears | DivergenceClass::Count => {
            if let Some(k) = d
                .trace_p_prime
                .iter()
                .map(|e| e.kind)
                .find(|k| !p.contains_key(k))
            {
                format!("fast-math-{k}-appears")
            } else if let Some(k) = d
                .trace_p
                .iter()
                .map(|e| e.kind)
                .find(|k| !q.contains_key(k))
            {
                format!("fast-math-{k}-disappears")
            } else if let Some(k) = first
                .chain(ExceptionKind::ALL)
                .find(|k| p.get(k) != q.get(k))
            {
                format!("fast-math-{k}-count")
            } else {
                "fast-math-exception-order".into()
            }
        }
    }
}

/// `v=-0.25, w=1.34e154`.
pub fn short_inputs(inputs: &[NamedValue]) -> String {
    inputs
        .iter()
        .map(|v| {
            format!(
                "{}={}",
                v.name,
                v.raw
                    .map(|r| r.short())
                    .unwrap_or_else(|| v.decimal.clone())
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which build's trace holds the flagged event: P' when it has an event at the first difference, else P.
fn flagged_in_p_prime(d: &Divergence) -> bool {
    d.trace_p_prime.get(d.first_divergence).is_some()
}

fn build_name(p_prime: bool) -> &'static str {
    if p_prime {
        "fast-math build"
    } else {
        "plain build"
    }
}

fn docs_href(base: &str, code: &str) -> Option<Url> {
    let anchor = code.strip_suffix("-in-domain").unwrap_or(code);
    Url::parse(&format!("{base}#{anchor}")).ok()
}

fn diagnostic(
    range: Range,
    severity: DiagnosticSeverity,
    code: String,
    message: String,
    docs: &str,
) -> Diagnostic {
    Diagnostic {
        range,
        severity: Some(severity),
        code_description: docs_href(docs, &code).map(|href| CodeDescription { href }),
        code: Some(NumberOrString::String(code)),
        source: Some("foe".into()),
        message,
        ..Default::default()
    }
}

/// The diagnostics of one analysis.
pub fn diagnostics(analysis: &Analysis, uri: &Url) -> Vec<Diagnostic> {
    let idx = LineIndex::new(&analysis.text);
    let docs = analysis.config.docs_url.as_str();
    let report = match &analysis.outcome {
        Outcome::CompileError {
            message,
            line,
            column,
        } => {
            let range = match line {
                Some(l) => idx.token_range(SourceLoc {
                    line: *l,
                    column: column.unwrap_or(0),
                }),
                None => idx.line_range(1),
            };
            let message = format!(
                "foe cannot analyse this file: {}",
                strip_file_prefix(message)
            );
            return vec![diagnostic(
                range,
                DiagnosticSeverity::ERROR,
                "compile-error".into(),
                message,
                docs,
            )];
        }
        Outcome::Report(r) => r,
    };
    let mut out: Vec<Diagnostic> = sites(report)
        .iter()
        .map(|s| site_diagnostic(s, &idx, uri, docs))
        .collect();
    if analysis.config.analysis.report_plain_exceptions {
        for f in &report.functions {
            for e in &f.plain_exceptions {
                let Some(line) = e.line else { continue };
                let range = idx.token_range(SourceLoc {
                    line,
                    column: e.column.unwrap_or(0),
                });
                let message = format!(
                    "the plain build raises {} here ({})",
                    e.kind,
                    short_inputs(&e.inputs)
                );
                let mut d = diagnostic(
                    range,
                    DiagnosticSeverity::INFORMATION,
                    format!("plain-{}", e.kind),
                    message,
                    docs,
                );
                d.data = Some(json!({ "function": f.name }));
                out.push(d);
            }
        }
    }
    if analysis.config.report_skipped {
        for f in report.functions.iter().filter(|f| {
            !f.status.ran()
                && f.status != FunctionStatus::ThroughCallers
                && f.reason != "not selected"
        }) {
            let range = idx.line_range(f.span.as_ref().map_or(1, |s| s.line));
            let message = format!("foe did not analyse `{}`: {}", f.name, f.reason);
            let mut d = diagnostic(
                range,
                DiagnosticSeverity::HINT,
                "function-skipped".into(),
                message,
                docs,
            );
            d.data = Some(json!({ "function": f.name }));
            out.push(d);
        }
    }
    out
}

/// `file.c:3:7: error: x` → `error: x` (the diagnostic is already in the file).
fn strip_file_prefix(message: &str) -> &str {
    match message
        .find(": error:")
        .or_else(|| message.find(": fatal error:"))
    {
        Some(i) => &message[i + 2..],
        None => message,
    }
}

fn site_diagnostic(site: &Site<'_>, idx: &LineIndex<'_>, uri: &Url, docs: &str) -> Diagnostic {
    let d = site.primary();
    let summary = if d.summary.is_empty() {
        describe(&divergence_code(d))
    } else {
        d.summary.clone()
    };
    let mut message = format!("{summary} ({})", short_inputs(&d.inputs));
    if site.divergences.len() > 1 {
        let more = site.divergences.len() - 1;
        message.push_str(&format!(
            "; {more} more input{} diverge{} here",
            plural(more),
            if more == 1 { "s" } else { "" }
        ));
    }
    match site.in_declared_domain() {
        Some(true) => message.push_str(" — inside the declared domain"),
        Some(false) => message.push_str(&format!(
            " — outside the declared domain ({})",
            site.function.domain.join(" && ")
        )),
        None => {}
    }
    let mut diag = diagnostic(
        idx.token_range(site.loc),
        DiagnosticSeverity::WARNING,
        site.code(),
        message,
        docs,
    );
    diag.related_information = Some(vec![related(d, site.function, idx, uri)]);
    diag.data = Some(json!({
        "function": site.function.name,
        "line": site.loc.line,
        "column": site.loc.column,
        "inDomain": site.in_declared_domain(),
    }));
    diag
}

/// Points at the corresponding event of the other build: the event at the same position of its trace, or the
/// function's declaration when the other trace has none there.
fn related(
    d: &Divergence,
    f: &FunctionReport,
    idx: &LineIndex<'_>,
    uri: &Url,
) -> DiagnosticRelatedInformation {
    let p_prime = flagged_in_p_prime(d);
    let (other, other_name) = if p_prime {
        (&d.trace_p, build_name(false))
    } else {
        (&d.trace_p_prime, build_name(true))
    };
    let result = if p_prime {
        &d.result_p
    } else {
        &d.result_p_prime
    };
    let n = d.first_divergence + 1;
    match other
        .get(d.first_divergence)
        .and_then(|e| Some((e, e.loc()?)))
    {
        Some((e, loc)) => DiagnosticRelatedInformation {
            location: Location::new(uri.clone(), idx.token_range(loc)),
            message: format!(
                "{other_name}: {} here instead (event {n} of its trace, `{}`)",
                e.kind, e.operation
            ),
        },
        None => DiagnosticRelatedInformation {
            location: Location::new(
                uri.clone(),
                idx.line_range(f.span.as_ref().map_or(1, |s| s.line)),
            ),
            message: format!(
                "{other_name}: {} on this input (it returns {result})",
                if other.is_empty() {
                    "no exception".to_string()
                } else {
                    format!("only {} exception{}", other.len(), plural(other.len()))
                }
            ),
        },
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A sentence for a code, when the engine gave no summary.
fn describe(code: &str) -> String {
    let rest = code.strip_prefix("fast-math-").unwrap_or(code);
    if rest == "exception-order" {
        return "both builds raise the same exceptions here, in another order".into();
    }
    let (kind, how) = rest.rsplit_once('-').unwrap_or((rest, ""));
    match how {
        "appears" => format!("fast-math build raises {kind} here, plain build does not"),
        "disappears" => format!("plain build raises {kind} here, fast-math build does not"),
        _ => format!("the builds raise {kind} a different number of times here"),
    }
}

/// The hover at a position on a line holding flagged sites.
pub fn hover(analysis: &Analysis, position: Position) -> Option<Hover> {
    let report = analysis.report()?;
    let idx = LineIndex::new(&analysis.text);
    let here = sites_at(report, &idx, position);
    let range = here.first().map(|s| idx.token_range(s.loc));
    let markdown = site_markdown(analysis, report, &here, false)?;
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: markdown,
        }),
        range,
    })
}

/// The markdown of `foe/trace` at a position: like the hover, with the traces of every shown input.
pub fn trace_markdown(analysis: &Analysis, position: Position) -> Option<String> {
    let report = analysis.report()?;
    let here = sites_at(report, &LineIndex::new(&analysis.text), position);
    site_markdown(analysis, report, &here, true)
}

/// The sites of the position's line whose flagged range holds the position, or every site of the line when
/// none does.
fn sites_at<'r>(report: &'r FileReport, idx: &LineIndex<'_>, position: Position) -> Vec<Site<'r>> {
    let on_line: Vec<Site<'r>> = sites(report)
        .into_iter()
        .filter(|s| s.loc.line == position.line + 1)
        .collect();
    let contains = |s: &Site<'_>| {
        let r = idx.token_range(s.loc);
        r.start.character <= position.character
            && position.character < r.end.character.max(r.start.character + 1)
    };
    if on_line.iter().any(contains) {
        on_line.into_iter().filter(contains).collect()
    } else {
        on_line
    }
}

/// Markdown for sites: the inputs (up to five), both traces, both results and the flags of both builds.
/// `all_traces` lists the traces of every shown input, not just the first.
fn site_markdown(
    analysis: &Analysis,
    report: &FileReport,
    sites: &[Site<'_>],
    all_traces: bool,
) -> Option<String> {
    if sites.is_empty() {
        return None;
    }
    let mut md = String::new();
    for (i, site) in sites.iter().enumerate() {
        if i > 0 {
            md.push_str("\n---\n\n");
        }
        write_site(&mut md, analysis, report, site, all_traces);
    }
    Some(md)
}

fn write_site(
    md: &mut String,
    analysis: &Analysis,
    report: &FileReport,
    site: &Site<'_>,
    all_traces: bool,
) {
    use std::fmt::Write;
    let d = site.primary();
    let f = site.function;
    let summary = if d.summary.is_empty() {
        describe(&divergence_code(d))
    } else {
        d.summary.clone()
    };
    let _ = writeln!(md, "**foe** · `{}` · {summary}\n", f.name);
    let _ = writeln!(
        md,
        "Cause: {} · {}\n",
        d.cause.describe(),
        d.confirmation.describe()
    );
    let shown = site.divergences.len().min(HOVER_INPUTS);
    let total = site.divergences.len();
    let _ = write!(
        md,
        "`{}` · {total} diverging input{}",
        site.code(),
        plural(total)
    );
    if total > shown {
        let _ = write!(md, " (first {shown} shown)");
    }
    if !f.domain.is_empty() {
        let inside = site.divergences.iter().filter(|d| d.in_domain).count();
        let _ = write!(
            md,
            " · {inside} inside the declared domain `{}`",
            f.domain.join(" && ")
        );
    }
    md.push_str("\n\n");

    // Inputs: one row per input, hex (exact) and decimal.
    let names: Vec<&str> = d.inputs.iter().map(|v| v.name.as_str()).collect();
    let _ = writeln!(md, "| # | {} |", names.join(" | "));
    let _ = writeln!(md, "|---|{}", "---|".repeat(names.len()));
    for (i, div) in site.divergences.iter().take(shown).enumerate() {
        let cells: Vec<String> = div
            .inputs
            .iter()
            .map(|v| format!("`{}` ({})", v.value, v.decimal))
            .collect();
        let mark = if !f.domain.is_empty() && div.in_domain {
            " (in domain)"
        } else {
            ""
        };
        let _ = writeln!(md, "| {}{mark} | {} |", i + 1, cells.join(" | "));
    }
    md.push('\n');

    let traces = if all_traces { shown } else { 1 };
    for (i, div) in site.divergences.iter().take(traces).enumerate() {
        if all_traces {
            let _ = writeln!(md, "**Input {}**: {}\n", i + 1, short_inputs(&div.inputs));
        }
        let ftz = if report.ftz_p_prime {
            ", FTZ/DAZ on"
        } else {
            ""
        };
        write_trace(
            md,
            "Plain build P",
            &report.flags_p.join(" "),
            "",
            &div.trace_p,
            div,
            &div.result_p,
        );
        write_trace(
            md,
            "Fast-math build P'",
            &report.flags_p_prime.join(" "),
            ftz,
            &div.trace_p_prime,
            div,
            &div.result_p_prime,
        );
    }
    let inputs: Vec<String> = d
        .inputs
        .iter()
        .map(|v| format!("--input {}={}", v.name, v.value))
        .collect();
    let file = analysis
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let _ = writeln!(
        md,
        "Replay: `foe replay {file} --function {} {}`",
        f.name,
        inputs.join(" ")
    );
}

fn write_trace(
    md: &mut String,
    title: &str,
    flags: &str,
    extra: &str,
    trace: &[TraceEvent],
    d: &Divergence,
    result: &str,
) {
    use std::fmt::Write;
    let _ = writeln!(md, "**{title}** (`{flags}`{extra}):");
    if trace.is_empty() {
        md.push_str("- no exception\n");
    }
    for (i, e) in trace.iter().enumerate().take(HOVER_EVENTS) {
        let at = match (e.line, e.column) {
            (Some(l), Some(c)) => format!("{l}:{c}"),
            (Some(l), None) => format!("{l}"),
            _ => "unknown location".into(),
        };
        let mark = if i == d.first_divergence {
            " ← first difference"
        } else {
            ""
        };
        let _ = writeln!(
            md,
            "{}. {} at {at} (`{}`){mark}",
            i + 1,
            e.kind,
            e.operation
        );
    }
    if trace.len() > HOVER_EVENTS {
        let _ = writeln!(md, "- … {} more", trace.len() - HOVER_EVENTS);
    }
    let _ = writeln!(md, "\nreturns `{result}`\n");
}

/// The quick fix for one function, titled by its verification, with the diagnostics it resolves.
pub fn code_action(
    uri: &Url,
    analysis: &Analysis,
    function: &str,
    check: &FixCheck,
    diagnostics: Vec<Diagnostic>,
    document_changes: bool,
) -> Option<CodeActionOrCommand> {
    let (edit, title, preferred) = match check {
        FixCheck::Verified(e) => (e, format!("Turn off fast-math in `{function}` (verified: divergence gone)"), true),
        FixCheck::Remains { edit, remaining } => (
            edit,
            format!(
                "Turn off fast-math in `{function}` (not verified: {remaining} divergence{} remain{})",
                plural(*remaining),
                if *remaining == 1 { "s" } else { "" }
            ),
            false,
        ),
        FixCheck::Unchecked { edit, why } => (edit, format!("Turn off fast-math in `{function}` (unverified: {why})"), false),
        FixCheck::Unavailable => return None,
    };
    let text_edit = text_edit(&LineIndex::new(&analysis.text), edit);
    let workspace_edit = if document_changes {
        WorkspaceEdit {
            document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
                text_document: OptionalVersionedTextDocumentIdentifier {
                    uri: uri.clone(),
                    version: Some(analysis.version),
                },
                edits: vec![OneOf::Left(text_edit)],
            }])),
            ..Default::default()
        }
    } else {
        WorkspaceEdit {
            changes: Some(HashMap::from([(uri.clone(), vec![text_edit])])),
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

/// An insertion at a 1-based (line, byte column).
pub fn text_edit(idx: &LineIndex<'_>, edit: &SourceEdit) -> TextEdit {
    let at = idx.position(edit.line, edit.column.max(1));
    TextEdit {
        range: Range::new(at, at),
        new_text: edit.text.clone(),
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
                "foe: {file} v{} analysed in {ms} ms: {} functions ({analysed} analysed, {cached} from cache), {} divergences at {} sites",
                analysis.version,
                r.functions.len(),
                r.divergence_count(),
                sites(r).len()
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

    fn ev(kind: ExceptionKind, line: u32) -> TraceEvent {
        TraceEvent {
            kind,
            line: Some(line),
            column: Some(3),
            operation: "fmul".into(),
        }
    }

    fn div(p: Vec<TraceEvent>, q: Vec<TraceEvent>, class: DivergenceClass) -> Divergence {
        Divergence {
            inputs: vec![],
            trace_p: p,
            trace_p_prime: q,
            first_divergence: 0,
            class,
            result_p: String::new(),
            result_p_prime: String::new(),
            in_domain: true,
            location: None,
            summary: String::new(),
            confirmation: Default::default(),
            shipped_p: vec![],
            shipped_p_prime: vec![],
            cause: Default::default(),
            candidates: 1,
        }
    }

    #[test]
    fn codes_name_kind_and_direction() {
        use ExceptionKind::*;
        assert_eq!(
            divergence_code(&div(
                vec![],
                vec![ev(Overflow, 1)],
                DivergenceClass::Appears
            )),
            "fast-math-overflow-appears"
        );
        assert_eq!(
            divergence_code(&div(vec![ev(Invalid, 1)], vec![], DivergenceClass::Appears)),
            "fast-math-invalid-disappears"
        );
        assert_eq!(
            divergence_code(&div(
                vec![ev(Underflow, 1)],
                vec![ev(Underflow, 1), ev(Underflow, 2)],
                DivergenceClass::Count
            )),
            "fast-math-underflow-count"
        );
        assert_eq!(
            divergence_code(&div(
                vec![ev(Underflow, 1), ev(Overflow, 2)],
                vec![ev(Overflow, 2), ev(Underflow, 1)],
                DivergenceClass::Order
            )),
            "fast-math-exception-order"
        );
        assert_eq!(
            describe("fast-math-divide-by-zero-appears"),
            "fast-math build raises divide-by-zero here, plain build does not"
        );
    }

    #[test]
    fn every_code_has_a_heading_in_the_docs() {
        let docs = include_str!("../../../docs/diagnostics.md");
        let mut codes = vec![
            "fast-math-exception-order".to_string(),
            "compile-error".into(),
            "function-skipped".into(),
        ];
        for k in ExceptionKind::ALL {
            for how in ["appears", "disappears", "count"] {
                codes.push(format!("fast-math-{k}-{how}"));
            }
            codes.push(format!("plain-{k}"));
        }
        for code in codes {
            assert!(
                docs.contains(&format!("\n### {code}\n")),
                "docs/diagnostics.md has no heading for {code}"
            );
        }
    }

    #[test]
    fn compile_errors_lose_the_file_prefix() {
        assert_eq!(
            strip_file_prefix("/tmp/a.c:3:7: error: expected ';'"),
            "error: expected ';'"
        );
    }
}
