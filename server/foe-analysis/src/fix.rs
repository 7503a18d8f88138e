//! The quick fix that turns fast-math off for one function, as plain text edits (no LSP types), and where it goes:
//! the function whose body holds the flagged operation ([`target`]), which is a helper when the fast-math build
//! inlined it into the analysed function, since the pragmas apply to the operations written in their block.
//!
//! Measured with clang 19: `#pragma float_control(precise, on)` is accepted at the start of a compound
//! statement and restores plain semantics in that block; `precise` turns contraction back on, so
//! `#pragma clang fp contract(off)` follows it. push/pop only works at file scope, `optnone` unoptimises the
//! whole function, and GCC's `optimize("no-fast-math")` is ignored by clang, so pragmas are the fix.
//!
//! Between them goes `#pragma clang fp exceptions(strict)` ([`PRECISE_PRAGMAS`]; accepted in this order under
//! `-ffast-math`, `-O2 -ffast-math` and `-O2 -ffast-math -march=haswell`; `float_control(except, on)` is
//! refused before `precise`, `STDC FENV_ACCESS ON` under fast-math): the block's operations become
//! `llvm.experimental.constrained.*` calls with `round.tonearest`, which `-O2` keeps as written and in source
//! order, and which the model reads as their plain counterparts (`model::Plain`). So what plain `-O2` reorders
//! or vectorises is within the edit's reach too, and [`source_edit_reaches`] leaves out only flush-to-zero.
//! Measured on turbine1 (`foe check`, the fix applied by hand): the original has 23 divergences (17
//! flush-to-zero, 6 re-association); precise + contract(off) leaves 20, of which 2 are exception-order
//! differences of cause optimisation (the vectorised `fdiv` after an `fmul` that `-O2` moved ahead of it);
//! the three pragmas leave 12, all flush-to-zero. `fixtures/trust/pick.c`: 3 before (2 flush-to-zero, 1
//! re-association), 3 flush-to-zero after. `fixtures/editors/helpers.c` with the pragmas in `scale`: nothing
//! left in `scale`; a strictfp helper is no longer inlined into its (non-strict) callers, so `scale` becomes
//! a function of its own in P' and is analysed itself. What is left is flush-to-zero/denormals-are-zero, which
//! `crtfastmath.o` sets for the whole process when linking with `-ffast-math`: no pragma reaches it;
//! [`build_change`] names the link flag that does.

use crate::findings::code::flagged_location;
use crate::report::{Cause, Divergence, FileReport, FunctionReport, FunctionSpan, ReasonCode};

/// The build change that removes a divergence of this cause, for causes no source edit can reach.
pub fn build_change(cause: Cause) -> Option<&'static str> {
    crate::fast_math::option(cause)?.build_change
}

/// Whether the pragmas can remove a divergence of this cause: everything but what the link sets. What `-O2`
/// does without fast-math too (reordering, vectorising) is reached as well, since `exceptions(strict)` keeps the
/// block's operations as written and in order.
pub fn source_edit_reaches(cause: Cause) -> bool {
    build_change(cause).is_none()
}

/// What re-analysing a function after its fast-math-off edit says of the edit, which targets every divergence a
/// source edit can reach ([`source_edit_reaches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixVerdict {
    /// Everything the edit targets is gone; divergences at `build_only` places are left whose cause only a build
    /// change reaches ([`build_change`]).
    Verified { build_only: usize },
    /// Divergences the edit targets are still there, at `remaining` places (those of undetermined cause count:
    /// nothing says a build change would remove them).
    Remains { remaining: usize },
}

/// Judges the edit by the divergences left in the edited function, counted by the places they are flagged at (a
/// site's many diverging inputs are one thing to the user).
pub fn judge(left: &[Divergence]) -> FixVerdict {
    let remaining = places(left.iter().filter(|d| source_edit_reaches(d.cause)));
    if remaining == 0 {
        FixVerdict::Verified {
            build_only: places(left.iter()),
        }
    } else {
        FixVerdict::Remains { remaining }
    }
}

/// How many distinct places (line and column) `divergences` are flagged at.
fn places<'a>(divergences: impl Iterator<Item = &'a Divergence>) -> usize {
    let places: std::collections::BTreeSet<_> = divergences
        .map(|d| d.location.map(|l| (l.line, l.column)))
        .collect();
    places.len()
}

/// Where the fast-math-off edit for flagged operations goes, and which analysed functions ran them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixTarget {
    /// The function whose body gets the pragmas: the one whose span holds the flagged operations (a helper
    /// inlined into its callers, or the analysed function itself).
    pub function: String,
    pub span: FunctionSpan,
    /// The analysed functions that flagged operations in it, the ones to re-analyse on the edited text.
    pub reporters: Vec<String>,
}

/// The target of what the analysed function `function` flagged at `line`: the function of the report with the
/// narrowest span holding the line, else (no line, or a line in no span) `function` itself. None when the chosen
/// function has no span.
pub fn target(report: &FileReport, function: &str, line: Option<u32>) -> Option<FixTarget> {
    let (f, span) = holder(report, function, line)?;
    Some(FixTarget {
        function: f.name.clone(),
        span: span.clone(),
        reporters: vec![function.to_string()],
    })
}

/// The function [`target`] picks, with its span.
fn holder<'r>(
    report: &'r FileReport,
    function: &str,
    line: Option<u32>,
) -> Option<(&'r FunctionReport, &'r FunctionSpan)> {
    let spans = || {
        report
            .functions
            .iter()
            .filter_map(|f| Some((f, f.span.as_ref()?)))
    };
    let inside = line.and_then(|line| {
        spans()
            .filter(|(_, s)| s.line <= line && line <= s.end_line)
            .min_by_key(|(_, s)| s.end_line - s.line)
    });
    inside.or_else(|| spans().find(|(f, _)| f.name == function))
}

/// The line a divergence is flagged at.
fn flagged_line(d: &Divergence) -> Option<u32> {
    flagged_location(d).map(|l| l.line)
}

/// The targets of every divergence a source edit reaches in the functions that ran, one per function to edit (in the order first
/// flagged), each with every analysed function that flagged something in it.
pub fn targets(report: &FileReport) -> Vec<FixTarget> {
    let mut out: Vec<FixTarget> = vec![];
    for f in report.functions.iter().filter(|f| f.status.ran()) {
        // What only a build change removes (flush-to-zero at link) gets no source edit.
        for d in f
            .divergences
            .iter()
            .filter(|d| source_edit_reaches(d.cause))
        {
            let Some(t) = target(report, &f.name, flagged_line(d)) else {
                continue;
            };
            match out.iter_mut().find(|o| o.function == t.function) {
                Some(o) if !o.reporters.contains(&f.name) => o.reporters.push(f.name.clone()),
                Some(_) => {}
                None => out.push(t),
            }
        }
    }
    out
}

/// Judges the edit of `target` by the re-analysis of its reporters on the edited text (`edited`: one report, or
/// one per reporter): only the divergences whose [`target`] in the edited text is the edited function count, and
/// of those, as in [`judge`], the ones a source edit reaches. Err says why it cannot be judged (a reporter was not
/// analysed).
pub fn judge_target(edited: &[FileReport], target: &FixTarget) -> Result<FixVerdict, String> {
    let aimed: Vec<Divergence> = aimed_at(edited, target)?.into_iter().cloned().collect();
    Ok(judge(&aimed))
}

/// What an edit adds: the divergence findings shown (with `options`) in the edited file (every function: the whole
/// edited text is analysed) that were not shown before, compared by code, cause and the flagged line's text (lines move when the
/// pragmas go in, their text does not). Flush-to-zero hints are not counted: the edit cannot cause them, only let
/// them show where the code computes again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Added {
    /// New warnings: a fix that adds any is not offered.
    pub warnings: usize,
    /// New information and hints (often what another flagged operation does once this one is exact): said in
    /// the fix's title.
    pub others: usize,
    /// The first new warnings, for the log (`fast-math-overflow-appears (reassociation) on `x = a * b;``).
    pub examples: Vec<String>,
    /// The functions whose bodies hold the new warnings, in the edited text (where the edit moved the
    /// difference: a wider fix turns fast-math off there too).
    pub in_functions: Vec<String>,
}

pub fn added_findings(
    before: (&[crate::findings::Finding], &str),
    edited: (&[FileReport], &str),
    options: &crate::findings::FindingOptions,
) -> Added {
    use crate::findings::{Finding, Severity};
    use std::collections::BTreeMap;
    type Key = (String, String, String);
    let keys = |shown: &[Finding], text: &str, into: &mut BTreeMap<Key, Severity>| {
        let lines: Vec<&str> = text.lines().collect();
        let shown = shown.iter().filter(|x| x.code.is_divergence()).filter(|x| {
            x.severity <= Severity::Warning
                || x.cause.as_ref().is_none_or(|c| c.build_change.is_none())
        });
        for x in shown {
            let line = lines.get(x.line as usize - 1).map_or("", |l| l.trim());
            let cause = x.cause.as_ref().map(|c| c.id.clone()).unwrap_or_default();
            let key = (x.code.as_string(), cause, line.to_string());
            let severity = into.entry(key).or_insert(x.severity);
            *severity = (*severity).min(x.severity);
        }
    };
    let mut was = BTreeMap::new();
    keys(before.0, before.1, &mut was);
    let mut now = BTreeMap::new();
    // Which function's body holds each finding's line, by its key.
    let mut held: BTreeMap<Key, String> = BTreeMap::new();
    for report in edited.0 {
        let shown = crate::findings::findings(report, edited.1, options);
        keys(&shown, edited.1, &mut now);
        let lines: Vec<&str> = edited.1.lines().collect();
        for x in &shown {
            let line = lines.get(x.line as usize - 1).map_or("", |l| l.trim());
            let cause = x.cause.as_ref().map(|c| c.id.clone()).unwrap_or_default();
            if let Some((h, _)) = holder(report, &x.function, Some(x.line)) {
                held.entry((x.code.as_string(), cause, line.to_string()))
                    .or_insert_with(|| h.name.clone());
            }
        }
    }
    let mut added = Added::default();
    for (key, severity) in now {
        match was.get(&key) {
            Some(_) => {}
            None if severity <= Severity::Warning => {
                added.warnings += 1;
                if let Some(h) = held.get(&key).filter(|h| !added.in_functions.contains(h)) {
                    added.in_functions.push(h.clone());
                }
                if added.examples.len() < 3 {
                    let (code, cause, line) = key;
                    added.examples.push(format!("{code} ({cause}) on `{line}`"));
                }
            }
            None => added.others += 1,
        }
    }
    added
}

/// The divergences of `target`'s reporters in `reports` that an edit of the target's body aims at (those whose
/// [`target`] is that function); Err when a reporter did not run.
fn aimed_at<'r>(
    reports: &'r [FileReport],
    target: &FixTarget,
) -> Result<Vec<&'r Divergence>, String> {
    let mut aimed = vec![];
    for name in &target.reporters {
        let ran = reports.iter().find_map(|r| {
            let f = r
                .functions
                .iter()
                .find(|f| f.name == *name && f.status.ran())?;
            Some((r, f))
        });
        let Some((report, f)) = ran else {
            // Why it did not run, from the run that selected it.
            let found = reports
                .iter()
                .flat_map(|r| &r.functions)
                .filter(|f| f.name == *name)
                .min_by_key(|f| f.reason_codes.contains(&ReasonCode::NotSelected));
            return Err(match found {
                Some(f) => format!("`{name}` was skipped on the edited text: {}", f.reason),
                None => format!("`{name}` was not found in the edited text"),
            });
        };
        aimed.extend(f.divergences.iter().filter(|d| {
            holder(report, name, flagged_line(d)).is_some_and(|(h, _)| h.name == target.function)
        }));
    }
    Ok(aimed)
}

/// What a quick fix turns off in a function's body: one fast-math option where one cause explains everything the
/// edit aims at, else fast-math as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FixScope {
    Reassociation,
    Contraction,
    FastMath,
}

impl FixScope {
    /// The pragmas that open the body (clang 19 accepts each at the start of a compound statement).
    pub fn pragmas(self) -> &'static [&'static str] {
        match self.option().and_then(|o| o.pragma.as_ref()) {
            Some(pragma) => std::slice::from_ref(pragma),
            None => &PRECISE_PRAGMAS,
        }
    }

    /// What the fix's title says it turns off: `re-association`, `contraction`, `fast-math`.
    pub fn what(self) -> &'static str {
        self.option().map_or("fast-math", |o| o.what)
    }

    /// The option's row in [`crate::fast_math::OPTIONS`] for a one-option scope.
    fn option(self) -> Option<&'static crate::fast_math::FastMathOption> {
        match self {
            FixScope::Reassociation => crate::fast_math::option(Cause::Reassociation),
            FixScope::Contraction => crate::fast_math::option(Cause::Contraction),
            FixScope::FastMath => None,
        }
    }

    fn narrowest_for(cause: Cause) -> Option<FixScope> {
        match cause {
            Cause::Reassociation => Some(FixScope::Reassociation),
            Cause::Contraction => Some(FixScope::Contraction),
            _ => None,
        }
    }
}

/// The fixes to try for `target` in `report`, narrowest first: the one pragma of the single cause every
/// divergence the edit can reach has (re-association or contraction), then fast-math off, which is always last.
pub fn scopes(report: &FileReport, target: &FixTarget) -> Vec<FixScope> {
    let reports = std::slice::from_ref(report);
    let causes: std::collections::BTreeSet<FixScope> = match aimed_at(reports, target) {
        Ok(aimed) => aimed
            .iter()
            .filter(|d| source_edit_reaches(d.cause))
            .map(|d| FixScope::narrowest_for(d.cause).unwrap_or(FixScope::FastMath))
            .collect(),
        Err(_) => Default::default(),
    };
    let mut out: Vec<FixScope> = match causes.iter().collect::<Vec<_>>().as_slice() {
        [only] if **only != FixScope::FastMath => vec![**only],
        _ => vec![],
    };
    out.push(FixScope::FastMath);
    out
}

/// Inserts `text` before the byte at (line, column), both 1-based; column counts bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceEdit {
    pub line: u32,
    pub column: u32,
    pub text: String,
}

/// The pragmas that restore plain floating-point semantics in a block and keep its operations' exceptions:
/// `precise` first (the others are refused or undone without it), `contract(off)` last (`precise` turns
/// contraction back on).
pub const PRECISE_PRAGMAS: [&str; 3] = [
    "#pragma float_control(precise, on)",
    "#pragma clang fp exceptions(strict)",
    "#pragma clang fp contract(off)",
];

/// The edit that puts [`PRECISE_PRAGMAS`] at the start of the function's body, or None when the body's
/// opening brace cannot be found from the debug info's lines.
pub fn fast_math_off_edit(text: &str, span: &FunctionSpan) -> Option<SourceEdit> {
    pragma_edit(text, span, FixScope::FastMath)
}

/// The edit that puts `scope`'s pragmas at the start of the function's body, or None when the body's opening
/// brace cannot be found from the debug info's lines or the pragmas are already there.
pub fn pragma_edit(text: &str, span: &FunctionSpan, scope: FixScope) -> Option<SourceEdit> {
    let lines: Vec<&str> = text.split('\n').collect();
    // The brace is on the scope line in clang's debug info; allow it to sit a few lines later (K&R styles).
    let first = span.line.min(span.body_line).max(1) as usize;
    for line_no in first..=(span.body_line as usize + 3).min(lines.len()) {
        let line = lines[line_no - 1];
        let Some(col) = line.find('{') else { continue };
        if line_no < span.body_line as usize && !line[col + 1..].trim().is_empty() {
            continue;
        }
        let pragma = |p: &str| p.trim_start_matches("#pragma ").to_string();
        let already = lines
            .get(line_no)
            .is_some_and(|next| next.contains(&pragma(scope.pragmas()[0])));
        if already {
            return None;
        }
        let indent: String = lines
            .get(line_no)
            .map(|next| next.chars().take_while(|c| c.is_whitespace()).collect())
            .filter(|s: &String| !s.is_empty())
            .unwrap_or_else(|| "  ".into());
        let rest_is_blank = line[col + 1..].trim().is_empty();
        let mut insert = String::new();
        for pragma in scope.pragmas() {
            insert.push('\n');
            insert.push_str(&indent);
            insert.push_str(pragma);
        }
        if !rest_is_blank {
            insert.push('\n');
            insert.push_str(&indent);
        }
        return Some(SourceEdit {
            line: line_no as u32,
            column: col as u32 + 2,
            text: insert,
        });
    }
    None
}

/// The edit that puts [`PRECISE_PRAGMAS`] at file scope, on their own lines before the file's first line of code
/// or directive (after its leading comments: a licence stays first), so that they reach every function of the
/// file and every function its headers define (clang 19 accepts all three at file scope, and a header included
/// after them compiles under them). None when they are already there.
pub fn file_pragma_edit(text: &str) -> Option<SourceEdit> {
    if text.contains(PRECISE_PRAGMAS[0]) && text.contains(PRECISE_PRAGMAS[2]) {
        let first = text.find(PRECISE_PRAGMAS[0])?;
        let before = &text[..first];
        // Already at file scope: nothing but comments and blank lines above it.
        first_code_line(before)?;
    }
    let line = first_code_line(text).unwrap_or(1);
    let mut insert: String = PRECISE_PRAGMAS.iter().map(|p| format!("{p}\n")).collect();
    insert.push('\n');
    Some(SourceEdit {
        line,
        column: 1,
        text: insert,
    })
}

/// The 1-based number of the first line of `text` that holds something other than comments and blanks.
fn first_code_line(text: &str) -> Option<u32> {
    let mut in_block = false;
    for (i, line) in text.split('\n').enumerate() {
        let mut rest = line.trim();
        loop {
            if in_block {
                match rest.find("*/") {
                    Some(end) => {
                        rest = rest[end + 2..].trim_start();
                        in_block = false;
                    }
                    None => break,
                }
            } else if let Some(after) = rest.strip_prefix("/*") {
                rest = after;
                in_block = true;
            } else if rest.is_empty() || rest.starts_with("//") {
                break;
            } else {
                return Some(i as u32 + 1);
            }
        }
    }
    None
}

/// Applies edits (given against the original text) to `text`.
pub fn apply_edits(text: &str, edits: &[SourceEdit]) -> String {
    let mut offsets: Vec<(usize, &str)> = edits
        .iter()
        .filter_map(|e| byte_offset(text, e.line, e.column).map(|o| (o, e.text.as_str())))
        .collect();
    offsets.sort_by_key(|o| std::cmp::Reverse(o.0));
    let mut out = text.to_string();
    for (offset, insert) in offsets {
        out.insert_str(offset, insert);
    }
    out
}

/// The byte offset of a 1-based (line, column).
pub fn byte_offset(text: &str, line: u32, column: u32) -> Option<usize> {
    let mut offset = 0;
    for (i, l) in text.split('\n').enumerate() {
        if i + 1 == line as usize {
            let col = (column.max(1) - 1) as usize;
            return (col <= l.len()).then_some(offset + col);
        }
        offset += l.len() + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::FunctionStatus;
    use crate::types::SourceLoc;

    #[test]
    fn the_file_s_pragmas_go_after_its_leading_comments_once() {
        let text = "/* licence\n * text */\n\n// more\n#include <math.h>\ndouble f(double x) { return x; }\n";
        let edit = file_pragma_edit(text).unwrap();
        assert_eq!((edit.line, edit.column), (5, 1));
        let fixed = apply_edits(text, &[edit]);
        assert!(fixed.starts_with(
            "/* licence\n * text */\n\n// more\n#pragma float_control(precise, on)\n"
        ));
        assert!(fixed.contains("#pragma clang fp contract(off)\n\n#include <math.h>"));
        assert_eq!(file_pragma_edit(&fixed), None);
        // A body's pragmas are not the file's.
        let in_body = "double f(double x) {\n#pragma float_control(precise, on)\n#pragma clang fp contract(off)\n  return x;\n}\n";
        assert_eq!(file_pragma_edit(in_body).map(|e| e.line), Some(1));
        assert_eq!(first_code_line("/* a */ int x;"), Some(1));
        assert_eq!(first_code_line("// only\n/* comments\n*/\n"), None);
    }

    fn span(line: u32, end_line: u32) -> FunctionSpan {
        FunctionSpan {
            line,
            body_line: line,
            end_line,
        }
    }

    fn div(line: u32, cause: Cause) -> Divergence {
        Divergence {
            location: Some(SourceLoc { line, column: 3 }),
            cause,
            ..Divergence::default()
        }
    }

    fn function(
        name: &str,
        status: FunctionStatus,
        span: FunctionSpan,
        divergences: Vec<Divergence>,
    ) -> FunctionReport {
        FunctionReport {
            status,
            span: Some(span),
            divergences,
            ..FunctionReport::skipped(name, "")
        }
    }

    fn report(functions: Vec<FunctionReport>) -> FileReport {
        FileReport {
            file: "helpers.c".into(),
            functions,
            timings_ms: Default::default(),
            flags_p: vec![],
            flags_p_prime: vec![],
            ftz_p_prime: false,
            linked_units: vec![],
            dropped_flags: vec![],
            first_look: false,
        }
    }

    /// `sq` (lines 3-5) is inlined into `f` and `g`, `half` (7-9) into `g`; `g` (15-17) also diverges itself.
    fn helpers(sq_end: u32, f_divs: Vec<Divergence>, g_divs: Vec<Divergence>) -> FileReport {
        use FunctionStatus::*;
        let shift = sq_end - 5;
        report(vec![
            function("sq", ThroughCallers, span(3, sq_end), vec![]),
            function("half", ThroughCallers, span(7 + shift, 9 + shift), vec![]),
            function("f", Analysed, span(11 + shift, 13 + shift), f_divs),
            function("g", Analysed, span(15 + shift, 17 + shift), g_divs),
        ])
    }

    #[test]
    fn the_fix_targets_the_helper_whose_body_holds_the_flagged_operation() {
        use Cause::*;
        let r = helpers(
            5,
            vec![div(4, Reassociation)],
            vec![
                div(8, Reassociation),
                div(4, Reassociation),
                div(16, Contraction),
            ],
        );
        let t = target(&r, "f", Some(4)).unwrap();
        assert_eq!((t.function.as_str(), t.span.clone()), ("sq", span(3, 5)));
        assert_eq!(target(&r, "g", Some(16)).unwrap().function, "g");
        // No line, or one in no span: the analysed function itself.
        assert_eq!(target(&r, "g", None).unwrap().function, "g");
        assert_eq!(target(&r, "f", Some(40)).unwrap().function, "f");

        let all: Vec<(String, Vec<String>)> = targets(&r)
            .into_iter()
            .map(|t| (t.function, t.reporters))
            .collect();
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            all,
            vec![
                ("sq".into(), names(&["f", "g"])),
                ("half".into(), names(&["g"])),
                ("g".into(), names(&["g"])),
            ]
        );
    }

    #[test]
    fn the_fix_is_judged_by_what_it_aims_at_in_the_edited_text() {
        use Cause::*;
        let sq = targets(&helpers(
            5,
            vec![div(4, Reassociation)],
            vec![div(4, Reassociation), div(8, Reassociation)],
        ))
        .into_iter()
        .find(|t| t.function == "sq")
        .unwrap();
        // The pragmas moved everything after sq's body down two lines: what is left lies in `half` and `g`.
        let gone = helpers(
            7,
            vec![],
            vec![div(10, Reassociation), div(18, Contraction)],
        );
        assert_eq!(
            judge_target(&[gone], &sq),
            Ok(FixVerdict::Verified { build_only: 0 })
        );
        // In sq's edited body: one the edit should have removed, one only the link reaches.
        let left = helpers(7, vec![div(6, Reassociation)], vec![div(6, FlushToZero)]);
        assert_eq!(
            judge_target(&[left], &sq),
            Ok(FixVerdict::Remains { remaining: 1 })
        );
        let ftz = helpers(7, vec![], vec![div(6, FlushToZero)]);
        assert_eq!(
            judge_target(&[ftz], &sq),
            Ok(FixVerdict::Verified { build_only: 1 })
        );
        // Each reporter may come from a report of its own (`only_functions`); one that did not run is no verdict.
        let mut only_f = helpers(7, vec![], vec![]);
        only_f.functions[3] = FunctionReport::skipped("g", "not selected");
        let only_g = helpers(7, vec![], vec![]);
        assert_eq!(
            judge_target(&[only_f.clone(), only_g], &sq),
            Ok(FixVerdict::Verified { build_only: 0 })
        );
        assert!(judge_target(&[only_f], &sq)
            .unwrap_err()
            .contains("`g` was skipped"));
    }

    #[test]
    fn the_narrowest_pragma_is_tried_first_when_one_cause_explains_the_body() {
        use Cause::{Contraction, FiniteMath, FlushToZero, Reassociation, Reciprocal};
        let scopes_of = |sq: Vec<Cause>| {
            let f_divs = sq.into_iter().map(|c| div(4, c)).collect();
            let r = helpers(5, f_divs, vec![div(16, Reciprocal)]);
            let t = target(&r, "f", Some(4)).unwrap();
            scopes(&r, &t)
        };
        let (re, con, all) = (
            FixScope::Reassociation,
            FixScope::Contraction,
            FixScope::FastMath,
        );
        assert_eq!(scopes_of(vec![Reassociation]), [re, all]);
        // Flush-to-zero, which no edit reaches, does not widen the fix.
        assert_eq!(scopes_of(vec![Contraction, FlushToZero]), [con, all]);
        assert_eq!(scopes_of(vec![Reassociation, Contraction]), [all]);
        assert_eq!(scopes_of(vec![FiniteMath]), [all]);
        let src = "double f(double x) {\n  return x * 4.0 / 4.0;\n}\n";
        let edit = pragma_edit(src, &span(1, 3), re).unwrap();
        let fixed = apply_edits(src, std::slice::from_ref(&edit));
        assert_eq!(
            fixed,
            "double f(double x) {\n  #pragma clang fp reassociate(off)\n  return x * 4.0 / 4.0;\n}\n"
        );
        assert_eq!(pragma_edit(&fixed, &span(1, 4), re), None, "already there");
    }

    #[test]
    fn inserts_after_the_opening_brace() {
        let src = "double f(double x) {\n    return 2*x*0.5;\n}\n";
        let edit = fast_math_off_edit(
            src,
            &FunctionSpan {
                line: 1,
                body_line: 1,
                end_line: 2,
            },
        )
        .unwrap();
        let fixed = apply_edits(src, &[edit]);
        assert_eq!(
            fixed,
            "double f(double x) {\n    #pragma float_control(precise, on)\n    #pragma clang fp exceptions(strict)\n    #pragma clang fp contract(off)\n    return 2*x*0.5;\n}\n"
        );
        assert!(fast_math_off_edit(
            &fixed,
            &FunctionSpan {
                line: 1,
                body_line: 1,
                end_line: 4
            }
        )
        .is_none());
    }

    #[test]
    fn splits_one_line_bodies() {
        let src = "double f(double x) { return x; }\n";
        let edit = fast_math_off_edit(
            src,
            &FunctionSpan {
                line: 1,
                body_line: 1,
                end_line: 1,
            },
        )
        .unwrap();
        let fixed = apply_edits(src, &[edit]);
        assert!(fixed.contains("{\n  #pragma float_control(precise, on)\n  #pragma clang fp exceptions(strict)\n  #pragma clang fp contract(off)\n   return x; }"), "{fixed}");
    }

    #[test]
    fn a_fix_is_held_to_what_it_adds_on_the_reporters_lines() {
        use crate::findings::FindingOptions;
        let text =
            "double f(double x) {\n  double a = x * 2;\n  double b = a + 1;\n  return b;\n}\n";
        let before = report(vec![function(
            "f",
            FunctionStatus::Analysed,
            span(1, 5),
            vec![div(2, Cause::Reassociation)],
        )]);
        // The pragma line moves everything down by one: the same finding on the same text is not new.
        let edited = "double f(double x) {\n#pragma clang fp reassociate(off)\n  double a = x * 2;\n  double b = a + 1;\n  return b;\n}\n";
        let same = report(vec![function(
            "f",
            FunctionStatus::Analysed,
            span(1, 6),
            vec![div(3, Cause::Reassociation)],
        )]);
        let options = FindingOptions::default();
        let shown = crate::findings::findings(&before, text, &options);
        let added = |after: &FileReport| {
            added_findings(
                (&shown, text),
                (std::slice::from_ref(after), edited),
                &options,
            )
        };
        assert_eq!(added(&same), Added::default());
        // A finding on another line is a new warning.
        let worse = report(vec![function(
            "f",
            FunctionStatus::Analysed,
            span(1, 6),
            vec![div(3, Cause::Reassociation), div(4, Cause::Contraction)],
        )]);
        assert_eq!(added(&worse).warnings, 1);
    }
}
