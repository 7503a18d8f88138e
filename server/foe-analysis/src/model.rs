//! Modelling a build's LLVM IR: symbolic execution over the reals that turns every floating-point operation
//! on every explored path into exception conditions ([`Query`]), following Ariadne (POPL'13) and the FOE paper.
//!
//! Entry points: [`prepare_for_modelling`] (cleans a module copy up so that one IR operation stands for one C
//! operator) and [`model_pair`] (both builds of a function over the same inputs, values read through pointers
//! included). Submodules, each using only those before it: [`llvm`] (read-only IR access), `memory` (values
//! and memory), `state` (one path's state), `values` (pure value rules), `calls` (which callees the model
//! understands), `exec` (the executor, with its instructions in `exec/`); all of them report through `error`
//! ([`ModelError`], a leaf).

mod bits;
#[cfg(test)]
mod bits_tests;
mod calls;
mod error;
mod exec;
pub(crate) mod llvm;
mod memory;
#[cfg(test)]
mod sse_tests;
mod state;
#[cfg(test)]
pub(crate) mod tests;
mod values;

use crate::config::AnalysisConfig;
use crate::round::FloatFormat;
use crate::sym::{Expr, Formula};
use crate::types::{Build, ExceptionKind, FunctionSignature, Param, PointeeOf, SourceLoc};
pub use calls::{predicate_name, runs_natively, Plain, REPLACES_C_LIBRARY};
pub use error::ModelError;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine};
use inkwell::OptimizationLevel;
use llvm::{LLVMOpcode, LLVMTypeKind, Val};
pub use memory::{PointeeSlot, PointeeTable, Pointees};
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

/// One exception condition of one FP operation on one path, as plain data (Send + Sync + Hash + Eq).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Query {
    pub build: Build,
    pub kind: ExceptionKind,
    /// The LLVM opcode or callee (`fmul`, `call exp`, `fptosi`).
    pub operation: String,
    pub loc: Option<SourceLoc>,
    /// Which instruction of the build's function raised it, numbered in the order the model first met it: the
    /// lanes of a vector operation, or two calls inlined at one line, are different operations at one location.
    #[serde(default)]
    pub instruction: u32,
    /// Path condition ∧ assumptions ∧ the exception condition; the constant `false` when it cannot hold.
    pub formula: Formula,
}

/// Where an addition or subtraction of the plain build cancels on one path: the path condition and
/// [`crate::sym::cancellation`]. Its models are candidates of the search aimed at results, not exceptions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CancellationQuery {
    pub kind: Cancelling,
    /// `fadd`, `fsub`, `fcmp`, `call floor`, `fptosi`.
    pub operation: String,
    pub loc: Option<SourceLoc>,
    /// Path condition ∧ assumptions ∧ the cancellation condition.
    pub formula: Formula,
}

/// What cancels in a [`CancellationQuery`], in the order they are solved: a comparison whose answer flips is what a
/// caller sees most plainly, an integer picked differently next, a sum's lost digits last.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Cancelling {
    /// The two sides of a comparison lie within two floats of each other.
    Comparison,
    /// A value rounded to an integer (`floor`, a conversion to `int`) lies within two floats of one.
    Integer,
    /// An addition or subtraction loses 30 bits or more.
    Sum,
}

/// What is solved for one function: both builds' exception queries and P's cancellation queries.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct FunctionQueries {
    pub p: Vec<Query>,
    pub pp: Vec<Query>,
    pub cancellations: Vec<CancellationQuery>,
}

impl FunctionQueries {
    /// Whether there is nothing to solve.
    pub fn is_empty(&self) -> bool {
        self.p.is_empty() && self.pp.is_empty() && self.cancellations.is_empty()
    }
}

/// The passes run on each build before modelling. P (`-O0 -Xclang -disable-O0-optnone`): promote memory to
/// registers, nothing that rewrites FP arithmetic. P' (`-O2 -ffast-math`): split the SLP vectors into scalars.
fn pipeline(build: Build) -> &'static str {
    match build {
        Build::P => "function(sroa,mem2reg)",
        Build::PPrime => "function(scalarizer)",
    }
}

fn target_machine(triple: &inkwell::targets::TargetTriple) -> Result<TargetMachine, ModelError> {
    static INIT: OnceLock<Result<(), ModelError>> = OnceLock::new();
    INIT.get_or_init(|| {
        Target::initialize_native(&InitializationConfig::default()).map_err(ModelError::Llvm)
    })
    .clone()?;
    let target = Target::from_triple(triple)
        .map_err(|e| ModelError::Llvm(format!("no LLVM target for {triple}: {e}")))?;
    target
        .create_target_machine(
            triple,
            "generic",
            "",
            OptimizationLevel::None,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| ModelError::Llvm(format!("cannot create a target machine for {triple}")))
}

thread_local! {
    /// This thread's target machines, by triple: making one costs more than a small pass (a file's project units
    /// run `globaldce` on 24 modules; Cephes `incbi.c`'s links took 99 ms with a machine each, 45 ms without).
    static MACHINES: std::cell::RefCell<BTreeMap<String, TargetMachine>> = Default::default();
}

/// Runs LLVM's new-pass-manager pipeline `passes` on `module` (its own triple, or the host's when it has none),
/// with the thread's target machine for that triple.
pub(crate) fn run_passes(module: &Module<'_>, passes: &str) -> Result<(), ModelError> {
    let mut triple = module.get_triple();
    if triple.as_str().to_bytes().is_empty() {
        triple = TargetMachine::get_default_triple();
    }
    let key = triple.as_str().to_string_lossy().into_owned();
    MACHINES.with(|machines| {
        let mut machines = machines.borrow_mut();
        if !machines.contains_key(&key) {
            machines.insert(key.clone(), target_machine(&triple)?);
        }
        module
            .run_passes(passes, &machines[&key], PassBuilderOptions::create())
            .map_err(|e| ModelError::Llvm(format!("LLVM passes `{passes}` failed: {e}")))
    })
}

/// Runs on the analysis copy of a build's module (it mutates it): for P `sroa` + `mem2reg`, for P' the
/// `scalarizer` (P' has `<2 x double>` SLP vector operations).
pub fn prepare_for_modelling(module: &Module<'_>, build: Build) -> Result<(), ModelError> {
    run_passes(module, pipeline(build))
}

/// The plain counterpart of a call of a constrained FP intrinsic (`llvm.experimental.constrained.fadd` is
/// `fadd`), as the model reads it; None for any other instruction, Err for a rounding mode the model does not
/// compute in. The instrumenter names sites with it.
pub fn constrained_call(
    inst: inkwell::values::InstructionValue<'_>,
) -> Option<Result<Plain, ModelError>> {
    use inkwell::values::AsValueRef;
    let inst = Val::new(inst.as_value_ref())?;
    (inst.opcode() == Some(LLVMOpcode::LLVMCall))
        .then(|| calls::constrained(inst))
        .flatten()
}

/// All exception queries of one function of a prepared module. `Err(reason)` when the function uses something
/// that cannot be modelled.
/// The queries of one build of a function.
#[derive(Debug, Clone, Default)]
pub struct Modelled {
    pub queries: Vec<Query>,
    /// Where the plain build's additions and subtractions cancel (empty for the fast-math build).
    pub cancellations: Vec<CancellationQuery>,
    /// Paths that stopped at a memory access with a symbolic index (not followed further).
    pub symbolic_index_stops: usize,
    /// Whether a bound other than loop unrolling (steps, queries, paths, inlining depth, the deadline) left
    /// paths unexplored.
    pub cut_short: bool,
    /// Whether its work budget stopped exploration.
    pub out_of_work: bool,
    /// Whether the wall-clock safety net stopped exploration.
    pub out_of_time: bool,
    /// The terms its exploration made.
    pub terms: u64,
    /// Other paths that ended early, by reason (`a call to `gsl_error``): what they did before is modelled.
    pub path_stops: BTreeMap<String, usize>,
    /// The explored paths with their outputs (the plain build only; empty for the fast-math build).
    pub outputs: Vec<PathOutputs>,
}

/// A value a path hands back to its caller, as the model holds it.
#[derive(Debug, Clone)]
pub enum OutputTerm {
    /// A `double` or `float`: its real-number term and the format the program keeps it in.
    Real { term: Expr, fmt: FloatFormat },
    /// An integer of `bits` (≥ 2), in signed form like every integer term.
    Int { term: Expr, bits: u32 },
    /// A `_Bool` (`i1`).
    Bool(Formula),
    /// A value the model does not follow, named in C words (`a pointer`, `a struct or vector`, `an
    /// uninitialised value`).
    Unmodelled(&'static str),
}

/// A value a path leaves behind a pointer parameter: the term last stored at byte `offset` of the buffer passed as
/// C parameter `param`.
#[derive(Debug, Clone)]
pub struct WrittenOutput {
    pub param: u32,
    pub offset: i64,
    pub value: OutputTerm,
    /// Where the path stored it (the store's line and column), when debug information says.
    pub stored_at: Option<SourceLoc>,
}

/// How an explored path ends.
#[derive(Debug, Clone)]
pub enum PathEnd {
    /// The function returns: what it returns (`None` for `void`) and what it wrote through its pointer
    /// parameters, by parameter and offset.
    Returned {
        ret: Option<OutputTerm>,
        writes: Vec<WrittenOutput>,
        /// Whether the path read through a pointer a value no input stands for (taken as zero).
        reads_unmodelled_memory: bool,
    },
    /// The path stops before returning, for this reason in C words (`a call to `gsl_error``).
    Stopped(String),
}

/// What the model knows of the outputs of one explored path of one build: the inputs that take it and what it
/// produces. Recorded for the plain build only (the reference of the accuracy measure, `accuracy.rs`); the terms
/// are those the model built anyway, so recording costs no solving.
#[derive(Debug, Clone)]
pub struct PathOutputs {
    /// The conjuncts of the path condition, assumptions included (kept apart: joining them costs hashing that
    /// only the few inputs evaluated need).
    pub condition: Vec<Formula>,
    pub end: PathEnd,
}

/// Where modelling one function stops, besides its step, path and query bounds.
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelLimits {
    /// The terms its exploration may make ([`crate::sym::terms_made`]): its work, the same on every machine and
    /// load, so that where it stops depends on the text and the budget alone.
    pub terms: Option<u64>,
    /// The wall-clock safety net.
    pub deadline: Option<std::time::Instant>,
}

/// Both builds of a function modelled over the same inputs.
#[derive(Debug, Clone)]
pub struct ModelledPair {
    /// The signature with the values read through pointer parameters appended as inputs (`v[0]`, `a[1]`).
    pub signature: FunctionSignature,
    pub p: Vec<Query>,
    pub pp: Vec<Query>,
    /// Where P's additions and subtractions cancel, a few paths per operation.
    pub cancellations: Vec<CancellationQuery>,
    /// Pointer parameters (`*p`) read where no input could stand for the value (zeros, as the runner passes).
    pub unmodelled_reads: Vec<String>,
    /// Paths of either build that stopped at a memory access with a symbolic index.
    pub symbolic_index_stops: usize,
    /// Whether either build's exploration was cut short by a bound other than loop unrolling.
    pub cut_short: bool,
    /// Whether the work budget stopped either build's exploration.
    pub out_of_work: bool,
    /// Whether the wall-clock safety net stopped either build's exploration.
    pub out_of_time: bool,
    /// Paths of either build that ended early, by reason (calls foe does not run, values it cannot follow).
    pub path_stops: BTreeMap<String, usize>,
    /// The explored paths of the plain build P, in exploration order, with their outputs.
    pub p_outputs: Vec<PathOutputs>,
}

/// Models P and P' of `sig`: a value either build reads through a pointer parameter before writing it becomes
/// an input of both (one [`PointeeTable`] for the two).
pub fn model_pair(
    p_module: &Module<'_>,
    pp_module: &Module<'_>,
    sig: &FunctionSignature,
    cfg: &AnalysisConfig,
    limits: ModelLimits,
) -> Result<ModelledPair, ModelError> {
    let pointees = PointeeTable::shared(sig.params.len() as u32);
    // The plain build gets half of the work and time; the fast-math build the rest.
    let half = ModelLimits {
        terms: limits.terms.map(|t| t / 2),
        deadline: limits.deadline.map(|d| {
            let now = std::time::Instant::now();
            now + d.saturating_duration_since(now) / 2
        }),
    };
    let in_build = |build| {
        move |error| ModelError::InBuild {
            build,
            error: Box::new(error),
        }
    };
    let p = model_function(p_module, sig, Build::P, cfg, &pointees, half)
        .map_err(in_build(Build::P))?;
    let rest = ModelLimits {
        terms: limits.terms.map(|t| t.saturating_sub(p.terms)),
        ..limits
    };
    let pp = model_function(pp_module, sig, Build::PPrime, cfg, &pointees, rest)
        .map_err(in_build(Build::PPrime))?;
    let table = pointees.borrow();
    let mut path_stops = p.path_stops;
    for (reason, n) in pp.path_stops {
        *path_stops.entry(reason).or_default() += n;
    }
    Ok(ModelledPair {
        path_stops,
        signature: with_pointee_params(sig, &table.slots),
        p: p.queries,
        pp: pp.queries,
        cancellations: p.cancellations,
        unmodelled_reads: table.unmodelled.iter().cloned().collect(),
        symbolic_index_stops: p.symbolic_index_stops + pp.symbolic_index_stops,
        cut_short: p.cut_short || pp.cut_short,
        out_of_work: p.out_of_work || pp.out_of_work,
        out_of_time: p.out_of_time || pp.out_of_time,
        p_outputs: p.outputs,
    })
}

/// `sig` with one parameter per value behind a pointer, named as C would index the pointer by the value's type
/// (`v[2]` for the third double of `v`), or by byte offset where that does not divide evenly.
pub fn with_pointee_params(sig: &FunctionSignature, slots: &[PointeeSlot]) -> FunctionSignature {
    let mut out = sig.clone();
    for slot in slots {
        let pointer = &sig.params[slot.param as usize].name;
        let size = slot.scalar.bytes() as i64;
        let name = if slot.offset % size == 0 {
            format!("{pointer}[{}]", slot.offset / size)
        } else {
            format!("{pointer}@{}", slot.offset)
        };
        out.params.push(Param {
            name,
            ty: slot.param_type(),
            pointee: Some(PointeeOf {
                param: slot.param,
                offset: slot.offset as u32,
            }),
            by_value: None,
        });
    }
    out
}

/// The queries of one build of `sig` (its C parameters); values read through pointers are the inputs of
/// `pointees`.
pub fn model_function(
    module: &Module<'_>,
    sig: &FunctionSignature,
    build: Build,
    cfg: &AnalysisConfig,
    pointees: &Pointees,
    limits: ModelLimits,
) -> Result<Modelled, ModelError> {
    let function = llvm::function(module, &sig.name).ok_or_else(|| ModelError::NotInBuild {
        function: sig.name.clone(),
        build,
    })?;
    if function.entry_block().is_none() {
        return Err(ModelError::NoBody {
            function: sig.name.clone(),
            build,
        });
    }
    check_supported(function)?;
    let mut executor = exec::Executor::new(
        llvm::Layout::of(module),
        build,
        cfg.unroll_bound,
        cfg.max_paths,
        pointees.clone(),
    );
    executor.limits = limits;
    let started = std::time::Instant::now();
    executor.run(function, sig)?;
    let terms = crate::sym::terms_made() - executor.terms_start;
    tracing::debug!(
        function = %sig.name,
        build = build.label(),
        queries = executor.queries.len(),
        truncated = executor.truncated,
        steps = executor.steps,
        terms,
        out_of_work = executor.out_of_work,
        out_of_time = executor.out_of_time,
        ms = started.elapsed().as_millis() as u64,
        "modelled"
    );
    Ok(Modelled {
        queries: executor.queries,
        cancellations: executor.cancellations,
        symbolic_index_stops: executor.symbolic_index_stops,
        cut_short: executor.cut_short,
        out_of_work: executor.out_of_work,
        out_of_time: executor.out_of_time,
        terms,
        path_stops: executor.path_stops,
        outputs: executor.outputs,
    })
}

/// Fails with a reason when `function` itself uses an instruction, callee or type that the model does not
/// handle, so that the reason does not depend on which paths get explored. What a callee cannot model ends
/// only the paths that call it (a function of another unit may do anything on its error paths).
fn check_supported(function: Val<'_>) -> Result<(), ModelError> {
    let mut seen = HashSet::new();
    let mut todo = vec![function];
    while let Some(f) = todo.pop() {
        if !seen.insert(f.id()) {
            continue;
        }
        let Some(entry) = f.entry_block() else {
            continue;
        };
        let mut blocks = vec![entry];
        let mut seen_blocks = HashSet::new();
        while let Some(b) = blocks.pop() {
            if !seen_blocks.insert(b.id()) {
                continue;
            }
            for inst in b.instructions() {
                let opcode = inst
                    .opcode()
                    .ok_or_else(|| ModelError::internal("not an instruction"))?;
                check_type(inst.ty())?;
                if opcode == LLVMOpcode::LLVMCall {
                    calls::classify(inst)?;
                } else if !SUPPORTED.contains(&opcode) {
                    return Err(ModelError::Instruction(values::opcode_name(opcode)));
                }
                if matches!(opcode, LLVMOpcode::LLVMBr | LLVMOpcode::LLVMSwitch) {
                    blocks.extend((0..inst.num_successors()).map(|i| inst.successor(i)));
                }
            }
        }
    }
    Ok(())
}

fn check_type(ty: llvm::Ty<'_>) -> Result<(), ModelError> {
    use LLVMTypeKind::*;
    match ty.kind() {
        // `long double` ends the path that computes with it (see `exec::uses_long_double`), so an unused branch
        // (musl's classification macros keep one at -O0) does not cost the whole function.
        LLVMHalfTypeKind | LLVMBFloatTypeKind | LLVMFP128TypeKind | LLVMPPC_FP128TypeKind => Err(
            ModelError::Unsupported(format!("uses the `{}` floating-point type", ty.text())),
        ),
        LLVMScalableVectorTypeKind => Err(ModelError::unsupported("uses scalable vectors")),
        LLVMVectorTypeKind | LLVMArrayTypeKind => check_type(ty.element()),
        _ => Ok(()),
    }
}

const SUPPORTED: &[LLVMOpcode] = {
    use LLVMOpcode::*;
    &[
        LLVMRet,
        LLVMBr,
        LLVMSwitch,
        LLVMUnreachable,
        LLVMFNeg,
        LLVMAdd,
        LLVMFAdd,
        LLVMSub,
        LLVMFSub,
        LLVMMul,
        LLVMFMul,
        LLVMUDiv,
        LLVMSDiv,
        LLVMFDiv,
        LLVMURem,
        LLVMSRem,
        LLVMFRem,
        LLVMShl,
        LLVMLShr,
        LLVMAShr,
        LLVMAnd,
        LLVMOr,
        LLVMXor,
        LLVMAlloca,
        LLVMLoad,
        LLVMStore,
        LLVMGetElementPtr,
        LLVMTrunc,
        LLVMZExt,
        LLVMSExt,
        LLVMFPToUI,
        LLVMFPToSI,
        LLVMUIToFP,
        LLVMSIToFP,
        LLVMFPTrunc,
        LLVMFPExt,
        LLVMBitCast,
        LLVMAddrSpaceCast,
        LLVMICmp,
        LLVMFCmp,
        LLVMPHI,
        LLVMSelect,
        LLVMExtractElement,
        LLVMInsertElement,
        LLVMShuffleVector,
        LLVMExtractValue,
        LLVMInsertValue,
        LLVMFreeze,
    ]
};
