//! `foe replay`: both builds run on exactly one user-given input.

use super::{compile_db, compile_error, effective_config, AnalysisError, AnalysisRequest};
use crate::config::AnalysisConfig;
use crate::confirm::{self, Probe, ShippedEnd};
use crate::fpfmt;
use crate::report::{DivergenceClass, NamedValue, ResultDifference, RunEnd, TraceEvent};
use crate::types::{ArgValue, Build, FunctionSignature, Input, ParamType};
use crate::{compile, exec, ir, model, search};
use inkwell::context::Context;

/// The result of running both builds on one user-given input (`foe replay`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayReport {
    pub function: String,
    pub inputs: Vec<NamedValue>,
    pub trace_p: Vec<TraceEvent>,
    pub trace_p_prime: Vec<TraceEvent>,
    /// How each build's run ended: what it returned and wrote through pointers, or where it stopped.
    pub end_p: RunEnd,
    pub end_p_prime: RunEnd,
    /// How the builds' outputs differ (the default accuracy threshold); None when they agree.
    pub result: Option<ResultDifference>,
    /// Index of the first differing event and how the traces differ; None when they are equal.
    pub first_divergence: Option<usize>,
    pub class: Option<DivergenceClass>,
    pub flags_p: Vec<String>,
    pub flags_p_prime: Vec<String>,
    /// The same input on the binaries clang ships (what the user runs): a difference only the shipped code
    /// generation makes shows here, not above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipped: Option<ShippedReplay>,
}

/// One input on the shipped P and P', or why they could not run it.
// Built once per replay: the size of the usual variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum ShippedReplay {
    Ran {
        trace_p: Vec<TraceEvent>,
        trace_p_prime: Vec<TraceEvent>,
        end_p: RunEnd,
        end_p_prime: RunEnd,
        result: Option<ResultDifference>,
        /// Whether the exception sets differ.
        sets_differ: bool,
    },
    NotRun {
        why: String,
    },
}

/// Builds and runs both versions of `function` on exactly the given inputs (`NAME=VALUE` pairs).
pub fn replay(
    request: &AnalysisRequest<'_>,
    function: &str,
    assignments: &[(String, String)],
) -> Result<ReplayReport, AnalysisError> {
    let db = compile_db(request);
    let config = effective_config(request, db.as_ref());
    let pair = compile::compile_pair(&config, request.path, request.text).map_err(compile_error)?;
    // A header's functions inlined where they are called, so that their operations are placed at the call.
    let pair = crate::headers::inline_header_functions(pair);
    let (pair, linked) =
        crate::project::link_units(pair, request.path, request.config, db.as_ref());
    let context = Context::create();
    let p_module = ir::parse_module(&context, &pair.p_ll, "P").map_err(AnalysisError::Internal)?;
    let sig = ir::describe_functions(&p_module, &pair.p_ll)
        .into_iter()
        .find_map(|e| match e {
            Ok(info) if info.signature.name == function => Some(Ok(info)),
            Err(undrivable) if undrivable.name == function => Some(Err(undrivable.reason)),
            _ => None,
        })
        .ok_or_else(|| {
            AnalysisError::Environment(format!(
                "no function `{function}` is defined in {}",
                request.path.display()
            ))
        })?
        .map_err(|reason| {
            AnalysisError::Environment(format!("cannot run `{function}`: {reason}"))
        })?;
    let info = sig;
    let mut sig = with_pointee_inputs(&context, p_module, &pair.pp_ll, info.signature, &config);
    ir::name_fields(&mut sig, &info.pointee_fields);
    let input = parse_assignments(&sig, assignments).map_err(AnalysisError::Environment)?;
    let mut runner =
        exec::Runner::build(&pair.p_ll, &pair.pp_ll, std::slice::from_ref(&sig), &config).map_err(
            |e| AnalysisError::Environment(format!("cannot build the instrumented program: {e}")),
        )?;
    let outcome = runner
        .run(&sig.name, std::slice::from_ref(&input))
        .map_err(|e| AnalysisError::Environment(format!("cannot run both builds: {e}")))?
        .into_iter()
        .next()
        .ok_or_else(|| AnalysisError::Internal("the runner returned no outcome".into()))?;
    let divergence = search::compare_traces(&outcome.p.trace, &outcome.pp.trace);
    let harness = confirm::Harness::new(
        &config,
        request.path,
        request.text,
        std::slice::from_ref(&sig),
    )
    .with_units(&linked, db.as_ref(), &request.config.extra_flags);
    let shipped = shipped_replay(harness, &runner, &sig, &input, &config);
    Ok(ReplayReport {
        function: sig.name.clone(),
        inputs: sig
            .searchable_params()
            .map(|(i, p)| NamedValue::new(&p.name, input.0[i]))
            .collect(),
        result: search::results::compare(&outcome.p.end, &outcome.pp.end, config.accuracy_bits),
        end_p: outcome.p.end,
        end_p_prime: outcome.pp.end,
        trace_p: outcome.p.trace,
        trace_p_prime: outcome.pp.trace,
        first_divergence: divergence.map(|d| d.0),
        class: divergence.map(|d| d.1),
        flags_p: config.flags_p.clone(),
        flags_p_prime: config.flags_p_prime.clone(),
        shipped: Some(shipped),
    })
}

/// `input` on the shipped P and P' of `harness`, their outputs read as the runner reads the instrumented ones.
fn shipped_replay(
    mut harness: confirm::Harness,
    runner: &exec::Runner,
    sig: &FunctionSignature,
    input: &Input,
    config: &AnalysisConfig,
) -> ShippedReplay {
    harness.prepare(&[Probe::Reference, Probe::Shipped]);
    let inputs = std::slice::from_ref(input);
    let ran = harness
        .run(Probe::Reference, &sig.name, inputs)
        .and_then(|p| Ok((p, harness.run(Probe::Shipped, &sig.name, inputs)?)));
    let (p, pp) = match ran {
        Ok((mut p, mut pp)) if !p.is_empty() && !pp.is_empty() => (p.remove(0), pp.remove(0)),
        Ok(_) => {
            return ShippedReplay::NotRun {
                why: "the driver gave no reply".into(),
            }
        }
        Err(why) => return ShippedReplay::NotRun { why },
    };
    let ended = |run: &confirm::ShippedRun, build: Build| {
        confirm::ending_of(runner, sig, run, build).unwrap_or_else(|| match run.end {
            ShippedEnd::TimedOut => RunEnd::TimedOut {
                limit_ms: config.exec_timeout_ms,
            },
            _ => RunEnd::Crashed {
                signal: 0,
                name: "crashed".into(),
            },
        })
    };
    let (end_p, end_p_prime) = match (p.end, pp.end) {
        (ShippedEnd::Raised(_), ShippedEnd::Raised(_)) => runner.returned_pair(
            sig,
            input,
            (p.produced.result, pp.produced.result),
            &p.produced.outputs,
            &pp.produced.outputs,
        ),
        _ => (ended(&p, Build::P), ended(&pp, Build::PPrime)),
    };
    ShippedReplay::Ran {
        result: search::results::compare(&end_p, &end_p_prime, config.accuracy_bits),
        sets_differ: p.end.raised() != pp.end.raised(),
        trace_p: p.trace,
        trace_p_prime: pp.trace,
        end_p,
        end_p_prime,
    }
}

/// `sig` with the values behind its pointers as inputs, as [`analyse`] finds them (both builds modelled); `sig`
/// itself when it has no pointer parameter or cannot be modelled (then its pointers get zeroed buffers).
fn with_pointee_inputs<'ctx>(
    context: &'ctx Context,
    p_module: inkwell::module::Module<'ctx>,
    pp_ll: &str,
    sig: FunctionSignature,
    config: &AnalysisConfig,
) -> FunctionSignature {
    if sig.params.iter().all(|p| p.ty.is_searchable()) {
        return sig;
    }
    let Ok(pp_module) = ir::parse_module(context, pp_ll, "P'") else {
        return sig;
    };
    if model::prepare_for_modelling(&p_module, Build::P).is_err()
        || model::prepare_for_modelling(&pp_module, Build::PPrime).is_err()
    {
        return sig;
    }
    match model::model_pair(&p_module, &pp_module, &sig, config, Default::default()) {
        Ok(modelled) => modelled.signature,
        Err(_) => sig,
    }
}

/// Parses `NAME=VALUE` pairs into an input for `sig`; every C parameter but pointers needs a value, a value
/// behind a pointer (`v[0]`) is zero unless given.
pub fn parse_assignments(
    sig: &FunctionSignature,
    assignments: &[(String, String)],
) -> Result<Input, String> {
    let mut values = Vec::new();
    for p in &sig.params {
        if !p.ty.is_searchable() {
            values.push(ArgValue::OutPtr);
            continue;
        }
        let text = match assignments.iter().find(|(n, _)| *n == p.name) {
            Some((_, text)) => text.as_str(),
            // A value behind a pointer is what the zeroed buffer holds unless given.
            None if p.pointee.is_some() => "0",
            None => {
                return Err(format!(
                    "missing a value for `{}` (give --input {}=VALUE)",
                    p.name, p.name
                ))
            }
        };
        let value = match p.ty {
            ParamType::F64 => ArgValue::F64(
                fpfmt::parse_f64(text).ok_or_else(|| format!("`{text}` is not a number"))?,
            ),
            ParamType::F32 => {
                let v =
                    fpfmt::parse_f64(text).ok_or_else(|| format!("`{text}` is not a number"))?;
                ArgValue::F32(v as f32)
            }
            ParamType::Int { .. } => ArgValue::Int(
                text.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("`{text}` is not an integer"))?,
            ),
            ParamType::OutPtr { .. } => ArgValue::OutPtr,
        };
        values.push(value);
    }
    if let Some((unknown, _)) = assignments
        .iter()
        .find(|(n, _)| !sig.params.iter().any(|p| &p.name == n))
    {
        return Err(format!("`{}` has no parameter `{unknown}`", sig.name));
    }
    Ok(Input(values))
}
