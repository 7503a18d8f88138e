//! The neighbourhood of a candidate: the inputs within `radius` nextafter steps of it (±1 for integers), the
//! whole cube when it fits the budget, otherwise its axis points, diagonals and a seeded sample, in search order.

use crate::config::AnalysisConfig;
use crate::rng::SplitMix;
use crate::round::{step_f32, step_f64};
use crate::types::{ArgValue, FunctionSignature, Input, ParamType};
use std::collections::HashSet;

/// The number of points [`neighbourhood`] gives at most.
pub(super) fn neighbourhood_size(sig: &FunctionSignature, cfg: &AnalysisConfig) -> usize {
    let side = 2 * cfg.radius as u128 + 1;
    let cube = sig
        .searchable_params()
        .try_fold(1u128, |acc, _| acc.checked_mul(side))
        .unwrap_or(u128::MAX);
    cube.min(cfg.neighbourhood_budget.max(1) as u128) as usize
}

/// The points of a candidate's neighbourhood in search order (candidate first, by increasing L∞ shell, axis
/// points and diagonals before the rest), distinct, at most `cfg.neighbourhood_budget` (at least 1).
pub fn neighbourhood(
    sig: &FunctionSignature,
    candidate: &Input,
    cfg: &AnalysisConfig,
) -> Vec<Input> {
    let dims: Vec<(usize, ParamType)> = sig.searchable_params().map(|(i, p)| (i, p.ty)).collect();
    let m = dims.len();
    let r = cfg.radius as i64;
    let budget = cfg.neighbourhood_budget.max(1);
    let side = 2 * r as u128 + 1;
    let cube = (0..m)
        .try_fold(1u128, |acc, _| acc.checked_mul(side))
        .unwrap_or(u128::MAX);
    let mut offsets: Vec<Vec<i64>> = Vec::new();
    if cube <= budget as u128 {
        // The whole cube, ordered by (shell, category, lexicographic).
        let mut d = vec![-r; m];
        loop {
            offsets.push(d.clone());
            let mut i = 0;
            while i < m {
                d[i] += 1;
                if d[i] <= r {
                    break;
                }
                d[i] = -r;
                i += 1;
            }
            if i == m {
                break;
            }
        }
        offsets.sort_by_key(|d| (shell(d), category(d), d.clone()));
    } else {
        offsets = sampled_offsets(m, r, budget, candidate);
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(offsets.len());
    for d in offsets {
        let mut values = candidate.0.clone();
        for (&(param, ty), &k) in dims.iter().zip(&d) {
            values[param] = step_value(values[param], ty, k);
        }
        let input = Input(values);
        if seen.insert(input.key()) {
            out.push(input);
        }
        if out.len() >= budget {
            break;
        }
    }
    out
}

pub(super) fn shell(d: &[i64]) -> i64 {
    d.iter().map(|x| x.abs()).max().unwrap_or(0)
}

/// 0: on an axis (at most one non-zero offset), 1: a diagonal (all offsets ±shell), 2: the rest.
fn category(d: &[i64]) -> u8 {
    let s = shell(d);
    if d.iter().filter(|&&x| x != 0).count() <= 1 {
        0
    } else if d.iter().all(|x| x.abs() == s) {
        1
    } else {
        2
    }
}

/// For cubes larger than the budget: per shell the axis points and (a sample of) the diagonals, then seeded
/// random points of the shells in turn for what is left of the budget; ordered by shell and category.
pub(super) fn sampled_offsets(m: usize, r: i64, budget: usize, candidate: &Input) -> Vec<Vec<i64>> {
    let mut rng = SplitMix(
        candidate
            .key()
            .iter()
            .fold(0x9e37_79b9_7f4a_7c15u64, |h, k| {
                h.rotate_left(5) ^ k.wrapping_mul(0xbf58_476d_1ce4_e5b9)
            }),
    );
    let mut set: HashSet<Vec<i64>> = HashSet::new();
    let mut out: Vec<Vec<i64>> = Vec::new();
    let mut push = |d: Vec<i64>, out: &mut Vec<Vec<i64>>| {
        if set.insert(d.clone()) {
            out.push(d);
        }
    };
    push(vec![0; m], &mut out);
    // One dimension has nothing but axis points; otherwise they and the diagonals get half the budget.
    let structured_cap = if m <= 1 { budget } else { (budget / 2).max(1) };
    for k in 1..=r {
        for i in 0..m {
            for s in [-k, k] {
                let mut d = vec![0; m];
                d[i] = s;
                push(d, &mut out);
            }
        }
        // Diagonals: all 2^m sign patterns when few, else a sample.
        let per_shell = (structured_cap / r.max(1) as usize).max(2);
        if m < 20 && (1usize << m) <= per_shell {
            for signs in 0..(1u64 << m) {
                push(
                    (0..m)
                        .map(|i| if signs >> i & 1 == 1 { k } else { -k })
                        .collect(),
                    &mut out,
                );
            }
        } else {
            push(vec![k; m], &mut out);
            push(vec![-k; m], &mut out);
            for _ in 0..per_shell.saturating_sub(2) {
                push(
                    (0..m)
                        .map(|_| if rng.next() & 1 == 1 { k } else { -k })
                        .collect(),
                    &mut out,
                );
            }
        }
        if out.len() >= structured_cap {
            break;
        }
    }
    // The rest of the budget: random points, shells taken in turn (one coordinate at ±k, the others in
    // [-k, k]), so every distance gets an equal share.
    let mut tries = 0usize;
    let mut k = 0;
    while out.len() < budget && tries < budget.saturating_mul(4) {
        tries += 1;
        k = k % r + 1;
        let mut d: Vec<i64> = (0..m).map(|_| rng.range(-k, k)).collect();
        let i = (rng.next() % m as u64) as usize;
        d[i] = if rng.next() & 1 == 1 { k } else { -k };
        push(d, &mut out);
    }
    out.sort_by_key(|d| (shell(d), category(d)));
    out.truncate(budget);
    out
}

/// The value `k` steps from `v`: `nextafter` for floats, ±k (clamped to the C type) for integers.
pub fn step_value(v: ArgValue, ty: ParamType, k: i64) -> ArgValue {
    match (v, ty) {
        (ArgValue::F64(x), _) => ArgValue::F64(step_f64(x, k)),
        (ArgValue::F32(x), _) => ArgValue::F32(step_f32(x, k)),
        (ArgValue::Int(x), ParamType::Int { bits, signed }) => {
            let (lo, hi): (i128, i128) = match (bits, signed) {
                (1, _) => (0, 1),
                (64, true) => (i64::MIN as i128, i64::MAX as i128),
                (64, false) => (0, u64::MAX as i128),
                (b, true) => (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1),
                (b, false) => (0, (1i128 << b) - 1),
            };
            let base = if bits == 64 && !signed {
                x as u64 as i128
            } else {
                x as i128
            };
            let stepped = (base + k as i128).clamp(lo, hi);
            ArgValue::Int(if bits == 64 && !signed {
                stepped as u64 as i64
            } else {
                stepped as i64
            })
        }
        (other, _) => other,
    }
}
