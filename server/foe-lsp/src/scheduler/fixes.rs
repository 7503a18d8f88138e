//! The verification of quick fixes, in the background of a session: the narrowest pragma that removes what a
//! function's warnings show, checked by re-analysing the edited text the way a user would see it (a fix that
//! adds a warning is withheld; one that moves a difference into other functions is widened to them, and then
//! to the whole file).

use super::{blocking, Scheduler, VERIFYING};
use crate::state::{Analysis, Fix, FixCheck};
use foe_analysis::fix;
use foe_analysis::pipeline::{AnalysisError, AnalysisRequest, NoProgress};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

impl Scheduler {
    /// The verdict on the fast-math-off fix that edits `function` in `analysis` as known now: the background check
    /// (started here if it was not) is [`FixCheck::Pending`] until it ends.
    pub fn fix_check(&self, analysis: &Arc<Analysis>, function: &str) -> FixCheck {
        let Some(target) = analysis.fix_target(function) else {
            return FixCheck::Unavailable;
        };
        let Some(edit) = fix::fast_math_off_edit(&analysis.text, &target.span) else {
            return FixCheck::Unavailable;
        };
        let pending = Fix::one(fix::FixScope::FastMath, edit);
        let mut fixes = analysis.fixes.lock().unwrap_or_else(|e| e.into_inner());
        let rx = match fixes.get(function) {
            Some(rx) => rx.clone(),
            None => {
                let (tx, rx) = watch::channel(None);
                fixes.insert(function.to_string(), rx.clone());
                let this = self.clone();
                let (analysis, function) = (analysis.clone(), function.to_string());
                // Counted from here, so that no gap between its scopes' engine runs looks idle.
                VERIFYING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let ticket = self
                    .inner
                    .fix_tickets
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let turn = this.fix_turn(ticket).await;
                    let check = this.verify(&analysis, &function).await;
                    drop(turn);
                    let _ = tx.send(Some(check));
                    VERIFYING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                });
                rx
            }
        };
        let known = rx.borrow().clone();
        known.unwrap_or(FixCheck::Pending(pending))
    }

    /// Waits until the check holding `ticket` may run (every check started before it has ended); the turn passes
    /// on when the returned guard is dropped, also when the check's task ends early.
    async fn fix_turn(&self, ticket: u64) -> FixTurn {
        let mut serving = self.inner.fix_serving.subscribe();
        let _ = serving.wait_for(|&now| now >= ticket).await;
        FixTurn(self.clone())
    }

    /// Like [`Scheduler::fix_check`], waiting at most `patience` for a check that is running.
    pub async fn fix_check_within(
        &self,
        analysis: &Arc<Analysis>,
        function: &str,
        patience: Duration,
    ) -> FixCheck {
        let check = self.fix_check(analysis, function);
        if !matches!(check, FixCheck::Pending(_)) {
            return check;
        }
        let rx = analysis
            .fixes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(function)
            .cloned();
        let Some(mut rx) = rx else { return check };
        let done = match tokio::time::timeout(patience, rx.wait_for(Option::is_some)).await {
            Ok(Ok(done)) => done.clone(),
            _ => None,
        };
        done.unwrap_or(check)
    }

    /// Analyses the edited text and judges the divergences the edit aims at in the functions that ran the
    /// target's code (the target itself, or the callers a helper was inlined into; `fix::judge_target`): the
    /// narrowest pragma first ([`fix::scopes`]), fast-math off when it does not remove them all.
    async fn verify(&self, analysis: &Arc<Analysis>, function: &str) -> FixCheck {
        let Some(target) = analysis.fix_target(function) else {
            return FixCheck::Unavailable;
        };
        let Some(report) = analysis.report() else {
            return FixCheck::Unavailable;
        };
        let mut check = FixCheck::Unavailable;
        for scope in fix::scopes(report, &target) {
            let Some(edit) = fix::pragma_edit(&analysis.text, &target.span, scope) else {
                continue;
            };
            check = self
                .verify_edit(
                    analysis,
                    std::slice::from_ref(&target),
                    Fix::one(scope, edit),
                )
                .await;
            if matches!(check, FixCheck::Verified { .. } | FixCheck::Unavailable) {
                break;
            }
        }
        // Exact in the target, the difference moved into other functions (a caller computing on the helper's
        // result): fast-math off in those too, verified the same way.
        if let FixCheck::Worse { moved_to, .. } = &check {
            if let Some((targets, fix)) = wider_fix(analysis, report, &target, moved_to) {
                let wider = self.verify_edit(analysis, &targets, fix).await;
                if matches!(wider, FixCheck::Verified { .. }) {
                    check = wider;
                }
            }
        }
        // Still a difference or a new warning (a helper a header defines keeps fast-math where it is inlined, or
        // the difference moves further): fast-math off in the whole file, verified the same way. The edit is
        // the same whatever the target, so the second target's check finds every function in the cache.
        if matches!(check, FixCheck::Worse { .. } | FixCheck::Remains { .. }) {
            if let Some(edit) = fix::file_pragma_edit(&analysis.text) {
                let file_fix = Fix {
                    whole_file: true,
                    ..Fix::one(fix::FixScope::FastMath, edit)
                };
                let whole = self
                    .verify_edit(analysis, std::slice::from_ref(&target), file_fix)
                    .await;
                if matches!(whole, FixCheck::Verified { .. }) {
                    check = whole;
                }
            }
        }
        check
    }

    /// Analyses the text `fix` makes (the functions it did not change from the cache) and judges it: the
    /// divergences aimed at in the reporters of `targets` (the functions `fix` edits, its target first), the
    /// warnings added anywhere in the file.
    async fn verify_edit(
        &self,
        analysis: &Arc<Analysis>,
        targets: &[fix::FixTarget],
        fix: Fix,
    ) -> FixCheck {
        let Some(target) = targets.first() else {
            return FixCheck::Unavailable;
        };
        let fixed = fix::apply_edits(&analysis.text, &fix.edits);
        let Ok(_permit) = self.inner.permit.acquire().await else {
            return FixCheck::Unavailable;
        };
        if analysis.cancel.is_cancelled() {
            return FixCheck::Unavailable;
        }
        let (a, engine, cache, edited) = (
            analysis.clone(),
            self.inner.engine.clone(),
            self.inner.state.cache.clone(),
            fixed.clone(),
        );
        // The whole edited text, as a fresh analysis sees it, under the permit: the session's cache gives back
        // every function whose code the edit did not change, so what runs is the edited function's reporters and
        // the callers whose code holds it (a caller computing on a helper's result can gain a warning).
        let result = blocking(move || {
            let request = AnalysisRequest {
                path: &a.path,
                text: &fixed,
                config: a.config.analysis(),
                only_functions: None,
            };
            engine
                .analyse(&request, &*cache, &NoProgress, &a.cancel)
                .map(|report| vec![report])
        })
        .await;
        let unchecked = |why: String| {
            tracing::info!(function = %target.function, "the quick fix could not be verified: {why}");
            FixCheck::Unchecked {
                fix: fix.clone(),
                why,
            }
        };
        match result {
            Ok(Ok(reports)) => {
                // Against what the session shows now, with the same options, in every function of the file.
                let added = fix::added_findings(
                    (&analysis.shown.findings, &analysis.text),
                    (&reports, &edited),
                    analysis.config.findings(),
                );
                self.judge_edit(fix.clone(), targets, &reports, added, unchecked)
            }
            Ok(Err(AnalysisError::Cancelled)) => FixCheck::Unavailable,
            Ok(Err(AnalysisError::Compile { message, .. })) => {
                unchecked(format!("the edited file does not compile: {message}"))
            }
            Ok(Err(e)) => unchecked(e.to_string()),
            Err(panic) => unchecked(format!("the re-analysis crashed: {panic}")),
        }
    }

    /// The verdict on an edit whose re-analysis gave `reports` and `added` new findings: withheld when it adds a
    /// warning, else as [`fix::judge_target`] says of every edited function together.
    fn judge_edit(
        &self,
        fix: Fix,
        targets: &[fix::FixTarget],
        reports: &[foe_analysis::report::FileReport],
        added: fix::Added,
        unchecked: impl Fn(String) -> FixCheck,
    ) -> FixCheck {
        let function = targets.first().map_or("", |t| t.function.as_str());
        if added.warnings > 0 {
            tracing::info!(%function, scope = fix.scope.what(), added = added.warnings,
                "the quick fix would add warnings, not offered: {}", added.examples.join("; "));
            return FixCheck::Worse {
                fix,
                added: added.warnings,
                moved_to: added.in_functions,
            };
        }
        let (mut build_only, mut remaining) = (0, 0);
        for target in targets {
            match fix::judge_target(reports, target) {
                Ok(fix::FixVerdict::Verified { build_only: b }) => build_only += b,
                Ok(fix::FixVerdict::Remains { remaining: r }) => remaining += r,
                Err(why) => return unchecked(why),
            }
        }
        match remaining {
            0 => FixCheck::Verified {
                fix,
                build_only,
                added: added.others,
            },
            remaining => FixCheck::Remains { fix, remaining },
        }
    }
}

/// A fix check's turn ([`Scheduler::fix_turn`]): dropping it lets the next check run.
struct FixTurn(Scheduler);

impl Drop for FixTurn {
    fn drop(&mut self) {
        self.0.inner.fix_serving.send_modify(|now| *now += 1);
    }
}

/// Fast-math off in the target and in `moved_to` (the functions whose bodies hold the warnings the target's own
/// fix would add), with the targets to re-analyse; None when there is nothing other than the target to add, or
/// a body's brace is not found.
fn wider_fix(
    analysis: &Analysis,
    report: &foe_analysis::report::FileReport,
    target: &fix::FixTarget,
    moved_to: &[String],
) -> Option<(Vec<fix::FixTarget>, Fix)> {
    // A function's own target (an inlined helper is re-analysed through the callers that hold it).
    let all = fix::targets(report);
    let others: Vec<fix::FixTarget> = moved_to
        .iter()
        .filter(|f| **f != target.function)
        .filter_map(|f| {
            all.iter()
                .find(|t| t.function == *f)
                .cloned()
                .or_else(|| fix::target(report, f, None))
        })
        .collect();
    if others.is_empty() {
        return None;
    }
    let mut edits = vec![];
    for t in std::iter::once(target).chain(&others) {
        edits.push(fix::fast_math_off_edit(&analysis.text, &t.span)?);
    }
    let fix = Fix {
        scope: fix::FixScope::FastMath,
        edits,
        also: others.iter().map(|t| t.function.clone()).collect(),
        whole_file: false,
    };
    let targets = std::iter::once(target.clone()).chain(others).collect();
    Some((targets, fix))
}
