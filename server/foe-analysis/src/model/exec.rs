//! The symbolic executor: walks a function's IR path by path over the reals, inlining calls, and emits
//! one [`Query`] per exception condition of every floating-point operation it executes.
//!
//! This file holds the [`Executor`], the worklist of paths, entering blocks and the per-instruction dispatch
//! (`step`). The instructions themselves are `impl Executor` blocks in the child modules: [`control`] (`ret`,
//! branches, switches and the call dispatch, inlining the file's own functions), [`fp_ops`] (floating-point
//! operations, the only place queries are emitted), [`library`] (libm, FP intrinsics and the modelled C library,
//! on top of `fp_ops`), [`sse`] (the SSE intrinsics left as calls), [`memory_ops`] (constants, globals, loads,
//! stores, addresses) and [`value_ops`] (instructions given by the pure rules of `values.rs`). They use this
//! file's `Executor`; this file reaches them only through methods on `self`. [`entry`] builds the state
//! exploration starts in (the parameters as symbolic inputs).

mod control;
mod entry;
mod fp_ops;
mod library;
mod memory_ops;
mod sse;
mod value_ops;

use super::error::ModelError;
use super::llvm::{Block, LLVMOpcode, LLVMRealPredicate, LLVMTypeKind, Layout, Ty, Val};
use super::memory::Value;
use super::state::{path_stop, At, Flow, State};
use super::values::opcode_name;
use super::{CancellationQuery, PathOutputs, Query};
use crate::sym::Expr;
use crate::types::{Build, FunctionSignature, SourceLoc};
use std::collections::{BTreeMap, HashMap};

/// Deepest chain of inlined calls; a path that would go deeper stops there.
const MAX_INLINE_DEPTH: usize = 16;
/// Instructions executed over all paths of one function before exploration stops.
const MAX_STEPS: usize = 400_000;
/// Queries emitted for one function before exploration stops.
const MAX_QUERIES: usize = 50_000;
/// Paths of one addition or subtraction whose cancellation is asked, and such queries of one function at most.
const CANCELLATION_PATHS: usize = 2;
const MAX_CANCELLATIONS: usize = 32;

/// A binary operation applied lane by lane.
type LaneFn2<'a, 'm> =
    dyn FnMut(&mut Executor<'m>, &mut State<'m>, Value, Value) -> Result<Value, ModelError> + 'a;
/// A unary operation applied lane by lane.
type LaneFn1<'a, 'm> =
    dyn FnMut(&mut Executor<'m>, &mut State<'m>, Value) -> Result<Value, ModelError> + 'a;

pub(super) struct Executor<'m> {
    layout: Layout<'m>,
    build: Build,
    unroll_limit: u32,
    max_paths: usize,
    paths_started: usize,
    pub(super) steps: usize,
    pub(super) queries: Vec<Query>,
    /// Where the plain build's additions and subtractions cancel ([`fp_ops`]), at most
    /// [`CANCELLATION_PATHS`] paths per operation.
    pub(super) cancellations: Vec<CancellationQuery>,
    /// How many paths of each operation (by location and instruction) gave a cancellation query.
    cancellation_paths: HashMap<(Option<SourceLoc>, u32), usize>,
    at: At,
    /// Whether exploration was cut short (step or query budget).
    pub(super) truncated: bool,
    /// Whether a bound other than loop unrolling stopped exploration (steps, queries, paths, inlining depth, the
    /// deadline): some paths of the function were not modelled.
    pub(super) cut_short: bool,
    /// When exploration must stop: the terms it may make ([`crate::sym::terms_made`], counted from
    /// `terms_start`: the same on every run of the text) and the wall-clock safety net.
    pub(super) limits: super::ModelLimits,
    pub(super) terms_start: u64,
    /// Whether its work (the terms it made) stopped exploration.
    pub(super) out_of_work: bool,
    /// Whether the wall-clock safety net stopped exploration.
    pub(super) out_of_time: bool,
    /// Paths that stopped at an address with a symbolic index.
    pub(super) symbolic_index_stops: usize,
    /// Other paths that ended early, by reason (`a call to `gsl_error``, `frexp of a computed value`).
    pub(super) path_stops: BTreeMap<String, usize>,
    /// The inputs behind pointer parameters, shared with the other build's executor.
    pointees: super::memory::Pointees,
    /// Each instruction met so far, numbered in the order it was first met (deterministic, as exploration is).
    instruction_numbers: HashMap<Val<'m>, u32>,
    /// The plain build's paths as they end, with their outputs (nothing is recorded for the fast-math build).
    pub(super) outputs: Vec<PathOutputs>,
    /// Where each floating-point instruction's value was first computed, by its term's fingerprint: where a
    /// returned struct's field comes from (a returned value has no store to point at).
    pub(super) computed_at: crate::sym::FingerprintMap<SourceLoc>,
}

impl<'m> Executor<'m> {
    pub(super) fn new(
        layout: Layout<'m>,
        build: Build,
        unroll_bound: u32,
        max_paths: usize,
        pointees: super::memory::Pointees,
    ) -> Executor<'m> {
        Executor {
            layout,
            build,
            unroll_limit: unroll_bound.saturating_add(1),
            max_paths: max_paths.max(1),
            paths_started: 0,
            steps: 0,
            queries: Vec::new(),
            cancellations: Vec::new(),
            cancellation_paths: HashMap::new(),
            at: At {
                operation: String::new(),
                loc: None,
                instruction: 0,
            },
            truncated: false,
            cut_short: false,
            limits: super::ModelLimits::default(),
            terms_start: crate::sym::terms_made(),
            out_of_work: false,
            out_of_time: false,
            symbolic_index_stops: 0,
            path_stops: BTreeMap::new(),
            pointees,
            instruction_numbers: HashMap::new(),
            computed_at: Default::default(),
            outputs: Vec::new(),
        }
    }

    /// Explores `function` (the analysed entry point with signature `sig`) and collects its queries.
    pub(super) fn run(
        &mut self,
        function: Val<'m>,
        sig: &FunctionSignature,
    ) -> Result<(), ModelError> {
        let (mut state, entry) = self.entry_state(function, sig)?;
        self.paths_started = 1;
        let entered = self.enter(&mut state, None, entry);
        if !self.continues(&state, entered)? {
            return Ok(());
        }
        let mut work = vec![state];
        while let Some(mut st) = work.pop() {
            loop {
                if self.out_of_budget() {
                    return Ok(());
                }
                self.steps += 1;
                match self.step_path(&mut st)? {
                    Flow::Next => {}
                    Flow::End => break,
                    Flow::Branch { from, targets } => {
                        if !self.branch(&mut st, from, targets, &mut work)? {
                            break;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether exploration must stop: the step, query or work budget is spent, or (looked at every 256 steps) the
    /// safety net has passed. Sets the flags that say why.
    fn out_of_budget(&mut self) -> bool {
        if self.steps >= MAX_STEPS || self.queries.len() >= MAX_QUERIES {
            self.truncated = true;
            self.cut_short = true;
            return true;
        }
        if self
            .limits
            .terms
            .is_some_and(|t| crate::sym::terms_made() - self.terms_start >= t)
        {
            self.truncated = true;
            self.cut_short = true;
            self.out_of_work = true;
            return true;
        }
        if self.steps.is_multiple_of(256)
            && self
                .limits
                .deadline
                .is_some_and(|d| std::time::Instant::now() >= d)
        {
            self.truncated = true;
            self.cut_short = true;
            self.out_of_time = true;
            return true;
        }
        false
    }

    /// One instruction of the path `st`; a path stop, or what a callee cannot model, is counted and ends the path.
    fn step_path(&mut self, st: &mut State<'m>) -> Result<Flow<'m>, ModelError> {
        match self.step(st) {
            Ok(flow) => Ok(flow),
            Err(e) => {
                let reason = match e {
                    ModelError::PathStop(reason) => reason,
                    ModelError::Internal(_) => return Err(e),
                    // What a callee cannot model ends the paths through it, not the function.
                    _ => match st.callee_name() {
                        Some(callee) => format!("`{callee}` {e}"),
                        None => return Err(e),
                    },
                };
                self.record_stop(st, &reason);
                *self.path_stops.entry(reason).or_default() += 1;
                Ok(Flow::End)
            }
        }
    }

    /// Forks the path `st` at a branch from `from`: the other feasible targets, within the path budget, go on
    /// `work`; `st` takes the first. Whether `st` goes on.
    fn branch(
        &mut self,
        st: &mut State<'m>,
        from: Block<'m>,
        targets: Vec<(Expr, Block<'m>)>,
        work: &mut Vec<State<'m>>,
    ) -> Result<bool, ModelError> {
        let feasible: Vec<(Expr, Block<'m>)> =
            targets.into_iter().filter(|(c, _)| !c.is_false()).collect();
        let Some((first_cond, first_block)) = feasible.first().cloned() else {
            return Ok(false);
        };
        // Forks beyond the path budget are dropped; the first successor always continues.
        let mut forks = Vec::new();
        for (cond, block) in feasible.iter().skip(1) {
            if self.paths_started >= self.max_paths {
                self.truncated = true;
                self.cut_short = true;
                break;
            }
            self.paths_started += 1;
            let mut other = st.clone();
            other.assume(cond.clone());
            let entered = self.enter(&mut other, Some(from), *block);
            if self.continues(&other, entered)? {
                forks.push(other);
            }
        }
        work.extend(forks.into_iter().rev());
        st.assume(first_cond);
        let entered = self.enter(st, Some(from), first_block);
        self.continues(st, entered)
    }

    /// Whether the path `st` goes on after `result`: a path stop is counted and ends it, other errors propagate.
    fn continues(
        &mut self,
        st: &State<'m>,
        result: Result<bool, ModelError>,
    ) -> Result<bool, ModelError> {
        match result {
            Ok(go_on) => {
                if !go_on {
                    self.record_stop(st, "a loop that runs more times than foe unrolls");
                }
                Ok(go_on)
            }
            Err(ModelError::PathStop(reason)) => {
                self.record_stop(st, &reason);
                *self.path_stops.entry(reason).or_default() += 1;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Moves the top frame to `block`, evaluating its phis; false when the unroll bound stops the path.
    fn enter(
        &mut self,
        st: &mut State<'m>,
        from: Option<Block<'m>>,
        block: Block<'m>,
    ) -> Result<bool, ModelError> {
        let frame = st
            .frames
            .last_mut()
            .ok_or_else(|| ModelError::internal("no frame"))?;
        let visits = frame.visits.entry(block.id()).or_insert(0);
        *visits += 1;
        if *visits > self.unroll_limit {
            self.truncated = true;
            return Ok(false);
        }
        let mut phis = Vec::new();
        let mut first = None;
        for inst in block.instructions() {
            if inst.opcode() != Some(LLVMOpcode::LLVMPHI) {
                first = Some(inst);
                break;
            }
            let from = from.ok_or_else(|| ModelError::internal("phi in an entry block"))?;
            let incoming = inst
                .incoming()
                .into_iter()
                .find(|(_, b)| *b == from)
                .map(|(v, _)| v)
                .ok_or_else(|| {
                    ModelError::internal(format!(
                        "phi without a value for its predecessor: {}",
                        inst.text()
                    ))
                })?;
            phis.push((inst.id(), self.value_of(st, incoming)?));
        }
        let frame = st
            .frames
            .last_mut()
            .ok_or_else(|| ModelError::internal("no frame"))?;
        for (id, v) in phis {
            frame.env.insert(id, v);
        }
        frame.next = first;
        Ok(true)
    }

    /// The symbolic value of an operand: a register of the current frame or a constant.
    fn value_of(&mut self, st: &mut State<'m>, v: Val<'m>) -> Result<Value, ModelError> {
        if let Some(x) = st.frames.last().and_then(|f| f.env.get(&v.id())) {
            return Ok(x.clone());
        }
        if v.is_constant() {
            return self.constant(st, v);
        }
        Err(ModelError::internal(format!(
            "value used before its definition: {}",
            v.text()
        )))
    }

    fn operand(&mut self, st: &mut State<'m>, inst: Val<'m>, i: u32) -> Result<Value, ModelError> {
        let v = inst.operand(i).ok_or_else(|| {
            ModelError::internal(format!("missing operand {i} of {}", inst.text()))
        })?;
        self.value_of(st, v)
    }

    /// Executes the next instruction of the top frame.
    fn step(&mut self, st: &mut State<'m>) -> Result<Flow<'m>, ModelError> {
        let frame = st
            .frames
            .last_mut()
            .ok_or_else(|| ModelError::internal("no frame"))?;
        let Some(inst) = frame.next else {
            return Ok(Flow::End);
        };
        frame.next = inst.next_instruction();
        let opcode = inst
            .opcode()
            .ok_or_else(|| ModelError::internal("not an instruction"))?;
        if uses_long_double(inst) {
            return Err(path_stop("`long double` arithmetic"));
        }
        let next_number = self.instruction_numbers.len() as u32;
        let instruction = *self.instruction_numbers.entry(inst).or_insert(next_number);
        self.at = At {
            operation: opcode_name(opcode).to_string(),
            instruction,
            loc: inst
                .debug_loc()
                .filter(|(line, _)| *line > 0)
                .map(|(line, column)| SourceLoc { line, column }),
        };
        use LLVMOpcode::*;
        let result: Option<Value> = match opcode {
            LLVMRet => return self.symex_ret(st, inst),
            LLVMBr => return self.symex_br(st, inst),
            LLVMSwitch => return self.symex_switch(st, inst),
            LLVMUnreachable => return Ok(Flow::End),
            LLVMFAdd | LLVMFSub | LLVMFMul | LLVMFDiv | LLVMFRem | LLVMFCmp | LLVMFPToSI
            | LLVMFPToUI | LLVMSIToFP | LLVMUIToFP | LLVMFPTrunc | LLVMFPExt => {
                let v = self.symex_fp_instruction(st, inst, opcode, None)?;
                if let (Some(term), Some(loc)) = (v.term(), self.at.loc) {
                    self.computed_at.entry(term.fingerprint()).or_insert(loc);
                }
                Some(v)
            }
            LLVMFNeg => Some(self.symex_fneg(st, inst)?),
            LLVMICmp => Some(self.symex_icmp(st, inst)?),
            LLVMAdd | LLVMSub | LLVMMul | LLVMUDiv | LLVMSDiv | LLVMURem | LLVMSRem | LLVMShl
            | LLVMLShr | LLVMAShr | LLVMAnd | LLVMOr | LLVMXor => {
                Some(self.symex_int_binary(st, inst, opcode)?)
            }
            LLVMTrunc | LLVMZExt | LLVMSExt => Some(self.symex_int_cast(st, inst, opcode)?),
            LLVMBitCast | LLVMAddrSpaceCast => Some(self.symex_bitcast(st, inst)?),
            LLVMFreeze => Some(self.operand(st, inst, 0)?),
            LLVMSelect => Some(self.symex_select(st, inst)?),
            LLVMAlloca => Some(self.symex_alloca(st, inst)?),
            // A path that dereferences the null pointer traps there when run: it ends (the run reports the crash).
            LLVMLoad | LLVMStore
                if self.is_null_operand(st, inst, if opcode == LLVMLoad { 0 } else { 1 })? =>
            {
                self.record_stop(st, "a dereference of a null pointer");
                return Ok(Flow::End);
            }
            LLVMLoad => Some(self.symex_load(st, inst)?),
            LLVMStore => {
                self.symex_store(st, inst)?;
                None
            }
            LLVMGetElementPtr => match self.gep(st, inst) {
                Ok(p) => Some(Value::Ptr(p)),
                // An address the model cannot pin down (a loop remainder after vectorisation, an index computed
                // from an input): the path stops here; what it did before is modelled.
                Err(ModelError::SymbolicIndex) => {
                    self.record_stop(
                        st,
                        "an access to memory at an index computed from the input",
                    );
                    self.symbolic_index_stops += 1;
                    return Ok(Flow::End);
                }
                Err(e) => return Err(e),
            },
            LLVMExtractElement => Some(self.symex_extract_element(st, inst)?),
            LLVMInsertElement => Some(self.symex_insert_element(st, inst)?),
            LLVMShuffleVector => Some(self.symex_shuffle_vector(st, inst)?),
            LLVMExtractValue => Some(self.symex_extract_value(st, inst)?),
            LLVMInsertValue => Some(self.symex_insert_value(st, inst)?),
            LLVMCall => return self.symex_call(st, inst),
            LLVMPtrToInt | LLVMIntToPtr => {
                return Err(ModelError::unsupported(
                    "converts between pointers and integers",
                ))
            }
            other => return Err(ModelError::Instruction(opcode_name(other))),
        };
        if let Some(v) = result {
            st.bind(inst.id(), v)?;
        }
        Ok(Flow::Next)
    }

    /// An FP instruction, or a constrained intrinsic that stands for one (`predicate`: the comparison its
    /// metadata names; an `fcmp` instruction carries its own).
    fn symex_fp_instruction(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        opcode: LLVMOpcode,
        predicate: Option<LLVMRealPredicate>,
    ) -> Result<Value, ModelError> {
        use LLVMOpcode::*;
        match opcode {
            LLVMFAdd | LLVMFSub | LLVMFMul | LLVMFDiv => self.symex_fp_arith(st, inst, opcode),
            LLVMFRem => self.symex_frem(st, inst),
            LLVMFCmp => {
                let pred = predicate.unwrap_or_else(|| inst.fcmp_predicate());
                self.symex_fcmp(st, inst, pred)
            }
            LLVMFPToSI | LLVMFPToUI => self.symex_fp_to_int(st, inst, opcode == LLVMFPToSI),
            LLVMSIToFP | LLVMUIToFP => self.symex_int_to_fp(st, inst, opcode == LLVMSIToFP),
            LLVMFPTrunc | LLVMFPExt => self.symex_fp_convert(st, inst),
            other => Err(ModelError::internal(format!(
                "`{}` is not a floating-point instruction",
                opcode_name(other)
            ))),
        }
    }

    /// Applies `f` lane by lane to two vectors, or once to two scalars.
    fn lanes2(
        &mut self,
        st: &mut State<'m>,
        a: Value,
        b: Value,
        f: &mut LaneFn2<'_, 'm>,
    ) -> Result<Value, ModelError> {
        match (a, b) {
            (Value::Lanes(xs), Value::Lanes(ys)) => Ok(Value::Lanes(
                xs.into_iter()
                    .zip(ys)
                    .map(|(x, y)| f(self, st, x, y))
                    .collect::<Result<_, _>>()?,
            )),
            (Value::Lanes(xs), Value::Poison) => {
                let n = xs.len();
                self.lanes2(
                    st,
                    Value::Lanes(xs),
                    Value::Lanes(vec![Value::Poison; n]),
                    f,
                )
            }
            (Value::Poison, Value::Lanes(ys)) => {
                let n = ys.len();
                self.lanes2(
                    st,
                    Value::Lanes(vec![Value::Poison; n]),
                    Value::Lanes(ys),
                    f,
                )
            }
            (x, y) => f(self, st, x, y),
        }
    }

    fn lanes1(
        &mut self,
        st: &mut State<'m>,
        a: Value,
        f: &mut LaneFn1<'_, 'm>,
    ) -> Result<Value, ModelError> {
        match a {
            Value::Lanes(xs) => Ok(Value::Lanes(
                xs.into_iter()
                    .map(|x| f(self, st, x))
                    .collect::<Result<_, _>>()?,
            )),
            x => f(self, st, x),
        }
    }
}

/// Whether `inst` produces or reads an x86 `long double` (not modelled: the path ends there; the worker runs it).
fn uses_long_double(inst: Val<'_>) -> bool {
    let is_fp80 = |t: Ty<'_>| {
        let t = if t.kind() == LLVMTypeKind::LLVMVectorTypeKind {
            t.element()
        } else {
            t
        };
        t.kind() == LLVMTypeKind::LLVMX86_FP80TypeKind
    };
    is_fp80(inst.ty())
        || (0..inst.num_operands()).any(|i| inst.operand(i).is_some_and(|o| is_fp80(o.ty())))
}
