//! What the pipeline decides about a function from what happened to it: its reason notes, whether an
//! exception is possible at all, and the status of helpers without a callable fast-math copy (analysed through
//! their callers).

use super::Pending;
use crate::ir::FunctionInfo;
use crate::report::{FunctionReport, FunctionStatus, Note, ReasonCode};
use crate::solve;
use std::collections::BTreeMap;

/// `paths not followed further: a call to `gsl_error` (2), ...`: where the model ended paths early, most frequent first.
pub(super) fn path_stops_note(stops: &BTreeMap<String, usize>) -> String {
    let mut by_count: Vec<(&String, &usize)> = stops.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let list: Vec<String> = by_count
        .iter()
        .map(|(reason, n)| format!("{reason} ({n})"))
        .collect();
    format!("paths not followed further: {}", list.join(", "))
}

/// Whether the solver showed that neither build raises an exception on any input: no exception condition, or
/// every one unsatisfiable (none given up on).
pub(super) fn no_exception_possible(item: &Pending, solved: &solve::child::Solution) -> bool {
    let solver_failed = item
        .notes
        .iter()
        .any(|note| note.code == Some(ReasonCode::SolverFailed));
    (item.queries.p.is_empty() && item.queries.pp.is_empty())
        || (!solver_failed && solved.satisfiable == 0 && solved.timeouts == 0)
}

/// Why a function of P has no copy in P' that foe can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NoOwnCopy {
    /// Inlined into every caller and removed.
    Inlined,
    /// Its copy's signature differs (an unused return value or argument dropped by the optimiser).
    SignatureChanged,
}

/// Settles the functions the fast-math build has no copy of: `inlined` through the analysed functions that run
/// their code (P' holds it inlined, P calls it), else skipped with the callers named.
pub(super) fn settle_inlined(
    reports: &mut [Option<FunctionReport>],
    inlined_away: Vec<(usize, FunctionInfo, NoOwnCopy)>,
    p_ll: &str,
    pp_ll: &str,
) {
    if inlined_away.is_empty() {
        return;
    }
    let mut holders = crate::inlining::inlined_helpers(pp_ll);
    for ll in [p_ll, pp_ll] {
        let calls = crate::inlining::direct_callers(ll);
        for (callee, callers) in calls.into_iter().chain(crate::inlining::table_callers(ll)) {
            holders.entry(callee).or_default().extend(callers);
        }
    }
    let ran: BTreeMap<String, bool> = reports
        .iter()
        .flatten()
        .map(|r| (r.name.clone(), r.status.ran()))
        .collect();
    for (index, info, why) in inlined_away {
        let name = &info.signature.name;
        let what = match why {
            NoOwnCopy::Inlined => "the fast-math build inlined it into its callers",
            NoOwnCopy::SignatureChanged => {
                "the fast-math build changed its signature (an unused return value or argument dropped)"
            }
        };
        let callers: Vec<String> = holders
            .get(name)
            .map(|c| c.iter().cloned().collect())
            .unwrap_or_default();
        let through: Vec<String> = callers
            .iter()
            .filter(|c| ran.get(*c).copied().unwrap_or(false))
            .cloned()
            .collect();
        let mut r = if !through.is_empty() {
            let mut r = FunctionReport::skipped(
                name,
                format!("{what}; analysed through {}", quoted_list(&through)),
            );
            r.status = FunctionStatus::ThroughCallers;
            r.through = through;
            r
        } else if callers.is_empty() {
            FunctionReport::skipped_because(
                name,
                ReasonCode::NoFastMathCopy,
                format!("{what}, and no function holds its code (unused, or folded away)"),
            )
        } else {
            FunctionReport::skipped_because(
                name,
                ReasonCode::NoFastMathCopy,
                format!("{what}: {}, which were not analysed", quoted_list(&callers)),
            )
        };
        r.signature = Some(info.signature.clone());
        r.span = info.span.clone();
        reports[index] = Some(r);
    }
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report of an analysed function before its search results are added; its status is settled after the
/// search ([`FunctionReport::settle_status`]).
pub(super) fn base_report(
    item: &Pending,
    solved: &solve::child::Solution,
    limit_ms: u64,
) -> FunctionReport {
    let timeouts = solved.timeouts;
    let mut r = FunctionReport::skipped(&item.info.signature.name, "");
    r.status = FunctionStatus::Failed;
    r.formulae = solved.formulae.clone();
    r.satisfiable = solved.satisfiable;
    r.candidates = solved.candidates.len();
    r.solver_timeouts = timeouts;
    for note in &item.notes {
        r.add(note);
    }
    if timeouts > 0 {
        let note = format!(
            "{timeouts} solver queries gave up (the {limit_ms} ms limit or a degree bound)"
        );
        r.note(ReasonCode::SolverTimeouts, &note);
    }
    if solved.known > 0 {
        // A note, not a cut: the same formulae were solved for a function it calls.
        let note = format!(
            "{} solver verdicts taken over from the functions it calls (the same formulae)",
            solved.known
        );
        r.add(&Note::remark(note));
    }
    if solved.capped > 0 {
        let note = format!(
            "{} solver queries not tried: {} paths of the same operation gave no input",
            solved.capped,
            solve::PATHS_PER_SITE
        );
        r.note(ReasonCode::PathsCapped, &note);
    }
    r.signature = Some(item.info.signature.clone());
    r.span = item.info.span.clone();
    r.domain = item.domain.text.clone();
    r.tests_special_values = item.info.tests_special_values;
    r
}

/// Names the direct callers of each `static` function in its report (from the plain build, which inlines
/// nothing), keeping only callers whose own analysis ran: they are the ones whose inputs tell what reaches it.
pub(super) fn note_static_callers(reports: &mut [Option<FunctionReport>], p_ll: &str) {
    let callers = crate::inlining::static_callers(p_ll);
    let ran: BTreeMap<String, bool> = reports
        .iter()
        .flatten()
        .map(|r| (r.name.clone(), r.status.ran()))
        .collect();
    for r in reports.iter_mut().flatten() {
        if let Some(of) = callers.get(&r.name) {
            r.static_callers = of
                .iter()
                .filter(|c| ran.get(*c).copied().unwrap_or(false))
                .cloned()
                .collect();
        }
    }
}
