//! Findings: what a person is shown, decided once from a [`FileReport`] and rendered by every front end
//! (`foe check` as text, JSON and SARIF; the language server as diagnostics and hovers).
//!
//! Divergences are grouped into one finding per site (function and flagged location) and cause, with the
//! best input first: inside the declared domain before outside, ordinary magnitudes before extreme ones.
//! Each finding carries a stable [`Code`], a severity chosen by [`FindingOptions`], a one-line message,
//! the hover markdown and a fingerprint that survives edits elsewhere in the file.

pub mod code;
pub mod hover;
pub mod message;
pub mod options;
pub mod render;

pub use code::{Code, Direction};
pub use options::{FindingOptions, Severity, ShownAs};

use crate::report::{Divergence, FileReport, FunctionReport, FunctionStatus, NamedValue};
use crate::types::SourceLoc;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Why fast-math changed the exceptions here (reassociation, reciprocal, contraction, flush-to-zero...).
/// Filled in from the divergence's cause classification when the engine provides one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Cause {
    /// A stable identifier (`reassociation`), part of the grouping and of the fingerprint.
    pub id: String,
    /// Plain words for messages and hovers.
    pub text: String,
    /// The build change that removes it, for a cause no source edit reaches (flush-to-zero: link with
    /// `-mno-daz-ftz`); the quick fix does not offer to remove it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_change: Option<String>,
}

/// The cause of one divergence. The one place that maps the engine's cause classification
/// ([`crate::report::Cause`], found by re-running the witness on builds that differ in one option) to findings;
/// `None` when it was not determined.
pub fn cause_of(d: &Divergence) -> Option<Cause> {
    if d.cause == crate::report::Cause::Undetermined {
        return None;
    }
    let id = serde_json::to_value(d.cause)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    Some(Cause {
        id,
        text: d.cause.describe().to_string(),
        build_change: crate::fix::build_change(d.cause).map(String::from),
    })
}

/// Where a finding's inputs lie relative to the function's declared domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DomainFit {
    /// The function declares no domain.
    NotDeclared,
    /// Some input here lies inside the declared domain.
    Inside,
    /// Every input here lies outside it.
    Outside,
}

/// How much a finding matters, best first; findings are listed in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rank {
    /// On an input inside the declared domain.
    InDomain,
    /// On an input of ordinary magnitude (no domain declared).
    Ordinary,
    /// Only on inputs outside the declared domain.
    OutsideDomain,
    /// Only on extreme inputs (near overflow, subnormal, infinite).
    ExtremeInputs,
    /// Only with a NaN or infinite input.
    NonFiniteInputs,
    /// Not a divergence: a skipped function, an exception of the plain build, a compile error.
    Note,
}

/// A place a finding refers to besides its own (the other build's event at the same trace position).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Related {
    pub line: u32,
    /// 1-based byte column; `None` for the whole line.
    pub column: Option<u32>,
    pub message: String,
}

/// One thing shown to the user.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub code: Code,
    pub severity: Severity,
    pub rank: Rank,
    pub function: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based byte column; `None` when only the line is known.
    pub column: Option<u32>,
    /// One line, the same in every front end.
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    pub domain: DomainFit,
    /// Diverging inputs grouped here (0 for notes).
    pub inputs: usize,
    /// The best input, named as the source names it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub best_inputs: Vec<NamedValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related: Option<Related>,
    /// The best input's exception traces on the binaries clang ships, one line per build
    /// (`P' as shipped: underflow at 4:18, overflow at 5:9`); empty when they did not run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shipped: Vec<String>,
    /// Other functions whose analysis flagged the same site with the same code and cause (the wrappers a helper
    /// is inlined into, or the helper itself): one finding for all, named in its message and hover.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_in: Vec<String>,
    /// Markdown for an editor's hover: short, no tables.
    pub hover: String,
    /// Stable across edits elsewhere in the file: function, code, cause and the flagged line's text.
    pub fingerprint: String,
    /// Indices into the function's `divergences`, best first.
    #[serde(skip)]
    pub divergences: Vec<usize>,
}

impl Finding {
    /// The finding for a file that does not compile (`line`/`column` of clang's first error).
    pub fn compile_error(message: &str, line: Option<u32>, column: Option<u32>) -> Finding {
        let message = format!(
            "foe cannot analyse this file: {}",
            strip_file_prefix(message)
        );
        let hover = message.clone();
        let at = (line.unwrap_or(1), column);
        Finding::not_a_divergence(
            Code::CompileError,
            Severity::Error,
            String::new(),
            at,
            message,
            hover,
        )
    }

    /// A finding that is not a divergence (a note on a function, a compile error): no inputs, cause or domain.
    fn not_a_divergence(
        code: Code,
        severity: Severity,
        function: String,
        (line, column): (u32, Option<u32>),
        message: String,
        hover: String,
    ) -> Finding {
        Finding {
            code,
            severity,
            rank: Rank::Note,
            function,
            line,
            column: column.filter(|c| *c > 0),
            hover,
            message,
            cause: None,
            domain: DomainFit::NotDeclared,
            inputs: 0,
            best_inputs: vec![],
            related: None,
            shipped: vec![],
            also_in: vec![],
            fingerprint: String::new(),
            divergences: vec![],
        }
    }

    pub fn loc(&self) -> SourceLoc {
        SourceLoc {
            line: self.line,
            column: self.column.unwrap_or(0),
        }
    }

    /// The divergences behind the finding, best first.
    pub fn divergences_in<'r>(&self, f: &'r FunctionReport) -> Vec<&'r Divergence> {
        self.divergences
            .iter()
            .filter_map(|&i| f.divergences.get(i))
            .collect()
    }
}

/// `file.c:3:7: error: x` → `error: x` (the finding is already placed in the file).
fn strip_file_prefix(message: &str) -> &str {
    match message
        .find(": error:")
        .or_else(|| message.find(": fatal error:"))
    {
        Some(i) => &message[i + 2..],
        None => message,
    }
}

/// Every finding of a report that `options` shows, best rank first, then in source order. `source` is the
/// analysed text (for fingerprints).
pub fn findings(report: &FileReport, source: &str, options: &FindingOptions) -> Vec<Finding> {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = vec![];
    let mut divergent = vec![];
    for f in &report.functions {
        divergent.extend(divergence_findings(report, f, options));
    }
    out.extend(unreached_by_callers(
        report,
        one_per_site(report, divergent),
    ));
    let mut from_headers = vec![];
    for f in &report.functions {
        for e in &f.plain_exceptions {
            let Some(line) = e.line else { continue };
            let mut message = format!(
                "the plain build raises {} here ({})",
                e.kind,
                message::short_inputs(&e.inputs, usize::MAX)
            );
            match &e.avoidable {
                Some(crate::report::Avoidability::Avoidable) => message.push_str(
                    "; avoidable: the real-number result is representable, another evaluation order would not \
                     raise it",
                ),
                Some(crate::report::Avoidability::Unavoidable) => {
                    message.push_str("; unavoidable: the real-number result itself is not representable")
                }
                _ => {}
            }
            out.push(note(
                Code::Plain(e.kind),
                Severity::Information,
                f,
                line,
                e.column,
                message,
            ));
        }
        if options.report_skipped
            && f.status == FunctionStatus::Skipped
            && f.reason != "not selected"
            && f.header.is_some()
        {
            from_headers.push(f);
        } else if options.report_skipped
            && f.status == FunctionStatus::Skipped
            && f.reason != "not selected"
        {
            let line = f.span.as_ref().map_or(1, |s| s.line);
            let message = format!("foe did not analyse `{}`: {}", f.name, f.reason);
            out.push(note(
                Code::FunctionSkipped,
                Severity::Hint,
                f,
                line,
                None,
                message,
            ));
        }
        if let Some(finding) = runs_incomplete(f) {
            out.push(finding);
        }
    }
    out.extend(skipped_in_headers(&from_headers));
    out.sort_by_key(|x| (x.rank, x.line, x.column, x.code));
    // Fingerprints: the same (function, code, cause, line text) a second time gets an occurrence number.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for x in &mut out {
        let text = lines
            .get(x.line as usize - 1)
            .map_or("", |l| l.trim())
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let cause = x.cause.as_ref().map_or("", |c| c.id.as_str());
        let base = format!("{}\u{0}{}\u{0}{cause}\u{0}{text}", x.function, x.code);
        let n = seen.entry(base.clone()).or_default();
        *n += 1;
        x.fingerprint = blake3::hash(format!("{base}\u{0}{n}").as_bytes()).to_hex()[..16].into();
    }
    out
}

/// Most other functions a message names (the hover names them all).
const ALSO_NAMED: usize = 2;

/// One finding per site, code and cause across the functions that flagged it (a helper and the wrappers it is
/// inlined into report the same operation): the one whose body holds the site speaks for all, with the best
/// severity and rank among them, and names the others.
fn one_per_site(report: &FileReport, findings: Vec<Finding>) -> Vec<Finding> {
    let holds = |x: &Finding| {
        report
            .functions
            .iter()
            .find(|f| f.name == x.function)
            .and_then(|f| f.span.as_ref())
            .is_some_and(|s| s.line <= x.line && x.line <= s.end_line)
    };
    type Site = (u32, Option<u32>, Code, Option<String>);
    let mut sites: BTreeMap<Site, Vec<Finding>> = BTreeMap::new();
    for x in findings {
        let key = (
            x.line,
            x.column,
            x.code,
            x.cause.as_ref().map(|c| c.id.clone()),
        );
        sites.entry(key).or_default().push(x);
    }
    let mut out = vec![];
    for (_, mut group) in sites {
        // The holder first, then the best shown.
        group.sort_by_key(|x| (!holds(x), x.rank, x.severity));
        let mut others = group.split_off(1);
        let mut one = group.remove(0);
        if others.is_empty() {
            out.push(one);
            continue;
        }
        others.sort_by(|a, b| a.function.cmp(&b.function));
        others.dedup_by(|a, b| a.function == b.function);
        one.severity = others
            .iter()
            .map(|x| x.severity)
            .fold(one.severity, Ord::min);
        one.rank = others.iter().map(|x| x.rank).fold(one.rank, Ord::min);
        one.also_in = others.into_iter().map(|x| x.function).collect();
        one.also_in.retain(|name| *name != one.function);
        if !one.also_in.is_empty() {
            let names: Vec<String> = one.also_in.iter().map(|n| format!("`{n}`")).collect();
            let shown = match names.len() {
                n if n > ALSO_NAMED => {
                    format!(
                        "{} and {} more",
                        names[..ALSO_NAMED].join(", "),
                        n - ALSO_NAMED
                    )
                }
                _ => names.join(", "),
            };
            let also = format!("in `{}`, also through {shown}: ", one.function);
            one.message.insert_str(0, &also);
            one.hover.push_str(&format!(
                "\nThe same site is flagged, for the same cause, in the analysis of {}.\n",
                names.join(", ")
            ));
        }
        out.push(one);
    }
    out
}

/// A `static` function is reached only through the callers in its file: a finding its own analysis makes at a
/// site that no caller's analysis flagged (for the same code and cause) comes from an input no caller was seen to
/// pass, and is shown as a hint that says so (GSL's `gamma_xgthalf`, called only with x > 1/2, flagged at 5.6e-17).
fn unreached_by_callers(report: &FileReport, mut findings: Vec<Finding>) -> Vec<Finding> {
    for x in &mut findings {
        let Some(f) = report.functions.iter().find(|f| f.name == x.function) else {
            continue;
        };
        if f.static_callers.is_empty() || x.also_in.iter().any(|c| f.static_callers.contains(c)) {
            continue;
        }
        x.severity = x.severity.max(Severity::Hint);
        let callers: Vec<String> = f.static_callers.iter().map(|c| format!("`{c}`")).collect();
        x.message.push_str(&format!(
            "; `{}` is static and the analysis of its callers ({}) did not reach this with such an input",
            f.name,
            callers.join(", ")
        ));
        x.hover.push_str(&format!(
            "\n`{}` is `static`: only its callers' inputs reach it, and the analysis of {} did not find this \
             there. Shown as a hint.\n",
            f.name,
            callers.join(", ")
        ));
    }
    findings
}

/// One note at the top of the file for the functions of included headers foe did not analyse (a header's
/// `static inline` helpers come with every file that includes it): the first few named with their reason, the
/// hover lists all.
fn skipped_in_headers(skipped: &[&FunctionReport]) -> Option<Finding> {
    let first = skipped.first()?;
    let mut headers: Vec<&str> = skipped.iter().filter_map(|f| f.header.as_deref()).collect();
    headers.sort();
    headers.dedup();
    let named = |f: &&FunctionReport| format!("`{}` ({})", f.name, f.reason);
    let listed: Vec<String> = skipped.iter().take(ALSO_NAMED).map(named).collect();
    let more = skipped.len().saturating_sub(ALSO_NAMED);
    let mut message = format!(
        "foe did not analyse {} function{} defined in {}: {}",
        skipped.len(),
        message::plural(skipped.len()),
        headers.join(", "),
        listed.join(", ")
    );
    if more > 0 {
        message.push_str(&format!(" and {more} more"));
    }
    let mut finding = note(
        Code::FunctionSkipped,
        Severity::Hint,
        first,
        1,
        None,
        message,
    );
    finding.function = String::new();
    finding.hover = format!(
        "**foe** · functions of included headers it did not analyse\n\n{}\n",
        skipped
            .iter()
            .map(|f| format!("- {}", named(f)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    Some(finding)
}

/// The note on a function whose runs mostly crashed or timed out: whatever else its report says, its builds were
/// hardly compared, and the editor must not look as if all were well.
fn runs_incomplete(f: &FunctionReport) -> Option<Finding> {
    let line = f.span.as_ref().map_or(1, |s| s.line);
    let incomplete = |message: String| {
        Some(note(
            Code::RunsIncomplete,
            Severity::Information,
            f,
            line,
            None,
            message,
        ))
    };
    if !unchecked(f) {
        return None;
    }
    if !f.runs.mostly_incomplete() {
        // Attempted, and nothing to show for it (a solver crash, no run at all).
        return incomplete(format!(
            "foe could not compare the builds of `{}`: {}",
            f.name, f.reason
        ));
    }
    let t = &f.runs;
    let how_many = if t.incomplete == t.runs {
        "no run completed".to_string()
    } else {
        format!("{} of {} runs did not complete", t.incomplete, t.runs)
    };
    let first = t.first.as_deref().unwrap_or("crashed");
    // A function that legitimately runs longer than the limits is told which settings raise them.
    let raise = if t.first_passed_the_limits() {
        "; if it needs longer, raise the `execOpLimit` or `execTimeoutMs` setting"
    } else {
        ""
    };
    let message = format!(
        "foe could hardly compare the builds of `{}`: {how_many} (first: {first}){raise}",
        f.name
    );
    incomplete(message)
}

fn note(
    code: Code,
    severity: Severity,
    f: &FunctionReport,
    line: u32,
    column: Option<u32>,
    message: String,
) -> Finding {
    let hover = format!("**foe** · `{}` · {message}", f.name);
    Finding::not_a_divergence(
        code,
        severity,
        f.name.clone(),
        (line, column),
        message,
        hover,
    )
}

/// Most events of one shipped trace listed in a finding.
const SHIPPED_EVENTS: usize = 6;

/// One finding per flagged location and cause of one function.
fn divergence_findings(
    report: &FileReport,
    f: &FunctionReport,
    options: &FindingOptions,
) -> Vec<Finding> {
    let declared = !f.domain.is_empty();
    let decl = SourceLoc {
        line: f.span.as_ref().map_or(1, |s| s.line),
        column: 0,
    };
    // A site's exception divergences and its result-only ones (what the function returns, not what it raises)
    // are findings of their own: an overflow at an extreme input must not hide the wrong result at an ordinary one.
    let mut groups: BTreeMap<(SourceLoc, Option<Cause>, bool), Vec<usize>> = BTreeMap::new();
    for (i, d) in f.divergences.iter().enumerate() {
        let loc = code::flagged_location(d).unwrap_or(decl);
        let result_only = !d.class.is_exception();
        groups
            .entry((loc, cause_of(d), result_only))
            .or_default()
            .push(i);
    }
    let mut out = vec![];
    for ((loc, cause, _), mut members) in groups {
        // Best first: inside the declared domain, then ordinary magnitudes, then one that changes what the caller
        // gets, then the engine's order.
        let extreme = |d: &Divergence| message::is_extreme(f, d);
        let non_finite = |d: &Divergence| message::needs_non_finite(d);
        members.sort_by_key(|&i| {
            let d = &f.divergences[i];
            let same_outputs = d.result.is_none();
            (
                declared && !d.in_domain,
                non_finite(d),
                extreme(d),
                same_outputs,
                i,
            )
        });
        let best = &f.divergences[members[0]];
        let (domain, rank, shown) = placement(f, best, options);
        let Some(mut severity) = shown else { continue };
        let (code, event) = code::classify(best);
        // Where contraction or re-association made the fast-math build the more accurate, it is information.
        let more_accurate = best
            .result
            .as_ref()
            .and_then(|r| r.reference.as_ref())
            .is_some_and(|r| r.fast_math_more_accurate());
        if matches!(code, Code::Accuracy | Code::SpecialValue) && more_accurate {
            severity = severity.max(Severity::Information);
        }
        let related = message::related(best, code, event, loc);
        let mut finding = Finding {
            code,
            severity,
            rank,
            function: f.name.clone(),
            line: loc.line,
            column: (loc.column > 0).then_some(loc.column),
            message: String::new(),
            cause,
            domain,
            inputs: members.len(),
            best_inputs: message::shown_inputs(f, best),
            related,
            shipped: message::shipped_lines(best, SHIPPED_EVENTS),
            also_in: vec![],
            hover: String::new(),
            fingerprint: String::new(),
            divergences: members,
        };
        finding.message = message::divergence_message(&finding, best, event);
        finding.hover = hover::hover_markdown(report, f, &finding);
        out.push(finding);
    }
    out
}

/// Functions whose runs mostly crashed or timed out (each has a `runs-incomplete` note).
pub fn hardly_compared(report: &FileReport) -> usize {
    report
        .functions
        .iter()
        .filter(|f| f.status != FunctionStatus::Skipped && f.runs.mostly_incomplete())
        .count()
}

/// Whether an analysis left a function without evidence: one that failed, or whose runs mostly did not
/// complete. Front ends must not show such a file as all clear.
pub fn left_unchecked(report: &FileReport) -> usize {
    report.functions.iter().filter(|f| unchecked(f)).count()
}

/// The one decision behind the `runs-incomplete` note and [`left_unchecked`]: a function that failed, or one
/// that was not skipped and whose runs mostly did not complete.
fn unchecked(f: &FunctionReport) -> bool {
    f.status == FunctionStatus::Failed
        || f.status != FunctionStatus::Skipped && f.runs.mostly_incomplete()
}

/// Where a group's best divergence places its finding: where its input lies relative to the declared domain, its
/// rank, and the severity `options` show it with (None: not shown).
fn placement(
    f: &FunctionReport,
    best: &Divergence,
    options: &FindingOptions,
) -> (DomainFit, Rank, Option<Severity>) {
    let declared = !f.domain.is_empty();
    let domain = match (declared, best.in_domain) {
        (false, _) => DomainFit::NotDeclared,
        (true, true) => DomainFit::Inside,
        (true, false) => DomainFit::Outside,
    };
    let extreme = message::is_extreme(f, best);
    let non_finite = message::needs_non_finite(best);
    let (rank, shown) = match domain {
        // A function that tests for NaN or infinity expects them: what fast-math makes of them is a warning.
        _ if non_finite && f.tests_special_values => {
            (Rank::NonFiniteInputs, Some(Severity::Warning))
        }
        _ if non_finite => (
            Rank::NonFiniteInputs,
            options.non_finite_inputs_severity.severity(),
        ),
        DomainFit::Inside if extreme => (
            Rank::ExtremeInputs,
            options.extreme_inputs_severity.severity(),
        ),
        DomainFit::Inside => (Rank::InDomain, Some(Severity::Warning)),
        DomainFit::Outside if extreme => (
            Rank::ExtremeInputs,
            options
                .outside_domain_severity
                .severity()
                .zip(options.extreme_inputs_severity.severity())
                .map(|(a, b)| a.max(b)),
        ),
        DomainFit::Outside => (
            Rank::OutsideDomain,
            options.outside_domain_severity.severity(),
        ),
        DomainFit::NotDeclared if extreme => (
            Rank::ExtremeInputs,
            options.extreme_inputs_severity.severity(),
        ),
        DomainFit::NotDeclared => (Rank::Ordinary, Some(Severity::Warning)),
    };
    (domain, rank, shown)
}

/// One line on what an analysis shows: `5 functions analysed, 2 warnings, 17 other findings, 1 not analysed`.
pub fn summary(report: &FileReport, shown: &[Finding]) -> String {
    let count = |status: FunctionStatus| {
        report
            .functions
            .iter()
            .filter(|f| f.status == status && f.reason != "not selected")
            .count()
    };
    // Partly analysed functions were analysed: the count says how many were cut short.
    let (complete, partly, skipped, failed) = (
        count(FunctionStatus::Analysed),
        count(FunctionStatus::Partial),
        count(FunctionStatus::Skipped),
        count(FunctionStatus::Failed),
    );
    let analysed = complete + partly;
    let hardly = hardly_compared(report);
    let warnings = shown
        .iter()
        .filter(|f| f.severity <= Severity::Warning)
        .count();
    let others = shown.len() - warnings;
    let mut s = format!("{analysed} function{} analysed", message::plural(analysed));
    if partly > 0 {
        s.push_str(&format!(" ({partly} partly)"));
    }
    s.push_str(&format!(
        ", {warnings} warning{}, {others} other finding{}",
        message::plural(warnings),
        message::plural(others)
    ));
    if hardly > 0 {
        s.push_str(&format!(
            ", {hardly} whose runs mostly crashed or timed out"
        ));
    }
    if failed > 0 {
        s.push_str(&format!(", {failed} failed"));
    }
    if skipped > 0 {
        s.push_str(&format!(", {skipped} not analysed"));
    }
    s
}

#[cfg(test)]
mod tests;
