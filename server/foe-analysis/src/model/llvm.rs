//! A thin read-only view of LLVM values, types and instructions for the symbolic executor; all of the
//! model's `unsafe` LLVM C API calls live here.
//!
//! Handles borrow the module (`'m`), so they cannot outlive it.

use inkwell::llvm_sys::core::*;
use inkwell::llvm_sys::prelude::{LLVMBasicBlockRef, LLVMTypeRef, LLVMValueRef};
use inkwell::llvm_sys::target::{LLVMABISizeOfType, LLVMOffsetOfElement, LLVMTargetDataRef};
pub use inkwell::llvm_sys::{LLVMIntPredicate, LLVMOpcode, LLVMRealPredicate, LLVMTypeKind};
use std::ffi::CStr;
use std::marker::PhantomData;

/// An LLVM value (instruction, argument, constant, function) of a module that outlives `'m`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Val<'m> {
    raw: LLVMValueRef,
    _module: PhantomData<&'m ()>,
}

/// A basic block.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Block<'m> {
    raw: LLVMBasicBlockRef,
    _module: PhantomData<&'m ()>,
}

/// An LLVM type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Ty<'m> {
    raw: LLVMTypeRef,
    _module: PhantomData<&'m ()>,
}

/// The module's data layout, for sizes and offsets.
#[derive(Clone, Copy)]
pub struct Layout<'m> {
    raw: LLVMTargetDataRef,
    _module: PhantomData<&'m ()>,
}

fn cstr_owned(p: *const libc::c_char, len: usize) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: LLVM returns a pointer to `len` valid bytes owned by the value.
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    String::from_utf8_lossy(bytes).into_owned()
}

impl<'m> Val<'m> {
    /// Wraps a value of a module borrowed for `'m`.
    pub fn new(raw: LLVMValueRef) -> Option<Val<'m>> {
        (!raw.is_null()).then_some(Val {
            raw,
            _module: PhantomData,
        })
    }

    pub fn id(self) -> usize {
        self.raw as usize
    }

    pub fn name(self) -> String {
        let mut len = 0usize;
        // SAFETY: valid value handle; LLVM writes the name length.
        let p = unsafe { LLVMGetValueName2(self.raw, &mut len) };
        cstr_owned(p, len)
    }

    pub fn ty(self) -> Ty<'m> {
        // SAFETY: every value has a type.
        Ty {
            raw: unsafe { LLVMTypeOf(self.raw) },
            _module: PhantomData,
        }
    }

    /// The instruction's opcode, or `None` when this is not an instruction.
    pub fn opcode(self) -> Option<LLVMOpcode> {
        // SAFETY: valid value handle.
        unsafe {
            if LLVMIsAInstruction(self.raw).is_null() {
                None
            } else {
                Some(LLVMGetInstructionOpcode(self.raw))
            }
        }
    }

    pub fn num_operands(self) -> u32 {
        // SAFETY: valid user value (instructions and constants).
        unsafe { LLVMGetNumOperands(self.raw).max(0) as u32 }
    }

    pub fn operand(self, i: u32) -> Option<Val<'m>> {
        if i >= self.num_operands() {
            return None;
        }
        // SAFETY: index in range.
        Val::new(unsafe { LLVMGetOperand(self.raw, i) })
    }

    pub fn is_constant(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAConstant(self.raw).is_null() }
    }
    pub fn is_undef_or_poison(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAUndefValue(self.raw).is_null() }
    }
    pub fn is_constant_fp(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAConstantFP(self.raw).is_null() }
    }
    pub fn is_constant_int(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAConstantInt(self.raw).is_null() }
    }
    pub fn is_null_pointer(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAConstantPointerNull(self.raw).is_null() }
    }
    pub fn is_zero_aggregate(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAConstantAggregateZero(self.raw).is_null() }
    }
    pub fn is_constant_aggregate(self) -> bool {
        // SAFETY: valid value handle.
        unsafe {
            !LLVMIsAConstantDataSequential(self.raw).is_null()
                || !LLVMIsAConstantVector(self.raw).is_null()
                || !LLVMIsAConstantArray(self.raw).is_null()
                || !LLVMIsAConstantStruct(self.raw).is_null()
        }
    }
    pub fn is_constant_expr(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAConstantExpr(self.raw).is_null() }
    }
    pub fn const_opcode(self) -> LLVMOpcode {
        // SAFETY: only called on constant expressions.
        unsafe { LLVMGetConstOpcode(self.raw) }
    }
    pub fn is_global_variable(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAGlobalVariable(self.raw).is_null() }
    }
    pub fn is_function(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAFunction(self.raw).is_null() }
    }
    pub fn is_inline_asm(self) -> bool {
        // SAFETY: valid value handle.
        unsafe { !LLVMIsAInlineAsm(self.raw).is_null() }
    }

    /// The double value of a `ConstantFP` (exact for `float` and `double`).
    pub fn const_fp(self) -> f64 {
        let mut lost = 0;
        // SAFETY: only called on ConstantFP values.
        unsafe { LLVMConstRealGetDouble(self.raw, &mut lost) }
    }

    /// The sign-extended value of a `ConstantInt` of at most 64 bits.
    pub fn const_int(self) -> i64 {
        // SAFETY: only called on ConstantInt values.
        unsafe { LLVMConstIntGetSExtValue(self.raw) }
    }

    /// Element `i` of a constant vector, array or struct.
    pub fn aggregate_element(self, i: u32) -> Option<Val<'m>> {
        // SAFETY: valid constant; LLVM returns null when out of range.
        Val::new(unsafe { LLVMGetAggregateElement(self.raw, i) })
    }

    /// A global's initializer.
    pub fn initializer(self) -> Option<Val<'m>> {
        // SAFETY: only called on global variables.
        Val::new(unsafe { LLVMGetInitializer(self.raw) })
    }

    pub fn fcmp_predicate(self) -> LLVMRealPredicate {
        // SAFETY: only called on fcmp instructions.
        unsafe { LLVMGetFCmpPredicate(self.raw) }
    }
    pub fn icmp_predicate(self) -> LLVMIntPredicate {
        // SAFETY: only called on icmp instructions.
        unsafe { LLVMGetICmpPredicate(self.raw) }
    }

    /// Whether an FP instruction or call carries the `reassoc` fast-math flag.
    pub fn allows_reassociation(self) -> bool {
        // SAFETY: the flags are only read from values that can carry them.
        unsafe {
            LLVMCanValueUseFastMathFlags(self.raw) != 0
                && LLVMGetFastMathFlags(self.raw) & inkwell::llvm_sys::LLVMFastMathAllowReassoc != 0
        }
    }

    /// The callee operand of a call.
    pub fn called_value(self) -> Option<Val<'m>> {
        // SAFETY: only called on call instructions.
        Val::new(unsafe { LLVMGetCalledValue(self.raw) })
    }
    /// Number of call arguments.
    pub fn call_arg_count(self) -> u32 {
        // SAFETY: only called on call instructions.
        unsafe { LLVMGetNumArgOperands(self.raw) }
    }

    /// Whether this load reads a C `_Bool`: an `i8` whose value the code turns into an `i1` (`trunc`, as clang
    /// reads a `_Bool` at `-O0`) or that carries `!range !{i8 0, i8 2}` (as it does when optimising).
    pub fn loads_a_bool(self) -> bool {
        let int_of = |v: Val<'m>, bits: u32| {
            v.ty().kind() == LLVMTypeKind::LLVMIntegerTypeKind && v.ty().int_width() == bits
        };
        self.opcode() == Some(LLVMOpcode::LLVMLoad)
            && int_of(self, 8)
            && (self.range_is_0_to_1()
                || self
                    .users()
                    .any(|u| u.opcode() == Some(LLVMOpcode::LLVMTrunc) && int_of(u, 1)))
    }

    /// The instructions that use this value.
    fn users(self) -> impl Iterator<Item = Val<'m>> {
        // SAFETY: valid value handle; each use handle is valid until the next call on the use list, which is not
        // changed while the model reads the module.
        let mut use_ = unsafe { LLVMGetFirstUse(self.raw) };
        std::iter::from_fn(move || {
            if use_.is_null() {
                return None;
            }
            // SAFETY: `use_` is a valid use of this value.
            let user = unsafe { LLVMGetUser(use_) };
            // SAFETY: as above.
            use_ = unsafe { LLVMGetNextUse(use_) };
            Val::new(user)
        })
    }

    /// Whether the instruction's `!range` metadata is exactly `[0, 2)`.
    fn range_is_0_to_1(self) -> bool {
        const RANGE: &str = "range";
        // SAFETY: valid instruction handle; the kind name is `RANGE.len()` bytes; the metadata, when present, is
        // an MDNode wrapped as a value, whose operands are written into a buffer of their number.
        unsafe {
            let kind = LLVMGetMDKindID(RANGE.as_ptr() as *const libc::c_char, RANGE.len() as u32);
            let md = LLVMGetMetadata(self.raw, kind);
            if md.is_null() || LLVMGetMDNodeNumOperands(md) != 2 {
                return false;
            }
            let mut ops = [std::ptr::null_mut(); 2];
            LLVMGetMDNodeOperands(md, ops.as_mut_ptr());
            let bound = |v: LLVMValueRef| {
                (!v.is_null() && !LLVMIsAConstantInt(v).is_null())
                    .then(|| LLVMConstIntGetSExtValue(v))
            };
            bound(ops[0]) == Some(0) && bound(ops[1]) == Some(2)
        }
    }

    /// The string of a metadata argument (`metadata !"round.tonearest"`); None for any other value.
    pub fn metadata_string(self) -> Option<String> {
        let mut len = 0u32;
        // SAFETY: valid value handle; LLVM returns null unless it wraps an MDString, else `len` valid bytes.
        let p = unsafe { LLVMGetMDString(self.raw, &mut len) };
        (!p.is_null()).then(|| cstr_owned(p, len as usize))
    }

    /// The block an instruction belongs to.
    pub fn parent_block(self) -> Option<Block<'m>> {
        // SAFETY: valid instruction.
        let b = unsafe { LLVMGetInstructionParent(self.raw) };
        (!b.is_null()).then_some(Block {
            raw: b,
            _module: PhantomData,
        })
    }

    pub fn next_instruction(self) -> Option<Val<'m>> {
        // SAFETY: valid instruction.
        Val::new(unsafe { LLVMGetNextInstruction(self.raw) })
    }

    pub fn num_successors(self) -> u32 {
        // SAFETY: only called on terminators.
        unsafe { LLVMGetNumSuccessors(self.raw) }
    }
    pub fn successor(self, i: u32) -> Block<'m> {
        // SAFETY: index checked by callers against num_successors.
        Block {
            raw: unsafe { LLVMGetSuccessor(self.raw, i) },
            _module: PhantomData,
        }
    }

    /// Incoming (value, block) pairs of a phi.
    pub fn incoming(self) -> Vec<(Val<'m>, Block<'m>)> {
        // SAFETY: only called on phi instructions; indices in range.
        unsafe {
            (0..LLVMCountIncoming(self.raw))
                .filter_map(|i| {
                    let v = Val::new(LLVMGetIncomingValue(self.raw, i))?;
                    let b = LLVMGetIncomingBlock(self.raw, i);
                    Some((
                        v,
                        Block {
                            raw: b,
                            _module: PhantomData,
                        },
                    ))
                })
                .collect()
        }
    }

    /// Constant indices of `extractvalue`/`insertvalue`.
    pub fn indices(self) -> Vec<u32> {
        // SAFETY: only called on extractvalue/insertvalue; LLVM owns the array of `n` indices.
        unsafe {
            let n = LLVMGetNumIndices(self.raw) as usize;
            let p = LLVMGetIndices(self.raw);
            if p.is_null() {
                return vec![];
            }
            std::slice::from_raw_parts(p, n).to_vec()
        }
    }

    /// The lanes of a `shufflevector` mask; `None` for an undefined lane.
    pub fn shuffle_mask(self) -> Vec<Option<u32>> {
        // SAFETY: only called on shufflevector instructions.
        unsafe {
            let undef = LLVMGetUndefMaskElem();
            (0..LLVMGetNumMaskElements(self.raw))
                .map(|i| {
                    let m = LLVMGetMaskValue(self.raw, i);
                    (m != undef && m >= 0).then_some(m as u32)
                })
                .collect()
        }
    }

    pub fn gep_source_type(self) -> Ty<'m> {
        // SAFETY: only called on GEP instructions and GEP constant expressions.
        Ty {
            raw: unsafe { LLVMGetGEPSourceElementType(self.raw) },
            _module: PhantomData,
        }
    }

    /// The (line, column) of an instruction in the analysed file ([`crate::headers::position_in_file`]: for an
    /// operation inlined from a header, the call it was inlined at), if it has one.
    pub fn debug_loc(self) -> Option<(u32, u32)> {
        // SAFETY: `self` is an instruction of the module borrowed for `'m`.
        unsafe { crate::headers::position_in_file(self.raw) }
    }

    /// The function's parameters.
    pub fn params(self) -> Vec<Val<'m>> {
        // SAFETY: only called on functions.
        unsafe {
            (0..LLVMCountParams(self.raw))
                .filter_map(|i| Val::new(LLVMGetParam(self.raw, i)))
                .collect()
        }
    }

    /// Whether the function carries the string attribute `kind`.
    pub fn has_attribute(self, kind: &str) -> bool {
        // SAFETY: only called on functions; the key is passed with its length and read during the call.
        unsafe {
            !LLVMGetStringAttributeAtIndex(
                self.raw,
                inkwell::llvm_sys::LLVMAttributeFunctionIndex,
                kind.as_ptr().cast(),
                kind.len() as u32,
            )
            .is_null()
        }
    }

    /// The function's entry block, `None` for a declaration.
    pub fn entry_block(self) -> Option<Block<'m>> {
        // SAFETY: only called on functions.
        unsafe {
            if LLVMCountBasicBlocks(self.raw) == 0 {
                return None;
            }
            Some(Block {
                raw: LLVMGetEntryBasicBlock(self.raw),
                _module: PhantomData,
            })
        }
    }

    /// The textual form, for messages.
    pub fn text(self) -> String {
        // SAFETY: LLVM returns an owned C string that we free.
        unsafe {
            let p = LLVMPrintValueToString(self.raw);
            let s = CStr::from_ptr(p).to_string_lossy().trim().to_string();
            LLVMDisposeMessage(p);
            s
        }
    }
}

impl<'m> Block<'m> {
    pub fn id(self) -> usize {
        self.raw as usize
    }
    pub fn first_instruction(self) -> Option<Val<'m>> {
        // SAFETY: valid block.
        Val::new(unsafe { LLVMGetFirstInstruction(self.raw) })
    }
    /// The instructions of the block, in order.
    pub fn instructions(self) -> impl Iterator<Item = Val<'m>> {
        std::iter::successors(self.first_instruction(), |i| i.next_instruction())
    }
}

impl<'m> Ty<'m> {
    pub fn kind(self) -> LLVMTypeKind {
        // SAFETY: valid type.
        unsafe { LLVMGetTypeKind(self.raw) }
    }
    pub fn int_width(self) -> u32 {
        // SAFETY: only called on integer types.
        unsafe { LLVMGetIntTypeWidth(self.raw) }
    }
    /// Element type of an array or vector.
    pub fn element(self) -> Ty<'m> {
        // SAFETY: only called on array and vector types.
        Ty {
            raw: unsafe { LLVMGetElementType(self.raw) },
            _module: PhantomData,
        }
    }
    pub fn vector_len(self) -> u32 {
        // SAFETY: only called on vector types.
        unsafe { LLVMGetVectorSize(self.raw) }
    }
    pub fn array_len(self) -> u64 {
        // SAFETY: only called on array types.
        unsafe { LLVMGetArrayLength2(self.raw) }
    }
    pub fn struct_fields(self) -> Vec<Ty<'m>> {
        // SAFETY: only called on struct types; indices in range.
        unsafe {
            (0..LLVMCountStructElementTypes(self.raw))
                .map(|i| Ty {
                    raw: LLVMStructGetTypeAtIndex(self.raw, i),
                    _module: PhantomData,
                })
                .collect()
        }
    }
    pub fn text(self) -> String {
        // SAFETY: LLVM returns an owned C string that we free.
        unsafe {
            let p = LLVMPrintTypeToString(self.raw);
            let s = CStr::from_ptr(p).to_string_lossy().into_owned();
            LLVMDisposeMessage(p);
            s
        }
    }
}

impl<'m> Layout<'m> {
    /// The data layout of `module`.
    pub fn of(module: &'m inkwell::module::Module<'_>) -> Layout<'m> {
        // SAFETY: the module outlives 'm; the layout is owned by the module.
        let raw =
            unsafe { inkwell::llvm_sys::target::LLVMGetModuleDataLayout(module.as_mut_ptr()) };
        Layout {
            raw,
            _module: PhantomData,
        }
    }
    /// Allocation size in bytes (the stride of an array element).
    pub fn size(self, ty: Ty<'m>) -> u64 {
        // SAFETY: sized type of the same context.
        unsafe { LLVMABISizeOfType(self.raw, ty.raw) }
    }
    pub fn field_offset(self, ty: Ty<'m>, index: u32) -> u64 {
        // SAFETY: struct type, index in range (checked by callers).
        unsafe { LLVMOffsetOfElement(self.raw, ty.raw, index) }
    }
}

/// A function of `module` by name, as a value.
pub fn function<'m>(module: &'m inkwell::module::Module<'_>, name: &str) -> Option<Val<'m>> {
    use inkwell::values::AsValueRef;
    module
        .get_function(name)
        .and_then(|f| Val::new(f.as_value_ref()))
}
