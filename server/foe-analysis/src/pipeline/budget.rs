//! The budgets of one analysis, each function's fixed by the text alone, and the ordinary inputs a function runs
//! on when the solver finds none.
//!
//! A function's budget is its share of the file's, `min(function budget, 0.9 × file budget / functions)` (a tenth
//! kept for compiling, building and confirming), where
//! `functions` counts every function of the file a full analysis would model (selected or not, cached or not):
//! it does not depend on what the functions before it spent, so a function's results depend on its own code,
//! the number of its file's functions and the settings, which is what its cache key holds (one truth per text:
//! an incremental analysis equals a fresh one). Within its share, the solve counts work, not time (Z3 resource
//! units), and so does the search ([`crate::search::work`]), both in milliseconds of an idle machine, so where
//! they stop does not depend on the load; their wall-clock deadlines are safety nets at a multiple of the work.
//! Modelling counts the terms it makes.
//! (A wall-clock net at the end of the file's budget was tried, 2026-11-27, and withdrawn: where the budget binds
//! it made a fresh analysis cut functions an edited session takes from its cache, `lsp_one_truth.rs`.)

use crate::config::AnalysisConfig;
use crate::types::{ArgValue, FunctionSignature, Input, ParamType};
use std::time::{Duration, Instant};

/// The budgets of one analysis: the share of each of its functions, split between the phases (modelling a
/// quarter of it in terms made, solving up to three quarters of the work, the search what the solve left).
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    /// Each function's share, in milliseconds of an idle machine.
    share_ms: u64,
}

/// Share of the file's budget kept for what no function's work counts: compiling, modelling, building the runner
/// and the shipped binaries, confirming (measured on the corpus, 2026-11-26: 1.5-3 s of a 30 s file).
const FILE_RESERVE: f64 = 0.1;
/// Share of a function's budget the solve may use (modelling takes milliseconds on all but pathological
/// functions).
const SOLVE_SHARE: f64 = 0.75;
/// Modelling's work: this share of the function's budget, at least [`MODEL_FLOOR`], counted in the terms it makes
/// at [`TERMS_PER_MS`] (the same on every machine and load).
const MODEL_SHARE: f64 = 0.25;
const MODEL_FLOOR: Duration = Duration::from_millis(250);
/// Terms modelling makes per millisecond of an idle machine (measured, 2026-11-27: 570-1080 per ms over the
/// functions of six corpus files that took 10 ms or more, on a machine slower than usual; the number of
/// steps per ms varied ten times as much).
const TERMS_PER_MS: u64 = 1_000;
/// Modelling's wall-clock safety net is this many times its work (plus [`MODEL_SAFETY_MARGIN`]).
const MODEL_SAFETY_FACTOR: u32 = 3;
const MODEL_SAFETY_MARGIN: Duration = Duration::from_millis(250);
/// The least solver work a function gets however many functions share the file's budget.
const SOLVE_FLOOR_MS: u64 = 20;
/// The least search work a function gets: its first inputs run, then it is `partial` for the budget (a file of
/// 400 functions kept near its budget, not 400 floors past it).
const SEARCH_FLOOR_MS: u64 = 5;
/// The solve's wall-clock safety net is this many times its work budget (plus [`SOLVE_SAFETY_MARGIN`]): for
/// queries whose resource units run slower than calibrated, not what decides where a solve stops.
const SOLVE_SAFETY_FACTOR: u32 = 3;
const SOLVE_SAFETY_MARGIN: Duration = Duration::from_millis(500);
/// The search's wall-clock safety net is this many times its work budget (runs wait for the CPU on a loaded
/// machine, and the work does not count a loop without floating-point operations).
const SEARCH_SAFETY_FACTOR: u32 = 4;

impl Budget {
    /// The budgets of a file of which `functions` functions are modelled by a full analysis.
    pub(super) fn new(config: &AnalysisConfig, functions: usize) -> Budget {
        let file = (config.file_budget_ms.max(1) as f64 * (1.0 - FILE_RESERVE)) as u64
            / functions.max(1) as u64;
        Budget {
            share_ms: config.function_budget_ms.max(1).min(file.max(1)),
        }
    }

    /// Each function's share of the file's budget, in milliseconds (part of its cache key).
    pub(super) fn share_ms(&self) -> u64 {
        self.share_ms
    }

    /// Modelling's limits for a function starting now: its work (terms made, deterministic) and the wall-clock
    /// safety net.
    pub(super) fn model_limits(&self) -> crate::model::ModelLimits {
        let share = Duration::from_millis(self.share_ms)
            .mul_f64(MODEL_SHARE)
            .max(MODEL_FLOOR);
        crate::model::ModelLimits {
            terms: Some(share.as_millis() as u64 * TERMS_PER_MS),
            deadline: Some(Instant::now() + share * MODEL_SAFETY_FACTOR + MODEL_SAFETY_MARGIN),
        }
    }

    /// The solve's work budget of a function, in milliseconds of budget (Z3 resource units, deterministic).
    pub(super) fn solve_work(&self) -> u64 {
        ((self.share_ms as f64 * SOLVE_SHARE) as u64).max(SOLVE_FLOOR_MS)
    }

    /// The solve's wall-clock safety net for a function starting now.
    pub(super) fn solve_safety_net(&self) -> Instant {
        Instant::now()
            + Duration::from_millis(self.solve_work()) * SOLVE_SAFETY_FACTOR
            + SOLVE_SAFETY_MARGIN
    }

    /// The search's work budget of a function, in milliseconds of an idle machine (deterministic): what its share
    /// leaves after its solver work (`solve_spent`), never less than [`SEARCH_FLOOR_MS`]; the safety net is
    /// [`SEARCH_SAFETY_FACTOR`] times as long, from now.
    pub(super) fn search_work(&self, solve_spent: u64) -> crate::search::SearchBudget {
        let ms = self
            .share_ms
            .saturating_sub(solve_spent)
            .max(SEARCH_FLOOR_MS);
        crate::search::SearchBudget::from_ms(ms, SEARCH_SAFETY_FACTOR)
    }
}

/// Inputs that every function runs on when the solver found no candidate, so that its status rests on an
/// execution (ordinary magnitudes: 1 and 0.5 for every floating-point value, 1 and 2 for integers).
pub(super) fn ordinary_inputs(sig: &FunctionSignature) -> Vec<Input> {
    [(1.0, 1), (0.5, 2)]
        .iter()
        .map(|&(x, n)| {
            Input(
                sig.params
                    .iter()
                    .map(|p| match p.ty {
                        ParamType::F64 => ArgValue::F64(x),
                        ParamType::F32 => ArgValue::F32(x as f32),
                        ParamType::Int { .. } => ArgValue::Int(n),
                        ParamType::OutPtr { .. } => ArgValue::OutPtr,
                    })
                    .collect(),
            )
        })
        .collect()
}
