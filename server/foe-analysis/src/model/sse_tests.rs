//! Modelling SSE code: `__m128` and `__m128d` passed and returned by value, the `_mm_*` operations clang turns
//! into IR vector operations and the `llvm.x86.sse.*` calls it leaves (min, max, rsqrt, rcp, movmsk), and blends
//! by comparison masks. Real clang, real Z3, as in `tests.rs`.

use super::tests::{analyse, build, model_both, Analysed};
use crate::config::AnalysisConfig;
use crate::types::{ArgValue, ExceptionKind};

const HEADER: &str = "#include <emmintrin.h>\n";

/// The single-precision lanes of a candidate, in parameter order (pointers left out).
fn lanes(input: &[ArgValue]) -> Vec<f32> {
    input
        .iter()
        .filter(|v| !matches!(v, ArgValue::OutPtr))
        .map(|v| match v {
            ArgValue::F32(x) => *x,
            other => panic!("not a float lane: {other:?}"),
        })
        .collect()
}

/// `function` of `body` modelled in both builds: no path stopped, nothing skipped.
fn analysed_whole(body: &str, function: &str) -> Analysed {
    let source = format!("{HEADER}{body}");
    let pair = model_both(&build(&source), function, &AnalysisConfig::default()).expect("model");
    assert!(pair.path_stops.is_empty(), "{:?}", pair.path_stops);
    analyse(&source, function)
}

/// Overflow candidates of `a`: every one really overflows when `overflows` computes it in `float`.
fn overflow_candidates(a: &Analysed, overflows: impl Fn(&[f32]) -> bool) -> usize {
    let found: Vec<Vec<f32>> = a
        .outcome
        .candidates
        .iter()
        .filter(|c| c.kind == ExceptionKind::Overflow)
        .map(|c| lanes(&c.input.0))
        .collect();
    for input in &found {
        assert!(overflows(input), "no overflow at {input:?}");
    }
    found.len()
}

#[test]
fn vectors_by_value_are_a_lane_per_input() {
    let body = "
__m128 twice(__m128 a) { return _mm_add_ps(a, a); }
__m128d sum(__m128d a, __m128d b) { return _mm_add_pd(a, b); }
";
    let a = analysed_whole(body, "twice");
    let names: Vec<&str> = a.sig.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a[0]", "a[1]", "a[2]", "a[3]"]);
    // Two queries (overflow, underflow) per lane in each build.
    assert_eq!((a.p.len(), a.pp.len()), (8, 8));
    let d = analysed_whole(body, "sum");
    let names: Vec<&str> = d.sig.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a[0]", "a[1]", "b[0]", "b[1]"]);
    assert!(d.sig.params.iter().all(|p| p.by_value.is_some()));
}

#[test]
fn min_and_max_are_the_sse_definitions() {
    // Twice the larger lane overflows only where one of them is past half the largest float; twice the smaller
    // only where both are.
    let body = "
__m128 twice_max(__m128 a, __m128 b) { return _mm_mul_ps(_mm_max_ps(a, b), _mm_set1_ps(2.0f)); }
__m128 twice_min(__m128 a, __m128 b) { return _mm_mul_ps(_mm_min_ps(a, b), _mm_set1_ps(2.0f)); }
";
    let a = analysed_whole(body, "twice_max");
    let n = overflow_candidates(&a, |x| {
        (0..4).any(|i| (x[i].max(x[i + 4]) * 2.0).is_infinite())
    });
    assert!(n > 0, "{:?}", a.outcome);
    let b = analysed_whole(body, "twice_min");
    let n = overflow_candidates(&b, |x| {
        (0..4).any(|i| (x[i].min(x[i + 4]) * 2.0).is_infinite())
    });
    assert!(n > 0, "{:?}", b.outcome);
}

#[test]
fn reciprocal_estimates_are_the_values_they_estimate_and_raise_nothing() {
    // rsqrt and rcp raise no exception: the only queries are the product's (two per lane).
    let body = "
__m128 scaled_rsqrt(__m128 a) { return _mm_mul_ps(_mm_rsqrt_ps(a), _mm_set1_ps(1e30f)); }
__m128 scaled_rcp(__m128 a) { return _mm_mul_ps(_mm_rcp_ps(a), _mm_set1_ps(1e30f)); }
";
    let a = analysed_whole(body, "scaled_rsqrt");
    assert_eq!(a.p.len(), 8);
    // 1e30/sqrt(a) overflows for a below about 1e-17, as the real value says.
    let n = overflow_candidates(&a, |x| {
        (0..4).any(|i| x[i] > 0.0 && ((1e30f64 / (x[i] as f64).sqrt()) as f32).is_infinite())
    });
    assert!(n > 0, "{:?}", a.outcome);
    let b = analysed_whole(body, "scaled_rcp");
    assert_eq!(b.p.len(), 8);
    let n = overflow_candidates(&b, |x| {
        (0..4).any(|i| x[i] != 0.0 && ((1e30f64 / x[i] as f64) as f32).is_infinite())
    });
    assert!(n > 0, "{:?}", b.outcome);
}

#[test]
fn a_blend_by_a_comparison_mask_is_a_select() {
    // The blend picks the larger lane (`a > b ? a : b`, as `_mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b))`).
    let body = "
__m128 twice_larger(__m128 a, __m128 b) {
  __m128 m = _mm_cmpgt_ps(a, b);
  __m128 larger = _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b));
  return _mm_mul_ps(larger, _mm_set1_ps(2.0f));
}
";
    let a = analysed_whole(body, "twice_larger");
    let n = overflow_candidates(&a, |x| {
        (0..4).any(|i| ((if x[i] > x[i + 4] { x[i] } else { x[i + 4] }) * 2.0).is_infinite())
    });
    assert!(n > 0, "{:?}", a.outcome);
}

#[test]
fn the_sign_of_lanes_and_movemask_are_followed() {
    // `_mm_xor_ps` with -0.0 negates; `_mm_movemask_ps` of a comparison is its lanes' conditions.
    let body = "
__m128 negated_twice(__m128 a) { return _mm_mul_ps(_mm_xor_ps(a, _mm_set1_ps(-0.0f)), _mm_set1_ps(2.0f)); }
float all_negative_scaled(__m128 a, float x) {
  if (_mm_movemask_ps(_mm_cmplt_ps(a, _mm_setzero_ps())) == 15) return x * 4.0f;
  return x;
}
";
    let a = analysed_whole(body, "negated_twice");
    assert!(overflow_candidates(&a, |x| (0..4).any(|i| (-x[i] * 2.0).is_infinite())) > 0);
    // A lane the solver puts just below 0 may round to -0, which is not below 0: some candidate, not each, has
    // every lane negative.
    let b = analysed_whole(body, "all_negative_scaled");
    let all_negative = b.outcome.candidates.iter().any(|c| {
        let x = lanes(&c.input.0);
        c.kind == ExceptionKind::Overflow
            && (0..4).all(|i| x[i] < 0.0)
            && (x[4] * 4.0).is_infinite()
    });
    assert!(all_negative, "{:?}", b.outcome.candidates);
}

#[test]
fn bits_of_two_floats_combined_end_the_path_with_a_reason() {
    let body = "
__m128 mixed(__m128 a, __m128 b) { return _mm_mul_ps(_mm_and_ps(a, b), a); }
__m128 compared_mask(__m128 a, __m128 b) {
  return _mm_cmpeq_ps(_mm_cmpgt_ps(a, b), _mm_setzero_ps());
}
";
    let source = format!("{HEADER}{body}");
    let built = build(&source);
    let stops = |f: &str| {
        model_both(&built, f, &AnalysisConfig::default())
            .expect("model")
            .path_stops
    };
    let mixed = stops("mixed");
    assert!(
        mixed.contains_key("computed bits read as a floating-point value"),
        "{mixed:?}"
    );
    // A mask compared as a float: the plain build's path ends there, named.
    let compared = stops("compared_mask");
    assert!(
        compared.contains_key("arithmetic on a comparison mask read as a float (a NaN)"),
        "{compared:?}"
    );
}

#[test]
fn float_bits_through_memory_are_followed() {
    // A mask stored in a struct of vectors and read back; a float read again as `uint32_t` through a pointer;
    // the sign bit flipped through `memcpy`.
    let body = "
#include <stdint.h>
#include <string.h>
typedef struct { __m128 X, Y; } V2W;
void masks(V2W *out, __m128 a, __m128 b) {
  out->X = _mm_cmpgt_ps(a, b);
  out->Y = _mm_mul_ps(_mm_and_ps(out->X, a), _mm_set1_ps(2.0f));
}
float scaled_if_negative(const float *x) {
  float v = *x;
  if ((*(const uint32_t *)x) >> 31) return v * 4.0f;
  return v;
}
float flipped(float x) { uint32_t b; memcpy(&b, &x, 4); b ^= 0x80000000u; float r; memcpy(&r, &b, 4); return r * 2.0f; }
";
    let a = analysed_whole(body, "masks");
    // Twice `a > b ? a : 0` overflows where a lane of a is large and above b's.
    let n = overflow_candidates(&a, |x| {
        (0..4).any(|i| x[i] > x[i + 4] && (x[i] * 2.0).is_infinite())
    });
    assert!(n > 0, "{:?}", a.outcome);
    let b = analysed_whole(body, "scaled_if_negative");
    assert_eq!(b.p.len(), 2);
    let c = analysed_whole(body, "flipped");
    assert!(overflow_candidates(&c, |x| (-x[0] * 2.0).is_infinite()) > 0);
}
