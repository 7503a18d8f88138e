//! Solving exception queries with Z3: the union of both builds' queries, deduplicated syntactically, each solved
//! over the reals with a time limit on worker threads, models rounded exactly to the parameters' formats, and
//! (optionally) candidates that do not raise the exception in IEEE arithmetic retried in Z3's FP theory.
//!
//! Every worker thread uses its own thread-local Z3 context; only plain data crosses threads.

mod check;
mod fp;
mod real;

use crate::config::AnalysisConfig;
use crate::domain::{Bound, Domain};
use crate::model::Query;
use crate::report::FormulaCounts;
use crate::round::{f64_to_rational, round_rational, FloatFormat};
use crate::sym::{self, Expr, VarType};
use crate::types::{ArgValue, Build, ExceptionKind, FunctionSignature, Input, ParamType, SourceLoc};
use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use z3::ast::{Bool, Int, Real, BV};
use z3::{Params, SatResult, Solver};

/// An input the solver proposes for one exception condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// One value per parameter of the signature (`ArgValue::OutPtr` for pointers).
    pub input: Input,
    pub build: Build,
    pub kind: ExceptionKind,
    pub loc: Option<SourceLoc>,
}

/// What solving one function's queries produced.
#[derive(Debug, Clone, Default)]
pub struct SolveOutcome {
    /// Formulae built from P, from P', and unique after syntactic deduplication.
    pub formulae: FormulaCounts,
    /// Unique formulae Z3 found satisfiable over the reals.
    pub satisfiable: usize,
    /// Unique formulae Z3 gave up on (time limit or incompleteness).
    pub timeouts: usize,
    /// Distinct (by bit pattern) candidate inputs, in query order.
    pub candidates: Vec<Candidate>,
}

/// The verdict on one unique formula.
#[derive(Debug)]
enum Verdict {
    Sat,
    Unsat,
    Unknown,
}

#[derive(Debug)]
struct JobResult {
    verdict: Verdict,
    /// The rounded real model, then (if any) the FP-theory model.
    inputs: Vec<Input>,
}

/// Solves the union of both builds' queries (deduplicated syntactically), each with a per-query time limit, in
/// parallel on `cfg.threads` threads. With `domain` the declared parameter ranges are added to every query.
pub fn solve(
    sig: &FunctionSignature,
    queries_p: &[Query],
    queries_pp: &[Query],
    domain: Option<&Domain>,
    cfg: &AnalysisConfig,
) -> SolveOutcome {
    let started = Instant::now();
    let mut seen = HashSet::new();
    let unique: Vec<&Query> = queries_p.iter().chain(queries_pp).filter(|q| seen.insert(q.formula.clone())).collect();
    let jobs: Vec<&Query> = unique.iter().copied().filter(|q| !q.formula.is_false()).collect();
    let settings = Settings {
        timeout_ms: cfg.solver_timeout_ms.clamp(1, u32::MAX as u64) as u32,
        fp_fallback: cfg.fp_theory_fallback,
        // All FP-theory retries of one call share a budget of a few query time limits.
        fallback_deadline: started + Duration::from_millis(cfg.solver_timeout_ms.saturating_mul(4)),
    };
    let results = run_parallel(sig, &jobs, domain, &settings, cfg.threads);

    let mut outcome = SolveOutcome {
        formulae: FormulaCounts { p: queries_p.len(), p_prime: queries_pp.len(), unique: unique.len() },
        ..SolveOutcome::default()
    };
    let mut keys = HashSet::new();
    for (query, result) in jobs.iter().zip(results) {
        match result.verdict {
            Verdict::Sat => outcome.satisfiable += 1,
            Verdict::Unknown => outcome.timeouts += 1,
            Verdict::Unsat => {}
        }
        for input in result.inputs {
            if keys.insert(input.key()) {
                outcome.candidates.push(Candidate { input, build: query.build, kind: query.kind, loc: query.loc });
            }
        }
    }
    tracing::debug!(
        function = %sig.name,
        unique = outcome.formulae.unique,
        sat = outcome.satisfiable,
        timeouts = outcome.timeouts,
        candidates = outcome.candidates.len(),
        ms = started.elapsed().as_millis() as u64,
        "solved"
    );
    outcome
}

struct Settings {
    timeout_ms: u32,
    fp_fallback: bool,
    fallback_deadline: Instant,
}

/// Solves `jobs` on up to `threads` scoped threads, each with its own Z3 context; results in job order.
fn run_parallel(
    sig: &FunctionSignature,
    jobs: &[&Query],
    domain: Option<&Domain>,
    settings: &Settings,
    threads: usize,
) -> Vec<JobResult> {
    let workers = threads.max(1).min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, JobResult)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(query) = jobs.get(i) else { break };
                        out.push((i, solve_one(sig, &query.formula, domain, settings)));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join().unwrap_or_else(|_| {
                    tracing::error!("a solver thread panicked");
                    Vec::new()
                })
            })
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    // A panicked worker loses its jobs; report them as unknown rather than misaligning the results.
    let mut by_index: HashMap<usize, JobResult> = done.into_iter().collect();
    (0..jobs.len())
        .map(|i| by_index.remove(&i).unwrap_or(JobResult { verdict: Verdict::Unknown, inputs: vec![] }))
        .collect()
}

fn solver_with_timeout(timeout_ms: u32) -> Solver {
    let solver = Solver::new();
    let mut params = Params::new();
    params.set_u32("timeout", timeout_ms.max(1));
    solver.set_params(&params);
    solver
}

/// Solves one formula over the reals; retries in the FP theory when its rounded model does not raise the
/// exception in IEEE arithmetic.
fn solve_one(sig: &FunctionSignature, formula: &Expr, domain: Option<&Domain>, settings: &Settings) -> JobResult {
    let mut encoder = real::RealEncoder::new();
    let solver = solver_with_timeout(settings.timeout_ms);
    let goal = encoder.formula(formula);
    solver.assert(&goal);
    for side in &encoder.side {
        solver.assert(side);
    }
    for constraint in input_constraints(sig, domain) {
        solver.assert(&constraint);
    }
    let verdict = match solver.check() {
        SatResult::Sat => Verdict::Sat,
        SatResult::Unsat => Verdict::Unsat,
        SatResult::Unknown => Verdict::Unknown,
    };
    let mut inputs = Vec::new();
    if let Verdict::Sat = verdict {
        let Some(model) = solver.get_model() else { return JobResult { verdict, inputs } };
        let input = input_from_model(sig, &model);
        let raises = check::holds(formula, &input.0);
        inputs.push(input.clone());
        if settings.fp_fallback && raises == Some(false) {
            if let Some(fp_input) = solve_fp(formula, domain, settings, &input) {
                inputs.push(fp_input);
            }
        }
    }
    JobResult { verdict, inputs }
}

/// The FP-theory retry: an input on which the operation really raises the exception, if Z3 finds one in time.
fn solve_fp(
    formula: &Expr,
    domain: Option<&Domain>,
    settings: &Settings,
    real_input: &Input,
) -> Option<Input> {
    let remaining = settings.fallback_deadline.checked_duration_since(Instant::now())?;
    let timeout = (remaining.as_millis() as u32).min(settings.timeout_ms);
    if timeout < 10 {
        return None;
    }
    let query = fp::encode(formula, domain)?;
    let solver = solver_with_timeout(timeout);
    solver.from_string(query.smtlib.as_str());
    if solver.check() != SatResult::Sat {
        return None;
    }
    let model = solver.get_model()?;
    let mut values = real_input.0.clone();
    for (index, fmt) in query.params {
        let width = if fmt == FloatFormat::Double { 64 } else { 32 };
        let bits = model.eval(&BV::new_const(fp::bits_name(index), width), true)?.as_u64()?;
        let v = match fmt {
            FloatFormat::Double => ArgValue::F64(f64::from_bits(bits)),
            FloatFormat::Single => ArgValue::F32(f32::from_bits(bits as u32)),
        };
        *values.get_mut(index as usize)? = v;
    }
    let input = Input(values);
    (check::holds(formula, &input.0) != Some(false)).then_some(input)
}

/// |x| ≤ Ω for floats, the width's range for integers, and the declared domain.
fn input_constraints(sig: &FunctionSignature, domain: Option<&Domain>) -> Vec<Bool> {
    let mut out = Vec::new();
    for (i, p) in sig.params.iter().enumerate() {
        match p.ty {
            ParamType::F64 | ParamType::F32 => {
                let fmt = if p.ty == ParamType::F64 { FloatFormat::Double } else { FloatFormat::Single };
                let x = Real::new_const(real::param_name(i as u32, VarType::Float(fmt)));
                let max = Real::from_big_rational(&sym::max_finite(fmt));
                out.push(x.le(&max));
                out.push(x.ge(-max));
            }
            ParamType::Int { bits, signed } => {
                let n = Int::new_const(real::param_name(i as u32, VarType::Int { bits, signed }));
                let (lo, hi) = int_param_range(bits);
                out.push(n.ge(Int::from_big_int(&lo)));
                out.push(n.le(Int::from_big_int(&hi)));
            }
            ParamType::OutPtr { .. } => {}
        }
    }
    for range in domain.map(|d| d.ranges.as_slice()).unwrap_or(&[]) {
        let Some(p) = sig.params.get(range.param) else { continue };
        let value = match p.ty {
            ParamType::F64 => Real::new_const(real::param_name(range.param as u32, VarType::Float(FloatFormat::Double))),
            ParamType::F32 => Real::new_const(real::param_name(range.param as u32, VarType::Float(FloatFormat::Single))),
            ParamType::Int { bits, signed } => {
                let n = Int::new_const(real::param_name(range.param as u32, VarType::Int { bits, signed }));
                let reading = if signed || bits == 1 {
                    n
                } else {
                    let modulus = Int::from_big_int(&(BigInt::one() << bits as usize));
                    n.lt(Int::from_i64(0)).ite(&(n.clone() + modulus), &n)
                };
                Real::from_int(&reading)
            }
            ParamType::OutPtr { .. } => continue,
        };
        let bound = |b: &Bound| Real::from_big_rational(&f64_to_rational(b.value));
        if let Some(lo) = range.lo.filter(|b| b.value.is_finite()) {
            out.push(if lo.inclusive { value.ge(bound(&lo)) } else { value.gt(bound(&lo)) });
        }
        if let Some(hi) = range.hi.filter(|b| b.value.is_finite()) {
            out.push(if hi.inclusive { value.le(bound(&hi)) } else { value.lt(bound(&hi)) });
        }
    }
    out
}

/// The range of an integer parameter's Z3 variable (signed form; `bool` is 0..=1).
fn int_param_range(bits: u32) -> (BigInt, BigInt) {
    if bits == 1 {
        return (BigInt::from(0), BigInt::from(1));
    }
    let half = BigInt::one() << (bits as usize - 1);
    (-half.clone(), half - 1)
}

/// The model's parameter values, rounded exactly to their formats (0 where the model says nothing).
fn input_from_model(sig: &FunctionSignature, model: &z3::Model) -> Input {
    let values = sig
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| match p.ty {
            ParamType::F64 | ParamType::F32 => {
                let fmt = if p.ty == ParamType::F64 { FloatFormat::Double } else { FloatFormat::Single };
                let x = Real::new_const(real::param_name(i as u32, VarType::Float(fmt)));
                let rounded = model
                    .eval(&x, true)
                    .and_then(|v| real::model_rational(&v, fmt))
                    .map(|q| round_rational(&q, fmt))
                    .unwrap_or(0.0);
                match fmt {
                    FloatFormat::Double => ArgValue::F64(rounded),
                    FloatFormat::Single => ArgValue::F32(rounded as f32),
                }
            }
            ParamType::Int { bits, signed } => {
                let n = Int::new_const(real::param_name(i as u32, VarType::Int { bits, signed }));
                let (lo, hi) = int_param_range(bits);
                let v = model.eval(&n, true).and_then(|v| real::model_integer(&v)).unwrap_or_default();
                let v = v.clamp(lo, hi);
                // Unsigned parameters are shown as their unsigned value where it fits an i64.
                let v = if !signed && bits < 64 && v.is_negative() { v + (BigInt::one() << bits as usize) } else { v };
                ArgValue::Int(v.to_i64().unwrap_or(0))
            }
            ParamType::OutPtr { .. } => ArgValue::OutPtr,
        })
        .collect();
    Input(values)
}
