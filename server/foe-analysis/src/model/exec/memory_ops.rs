//! Constants, globals and memory: the value of a constant operand, a global's region, `alloca`, loads and
//! stores, address arithmetic (`getelementptr`) and the memory intrinsics.

use super::Executor;
use crate::model::calls::MemoryOp;
use crate::model::error::ModelError;
use crate::model::llvm::{LLVMOpcode, LLVMTypeKind, Val};
use crate::model::memory::{flatten_type, unflatten, Fill, Pointer, Value};
use crate::model::state::{path_stop, State};
use crate::model::values::fp_format;
use crate::sym;

impl<'m> Executor<'m> {
    /// `alloca` of one value: a region of its own, uninitialised.
    pub(super) fn symex_alloca(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        if inst
            .operand(0)
            .map(|n| n.is_constant_int() && n.const_int() == 1)
            != Some(true)
        {
            return Err(ModelError::unsupported("allocates a variable-length array"));
        }
        let name = format!("local `{}`", inst.name());
        Ok(Value::Ptr(st.memory.new_region(Fill::Uninit, &name)))
    }

    pub(super) fn symex_load(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Value, ModelError> {
        let p = self.pointer_operand(st, inst, 0)?;
        st.memory
            .load(p, inst.ty(), self.layout, inst.loads_a_bool())
    }

    pub(super) fn symex_store(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<(), ModelError> {
        let v = self.operand(st, inst, 0)?;
        let ty = inst
            .operand(0)
            .ok_or_else(|| ModelError::internal("store without value"))?
            .ty();
        let p = self.pointer_operand(st, inst, 1)?;
        st.memory.store(p, &v, ty, self.layout)?;
        if let (Some(param), Some(loc)) = (st.memory.param_of(p), self.at.loc) {
            st.memory.stored_at.insert((param, p.offset), loc);
        }
        Ok(())
    }

    /// The value of a constant (scalars, aggregates, globals' addresses, constant GEPs).
    pub(super) fn constant(&mut self, st: &mut State<'m>, v: Val<'m>) -> Result<Value, ModelError> {
        let ty = v.ty();
        if v.is_undef_or_poison() {
            return Ok(Value::Poison);
        }
        if v.is_constant_fp() {
            let fmt =
                fp_format(ty).ok_or_else(|| path_stop(format!("a `{}` constant", ty.text())))?;
            let x = v.const_fp();
            if !x.is_finite() {
                // Comparisons with an infinity or NaN are decided without it (see `fcmp_constant`).
                return Err(path_stop("a computation with an infinity or NaN"));
            }
            return Ok(Value::Real {
                e: sym::real_f64(x),
                fmt,
            });
        }
        if v.is_constant_int() {
            let bits = ty.int_width();
            if bits > 64 {
                return Err(ModelError::Unsupported(format!(
                    "uses the {bits}-bit integer type"
                )));
            }
            return Ok(if bits == 1 {
                Value::Bool(sym::boolean(v.const_int() != 0))
            } else {
                Value::Int {
                    e: sym::int_i(v.const_int()),
                    bits,
                }
            });
        }
        if v.is_null_pointer() {
            return Ok(Value::Ptr(Pointer::null()));
        }
        if v.is_zero_aggregate() {
            let zeros: Vec<Value> = flatten_type(ty, self.layout)?
                .into_iter()
                .map(|(_, s)| s.zero())
                .collect();
            return unflatten(ty, &mut zeros.into_iter());
        }
        if v.is_constant_aggregate() {
            let n = match ty.kind() {
                LLVMTypeKind::LLVMVectorTypeKind => ty.vector_len() as u64,
                LLVMTypeKind::LLVMArrayTypeKind => ty.array_len(),
                LLVMTypeKind::LLVMStructTypeKind => ty.struct_fields().len() as u64,
                _ => {
                    return Err(ModelError::Unsupported(format!(
                        "uses the constant `{}`",
                        v.text()
                    )))
                }
            };
            if n > 1 << 16 {
                return Err(ModelError::unsupported(
                    "uses a very large constant aggregate",
                ));
            }
            let mut elems = Vec::with_capacity(n as usize);
            for i in 0..n as u32 {
                let e = v.aggregate_element(i).ok_or_else(|| {
                    ModelError::Unsupported(format!("uses the constant `{}`", v.text()))
                })?;
                elems.push(self.constant(st, e)?);
            }
            return Ok(if ty.kind() == LLVMTypeKind::LLVMVectorTypeKind {
                Value::Lanes(elems)
            } else {
                Value::Fields(elems)
            });
        }
        if v.is_global_variable() {
            return Ok(Value::Ptr(self.global(st, v)?));
        }
        if v.is_function() {
            return Ok(Value::Ptr(self.function_address(st, v)));
        }
        if v.is_constant_expr() && v.const_opcode() == LLVMOpcode::LLVMGetElementPtr {
            return self.gep(st, v).map(Value::Ptr);
        }
        Err(ModelError::Unsupported(format!(
            "uses the constant expression `{}`",
            v.text()
        )))
    }

    /// The address of a function: a region of its own (nothing can be read from it), remembered so that an
    /// indirect call through it calls that function.
    fn function_address(&mut self, st: &mut State<'m>, f: Val<'m>) -> Pointer {
        if let Some(p) = st.globals.get(&f.id()) {
            return *p;
        }
        let p = st
            .memory
            .new_region(Fill::Uninit, &format!("function `{}`", f.name()));
        st.globals.insert(f.id(), p);
        st.functions.insert(p.region, f);
        p
    }

    /// The region of a global variable, created on first use from its initializer.
    fn global(&mut self, st: &mut State<'m>, g: Val<'m>) -> Result<Pointer, ModelError> {
        if let Some(p) = st.globals.get(&g.id()) {
            return Ok(*p);
        }
        let init = g
            .initializer()
            .ok_or_else(|| path_stop(format!("a read of the external global `{}`", g.name())))?;
        let p = st
            .memory
            .new_region(Fill::Zero, &format!("global `{}`", g.name()));
        st.globals.insert(g.id(), p);
        if !init.is_zero_aggregate() && !init.is_undef_or_poison() {
            let value = self.constant(st, init)?;
            st.memory.store(p, &value, init.ty(), self.layout)?;
        }
        Ok(p)
    }

    pub(super) fn memory_intrinsic(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        kind: MemoryOp,
    ) -> Result<(), ModelError> {
        let dst = self.pointer_operand(st, inst, 0)?;
        let len = match self.operand(st, inst, 2)? {
            Value::Int { e, .. } => sym::const_i64(&e).ok_or_else(|| {
                ModelError::unsupported("copies or sets a symbolic number of bytes")
            })?,
            _ => {
                return Err(ModelError::unsupported(
                    "copies or sets a symbolic number of bytes",
                ))
            }
        };
        let len = u64::try_from(len)
            .map_err(|_| ModelError::unsupported("sets a negative number of bytes"))?;
        match kind {
            MemoryOp::Set => {
                let byte = match self.operand(st, inst, 1)? {
                    Value::Int { e, .. } => sym::const_i64(&e),
                    _ => None,
                };
                if byte != Some(0) {
                    return Err(ModelError::unsupported(
                        "fills memory with a non-zero byte (memset)",
                    ));
                }
                st.memory.zero(dst, len)
            }
            MemoryOp::Copy => {
                let src = self.pointer_operand(st, inst, 1)?;
                if src.region == dst.region && (src.offset - dst.offset).unsigned_abs() < len {
                    return Err(ModelError::unsupported("copies between overlapping memory"));
                }
                st.memory.copy(dst, src, len)
            }
        }
    }

    pub(super) fn is_null_operand(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        i: u32,
    ) -> Result<bool, ModelError> {
        Ok(matches!(self.operand(st, inst, i)?, Value::Ptr(p) if p.is_null()))
    }

    fn pointer_operand(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        i: u32,
    ) -> Result<Pointer, ModelError> {
        match self.operand(st, inst, i)? {
            Value::Ptr(p) if !p.is_null() => Ok(p),
            Value::Ptr(_) => Err(ModelError::unsupported("dereferences a null pointer")),
            Value::Poison => Err(ModelError::unsupported("dereferences an undefined pointer")),
            other => Err(ModelError::internal(format!(
                "pointer operand is {other:?}"
            ))),
        }
    }

    /// Address arithmetic of a GEP instruction or constant expression with concrete indices.
    pub(super) fn gep(&mut self, st: &mut State<'m>, inst: Val<'m>) -> Result<Pointer, ModelError> {
        let base = match self.operand(st, inst, 0)? {
            Value::Ptr(p) => p,
            Value::Poison => return Err(ModelError::unsupported("indexes an undefined pointer")),
            other => {
                return Err(ModelError::Unsupported(format!(
                    "indexes a vector of pointers ({other:?})"
                )))
            }
        };
        let mut ty = inst.gep_source_type();
        let mut offset = base.offset as i128;
        for k in 1..inst.num_operands() {
            let index = match self.operand(st, inst, k)? {
                Value::Int { e, .. } => sym::const_i64(&e).ok_or(ModelError::SymbolicIndex)?,
                Value::Bool(b) => match b.as_bool() {
                    Some(b) => -(b as i64),
                    None => return Err(ModelError::SymbolicIndex),
                },
                _ => {
                    return Err(ModelError::unsupported(
                        "indexes memory with a vector or undefined index",
                    ))
                }
            } as i128;
            if k == 1 {
                offset += index * self.layout.size(ty) as i128;
                continue;
            }
            match ty.kind() {
                LLVMTypeKind::LLVMStructTypeKind => {
                    let fields = ty.struct_fields();
                    let field = fields
                        .get(index as usize)
                        .ok_or_else(|| ModelError::internal("struct index out of range"))?;
                    offset += self.layout.field_offset(ty, index as u32) as i128;
                    ty = *field;
                }
                LLVMTypeKind::LLVMArrayTypeKind | LLVMTypeKind::LLVMVectorTypeKind => {
                    ty = ty.element();
                    offset += index * self.layout.size(ty) as i128;
                }
                _ => {
                    return Err(ModelError::Unsupported(format!(
                        "indexes into the scalar type `{}`",
                        ty.text()
                    )))
                }
            }
        }
        let offset = i64::try_from(offset)
            .map_err(|_| ModelError::unsupported("computes an address far out of range"))?;
        Ok(Pointer {
            region: base.region,
            offset,
        })
    }
}
