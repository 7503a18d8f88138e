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
    BasicMetadataValueEnum, BasicValueEnum, CallSiteValue, FunctionValue, InstructionOpcode,
    InstructionValue,
};
use inkwell::{AddressSpace, OptimizationLevel};
use std::path::Path;

/// The runtime function called after every floating-point instruction.
pub const CHECK_FN: &str = "__foe_check";
/// The runtime's hooks around an entry's call: keep the pointer parameters' buffers, then compare them.
const WATCH_FN: &str = "__foe_watch";
const OBSERVE_FN: &str = "__foe_observe";
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

/// Site id → site, for both builds (ids are unique across them), and stop id → stopping call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteTable {
    sites: Vec<Site>,
    stops: Vec<StopSite>,
}

impl SiteTable {
    /// The stopping call of a stop id.
    pub fn stop(&self, id: u32) -> Option<&StopSite> {
        self.stops.get(id as usize)
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
    for function in module.get_functions() {
        if function.count_basic_blocks() == 0 {
            continue;
        }
        let fname = function.get_name().to_string_lossy().into_owned();
        if fname.starts_with("__foe") {
            continue;
        }
        let mut targets = Vec::new();
        for block in function.get_basic_block_iter() {
            for inst in block.get_instructions() {
                if inst.get_metadata(kind).is_none() && raises_fp_exceptions(inst, check) {
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

/// The LLVM intrinsics that x86-64 code generation (without SSE4.1) lowers to a call of the C library function of
/// the same name (`llvm.exp.f64` to `exp`, `llvm.floor.f32` to `floorf`); `sqrt`, `fabs`, `copysign`, `minnum`
/// and the like become instructions.
const LOWERED_TO_LIBCALLS: &[&str] = &[
    "exp",
    "exp2",
    "exp10",
    "log",
    "log2",
    "log10",
    "pow",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "floor",
    "ceil",
    "trunc",
    "round",
    "rint",
    "nearbyint",
    "roundeven",
    "fma",
    "ldexp",
];

/// Calls `module`'s definition of a C library function from its file's library
/// ([`crate::model::REPLACES_C_LIBRARY`]) where the build calls an intrinsic that the shipped binary's code
/// generation lowers to a call of that name, as the shipped binary, linked with the library, does. The worker's
/// own code generation would call the C library's instead, because the definitions are renamed
/// ([`prefix_symbols`]). Returns the number of calls redirected.
pub fn call_replacements(module: &Module<'_>) -> usize {
    let mut redirected = 0;
    for function in module.get_functions() {
        for (inst, callee) in direct_calls(function) {
            let name = callee.get_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix("llvm.") else {
                continue;
            };
            let libcall = match rest.rsplit_once('.') {
                Some((base, "f64")) if LOWERED_TO_LIBCALLS.contains(&base) => base.to_string(),
                Some((base, "f32")) if LOWERED_TO_LIBCALLS.contains(&base) => {
                    format!("{base}f")
                }
                _ => continue,
            };
            let Some(replacement) = module.get_function(&libcall).filter(|f| {
                f.count_basic_blocks() > 0
                    && f.get_string_attribute(
                        inkwell::attributes::AttributeLoc::Function,
                        crate::model::REPLACES_C_LIBRARY,
                    )
                    .is_some()
                    && f.get_type() == callee.get_type()
            }) else {
                continue;
            };
            let last = inst.get_num_operands() - 1;
            if inst.set_operand(last, replacement.as_global_value().as_pointer_value()) {
                redirected += 1;
            }
        }
    }
    redirected
}

/// The calls (and invokes) in `function` whose callee is a function, with that function.
fn direct_calls<'ctx>(
    function: FunctionValue<'ctx>,
) -> Vec<(InstructionValue<'ctx>, FunctionValue<'ctx>)> {
    function
        .get_basic_block_iter()
        .flat_map(|block| block.get_instructions())
        .filter_map(|inst| {
            let callee = CallSiteValue::try_from(inst)
                .ok()
                .and_then(|c| c.get_called_fn_value())?;
            Some((inst, callee))
        })
        .collect()
}

/// Replaces every call of a function defined in `module` to a declared function the worker must not execute
/// ([`crate::model::runs_natively`]) by `call void @__foe_stop(i32 stop)`, which ends the run there; the call's
/// result, never reached, becomes undefined. Returns the number of calls replaced.
pub fn replace_stopping_calls(
    module: &Module<'_>,
    build: Build,
    sites: &mut SiteTable,
) -> Result<usize, InstrumentError> {
    let ctx = module.get_context();
    let i32t = ctx.i32_type();
    let stop = runtime_hook(module, STOP_FN, &["nounwind", "noreturn"]);
    let builder = ctx.create_builder();
    let mut replaced = 0;
    for function in module.get_functions() {
        let fname = function.get_name().to_string_lossy().into_owned();
        if function.count_basic_blocks() == 0 || fname.starts_with("__foe") {
            continue;
        }
        let mut targets = Vec::new();
        for (inst, callee) in direct_calls(function) {
            let name = callee.get_name().to_string_lossy().into_owned();
            if inst.get_opcode() == InstructionOpcode::Call
                && callee.count_basic_blocks() == 0
                && !crate::model::runs_natively(&name)
            {
                targets.push((inst, name));
            }
        }
        for (inst, callee) in targets {
            let loc = source_position(inst);
            let id = sites.stops.len() as u32;
            sites.stops.push(StopSite {
                build,
                callee,
                line: loc.map(|l| l.0),
                column: loc.map(|l| l.1).filter(|&c| c > 0),
            });
            builder.position_before(&inst);
            builder
                .build_call(stop, &[i32t.const_int(id as u64, false).into()], "")
                .map_err(builder_error(format!("the stop in {fname}")))?;
            if replace_with_undef(inst) {
                inst.erase_from_basic_block();
            }
            replaced += 1;
        }
    }
    Ok(replaced)
}

/// Replaces the uses of a call's result by `undef`; false (the call stays, unreachable after the stop) for a
/// result type inkwell cannot replace.
fn replace_with_undef(call: InstructionValue<'_>) -> bool {
    let Ok(site) = CallSiteValue::try_from(call) else {
        return false;
    };
    match site.try_as_basic_value().basic() {
        None => true,
        Some(BasicValueEnum::FloatValue(v)) => {
            v.replace_all_uses_with(v.get_type().get_undef());
            true
        }
        Some(BasicValueEnum::IntValue(v)) => {
            v.replace_all_uses_with(v.get_type().get_undef());
            true
        }
        Some(BasicValueEnum::PointerValue(v)) => {
            v.replace_all_uses_with(v.get_type().get_undef());
            true
        }
        Some(BasicValueEnum::StructValue(v)) => {
            v.replace_all_uses_with(v.get_type().get_undef());
            true
        }
        Some(BasicValueEnum::ArrayValue(v)) => {
            v.replace_all_uses_with(v.get_type().get_undef());
            true
        }
        Some(_) => false,
    }
}

/// The instruction's line and column (column 0 when unknown); when the optimiser dropped its location (it does
/// for reassociated operations), the line of the nearest following instruction of the block that has one, else
/// of the nearest preceding one, with column 0.
fn source_position(inst: InstructionValue<'_>) -> Option<(u32, u32)> {
    let own = |i: InstructionValue<'_>| {
        i.get_debug_location()
            .filter(|l| l.get_line() > 0)
            .map(|l| (l.get_line(), l.get_column()))
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
fn raises_fp_exceptions(inst: InstructionValue<'_>, check: FunctionValue<'_>) -> bool {
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
                if callee == check || callee.count_basic_blocks() > 0 {
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

/// Cuts from a build's module everything that would run without the analysis asking for it, and every name
/// that could capture the runtime's symbols, before instrumentation: static constructors and destructors
/// (`llvm.global_ctors`/`dtors`), the `used` lists that keep otherwise unreferenced code, explicit sections
/// (`.init_array`, `.preinit_array`, `.fini_array`, ...), module-level assembly, and names in the runtime's
/// reserved `__foe` space (renamed `user.<name>`, so a declaration of `__foe_entries` in the file refers to
/// nothing of the runtime and is stubbed like any symbol of another file). [`keep_only_entries`] later drops
/// every definition the entry points do not reach.
pub fn isolate_user_code(module: &Module<'_>) {
    module.set_inline_assembly("");
    let mut doomed = Vec::new();
    for global in module.get_globals() {
        let name = global.get_name().to_string_lossy().into_owned();
        if matches!(
            name.as_str(),
            "llvm.global_ctors" | "llvm.global_dtors" | "llvm.used" | "llvm.compiler.used"
        ) {
            doomed.push(global);
            continue;
        }
        if name.starts_with("llvm.") {
            continue;
        }
        global.set_section(None);
        if name.starts_with(RESERVED_PREFIX) {
            global.set_name(&format!("user.{name}"));
        }
    }
    for global in doomed {
        // SAFETY: the appending ctor/dtor/used arrays have no users inside the module.
        unsafe { global.delete() };
    }
    for function in module.get_functions() {
        let name = function.get_name().to_string_lossy().into_owned();
        if name.starts_with("llvm.") {
            continue;
        }
        function.set_section(None);
        if name.starts_with(RESERVED_PREFIX) {
            function.as_global_value().set_name(&format!("user.{name}"));
        }
    }
}

/// Names starting with this belong to foe's runtime and generated code.
pub const RESERVED_PREFIX: &str = "__foe";

/// Gives every definition of `module` the build's prefix and internal linkage, so two builds of one file link
/// into one program. Declarations (libc, libm) and intrinsics are left alone. Runs after [`isolate_user_code`]
/// and instrumentation, so the only `__foe` names are foe's own.
pub fn prefix_symbols(module: &Module<'_>, build: Build) {
    let prefix = build_prefix(build);
    for (function, name) in crate::ir::user_functions(module) {
        function
            .as_global_value()
            .set_name(&format!("{prefix}{name}"));
        function.set_linkage(Linkage::Internal);
    }
    for global in module.get_globals() {
        let name = global.get_name().to_string_lossy().into_owned();
        if global.is_declaration() || name.starts_with("llvm.") || name.starts_with(RESERVED_PREFIX)
        {
            continue;
        }
        if !name.is_empty() {
            global.set_name(&format!("{prefix}{name}"));
        }
        global.set_linkage(Linkage::Internal);
    }
}

/// Makes every definition of `module` but `keep` internal (aliases and ifuncs too, which [`prefix_symbols`]
/// cannot reach), so nothing of the user's can take the name of a libc function the runtime calls, and two
/// builds link without clashes.
pub fn internalize<'ctx>(
    module: &Module<'ctx>,
    keep: &[FunctionValue<'ctx>],
) -> Result<(), InstrumentError> {
    let kept: Vec<_> = keep
        .iter()
        .map(|f| f.as_global_value().as_pointer_value())
        .collect();
    set_used(module, &kept);
    run_passes(module, "internalize")
}

/// Keeps of the linked runner only what the entry table reaches: the table and its count stay external (in
/// `llvm.used`), everything else becomes internal and whatever they do not reference is deleted.
pub fn keep_only_entries(module: &Module<'_>) -> Result<(), InstrumentError> {
    let kept: Vec<_> = [ENTRY_TABLE, ENTRY_COUNT]
        .iter()
        .filter_map(|name| module.get_global(name))
        .map(|g| g.as_pointer_value())
        .collect();
    set_used(module, &kept);
    run_passes(module, "internalize,globaldce")
}

/// Replaces `llvm.used` (the symbols no pass may remove or internalize) with `values`.
fn set_used<'ctx>(module: &Module<'ctx>, values: &[inkwell::values::PointerValue<'ctx>]) {
    if let Some(old) = module.get_global("llvm.used") {
        // SAFETY: the appending `used` array has no users.
        unsafe { old.delete() };
    }
    let ptr = module.get_context().ptr_type(AddressSpace::default());
    let used = module.add_global(ptr.array_type(values.len() as u32), None, "llvm.used");
    used.set_initializer(&ptr.const_array(values));
    used.set_linkage(Linkage::Appending);
    used.set_section(Some("llvm.metadata"));
}

fn run_passes(module: &Module<'_>, passes: &str) -> Result<(), InstrumentError> {
    let machine = target_machine(module)?;
    module
        .run_passes(
            passes,
            &machine,
            inkwell::passes::PassBuilderOptions::create(),
        )
        .map_err(|e| InstrumentError::Codegen(format!("{passes}: {e}")))
}

/// Why a function cannot be called in one build.
pub type Unavailable = String;

/// Adds `i64 @<entry name>(ptr %args)` to `module` (already prefixed): it reads one 64-bit word per parameter
/// (double and float bit patterns, integers in the low bits, ignored for out-parameters, which get a zeroed
/// stack buffer of their size), calls the build's function and returns the result's bits (floats as their bit
/// pattern, integers sign-extended, or zero-extended when unsigned or `_Bool`, 0 for void and other types).
pub fn add_entry<'ctx>(
    module: &Module<'ctx>,
    build: Build,
    index: usize,
    sig: &FunctionSignature,
) -> Result<Result<FunctionValue<'ctx>, Unavailable>, InstrumentError> {
    let Some(target) = module.get_function(&format!("{}{}", build_prefix(build), sig.name)) else {
        return Ok(Err(match build {
            Build::P => "it is not defined in the plain build".into(),
            Build::PPrime => "the fast-math build no longer defines it (inlined or removed)".into(),
        }));
    };
    if let Err(reason) = check_interface(target, sig) {
        return Ok(Err(reason));
    }
    let ctx = module.get_context();
    let i64t = ctx.i64_type();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let name = match build {
        Build::P => format!("__foe_entry_p_{index}"),
        Build::PPrime => format!("__foe_entry_pp_{index}"),
    };
    let wrapper = module.add_function(&name, i64t.fn_type(&[ptr.into()], false), None);
    let block = ctx.append_basic_block(wrapper, "entry");
    let builder = ctx.create_builder();
    builder.position_at_end(block);
    let what = format!("the entry of {}", sig.name);
    let args = wrapper
        .get_nth_param(0)
        .expect("one parameter")
        .into_pointer_value();
    let mut values: Vec<BasicValueEnum<'ctx>> = Vec::with_capacity(sig.params.len());
    for (i, param) in sig.params.iter().enumerate() {
        // SAFETY: the driver passes one word per parameter.
        let slot = unsafe {
            builder.build_in_bounds_gep(i64t, args, &[i64t.const_int(i as u64, false)], "")
        }
        .map_err(builder_error(what.clone()))?;
        let value: BasicValueEnum<'ctx> = match param.ty {
            ParamType::F64 => builder
                .build_load(ctx.f64_type(), slot, "")
                .map_err(builder_error(what.clone()))?,
            ParamType::F32 => {
                let word = builder
                    .build_load(i64t, slot, "")
                    .map_err(builder_error(what.clone()))?
                    .into_int_value();
                let low = builder
                    .build_int_truncate(word, ctx.i32_type(), "")
                    .map_err(builder_error(what.clone()))?;
                builder
                    .build_bit_cast(low, ctx.f32_type(), "")
                    .map_err(builder_error(what.clone()))?
            }
            ParamType::Int { bits, .. } => {
                let word = builder
                    .build_load(i64t, slot, "")
                    .map_err(builder_error(what.clone()))?
                    .into_int_value();
                if bits == 64 {
                    word.into()
                } else {
                    let width = std::num::NonZeroU32::new(bits)
                        .and_then(|b| ctx.custom_width_int_type(b).ok())
                        .ok_or_else(|| InstrumentError::Builder {
                            what: what.clone(),
                            message: format!("no {bits}-bit integer type"),
                        })?;
                    builder
                        .build_int_truncate(word, width, "")
                        .map_err(builder_error(what.clone()))?
                        .into()
                }
            }
            ParamType::OutPtr { bytes } => {
                let buf_ty = ctx.i8_type().array_type(bytes.max(1));
                let buf = builder
                    .build_alloca(buf_ty, "")
                    .map_err(builder_error(what.clone()))?;
                if let Some(inst) = buf.as_instruction() {
                    let _ = inst.set_alignment(16);
                }
                builder
                    .build_memset(
                        buf,
                        16,
                        ctx.i8_type().const_zero(),
                        i64t.const_int(bytes.max(1) as u64, false),
                    )
                    .map_err(builder_error(what.clone()))?;
                buf.into()
            }
        };
        values.push(value);
    }
    // The values behind pointers go into their pointer's buffer; the C parameters are passed.
    for (param, value) in sig.params.iter().zip(&values) {
        let Some(at) = param.pointee else { continue };
        let buffer = values
            .get(at.param as usize)
            .filter(|b| b.is_pointer_value())
            .ok_or_else(|| InstrumentError::Builder {
                what: what.clone(),
                message: format!("`{}` is not behind a pointer parameter", param.name),
            })?
            .into_pointer_value();
        // SAFETY: the offset lies inside the buffer (the model only makes inputs of bytes within it).
        let place = unsafe {
            builder.build_in_bounds_gep(
                ctx.i8_type(),
                buffer,
                &[i64t.const_int(at.offset as u64, false)],
                "",
            )
        }
        .map_err(builder_error(what.clone()))?;
        let store = builder
            .build_store(place, *value)
            .map_err(builder_error(what.clone()))?;
        let _ = store.set_alignment(1);
    }
    // The pointer parameters' buffers as the call starts: the words the call changes are the run's outputs.
    let watch = module.get_function(WATCH_FN).unwrap_or_else(|| {
        let fn_type = ctx.void_type().fn_type(
            &[ctx.i32_type().into(), ptr.into(), ctx.i32_type().into()],
            false,
        );
        module.add_function(WATCH_FN, fn_type, None)
    });
    let observe = module.get_function(OBSERVE_FN).unwrap_or_else(|| {
        module.add_function(OBSERVE_FN, ctx.void_type().fn_type(&[], false), None)
    });
    for (index, (param, value)) in sig
        .params
        .iter()
        .zip(&values)
        .filter(|(p, _)| p.pointee.is_none())
        .enumerate()
    {
        let ParamType::OutPtr { bytes } = param.ty else {
            continue;
        };
        let args = [
            ctx.i32_type().const_int(index as u64, false).into(),
            (*value).into(),
            ctx.i32_type().const_int(bytes as u64, false).into(),
        ];
        builder
            .build_call(watch, &args, "")
            .map_err(builder_error(what.clone()))?;
    }
    let call_args: Vec<BasicMetadataValueEnum<'ctx>> = sig
        .params
        .iter()
        .zip(&values)
        .filter(|(p, _)| p.pointee.is_none())
        .map(|(_, v)| (*v).into())
        .collect();
    let call = builder
        .build_call(target, &call_args, "")
        .map_err(builder_error(what.clone()))?;
    builder
        .build_call(observe, &[], "")
        .map_err(builder_error(what.clone()))?;
    let result = call.try_as_basic_value().basic();
    let bits = match (sig.ret, result) {
        (ReturnType::F64, Some(v)) => builder
            .build_bit_cast(v, i64t, "")
            .map_err(builder_error(what.clone()))?
            .into_int_value(),
        (ReturnType::F32, Some(v)) => {
            let low = builder
                .build_bit_cast(v, ctx.i32_type(), "")
                .map_err(builder_error(what.clone()))?;
            builder
                .build_int_z_extend(low.into_int_value(), i64t, "")
                .map_err(builder_error(what.clone()))?
        }
        (ReturnType::Int { bits, signed }, Some(BasicValueEnum::IntValue(v))) if bits <= 64 => {
            if bits == 64 {
                v
            } else if signed && bits > 1 {
                builder
                    .build_int_s_extend(v, i64t, "")
                    .map_err(builder_error(what.clone()))?
            } else {
                builder
                    .build_int_z_extend(v, i64t, "")
                    .map_err(builder_error(what.clone()))?
            }
        }
        _ => i64t.const_zero(),
    };
    builder
        .build_return(Some(&bits))
        .map_err(builder_error(what))?;
    Ok(Ok(wrapper))
}

/// Whether the LLVM function still has the C interface the signature describes (the optimiser may change the
/// interface of static functions).
fn check_interface(f: FunctionValue<'_>, sig: &FunctionSignature) -> Result<(), String> {
    let ty = f.get_type();
    if ty.is_var_arg() {
        return Err("it is variadic".into());
    }
    let params: Vec<BasicTypeEnum<'_>> = f.get_param_iter().map(|p| p.get_type()).collect();
    let declared: Vec<&crate::types::Param> = sig.call_params().collect();
    if params.len() != declared.len() {
        return Err(format!(
            "it takes {} parameters instead of {}",
            params.len(),
            declared.len()
        ));
    }
    for (i, (llvm, param)) in params.iter().zip(declared).enumerate() {
        let ok = match (param.ty, llvm) {
            (ParamType::F64, BasicTypeEnum::FloatType(t)) => t.get_bit_width() == 64,
            (ParamType::F32, BasicTypeEnum::FloatType(t)) => t.get_bit_width() == 32,
            (ParamType::Int { bits, .. }, BasicTypeEnum::IntType(t)) => {
                t.get_bit_width() == bits && bits <= 64
            }
            (ParamType::OutPtr { .. }, BasicTypeEnum::PointerType(_)) => true,
            _ => false,
        };
        if !ok {
            return Err(format!(
                "parameter {} has type {} in this build",
                i + 1,
                llvm.print_to_string().to_string_lossy()
            ));
        }
    }
    let ret = ty.get_return_type();
    let ok = match (sig.ret, ret) {
        (ReturnType::Void, None) => true,
        (ReturnType::F64, Some(BasicTypeEnum::FloatType(t))) => t.get_bit_width() == 64,
        (ReturnType::F32, Some(BasicTypeEnum::FloatType(t))) => t.get_bit_width() == 32,
        (ReturnType::Int { bits, .. }, Some(BasicTypeEnum::IntType(t))) => {
            t.get_bit_width() == bits
        }
        (ReturnType::Other, Some(_)) => true,
        _ => false,
    };
    if !ok {
        return Err("its return type differs in this build".into());
    }
    Ok(())
}

/// Adds the entry table the driver calls through: `[2N x ptr]` (P, P' per function; null when unavailable)
/// and its length N.
pub fn add_entry_table<'ctx>(
    module: &Module<'ctx>,
    entries: &[(Option<FunctionValue<'ctx>>, Option<FunctionValue<'ctx>>)],
) {
    let ctx = module.get_context();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let values: Vec<_> = entries
        .iter()
        .flat_map(|(p, pp)| [*p, *pp])
        .map(|f| {
            f.map(|f| f.as_global_value().as_pointer_value())
                .unwrap_or_else(|| ptr.const_null())
        })
        .collect();
    let table = module.add_global(ptr.array_type(values.len() as u32), None, ENTRY_TABLE);
    table.set_initializer(&ptr.const_array(&values));
    table.set_linkage(Linkage::External);
    let count = module.add_global(ctx.i32_type(), None, ENTRY_COUNT);
    count.set_initializer(&ctx.i32_type().const_int(entries.len() as u64, false));
    count.set_constant(true);
    count.set_linkage(Linkage::External);
}

/// Names of the data (not functions) `module` declares without defining, for [`stub_module`].
pub fn data_declarations(module: &Module<'_>) -> Vec<String> {
    module
        .get_globals()
        .filter(|g| g.is_declaration())
        .map(|g| g.get_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("llvm."))
        .collect()
}

/// Bytes of the unreadable stand-in for undefined data: a multiple of the page size, so that the whole section
/// can be protected, and large enough for the arrays of constants such data usually are.
const DATA_STUB_BYTES: u32 = 1 << 16;

/// The section holding the stand-ins for undefined data, which the runtime makes unreadable at start-up.
pub const GUARD_SECTION: &str = "foe_guard";

/// A module defining the symbols the linker found undefined: data in `data` as 64 KiB page-aligned blocks in the
/// section [`GUARD_SECTION`], which the runtime makes unreadable (a run that reads a value no file defines
/// crashes and the runtime names the datum through `__foe_guard_table`, entry `i` the block of `missing[i]`, null
/// for functions), the rest as functions that call `__foe_undefined(index)` (the runtime ends the execution and
/// reports the name).
pub fn stub_module<'ctx>(
    ctx: &'ctx Context,
    missing: &[String],
    data: &[String],
) -> Result<Module<'ctx>, InstrumentError> {
    let module = ctx.create_module("foe-stubs");
    let i32t = ctx.i32_type();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let report = module.add_function(
        "__foe_undefined",
        ctx.void_type().fn_type(&[i32t.into()], false),
        None,
    );
    let builder = ctx.create_builder();
    let mut table = Vec::with_capacity(missing.len());
    for (i, name) in missing.iter().enumerate() {
        if data.contains(name) {
            let ty = ctx.i8_type().array_type(DATA_STUB_BYTES);
            let g = module.add_global(ty, None, name);
            g.set_initializer(&ty.const_zero());
            g.set_alignment(4096);
            g.set_section(Some(GUARD_SECTION));
            table.push(g.as_pointer_value());
            continue;
        }
        table.push(ptr.const_null());
        let f = module.add_function(name, ctx.void_type().fn_type(&[], false), None);
        builder.position_at_end(ctx.append_basic_block(f, "entry"));
        let what = format!("the stub of {name}");
        builder
            .build_call(report, &[i32t.const_int(i as u64, false).into()], "")
            .map_err(builder_error(what.clone()))?;
        builder.build_unreachable().map_err(builder_error(what))?;
    }
    let entries = ptr.const_array(&table);
    let g = module.add_global(entries.get_type(), None, "__foe_guard_table");
    g.set_initializer(&entries);
    g.set_constant(true);
    let count = module.add_global(i32t, None, "__foe_guard_count");
    count.set_initializer(&i32t.const_int(missing.len() as u64, false));
    count.set_constant(true);
    Ok(module)
}

/// Writes `module` as an object file with instruction selection at `-O0` (no re-optimisation: at higher levels
/// the backend may move floating-point operations across the checks). Debug info should be stripped first.
pub fn emit_object(module: &Module<'_>, path: &Path) -> Result<(), InstrumentError> {
    target_machine(module)?
        .write_to_file(module, FileType::Object, path)
        .map_err(|e| InstrumentError::Codegen(e.to_string().trim_end().to_string()))
}

/// The native target machine at `-O0` for `module`'s triple.
fn target_machine(module: &Module<'_>) -> Result<TargetMachine, InstrumentError> {
    static INIT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    INIT.get_or_init(|| Target::initialize_native(&InitializationConfig::default()))
        .clone()
        .map_err(InstrumentError::Codegen)?;
    let triple = module.get_triple();
    let triple = if triple.as_str().to_bytes().is_empty() {
        TargetMachine::get_default_triple()
    } else {
        triple
    };
    let target =
        Target::from_triple(&triple).map_err(|e| InstrumentError::Codegen(e.to_string()))?;
    let cpu = if triple.as_str().to_string_lossy().starts_with("x86_64") {
        "x86-64".to_string()
    } else {
        "generic".into()
    };
    target
        .create_target_machine(
            &triple,
            &cpu,
            "",
            OptimizationLevel::None,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| {
            InstrumentError::Codegen(format!(
                "no target machine for {}",
                triple.as_str().to_string_lossy()
            ))
        })
}

/// Strips debug info and verifies the module before code generation.
pub fn finish_module(module: &Module<'_>) -> Result<(), InstrumentError> {
    module.strip_debug_info();
    module
        .verify()
        .map_err(|e| InstrumentError::Verify(first_line(&e.to_string())))
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LL: &str = r#"
define double @f(double %x, <2 x double> %v, float %y) {
  %a = fadd double %x, 1.0
  %b = fneg double %a
  %c = fcmp olt double %b, 0.0
  %d = fmul <2 x double> %v, %v
  %e = call double @llvm.sqrt.f64(double %a)
  %f = fptosi double %e to i32
  %g = fpext float %y to double
  %h = call double @exp(double %g)
  %i = call double @g(double %h)
  %j = sitofp i32 %f to double
  ret double %i
}
define internal double @g(double %x) {
  %r = fdiv double %x, 3.0
  ret double %r
}
@counter = global i32 0
declare double @exp(double)
declare double @llvm.sqrt.f64(double)
"#;

    #[test]
    fn instruments_fp_operations_once() {
        let ctx = Context::create();
        let m = crate::ir::parse_module(&ctx, LL, "t").unwrap();
        let mut sites = SiteTable::default();
        assert_eq!(instrument_module(&m, Build::PPrime, &mut sites).unwrap(), 9);
        let ops: Vec<_> = sites
            .iter()
            .map(|(_, s)| (s.function.as_str(), s.operation.as_str()))
            .collect();
        assert_eq!(
            ops,
            vec![
                ("f", "fadd"),
                ("f", "fcmp olt"),
                ("f", "fmul <2 x double>"),
                ("f", "call sqrt"),
                ("f", "fptosi"),
                ("f", "fpext"),
                ("f", "call exp"),
                ("f", "sitofp"),
                ("g", "fdiv"),
            ]
        );
        assert!(sites
            .iter()
            .all(|(_, s)| s.build == Build::PPrime && s.line.is_none()));
        // Idempotent: a second pass finds everything marked.
        assert_eq!(instrument_module(&m, Build::PPrime, &mut sites).unwrap(), 0);
        m.verify().unwrap();
        let text = m.print_to_string().to_string();
        assert_eq!(text.matches("call void @__foe_check(i32").count(), 9);
        // The check follows its instruction.
        assert!(
            text.contains(
                "%a = fadd double %x, 1.000000e+00, !foe.site !0\n  call void @__foe_check(i32 0)"
            ),
            "{text}"
        );
    }

    #[test]
    fn constrained_intrinsics_are_sites_named_as_their_plain_forms() {
        // What `#pragma clang fp exceptions(strict)` makes of a block: metadata arguments, a constant converted
        // at run time, a signalling comparison, an intrinsic counterpart; the noalias declaration takes metadata
        // only and is no FP operation.
        let ll = r#"
define double @f(double %x, i32 %n) #0 {
  %c = call double @llvm.experimental.constrained.sitofp.f64.i32(i32 3, metadata !"round.tonearest", metadata !"fpexcept.strict") #0
  %a = call double @llvm.experimental.constrained.fadd.f64(double %x, double %c, metadata !"round.tonearest", metadata !"fpexcept.strict") #0
  %l = call i1 @llvm.experimental.constrained.fcmps.f64(double %a, double %x, metadata !"olt", metadata !"fpexcept.strict") #0
  %s = call double @llvm.experimental.constrained.sqrt.f64(double %a, metadata !"round.tonearest", metadata !"fpexcept.strict") #0
  %i = call i32 @llvm.experimental.constrained.fptosi.i32.f64(double %s, metadata !"fpexcept.strict") #0
  call void @llvm.experimental.noalias.scope.decl(metadata !0)
  ret double %s
}
declare double @llvm.experimental.constrained.sitofp.f64.i32(i32, metadata, metadata)
declare double @llvm.experimental.constrained.fadd.f64(double, double, metadata, metadata)
declare i1 @llvm.experimental.constrained.fcmps.f64(double, double, metadata, metadata)
declare double @llvm.experimental.constrained.sqrt.f64(double, metadata, metadata)
declare i32 @llvm.experimental.constrained.fptosi.i32.f64(double, metadata)
declare void @llvm.experimental.noalias.scope.decl(metadata)
attributes #0 = { strictfp }
!0 = !{!1}
!1 = distinct !{!1, !2}
!2 = distinct !{!2}
"#;
        let ctx = Context::create();
        let m = crate::ir::parse_module(&ctx, ll, "t").unwrap();
        let mut sites = SiteTable::default();
        assert_eq!(instrument_module(&m, Build::P, &mut sites).unwrap(), 5);
        let ops: Vec<_> = sites.iter().map(|(_, s)| s.operation.as_str()).collect();
        assert_eq!(ops, ["sitofp", "fadd", "fcmp olt", "call sqrt", "fptosi"]);
        m.verify().unwrap();
    }

    #[test]
    fn calls_foe_does_not_run_are_replaced_by_stops() {
        let ctx = Context::create();
        let m = crate::ir::parse_module(
            &ctx,
            r#"
define double @f(double %x) {
  %a = call double @exp(double %x)
  %b = call double @gsl_error(double %a)
  %c = fadd double %b, 1.0
  ret double %c
}
declare double @exp(double)
declare double @gsl_error(double)
"#,
            "t",
        )
        .unwrap();
        let mut sites = SiteTable::default();
        assert_eq!(replace_stopping_calls(&m, Build::P, &mut sites).unwrap(), 1);
        assert_eq!(sites.stop(0).map(|s| s.callee.as_str()), Some("gsl_error"));
        m.verify().unwrap();
        let text = m.print_to_string().to_string();
        assert!(text.contains("call double @exp(double %x)"), "{text}");
        assert!(!text.contains("call double @gsl_error"), "{text}");
        assert!(text.contains("call void @__foe_stop(i32 0)"), "{text}");
        assert!(text.contains("fadd double undef, 1.0"), "{text}");
    }

    #[test]
    fn prefixes_definitions_and_builds_entries() {
        let ctx = Context::create();
        let m = crate::ir::parse_module(&ctx, LL, "t").unwrap();
        prefix_symbols(&m, Build::P);
        assert!(m.get_function("__foe_p.f").is_some());
        assert!(m.get_function("__foe_p.g").is_some());
        assert!(
            m.get_function("exp").is_some(),
            "declarations keep their names"
        );
        assert_eq!(
            m.get_global("__foe_p.counter").map(|g| g.get_linkage()),
            Some(Linkage::Internal)
        );
        let sig = FunctionSignature {
            name: "f".into(),
            params: vec![],
            ret: ReturnType::F64,
        };
        // The interface does not match: unavailable, not an error.
        assert!(add_entry(&m, Build::P, 0, &sig).unwrap().is_err());
        let g = FunctionSignature {
            name: "g".into(),
            params: vec![crate::types::Param::new("x", ParamType::F64)],
            ret: ReturnType::F64,
        };
        let entry = add_entry(&m, Build::P, 1, &g).unwrap().unwrap();
        add_entry_table(&m, &[(None, None), (Some(entry), Some(entry))]);
        finish_module(&m).unwrap();
        assert!(m.get_global(ENTRY_TABLE).is_some());
    }

    #[test]
    fn intrinsics_the_shipped_code_calls_by_name_reach_the_library_s_definition() {
        // P' of a Cephes file: `llvm.exp` becomes a call of `exp` in the shipped binary, which links Cephes'
        // `exp`; `llvm.sqrt` becomes `sqrtsd`. The worker calls the same.
        const LL: &str = r#"
define double @f(double %x) {
  %a = call fast double @llvm.exp.f64(double %x)
  %b = call fast double @llvm.sqrt.f64(double %a)
  %c = call fast double @llvm.log.f64(double %b)
  ret double %c
}
define double @exp(double %x) "foe-replaces-c-library" {
  %r = fmul double %x, 2.0
  ret double %r
}
define double @log(double %x) {
  ret double %x
}
declare double @llvm.exp.f64(double)
declare double @llvm.sqrt.f64(double)
declare double @llvm.log.f64(double)
"#;
        let ctx = Context::create();
        let m = crate::ir::parse_module(&ctx, LL, "t").unwrap();
        // `log` is the file's own, not the library's: the intrinsic stays libm's, as the worker always did.
        assert_eq!(call_replacements(&m), 1);
        let text = m.print_to_string().to_string();
        assert!(text.contains("call fast double @exp(double %x)"), "{text}");
        assert!(text.contains("@llvm.sqrt.f64(double %a)"), "{text}");
        assert!(text.contains("@llvm.log.f64(double %b)"), "{text}");
        m.verify().unwrap();
    }

    #[test]
    fn only_what_the_entries_reach_is_linked() {
        const HOSTILE: &str = r#"
@run_evil = internal global ptr @evil, section ".init_array"
@llvm.used = appending global [1 x ptr] [ptr @run_evil], section "llvm.metadata"
@llvm.global_ctors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 65535, ptr @evil, ptr null }]
@__foe_entries = external global [0 x ptr]
@malloc = alias void (), ptr @evil
module asm ".section .preinit_array"

define internal void @evil() {
  ret void
}
define double @unreached(double %x) {
  store ptr null, ptr @__foe_entries
  ret double %x
}
define double @g(double %x) section ".fini_array" {
  %r = fmul double %x, 2.0
  ret double %r
}
"#;
        let ctx = Context::create();
        let m = crate::ir::parse_module(&ctx, HOSTILE, "t").unwrap();
        isolate_user_code(&m);
        let mut sites = SiteTable::default();
        instrument_module(&m, Build::P, &mut sites).unwrap();
        prefix_symbols(&m, Build::P);
        let g = FunctionSignature {
            name: "g".into(),
            params: vec![crate::types::Param::new("x", ParamType::F64)],
            ret: ReturnType::F64,
        };
        let entry = add_entry(&m, Build::P, 0, &g).unwrap().unwrap();
        internalize(&m, &[entry]).unwrap();
        add_entry_table(&m, &[(Some(entry), Some(entry))]);
        keep_only_entries(&m).unwrap();
        finish_module(&m).unwrap();
        let text = m.print_to_string().to_string();
        for gone in [
            "@evil",
            "run_evil",
            "global_ctors",
            "@malloc",
            "unreached",
            "module asm",
            "init_array",
            "fini_array",
        ] {
            assert!(!text.contains(gone), "{gone} is still linked:\n{text}");
        }
        assert!(m.get_function("__foe_p.g").is_some(), "{text}");
        assert!(m.get_global(ENTRY_TABLE).is_some());
    }
}
