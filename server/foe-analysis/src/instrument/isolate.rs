//! Isolation of the user's code in the worker: start-up and exit code removed, names moved out of the runtime's
//! `__foe` space, per-build prefixes, everything internal but the entries.

use super::*;

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
    let machine = super::codegen::target_machine(module)?;
    module
        .run_passes(
            passes,
            &machine,
            inkwell::passes::PassBuilderOptions::create(),
        )
        .map_err(|e| InstrumentError::Codegen(format!("{passes}: {e}")))
}
