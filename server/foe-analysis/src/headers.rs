//! Code of included headers, placed in the analysed file: the functions a header defines (`static inline`
//! helpers such as Box2D's `b2Dot`) are inlined into their callers in both builds, and an instruction's position
//! is the innermost frame of its inlining chain that lies in the analysed file: the call of the helper.
//!
//! Without this a helper's operations kept the header's line and column, which the front ends showed as lines
//! of the analysed file (a warning on a `}` of `manifold.c` that was line 190 of `math_functions.h`). P' had the
//! helpers inlined by clang already; P (`-O0`) called them, so its events inside a helper had no call to be
//! placed at. Inlining changes no floating-point operation (nothing is optimised after it), so both builds
//! compute what clang's builds compute, and P's and P''s events inside a helper land on the same call.

use crate::compile::CompiledPair;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::llvm_sys::core::{
    LLVMGetBasicBlockParent, LLVMGetGlobalParent, LLVMGetInstructionParent, LLVMGetSourceFileName,
};
use inkwell::llvm_sys::debuginfo::{
    LLVMDIFileGetFilename, LLVMDILocationGetColumn, LLVMDILocationGetInlinedAt,
    LLVMDILocationGetLine, LLVMDILocationGetScope, LLVMDIScopeGetFile, LLVMGetSubprogram,
    LLVMInstructionGetDebugLoc,
};
use inkwell::llvm_sys::prelude::{LLVMMetadataRef, LLVMValueRef};
use inkwell::module::Module;
use inkwell::values::{AsValueRef, FunctionValue};

/// Whether a debug-info file name is the analysed file's, in a module whose source file is `source` (read only
/// when needed: this runs for every instruction modelled or instrumented): clang reads the text from standard
/// input ([`crate::compile::compile_pair`]), so its lines are those of `<stdin>` (`-` for the compile unit); a
/// module compiled from a path names that path, which the scopes may name relative to it.
fn is_analysed_file<'a>(name: &[u8], source: impl FnOnce() -> &'a [u8]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    if name == b"<stdin>" || name == b"-" {
        return true;
    }
    let source = source();
    let path = |b: &[u8]| std::path::Path::new(std::ffi::OsStr::from_bytes(b)).to_path_buf();
    !name.is_empty() && !source.is_empty() && path(source).ends_with(path(name))
}

/// The source file name of the module that holds `global` (a function).
///
/// SAFETY: `global` is a global value of a live module; the name lives as long as the module (`'a`).
unsafe fn source_of<'a>(global: LLVMValueRef) -> &'a [u8] {
    // SAFETY: as the caller promises.
    unsafe {
        let module = LLVMGetGlobalParent(global);
        let mut len = 0usize;
        let name = LLVMGetSourceFileName(module, &mut len);
        if name.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(name as *const u8, len)
    }
}

/// The name of the file a debug-info scope belongs to; `None` when it does not say.
///
/// SAFETY: `scope` is a valid `DIScope` of a live module; the name lives as long as the module (`'a`).
unsafe fn scope_file<'a>(scope: LLVMMetadataRef) -> Option<&'a [u8]> {
    if scope.is_null() {
        return None;
    }
    // SAFETY: as the caller promises.
    unsafe {
        let file = LLVMDIScopeGetFile(scope);
        if file.is_null() {
            return None;
        }
        let mut len = 0u32;
        let name = LLVMDIFileGetFilename(file, &mut len);
        (!name.is_null()).then(|| std::slice::from_raw_parts(name as *const u8, len as usize))
    }
}

/// The (line, column) of an instruction in the analysed file: its own position, or for an instruction inlined
/// from a header's function, the call it was inlined at (the innermost frame of the chain in the file). `None`
/// without a position, or when no frame of the chain is in the file (a helper's body that was not inlined).
///
/// # Safety
///
/// `inst` must be an instruction of a module that lives for the call.
pub unsafe fn position_in_file(inst: LLVMValueRef) -> Option<(u32, u32)> {
    // SAFETY: `inst` is a live instruction (the caller's contract); every metadata handle read below belongs to
    // its module and is only read during the call.
    unsafe {
        let mut loc = LLVMInstructionGetDebugLoc(inst);
        if loc.is_null() {
            return None;
        }
        let source = || source_of(LLVMGetBasicBlockParent(LLVMGetInstructionParent(inst)));
        while !loc.is_null() {
            match scope_file(LLVMDILocationGetScope(loc)) {
                // A scope that names no file is taken as the file's (as positions were read before).
                Some(name) if !is_analysed_file(name, source) => {
                    loc = LLVMDILocationGetInlinedAt(loc)
                }
                _ => return Some((LLVMDILocationGetLine(loc), LLVMDILocationGetColumn(loc))),
            }
        }
        None
    }
}

/// Whether `function` is defined in another file than the analysed one (its subprogram says so).
fn defined_in_a_header(function: FunctionValue<'_>) -> bool {
    // SAFETY: a function of a live module; its subprogram, when present, is a DIScope.
    unsafe {
        let sp = LLVMGetSubprogram(function.as_value_ref());
        let source = || source_of(function.as_value_ref());
        scope_file(sp).is_some_and(|name| !is_analysed_file(name, source))
    }
}

/// Inlines into their callers, in both builds, the functions that included headers define; the pair unchanged
/// when it has none, or when LLVM cannot do it (a helper's own operations then have no position in the file).
pub fn inline_header_functions(pair: CompiledPair) -> CompiledPair {
    let started = std::time::Instant::now();
    let pair = inline_in_both(pair);
    tracing::trace!(
        ms = started.elapsed().as_millis() as u64,
        "header functions inlined"
    );
    pair
}

fn inline_in_both(pair: CompiledPair) -> CompiledPair {
    let context = Context::create();
    let inline = |ll: &str, name: &str| -> Result<Option<String>, String> {
        let module = crate::ir::parse_module(&context, ll, name)?;
        if !mark_header_functions(&module) {
            return Ok(None);
        }
        run_always_inline(&module)?;
        Ok(Some(module.print_to_string().to_string()))
    };
    let result = inline(&pair.p_ll, "P").and_then(|p| Ok((p, inline(&pair.pp_ll, "P'")?)));
    match result {
        Ok((p, pp)) => CompiledPair {
            p_ll: p.unwrap_or(pair.p_ll),
            pp_ll: pp.unwrap_or(pair.pp_ll),
        },
        Err(e) => {
            tracing::debug!("header functions not inlined: {e}");
            pair
        }
    }
}

/// Marks every function a header defines `alwaysinline` (and takes `-O0`'s `noinline` and `optnone` from it
/// and from its callers, which LLVM would not inline into); whether there was one.
fn mark_header_functions(module: &Module<'_>) -> bool {
    let ctx = module.get_context();
    let kind = |name: &str| Attribute::get_named_enum_kind_id(name);
    let headers: Vec<FunctionValue<'_>> = module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0 && defined_in_a_header(*f))
        .filter(|f| instructions(*f) <= MAX_INLINED_INSTRUCTIONS)
        .collect();
    if headers.is_empty() {
        return false;
    }
    for f in module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
    {
        // `optnone` requires `noinline`; a caller with it is skipped by the inliner.
        f.remove_enum_attribute(AttributeLoc::Function, kind("optnone"));
    }
    for f in headers {
        f.remove_enum_attribute(AttributeLoc::Function, kind("noinline"));
        f.add_attribute(
            AttributeLoc::Function,
            ctx.create_enum_attribute(kind("alwaysinline"), 0),
        );
    }
    true
}

/// The largest header function inlined (in instructions of its build): a `.c` file included like a header
/// (an amalgamation) may define large functions called from many places, whose copies would multiply the code
/// to model. Header helpers are a few dozen instructions at `-O0`.
const MAX_INLINED_INSTRUCTIONS: usize = 2000;

fn instructions(function: FunctionValue<'_>) -> usize {
    function
        .get_basic_block_iter()
        .map(|b| b.get_instructions().count())
        .sum()
}

/// LLVM's `always-inline` pass, and nothing else.
fn run_always_inline(module: &Module<'_>) -> Result<(), String> {
    crate::model::run_passes(module, "always-inline").map_err(|e| e.to_string())
}
