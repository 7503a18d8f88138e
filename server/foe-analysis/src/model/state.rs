//! Path state: one path's call stack, memory and path condition, what executing an instruction does to the
//! path, and how a path stops early. Plain data; the executor (`exec.rs`) drives it.

use super::error::ModelError;
use super::llvm::{Block, Val};
use super::memory::{Memory, Pointer, Value};
use crate::sym::Expr;
use crate::types::SourceLoc;
use std::collections::HashMap;

/// One activation of a function on a path.
#[derive(Clone)]
pub(super) struct Frame<'m> {
    /// The next instruction to execute.
    pub(super) next: Option<Val<'m>>,
    pub(super) env: HashMap<usize, Value>,
    /// Times each block was entered in this activation.
    pub(super) visits: HashMap<usize, u32>,
    /// The call instruction in the caller that receives the return value.
    pub(super) call_site: Option<Val<'m>>,
}

/// One path: the call stack, memory and the path condition.
#[derive(Clone)]
pub(super) struct State<'m> {
    pub(super) frames: Vec<Frame<'m>>,
    pub(super) memory: Memory,
    pub(super) globals: HashMap<usize, Pointer>,
    /// The functions whose address was taken, by the region that stands for that address: what an indirect call
    /// through it calls.
    pub(super) functions: HashMap<u32, Val<'m>>,
    /// Conjuncts of the path condition, including assumptions (divisors ≠ 0, ...).
    pub(super) pc: Vec<Expr>,
}

/// What executing one instruction did to the path.
pub(super) enum Flow<'m> {
    Next,
    /// Continue at one of these blocks, each under its condition (the first is taken by this state).
    Branch {
        from: Block<'m>,
        targets: Vec<(Expr, Block<'m>)>,
    },
    End,
}

/// An error that stops the current path for `reason` (counted in `Executor::path_stops`), not the function.
pub(super) fn path_stop(reason: impl std::fmt::Display) -> ModelError {
    ModelError::PathStop(reason.to_string())
}

/// The operation and source location queries of the current instruction are attributed to.
#[derive(Clone)]
pub(super) struct At {
    pub(super) operation: String,
    pub(super) loc: Option<SourceLoc>,
    /// The instruction's number in the order the executor first met it (see
    /// [`Query::instruction`](super::Query::instruction)).
    pub(super) instruction: u32,
}

impl<'m> State<'m> {
    /// The function the innermost inlined call (if any) executes.
    pub(super) fn callee_name(&self) -> Option<String> {
        let site = self.frames.last()?.call_site?;
        site.called_value().map(|f| f.name())
    }

    /// Binds the value of instruction `id` in the innermost frame.
    pub(super) fn bind(&mut self, id: usize, v: Value) -> Result<(), ModelError> {
        self.frames
            .last_mut()
            .ok_or_else(|| ModelError::internal("no frame"))?
            .env
            .insert(id, v);
        Ok(())
    }

    /// Adds an assumption to the path condition (constants are dropped: a constant-false assumption, such as
    /// a division by the constant zero, would make every later query false).
    pub(super) fn assume(&mut self, c: Expr) {
        if !c.is_const() {
            self.pc.push(c);
        }
    }
}
