//! The neighbourhood of a candidate: the inputs within `radius` nextafter steps of it (±1 for integers), the
//! whole cube when it fits the budget, otherwise its axis points, diagonals and a seeded sample, in search order;
//! a prefix of it can be made without the rest.

use crate::config::AnalysisConfig;
use crate::rng::SplitMix;
use crate::round::{step_f32, step_f64};
use crate::types::{ArgValue, FunctionSignature, Input, ParamType};
use rustc_hash::FxHashSet;

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
    neighbourhood_prefix(sig, candidate, cfg, usize::MAX)
}

/// The first `upto` points of [`neighbourhood`], made without making the others: a search that stops after a
/// few rounds pays for the points it runs, not for the whole neighbourhood.
pub fn neighbourhood_prefix(
    sig: &FunctionSignature,
    candidate: &Input,
    cfg: &AnalysisConfig,
    upto: usize,
) -> Vec<Input> {
    let dims: Vec<(usize, ParamType)> = sig.searchable_params().map(|(i, p)| (i, p.ty)).collect();
    let m = dims.len();
    let r = cfg.radius as i64;
    let budget = cfg.neighbourhood_budget.max(1);
    let upto = upto.min(budget).max(1);
    let side = 2 * r as u128 + 1;
    let cube = (0..m)
        .try_fold(1u128, |acc, _| acc.checked_mul(side))
        .unwrap_or(u128::MAX);
    let mut seen = FxHashSet::default();
    let mut out = Vec::with_capacity(upto.min(4096));
    let mut emit = |d: &[i64], out: &mut Vec<Input>| {
        let mut values = candidate.0.clone();
        for (&(param, ty), &k) in dims.iter().zip(d) {
            values[param] = step_value(values[param], ty, k);
        }
        let input = Input(values);
        if seen.insert(input.key()) {
            out.push(input);
        }
        out.len() >= upto
    };
    if cube <= budget as u128 {
        // The whole cube (small: at most the budget), ordered by (shell, category, lexicographic).
        let mut offsets: Vec<Vec<i64>> = Vec::with_capacity(cube as usize);
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
        offsets.sort_by_cached_key(|d| (shell(d), category(d), d.clone()));
        for d in &offsets {
            if emit(d, &mut out) {
                break;
            }
        }
        return out;
    }
    let plan = SampledPlan::new(m, r, budget, candidate);
    if !emit(&vec![0; m], &mut out) {
        for k in 1..=r {
            if plan.shell_offsets(k, |d| emit(d, &mut out)) {
                break;
            }
        }
    }
    out.truncate(budget);
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

/// How a cube larger than the budget is sampled, shell by shell (each shell's points made from its own seeded
/// stream, so that a prefix of the neighbourhood needs only the shells it reaches): per shell, while the
/// structured points have not reached half the budget (all of it in one dimension), its axis points and its
/// diagonals (all 2^m sign patterns when few, else a sample); then seeded random points of the shell, an equal
/// share of what the structured points leave of the budget for each shell.
struct SampledPlan {
    m: usize,
    seed: u64,
    /// Diagonals per shell at most.
    per_shell: usize,
    /// The shells that get structured points: 1 ..= this.
    structured_shells: i64,
    /// Random points of shell k: `random_each`, plus one for the first `random_extra` shells.
    random_each: usize,
    random_extra: usize,
}

impl SampledPlan {
    fn new(m: usize, r: i64, budget: usize, candidate: &Input) -> SampledPlan {
        let seed = candidate
            .key()
            .iter()
            .fold(0x9e37_79b9_7f4a_7c15u64, |h, k| {
                h.rotate_left(5) ^ k.wrapping_mul(0xbf58_476d_1ce4_e5b9)
            });
        let structured_cap = if m <= 1 { budget } else { (budget / 2).max(1) };
        let per_shell = (structured_cap / r.max(1) as usize).max(2);
        let all_diagonals = m < 20 && (1usize << m) <= per_shell;
        let diagonals = match (m, all_diagonals) {
            (0 | 1, _) => 0,
            (_, true) => 1usize << m,
            (_, false) => per_shell,
        };
        // Structured points (at most: duplicates among sampled diagonals only lower it) of the shells reached.
        let per_shell_structured = 2 * m + diagonals;
        let mut structured = 1;
        let mut structured_shells = 0;
        while structured_shells < r && structured < structured_cap {
            structured_shells += 1;
            structured += per_shell_structured;
        }
        let random = budget.saturating_sub(structured);
        let shells = r.max(1) as usize;
        SampledPlan {
            m,
            seed,
            per_shell,
            structured_shells,
            random_each: random / shells,
            random_extra: random % shells,
        }
    }

    /// Gives `emit` the offsets of shell `k` in order (axis points, diagonals, random points) until it returns
    /// true (enough points); returns whether it did.
    fn shell_offsets(&self, k: i64, mut emit: impl FnMut(&[i64]) -> bool) -> bool {
        let m = self.m;
        let mut rng = SplitMix(self.seed ^ (k as u64).wrapping_mul(0xd6e8_feb8_6659_fd93));
        let mut set: FxHashSet<Vec<i64>> = FxHashSet::default();
        // `None` for an offset already given, else whether `emit` has enough.
        let mut push = |d: Vec<i64>, emit: &mut dyn FnMut(&[i64]) -> bool| -> Option<bool> {
            (d.iter().any(|&x| x != 0) && set.insert(d.clone())).then(|| emit(&d))
        };
        if k <= self.structured_shells {
            for i in 0..m {
                for s in [-k, k] {
                    let mut d = vec![0; m];
                    d[i] = s;
                    if push(d, &mut emit) == Some(true) {
                        return true;
                    }
                }
            }
            if m >= 2 {
                if m < 20 && (1usize << m) <= self.per_shell {
                    for signs in 0..(1u64 << m) {
                        let d = (0..m)
                            .map(|i| if signs >> i & 1 == 1 { k } else { -k })
                            .collect();
                        if push(d, &mut emit) == Some(true) {
                            return true;
                        }
                    }
                } else {
                    let mut diagonals = vec![vec![k; m], vec![-k; m]];
                    for _ in 0..self.per_shell.saturating_sub(2) {
                        diagonals.push(
                            (0..m)
                                .map(|_| if rng.next() & 1 == 1 { k } else { -k })
                                .collect(),
                        );
                    }
                    for d in diagonals {
                        if push(d, &mut emit) == Some(true) {
                            return true;
                        }
                    }
                }
            }
        }
        // Random points of this shell: one coordinate at ±k, the others in [-k, k].
        let quota = self.random_each + usize::from(((k - 1) as usize) < self.random_extra);
        let (mut made, mut tries) = (0, 0);
        while made < quota && tries < quota.saturating_mul(4) && m > 0 {
            tries += 1;
            let mut d: Vec<i64> = (0..m).map(|_| rng.range(-k, k)).collect();
            let i = (rng.next() % m as u64) as usize;
            d[i] = if rng.next() & 1 == 1 { k } else { -k };
            match push(d, &mut emit) {
                None => continue,
                Some(true) => return true,
                Some(false) => made += 1,
            }
        }
        false
    }
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
