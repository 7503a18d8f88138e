//! The search aimed at results: inputs sampled across the float range (by bit pattern, at ordinary magnitudes,
//! and with the float inputs close to one another, where a difference `x - y` cancels), then a local search that
//! climbs towards the inputs where the two builds' outputs lie the most bits apart. The solver's candidates aim at
//! exceptions; these aim at what a function computes: a lost compensation term, a cancelled sum, an argument
//! reduction re-associated away. Everything is seeded by the function's name, so the inputs are the same each run.
//! Where the model shows an addition or subtraction that can cancel, the solver's input for it
//! ([`crate::solve::solve_cancellations`]) starts the search beside the samples.

use super::{each_once, results, run_in_slices, search_group, SearchState};
use crate::config::AnalysisConfig;
use crate::exec::{ExecError, Runner};
use crate::rng::SplitMix;
use crate::types::{ArgValue, FunctionSignature, Input, ParamType};
use std::collections::HashSet;

/// Inputs sampled per function (a third by bit pattern, a third at ordinary magnitudes, a third with the float
/// inputs close together; the last only with two float inputs or more).
pub const SAMPLES: usize = 48;
/// Rounds of the local search, and the inputs it climbs from in each.
pub const CLIMB_ROUNDS: usize = 6;
pub const CLIMBERS: usize = 3;
/// Most neighbours run per round.
pub const CLIMB_POINTS: usize = 96;
/// Inputs of the whole aimed search judged as findings (the furthest apart), each run once more.
pub const JUDGED: usize = 6;

/// The model's cancellation inputs searched (with their neighbourhoods) in one batch, and the points of each
/// neighbourhood at most: the nearest (a comparison flips within a float or two of where its sides meet).
const MODEL_GROUP: usize = 8;
const MODEL_NEIGHBOURHOOD: usize = 64;

/// Relative steps of the local search: each float input times 1 ± 2^-k.
const STEPS: [i32; 6] = [1, 3, 8, 16, 28, 44];

/// The float inputs of a signature (parameters and values read through pointers).
pub fn float_inputs(sig: &FunctionSignature) -> Vec<usize> {
    sig.params
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p.ty, ParamType::F64 | ParamType::F32))
        .map(|(i, _)| i)
        .collect()
}

/// A seed of its own per function, the same on every run.
pub fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// [`SAMPLES`] inputs around `base` (whose integers and pointers are kept), deterministically from `seed`.
pub fn sampled_inputs(sig: &FunctionSignature, base: &Input, seed: u64) -> Vec<Input> {
    let floats = float_inputs(sig);
    if floats.is_empty() {
        return vec![];
    }
    let mut rng = SplitMix(seed);
    let kinds = if floats.len() > 1 { 3 } else { 2 };
    (0..SAMPLES)
        .map(|n| {
            let mut values = base.0.clone();
            let centre = ordinary(&mut rng);
            for &i in &floats {
                let x = match n % kinds {
                    0 => by_bit_pattern(&mut rng),
                    1 => ordinary(&mut rng),
                    // Close to one another: a difference of two of them cancels.
                    _ => {
                        centre
                            * (1.0 + (rng.unit() - 0.5) * (2f64).powi(-(rng.range(4, 40) as i32)))
                    }
                };
                values[i] = as_type(sig.params[i].ty, x);
            }
            Input(values)
        })
        .collect()
}

/// A finite double drawn uniformly by bit pattern (so uniformly over the exponents).
fn by_bit_pattern(rng: &mut SplitMix) -> f64 {
    loop {
        let x = f64::from_bits(rng.next());
        if x.is_finite() {
            return x;
        }
    }
}

/// A value of ordinary magnitude: a random sign and mantissa, an exponent in [-24, 24].
fn ordinary(rng: &mut SplitMix) -> f64 {
    let sign = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
    sign * (1.0 + rng.unit()) * (2f64).powi(rng.range(-24, 24) as i32)
}

fn as_type(ty: ParamType, x: f64) -> ArgValue {
    match ty {
        ParamType::F32 => ArgValue::F32(x as f32),
        _ => ArgValue::F64(x),
    }
}

/// The neighbours the local search tries from `input`: each float input in turn times 1 ± 2^-k for each step of
/// [`STEPS`] (a zero moves to ± 2^-k), the other coordinates kept.
pub fn neighbours(sig: &FunctionSignature, input: &Input) -> Vec<Input> {
    let mut out = vec![];
    for i in float_inputs(sig) {
        let x = match input.0[i] {
            ArgValue::F64(x) => x,
            ArgValue::F32(x) => x as f64,
            _ => continue,
        };
        if !x.is_finite() {
            continue;
        }
        for k in STEPS {
            let step = (2f64).powi(-k);
            let moves = match x == 0.0 {
                true => [step, -step],
                false => [x * (1.0 + step), x * (1.0 - step)],
            };
            for moved in moves {
                let mut values = input.0.clone();
                values[i] = as_type(sig.params[i].ty, moved);
                if values[i].bits() != input.0[i].bits() {
                    out.push(Input(values));
                }
            }
        }
    }
    out
}

/// The search aimed at results (this module's): sampled inputs and the model's cancellations (`from_model`),
/// then a local search towards the inputs whose outputs lie the most bits apart; the furthest apart are judged like
/// special inputs (reported when they differ by the accuracy threshold or in category, else run on the shipped
/// binaries with the other agreed inputs).
pub(super) fn run_aimed_search(
    runner: &mut Runner,
    sig: &FunctionSignature,
    cands: &[&Input],
    from_model: &[&Input],
    cfg: &AnalysisConfig,
    state: &mut SearchState<'_>,
) -> Result<(), ExecError> {
    if state.hopeless() || float_inputs(sig).is_empty() {
        return Ok(());
    }
    let Some(base) = cands.first() else {
        return Ok(());
    };
    // The model's cancellations with their neighbourhoods, like solver candidates: where the sides of a
    // comparison nearly cancel, the input whose answer flips lies a few floats away.
    let near = AnalysisConfig {
        neighbourhood_budget: MODEL_NEIGHBOURHOOD,
        ..cfg.clone()
    };
    for chunk in from_model.chunks(MODEL_GROUP) {
        if state.out_of_budget() || state.hopeless() {
            return Ok(());
        }
        search_group(runner, sig, chunk, cands.len(), &near, true, state)?;
    }
    let mut tried: HashSet<Vec<u64>> = HashSet::new();
    let mut scored: Vec<(Input, f64)> = vec![];
    let samples = sampled_inputs(sig, base, seed_of(&sig.name));
    let mut batch: Vec<Input> = from_model
        .iter()
        .map(|&i| i.clone())
        .chain(samples)
        .filter(|i| tried.insert(i.key()))
        .collect();
    for _ in 0..=CLIMB_ROUNDS {
        if batch.is_empty() || state.out_of_budget() || state.hopeless() {
            break;
        }
        let before = best_score(&scored);
        scored.extend(run_scored(runner, sig, batch, state)?);
        if best_score(&scored) <= before && before > 0.0 {
            break;
        }
        batch = climb_from(sig, &scored, state, &mut tried);
    }
    // The furthest apart (inside the domain first), judged as findings.
    scored.retain(|(_, bits)| *bits > 0.0);
    scored.sort_by(|a, b| {
        (!state.in_domain(&a.0))
            .cmp(&!state.in_domain(&b.0))
            .then(b.1.total_cmp(&a.1))
    });
    let judged: Vec<&Input> = scored.iter().take(JUDGED).map(|(i, _)| i).collect();
    if judged.is_empty() {
        return Ok(());
    }
    let single = each_once(cfg);
    search_group(runner, sig, &judged, cands.len(), &single, true, state)
}

/// The largest finite score so far (an infinite one is a finding already: nothing to climb towards).
fn best_score(scored: &[(Input, f64)]) -> f64 {
    scored
        .iter()
        .map(|(_, b)| *b)
        .filter(|b| b.is_finite())
        .fold(0.0, f64::max)
}

/// The next round of the local search: the neighbours of the [`CLIMBERS`] inputs whose outputs lie the
/// most (finite, non-zero) bits apart, not tried before, at most [`CLIMB_POINTS`].
fn climb_from(
    sig: &FunctionSignature,
    scored: &[(Input, f64)],
    state: &SearchState<'_>,
    tried: &mut HashSet<Vec<u64>>,
) -> Vec<Input> {
    let mut climbers: Vec<&(Input, f64)> = scored
        .iter()
        .filter(|(i, b)| b.is_finite() && *b > 0.0 && state.in_domain(i))
        .collect();
    climbers.sort_by(|a, b| b.1.total_cmp(&a.1));
    climbers
        .iter()
        .take(CLIMBERS)
        .flat_map(|(i, _)| neighbours(sig, i))
        .filter(|i| tried.insert(i.key()))
        .take(CLIMB_POINTS)
        .collect()
}

/// Runs `batch` on both builds and scores each input by how many bits apart the outputs are
/// ([`results::bits_apart`]); inputs whose runs did not complete are left out.
fn run_scored(
    runner: &mut Runner,
    sig: &FunctionSignature,
    batch: Vec<Input>,
    state: &mut SearchState<'_>,
) -> Result<Vec<(Input, f64)>, ExecError> {
    let (pairs, ran) = run_in_slices(runner, sig, &batch, state)?;
    state.executions += pairs.len();
    Ok(batch
        .into_iter()
        .take(ran)
        .zip(pairs)
        .filter_map(|(input, pair)| {
            let (p, pp) = runner.results(sig, &input, &pair);
            results::bits_apart(&p, &pp).map(|bits| (input, bits))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::tests::sig;
    use super::*;

    #[test]
    fn samples_are_finite_deterministic_and_keep_integers() {
        let s = sig(vec![ParamType::F64, ParamType::INT, ParamType::F32]);
        let base = Input(vec![
            ArgValue::F64(1.0),
            ArgValue::Int(7),
            ArgValue::F32(1.0),
        ]);
        let a = sampled_inputs(&s, &base, seed_of("f"));
        assert_eq!(a.len(), SAMPLES);
        assert_eq!(a, sampled_inputs(&s, &base, seed_of("f")));
        assert_ne!(a, sampled_inputs(&s, &base, seed_of("g")));
        for input in &a {
            assert_eq!(input.0[1], ArgValue::Int(7));
            assert!(matches!(input.0[0], ArgValue::F64(x) if x.is_finite()));
            assert!(matches!(input.0[2], ArgValue::F32(_)));
        }
        // The close-together samples: both floats within 2^-4 of each other.
        let close = &a[2];
        let (ArgValue::F64(x), ArgValue::F32(y)) = (close.0[0], close.0[2]) else {
            panic!("floats")
        };
        assert!(((x - y as f64) / x).abs() < 0.07, "{x} {y}");
        // Magnitudes spread: some tiny, some huge (by bit pattern), some ordinary.
        let mags: Vec<f64> = a
            .iter()
            .filter_map(|i| match i.0[0] {
                ArgValue::F64(x) => Some(x.abs()),
                _ => None,
            })
            .collect();
        assert!(mags.iter().any(|&m| m > 1e100) && mags.iter().any(|&m| m < 1e-100));
        assert!(mags.iter().any(|&m| (1e-3..1e3).contains(&m)));
    }

    #[test]
    fn neighbours_move_one_float_at_a_time() {
        let s = sig(vec![ParamType::F64, ParamType::F64]);
        let input = Input(vec![ArgValue::F64(2.0), ArgValue::F64(0.0)]);
        let n = neighbours(&s, &input);
        assert_eq!(n.len(), 2 * STEPS.len() * 2);
        for m in &n {
            let moved =
                m.0.iter()
                    .zip(&input.0)
                    .filter(|(a, b)| a.bits() != b.bits());
            assert_eq!(moved.count(), 1);
        }
        assert!(n.iter().any(|m| m.0[0] == ArgValue::F64(3.0)));
        assert!(n.iter().any(|m| m.0[1] == ArgValue::F64(0.5)));
        assert!(n.iter().any(|m| m.0[1] == ArgValue::F64(-0.5)));
    }
}
