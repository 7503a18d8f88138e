//! Inputs the instrumented builds agree on, run again on the binaries clang ships.
//!
//! The instrumented P' checks the flags after every operation, so the code generator cannot fuse what the
//! shipped code generation fuses: x86's reciprocal square-root estimate (`1/sqrtf(x)` becomes `rsqrtss` and a
//! Newton step, which returns NaN at infinity and infinity at a flushed subnormal) never appears in it. The
//! special inputs and the solver candidates on which both instrumented builds returned the same thing are run on
//! the shipped P and P'; where those differ (exception sets, outputs by [`results::compare`], or where each
//! ends: [`results::endings_differ`]) the input is a
//! divergence of its own, built from the shipped runs. [`super::confirm_function`] then confirms it and finds
//! its cause like any other.

use super::{Harness, Probe, ShippedEnd, ShippedRun};
use crate::accuracy::PathOutputs;
use crate::domain::Domain;
use crate::exec::Runner;
use crate::model::PathEnd;

use crate::report::{Divergence, DivergenceClass, RunEnd, TraceEvent};
use crate::scalar::{Scalar, ValueClass};
use crate::search::{self, results};
use crate::types::{Build, FunctionSignature, Input, SourceLoc};
use std::collections::HashMap;

/// Inputs run on the shipped binaries per function, at most.
const MAX_INPUTS: usize = 640;

/// Inputs run at once on each binary.
const SLICE: usize = 128;

/// Divergences kept per (class, location): the findings layer shows one input and counts the rest.
const PER_PLACE: usize = 4;

/// What the sweep needs beside the binaries: the instrumented runner (output layouts, site locations), the
/// function, its declared domain, the accuracy threshold and P's real-number path outputs.
pub struct Sweep<'a> {
    pub runner: &'a mut Runner,
    pub sig: &'a FunctionSignature,
    pub domain: Option<&'a Domain>,
    pub accuracy_bits: u32,
    pub paths: &'a [PathOutputs],
    /// What the search left of the function's work budget (the sweep stops between slices; each shipped run
    /// costs [`search::work::SHIPPED_RUN_NS`]).
    pub budget: Option<search::SearchBudget>,
}

/// The divergences the shipped binaries show on `agreed` (inputs the instrumented builds agree on), empty when
/// the binaries cannot be built or run; and the work the sweep did ([`search::work`]).
pub fn shipped_only(
    harness: &mut Harness,
    agreed: &[Input],
    cx: Sweep<'_>,
) -> (Vec<Divergence>, u64) {
    let inputs = &agreed[..agreed.len().min(MAX_INPUTS)];
    if inputs.is_empty() {
        return (vec![], 0);
    }
    let _span = tracing::debug_span!("shipped sweep", function = %cx.sig.name).entered();
    harness.prepare(&[Probe::Reference, Probe::Shipped]);
    // In slices, so that runs that hang (each costing the execution time limit) or the function's work budget
    // stop the sweep after a slice rather than after hundreds of inputs.
    let (mut p, mut pp) = (vec![], vec![]);
    let mut timed_out = 0;
    let mut work_ns = 0u64;
    let started = std::time::Instant::now();
    for slice in inputs.chunks(SLICE) {
        if timed_out >= crate::search::MAX_TIMEOUTS
            || cx.budget.is_some_and(|b| b.exhausted(work_ns))
        {
            break;
        }
        work_ns += 2 * slice.len() as u64 * search::work::SHIPPED_RUN_NS;
        match (
            harness.run(Probe::Reference, &cx.sig.name, slice),
            harness.run(Probe::Shipped, &cx.sig.name, slice),
        ) {
            (Ok(a), Ok(b)) => {
                timed_out += a
                    .iter()
                    .chain(&b)
                    .filter(|r| r.end == ShippedEnd::TimedOut)
                    .count();
                p.extend(a);
                pp.extend(b);
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::debug!(%e, "shipped sweep not run");
                return (vec![], work_ns);
            }
        }
    }
    let mut kept: Vec<Divergence> = vec![];
    let mut at_place: HashMap<(DivergenceClass, Option<SourceLoc>), usize> = HashMap::new();
    for ((input, rp), rpp) in inputs.iter().zip(&p).zip(&pp) {
        let Some(d) = divergence(&cx, input, rp, rpp) else {
            continue;
        };
        let n = at_place.entry((d.class, d.location)).or_default();
        *n += 1;
        if *n <= PER_PLACE {
            kept.push(d);
        }
    }
    for d in &mut kept {
        let Some(input) = search::input_of_named(cx.sig, &d.inputs) else {
            continue;
        };
        // The real-number result, for the divergences kept only (MPFR).
        if let Some(r) = d.result.as_mut() {
            r.reference = Some(results::reference(r, &d.end_p, cx.paths, cx.sig, &input));
        }
        // The location of a result-only difference: where the plain build stores the output that differs, else
        // the last operation the instrumented P' runs on that input.
        if d.location.is_none() {
            d.location = stored_at(d, cx.paths)
                .or_else(|| computed_at(cx.runner, cx.sig, &input, d))
                .or_else(|| last_operation(cx.runner, cx.sig, &input));
        }
    }
    tracing::debug!(
        inputs = p.len(),
        found = kept.len(),
        work_ms = work_ns / 1_000_000,
        wall_ms = started.elapsed().as_millis() as u64,
        "shipped sweep"
    );
    (kept, work_ns)
}

/// The divergence two shipped runs that both returned show on `input`: exception sets that differ, else outputs
/// that differ in category or accuracy; `None` when they agree.
fn divergence(
    cx: &Sweep<'_>,
    input: &Input,
    rp: &ShippedRun,
    rpp: &ShippedRun,
) -> Option<Divergence> {
    let (ShippedEnd::Raised(a), ShippedEnd::Raised(b)) = (rp.end, rpp.end) else {
        return ending(cx, input, rp, rpp);
    };
    let (end_p, end_pp) = cx.runner.returned_pair(
        cx.sig,
        input,
        (rp.produced.result, rpp.produced.result),
        &rp.produced.outputs,
        &rpp.produced.outputs,
    );
    let result = results::compare(&end_p, &end_pp, cx.accuracy_bits);
    let complete = rp.dropped == 0 && rpp.dropped == 0;
    // The kinds decide (placing the events changes no kind); only a divergence is placed.
    let exception = (a != b && complete)
        .then(|| search::compare_traces(&rp.trace, &rpp.trace))
        .flatten()
        .filter(|(_, class)| *class == DivergenceClass::Appears);
    let (first, class) = match (exception, &result) {
        (Some(e), _) => e,
        (None, Some(r)) => (0, r.class),
        (None, None) => return None,
    };
    let (trace_p, trace_pp) = (
        placed(cx, &rp.trace, Build::P),
        placed(cx, &rpp.trace, Build::PPrime),
    );
    let (summary, location) = search::explain(&trace_p, &trace_pp, first, class);
    let mut d = Divergence {
        inputs: search::named_inputs(cx.sig, input),
        trace_p,
        trace_p_prime: trace_pp,
        first_divergence: first,
        class,
        end_p,
        end_p_prime: end_pp,
        result,
        in_domain: cx.domain.is_none_or(|d| d.contains(input)),
        // An event the debug info placed on a line without an operation of the function (code the generator
        // made, such as the estimate's Newton step, often keeps the declaration's line) is flagged as a result is.
        location: location.filter(|at| class.is_exception() && has_operation(cx, at.line)),
        summary,
        // Solver candidates are counted where the instrumented builds found them (Table III).
        candidates: 0,
        shipped_only: true,
        ..Divergence::default()
    };
    if !class.is_exception() {
        d.summary = search::result_summary(&d);
    }
    Some(d)
}

/// The divergence of two shipped runs that end differently: one stops at a call foe does not run (an error
/// handler) where the other returns, or they stop at different calls ([`DivergenceClass::Ending`]).
fn ending(cx: &Sweep<'_>, input: &Input, rp: &ShippedRun, rpp: &ShippedRun) -> Option<Divergence> {
    let (end_p, end_pp) = (
        ending_of(cx.runner, cx.sig, rp, Build::P)?,
        ending_of(cx.runner, cx.sig, rpp, Build::PPrime)?,
    );
    if !results::endings_differ(&end_p, &end_pp) {
        return None;
    }
    Some(Divergence {
        inputs: search::named_inputs(cx.sig, input),
        trace_p: placed(cx, &rp.trace, Build::P),
        trace_p_prime: placed(cx, &rpp.trace, Build::PPrime),
        class: DivergenceClass::Ending,
        summary: results::ending_summary(&end_p, &end_pp),
        location: results::where_endings_part(&end_p, &end_pp),
        end_p,
        end_p_prime: end_pp,
        in_domain: cx.domain.is_none_or(|d| d.contains(input)),
        candidates: 0,
        shipped_only: true,
        ..Divergence::default()
    })
}

/// How a shipped run of `build` ended, as the instrumented runner says it: what it returned (without the outputs
/// behind pointers), or the call it stopped at, placed where the instrumented build makes that call; `None` for a
/// run that crashed or timed out.
pub fn ending_of(
    runner: &Runner,
    sig: &FunctionSignature,
    run: &ShippedRun,
    build: Build,
) -> Option<RunEnd> {
    match run.end {
        ShippedEnd::Raised(_) => Some(RunEnd::returned(crate::exec::return_value(
            sig.ret,
            run.produced.result,
        ))),
        ShippedEnd::Stopped(_) => {
            let callee = run.stopped_at.clone().unwrap_or_default();
            let site = runner
                .sites()
                .stops()
                .find(|s| s.build == build && s.callee == callee);
            Some(RunEnd::Stopped {
                line: site.and_then(|s| s.line),
                column: site.and_then(|s| s.column),
                callee,
            })
        }
        ShippedEnd::Crashed | ShippedEnd::TimedOut => None,
    }
}

/// A shipped trace placed as the instrumented one is: where the debug info gave only a line, or no operation,
/// the operation of the instrumented build at that place (at that column, else the first on that line).
fn placed(cx: &Sweep<'_>, trace: &[TraceEvent], build: Build) -> Vec<TraceEvent> {
    let sites: Vec<_> = cx
        .runner
        .sites()
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.build == build && s.function == cx.sig.name)
        .collect();
    trace
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let on_line = sites.iter().filter(|s| s.line == e.line);
            let site = on_line
                .clone()
                .find(|s| e.column.is_some() && s.column == e.column)
                .or_else(|| on_line.clone().next());
            if let Some(site) = site.filter(|_| e.column.is_none() || e.operation.is_empty()) {
                e.column = e.column.or(site.column);
                if e.operation.is_empty() {
                    e.operation = site.operation.clone();
                }
            }
            e
        })
        .collect()
}

/// Whether either instrumented build has an operation of the function on `line`.
fn has_operation(cx: &Sweep<'_>, line: u32) -> bool {
    cx.runner
        .sites()
        .iter()
        .any(|(_, s)| s.function == cx.sig.name && s.line == Some(line))
}

/// Where the instrumented P' computes its last value on `input`: for a difference only the shipped code
/// generation makes, the operation nearest to what the caller observes.
/// Where the model saw P store the output `d`'s result difference is about (an output behind a pointer, not the
/// return value), on any path that stores it.
fn stored_at(d: &Divergence, paths: &[PathOutputs]) -> Option<SourceLoc> {
    let name = d.result.as_ref()?.output.as_deref()?;
    let RunEnd::Returned { outputs, .. } = &d.end_p else {
        return None;
    };
    let output = outputs.iter().find(|o| o.name == name)?;
    paths.iter().find_map(|path| match &path.end {
        PathEnd::Returned { writes, .. } => writes
            .iter()
            .find(|w| w.param == output.param && w.offset == output.offset as i64)
            .and_then(|w| w.stored_at),
        PathEnd::Stopped(_) => None,
    })
}

/// Where the instrumented P last computed the plain build's value of the output `d`'s result difference is about:
/// the last operation whose value is that value, unless it is zero (a returned struct packed into one integer has
/// no store and no field of its own in the model).
fn computed_at(
    runner: &mut Runner,
    sig: &FunctionSignature,
    input: &Input,
    d: &Divergence,
) -> Option<SourceLoc> {
    let name = d.result.as_ref()?.output.as_deref()?;
    let RunEnd::Returned { outputs, .. } = &d.end_p else {
        return None;
    };
    let value = outputs.iter().find(|o| o.name == name)?.value;
    // A zero is every other operation's value too: no telling where it came from.
    if matches!(value, Scalar::Int(0) | Scalar::UInt(0)) || value.class() == Some(ValueClass::Zero)
    {
        return None;
    }
    let pair = runner.values(&sig.name, input).ok()?;
    pair.p.values.iter().rev().find_map(|v| {
        let site = runner.sites().get(v.param)?;
        let computed = site.value?.read(&v.word.to_le_bytes())?;
        computed.same(value).then_some(SourceLoc {
            line: site.line?,
            column: site.column.unwrap_or(0),
        })
    })
}

fn last_operation(
    runner: &mut Runner,
    sig: &FunctionSignature,
    input: &Input,
) -> Option<SourceLoc> {
    let pair = runner.values(&sig.name, input).ok()?;
    pair.pp.values.iter().rev().find_map(|v| {
        let site = runner.sites().get(v.param)?;
        Some(SourceLoc {
            line: site.line?,
            column: site.column.unwrap_or(0),
        })
    })
}
