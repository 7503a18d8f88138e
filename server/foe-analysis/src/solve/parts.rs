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
use z3::ast::{Bool, Real};
use z3::{SatResult, Solver};

/// A solver without Z3 timers (see [`limit`]): nlsat (with its preprocessing) for pure real queries, several
/// times faster on these than the default portfolio; the SMT core when integers occur.
fn solver(reals_only: bool) -> Solver {
    let mut params = z3::Params::new();
    let solver = if reals_only {
        // Z3's own `qfnra-nlsat` tactic, with nlsat's conflict resolution not factoring polynomials (`factor`):
        // with the huge coefficients of Ω and λ it costs more than it saves. (Spelling the tactic's pipeline out
        // without its `factor` tactic was faster with Z3 4.8.12; with 5.4.1 that pipeline answers `unknown` on
        // most of carbongas's queries within 1 % of their budget, so the tactic is used as Z3 ships it.)
        params.set_bool("factor", false);
        // Nor with Z3 5.4's levelwise cell projection (`lws`): with it sici.c's solver process crashed in two runs
        // of three, without it in none of nine on the same build, and it is no faster on these queries.
        // (Interrupts can still corrupt nlsat's heap without it: see `limit.rs`.)
        params.set_bool("lws", false);
        z3::Tactic::new("qfnra-nlsat").solver()
    } else {
        // Without bound propagation (`arith.propagation_mode` 0): with it, the non-linear solver tightens the
        // bounds of monomials by taking roots of the finite-range bounds (Ω, some 10^308) and the underflow
        // thresholds in Z3's own big-number arithmetic, which counts no resource units and does not look at the
        // interrupt flag: Cephes `exp10.c`'s underflow queries (an integer part of one parameter) ran 420-560 ms
        // of CPU on a 50 ms budget each, and are answered in 7-9 ms without it.
        params.set_u32("arith.propagation_mode", 0);
        z3::Tactic::new("smt").solver()
    };
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
            return RealResult::without_input(verdict, verdict == Verdict::Unknown && floats > 1);
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
    if check::holds(formula, &input.0) != Some(false) {
        return RealResult::satisfied(input, false);
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
            return RealResult::satisfied(found, false);
        }
    }
    match repair(formula, &input) {
        // A neighbour of the rounded model raises it: Ariadne's findFloat step.
        Some(repaired) => RealResult::satisfied(repaired, false),
        None => RealResult::satisfied(input, true),
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
                sym::Kind::Exception { .. } => {
                    let d = rational_degree(&[sym::atom_condition(&node).expect("an atom")]);
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
    let mut encoder = real::RealEncoder::new();
    let goals: Vec<Bool> = part.conjuncts.iter().map(|c| encoder.formula(c)).collect();
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
    let reals_only = !encoder.uses_integers && part.params.iter().all(|i| is_float_param(sig, *i));
    if !reals_only && degree > MAX_INTEGER_DEGREE {
        // Nonlinear integer arithmetic of high degree: Z3's SMT core can spin in it without heeding interruption.
        tracing::debug!(degree, "integer query part too high a degree for Z3");
        return (Verdict::Unknown, Default::default());
    }
    let solver = solver(reals_only);
    for goal in goals
        .iter()
        .chain(&encoder.side)
        .chain(&constraints)
        .chain(&fixed)
    {
        solver.assert(goal);
    }
    let verdict = match limiter.check(&solver, timeout_ms) {
        SatResult::Sat => Verdict::Sat,
        SatResult::Unsat => Verdict::Unsat,
        SatResult::Unknown => Verdict::Unknown,
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

    /// Cephes `exp10.c`'s underflow query (`FOE_DUMP_STOPPED`): `px = x - n*C` with the integer part
    /// `n = floor(x*log2(10) + 1/2)`, and `(P + px^2) * px^2` below 2^-1022; every value within ±Ω.
    fn exp10_underflow_query() -> String {
        let [omega, normal, subnormal] = super::super::binary64_limits();
        "(declare-fun x0 () Real) \
         (assert (not (< (/ 2711437152599295.0 8796093022208.0) x0))) \
         (assert (not (< x0 (- (/ 2711437152599295.0 8796093022208.0))))) \
         (assert (let ((n (to_real (to_int (+ (* x0 (/ 7480317065143153.0 2251799813685248.0)) (/ 1.0 2.0)))))) \
           (let ((px2 (* (- x0 (* n (/ 5422874305198591.0 18014398509481984.0))) \
                         (- x0 (* n (/ 5422874305198591.0 18014398509481984.0)))))) \
           (let ((v (* (+ (/ 748491362679105.0 8796093022208.0) px2) px2))) \
           (and (<= (+ (/ 748491362679105.0 8796093022208.0) px2) M.0) \
                (<= (- M.0) (+ (/ 748491362679105.0 8796093022208.0) px2)) \
                (<= px2 M.0) (<= (- M.0) px2) \
                (or (and (< 0.0 v) (< v (/ 1.0 N.0))) (and (< (- (/ 1.0 N.0)) v) (< v 0.0)))))))) \
         (assert (<= x0 M.0)) (assert (>= x0 (- M.0))) \
         (assert (or (= x0 0.0) (>= x0 (/ 1.0 S.0)) (<= x0 (- (/ 1.0 S.0)))))"
            .replace("M.0", &format!("{omega}.0"))
            .replace("N.0", &format!("{normal}.0"))
            .replace("S.0", &format!("{subnormal}.0"))
    }

    #[test]
    fn an_integer_part_query_with_the_formats_bounds_is_answered_within_its_budget() {
        let results = limit::parallel(&[()], 1, |_, limiter| {
            let solver = solver(false);
            solver.from_string(exp10_underflow_query());
            let verdict = limiter.check(&solver, 50);
            (verdict, limiter.last_spent_ms())
        });
        let (verdict, spent) = results[0].expect("ran");
        assert_eq!(
            verdict,
            SatResult::Sat,
            "gave up after {spent} ms of budget"
        );
    }
}
