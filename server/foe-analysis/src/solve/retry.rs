//! The FP-theory retry of a rounded real model that misses its exception in IEEE arithmetic: Z3's
//! floating-point theory looks for an input on which the operation really raises it.

use super::parts::{rational_degree, MAX_INTEGER_DEGREE};
use super::{check, fp, limit};
use crate::domain::Domain;
use crate::round::FloatFormat;
use crate::sym::{Expr, VarType};
use crate::types::{ArgValue, Input};
use std::collections::HashMap;
use std::time::Instant;
use z3::ast::BV;
use z3::SatResult;

/// The FP-theory retry: an input on which the operation really raises the exception, if Z3 finds one within
/// `budget_ms` (in Z3's resource units). Like Ariadne's concretization, it first solves for one parameter at a time with the others fixed to
/// the rounded model (small circuits), then for all of them.
pub(super) fn solve_fp(
    formula: &Expr,
    domain: Option<&Domain>,
    budget_ms: u32,
    real_input: &Input,
    limiter: &limit::Limiter<'_>,
) -> Option<Input> {
    // Bit-blasting high-degree terms or integer conversions is where Z3 stops heeding interruption.
    if rational_degree(std::slice::from_ref(formula)) > MAX_INTEGER_DEGREE
        || formula
            .params()
            .iter()
            .any(|(_, ty)| !matches!(ty, VarType::Float(_)))
    {
        return None;
    }
    let free: Vec<u32> = formula
        .params()
        .into_iter()
        .filter(|(_, ty)| matches!(ty, VarType::Float(_)))
        .map(|(i, _)| i)
        .collect();
    let fixed_except = |keep: Option<u32>| -> HashMap<u32, ArgValue> {
        free.iter()
            .filter(|i| Some(**i) != keep)
            .filter_map(|i| real_input.0.get(*i as usize).map(|v| (*i, *v)))
            .collect()
    };
    let mut attempts: Vec<HashMap<u32, ArgValue>> = Vec::new();
    if free.len() > 1 {
        attempts.extend(free.iter().map(|i| fixed_except(Some(*i))));
    }
    attempts.push(HashMap::new());
    let mut spent = 0u32;
    for fixed in attempts {
        let timeout = budget_ms.saturating_sub(spent);
        if timeout < 5 {
            return None;
        }
        let query = fp::encode(formula, domain, &fixed)?;
        let solver = z3::Tactic::new("qffp").solver();
        solver.from_string(query.smtlib.as_str());
        let started = Instant::now();
        let result = limiter.check(&solver, timeout);
        spent += limiter.last_spent_ms().max(1);
        tracing::trace!(
            ms = started.elapsed().as_millis() as u64,
            fixed = fixed.len(),
            ?result,
            "fp query"
        );
        if result != SatResult::Sat {
            continue;
        }
        let model = solver.get_model()?;
        let mut values = real_input.0.clone();
        for (index, fmt) in &query.params {
            let width = if *fmt == FloatFormat::Double { 64 } else { 32 };
            let bits = model
                .eval(&BV::new_const(fp::bits_name(*index), width), true)?
                .as_u64()?;
            values[*index as usize] = match fmt {
                FloatFormat::Double => ArgValue::F64(f64::from_bits(bits)),
                FloatFormat::Single => ArgValue::F32(f32::from_bits(bits as u32)),
            };
        }
        if check::holds(formula, &values) != Some(false) {
            return Some(Input(values));
        }
    }
    None
}
