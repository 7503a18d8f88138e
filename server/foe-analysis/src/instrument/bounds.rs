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

use super::{builder_error, InstrumentError, SiteTable};
use crate::model::llvm::{LLVMOpcode, Layout, Val};
use inkwell::module::Module;
use inkwell::values::{AsValueRef, BasicMetadataValueEnum, InstructionOpcode, InstructionValue};
use inkwell::AddressSpace;

/// `void __foe_bounds(ptr addr, ptr base, i64 size, i64 width, i32 access)`, in the runtime.
pub const BOUNDS_FN: &str = "__foe_bounds";

/// Links followed from an access's address back to its object.
const MAX_CHAIN: usize = 16;

/// One bounded access: what it reaches into, and whether it writes. (No position: a run that ends at it is
/// named in the function's notes only, [`AccessSite::describe`].)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessSite {
    /// The object as C names it (`fact_table`, `table` of `f` for a static local).
    pub object: String,
    pub store: bool,
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

/// A load or store that picks an element of a global object by a computed index.
struct Bounded {
    /// The operand holding the address (0 for a load, 1 for a store).
    address_operand: u32,
    store: bool,
    /// The object's IR name, its size and the access's, in bytes.
    object: String,
    size: u64,
    width: u64,
}

/// What [`guard_object_accesses`] checks of `inst`, if anything.
fn bounded_access(inst: InstructionValue<'_>, layout: Layout<'_>) -> Option<Bounded> {
    let (address_operand, store) = match inst.get_opcode() {
        InstructionOpcode::Load => (0, false),
        InstructionOpcode::Store => (1, true),
        _ => return None,
    };
    let access = Val::new(inst.as_value_ref())?;
    let address = access.operand(address_operand)?;
    if address.ty().kind() != inkwell::llvm_sys::LLVMTypeKind::LLVMPointerTypeKind {
        return None;
    }
    let (object, size) = indexed_object(address, layout)?;
    let accessed = if store {
        access.operand(0)?.ty()
    } else {
        access.ty()
    };
    Some(Bounded {
        address_operand,
        store,
        object: object.name(),
        size,
        width: layout.size(accessed),
    })
}

/// Inserts a `__foe_bounds` call before every load and store of `module`'s user functions that picks an element
/// of a global object by a computed index, recording each access in `sites`. Returns the number inserted.
pub fn guard_object_accesses(
    module: &Module<'_>,
    sites: &mut SiteTable,
) -> Result<usize, InstrumentError> {
    let ctx = module.get_context();
    let layout = Layout::of(module);
    let ptr = ctx.ptr_type(AddressSpace::default());
    let (i64t, i32t) = (ctx.i64_type(), ctx.i32_type());
    let hook = module.get_function(BOUNDS_FN).unwrap_or_else(|| {
        let params = [
            ptr.into(),
            ptr.into(),
            i64t.into(),
            i64t.into(),
            i32t.into(),
        ];
        module.add_function(BOUNDS_FN, ctx.void_type().fn_type(&params, false), None)
    });
    let builder = ctx.create_builder();
    let mut inserted = 0;
    for function in super::user_functions(module) {
        let fname = function.get_name().to_string_lossy().into_owned();
        let targets: Vec<(InstructionValue<'_>, Bounded)> = function
            .get_basic_block_iter()
            .flat_map(|block| block.get_instructions())
            .filter_map(|inst| Some((inst, bounded_access(inst, layout)?)))
            .collect();
        for (inst, access) in targets {
            let (Some(address), Some(global)) = (
                inst.get_operand(access.address_operand)
                    .and_then(|o| o.value())
                    .map(|v| v.into_pointer_value()),
                module.get_global(&access.object),
            ) else {
                continue;
            };
            let id = sites.accesses.len() as u32;
            sites.accesses.push(AccessSite {
                object: c_name(&access.object),
                store: access.store,
            });
            builder.position_before(&inst);
            let args: [BasicMetadataValueEnum<'_>; 5] = [
                address.into(),
                global.as_pointer_value().into(),
                i64t.const_int(access.size, false).into(),
                i64t.const_int(access.width, false).into(),
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
            object: c_name("fact_table"),
            store: false,
        };
        assert_eq!(access.describe(), "read outside `fact_table`");
    }
}
