//! Control flow and calls of the symbolic executor: `ret` (recording what the plain build's path produces: its
//! return value and what it wrote through its pointer parameters, where it stored them), `br`, `switch`, and the
//! call dispatch (libm and the modelled C library to [`super::library`], the analysed file's own functions
//! inlined, the rest ending the path with its reason).

use super::{Executor, MAX_INLINE_DEPTH};
use crate::model::calls::{
    bit_call, classify, classify_function, integer_call, value_args, Callee, IntegerCall,
};
use crate::model::error::ModelError;
use crate::model::llvm::{Block, LLVMTypeKind, Ty, Val};
use crate::model::memory::Value;
use crate::model::state::{Flow, Frame, State};
use crate::model::values::opcode_name;
use crate::model::{OutputTerm, PathEnd, PathOutputs, WrittenOutput};
use crate::sym::{self, Expr};
use crate::types::{Build, RETURN_PARAM};
use std::collections::HashMap;

impl<'m> Executor<'m> {
    pub(super) fn symex_ret(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Flow<'m>, ModelError> {
        let value = if inst.num_operands() > 0 {
            Some(self.operand(st, inst, 0)?)
        } else {
            None
        };
        let ty = inst.operand(0).map(|v| v.ty());
        let done = st
            .frames
            .pop()
            .ok_or_else(|| ModelError::internal("no frame"))?;
        match (st.frames.last_mut(), done.call_site) {
            (Some(caller), Some(site)) => {
                if let Some(v) = value {
                    caller.env.insert(site.id(), v);
                }
                Ok(Flow::Next)
            }
            _ => {
                self.record_return(st, value.as_ref(), ty);
                Ok(Flow::End)
            }
        }
    }

    /// Records, for the plain build, the outputs of the path `st` returning `value` (of IR type `ty`) from the
    /// analysed function. A struct returned in registers (a vector or an aggregate) is its fields, by byte offset
    /// as the entry stores it: the outputs `return.x` ([`RETURN_PARAM`]).
    pub(super) fn record_return(
        &mut self,
        st: &State<'m>,
        value: Option<&Value>,
        ty: Option<Ty<'m>>,
    ) {
        if self.build != Build::P {
            return;
        }
        let mut writes: Vec<WrittenOutput> = st
            .memory
            .written_through_params()
            .into_iter()
            .map(|(param, offset, v)| WrittenOutput {
                param,
                offset,
                value: output_term(&v),
                stored_at: st.memory.stored_at(param, offset),
            })
            .collect();
        let mut ret = value;
        if let (Some(v @ (Value::Lanes(_) | Value::Fields(_))), Some(ty)) = (value, ty) {
            let mut fields = vec![];
            self.returned_fields(v, ty, 0, &mut fields);
            writes.extend(fields.into_iter().map(|(offset, v)| {
                WrittenOutput {
                    param: RETURN_PARAM,
                    offset,
                    value: output_term(&v),
                    stored_at: v
                        .term()
                        .and_then(|t| self.computed_at.get(&t.fingerprint()).copied()),
                }
            }));
            ret = None;
        }
        self.outputs.push(PathOutputs {
            condition: st.pc.clone(),
            end: PathEnd::Returned {
                ret: ret.map(output_term),
                writes,
                reads_unmodelled_memory: st.memory.read_unmodelled.get(),
            },
        });
    }

    /// The scalars of `v` (of IR type `ty`, at byte `base`) with their byte offsets, as a store of `v` lays
    /// them out in memory.
    pub(super) fn returned_fields(
        &self,
        v: &Value,
        ty: Ty<'m>,
        base: i64,
        out: &mut Vec<(i64, Value)>,
    ) {
        match (v, ty.kind()) {
            (Value::Lanes(xs), LLVMTypeKind::LLVMVectorTypeKind) => {
                let size = self.layout.size(ty.element()) as i64;
                for (i, x) in xs.iter().enumerate() {
                    self.returned_fields(x, ty.element(), base + i as i64 * size, out);
                }
            }
            (Value::Fields(xs), LLVMTypeKind::LLVMStructTypeKind) => {
                let types = ty.struct_fields();
                for (i, (x, t)) in xs.iter().zip(types).enumerate() {
                    let at = self.layout.field_offset(ty, i as u32) as i64;
                    self.returned_fields(x, t, base + at, out);
                }
            }
            (Value::Lanes(_) | Value::Fields(_), _) => {}
            (scalar, _) => out.push((base, scalar.clone())),
        }
    }

    /// Records, for the plain build, that the path `st` stops before returning, for `reason`.
    pub(super) fn record_stop(&mut self, st: &State<'m>, reason: &str) {
        if self.build == Build::P {
            self.outputs.push(PathOutputs {
                condition: st.pc.clone(),
                end: PathEnd::Stopped(reason.to_string()),
            });
        }
    }

    pub(super) fn symex_br(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Flow<'m>, ModelError> {
        let from = inst
            .parent_block()
            .ok_or_else(|| ModelError::internal("branch outside a block"))?;
        if inst.num_successors() == 1 {
            return Ok(Flow::Branch {
                from,
                targets: vec![(sym::tru(), inst.successor(0))],
            });
        }
        let c = match self.operand(st, inst, 0)? {
            Value::Bool(c) => c,
            Value::Poison => return Ok(Flow::End),
            other => return Err(ModelError::internal(format!("branch on {other:?}"))),
        };
        Ok(Flow::Branch {
            from,
            targets: vec![
                (c.clone(), inst.successor(0)),
                (sym::not(c), inst.successor(1)),
            ],
        })
    }

    pub(super) fn symex_switch(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Flow<'m>, ModelError> {
        let from = inst
            .parent_block()
            .ok_or_else(|| ModelError::internal("switch outside a block"))?;
        let x = match self.operand(st, inst, 0)? {
            Value::Int { e, .. } => e,
            Value::Bool(b) => sym::ite(b, sym::int_i(-1), sym::int_i(0)),
            Value::Poison => return Ok(Flow::End),
            other => return Err(ModelError::internal(format!("switch on {other:?}"))),
        };
        // Operands: condition, default block, then (case value, block) pairs; successor 0 is the default.
        let mut by_block: Vec<(Block<'m>, Vec<Expr>)> = Vec::new();
        let mut all_cases = Vec::new();
        for k in 1..inst.num_successors() {
            let case = inst
                .operand(2 * k)
                .ok_or_else(|| ModelError::internal("switch case without value"))?;
            let value = match self.constant(st, case)? {
                Value::Int { e, .. } => e,
                Value::Bool(b) => sym::ite(b, sym::int_i(-1), sym::int_i(0)),
                other => return Err(ModelError::internal(format!("switch case {other:?}"))),
            };
            let cond = sym::eq(x.clone(), value);
            all_cases.push(cond.clone());
            let block = inst.successor(k);
            match by_block.iter_mut().find(|(b, _)| *b == block) {
                Some((_, conds)) => conds.push(cond),
                None => by_block.push((block, vec![cond])),
            }
        }
        let mut targets: Vec<(Expr, Block<'m>)> =
            by_block.into_iter().map(|(b, c)| (sym::or(c), b)).collect();
        targets.push((
            sym::and(all_cases.into_iter().map(sym::not)),
            inst.successor(0),
        ));
        Ok(Flow::Branch { from, targets })
    }

    pub(super) fn symex_call(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
    ) -> Result<Flow<'m>, ModelError> {
        let argc = value_args(inst);
        let callee = match classify(inst)? {
            // The function the pointer holds on this path (a table the file defines, an address stored
            // earlier); another one ends the path, not the analysis.
            Callee::Indirect => match self.operand(st, inst, argc)? {
                Value::Ptr(p) if p.offset == 0 && st.functions.contains_key(&p.region) => {
                    classify_function(inst, st.functions[&p.region])?
                }
                _ => {
                    let reason = "an indirect call through a pointer foe cannot follow";
                    self.record_stop(st, reason);
                    *self.path_stops.entry(reason.to_string()).or_default() += 1;
                    return Ok(Flow::End);
                }
            },
            callee => callee,
        };
        self.at.operation = format!("call {}", callee.name());
        let result = match callee {
            Callee::Defined(function) => return self.inline_call(st, inst, function, argc),
            Callee::Indirect => return Err(ModelError::internal("an unresolved indirect call")),
            Callee::Ignored(_) => None,
            Callee::Instruction {
                opcode, predicate, ..
            } => {
                // Named as the instruction, so that its queries are those of the plain operation.
                self.at.operation = opcode_name(opcode).to_string();
                Some(self.symex_fp_instruction(st, inst, opcode, predicate)?)
            }
            Callee::Stop { name } => {
                self.record_stop(st, &format!("a call to `{name}`"));
                *self
                    .path_stops
                    .entry(format!("a call to `{name}`"))
                    .or_default() += 1;
                return Ok(Flow::End);
            }
            Callee::Libc { func, .. } => {
                let mut args = Vec::with_capacity(argc as usize);
                for i in 0..argc {
                    args.push(self.operand(st, inst, i)?);
                }
                Some(self.libc_call(st, func, args, inst.ty())?)
            }
            Callee::Memory { kind, .. } => {
                self.memory_intrinsic(st, inst, kind)?;
                None
            }
            Callee::Reduce { op, .. } => {
                let start = self.operand(st, inst, 0)?;
                let Value::Lanes(lanes) = self.operand(st, inst, 1)? else {
                    return Err(ModelError::Unsupported(format!(
                        "`{}` of a non-vector",
                        self.at.operation
                    )));
                };
                Some(self.reduce(st, op, start, lanes, inst.allows_reassociation())?)
            }
            Callee::Integer {
                op: IntegerCall::Bits(bit),
                ..
            } => {
                let mut args = Vec::with_capacity(bit.operands() as usize);
                for i in 0..bit.operands() {
                    args.push(self.operand(st, inst, i)?);
                }
                Some(bit_call(bit, &args)?)
            }
            Callee::Integer { op, .. } => {
                let a = self.operand(st, inst, 0)?;
                let b = match op {
                    IntegerCall::MinMax { .. } => self.operand(st, inst, 1)?,
                    // abs(x) = x < 0 ? 0 - x : x (wrapping, so abs(INT_MIN) = INT_MIN as LLVM defines it).
                    IntegerCall::Abs | IntegerCall::Bits(_) => a.clone(),
                };
                Some(self.lanes2(st, a, b, &mut |_, _, a, b| integer_call(op, a, b))?)
            }
            Callee::Sse { op, .. } => Some(self.sse_call(st, inst, op, argc)?),
            Callee::Math { func, .. } => {
                let mut args = Vec::with_capacity(argc as usize);
                for i in 0..argc {
                    args.push(self.operand(st, inst, i)?);
                }
                Some(self.math_call(st, func, args, inst.ty())?)
            }
        };
        if let Some(v) = result {
            st.bind(inst.id(), v)?;
        }
        Ok(Flow::Next)
    }

    /// A call of a function defined in the module: a new frame at its entry block (inlining).
    pub(super) fn inline_call(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        function: Val<'m>,
        argc: u32,
    ) -> Result<Flow<'m>, ModelError> {
        if st.frames.len() >= MAX_INLINE_DEPTH {
            self.truncated = true;
            self.cut_short = true;
            return Ok(Flow::End);
        }
        let params = function.params();
        if params.len() != argc as usize {
            return Err(ModelError::Unsupported(format!(
                "calls `{}` with a different number of arguments",
                function.name()
            )));
        }
        let mut env = HashMap::new();
        for (i, p) in params.iter().enumerate() {
            env.insert(p.id(), self.operand(st, inst, i as u32)?);
        }
        let entry = function
            .entry_block()
            .ok_or_else(|| ModelError::internal("inlining a declaration"))?;
        st.frames.push(Frame {
            next: None,
            env,
            visits: HashMap::new(),
            call_site: Some(inst),
        });
        if !self.enter(st, None, entry)? {
            return Ok(Flow::End);
        }
        Ok(Flow::Next)
    }
}

/// The output a register value stands for.
fn output_term(v: &Value) -> OutputTerm {
    match v {
        Value::Real { e, fmt } => OutputTerm::Real {
            term: e.clone(),
            fmt: *fmt,
        },
        Value::Int { e, bits } => OutputTerm::Int {
            term: e.clone(),
            bits: *bits,
        },
        Value::Bool(c) => OutputTerm::Bool(c.clone()),
        Value::Ptr(_) => OutputTerm::Unmodelled("a pointer"),
        Value::Lanes(_) | Value::Fields(_) => OutputTerm::Unmodelled("a struct or vector"),
        Value::Poison => OutputTerm::Unmodelled("an uninitialised value"),
    }
}
