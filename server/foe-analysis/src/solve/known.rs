//! Verdicts a solve takes over instead of asking Z3, keyed by the formula's structural fingerprint: the queries
//! an earlier attempt of the same solve interrupted when interrupting them crashed the solver process (they are
//! given up on, not asked again).
//!
//! Functions do not take over each other's verdicts: a wrapper that inlines the function it calls asks Z3 the
//! same questions again, so that what each function finds depends on its own code and budget only, whether
//! the other was analysed in the same run or taken from the cache (one truth per text).

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
}

/// Known verdicts by formula fingerprint (hexadecimal, so the map crosses to the solver child as JSON).
pub type KnownVerdicts = HashMap<String, KnownVerdict>;

/// The key of a formula fingerprint.
pub(super) fn key(fingerprint: u128) -> String {
    format!("{fingerprint:032x}")
}

impl KnownVerdict {
    /// A formula given up on: one whose query crashed the solver process when interrupted.
    pub(super) fn gave_up() -> KnownVerdict {
        KnownVerdict {
            verdict: Verdict::Unknown,
            input: None,
            misses: false,
        }
    }

    /// The verdict as a result for `sig`: the input's values where the parameter has the same type (the formula
    /// mentions only such parameters: its fingerprint names each parameter's index and type), the value an
    /// unconstrained parameter gets elsewhere.
    pub(super) fn for_signature(&self, sig: &FunctionSignature) -> RealResult {
        let input = self.input.as_ref().map(|values| {
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
        });
        RealResult {
            verdict: self.verdict,
            input,
            misses: self.misses,
        }
    }
}
