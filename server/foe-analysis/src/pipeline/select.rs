//! The phase that decides what each function of the file needs: described from P, filtered to the file's own,
//! skipped (not selected, an interface foe cannot drive), settled later through its callers (the fast-math build
//! has no callable copy), taken from the per-function cache, or modelled.

use super::budget::Budget;
use super::cache_key::{cache_key, callee_names, ModuleKeys, SourceRanges};
use super::settle::NoOwnCopy;
use super::{AnalysisRequest, FunctionCache};
use crate::config::AnalysisConfig;
use crate::domain::{self, Domain};
use crate::ir::{self, FunctionInfo};
use crate::report::{FunctionReport, ReasonCode};
use inkwell::module::Module;
use inkwell::values::FunctionValue;

/// A function to model: its index in the file's report, what P says of it, its cache key and declared domain.
pub(super) struct ToModel {
    pub index: usize,
    pub info: FunctionInfo,
    pub key: String,
    /// The lines of the file's functions, which its report's positions are anchored to in the cache.
    pub ranges: std::sync::Arc<SourceRanges>,
    pub domain: Domain,
}

/// What the functions of a file know of each other for taking over solver verdicts: the functions each calls
/// (transitively, in either build), and the verdicts of those taken from the cache.
#[derive(Default)]
pub(super) struct Callees {
    pub of: std::collections::HashMap<String, Vec<String>>,
    pub cached_learned:
        std::collections::HashMap<String, Vec<(String, crate::solve::KnownVerdict)>>,
}

impl Callees {
    /// The functions whose verdicts `name` takes over: those it calls that do not call it in turn, in the order
    /// they were found.
    pub fn sources(&self, name: &str) -> Vec<&str> {
        self.of.get(name).map_or(vec![], |callees| {
            callees
                .iter()
                .filter(|c| {
                    self.of
                        .get(c.as_str())
                        .is_some_and(|theirs| !theirs.iter().any(|t| t == name))
                })
                .map(String::as_str)
                .collect()
        })
    }
}

/// What each function of the file needs, by index in source order.
pub(super) struct Selection {
    /// Functions already settled (skipped, not selected, from the cache); `None` for the others.
    pub reports: Vec<Option<FunctionReport>>,
    pub to_model: Vec<ToModel>,
    /// Functions the fast-math build has no copy of: settled after the others, through the callers holding them.
    pub inlined_away: Vec<(usize, FunctionInfo, NoOwnCopy)>,
    /// The share of the file's budget each function gets.
    pub budget: Budget,
    pub callees: Callees,
}

/// A function foe cannot drive, skipped with the reason in C words.
fn undrivable_report(undrivable: ir::Undrivable) -> FunctionReport {
    let mut r = FunctionReport::skipped(&undrivable.name, undrivable.reason);
    r.span = undrivable.span;
    r.header = undrivable.header;
    r
}

/// A function the request did not ask for (`only_functions`).
fn not_selected(info: FunctionInfo) -> FunctionReport {
    let mut r = FunctionReport::skipped_because(
        &info.signature.name,
        ReasonCode::NotSelected,
        "not selected",
    );
    r.signature = Some(info.signature);
    r.span = info.span;
    r
}

/// The cache's report of the function `key` names, each position moved with the function of the file whose lines
/// held it to where that function lies now (`ranges`), its span to where `info` says the function starts.
fn cached(
    cache: &dyn FunctionCache,
    key: &str,
    info: &FunctionInfo,
    ranges: &SourceRanges,
) -> Option<FunctionReport> {
    let mut hit = cache.get(key)?;
    hit.cached = true;
    let span_delta = match (&info.span, &hit.span) {
        (Some(now), Some(then)) => now.line as i64 - then.line as i64,
        _ => 0,
    };
    let now: Vec<_> = hit
        .line_anchors
        .iter()
        .filter_map(|a| ranges.named(&a.function))
        .collect();
    hit.move_lines(span_delta, &now);
    Some(hit)
}

/// Sorts the functions P defines (less those linked in from other units) into what each needs. Every function
/// gets the same share of the file's budget (see [`Budget`]), fixed before any is looked up in the cache: the
/// functions a full analysis would model are counted first, selected or not.
pub(super) fn select_functions<'ctx>(
    request: &AnalysisRequest<'_>,
    config: &AnalysisConfig,
    (p_module, pp_module, p_ll): (&Module<'ctx>, &Module<'ctx>, &str),
    linked_functions: &std::collections::HashSet<String>,
    cache: &dyn FunctionCache,
) -> Selection {
    let mut described = ir::describe_functions(p_module, p_ll);
    described.retain(|entry| {
        let name = match entry {
            Ok(info) => &info.signature.name,
            Err(undrivable) => &undrivable.name,
        };
        !linked_functions.contains(name)
    });
    let mut selection = Selection {
        reports: vec![None; described.len()],
        to_model: vec![],
        inlined_away: vec![],
        budget: Budget::new(config, 0),
        callees: Callees::default(),
    };
    // First pass: what each function is, without the cache.
    let mut sorted = Vec::new();
    let mut prev_end = 0;
    for (index, entry) in described.into_iter().enumerate() {
        let info = match entry {
            Ok(info) => info,
            Err(undrivable) => {
                selection.reports[index] = Some(undrivable_report(undrivable));
                continue;
            }
        };
        let name = info.signature.name.clone();
        let (decl_line, end_line) = info
            .span
            .as_ref()
            .map(|s| (s.line, s.end_line))
            .unwrap_or((0, 0));
        let (domain, domain_errors) =
            domain::domain_for(request.text, &info.signature, prev_end, decl_line);
        prev_end = end_line.max(prev_end);
        let selected = request
            .only_functions
            .is_none_or(|only| only.contains(&name));
        let Some(pp_function) = pp_module
            .get_function(&name)
            .filter(|f| f.count_basic_blocks() > 0)
        else {
            match selected {
                true => selection
                    .inlined_away
                    .push((index, info, NoOwnCopy::Inlined)),
                false => selection.reports[index] = Some(not_selected(info)),
            }
            continue;
        };
        let Some(p_function) = p_module.get_function(&name) else {
            continue;
        };
        // A static function whose unused return value or argument the optimiser dropped cannot be called with
        // the C signature in P'; its code runs inside its callers' executions.
        if p_function.get_type() != pp_function.get_type() {
            match selected {
                true => selection
                    .inlined_away
                    .push((index, info, NoOwnCopy::SignatureChanged)),
                false => selection.reports[index] = Some(not_selected(info)),
            }
            continue;
        }
        if let Some(err) = domain_errors.first().filter(|_| selected) {
            tracing::warn!(function = %name, line = err.line, "ignored input domain annotation: {}", err.message);
        }
        sorted.push(Sorted {
            index,
            info,
            domain,
            p_function,
            pp_function,
            selected,
        });
    }
    // Second pass: each function modelled by a full analysis has the same share of the file's budget.
    selection.budget = Budget::new(config, sorted.len());
    // What both modules' keys are made of, read once each.
    let ranges = SourceRanges::of(p_module);
    let keys = (
        ModuleKeys::of(p_module, ranges.clone()),
        ModuleKeys::of(pp_module, ranges.clone()),
    );
    for item in sorted {
        let name = item.info.signature.name.clone();
        let mut callees = callee_names(item.p_function, &keys.0);
        let mut listed: std::collections::HashSet<String> = callees.iter().cloned().collect();
        for c in callee_names(item.pp_function, &keys.1) {
            if listed.insert(c.clone()) {
                callees.push(c);
            }
        }
        selection.callees.of.insert(name.clone(), callees);
        let key = cache_key(
            config,
            selection.budget.share_ms(),
            &item.info,
            &item.domain,
            item.p_function,
            item.pp_function,
            &keys.0,
            &keys.1,
        );
        let (index, info, domain) = (item.index, item.info, item.domain);
        let hit = cached(cache, &key, &info, &ranges);
        tracing::debug!(function = %name, hit = hit.is_some(), "cache lookup");
        let hit = hit.map(|mut hit| {
            // What it learned stands for it, also when it is not selected (a fix's check of the functions it
            // changes takes over the verdicts of the functions they call, as a whole analysis does).
            let learned = std::mem::take(&mut hit.learned);
            selection.callees.cached_learned.insert(name, learned);
            hit
        });
        if !item.selected {
            selection.reports[index] = Some(not_selected(info));
            continue;
        }
        if let Some(hit) = hit {
            selection.reports[index] = Some(hit);
            continue;
        }
        selection.to_model.push(ToModel {
            index,
            info,
            key,
            ranges: ranges.clone(),
            domain,
        });
    }
    selection
}

/// A function of the first pass of [`select_functions`], one a full analysis models: with its declared domain,
/// its copies in P and P', and whether the request asked for it.
struct Sorted<'ctx> {
    index: usize,
    info: FunctionInfo,
    domain: Domain,
    p_function: FunctionValue<'ctx>,
    pp_function: FunctionValue<'ctx>,
    selected: bool,
}
