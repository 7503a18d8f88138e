//! Solving one formula over the reals: its independent parts (KLEE's constraint independence), each as a whole
//! with nlsat or by Ariadne's concretisation, the models rounded exactly to the parameters' formats and, where the
//! rounded model misses the exception in IEEE arithmetic, repaired by small steps.

use super::inputs::{
    domain_params, input_constraints, is_float_param, param_values, unconstrained,
};
use super::{check, invert, limit, real, RealResult, Verdict};
use crate::domain::Domain;
use crate::round::{f64_to_rational, step_f32, step_f64, FloatFormat};
use crate::sym::{self, Expr, VarType};
use crate::types::{ArgValue, ExceptionKind, FunctionSignature, Input, ParamType};
use std::collections::HashMap;
use std::time::Instant;
use z3::ast::{Ast, Bool, Real};
use z3::{SatResult, Solver};

/// A solver without Z3 timers (see [`limit`]): nlsat (with its preprocessing) for pure real queries, several
/// times faster on these than the default portfolio; the SMT core when integers occur.
fn solver(reals_only: bool) -> Solver {
    if !reals_only {
        return z3::Tactic::new("smt").solver();
    }
    // Z3's own `qfnra-nlsat` tactic, with nlsat's conflict resolution not factoring polynomials (`factor`): with
    // the huge coefficients of Ω and λ it costs more than it saves. (Spelling the tactic's pipeline out without its
    // `factor` tactic was faster with Z3 4.8.12; with 5.4.1 that pipeline answers `unknown` on most of carbongas's
    // queries within 1 % of their budget, so the tactic is used as Z3 ships it.)
    let solver = z3::Tactic::new("qfnra-nlsat").solver();
    let mut params = z3::Params::new();
    params.set_bool("factor", false);
    // Nor with Z3 5.4's levelwise cell projection (`lws`): with it sici.c's solver process crashed in two runs of
    // three, without it in none of nine on the same build, and it is no faster on these queries. (Interrupts can
    // still corrupt nlsat's heap without it: see `limit.rs`.)
    params.set_bool("lws", false);
    solver.set_params(&params);
    solver
}

/// Solves one formula over the reals and rounds its model; a model that misses the exception in IEEE arithmetic
/// is repaired by small steps where possible.
pub(super) fn solve_real(
    sig: &FunctionSignature,
    formula: &Expr,
    domain: Option<&Domain>,
    timeout_ms: u32,
    approach: Approach<'_>,
    limiter: &limit::Limiter<'_>,
) -> RealResult {
    // The parts share the budget, counted in Z3's resource units (deterministic), not in time.
    let start = limiter.total_spent_ms();
    let mut values: HashMap<usize, ArgValue> = HashMap::new();
    let mut inverted: HashMap<usize, ArgValue> = HashMap::new();
    for part in independent_parts(formula, &domain_params(domain)) {
        let spent = limiter.total_spent_ms() - start;
        let remaining = (timeout_ms as u64).saturating_sub(spent) as u32;
        let (verdict, part_values) =
            solve_part(sig, &part, domain, remaining.max(1), approach, limiter);
        if verdict != Verdict::Sat {
            let floats = part
                .params
                .iter()
                .filter(|i| is_float_param(sig, **i))
                .count();
            return RealResult {
                verdict,
                input: None,
                misses: false,
                concretisable: verdict == Verdict::Unknown && floats > 1,
            };
        }
        let (part_values, part_inverted) = part_values;
        if let Some(alternative) = part_inverted {
            inverted.extend(alternative);
        }
        values.extend(part_values);
    }
    let input_of = |values: &HashMap<usize, ArgValue>| {
        Input(
            sig.params
                .iter()
                .enumerate()
                .map(|(i, p)| values.get(&i).copied().unwrap_or(unconstrained(p.ty)))
                .collect(),
        )
    };
    let input = input_of(&values);
    let verdict = Verdict::Sat;
    if check::holds(formula, &input.0) != Some(false) {
        return RealResult {
            verdict,
            input: Some(input),
            misses: false,
            concretisable: false,
        };
    }
    if !inverted.is_empty() {
        let mut alternative = values.clone();
        alternative.extend(inverted);
        let alternative = input_of(&alternative);
        let found = std::iter::once(alternative.clone())
            .filter(|a| check::holds(formula, &a.0) == Some(true))
            .chain(repair(formula, &alternative))
            .next();
        if let Some(found) = found {
            return RealResult {
                verdict,
                input: Some(found),
                misses: false,
                concretisable: false,
            };
        }
    }
    match repair(formula, &input) {
        // A neighbour of the rounded model raises it: Ariadne's findFloat step.
        Some(repaired) => RealResult {
            verdict,
            input: Some(repaired),
            misses: false,
            concretisable: false,
        },
        None => RealResult {
            verdict,
            input: Some(input),
            misses: true,
            concretisable: false,
        },
    }
}

/// Conjuncts of a query that share variables with each other but with no other part, and the parameters they
/// mention (KLEE's constraint independence): each part is solved on its own, pure real parts with nlsat.
struct Part {
    conjuncts: Vec<Expr>,
    params: Vec<usize>,
    /// [`rational_degree`] of the conjuncts.
    degree: u64,
}

/// Splits `formula` into independent parts; parameters in `constrained` that no conjunct mentions get parts of
/// their own (for their domain constraints).
fn independent_parts(formula: &Expr, constrained: &[usize]) -> Vec<Part> {
    let conjuncts: Vec<Expr> = match formula.kind() {
        sym::Kind::And(xs) => xs.clone(),
        _ => vec![formula.clone()],
    };
    // Union-find over conjuncts, joined through shared parameters and fresh values (elementary functions,
    // unmodelled integers).
    let mut parent: Vec<usize> = (0..conjuncts.len()).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut owner: sym::FingerprintMap<usize> = Default::default();
    let mut params_of: Vec<Vec<usize>> = vec![Vec::new(); conjuncts.len()];
    for (c, conjunct) in conjuncts.iter().enumerate() {
        for node in conjunct.postorder() {
            let key = match node.kind() {
                sym::Kind::Param { index, .. } => {
                    params_of[c].push(*index as usize);
                    *index as u128
                }
                sym::Kind::Math { .. } | sym::Kind::Opaque { .. } => node.fingerprint() | 1 << 127,
                _ => continue,
            };
            match owner.get(&key) {
                Some(&other) => {
                    let (a, b) = (find(&mut parent, c), find(&mut parent, other));
                    parent[a] = b;
                }
                None => {
                    owner.insert(key, c);
                }
            }
        }
    }
    let mut parts: Vec<Part> = Vec::new();
    let mut part_of_root: HashMap<usize, usize> = HashMap::new();
    for (c, conjunct) in conjuncts.into_iter().enumerate() {
        let root = find(&mut parent, c);
        let k = *part_of_root.entry(root).or_insert_with(|| {
            parts.push(Part {
                conjuncts: Vec::new(),
                params: Vec::new(),
                degree: 0,
            });
            parts.len() - 1
        });
        parts[k].conjuncts.push(conjunct);
        parts[k].params.append(&mut params_of[c]);
    }
    for part in &mut parts {
        part.params.sort_unstable();
        part.params.dedup();
        part.degree = rational_degree(&part.conjuncts);
    }
    for &p in constrained {
        if !parts.iter().any(|part| part.params.contains(&p)) {
            parts.push(Part {
                conjuncts: Vec::new(),
                params: vec![p],
                degree: 0,
            });
        }
    }
    parts
}

/// How a formula's parts are solved.
#[derive(Clone, Copy)]
pub(super) enum Approach<'a> {
    /// Each part as a whole.
    Whole,
    /// Parts with several float parameters by Ariadne's concretisation (seed 000, §3.3.1): all float parameters
    /// but one are bound to values, first those of these inputs, then sampled ones, and the remaining univariate
    /// problem, which nlsat decides quickly, is solved; up to [`MAX_CONCRETIZATIONS`] bindings. Other parts as a
    /// whole.
    Concretise(&'a [Input]),
}

/// Solves one independent part within `timeout_ms`; the values of its parameters when satisfiable.
fn solve_part(
    sig: &FunctionSignature,
    part: &Part,
    domain: Option<&Domain>,
    timeout_ms: u32,
    approach: Approach<'_>,
    limiter: &limit::Limiter<'_>,
) -> (Verdict, PartValues) {
    let floats: Vec<usize> = part
        .params
        .iter()
        .copied()
        .filter(|i| is_float_param(sig, *i))
        .collect();
    let hints = match approach {
        Approach::Concretise(hints) if floats.len() > 1 => hints,
        _ => return check_part(sig, part, domain, &[], timeout_ms, limiter),
    };
    // Budget spent so far, counted in Z3's resource units (deterministic), not in time.
    let mut spent = 0u32;
    let range_of = |i: usize| domain.and_then(|d| d.ranges.iter().find(|r| r.param == i));
    let hinted = |input: &Input, i: usize| match input.0.get(i) {
        Some(ArgValue::F64(v)) => Some(*v),
        Some(ArgValue::F32(v)) => Some(*v as f64),
        _ => None,
    };
    let mut sampler = Sampler::new(
        part.conjuncts
            .iter()
            .fold(0u64, |h, c| h ^ c.fingerprint() as u64),
    );
    let attempt_ms = (timeout_ms / 4).max(1);
    for attempt in 0..MAX_CONCRETIZATIONS {
        if spent + 1 >= timeout_ms {
            break;
        }
        let free = floats[attempt % floats.len()];
        let hint = hints.get(attempt / floats.len());
        let bindings: Vec<(usize, f64)> = floats
            .iter()
            .filter(|i| **i != free)
            .map(|&i| {
                let value = hint.and_then(|h| hinted(h, i));
                (
                    i,
                    value.unwrap_or_else(|| sampler.value(sig.params[i].ty, range_of(i))),
                )
            })
            .collect();
        let (verdict, values) = check_part(
            sig,
            part,
            domain,
            &bindings,
            attempt_ms.min(timeout_ms - spent),
            limiter,
        );
        // At least half an attempt's budget: nlsat counts few resource units inside polynomial arithmetic, so an
        // attempt may take far longer than its units say; this keeps the attempts at most twice the budget's share.
        spent += limiter.last_spent_ms().max(attempt_ms / 2).max(1);
        tracing::trace!(
            attempt,
            free,
            hinted = hint.is_some(),
            ?verdict,
            "concretised query part"
        );
        if verdict == Verdict::Sat {
            return (verdict, values);
        }
    }
    (Verdict::Unknown, Default::default())
}

/// Bindings of all float parameters but one tried per part that Z3 gives up on.
const MAX_CONCRETIZATIONS: usize = 8;

/// Deterministic sampling of parameter values for concretisation (Ariadne's `random(dom(s))`): within the
/// declared range when there is one, else a random sign and mantissa with an exponent that is small half of the
/// time and anywhere in the format's range otherwise (splitmix64, seeded from the formula so runs repeat).
struct Sampler(crate::rng::SplitMix);

impl Sampler {
    fn new(seed: u64) -> Sampler {
        Sampler(crate::rng::SplitMix(seed))
    }

    fn value(&mut self, ty: ParamType, range: Option<&crate::domain::ParamRange>) -> f64 {
        let max_exp = if ty == ParamType::F32 { 127 } else { 1023 };
        let lo = range
            .and_then(|r| r.lo)
            .map(|b| b.value)
            .filter(|v| v.is_finite());
        let hi = range
            .and_then(|r| r.hi)
            .map(|b| b.value)
            .filter(|v| v.is_finite());
        let v = match (lo, hi) {
            (Some(lo), Some(hi)) => lo + self.0.unit() * (hi - lo),
            _ => {
                let exp = if self.0.next() & 1 == 0 {
                    (self.0.next() % 17) as i32 - 8
                } else {
                    (self.0.next() % (2 * max_exp as u64 - 1)) as i32 - (max_exp - 1)
                };
                let sign = if self.0.next() & 1 == 0 { 1.0 } else { -1.0 };
                let v = sign * (1.0 + self.0.unit()) * 2f64.powi(exp);
                v.clamp(lo.unwrap_or(f64::MIN), hi.unwrap_or(f64::MAX))
            }
        };
        if ty == ParamType::F32 {
            v as f32 as f64
        } else {
            v
        }
    }
}

/// Queries whose rational functions have a higher degree (numerator plus denominator, after clearing
/// denominators) are not given to Z3: its preprocessing of such polynomials (a 20-step Newton iteration has
/// degree 2^20) does not heed interruption and would run for hours. The paper's programs stay below 40.
const MAX_DEGREE: u64 = 64;

/// The same bound for queries with integers, decided by Z3's SMT core (a recursive factorial unrolled a few
/// times made it spin for half an hour).
pub(super) const MAX_INTEGER_DEGREE: u64 = 4;

/// The largest degree (numerator + denominator) of any term of `conjuncts` as a rational function of the
/// parameters, elementary-function values counting as variables.
pub(super) fn rational_degree(conjuncts: &[Expr]) -> u64 {
    let mut memo: sym::FingerprintMap<(u64, u64)> = Default::default();
    let mut worst = 0;
    for c in conjuncts {
        for node in c.postorder() {
            let get = |e: &Expr| memo.get(&e.fingerprint()).copied().unwrap_or((0, 0));
            let add = |(na, da): (u64, u64), (nb, db): (u64, u64)| {
                (
                    na.saturating_add(db).max(nb.saturating_add(da)),
                    da.saturating_add(db),
                )
            };
            let mul = |(na, da): (u64, u64), (nb, db): (u64, u64)| {
                (na.saturating_add(nb), da.saturating_add(db))
            };
            let d = match node.kind() {
                sym::Kind::Param { .. } | sym::Kind::Math { .. } | sym::Kind::Opaque { .. } => {
                    (1, 0)
                }
                sym::Kind::Arith { op, a, b, .. } => match op {
                    sym::ArithOp::Add | sym::ArithOp::Sub => add(get(a), get(b)),
                    sym::ArithOp::Mul => mul(get(a), get(b)),
                    sym::ArithOp::Div => {
                        let (nb, db) = get(b);
                        mul(get(a), (db, nb))
                    }
                },
                sym::Kind::IntArith { op, a, b } => match op {
                    sym::IntOp::Mul => mul(get(a), get(b)),
                    sym::IntOp::Add | sym::IntOp::Sub => add(get(a), get(b)),
                },
                sym::Kind::Fma { a, b, c, .. } => add(mul(get(a), get(b)), get(c)),
                sym::Kind::Cmp { a, b, .. } => add(get(a), get(b)),
                // The condition relates the operation's exact result (e.g. the product of the operands).
                sym::Kind::Exception { kind, site } => {
                    let d = rational_degree(&[sym::real_condition(*kind, site)]);
                    (d, 0)
                }
                _ => node.children().into_iter().map(get).max().unwrap_or((0, 0)),
            };
            worst = worst.max(d.0.saturating_add(d.1));
            memo.insert(node.fingerprint(), d);
        }
    }
    worst
}

/// A part's model: the rounded parameter values, and the same with the bare arguments of elementary functions
/// inverted at the functions' model values ([`invert::inverted`]), when any are.
type PartValues = (Vec<(usize, ArgValue)>, Option<Vec<(usize, ArgValue)>>);

/// One Z3 check of a part, with `bindings` fixing some float parameters to values.
/// The log target that lists the conjuncts of every query part Z3 gave up on (`FOE_LOG=foe_gave_up=trace`).
const GAVE_UP: &str = "foe_gave_up";

fn check_part(
    sig: &FunctionSignature,
    part: &Part,
    domain: Option<&Domain>,
    bindings: &[(usize, f64)],
    timeout_ms: u32,
    limiter: &limit::Limiter<'_>,
) -> (Verdict, PartValues) {
    let started = Instant::now();
    let degree = part.degree;
    if degree > MAX_DEGREE {
        tracing::debug!(degree, "query part too high a degree for Z3");
        return (Verdict::Unknown, Default::default());
    }
    let underflow = part.conjuncts.iter().any(|c| {
        c.postorder().iter().any(|e| {
            matches!(
                e.kind(),
                sym::Kind::Exception {
                    kind: ExceptionKind::Underflow,
                    ..
                }
            )
        })
    });
    let int_params = !part.params.iter().all(|i| is_float_param(sig, *i));
    // The relaxation is tried first for an underflow whose only integers are integer parts and whose degree the
    // SMT core takes: on such queries (their thresholds are 2^-1022) Z3's SMT core answers within its budget
    // less often than nlsat, and spins far past it where it gives up (its units do not count its nonlinear work
    // and it heeds an interrupt late): 21% of the solver's time on 55 corpus files. On the other queries with
    // integer parts it answers within a few units, and a relaxation's models, fixed to integers, often fail.
    // Other queries are encoded exactly as they were before the relaxation existed. (The goals are encoded
    // before the constraints: Z3's term ids order nlsat's variables, so the order terms are made in shapes the
    // models.)
    let has_integer_parts = || {
        part.conjuncts.iter().any(|c| {
            c.postorder()
                .iter()
                .any(|e| matches!(e.kind(), sym::Kind::ToIntegral { .. }))
        })
    };
    let mut relaxed = None;
    if underflow && !int_params && degree <= MAX_INTEGER_DEGREE && has_integer_parts() {
        let mut relaxing = real::RealEncoder::relaxing_floors();
        let goals: Vec<Bool> = part.conjuncts.iter().map(|c| relaxing.formula(c)).collect();
        if !relaxing.uses_integers && !relaxing.relaxed.is_empty() {
            relaxed = Some((relaxing, goals));
        }
    }
    // The encoder before its goals, as locals: dropped in reverse order, the goals' terms are released before
    // the encoder's other terms, as they always were (when Z3's terms are released orders the ids of the terms
    // made after, and so the models of later queries).
    let (exact_encoder, exact_goals) = match relaxed {
        Some(_) => (None, None),
        None => {
            let (encoder, goals) = exact_encoding(part);
            (Some(encoder), Some(goals))
        }
    };
    // Whether nlsat decides it (the trace's field).
    let reals_only = relaxed.is_some()
        || !int_params && exact_encoder.as_ref().is_some_and(|e| !e.uses_integers);
    let constraints = input_constraints(sig, domain, &part.params, underflow);
    let fixed: Vec<Bool> = bindings
        .iter()
        .map(|&(i, v)| {
            let fmt = sig.params[i]
                .ty
                .float_format()
                .unwrap_or(FloatFormat::Double);
            Real::new_const(real::param_name(i as u32, VarType::Float(fmt)))
                .eq(Real::from_big_rational(&f64_to_rational(v)))
        })
        .collect();
    let extra: [&[Bool]; 2] = [&constraints, &fixed];
    let (solver, verdict) = if let Some((relaxing, goals)) = relaxed {
        check_relaxed(
            relaxing, &goals, part, int_params, &extra, timeout_ms, limiter,
        )
    } else {
        match check_exact(
            exact_encoder.as_ref().zip(exact_goals.as_deref()),
            part,
            int_params,
            &extra,
            timeout_ms,
            limiter,
        ) {
            Some(checked) => checked,
            None => return (Verdict::Unknown, Default::default()),
        }
    };
    tracing::trace!(
        degree,
        ms = started.elapsed().as_millis() as u64,
        ?verdict,
        reals_only,
        fixed = fixed.len(),
        underflow,
        params = part.params.len(),
        "real query part"
    );
    if verdict == Verdict::Unknown && tracing::enabled!(target: GAVE_UP, tracing::Level::TRACE) {
        for c in &part.conjuncts {
            tracing::trace!(target: GAVE_UP, "{c}");
        }
    }
    let model = match verdict {
        Verdict::Sat => solver.get_model(),
        _ => None,
    };
    match model {
        Some(model) => {
            let values = param_values(sig, &model, &part.params);
            let inverted = invert::inverted(sig, &model, &part.conjuncts, &values);
            (verdict, (values, inverted))
        }
        // Unsat under bindings says nothing about the part.
        None if verdict == Verdict::Sat || !bindings.is_empty() => {
            (Verdict::Unknown, Default::default())
        }
        None => (verdict, Default::default()),
    }
}

/// Checks a part with its integer parts relaxed ([`real::RealEncoder::relaxing_floors`], `relaxing` having
/// written `goals`), a model made integral by [`integral_model`]; where that gives no answer, the exact encoding
/// gets the rest of the budget.
fn check_relaxed(
    relaxing: real::RealEncoder,
    goals: &[Bool],
    part: &Part,
    int_params: bool,
    extra: &[&[Bool]],
    timeout_ms: u32,
    limiter: &limit::Limiter<'_>,
) -> (Solver, Verdict) {
    let spent_before = limiter.total_spent_ms();
    let solver = solver(true);
    for goal in goals
        .iter()
        .chain(&relaxing.side)
        .chain(extra.iter().copied().flatten())
    {
        solver.assert(goal);
    }
    let verdict = match limiter.check(&solver, timeout_ms) {
        SatResult::Sat => integral_model(&solver, &relaxing.relaxed, timeout_ms, limiter),
        SatResult::Unsat => Verdict::Unsat,
        SatResult::Unknown => Verdict::Unknown,
    };
    tracing::trace!(?verdict, "relaxed integer parts");
    let spent = (limiter.total_spent_ms() - spent_before) as u32;
    let budget_ms = timeout_ms.saturating_sub(spent);
    let exact = (verdict == Verdict::Unknown && budget_ms > 0)
        .then(|| check_exact(None, part, int_params, extra, budget_ms, limiter))
        .flatten();
    exact.unwrap_or((solver, verdict))
}

/// A part's goals in the exact encoding (integers as Z3's integers).
fn exact_encoding(part: &Part) -> (real::RealEncoder, Vec<Bool>) {
    let mut encoder = real::RealEncoder::new();
    let goals = part.conjuncts.iter().map(|c| encoder.formula(c)).collect();
    (encoder, goals)
}

/// Checks a part in its exact encoding (`encoded`, or made here): nlsat when it has no integers, else Z3's SMT
/// core, up to [`MAX_INTEGER_DEGREE`]; `None` when the part is not given to Z3. (A caller that made the encoding
/// keeps it until it has read the model: when Z3's terms are released orders the ids of the terms made after.)
fn check_exact(
    encoded: Option<(&real::RealEncoder, &[Bool])>,
    part: &Part,
    int_params: bool,
    extra: &[&[Bool]],
    budget_ms: u32,
    limiter: &limit::Limiter<'_>,
) -> Option<(Solver, Verdict)> {
    let made;
    let (encoder, goals) = match encoded {
        Some(encoded) => encoded,
        None => {
            made = exact_encoding(part);
            (&made.0, made.1.as_slice())
        }
    };
    let reals_only = !encoder.uses_integers && !int_params;
    if !reals_only && part.degree > MAX_INTEGER_DEGREE {
        // Nonlinear integer arithmetic of high degree: Z3's SMT core can spin in it without heeding interruption.
        tracing::debug!(
            degree = part.degree,
            "integer query part too high a degree for Z3"
        );
        return None;
    }
    let solver = solver(reals_only);
    for goal in goals
        .iter()
        .chain(&encoder.side)
        .chain(extra.iter().copied().flatten())
    {
        solver.assert(goal);
    }
    let verdict = match limiter.check(&solver, budget_ms) {
        SatResult::Sat => Verdict::Sat,
        SatResult::Unsat => Verdict::Unsat,
        SatResult::Unknown => Verdict::Unknown,
    };
    Some((solver, verdict))
}

/// A model of a query whose integer parts were relaxed ([`real::RealEncoder::relaxing_floors`]) in which every
/// stand-in is the integer part of its argument. When the relaxation's model is not one, each stand-in, innermost
/// first, is fixed to the integer part of its argument's value in the model (with the stand-ins inside it already
/// fixed): the integer parts the model's parameters give. The query is solved again with them all fixed, within
/// a quarter of the budget beside what the relaxation spent (a relaxation nlsat satisfies late would leave none):
/// its models are models of the query, in the cell of the parameters where the integer parts are those. A query
/// whose other conditions exclude that cell (a parity, a quadrant) is given up here. `Sat` leaves such a model in
/// `solver`.
fn integral_model(
    solver: &Solver,
    relaxed: &[(Real, Real)],
    timeout_ms: u32,
    limiter: &limit::Limiter<'_>,
) -> Verdict {
    let Some(model) = solver.get_model() else {
        return Verdict::Unknown;
    };
    let value = |t: &Real| {
        model
            .eval(t, true)
            .and_then(|v| real::model_rational(&v, FloatFormat::Double))
    };
    let mut fixed: Vec<(Real, Real)> = Vec::new();
    let mut integral = true;
    for (k, v) in relaxed {
        let pairs: Vec<(&Real, &Real)> = fixed.iter().map(|(k, n)| (k, n)).collect();
        let (Some(k_value), Some(v_value)) = (value(k), value(&v.substitute(&pairs))) else {
            return Verdict::Unknown;
        };
        let floor = v_value.floor();
        integral &= k_value == floor;
        fixed.push((k.clone(), Real::from_big_rational(&floor)));
    }
    if integral {
        return Verdict::Sat;
    }
    for (k, n) in &fixed {
        solver.assert(k.eq(n));
    }
    match limiter.check(solver, (timeout_ms / 4).max(1)) {
        SatResult::Sat => Verdict::Sat,
        _ => Verdict::Unknown,
    }
}

/// Steps of at most this many ulps are tried on each parameter of a rounded model that misses the exception.
const REPAIR_STEPS: [i64; 6] = [1, -1, 2, -2, 3, -3];
/// Then relative perturbations by these factors, which break accidental exactness (a model of 1.0 or 2^-1023
/// makes a product exact, and an exact result does not underflow).
const REPAIR_FACTORS: [f64; 8] = [
    1.0 + 1.0 / 3145728.0,
    1.0 - 1.0 / 3145728.0,
    1.0 + 1.0 / 5242880.0,
    1.0 - 1.0 / 5242880.0,
    1.0 + 1.0 / 3072.0,
    1.0 - 1.0 / 3072.0,
    1.0 + 1.0 / 7168.0,
    1.0 - 1.0 / 7168.0,
];

/// A neighbour (a few ulps or a small relative step away in one parameter) of `input` on which the query holds
/// in IEEE arithmetic.
pub(super) fn repair(formula: &Expr, input: &Input) -> Option<Input> {
    let params = formula.params();
    let variants = |v: &ArgValue| -> Vec<ArgValue> {
        match *v {
            ArgValue::F64(x) => REPAIR_STEPS
                .iter()
                .map(|k| step_f64(x, *k))
                .chain(REPAIR_FACTORS.iter().map(|f| x * f))
                .map(ArgValue::F64)
                .collect(),
            ArgValue::F32(x) => REPAIR_STEPS
                .iter()
                .map(|k| step_f32(x, *k))
                .chain(REPAIR_FACTORS.iter().map(|f| (x as f64 * f) as f32))
                .map(ArgValue::F32)
                .collect(),
            _ => vec![],
        }
    };
    for (index, _) in &params {
        let i = *index as usize;
        for v in variants(input.0.get(i)?) {
            if matches!(v, ArgValue::F64(x) if !x.is_finite())
                || matches!(v, ArgValue::F32(x) if !x.is_finite())
            {
                continue;
            }
            let mut values = input.0.clone();
            values[i] = v;
            if check::holds(formula, &values) == Some(true) {
                return Some(Input(values));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sym::{ArithOp, Integral};

    fn x() -> Expr {
        sym::param(0, VarType::Float(FloatFormat::Double))
    }

    fn floor_x() -> Expr {
        sym::to_integral(Integral::Floor, FloatFormat::Double, x())
    }

    /// The verdict on `formula` with its integer parts relaxed first, and the model's `x` when satisfiable.
    fn solve_relaxed(formula: &Expr) -> (Verdict, Option<f64>) {
        let sig = super::super::doubles(1);
        let results = limit::parallel(std::slice::from_ref(formula), 1, |f, limiter| {
            let part = independent_parts(f, &[]).remove(0);
            let mut relaxing = real::RealEncoder::relaxing_floors();
            let goals: Vec<Bool> = part.conjuncts.iter().map(|c| relaxing.formula(c)).collect();
            assert!(!relaxing.uses_integers && !relaxing.relaxed.is_empty());
            let (solver, verdict) =
                check_relaxed(relaxing, &goals, &part, false, &[], 100, limiter);
            let x = (verdict == Verdict::Sat).then(|| {
                let model = solver.get_model().expect("a model");
                match param_values(&sig, &model, &[0])[0].1 {
                    ArgValue::F64(v) => v,
                    other => panic!("{other:?}"),
                }
            });
            (verdict, x)
        });
        results.into_iter().next().flatten().expect("solved")
    }

    /// `e` to the fifth: a degree Z3's SMT core is not given, so only the relaxation answers.
    fn fifth_power(e: Expr) -> Expr {
        (0..4).fold(e.clone(), |p, _| {
            sym::arith(ArithOp::Mul, FloatFormat::Double, p, e.clone())
        })
    }

    #[test]
    fn a_query_on_an_integer_part_is_solved_with_an_integral_model() {
        // (x - floor(x))^5 > (3/4)^5 with 1000 < x < 1001: the relaxation admits floor(x) = 1000.5, the query
        // does not.
        let fraction = sym::arith(ArithOp::Sub, FloatFormat::Double, x(), floor_x());
        let formula = sym::and([
            sym::lt(sym::real_f64(0.75f64.powi(5)), fifth_power(fraction)),
            sym::lt(sym::real_i(1000), x()),
            sym::lt(x(), sym::real_i(1001)),
        ]);
        let (verdict, x) = solve_relaxed(&formula);
        assert_eq!(verdict, Verdict::Sat);
        let x = x.expect("a model");
        assert!(x > 1000.75 && x < 1001.0, "{x}");
    }

    #[test]
    fn integers_computed_from_integer_parts_are_relaxed_and_fixed_innermost_first() {
        // j = (int) floor(x) and j & 1 = j - 2 floor(j / 2) (as a mask is modelled), relaxed; the model's cell
        // must give (x - floor(x))^5 > (3/4)^5, with 1000 < x < 1004.
        let j = sym::fp_to_int(32, true, floor_x());
        let half = sym::floor_pow2(32, j.clone(), 1);
        let low_bit = sym::int_arith(
            sym::IntOp::Sub,
            32,
            j,
            sym::int_arith(sym::IntOp::Mul, 32, sym::int_i(2), half),
        );
        let fraction = sym::arith(ArithOp::Sub, FloatFormat::Double, x(), floor_x());
        let formula = sym::and([
            sym::le(sym::int_i(0), low_bit.clone()),
            sym::le(low_bit, sym::int_i(1)),
            sym::lt(sym::real_f64(0.75f64.powi(5)), fifth_power(fraction)),
            sym::lt(sym::real_i(1000), x()),
            sym::lt(x(), sym::real_i(1004)),
        ]);
        let (verdict, x) = solve_relaxed(&formula);
        assert_eq!(verdict, Verdict::Sat);
        let x = x.expect("a model");
        assert!(x > 1000.75 && x < 1004.0 && x - x.floor() > 0.75, "{x}");
    }

    #[test]
    fn a_relaxation_without_an_integral_model_is_no_model_and_its_refutation_refutes() {
        // 2 floor(x) = 1 holds for the relaxed floor 1/2 and for no integer: the exact encoding decides it.
        let twice = sym::arith(ArithOp::Mul, FloatFormat::Double, sym::real_i(2), floor_x());
        assert_eq!(
            solve_relaxed(&sym::eq(twice.clone(), sym::real_i(1))).0,
            Verdict::Unsat
        );
        // Of a degree the SMT core is not given, nothing is known.
        let (verdict, _) = solve_relaxed(&sym::eq(fifth_power(twice), sym::real_i(1)));
        assert_eq!(verdict, Verdict::Unknown);
        // floor(x)^5 > x^5: the relaxation is refuted, so the query is.
        let (verdict, _) = solve_relaxed(&sym::lt(fifth_power(x()), fifth_power(floor_x())));
        assert_eq!(verdict, Verdict::Unsat);
    }
}
