//! The state a function's exploration starts in: each parameter a symbolic input (a float or integer term, or a
//! fresh region for a pointer), checked against the signature the driver calls it with.

use super::Executor;
use crate::model::error::ModelError;
use crate::model::llvm::{Block, LLVMTypeKind, Val};
use crate::model::memory::{Fill, Memory, Value};
use crate::model::state::{Frame, State};
use crate::model::values::fp_format;
use crate::round::FloatFormat;
use crate::sym::{self, VarType};
use crate::types::{FunctionSignature, Param, ParamType};
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
        let declared: Vec<&Param> = sig.call_params().collect();
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
        for (i, (p, decl)) in params.iter().zip(declared).enumerate() {
            let value = param_value(&mut state, *p, decl, i as u32)?;
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
