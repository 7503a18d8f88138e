//! The time budgets of one analysis (per function and per file, split between the phases) and the ordinary
//! inputs a function runs on when the solver finds none.
//!
//! The solve phase and the search count work, not time (Z3 resource units; runs weighted by the operations they
//! ran, [`crate::search::work`]), both in milliseconds of an idle machine, so where they stop does not depend on
//! the load; their wall-clock deadlines are safety nets at a multiple of the budgets.

use crate::config::AnalysisConfig;
use crate::types::{ArgValue, FunctionSignature, Input, ParamType};
use std::time::{Duration, Instant};

/// The time budgets of one analysis. The phases run one after the other over all functions, so the file's budget
/// is split between them (each phase ends at a fixed share of it), and so is each function's (modelling gets the
/// first quarter, solving up to three quarters, the search the rest). A function gets a fair share of what is
/// left of a phase, at most what is left of its own budget, and never less than a floor that lets it make some
/// progress.
pub(super) struct Budget {
    start: Instant,
    file: Duration,
    function: Duration,
}

/// Share of the budgets by the end of each phase.
pub(super) const MODEL_SHARE: f64 = 0.25;
pub(super) const SOLVE_SHARE: f64 = 0.75;
/// The least time a function gets in a phase, however late it comes.
const PHASE_FLOOR: Duration = Duration::from_millis(100);
/// The least search work a function gets once what the file's budget leaves cannot give every function still
/// waiting [`PHASE_FLOOR`]: its first inputs run, then it is `partial` for the budget (a file of 400 functions kept
/// within its budget, not 400 floors past it).
const LATE_SEARCH_FLOOR_MS: u64 = 5;
/// The solve phase's wall-clock deadlines are this many times its work budget: a safety net for queries whose
/// resource units run slower than calibrated, not what decides where a solve stops.
const SOLVE_SAFETY_FACTOR: f64 = 2.0;
/// The search's wall-clock safety net is this many times its work budget (runs wait for the CPU on a loaded
/// machine, and the work does not count a loop without floating-point operations).
const SEARCH_SAFETY_FACTOR: u32 = 3;

impl Budget {
    pub(super) fn new(config: &AnalysisConfig, start: Instant) -> Budget {
        Budget {
            start,
            file: Duration::from_millis(config.file_budget_ms.max(1)),
            function: Duration::from_millis(config.function_budget_ms.max(1)),
        }
    }

    /// The deadline of a function in the phase ending at `share` of the budgets, with `spent` already used by
    /// it and `waiting` functions (itself included) still to go through the phase.
    pub(super) fn deadline(&self, share: f64, spent: Duration, waiting: usize) -> Instant {
        let now = Instant::now();
        let phase_end = self.start + self.file.mul_f64(share);
        let fair = phase_end.saturating_duration_since(now) / waiting.max(1) as u32;
        let own = self.function.mul_f64(share).saturating_sub(spent);
        now + fair.min(own).max(PHASE_FLOOR)
    }

    /// The solve phase's work budget of a function (Z3 resource units in milliseconds of budget, deterministic):
    /// its own share of the function budget (what the phases before the search may use), at most a fair share of what the file's solve phase has left after
    /// `file_spent` (the work of the functions before it), with `waiting` functions (itself included) still to
    /// solve.
    pub(super) fn solve_work(&self, file_spent: u64, waiting: usize) -> u64 {
        // Modelling takes milliseconds on all but pathological functions: the solver may use its share too.
        let share = SOLVE_SHARE;
        let own = self.function.mul_f64(share).as_millis() as u64;
        let file = self.file.mul_f64(share).as_millis() as u64;
        let fair = file.saturating_sub(file_spent) / waiting.max(1) as u64;
        own.min(fair).max(PHASE_FLOOR.as_millis() as u64)
    }

    /// The search's work budget of a function, in milliseconds of an idle machine (deterministic): what its own
    /// budget leaves after its solver work (`solve_spent`), at most a fair share of what the file's budget leaves
    /// after `file_spent` (the solver work of every function and the searches before this one), with `waiting`
    /// functions (itself included) still to search; never less than the phase floor. The safety net is
    /// [`SEARCH_SAFETY_FACTOR`] times as long.
    pub(super) fn search_work(
        &self,
        solve_spent: u64,
        file_spent: u64,
        waiting: usize,
    ) -> crate::search::SearchBudget {
        let own = (self.function.as_millis() as u64).saturating_sub(solve_spent);
        let file = self.file.as_millis() as u64;
        let fair = file.saturating_sub(file_spent) / waiting.max(1) as u64;
        let floor = if fair >= PHASE_FLOOR.as_millis() as u64 {
            PHASE_FLOOR.as_millis() as u64
        } else {
            LATE_SEARCH_FLOOR_MS
        };
        let ms = own.min(fair).max(floor);
        crate::search::SearchBudget::from_ms(ms, SEARCH_SAFETY_FACTOR)
    }

    /// The solve phase's wall-clock safety net for a function: as [`Budget::deadline`] with every budget
    /// [`SOLVE_SAFETY_FACTOR`] times longer.
    pub(super) fn solve_safety_net(&self, spent: Duration, waiting: usize) -> Instant {
        let wider = Budget {
            start: self.start,
            file: self.file.mul_f64(SOLVE_SAFETY_FACTOR),
            function: self.function.mul_f64(SOLVE_SAFETY_FACTOR),
        };
        wider.deadline(SOLVE_SHARE, spent, waiting)
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
