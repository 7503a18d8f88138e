//! Verdicts the functions a function calls reached, for it: the solver chain's verdict cache, keyed by the
//! formula's structural fingerprint. Exception queries and cancellation queries (those without a domain) both
//! take theirs over.
//!
//! GSL's `gsl_sf_lngamma(x)` inlines `gsl_sf_lngamma_e(x, &r)` and asks Z3 the same questions (the same
//! formulae over the same parameter indices) again, as does every wrapper of a library. A function takes over
//! the verdicts of the functions it calls (those whose code is in its cache key, and which do not call it in
//! turn): their verdicts, inputs (translated to its own signature) and, for a formula they gave up on or did not
//! reach within their budget, that they gave up. The callees are solved first (`pipeline/solving.rs`), and a
//! callee taken from the cache brings the verdicts it learned, so what a function takes over depends on its key
//! only (one truth per text). Verdicts of a function that is not a callee are never taken over.

use super::{RealResult, Verdict};
use crate::types::{ArgValue, FunctionSignature, Input, ParamType};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The verdict on one formula, as an earlier function of the file reached it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnownVerdict {
    verdict: Verdict,
    /// The candidate's values by parameter index (of the function that found it).
    input: Option<Vec<ArgValue>>,
    misses: bool,
    /// An underflow's inputs inside its region beside the edge `input` is on (the same indexing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    inside: Vec<Vec<ArgValue>>,
}

/// Known verdicts by formula fingerprint (hexadecimal, so the map crosses to the solver child as JSON).
pub type KnownVerdicts = HashMap<String, KnownVerdict>;

/// The key of a formula fingerprint.
pub(super) fn key(fingerprint: u128) -> String {
    format!("{fingerprint:032x}")
}

impl KnownVerdict {
    /// A formula given up on: one whose query crashed the solver process when interrupted, or a cancellation
    /// query the budget did not reach.
    pub(super) fn gave_up() -> KnownVerdict {
        KnownVerdict::decided(Verdict::Unknown, None)
    }

    /// A cancellation query's verdict ([`super::solve_cancellations`]): satisfiable with `input`, unsatisfiable,
    /// or given up on.
    pub(super) fn decided(verdict: Verdict, input: Option<&Input>) -> KnownVerdict {
        KnownVerdict {
            verdict,
            input: input.map(|i| i.0.clone()),
            misses: false,
            inside: Vec::new(),
        }
    }

    /// Whether it came with an input (a satisfiable formula's).
    pub(super) fn has_input(&self) -> bool {
        self.input.is_some()
    }

    pub(super) fn of(result: &RealResult) -> KnownVerdict {
        KnownVerdict {
            verdict: result.verdict,
            input: result.input.as_ref().map(|i| i.0.clone()),
            misses: result.misses,
            inside: result.inside.iter().map(|i| i.0.clone()).collect(),
        }
    }

    /// The verdict as a result for `sig`: the inputs' values where the parameter has the same type (the formula
    /// mentions only such parameters: its fingerprint names each parameter's index and type), the value an
    /// unconstrained parameter gets elsewhere.
    pub(super) fn for_signature(&self, sig: &FunctionSignature) -> RealResult {
        let translate = |values: &Vec<ArgValue>| {
            Input(
                sig.params
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let same = |v: &&ArgValue| {
                            matches!(
                                (v, p.ty),
                                (ArgValue::F64(_), ParamType::F64)
                                    | (ArgValue::F32(_), ParamType::F32)
                                    | (ArgValue::Int(_), ParamType::Int { .. })
                                    | (ArgValue::OutPtr, ParamType::OutPtr { .. })
                            )
                        };
                        values
                            .get(i)
                            .filter(same)
                            .copied()
                            .unwrap_or(super::unconstrained(p.ty))
                    })
                    .collect(),
            )
        };
        RealResult {
            verdict: self.verdict,
            input: self.input.as_ref().map(translate),
            misses: self.misses,
            concretisable: false,
            inside: self.inside.iter().map(translate).collect(),
        }
    }
}

/// Merges `learned` into `known`; a verdict already known stays (the first function to ask decided it).
pub fn remember(known: &mut KnownVerdicts, learned: Vec<(String, KnownVerdict)>) {
    for (k, v) in learned {
        known.entry(k).or_insert(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Param, ReturnType};

    /// A wrapper searches what its callee searched: the inputs inside an underflow's region come with the
    /// verdict, through the JSON the solver child sends, translated to the wrapper's signature.
    #[test]
    fn a_verdict_taken_over_brings_the_inputs_inside_its_region() {
        let edge = Input(vec![
            ArgValue::F64(2.2250738585072014e-308),
            ArgValue::F64(0.5),
        ]);
        let inside = Input(vec![
            ArgValue::F64(2.225073858507201e-308),
            ArgValue::F64(0.5),
        ]);
        let callee = RealResult {
            inside: vec![inside.clone()],
            ..RealResult::satisfied(edge.clone(), false)
        };
        let json = serde_json::to_string(&KnownVerdict::of(&callee)).unwrap();
        let known: KnownVerdict = serde_json::from_str(&json).unwrap();
        // The wrapper's second parameter is an integer: it gets the value an unconstrained one gets.
        let wrapper = FunctionSignature {
            name: "g".into(),
            params: vec![
                Param::new("x", ParamType::F64),
                Param::new("n", ParamType::INT),
            ],
            ret: ReturnType::F64,
        };
        let taken = known.for_signature(&wrapper);
        let free = super::super::unconstrained(wrapper.params[1].ty);
        assert_eq!(taken.input, Some(Input(vec![edge.0[0], free])));
        assert_eq!(taken.inside, vec![Input(vec![inside.0[0], free])]);
        assert!(taken.hits());
    }
}
