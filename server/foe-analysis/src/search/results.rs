//! Results, not only exceptions: how the two builds' outputs (the return value and what a run wrote through its
//! pointer parameters) differ on one input, and the special values every search also tries as inputs (NaN,
//! infinities, signed zeros, subnormals, the edges of the normal range), where `-ffinite-math-only` and
//! flush-to-zero change what a function computes.

use crate::accuracy::{self, Exact, ExactValue, PathOutputs};
use crate::exec::{RawRun, Runner};
use crate::report::{DivergenceClass, Reference, ResultDifference, RunEnd, Scalar};
use crate::types::{ArgValue, FunctionSignature, Input, ParamType, SourceLoc};
use std::collections::HashMap;

/// Compares what two runs that both returned produced: a category change (NaN, infinite, zero, finite) or a
/// different integer in any output is a special-value difference; otherwise finite floats that differ by at
/// least `accuracy_bits` bits (log2 of one plus the floats between them) are an accuracy difference. The output
/// that differs most is the one reported (the return value first among equals).
pub fn compare(p: &RunEnd, pp: &RunEnd, accuracy_bits: u32) -> Option<ResultDifference> {
    let (RunEnd::Returned { .. }, RunEnd::Returned { .. }) = (p, pp) else {
        return None;
    };
    let mut pairs: Vec<(Option<&str>, Scalar, Scalar)> = vec![];
    if let (Some(a), Some(b)) = (p.value(), pp.value()) {
        pairs.push((None, a, b));
    }
    for (a, b) in p.outputs().iter().zip(pp.outputs()) {
        if a.name == b.name {
            pairs.push((Some(&a.name), a.value, b.value));
        }
    }
    let mut best: Option<(u8, u64, ResultDifference)> = None;
    for (output, a, b) in pairs {
        if a.same(b) {
            continue;
        }
        let special = match (a.class(), b.class()) {
            (Some(x), Some(y)) => x != y,
            _ => true, // integers (a count, a flag, what `isnan` returned) differ
        };
        let ulps = a.ulps(b);
        let (class, order, weight) = if special {
            (DivergenceClass::SpecialValue, 0, 0)
        } else {
            let Some(u) = ulps.filter(|&u| bits(u) >= accuracy_bits as f64) else {
                continue;
            };
            (DivergenceClass::Accuracy, 1, u64::MAX - u)
        };
        let better = best
            .as_ref()
            .is_none_or(|(o, w, _)| (order, weight) < (*o, *w));
        if better {
            best = Some((
                order,
                weight,
                ResultDifference {
                    class,
                    output: output.map(String::from),
                    plain: a,
                    fast_math: b,
                    ulps,
                    reference: None,
                },
            ));
        }
    }
    best.map(|(_, _, d)| d)
}

/// How far apart two builds' results are, in bits (log2 of one plus the floats between the outputs that differ
/// most): infinite when an output changes category, an integer differs or the runs end differently, 0 when they
/// agree, `None` when a run did not complete. What the search aimed at results maximises.
pub fn bits_apart(p: &RunEnd, pp: &RunEnd) -> Option<f64> {
    match (p, pp) {
        (RunEnd::Returned { .. }, RunEnd::Returned { .. }) => Some(match compare(p, pp, 0) {
            None => 0.0,
            Some(d) if d.class == DivergenceClass::Accuracy => d.ulps.map_or(0.0, bits),
            Some(_) => f64::INFINITY,
        }),
        _ if endings_differ(p, pp) => Some(f64::INFINITY),
        (RunEnd::Stopped { .. }, RunEnd::Stopped { .. }) => Some(0.0),
        _ => None,
    }
}

/// Whether two runs end differently: one stops at a call foe does not run where the other returns, or they stop
/// at different calls ([`DivergenceClass::Ending`]). Runs that crashed or timed out are not compared.
pub fn endings_differ(p: &RunEnd, pp: &RunEnd) -> bool {
    match (p, pp) {
        (RunEnd::Stopped { callee: a, .. }, RunEnd::Stopped { callee: b, .. }) => a != b,
        (RunEnd::Stopped { .. }, RunEnd::Returned { .. })
        | (RunEnd::Returned { .. }, RunEnd::Stopped { .. }) => true,
        _ => false,
    }
}

/// Where an [`DivergenceClass::Ending`] divergence is flagged: the call where the plain build stops, else the
/// one where the fast-math build stops.
pub fn where_endings_part(p: &RunEnd, pp: &RunEnd) -> Option<SourceLoc> {
    [p, pp].into_iter().find_map(|end| match end {
        RunEnd::Stopped {
            line: Some(line),
            column,
            ..
        } => Some(SourceLoc {
            line: *line,
            column: column.unwrap_or(0),
        }),
        _ => None,
    })
}

/// The words of an [`DivergenceClass::Ending`] divergence: `the plain build calls `gsl_error` (line 12:5), the
/// fast-math build returns 0.5`.
pub fn ending_summary(p: &RunEnd, pp: &RunEnd) -> String {
    let said = |end: &RunEnd| match end {
        RunEnd::Stopped { callee, .. } => format!("calls `{callee}`"),
        RunEnd::Returned { value: Some(v), .. } => format!("returns {} without it", v.short()),
        _ => "returns without it".into(),
    };
    match (p, pp) {
        (RunEnd::Stopped { .. }, _) => {
            format!(
                "the plain build {}, the fast-math build {}",
                said(p),
                said(pp)
            )
        }
        _ => format!(
            "the fast-math build {}, the plain build {}",
            said(pp),
            said(p)
        ),
    }
}

fn bits(ulps: u64) -> f64 {
    ((ulps as f64) + 1.0).log2()
}

/// The real-number result of the differing output on the path `input` takes in P (evaluated in MPFR over the
/// model's terms, [`accuracy::exact_outputs`]) and each build's error against it; `p_end` names where the output
/// lives.
pub fn reference(
    d: &ResultDifference,
    p_end: &RunEnd,
    paths: &[PathOutputs],
    sig: &FunctionSignature,
    input: &Input,
) -> Reference {
    if non_finite(input) {
        return Reference::None {
            why: "a NaN or infinite input has no real-number value".into(),
        };
    }
    let (ret, writes) = match accuracy::exact_outputs(paths, sig, input) {
        Exact::Known { ret, writes } => (ret, writes),
        Exact::NoReference(why) => {
            return Reference::None {
                why: why.to_string(),
            }
        }
    };
    let exact: Option<ExactValue> = match &d.output {
        None => ret,
        Some(name) => p_end
            .outputs()
            .iter()
            .find(|o| &o.name == name)
            .and_then(|o| {
                writes
                    .iter()
                    .find(|(param, offset, _)| *param == o.param && *offset == o.offset)
                    .map(|(_, _, v)| v.clone())
            }),
    };
    let Some(exact) = exact else {
        return Reference::None {
            why: "the model does not know what the path leaves in this output".into(),
        };
    };
    let bits = |v: Scalar| match v {
        Scalar::F32(x) => accuracy::bits_of_error_f32(x, &exact),
        other => accuracy::bits_of_error_f64(other.as_f64(), &exact),
    };
    let value = match d.plain {
        Scalar::F32(_) => Scalar::F32(exact.rounded() as f32).short(),
        Scalar::F64(_) => Scalar::F64(exact.rounded()).short(),
        _ => exact.to_string(),
    };
    Reference::Exact {
        value,
        zero: exact.is_zero(),
        bits_plain: bits(d.plain),
        bits_fast_math: bits(d.fast_math),
    }
}

/// Ariadne's classification of an overflow or underflow the plain build raises on `input`: avoidable when the
/// function's real-number result (its return value, on the path the input takes) is a normal float (finite, and
/// at least the smallest normal in magnitude); `None` for the other kinds and functions without a float result.
pub fn avoidability(
    kind: crate::types::ExceptionKind,
    paths: &[PathOutputs],
    sig: &FunctionSignature,
    input: &Input,
) -> Option<crate::report::Avoidability> {
    use crate::report::Avoidability;
    use crate::types::{ExceptionKind, ReturnType};
    if !matches!(kind, ExceptionKind::Overflow | ExceptionKind::Underflow) {
        return None;
    }
    let (fmt_min, fmt) = match sig.ret {
        ReturnType::F64 => (f64::MIN_POSITIVE, crate::round::FloatFormat::Double),
        ReturnType::F32 => (f32::MIN_POSITIVE as f64, crate::round::FloatFormat::Single),
        _ => return None,
    };
    let exact = match accuracy::exact_outputs(paths, sig, input) {
        Exact::Known { ret: Some(v), .. } => v,
        Exact::Known { ret: None, .. } => {
            return Some(Avoidability::Unknown(
                "the model has no return value".into(),
            ))
        }
        Exact::NoReference(why) => return Some(Avoidability::Unknown(why.to_string())),
    };
    // Ariadne's criterion (thesis 5.2): the real result lies in [-Ω, Ω] and its magnitude is at least λ, the
    // smallest normal (so a result of exactly 0 is not avoidable either).
    let rounded = exact.round_to(fmt);
    let representable = rounded.is_finite() && rounded.abs() >= fmt_min;
    Some(if representable {
        Avoidability::Avoidable
    } else {
        Avoidability::Unavoidable
    })
}

/// Where the two builds' values first part on `input`: both builds run again recording each operation's value;
/// walking P's operations in execution order, the n-th value at a source location is compared with the fast-math
/// build's n-th value there. For a special-value divergence the first location whose values fall in different
/// categories (or whose comparisons answer differently), else the first comparison P makes that the fast-math
/// build no longer makes (a folded `isnan`), else the first operation it no longer computes (a compensation term
/// folded away); for an accuracy divergence the first location whose values are at least `accuracy_bits` bits
/// apart, else the first operation the fast-math build no longer computes (`(x + c) - c` folded to `x`), else the
/// location whose values lie the most floats apart. `None` when nothing tells (the function's declaration is
/// flagged then).
pub fn where_values_part(
    runner: &mut Runner,
    sig: &FunctionSignature,
    input: &Input,
    class: DivergenceClass,
    accuracy_bits: u32,
) -> Option<SourceLoc> {
    let pair = runner.values(&sig.name, input).ok()?;
    let values = |run: &RawRun| -> Vec<(SourceLoc, Scalar, bool)> {
        run.values
            .iter()
            .filter_map(|v| {
                let site = runner.sites().get(v.param)?;
                let loc = SourceLoc {
                    line: site.line?,
                    column: site.column.unwrap_or(0),
                };
                let value = site.value?.read(&v.word.to_le_bytes())?;
                Some((loc, value, site.operation.starts_with("fcmp")))
            })
            .collect()
    };
    let (p, pp) = (values(&pair.p), values(&pair.pp));
    let mut at: HashMap<SourceLoc, Vec<Scalar>> = HashMap::new();
    for (loc, v, _) in &pp {
        at.entry(*loc).or_default().push(*v);
    }
    let mut seen: HashMap<SourceLoc, usize> = HashMap::new();
    let mut missing_comparison = None;
    let mut missing = None;
    let mut furthest: Option<(u64, SourceLoc)> = None;
    for (loc, v, comparison) in &p {
        let n = seen.entry(*loc).or_default();
        let other = at.get(loc).and_then(|vs| vs.get(*n)).copied();
        *n += 1;
        let Some(w) = other else {
            if at.contains_key(loc) {
                continue;
            }
            if *comparison {
                missing_comparison.get_or_insert(*loc);
            }
            missing.get_or_insert(*loc);
            continue;
        };
        let parts = match class {
            DivergenceClass::Accuracy => {
                let ulps = v.ulps(w);
                if let Some(u) = ulps.filter(|&u| u > 0 && furthest.is_none_or(|(f, _)| u > f)) {
                    furthest = Some((u, *loc));
                }
                ulps.is_some_and(|u| ((u as f64) + 1.0).log2() >= accuracy_bits as f64)
            }
            _ => match (v.class(), w.class()) {
                (Some(a), Some(b)) => a != b,
                _ => !v.same(w),
            },
        };
        if parts {
            return Some(*loc);
        }
    }
    match class {
        DivergenceClass::Accuracy => missing.or(furthest.map(|(_, loc)| loc)),
        _ => missing_comparison.or(missing),
    }
}

/// The special doubles every search tries for each float input: NaN, ±infinity, ±0, the smallest and largest
/// subnormal, the smallest normal and the largest finite value (both signs where the sign matters).
const SPECIAL_F64: [f64; 12] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    f64::from_bits(1),
    f64::from_bits((1 << 52) - 1),
    -f64::from_bits((1 << 52) - 1),
    f64::MIN_POSITIVE,
    -f64::MIN_POSITIVE,
    f64::MAX,
    f64::MIN,
];

const SPECIAL_F32: [f32; 12] = [
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    f32::from_bits(1),
    f32::from_bits((1 << 23) - 1),
    -f32::from_bits((1 << 23) - 1),
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    f32::MAX,
    f32::MIN,
];

/// Ordinary magnitudes tried in each float input with the others at 1 (or the first candidates' values): where a
/// compensation term or a cancelled sum is lost at inputs a caller passes every day, not only at the range's edges.
const ORDINARY: [f64; 7] = [1e-20, 1e-8, 0.1, 0.7, 3.0, 1e8, 1e20];

/// Most special-value inputs one function's search runs.
pub const MAX_SPECIAL_INPUTS: usize = 512;

/// The special-value inputs of a function, deterministically: for each base input (the first candidates, then
/// ordinary values), each float input (parameters and values read through pointers) set to each special value
/// in turn, the other coordinates kept; then every float input set to the same special value at once. At most
/// [`MAX_SPECIAL_INPUTS`], distinct.
pub fn special_inputs(sig: &FunctionSignature, bases: &[&Input]) -> Vec<Input> {
    let floats: Vec<usize> = sig
        .params
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p.ty, ParamType::F64 | ParamType::F32))
        .map(|(i, _)| i)
        .collect();
    let special = |ty: ParamType, k: usize| match ty {
        ParamType::F32 => ArgValue::F32(SPECIAL_F32[k]),
        _ => ArgValue::F64(SPECIAL_F64[k]),
    };
    let ordinary = |ty: ParamType, x: f64| match ty {
        ParamType::F32 => ArgValue::F32(x as f32),
        _ => ArgValue::F64(x),
    };
    // Every float at 1, integers as the first base has them.
    let ones = bases.first().map(|b| {
        Input(
            b.0.iter()
                .zip(&sig.params)
                .map(|(v, p)| match p.ty {
                    ParamType::F64 | ParamType::F32 => ordinary(p.ty, 1.0),
                    _ => *v,
                })
                .collect(),
        )
    });
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![];
    let mut push = |input: Input, out: &mut Vec<Input>| {
        if out.len() < MAX_SPECIAL_INPUTS && seen.insert(input.key()) {
            out.push(input);
        }
    };
    for base in ones.iter().chain(bases.iter().copied()) {
        for &x in &ORDINARY {
            for &i in &floats {
                let mut values = base.0.clone();
                values[i] = ordinary(sig.params[i].ty, x);
                push(Input(values), &mut out);
            }
        }
    }
    for base in bases {
        for k in 0..SPECIAL_F64.len() {
            for &i in &floats {
                let mut values = base.0.clone();
                values[i] = special(sig.params[i].ty, k);
                push(Input(values), &mut out);
            }
        }
        if floats.len() > 1 {
            for k in 0..SPECIAL_F64.len() {
                let mut values = base.0.clone();
                for &i in &floats {
                    values[i] = special(sig.params[i].ty, k);
                }
                push(Input(values), &mut out);
            }
        }
    }
    out
}

/// Whether an input holds a NaN or an infinity (a finding that needs one is shown by how the function treats
/// such values: a warning where it tests for them, a hint otherwise).
pub fn non_finite(input: &Input) -> bool {
    input.0.iter().any(|v| match v {
        ArgValue::F64(x) => !x.is_finite(),
        ArgValue::F32(x) => !x.is_finite(),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Output;
    use crate::scalar::ScalarType;
    use crate::types::Param;

    fn ret(v: f64) -> RunEnd {
        RunEnd::returned(Some(Scalar::F64(v)))
    }

    #[test]
    fn a_category_change_is_a_special_value_and_last_bits_are_not_reported() {
        let d = compare(&ret(1.27e308), &ret(f64::INFINITY), 20).expect("differs");
        assert_eq!(d.class, DivergenceClass::SpecialValue);
        assert_eq!(d.output, None);
        assert!(compare(&ret(1.0), &ret(1.0 + f64::EPSILON), 20).is_none());
        assert!(compare(&ret(f64::NAN), &ret(-f64::NAN), 20).is_none());
        let far = compare(&ret(1.0), &ret(1.0 + 1e-6), 20).expect("20 bits apart");
        assert_eq!(far.class, DivergenceClass::Accuracy);
        assert!(far.bits().unwrap() >= 20.0);
    }

    #[test]
    fn bits_apart_is_what_the_aimed_search_climbs() {
        assert_eq!(bits_apart(&ret(1.0), &ret(1.0)), Some(0.0));
        assert_eq!(bits_apart(&ret(1.0), &ret(1.0 + f64::EPSILON)), Some(1.0));
        let far = bits_apart(&ret(1.0), &ret(1.0 + 1e-6)).expect("both returned");
        assert!((32.0..34.0).contains(&far), "{far}");
        assert_eq!(bits_apart(&ret(1.0), &ret(f64::NAN)), Some(f64::INFINITY));
        assert_eq!(
            bits_apart(&ret(1.0), &RunEnd::TimedOut { limit_ms: 1 }),
            None
        );
    }

    #[test]
    fn a_lost_compensation_term_is_reported_on_its_output() {
        let out = |v: f64| Output {
            name: "*err".into(),
            value: Scalar::F64(v),
            param: 2,
            offset: 0,
            ty: ScalarType::F64,
        };
        let p = RunEnd::Returned {
            value: Some(Scalar::F64(1.0)),
            outputs: vec![out(1e-20)],
        };
        let pp = RunEnd::Returned {
            value: Some(Scalar::F64(1.0)),
            outputs: vec![out(0.0)],
        };
        let d = compare(&p, &pp, 20).expect("the error term is lost");
        assert_eq!(d.class, DivergenceClass::SpecialValue);
        assert_eq!(d.output.as_deref(), Some("*err"));
        assert_eq!(d.fast_math, Scalar::F64(0.0));
    }

    #[test]
    fn a_folded_nan_check_is_flagged_where_the_plain_build_tests() {
        let src = "#include <math.h>\ndouble f(double x) {\n  if (isnan(x))\n    return 0.0;\n  return x * 2.0;\n}\n\
                   double g(double a, double b, double *err) {\n  double s = a + b;\n  double bb = s - a;\n  \
                   *err = (a - (s - bb)) + (b - bb);\n  return s;\n}\n";
        let cfg = crate::config::AnalysisConfig::default();
        let (mut runner, sigs) = crate::exec::testutil::runner(src, &cfg);
        let f = sigs.iter().find(|s| s.name == "f").expect("f");
        let nan = Input(vec![ArgValue::F64(f64::NAN)]);
        let pair = runner.run("f", std::slice::from_ref(&nan)).expect("runs");
        let d = compare(&pair[0].p.end, &pair[0].pp.end, 20).expect("the check is folded");
        assert_eq!(d.class, DivergenceClass::SpecialValue);
        let loc = where_values_part(&mut runner, f, &nan, d.class, 20).expect("a place");
        assert_eq!(
            loc.line, 3,
            "the isnan test, which the fast-math build no longer makes"
        );
        // TwoSum: the compensation is computed from line 9 on in the plain build only.
        let g = sigs.iter().find(|s| s.name == "g").expect("g");
        let input = Input(vec![
            ArgValue::F64(1.0),
            ArgValue::F64(1e-20),
            ArgValue::OutPtr,
        ]);
        let pair = runner.run("g", std::slice::from_ref(&input)).expect("runs");
        let d = compare(&pair[0].p.end, &pair[0].pp.end, 20).expect("the error term is lost");
        assert_eq!(d.output.as_deref(), Some("*err"));
        let loc = where_values_part(&mut runner, g, &input, d.class, 20).expect("a place");
        assert_eq!(loc.line, 9, "bb = s - a, where the compensation starts");
    }

    #[test]
    fn special_inputs_vary_one_float_at_a_time_then_all() {
        let sig = FunctionSignature {
            name: "f".into(),
            params: vec![
                Param::new("x", ParamType::F64),
                Param::new("n", ParamType::INT),
                Param::new("y", ParamType::F32),
            ],
            ret: crate::types::ReturnType::F64,
        };
        let base = Input(vec![
            ArgValue::F64(1.0),
            ArgValue::Int(2),
            ArgValue::F32(0.5),
        ]);
        let inputs = special_inputs(&sig, &[&base]);
        // Ordinary magnitudes around all-ones and around the base, then the special values.
        // Around all-ones 7 * 2; around the base 7 more (its `y` changed repeats an all-ones input).
        let ordinary = 7 * 2 + 7;
        assert_eq!(inputs.len(), ordinary + 12 * 2 + 12, "{inputs:?}");
        let nan = &inputs[ordinary];
        assert!(nan.0[0].bits() == f64::NAN.to_bits() && nan.0[1] == ArgValue::Int(2));
        assert!(inputs.iter().all(|i| i.0[1] == ArgValue::Int(2)));
        assert!(non_finite(nan) && !non_finite(&base) && !non_finite(&inputs[0]));
    }
}
