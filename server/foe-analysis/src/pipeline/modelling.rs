//! The phase that models each selected function over the reals (both builds over the same inputs): its queries,
//! P's path outputs, and the notes on what modelling assumed or cut short. A function that cannot be modelled is
//! settled here as skipped, with the reason's category.

use super::budget::Budget;
use super::select::ToModel;
use super::settle::path_stops_note;
use super::{AnalysisError, CancelToken, Pending};
use crate::config::AnalysisConfig;
use crate::model::{self, FunctionQueries, ModelledPair};
use crate::report::{FunctionReport, Note, ReasonCode};
use crate::types::Build;
use inkwell::module::Module;
use std::time::{Duration, Instant};

/// Models the functions of `to_model` in order, each within its share of the budget; the ones that cannot be
/// modelled get their report in `reports`.
pub(super) fn model_functions<'ctx>(
    (p_module, pp_module): (&Module<'ctx>, &Module<'ctx>),
    to_model: Vec<ToModel>,
    config: &AnalysisConfig,
    budget: &Budget,
    cancel: &CancelToken,
    reports: &mut [Option<FunctionReport>],
) -> Result<Vec<Pending>, AnalysisError> {
    if to_model.is_empty() {
        return Ok(vec![]);
    }
    let builds = [(p_module, Build::P, "P"), (pp_module, Build::PPrime, "P'")];
    for (module, build, name) in builds {
        model::prepare_for_modelling(module, build).map_err(|e| {
            AnalysisError::Internal(format!("cannot prepare {name} for modelling: {e}"))
        })?;
    }
    let mut pending = Vec::new();
    for item in to_model {
        cancel.check()?;
        let began = Instant::now();
        let limits = match config.quick {
            // A first look models only to learn the inputs (the values read through pointers).
            true => model::ModelLimits {
                terms: None,
                deadline: Some(Instant::now() + QUICK_MODEL),
            },
            false => budget.model_limits(),
        };
        let sig = &item.info.signature;
        match model::model_pair(p_module, pp_module, sig, config, limits) {
            Ok(modelled) => {
                // A first look's notes would describe the cut it makes on purpose.
                let notes = match config.quick {
                    true => vec![],
                    false => modelling_notes(&modelled),
                };
                let mut info = item.info;
                info.signature = modelled.signature;
                crate::ir::name_fields(&mut info.signature, &info.pointee_fields);
                let queries = match config.quick {
                    true => FunctionQueries::default(),
                    false => FunctionQueries {
                        p: modelled.p,
                        pp: modelled.pp,
                        cancellations: modelled.cancellations,
                    },
                };
                pending.push(Pending {
                    index: item.index,
                    info,
                    key: item.key,
                    ranges: item.ranges,
                    domain: item.domain,
                    queries,
                    p_outputs: modelled.p_outputs,
                    notes,
                    spent: began.elapsed(),
                })
            }
            Err(error) => {
                let mut r = FunctionReport::skipped_because(
                    &sig.name,
                    error.reason_code(),
                    error.to_string(),
                );
                r.signature = Some(sig.clone());
                r.span = item.info.span.clone();
                r.domain = item.domain.text.clone();
                reports[item.index] = Some(r);
            }
        }
    }
    Ok(pending)
}

/// How long a first look models a function.
const QUICK_MODEL: Duration = Duration::from_millis(2);

/// What modelling assumed or cut short, for the report's reason (with a category when something was cut).
fn modelling_notes(modelled: &ModelledPair) -> Vec<Note> {
    let mut notes = Vec::new();
    if !modelled.unmodelled_reads.is_empty() {
        notes.push(Note::remark(
            format!(
                "reads {} through a pointer where no input can stand for the value (a pointer, a boolean, or too \
                 many values): taken as zeros",
                modelled.unmodelled_reads.join(", ")
            ),
        ));
    }
    if modelled.symbolic_index_stops > 0 {
        notes.push(Note::cut(
            ReasonCode::PathsStopped,
            format!(
                "{} paths stop at a memory access with a symbolic index and are not followed further",
                modelled.symbolic_index_stops
            ),
        ));
    }
    if modelled.out_of_time {
        notes.push(Note::cut(
            ReasonCode::Clock,
            "modelling was stopped by the clock before its work budget ran out; later paths are not modelled \
             (another run may model more or fewer)"
                .to_string(),
        ));
    } else if modelled.out_of_work {
        notes.push(Note::cut(
            ReasonCode::Budget,
            "modelling ran out of its work budget; later paths are not modelled".to_string(),
        ));
    } else if modelled.cut_short {
        notes.push(Note::cut(
            ReasonCode::PathsStopped,
            "exploration reached its path or step bound; later paths are not modelled".to_string(),
        ));
    }
    // Paths that end at a call foe does not run are analysed up to the call by design: a note, not a cut.
    if !modelled.path_stops.is_empty() {
        notes.push(Note::remark(path_stops_note(&modelled.path_stops)));
    }
    notes
}
