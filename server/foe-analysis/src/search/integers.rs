//! Integer parameters the solver left at values no caller passes. A path condition that only says a loop has not
//! ended yet (`--i != 0` for each unrolled iteration) is met by a count of 0, and Z3 gives 0: Cephes'
//! `chbevl(x, array, n)` and `polevl(x, coef, N)` then loop past their arrays, and every run crashes, so nothing
//! of the function is compared. Before the search, each value the solver chose for the integers is run once on
//! its first candidate; where both builds' runs crash or hang, the integers are tried at a few counts, and the
//! first that lets both builds return is given to every candidate with a value that was lost. The floats are
//! kept: the exception a candidate was solved for comes from the iterations before the count matters. The
//! report says what was changed.

use super::SearchState;
use crate::exec::{int_fits, ExecError, RawEnd, RawPair, Runner};
use crate::types::{ArgValue, FunctionSignature, Input, ParamType};
use std::collections::HashSet;

/// The counts tried, largest first: more iterations keep more of the solver's path (its unrolled loop), and
/// every value is a count real callers pass (polynomial degrees, series lengths).
const COUNTS: [i64; 6] = [32, 16, 8, 4, 2, 1];

/// Integer parameters tried one at a time as well as all together, at most (each variant costs two runs, and
/// a crash a new worker).
const MAX_SINGLE: usize = 2;

/// Values the solver chose for the integer parameters, each tried once on its first candidate before the search.
const MAX_VALUES: usize = 8;

/// What was changed: the parameters, the values the solver chose that no run returned on, and the count given
/// instead.
#[derive(Debug, Clone, PartialEq)]
pub struct IntegerRepair {
    pub params: Vec<String>,
    pub from: Vec<Vec<i64>>,
    pub to: i64,
}

impl IntegerRepair {
    /// The report's note, in C words.
    pub fn describe(&self) -> String {
        let values = |value: &dyn Fn(usize) -> String| -> String {
            (0..self.params.len())
                .map(|k| format!("`{}` = {}", self.params[k], value(k)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let from = values(&|k| {
            let mut seen: Vec<i64> = vec![];
            for v in self.from.iter().map(|t| t[k]) {
                if !seen.contains(&v) {
                    seen.push(v);
                }
            }
            seen.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(" or ")
        });
        format!(
            "no run returned with the solver's {from}; the search ran those inputs with {}",
            values(&|_| self.to.to_string())
        )
    }
}

/// The candidates with their integer parameters repaired (distinct), and what was changed; `None` when the
/// function has no integer parameter, the runs of each value the solver chose complete, or no count lets them
/// return.
///
/// Runs go one at a time, so that hangs (each costs the run limits on both builds) stay few: the values are run
/// until one is lost, the counts until one returns or one hangs (a hang the count does not cure). A lost value
/// no count cures counts as the search's own runs would (its time-outs towards [`super::MAX_TIMEOUTS`]).
pub(super) fn repair(
    runner: &mut Runner,
    sig: &FunctionSignature,
    cands: &[&Input],
    state: &mut SearchState<'_>,
) -> Result<Option<(Vec<Input>, IntegerRepair)>, ExecError> {
    let ints: Vec<usize> = sig
        .searchable_params()
        .filter(|(_, p)| matches!(p.ty, ParamType::Int { .. }))
        .map(|(i, _)| i)
        .collect();
    if ints.is_empty() {
        return Ok(None);
    }
    // Each value the solver chose for the integers (the first [`MAX_VALUES`]), on its first candidate.
    let values = |c: &Input| -> Vec<i64> { ints.iter().map(|&i| int_at(c, i)).collect() };
    let mut representatives: Vec<(Vec<i64>, &Input)> = vec![];
    for &c in cands {
        let v = values(c);
        if representatives.len() < MAX_VALUES && !representatives.iter().any(|(r, _)| *r == v) {
            representatives.push((v, c));
        }
    }
    let mut tried = 0;
    let mut lost_pair = None;
    for (_, c) in &representatives {
        let pair = run_one(runner, sig, c, state)?;
        tried += 1;
        if lost_to_the_count(&pair) {
            lost_pair = Some(pair);
            break;
        }
    }
    let Some(lost_pair) = lost_pair else {
        return Ok(None);
    };
    let Some((group, count)) = find_count(runner, sig, &ints, representatives[tried - 1].1, state)?
    else {
        tracing::debug!(function = %sig.name, "no count lets the runs return");
        for run in [&lost_pair.p, &lost_pair.pp] {
            super::group::count_end(run, state);
            super::group::describe_end(runner, sig, run.end, state);
        }
        return Ok(None);
    };
    // The values not run yet, each once: those lost too are given the count.
    let mut lost = vec![representatives[tried - 1].0.clone()];
    for (v, c) in &representatives[tried..] {
        if lost_to_the_count(&run_one(runner, sig, c, state)?) {
            lost.push(v.clone());
        }
    }
    let mut seen = HashSet::new();
    let repaired: Vec<Input> = cands
        .iter()
        .map(|&c| match lost.contains(&values(c)) {
            true => with_count(sig, c, &group, count).unwrap_or_else(|| c.clone()),
            false => c.clone(),
        })
        .filter(|c| seen.insert(c.key()))
        .collect();
    let at = |k: usize| {
        ints.iter()
            .position(|&i| i == group[k])
            .expect("a parameter of the group")
    };
    let repair = IntegerRepair {
        params: group.iter().map(|&i| sig.params[i].name.clone()).collect(),
        from: lost
            .iter()
            .map(|v| (0..group.len()).map(|k| v[at(k)]).collect())
            .collect(),
        to: count,
    };
    tracing::debug!(function = %sig.name, note = %repair.describe(), "integer parameters repaired");
    Ok(Some((repaired, repair)))
}

/// The integer parameters (of `ints`) and the count that let both builds' runs of `lost` return: each parameter
/// alone, then all together (past [`MAX_SINGLE`] parameters, an id's fields or a task's block, only all
/// together), at each of [`COUNTS`]. The first count both builds return on, else the first they complete on
/// (stopped at a call foe does not run); none past a hang. The plain build must do floating-point work on it: a
/// count that only reaches an early return (an enum field set out of its range, an error code) compares nothing.
fn find_count(
    runner: &mut Runner,
    sig: &FunctionSignature,
    ints: &[usize],
    lost: &Input,
    state: &mut SearchState<'_>,
) -> Result<Option<(Vec<usize>, i64)>, ExecError> {
    let mut groups: Vec<Vec<usize>> = match ints.len() <= MAX_SINGLE {
        true => ints.iter().map(|&i| vec![i]).collect(),
        false => vec![],
    };
    if ints.len() > 1 {
        groups.push(ints.to_vec());
    }
    let mut completed = None;
    for group in groups {
        for count in COUNTS {
            let Some(v) = with_count(sig, lost, &group, count) else {
                continue;
            };
            let pair = run_one(runner, sig, &v, state)?;
            let computes = pair.p.ops > 0;
            if computes && pair.p.returned() && pair.pp.returned() {
                return Ok(Some((group, count)));
            }
            if computes && pair.p.completed() && pair.pp.completed() && completed.is_none() {
                completed = Some((group.clone(), count));
            }
            if [&pair.p, &pair.pp]
                .iter()
                .any(|r| matches!(r.end, RawEnd::TimedOut))
            {
                return Ok(completed);
            }
        }
    }
    Ok(completed)
}

/// Whether both builds' runs were lost in a way a count can cause: a crash (past an array) or a hang. Data no
/// file defines, an `exit` or a stop at a call foe does not run is not the count's doing.
fn lost_to_the_count(pair: &RawPair) -> bool {
    [&pair.p, &pair.pp]
        .iter()
        .all(|r| matches!(r.end, RawEnd::Crashed(_) | RawEnd::TimedOut))
}

/// `input` with the integer parameters `group` set to `count`, where it fits each of them.
fn with_count(
    sig: &FunctionSignature,
    input: &Input,
    group: &[usize],
    count: i64,
) -> Option<Input> {
    let mut values = input.0.clone();
    let mut changed = false;
    for &i in group {
        let ParamType::Int { bits, signed } = sig.params[i].ty else {
            return None;
        };
        if !int_fits(count, bits, signed) {
            return None;
        }
        changed |= int_at(input, i) != count;
        values[i] = ArgValue::Int(count);
    }
    changed.then_some(Input(values))
}

fn int_at(input: &Input, i: usize) -> i64 {
    match input.0.get(i) {
        Some(ArgValue::Int(v)) => *v,
        _ => 0,
    }
}

/// Runs `input` once, counting the execution and its work (not how it ended: these runs probe the counts, and
/// the search's own runs say how the function's runs end).
fn run_one(
    runner: &mut Runner,
    sig: &FunctionSignature,
    input: &Input,
    state: &mut SearchState<'_>,
) -> Result<RawPair, ExecError> {
    let ran = runner.run_raw(&sig.name, std::slice::from_ref(input))?;
    state.executions += ran.len();
    super::group::charge(&ran, state);
    ran.into_iter()
        .next()
        .ok_or_else(|| ExecError::Worker("a run is missing from the replies".into()))
}

#[cfg(test)]
mod tests {
    use super::IntegerRepair;

    #[test]
    fn the_note_names_each_lost_value_once_and_the_count_given() {
        let repair = IntegerRepair {
            params: vec!["n".into()],
            from: vec![vec![0], vec![-3], vec![0]],
            to: 32,
        };
        assert_eq!(
            repair.describe(),
            "no run returned with the solver's `n` = 0 or -3; the search ran those inputs with `n` = 32"
        );
        let both = IntegerRepair {
            params: vec!["norm".into(), "lmax".into()],
            from: vec![vec![0, -1]],
            to: 4,
        };
        assert_eq!(
            both.describe(),
            "no run returned with the solver's `norm` = 0, `lmax` = -1; the search ran those inputs with \
             `norm` = 4, `lmax` = 4"
        );
    }
}
