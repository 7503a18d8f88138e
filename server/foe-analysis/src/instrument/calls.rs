//! The call passes: intrinsics the shipped code generation lowers to a library call are sent to the library's
//! own definition, and calls foe does not run become `__foe_stop(id)`.

use super::*;

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
    for function in super::user_functions(module) {
        let fname = function.get_name().to_string_lossy().into_owned();
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
