//! Instrumentation of the two builds for native runs: a `__foe_check(site)` call after every floating-point
//! instruction (with a site table mapping ids to build, function, operation and source position), per-build
//! symbol prefixes so P and P' link into one program, typed entry wrappers, the entry table the batch driver
//! calls through, and object-code generation without re-optimisation.
//!
//! The pass works on the IR as clang produced it (P' already optimised): instrumenting before optimisation
//! would let the optimiser move floating-point operations across the checks.

use crate::types::{Build, FunctionSignature, ParamType, ReturnType};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine,
};
use inkwell::types::{AnyType, AnyTypeEnum, BasicTypeEnum};
use inkwell::values::{
    AsValueRef, BasicMetadataValueEnum, BasicValueEnum, CallSiteValue, FunctionValue,
    InstructionOpcode, InstructionValue,
};
use inkwell::{AddressSpace, OptimizationLevel};
use std::path::Path;

/// The runtime function called after every floating-point instruction.
pub const CHECK_FN: &str = "__foe_check";
/// The runtime's hooks around an entry's call: keep the pointer parameters' buffers, then compare them.
const WATCH_FN: &str = "__foe_watch";
const OBSERVE_FN: &str = "__foe_observe";
/// `void *__foe_buffer(i32 slot, i32 bytes)`: a pointer parameter's zeroed buffer between guard pages.
const BUFFER_FN: &str = "__foe_buffer";
/// Buffers one entry takes from [`BUFFER_FN`] (`FOE_BUFFER_SLOTS` of the runtime); more stay on its stack.
const BUFFER_SLOTS: u32 = 32;
/// The runtime's hook that records an operation's value in runs that ask for values.
const VALUE_FN: &str = "__foe_value";
/// The runtime function a call the worker must not execute is replaced by (its operand is the stop id).
pub const STOP_FN: &str = "__foe_stop";
/// Metadata kind marking an instrumented instruction (its operand is the site id); makes the pass idempotent.
pub const SITE_MD: &str = "foe.site";
/// The generated table of entry points (`[2N x ptr]`, P then P' for each function).
pub const ENTRY_TABLE: &str = "__foe_entries";
/// The generated number of functions in [`ENTRY_TABLE`] (`i32`).
pub const ENTRY_COUNT: &str = "__foe_entry_count";
/// Site ids share a 32-bit trace word with a 3-bit kind.
pub const MAX_SITES: usize = 1 << 29;

/// One instrumented instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub build: Build,
    /// The C name of the function holding the instruction (after inlining, the caller).
    pub function: String,
    /// The opcode or callee (`fmul`, `fcmp olt`, `call exp`, `fdiv <2 x double>`).
    pub operation: String,
    /// From the debug info; for an instruction the optimiser left without a location, the line of the nearest
    /// located instruction of its block (usually the same statement) and no column.
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The C type of its scalar result (a comparison's is a 1-bit integer), as its recorded value is read.
    pub value: Option<crate::scalar::ScalarType>,
}

/// A call the worker does not execute (no definition, or I/O, allocation, exit: see
/// [`crate::model::runs_natively`]); the run stops there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopSite {
    pub build: Build,
    /// The function called.
    pub callee: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

/// Site id → site, for both builds (ids are unique across them), stop id → stopping call, and access id →
/// bounded access ([`guard_object_accesses`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteTable {
    sites: Vec<Site>,
    stops: Vec<StopSite>,
    accesses: Vec<AccessSite>,
}

impl SiteTable {
    /// The bounded access of an access id.
    pub fn access(&self, id: u32) -> Option<&AccessSite> {
        self.accesses.get(id as usize)
    }
    /// The stopping call of a stop id.
    pub fn stop(&self, id: u32) -> Option<&StopSite> {
        self.stops.get(id as usize)
    }
    /// The stopping calls of both builds.
    pub fn stops(&self) -> impl Iterator<Item = &StopSite> {
        self.stops.iter()
    }
    pub fn get(&self, id: u32) -> Option<&Site> {
        self.sites.get(id as usize)
    }
    pub fn len(&self) -> usize {
        self.sites.len()
    }
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Site)> {
        self.sites.iter().enumerate().map(|(i, s)| (i as u32, s))
    }
    fn push(&mut self, site: Site) -> Result<u32, InstrumentError> {
        if self.sites.len() >= MAX_SITES {
            return Err(InstrumentError::TooManySites(self.sites.len()));
        }
        self.sites.push(site);
        Ok(self.sites.len() as u32 - 1)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InstrumentError {
    #[error("too many floating-point operations to instrument ({0})")]
    TooManySites(usize),
    #[error("cannot build IR for {what}: {message}")]
    Builder { what: String, message: String },
    #[error("the instrumented module is invalid: {0}")]
    Verify(String),
    #[error("code generation failed: {0}")]
    Codegen(String),
}

fn builder_error(
    what: impl Into<String>,
) -> impl FnOnce(inkwell::builder::BuilderError) -> InstrumentError {
    let what = what.into();
    move |e| InstrumentError::Builder {
        what,
        message: e.to_string(),
    }
}

/// Symbol prefix of a build's definitions in the linked program.
pub fn build_prefix(build: Build) -> &'static str {
    match build {
        Build::P => "__foe_p.",
        Build::PPrime => "__foe_pp.",
    }
}

/// The declaration of a runtime function `void name(i32)` in `module` with the given function attributes, added
/// when missing.
fn runtime_hook<'ctx>(
    module: &Module<'ctx>,
    name: &str,
    attributes: &[&str],
) -> FunctionValue<'ctx> {
    if let Some(f) = module.get_function(name) {
        return f;
    }
    let ctx = module.get_context();
    let f = module.add_function(
        name,
        ctx.void_type().fn_type(&[ctx.i32_type().into()], false),
        None,
    );
    for attr in attributes {
        let id = inkwell::attributes::Attribute::get_named_enum_kind_id(attr);
        f.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            ctx.create_enum_attribute(id, 0),
        );
    }
    f
}

/// The functions `module` defines that are the user's (not the runtime's `__foe*`).
pub(crate) fn user_functions<'ctx>(
    module: &Module<'ctx>,
) -> impl Iterator<Item = FunctionValue<'ctx>> {
    module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0 && !f.get_name().to_bytes().starts_with(b"__foe"))
}

/// Whether a function defined in `module` has an operation [`instrument_module`] would make a site of: without
/// one in either build, fast-math has nothing of the program to change (code the preprocessor chose by
/// `__FAST_MATH__` still differs in the instrumented builds, which the search compares).
pub fn has_fp_operations(module: &Module<'_>) -> bool {
    user_functions(module).any(|f| {
        f.get_basic_block_iter()
            .any(|b| b.get_instructions().any(|i| raises_fp_exceptions(i, None)))
    })
}

/// Inserts `call void @__foe_check(i32 site)` after every floating-point instruction of every function defined
/// in `module`, recording each site in `sites`. Already instrumented instructions are skipped. Returns the
/// number of checks inserted.
pub fn instrument_module(
    module: &Module<'_>,
    build: Build,
    sites: &mut SiteTable,
) -> Result<usize, InstrumentError> {
    let ctx = module.get_context();
    let i32t = ctx.i32_type();
    let check = runtime_hook(module, CHECK_FN, &["nounwind"]);
    let kind = ctx.get_kind_id(SITE_MD);
    let builder = ctx.create_builder();
    let mut inserted = 0;
    for function in user_functions(module) {
        let fname = function.get_name().to_string_lossy().into_owned();
        let mut targets = Vec::new();
        for block in function.get_basic_block_iter() {
            for inst in block.get_instructions() {
                if inst.get_metadata(kind).is_none() && raises_fp_exceptions(inst, Some(check)) {
                    targets.push(inst);
                }
            }
        }
        for inst in targets {
            let Some(next) = inst.get_next_instruction() else {
                continue;
            };
            let loc = source_position(inst);
            let id = sites.push(Site {
                build,
                function: fname.clone(),
                operation: operation_text(inst),
                line: loc.map(|l| l.0),
                column: loc.map(|l| l.1).filter(|&c| c > 0),
                value: scalar_type_of(inst),
            })?;
            let md = ctx.metadata_node(&[i32t.const_int(id as u64, false).into()]);
            inst.set_metadata(md, kind)
                .map_err(|e| InstrumentError::Builder {
                    what: format!("the site mark in {fname}"),
                    message: e.to_string(),
                })?;
            builder.position_before(&next);
            let call = builder
                .build_call(check, &[i32t.const_int(id as u64, false).into()], "")
                .map_err(builder_error(format!("the check in {fname}")))?;
            if let Some(call_inst) = call.try_as_basic_value().instruction() {
                let _ = call_inst.set_metadata(md, kind);
            }
            record_value(module, &builder, inst, id, md, kind)?;
            inserted += 1;
        }
    }
    Ok(inserted)
}

/// The C type of an instruction's scalar result, if it has one.
fn scalar_type_of(inst: InstructionValue<'_>) -> Option<crate::scalar::ScalarType> {
    use crate::scalar::ScalarType;
    match inst.get_type() {
        AnyTypeEnum::FloatType(t) if t.get_bit_width() == 64 => Some(ScalarType::F64),
        AnyTypeEnum::FloatType(t) if t.get_bit_width() == 32 => Some(ScalarType::F32),
        AnyTypeEnum::IntType(t) if t.get_bit_width() <= 64 => Some(ScalarType::Int {
            bits: t.get_bit_width(),
            signed: t.get_bit_width() > 1,
        }),
        _ => None,
    }
}

/// Inserts, after an instruction's check, `call void @__foe_value(i32 site, i64 bits)` with its scalar result (a
/// double's or float's bits, a comparison's or conversion's integer zero-extended): the runtime records it only
/// in runs that ask for values ([`crate::exec::Runner::values`]), to find where the builds' values part.
fn record_value<'ctx>(
    module: &Module<'ctx>,
    builder: &inkwell::builder::Builder<'ctx>,
    inst: InstructionValue<'ctx>,
    site: u32,
    md: inkwell::values::MetadataValue<'ctx>,
    kind: u32,
) -> Result<(), InstrumentError> {
    let ctx = module.get_context();
    let i64t = ctx.i64_type();
    let what = || format!("the value record of site {site}");
    use inkwell::values::AnyValue;
    let Ok(value) = BasicValueEnum::try_from(inst.as_any_value_enum()) else {
        return Ok(());
    };
    let bits = match value {
        BasicValueEnum::FloatValue(f) if f.get_type().get_bit_width() == 64 => builder
            .build_bit_cast(f, i64t, "")
            .map_err(builder_error(what()))?
            .into_int_value(),
        BasicValueEnum::FloatValue(f) if f.get_type().get_bit_width() == 32 => {
            let word = builder
                .build_bit_cast(f, ctx.i32_type(), "")
                .map_err(builder_error(what()))?
                .into_int_value();
            builder
                .build_int_z_extend(word, i64t, "")
                .map_err(builder_error(what()))?
        }
        BasicValueEnum::IntValue(v) if v.get_type().get_bit_width() == 64 => v,
        BasicValueEnum::IntValue(v) if v.get_type().get_bit_width() < 64 => builder
            .build_int_z_extend(v, i64t, "")
            .map_err(builder_error(what()))?,
        _ => return Ok(()),
    };
    let hook = module.get_function(VALUE_FN).unwrap_or_else(|| {
        let fn_type = ctx
            .void_type()
            .fn_type(&[ctx.i32_type().into(), i64t.into()], false);
        module.add_function(VALUE_FN, fn_type, None)
    });
    let call = builder
        .build_call(
            hook,
            &[
                ctx.i32_type().const_int(site as u64, false).into(),
                bits.into(),
            ],
            "",
        )
        .map_err(builder_error(what()))?;
    if let Some(call_inst) = call.try_as_basic_value().instruction() {
        let _ = call_inst.set_metadata(md, kind);
    }
    Ok(())
}

/// The instruction's line and column (column 0 when unknown); when the optimiser dropped its location (it does
/// for reassociated operations), the line of the nearest following instruction of the block that has one, else
/// of the nearest preceding one, with column 0.
fn source_position(inst: InstructionValue<'_>) -> Option<(u32, u32)> {
    // In the analysed file: an operation inlined from a header's function is placed at the call.
    let own = |i: InstructionValue<'_>| {
        // SAFETY: `i` is an instruction of a module borrowed for its lifetime.
        unsafe { crate::headers::position_in_file(i.as_value_ref()) }.filter(|&(line, _)| line > 0)
    };
    // A borrowed position keeps only the line: its column belongs to another operation.
    let line_only = |i: InstructionValue<'_>| own(i).map(|(line, _)| (line, 0));
    own(inst)
        .or_else(|| {
            std::iter::successors(inst.get_next_instruction(), |i| i.get_next_instruction())
                .find_map(line_only)
        })
        .or_else(|| {
            std::iter::successors(inst.get_previous_instruction(), |i| {
                i.get_previous_instruction()
            })
            .find_map(line_only)
        })
}

/// Whether `inst` is a floating-point operation that can set an IEEE exception flag.
fn raises_fp_exceptions(inst: InstructionValue<'_>, check: Option<FunctionValue<'_>>) -> bool {
    use InstructionOpcode::*;
    match inst.get_opcode() {
        FAdd | FSub | FMul | FDiv | FRem | FCmp | FPToSI | FPToUI | SIToFP | UIToFP | FPExt
        | FPTrunc => true,
        Call => {
            let Ok(call) = CallSiteValue::try_from(inst) else {
                return false;
            };
            if let Some(callee) = call.get_called_fn_value() {
                // Defined functions are instrumented themselves; the check itself raises nothing.
                if Some(callee) == check || callee.count_basic_blocks() > 0 {
                    return false;
                }
                let name = callee.get_name().to_bytes();
                if name.starts_with(b"llvm.dbg.") || name.starts_with(b"llvm.lifetime.") {
                    return false;
                }
                // A constrained intrinsic is an FP operation (`sitofp` of an integer constant too).
                if crate::model::constrained_call(inst).is_some() {
                    return true;
                }
            }
            if crate::ir::is_fp_type(inst.get_type()) {
                return true;
            }
            // The declared parameter types: inkwell cannot read a metadata argument as a value.
            match call.get_called_fn_value() {
                Some(callee) => callee.get_type().get_param_types().into_iter().any(|t| {
                    BasicTypeEnum::try_from(t)
                        .is_ok_and(|t| crate::ir::is_fp_type(t.as_any_type_enum()))
                }),
                None => (0..call.count_arguments()).any(|i| {
                    inst.get_operand(i)
                        .and_then(|op| op.value())
                        .is_some_and(|v| crate::ir::is_fp_type(v.get_type().as_any_type_enum()))
                }),
            }
        }
        _ => false,
    }
}

/// A short description of the operation for reports; a constrained intrinsic is named as its plain
/// counterpart (`fadd`, `fcmp olt`, `call sqrt`), as the model names it.
fn operation_text(inst: InstructionValue<'_>) -> String {
    use crate::model::Plain;
    let plain = crate::model::constrained_call(inst).and_then(Result::ok);
    let base = match &plain {
        Some(Plain::Intrinsic(name)) => format!("call {}", short_callee(name)),
        Some(p) => p.instruction_text().unwrap_or_default(),
        None => opcode_text(inst),
    };
    let instruction = match plain {
        Some(p) => matches!(p, Plain::Instruction { .. }),
        None => inst.get_opcode() != InstructionOpcode::Call,
    };
    // Vector operations carry their type (`fmul <2 x double>`); conversions and compares to vectors too.
    let vector_ty = |t: AnyTypeEnum<'_>| matches!(t, AnyTypeEnum::VectorType(_));
    let operand_ty = inst
        .get_operand(0)
        .and_then(|o| o.value())
        .map(|v| v.get_type().as_any_type_enum());
    if instruction {
        if vector_ty(inst.get_type()) {
            return format!(
                "{base} {}",
                inst.get_type().print_to_string().to_string_lossy()
            );
        }
        if let Some(t) = operand_ty.filter(|t| vector_ty(*t)) {
            return format!("{base} {}", t.print_to_string().to_string_lossy());
        }
    }
    base
}

/// The name of an instruction's opcode (`fadd`, `fcmp olt`, `call sqrt`).
fn opcode_text(inst: InstructionValue<'_>) -> String {
    use InstructionOpcode::*;
    match inst.get_opcode() {
        FAdd => "fadd".to_string(),
        FSub => "fsub".into(),
        FMul => "fmul".into(),
        FDiv => "fdiv".into(),
        FRem => "frem".into(),
        FPToSI => "fptosi".into(),
        FPToUI => "fptoui".into(),
        SIToFP => "sitofp".into(),
        UIToFP => "uitofp".into(),
        FPExt => "fpext".into(),
        FPTrunc => "fptrunc".into(),
        FCmp => format!(
            "fcmp {}",
            inst.get_fcmp_predicate()
                .and_then(|p| crate::model::predicate_name(p.into()))
                .unwrap_or("?")
        ),
        Call => {
            let callee = CallSiteValue::try_from(inst)
                .ok()
                .and_then(|c| c.get_called_fn_value())
                .map(|f| f.get_name().to_string_lossy().into_owned());
            match callee {
                Some(name) => format!("call {}", short_callee(&name)),
                None => "call (indirect)".into(),
            }
        }
        other => format!("{other:?}").to_lowercase(),
    }
}

/// `llvm.sqrt.f64` → `sqrt`, `llvm.maxnum.v2f64` → `maxnum`; other names unchanged.
fn short_callee(name: &str) -> &str {
    let Some(rest) = name.strip_prefix("llvm.") else {
        return name;
    };
    match rest.rsplit_once('.') {
        Some((head, suffix))
            if suffix.starts_with('f') || suffix.starts_with('v') || suffix.starts_with('i') =>
        {
            head
        }
        _ => rest,
    }
}

mod bounds;
mod calls;
mod codegen;
mod entry;
mod isolate;
#[cfg(test)]
mod tests;

pub use bounds::{guard_object_accesses, AccessSite};
pub use calls::{call_replacements, replace_stopping_calls};
pub use codegen::{
    data_declarations, declared_names, emit_object, finish_module, stub_module, GUARD_SECTION,
};
pub use entry::{add_entry, add_entry_table, Unavailable};
pub use isolate::{
    internalize, isolate_user_code, keep_only_entries, prefix_symbols, RESERVED_PREFIX,
};
