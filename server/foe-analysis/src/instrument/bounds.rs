//! Bounds checks on the instrumented builds' accesses to the file's own arrays: a load or store whose address
//! picks an element of a global object the file defines by a computed index (`fact_table[n - 1].f`) gets a call
//! `__foe_bounds(addr, object, size, width, access)` before it, and a run that would reach outside the object
//! ends there, named (`read outside `fact_table``), as a run that reads data no file defines does.
//!
//! Why: what lies past an array is other data of the worker, placed by the link. A run that read it (GSL's
//! `gamma_xgthalf` at x = 0 reads `fact_table[-1]`) computes with bytes that change with the rest of the file
//! (an edit of another function moves the constants around it) and differ between the two builds, so its
//! "divergence" is true of no program and of no cache key: an edited session and a fresh analysis of the same
//! text disagreed on it (`scripts/editor-check.py` on `gamma.c`). The shipped binaries are not checked: they
//! run only the inputs the instrumented builds found, and a run that reaches outside an array is not compared.
//!
//! Only direct chains are followed (element addresses, casts); an array reached through a pointer loaded from
//! memory (`cs->c[j]`) is not checked, nor are the stack's arrays: a pointer parameter's buffer has guard pages
//! of its own.

use super::{builder_error, source_position, InstrumentError, SiteTable};
use crate::model::llvm::{LLVMOpcode, Layout, Val};
use crate::types::Build;
use inkwell::module::Module;
use inkwell::values::{AsValueRef, BasicMetadataValueEnum, InstructionOpcode, InstructionValue};
use inkwell::AddressSpace;

/// `void __foe_bounds(ptr addr, ptr base, i64 size, i64 width, i32 access)`, in the runtime.
pub const BOUNDS_FN: &str = "__foe_bounds";

/// Links followed from an access's address back to its object.
const MAX_CHAIN: usize = 16;

/// One bounded access: where it is and what it reaches into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessSite {
    pub build: Build,
    /// The object as C names it (`fact_table`, `table` of `f` for a static local).
    pub object: String,
    pub store: bool,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

impl AccessSite {
    /// How a run that reached outside the object ended, in C words, as a crash is named (`crashed (read outside
    /// `fact_table`)`, beside `crashed (read MAXLOG, which no file defines)`). No position: the words go into a
    /// function's notes, which a cached report moved to new lines keeps as they are.
    pub fn describe(&self) -> String {
        let verb = if self.store { "wrote" } else { "read" };
        format!("{verb} outside {}", self.object)
    }
}

/// The C name of a global object from its IR name: a static local is `f.name` (`name` of `f`), a string literal
/// `.str.N`.
fn c_name(ir_name: &str) -> String {
    if ir_name.starts_with(".str") {
        return "a string constant".into();
    }
    match ir_name.split_once('.') {
        Some((function, local)) if !function.is_empty() && !local.is_empty() => {
            let local = local.split('.').next().unwrap_or(local);
            format!("`{local}` of `{function}`")
        }
        _ => format!("`{ir_name}`"),
    }
}

/// The global object `address` picks an element of by a computed index (a chain of element addresses and casts
/// back to a global variable the module defines, with at least one index that is not a constant), with its size
/// in bytes.
fn indexed_object<'m>(address: Val<'m>, layout: Layout<'m>) -> Option<(Val<'m>, u64)> {
    let mut at = address;
    let mut computed = false;
    for _ in 0..MAX_CHAIN {
        if at.is_global_variable() {
            let size = layout.size(at.initializer()?.ty());
            return (computed && size > 0).then_some((at, size));
        }
        match at.opcode()? {
            LLVMOpcode::LLVMGetElementPtr => {
                computed |= (1..at.num_operands())
                    .any(|i| at.operand(i).is_some_and(|index| !index.is_constant()));
                at = at.operand(0)?;
            }
            LLVMOpcode::LLVMBitCast | LLVMOpcode::LLVMAddrSpaceCast => at = at.operand(0)?,
            _ => return None,
        }
    }
    None
}

/// Inserts a `__foe_bounds` call before every load and store of `module`'s user functions that picks an element
/// of a global object by a computed index, recording each access in `sites`. Returns the number inserted.
pub fn guard_object_accesses(
    module: &Module<'_>,
    build: Build,
    sites: &mut SiteTable,
) -> Result<usize, InstrumentError> {
    let ctx = module.get_context();
    let layout = Layout::of(module);
    let ptr = ctx.ptr_type(AddressSpace::default());
    let (i64t, i32t) = (ctx.i64_type(), ctx.i32_type());
    let hook = module.get_function(BOUNDS_FN).unwrap_or_else(|| {
        let ty = ctx.void_type().fn_type(
            &[
                ptr.into(),
                ptr.into(),
                i64t.into(),
                i64t.into(),
                i32t.into(),
            ],
            false,
        );
        module.add_function(BOUNDS_FN, ty, None)
    });
    let builder = ctx.create_builder();
    let mut inserted = 0;
    for function in super::user_functions(module) {
        let fname = function.get_name().to_string_lossy().into_owned();
        let mut targets: Vec<(InstructionValue<'_>, u32, String, u64, u64)> = Vec::new();
        for block in function.get_basic_block_iter() {
            for inst in block.get_instructions() {
                let (address_operand, store) = match inst.get_opcode() {
                    InstructionOpcode::Load => (0, false),
                    InstructionOpcode::Store => (1, true),
                    _ => continue,
                };
                let Some(access) = Val::new(inst.as_value_ref()) else {
                    continue;
                };
                let Some(address) = access.operand(address_operand) else {
                    continue;
                };
                if address.ty().kind() != inkwell::llvm_sys::LLVMTypeKind::LLVMPointerTypeKind {
                    continue;
                }
                let Some((object, size)) = indexed_object(address, layout) else {
                    continue;
                };
                let accessed = if store {
                    access.operand(0).map(|v| v.ty())
                } else {
                    Some(access.ty())
                };
                let Some(width) = accessed.map(|t| layout.size(t)) else {
                    continue;
                };
                targets.push((inst, address_operand, object.name(), size, width));
            }
        }
        for (inst, address_operand, object, size, width) in targets {
            let (Some(address), Some(global)) = (
                inst.get_operand(address_operand)
                    .and_then(|o| o.value())
                    .map(|v| v.into_pointer_value()),
                module.get_global(&object),
            ) else {
                continue;
            };
            let loc = source_position(inst);
            let id = sites.accesses.len() as u32;
            sites.accesses.push(AccessSite {
                build,
                object: c_name(&object),
                store: inst.get_opcode() == InstructionOpcode::Store,
                line: loc.map(|l| l.0),
                column: loc.map(|l| l.1).filter(|&c| c > 0),
            });
            builder.position_before(&inst);
            let args: [BasicMetadataValueEnum<'_>; 5] = [
                address.into(),
                global.as_pointer_value().into(),
                i64t.const_int(size, false).into(),
                i64t.const_int(width, false).into(),
                i32t.const_int(u64::from(id), false).into(),
            ];
            builder
                .build_call(hook, &args, "")
                .map_err(builder_error(format!("the bounds check in {fname}")))?;
            inserted += 1;
        }
    }
    Ok(inserted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_named_as_c_names_them() {
        assert_eq!(c_name("fact_table"), "`fact_table`");
        assert_eq!(c_name("b2MakeRot.table"), "`table` of `b2MakeRot`");
        assert_eq!(c_name(".str.3"), "a string constant");
        let access = AccessSite {
            build: Build::P,
            object: c_name("fact_table"),
            store: false,
            line: Some(1029),
            column: Some(37),
        };
        assert_eq!(access.describe(), "read outside `fact_table`");
    }
}
