//! Confirmation on the binaries users ship, and the cause of each finding.
//!
//! The search runs instrumented IR compiled by `llc -O0`, which is not the machine code clang ships (the x86
//! backend re-associates `fmul` chains in its MachineCombiner; a `select` becomes a branch again). So every
//! divergence the search reports is run again by an independent harness ([`Harness`], `confirm/harness.rs`): the
//! file compiled by clang exactly as a build would be (reference flags for P, fast-math flags for P' and the
//! program linked with them, so `crtfastmath.o` sets flush-to-zero/denormals-are-zero; `-gline-tables-only`
//! added, which changes no instruction), no instrumentation, a small driver (`runtime/foe_confirm.c`) that calls the function on the
//! input, reads the sticky flags and records the exception trace by trapping (FPSpy's method: the four exceptions
//! unmasked, each faulting instruction recorded and run again masked), placed on lines by the debug info
//! (`confirm/trace.rs`). The verdict is decided on the shipped binaries: exception sets that differ there are
//! [`Confirmation::Confirmed`]; equal sets whose shipped traces differ in order or count are
//! [`Confirmation::TraceOnly`]; a divergence the shipped binaries do not show (equal sets and equal traces) is
//! dropped and counted in [`FunctionReport::not_reproduced`]. The binaries link the project's other units the
//! file uses (`confirm/build.rs`), as the program does; a call of a function no file defines ends the call there,
//! as the instrumented worker stops its run at it, and two runs that stopped at the same call compare like two
//! that returned.
//!
//! The cause of a confirmed divergence is found the same way: the input is run on builds of P' that differ in one
//! option ([`PROBES`]) and on plain `-O2`; [`decide`] names the [`Cause`]. The probes are built and run
//! in that order, two at a time, only for the divergences still unexplained.

mod build;
mod driver;
mod early;
mod harness;
mod probe;
mod reuse;
mod sweep;
mod thunks;
mod trace;

pub use early::{early_probes, EarlyHarness};
pub use harness::{Harness, Probe, ShippedEnd, ShippedRun, CONFIRM_C, PROBES};
pub use sweep::{ending_of, shipped_only, Sweep};

use crate::report::{
    Cause, Confirmation, Divergence, DivergenceClass, FunctionReport, RunEnd, TraceEvent,
};
use crate::types::{ArgValue, ExceptionKind, FunctionSignature, Input, ParamType};
use std::collections::HashMap;

/// The exceptions of a [`ShippedEnd::Raised`] bit set, in [`ExceptionKind::ALL`] order.
pub fn kinds(bits: u8) -> Vec<ExceptionKind> {
    ExceptionKind::ALL
        .into_iter()
        .enumerate()
        .filter(|(i, _)| bits >> i & 1 == 1)
        .map(|(_, k)| k)
        .collect()
}

/// The bit set of a trace's exception kinds, as [`ShippedEnd::Raised`] counts them.
fn bits_of(trace: &[TraceEvent]) -> u8 {
    trace.iter().fold(0, |acc, e| {
        let i = ExceptionKind::ALL
            .iter()
            .position(|k| *k == e.kind)
            .unwrap_or(0);
        acc | 1 << i
    })
}

/// Whether two shipped runs that raised the same set trapped different kind sequences (order or count); `None`
/// when either trace is incomplete.
fn sequences_differ(p: &ShippedRun, pp: &ShippedRun) -> Option<bool> {
    if p.dropped > 0 || pp.dropped > 0 {
        return None;
    }
    let seq = |r: &ShippedRun| r.trace.iter().map(|e| e.kind).collect::<Vec<_>>();
    Some(seq(p) != seq(pp))
}

/// The full input of a divergence (pointer placeholders included), from its named values.
fn input_of(sig: &FunctionSignature, d: &Divergence) -> Option<Input> {
    let mut named = d.inputs.iter();
    let mut values = Vec::with_capacity(sig.params.len());
    for p in &sig.params {
        if !p.ty.is_searchable() {
            values.push(ArgValue::OutPtr);
            continue;
        }
        let v = named.next()?;
        let value = match v.raw {
            Some(raw) => raw,
            None => match p.ty {
                ParamType::F64 => ArgValue::F64(crate::fpfmt::parse_f64(&v.value)?),
                ParamType::F32 => ArgValue::F32(crate::fpfmt::parse_f64(&v.value)? as f32),
                ParamType::Int { .. } => ArgValue::Int(v.value.parse().ok()?),
                ParamType::OutPtr { .. } => ArgValue::OutPtr,
            },
        };
        values.push(value);
    }
    Some(Input(values))
}

/// Confirms `report`'s divergences on the shipped binaries and finds their causes: sets
/// [`Divergence::confirmation`], the shipped exception sets and traces and [`Divergence::cause`]; drops the
/// divergences the shipped binaries do not show (counted in [`FunctionReport::not_reproduced`], noted in the reason);
/// makes `diff_producing` count the candidates of the divergences kept.
pub fn confirm_function(
    harness: &mut Harness,
    sig: &FunctionSignature,
    report: &mut FunctionReport,
) {
    if report.divergences.is_empty() {
        return;
    }
    let _span = tracing::debug_span!("confirm", function = %sig.name).entered();
    let Some((inputs, shipped)) = run_shipped(harness, sig, report) else {
        return;
    };
    let stubbed: Vec<String> = harness
        .stubbed
        .lock()
        .map(|s| s.iter().cloned().collect())
        .unwrap_or_default();
    let bits = harness.config.accuracy_bits;
    let mut kept = Vec::new();
    let mut dropped = 0;
    let mut kept_unconfirmed = 0;
    // The stubs the unconfirmed divergences' runs stopped at.
    let mut stopped_at = std::collections::BTreeSet::new();
    let mut unsteady = 0;
    // Divergences whose cause is looked for.
    let mut to_explain: Vec<Witness> = Vec::new();
    for ((d, runs), input) in report.divergences.drain(..).zip(shipped).zip(inputs) {
        let check =
            |d: Divergence, runs| check_divergence(sig, bits, &stubbed, d, runs, input.clone());
        // The verdict must not change with what the stack held before the call, and for a result divergence
        // neither build may compute two values on the one input: a function that reads memory it never wrote,
        // state an earlier call left or a clock does not do one thing on the input. Only the values the
        // divergence reads are compared (a struct returned through the stack has padding nobody wrote).
        let checked = match runs {
            Some(ShippedPair { first, again }) => {
                let same_values = |end: &RunEnd, a: &ShippedRun, b: &ShippedRun| {
                    input.as_ref().is_none_or(|input| {
                        // Compared as printed: a NaN is the same NaN, and -0 is not 0.
                        format!("{:?}", shipped_end(sig, end, input, a))
                            == format!("{:?}", shipped_end(sig, end, input, b))
                    })
                };
                let steady = d.class.is_exception()
                    || (same_values(&d.end_p, &first.0, &again.0)
                        && same_values(&d.end_p_prime, &first.1, &again.1));
                let verdict = check(d.clone(), Some(first));
                if !steady || as_reported(&verdict) != as_reported(&check(d, Some(again))) {
                    unsteady += 1;
                    continue;
                }
                verdict
            }
            None => check(d, None),
        };
        match checked {
            Checked::Kept(d, explain) => {
                if let Some((input, p_run, what)) = explain {
                    to_explain.push(Witness {
                        at: kept.len(),
                        input,
                        p_run,
                        what,
                    });
                }
                kept.push(d);
            }
            Checked::Unconfirmed(d, stub) => {
                kept_unconfirmed += 1;
                stopped_at.insert(stub);
                kept.push(d);
            }
            Checked::Dropped => dropped += 1,
        }
    }
    report.divergences = kept;
    report.not_reproduced = dropped + unsteady;
    note_unchecked(report, kept_unconfirmed, dropped, &stopped_at);
    if unsteady > 0 {
        let note = format!(
            "{unsteady} divergences are not reported: on their inputs a shipped binary does not do one thing \
             (its runs change with what the stack held before the call, or it reads a clock or state an earlier \
             call left)"
        );
        report.reason = join(&report.reason, &note);
    }
    if to_explain.is_empty() {
        return;
    }
    explain_causes(harness, sig, report, &to_explain);
}

/// The byte the second shipped run of each divergence's input fills the stack below the call with (the first
/// fills it with zeros): all ones, a NaN in every float a function reads without having written it.
const SECOND_FILL: u8 = 0xff;

/// The shipped runs of one divergence's input: P's and P''s with zeros below the call, and again with
/// [`SECOND_FILL`].
struct ShippedPair {
    first: (ShippedRun, ShippedRun),
    again: (ShippedRun, ShippedRun),
}

/// Runs the divergences' inputs on the shipped binaries of P and P', twice each with the stack filled otherwise:
/// the inputs (`None` where one could not be rebuilt) and, per divergence, the shipped runs. `None`, with a note
/// in the reason, when the shipped binaries could not be built or run.
#[allow(clippy::type_complexity)]
fn run_shipped(
    harness: &mut Harness,
    sig: &FunctionSignature,
    report: &mut FunctionReport,
) -> Option<(Vec<Option<Input>>, Vec<Option<ShippedPair>>)> {
    let inputs: Vec<Option<Input>> = report
        .divergences
        .iter()
        .map(|d| input_of(sig, d))
        .collect();
    let runnable: Vec<Input> = inputs.iter().flatten().cloned().collect();
    harness.prepare(&[Probe::Reference, Probe::Shipped]);
    let mut both = |fill| -> Result<_, String> {
        let p = harness.run_filled(Probe::Reference, &sig.name, &runnable, fill)?;
        let pp = harness.run_filled(Probe::Shipped, &sig.name, &runnable, fill)?;
        Ok(p.into_iter().zip(pp))
    };
    let (first, again) = match both(0).and_then(|first| Ok((first, both(SECOND_FILL)?))) {
        Ok(runs) => runs,
        Err(e) => {
            let note = format!("not confirmed on the shipped binaries: {e}");
            report.reason = join(&report.reason, &note);
            return None;
        }
    };
    // Per divergence: the shipped runs of P and P' (None when its input could not be rebuilt).
    let mut runs = first.zip(again);
    let shipped: Vec<Option<ShippedPair>> = inputs
        .iter()
        .map(|i| {
            let (first, again) = i.as_ref().and(runs.next())?;
            Some(ShippedPair { first, again })
        })
        .collect();
    Some((inputs, shipped))
}

/// What the shipped runs decided of a divergence: kept or not, confirmed or not, the shipped sets and traces. Not
/// the whole [`Divergence`]: its inputs and values may be NaN, which compares unequal to itself.
#[allow(clippy::type_complexity)]
fn as_reported(
    checked: &Checked,
) -> Option<(
    Confirmation,
    &[ExceptionKind],
    &[ExceptionKind],
    &[TraceEvent],
    &[TraceEvent],
)> {
    match checked {
        Checked::Kept(d, _) | Checked::Unconfirmed(d, _) => Some((
            d.confirmation,
            &d.shipped_p,
            &d.shipped_p_prime,
            &d.shipped_trace_p,
            &d.shipped_trace_p_prime,
        )),
        Checked::Dropped => None,
    }
}

/// A confirmed divergence whose cause is looked for.
struct Witness {
    /// Its index among the divergences kept.
    at: usize,
    input: Input,
    /// P's shipped run on the input.
    p_run: ShippedRun,
    what: Explain,
}

/// What the shipped runs say of one divergence.
enum Checked {
    /// Kept, with its input, P's shipped run and what to explain when its cause is looked for.
    Kept(Divergence, Option<(Input, ShippedRun, Explain)>),
    /// Kept without a verdict: a shipped run reached a stub standing for code another file defines (the
    /// project's units could not all be linked), so it is not the program's run.
    Unconfirmed(Divergence, String),
    /// Not reproduced on the shipped binaries.
    Dropped,
}

/// The verdict of the shipped runs `runs` (`None`: not run) on divergence `d` and its `input`; `stubbed` names
/// the symbols the shipped binaries' link stubbed although the program has them (see [`Harness`]'s `stubbed`).
fn check_divergence(
    sig: &FunctionSignature,
    bits: u32,
    stubbed: &[String],
    mut d: Divergence,
    runs: Option<(ShippedRun, ShippedRun)>,
    input: Option<Input>,
) -> Checked {
    let Some((rp, rpp)) = runs else {
        d.confirmation = Confirmation::NotRun;
        return Checked::Kept(d, None);
    };
    let sets = rp.sets(&rpp).or_else(|| {
        // Each shipped run ended as its instrumented run did (one returned, the other stopped at the same
        // call as its instrumented run): the traces cover what the instrumented ones covered.
        let over_same_extent = ends_as(&rp, &d.end_p) && ends_as(&rpp, &d.end_p_prime);
        over_same_extent
            .then(|| rp.end.raised().zip(rpp.end.raised()))
            .flatten()
    });
    // A run that stopped at a stub standing for code the program has is the program's run up to that call only
    // (the program goes on into the callee, which may raise what the other build raised: the independent
    // harness saw it in `legendre_con.c`). That is enough for two claims: that one build reaches the call and
    // the other does not (each shipped run ends as its instrumented run), and that the stopped run raised,
    // before the call, an exception the other build's complete run never raised ([`ShippedRun::sets`]).
    let reaching_the_call_is_the_claim = d.class == DivergenceClass::Ending
        && ends_as(&rp, &d.end_p)
        && ends_as(&rpp, &d.end_p_prime);
    let raised_before_the_call = d.class.is_exception()
        && matches!(
            (rp.end, rpp.end),
            (ShippedEnd::Raised(_), ShippedEnd::Stopped(_))
                | (ShippedEnd::Stopped(_), ShippedEnd::Raised(_))
        )
        && rp.sets(&rpp).is_some();
    let stopped_at_stub = [&rp, &rpp]
        .iter()
        .find_map(|r| r.stopped_at.clone().filter(|s| stubbed.contains(s)))
        .filter(|_| !reaching_the_call_is_the_claim && !raised_before_the_call);
    if let Some(stub) = stopped_at_stub {
        d.confirmation = Confirmation::NotRun;
        return Checked::Unconfirmed(d, stub);
    }
    let Some((a, b)) = sets else {
        d.confirmation = Confirmation::NotRun;
        return Checked::Kept(d, None);
    };
    let shipped = Shipped {
        p: rp,
        pp: rpp,
        sets: (a, b),
        input: input.expect("ran"),
    };
    if d.class.is_exception() {
        check_exceptions(d, shipped)
    } else {
        check_result(sig, bits, d, shipped)
    }
}

/// The shipped runs of one divergence's input, with the exception sets they raised.
struct Shipped {
    p: ShippedRun,
    pp: ShippedRun,
    sets: (u8, u8),
    input: Input,
}

/// A result divergence holds on the shipped binaries when their outputs differ the same way.
fn check_result(
    sig: &FunctionSignature,
    bits: u32,
    mut d: Divergence,
    shipped: Shipped,
) -> Checked {
    let (rp, rpp, input) = (shipped.p, shipped.pp, shipped.input);
    let (a, b) = shipped.sets;
    let (sp, spp) = (
        shipped_end(sig, &d.end_p, &input, &rp),
        shipped_end(sig, &d.end_p_prime, &input, &rpp),
    );
    let same_way = if d.class == DivergenceClass::Ending {
        // The shipped runs end as the instrumented ones: one at the same call, the other returning.
        ends_as(&rp, &d.end_p) && ends_as(&rpp, &d.end_p_prime)
    } else {
        crate::search::results::compare(&sp, &spp, bits).is_some_and(|r| r.class == d.class)
    };
    d.shipped_p = kinds(a);
    d.shipped_p_prime = kinds(b);
    d.shipped_trace_p = rp.trace.clone();
    d.shipped_trace_p_prime = rpp.trace.clone();
    if same_way {
        d.confirmation = Confirmation::Confirmed;
        let what = Explain::Result(Box::new(d.clone()));
        Checked::Kept(d, Some((input, rp, what)))
    } else {
        Checked::Dropped
    }
}

/// An exception divergence is confirmed when the shipped exception sets differ, trace-only when only the order
/// or count of the shipped traces does.
fn check_exceptions(mut d: Divergence, shipped: Shipped) -> Checked {
    let (rp, rpp, input) = (shipped.p, shipped.pp, shipped.input);
    let (a, b) = shipped.sets;
    d.shipped_p = kinds(a);
    d.shipped_p_prime = kinds(b);
    let differ = sequences_differ(&rp, &rpp);
    let p_run = rp.clone();
    d.shipped_trace_p = rp.trace;
    d.shipped_trace_p_prime = rpp.trace;
    if a != b {
        d.confirmation = Confirmation::Confirmed;
        return Checked::Kept(d, Some((input, p_run, Explain::Sets)));
    }
    if differ.unwrap_or(
        // Incomplete shipped traces: the instrumented ones decide whether only order or count differ.
        d.class != DivergenceClass::Appears && bits_of(&d.trace_p) == bits_of(&d.trace_p_prime),
    ) {
        d.confirmation = Confirmation::TraceOnly;
        // The shipped traces differ in order or count: the probes' traces tell why.
        let explain = differ
            .is_some()
            .then_some((input, p_run, Explain::Sequence));
        return Checked::Kept(d, explain);
    }
    let inputs: Vec<String> = d
        .inputs
        .iter()
        .map(|v| format!("{}={}", v.name, v.value))
        .collect();
    tracing::debug!(inputs = %inputs.join(" "), shipped = ?d.shipped_p, "not reproduced");
    Checked::Dropped
}

/// Notes in the reason the divergences not checked or not reproduced on the shipped binaries, and makes
/// `diff_producing` count the candidates of the exception divergences kept.
fn note_unchecked(
    report: &mut FunctionReport,
    kept_unconfirmed: usize,
    dropped: usize,
    stopped_at: &std::collections::BTreeSet<String>,
) {
    if kept_unconfirmed > 0 {
        let note = format!(
            "{kept_unconfirmed} divergences could not be checked on the shipped binaries: their runs stopped at a \
             call of {}, which another file of the project may define but the shipped binaries do not link",
            stopped_at.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
        );
        report.reason = join(&report.reason, &note);
    }
    if dropped > 0 {
        let note = format!(
            "{dropped} divergences of the instrumented builds do not reproduce in the binaries clang ships and are not reported"
        );
        report.reason = join(&report.reason, &note);
    }
    // Table III's count: the solver candidates behind the exception divergences kept.
    report.diff_producing = report
        .divergences
        .iter()
        .filter(|d| d.class.is_exception())
        .map(|d| d.candidates)
        .sum();
}

/// Runs the probes on the witnesses and sets each witness's divergence's [`Divergence::cause`].
fn explain_causes(
    harness: &mut Harness,
    sig: &FunctionSignature,
    report: &mut FunctionReport,
    to_explain: &[Witness],
) {
    // The probes in the order `decide` asks them, in the stages of `probe_stages` (their builds run in parallel),
    // each run only on the witnesses no earlier probe explained: a divergence is explained by the first probe that
    // gives P's exceptions, so later probes would not change its cause.
    //
    // A divergence the shipped binaries show only as another order or number of the same exceptions does not
    // have probes built for it past the first stage (flush-to-zero, plain `-O2` and re-association, built
    // early): it is explained by the probes the file's other divergences need, and else said not looked for
    // ([`Cause::NotProbed`]).
    // Proving "several options together" takes every probe, and such a difference is the least of what foe
    // reports: on the median files of the corpus, its later probes were a tenth of the time.
    //
    // Per witness, each probe's run on it (`None`: not run, or did not return).
    let mut runs: Vec<HashMap<Probe, ShippedRun>> = vec![HashMap::new(); to_explain.len()];
    let mut explained = vec![false; to_explain.len()];
    let mut not_probed = false;
    for (i, pair) in probe_stages().iter().map(Vec::as_slice).enumerate() {
        let open: Vec<usize> = (0..to_explain.len()).filter(|&w| !explained[w]).collect();
        if open.is_empty() {
            break;
        }
        let sequence_only = |&w: &usize| matches!(to_explain[w].what, Explain::Sequence);
        if i > 0 && open.iter().all(sequence_only) {
            not_probed = true;
            break;
        }
        harness.prepare(pair);
        let witnesses: Vec<Input> = open.iter().map(|&w| to_explain[w].input.clone()).collect();
        for &probe in pair {
            let Ok(got) = harness.run(probe, &sig.name, &witnesses) else {
                continue;
            };
            for (&w, run) in open.iter().zip(got) {
                runs[w].insert(probe, run);
            }
        }
        let bits = harness.config.accuracy_bits;
        let explains = |w: usize, runs: &HashMap<Probe, ShippedRun>, probe: Probe| {
            let Witness {
                input, p_run, what, ..
            } = &to_explain[w];
            probe_explains(sig, input, p_run, what, runs.get(&probe)?, bits)
        };
        let suspects: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&w| needs_macro_probe(|p| explains(w, &runs[w], p)))
            .collect();
        if !suspects.is_empty() && harness.reads_fast_math_macro() {
            tracing::debug!(
                witnesses = suspects.len(),
                "two options each explain a divergence: the macro probe"
            );
            harness.prepare(&[MACRO_PROBE]);
            let witnesses: Vec<Input> = suspects
                .iter()
                .map(|&w| to_explain[w].input.clone())
                .collect();
            if let Ok(got) = harness.run(MACRO_PROBE, &sig.name, &witnesses) {
                for (&w, run) in suspects.iter().zip(got) {
                    runs[w].insert(MACRO_PROBE, run);
                }
            }
        }
        for &w in &open {
            // Explained once a single option, the macro, or optimisation without fast-math, is the cause.
            let cause = decide(|p| explains(w, &runs[w], p));
            explained[w] = !matches!(cause, Cause::Combined | Cause::Undetermined);
        }
    }
    for (w, witness) in to_explain.iter().enumerate() {
        let bits = harness.config.accuracy_bits;
        let Witness {
            at,
            input,
            p_run,
            what,
        } = witness;
        report.divergences[*at].cause = match not_probed && !explained[w] {
            true => Cause::NotProbed,
            false => cause_of(sig, input, p_run, what, &runs[w], bits),
        };
    }
}

/// What a witness's cause is looked for in: the exception sets, the kind sequences, or the outputs.
enum Explain {
    Sets,
    Sequence,
    /// A result divergence (its instrumented runs name the outputs to read back).
    Result(Box<Divergence>),
}

/// [`decide`] on the probes' runs of one witness so far.
fn cause_of(
    sig: &FunctionSignature,
    input: &Input,
    p_run: &ShippedRun,
    what: &Explain,
    runs: &HashMap<Probe, ShippedRun>,
    accuracy_bits: u32,
) -> Cause {
    decide(|probe| probe_explains(sig, input, p_run, what, runs.get(&probe)?, accuracy_bits))
}

/// Whether a probe's run of a witness does what P's run does (so the probe's missing option explains the
/// divergence); `None` when the two cannot be compared.
fn probe_explains(
    sig: &FunctionSignature,
    input: &Input,
    p_run: &ShippedRun,
    what: &Explain,
    run: &ShippedRun,
    accuracy_bits: u32,
) -> Option<bool> {
    match what {
        Explain::Sets => same_as(p_run, run, true),
        Explain::Sequence => same_as(p_run, run, false),
        // The probe explains an ending divergence when it ends as P does.
        Explain::Result(d) if d.class == DivergenceClass::Ending => match run.end {
            ShippedEnd::Raised(_) | ShippedEnd::Stopped(_) => Some(ends_as(run, &d.end_p)),
            _ => None,
        },
        // The probe explains a result divergence when it computes what P computes.
        Explain::Result(d) => {
            let (ShippedEnd::Raised(_), ShippedEnd::Raised(_)) = (p_run.end, run.end) else {
                return None;
            };
            let plain = shipped_end(sig, &d.end_p, input, p_run);
            let probe_end = shipped_end(sig, &d.end_p_prime, input, run);
            let still = crate::search::results::compare(&plain, &probe_end, accuracy_bits);
            Some(
                still
                    .is_none_or(|r| r.class != d.class && d.class == DivergenceClass::SpecialValue),
            )
        }
    }
}

/// A shipped call's ending as the instrumented run's (`instrumented` names the outputs to read: the same places,
/// read back from the words the shipped call changed, or from what the call started with).
fn shipped_end(
    sig: &FunctionSignature,
    instrumented: &RunEnd,
    input: &Input,
    run: &ShippedRun,
) -> RunEnd {
    if !matches!(run.end, ShippedEnd::Raised(_)) {
        return RunEnd::Crashed {
            signal: 0,
            name: "did not return".into(),
        };
    }
    let outputs = instrumented
        .outputs()
        .iter()
        .filter_map(|o| {
            let word_at = o.offset & !7;
            let word = run
                .produced
                .outputs
                .iter()
                .find(|w| w.param == o.param && w.offset == word_at)
                .map_or_else(
                    || crate::exec::initial_word(sig, input, o.param, word_at),
                    |w| w.word,
                );
            let value =
                o.ty.read(&word.to_le_bytes()[(o.offset - word_at) as usize..])?;
            Some(crate::report::Output { value, ..o.clone() })
        })
        .collect();
    RunEnd::Returned {
        value: crate::exec::return_value(sig.ret, run.produced.result),
        outputs,
    }
}

/// Whether a shipped run ended as the instrumented run did: both returned, or both stopped at the same call.
fn ends_as(run: &ShippedRun, instrumented: &RunEnd) -> bool {
    match (run.end, instrumented) {
        (ShippedEnd::Raised(_), RunEnd::Returned { .. }) => true,
        (ShippedEnd::Stopped(_), RunEnd::Stopped { callee, .. }) => {
            run.stopped_at.as_deref() == Some(callee.as_str())
        }
        _ => false,
    }
}

/// Whether a probe's run raised what P's run raised: the same set for a set difference, the same sequence of
/// kinds for an order or count difference; `None` when the two did not end alike.
fn same_as(p_run: &ShippedRun, run: &ShippedRun, sets_differ: bool) -> Option<bool> {
    let (a, b) = p_run.sets(run)?;
    if sets_differ || a != b {
        Some(a == b)
    } else {
        sequences_differ(p_run, run).map(|differ| !differ)
    }
}

/// The probes in the order [`decide`] asks them: flush-to-zero (no edit of the code reaches it), plain `-O2`
/// (no fast-math option is needed for the divergence), then each fast-math option, the no-NaN/no-infinity
/// assumption before contraction: it is the one cause of a divergence in 71 of the corpus's 204 files, contraction
/// in none (x86-64 without `+fma` fuses nothing), and a file whose causes are found in an earlier stage of
/// [`probe_stages`] waits for fewer compiles.
fn probe_order() -> Vec<Probe> {
    let (ftz, options) = PROBES.split_first().expect("probes");
    let mut options: Vec<Cause> = options.iter().map(|(c, _)| *c).collect();
    let finite = options.iter().position(|c| *c == Cause::FiniteMath);
    let contraction = options.iter().position(|c| *c == Cause::Contraction);
    if let (Some(f), Some(c)) = (finite, contraction) {
        if c < f {
            let finite = options.remove(f);
            options.insert(c, finite);
        }
    }
    std::iter::once(Probe::Without(ftz.0))
        .chain(std::iter::once(Probe::Without(Cause::Optimisation)))
        .chain(options.into_iter().map(Probe::Without))
        .collect()
}

/// [`probe_order`] in the stages its binaries are built in, each stage's compiles in parallel (two cores' worth):
/// the flush-to-zero probe is P''s object linked again, or P''s binary itself, and compiles nothing, so the first
/// stage holds it and two compiles (plain `-O2` and the first option); then two options at a time.
fn probe_stages() -> Vec<Vec<Probe>> {
    let order = probe_order();
    let (first, rest) = order.split_at(3.min(order.len()));
    std::iter::once(first.to_vec())
        .chain(rest.chunks(2).map(<[Probe]>::to_vec))
        .collect()
}

/// The probe that keeps every fast-math option and undefines `__FAST_MATH__` only.
const MACRO_PROBE: Probe = Probe::Without(Cause::FastMathMacro);

/// The cause of a divergence from whether each probe's shipped run raised what P raised: flush-to-zero when
/// linking without it gives P's exceptions; else optimisation when plain `-O2` does not give them either (the
/// divergence needs no fast-math option, so turning fast-math off does not remove it); else the `__FAST_MATH__`
/// macro when P' without only the macro gives them (that probe is run only where two options each gave them,
/// [`needs_macro_probe`]); else the first fast-math option whose removal gives P's exceptions; else several
/// options together.
pub fn decide(same_as_p: impl Fn(Probe) -> Option<bool>) -> Cause {
    let mut all_ran = true;
    for probe in probe_order() {
        let cause = match probe {
            Probe::Without(cause) => cause,
            Probe::Reference | Probe::Shipped => continue,
        };
        match (cause, same_as_p(probe)) {
            (Cause::Optimisation, Some(false)) => return Cause::Optimisation,
            (Cause::Optimisation, Some(true)) => {}
            (c, Some(true)) if c != Cause::FlushToZero && same_as_p(MACRO_PROBE) == Some(true) => {
                return Cause::FastMathMacro
            }
            (_, Some(true)) => return cause,
            (_, Some(false)) => {}
            (_, None) => all_ran = false,
        }
    }
    if all_ran {
        Cause::Combined
    } else {
        Cause::Undetermined
    }
}

/// Whether the macro probe is worth building for a witness: two single options each gave P's exceptions, or one
/// did while others have not run yet (an early stage). Every single-option probe drops `__FAST_MATH__` as well,
/// so a divergence the macro makes looks removed by each of them; one that a single option makes is removed by
/// that option alone, which only every option's run shows.
fn needs_macro_probe(same_as_p: impl Fn(Probe) -> Option<bool>) -> bool {
    let options: Vec<Option<bool>> = probe_order()
        .into_iter()
        .filter(|p| !matches!(p, Probe::Without(Cause::FlushToZero | Cause::Optimisation)))
        .map(&same_as_p)
        .collect();
    let removed = options.iter().filter(|r| **r == Some(true)).count();
    let unrun = options.iter().any(Option::is_none);
    same_as_p(MACRO_PROBE).is_none() && (removed >= 2 || (removed == 1 && unrun))
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}; {b}")
    }
}

#[cfg(test)]
mod stub_tests;
#[cfg(test)]
mod tests;
