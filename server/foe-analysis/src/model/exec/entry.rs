//! The state a function's exploration starts in: each parameter a symbolic input (a float or integer term, or a
//! fresh region for a pointer), checked against the signature the driver calls it with. A struct passed by value
//! in registers is bound field by field (a `<2 x float>` argument to the lanes of two float inputs); a `byval`
//! copy is a region like a pointer's, whose fields are inputs behind it.

use super::Executor;
use crate::model::bits;
use crate::model::error::ModelError;
use crate::model::llvm::{Block, LLVMTypeKind, Val};
use crate::model::memory::{Fill, Memory, Value};
use crate::model::state::{Frame, State};
use crate::model::values::fp_format;
use crate::round::FloatFormat;
use crate::sym::{self, VarType};
use crate::types::{FunctionSignature, IrArg, Param, ParamType};
use std::collections::HashMap;

impl<'m> Executor<'m> {
    /// The state at the entry of `function`, its parameters bound to symbolic inputs in one frame, and its entry
    /// block.
    pub(super) fn entry_state(
        &self,
        function: Val<'m>,
        sig: &FunctionSignature,
    ) -> Result<(State<'m>, Block<'m>), ModelError> {
        let params = function.params();
        let declared = sig.ir_args();
        if params.len() != declared.len() {
            return Err(ModelError::ParamCount {
                in_build: params.len(),
                declared: declared.len(),
            });
        }
        let mut state = State {
            frames: vec![],
            memory: Memory::with_pointees(self.pointees.clone()),
            globals: HashMap::new(),
            functions: HashMap::new(),
            pc: vec![],
        };
        let mut env = HashMap::new();
        for (p, arg) in params.iter().zip(declared) {
            let value = match arg {
                IrArg::Sret => {
                    Value::Ptr(state.memory.new_region(Fill::Uninit, "the returned struct"))
                }
                IrArg::One(i) => param_value(&mut state, *p, param(sig, i)?, i as u32)?,
                IrArg::Lanes(lanes) => lanes_value(*p, sig, &lanes)?,
                IrArg::Packed(fields) => packed_value(*p, sig, &fields)?,
            };
            env.insert(p.id(), value);
        }
        let entry = function
            .entry_block()
            .ok_or_else(|| ModelError::unsupported("has no body in this build"))?;
        state.frames.push(Frame {
            next: None,
            env,
            visits: HashMap::new(),
            call_site: None,
        });
        Ok((state, entry))
    }
}

/// Parameter `i` of the signature.
fn param(sig: &FunctionSignature, i: usize) -> Result<&Param, ModelError> {
    sig.params
        .get(i)
        .ok_or_else(|| ModelError::internal("an argument without its parameter"))
}

/// A vector argument (`<2 x float>`, a struct of two floats) whose lanes are the float inputs `lanes`.
fn lanes_value(p: Val<'_>, sig: &FunctionSignature, lanes: &[usize]) -> Result<Value, ModelError> {
    let ty = p.ty();
    let mismatch = |name: &str| ModelError::ParamType {
        param: name.to_string(),
        ty: ty.text(),
    };
    let first = param(sig, lanes.first().copied().unwrap_or(0))?;
    if ty.kind() != LLVMTypeKind::LLVMVectorTypeKind || ty.vector_len() as usize != lanes.len() {
        return Err(mismatch(&first.name));
    }
    let fmt = fp_format(ty.element()).ok_or_else(|| mismatch(&first.name))?;
    let mut out = Vec::with_capacity(lanes.len());
    for &i in lanes {
        let decl = param(sig, i)?;
        if decl.ty.float_format() != Some(fmt) {
            return Err(mismatch(&decl.name));
        }
        out.push(Value::Real {
            e: sym::param(i as u32, VarType::Float(fmt)),
            fmt,
        });
    }
    Ok(Value::Lanes(out))
}

/// An integer argument that packs the integer fields `fields` of a struct (`bits.rs`), each at its byte offset
/// within the argument's eightbyte.
fn packed_value(
    p: Val<'_>,
    sig: &FunctionSignature,
    fields: &[usize],
) -> Result<Value, ModelError> {
    let ty = p.ty();
    let first = param(sig, fields.first().copied().unwrap_or(0))?;
    let mismatch = |name: &str| ModelError::ParamType {
        param: name.to_string(),
        ty: ty.text(),
    };
    if ty.kind() != LLVMTypeKind::LLVMIntegerTypeKind {
        return Err(mismatch(&first.name));
    }
    let mut parts = Vec::with_capacity(fields.len());
    for &i in fields {
        let decl = param(sig, i)?;
        let (ParamType::Int { bits, signed }, Some(at)) = (decl.ty, decl.by_value.as_ref()) else {
            return Err(mismatch(&decl.name));
        };
        let var = sym::param(
            i as u32,
            VarType::Int {
                bits,
                signed: signed && bits > 1,
            },
        );
        parts.push((var, 8 * (at.offset % 8), bits));
    }
    Ok(Value::Int {
        e: bits::pack(parts, ty.int_width()),
        bits: ty.int_width(),
    })
}

/// The symbolic input for parameter `index` (`p` in the IR, `decl` in the signature); an error when the IR's type
/// is not the declared one.
fn param_value<'m>(
    state: &mut State<'m>,
    p: Val<'m>,
    decl: &Param,
    index: u32,
) -> Result<Value, ModelError> {
    let value = match decl.ty {
        ParamType::F64 | ParamType::F32 => {
            let fmt = if decl.ty == ParamType::F64 {
                FloatFormat::Double
            } else {
                FloatFormat::Single
            };
            if fp_format(p.ty()) != Some(fmt) {
                return Err(ModelError::ParamType {
                    param: decl.name.clone(),
                    ty: p.ty().text(),
                });
            }
            Value::Real {
                e: sym::param(index, VarType::Float(fmt)),
                fmt,
            }
        }
        ParamType::Int { bits, signed } => {
            if p.ty().kind() != LLVMTypeKind::LLVMIntegerTypeKind || p.ty().int_width() != bits {
                return Err(ModelError::ParamType {
                    param: decl.name.clone(),
                    ty: p.ty().text(),
                });
            }
            let var = sym::param(
                index,
                VarType::Int {
                    bits,
                    signed: signed && bits > 1,
                },
            );
            if bits == 1 {
                Value::Bool(sym::ne(var, sym::int_i(0)))
            } else {
                Value::Int { e: var, bits }
            }
        }
        ParamType::OutPtr { .. } => Value::Ptr(
            state
                .memory
                .new_region(Fill::Param(index), &format!("`*{}`", decl.name)),
        ),
    };
    Ok(value)
}
