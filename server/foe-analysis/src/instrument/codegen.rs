//! Code generation without re-optimisation, and the stub module for what the file uses but does not define.

use super::*;

/// Names of the data (not functions) `module` declares without defining, for [`stub_module`].
pub fn data_declarations(module: &Module<'_>) -> Vec<String> {
    module
        .get_globals()
        .filter(|g| g.is_declaration())
        .map(|g| g.get_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("llvm."))
        .collect()
}

/// The names `module` uses without defining (functions and data, intrinsics left out), sorted: what its link needs
/// from elsewhere.
pub fn declared_names(module: &Module<'_>) -> Vec<String> {
    let functions = module
        .get_functions()
        .filter(|f| f.count_basic_blocks() == 0)
        .map(|f| f.get_name().to_string_lossy().into_owned());
    let mut names: Vec<String> = functions
        .chain(data_declarations(module))
        .filter(|n| !n.starts_with("llvm."))
        .collect();
    names.sort();
    names.dedup();
    names
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
pub(super) fn target_machine(module: &Module<'_>) -> Result<TargetMachine, InstrumentError> {
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
