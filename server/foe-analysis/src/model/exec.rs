//! The symbolic executor: walks a function's IR path by path over the reals, inlining calls, and emits
//! one [`Query`] per exception condition of every floating-point operation it executes.

use super::calls::Callee;
use super::llvm::{
    Block, LLVMIntPredicate, LLVMOpcode, LLVMRealPredicate, LLVMTypeKind, Layout, Ty, Val,
};
use super::memory::{flatten_type, unflatten, Fill, Memory, Pointer, Scalar, Value};
use super::Query;
use crate::round::FloatFormat;
use crate::sym::{self, ArithOp, Expr, IntOp, Site, SiteOp, VarType};
use crate::types::{Build, ExceptionKind, FunctionSignature, ParamType, SourceLoc};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use std::collections::{BTreeMap, HashMap};

/// Deepest chain of inlined calls; a path that would go deeper stops there.
const MAX_INLINE_DEPTH: usize = 16;
/// Instructions executed over all paths of one function before exploration stops.
const MAX_STEPS: usize = 400_000;
/// Queries emitted for one function before exploration stops.
const MAX_QUERIES: usize = 50_000;

/// One activation of a function on a path.
#[derive(Clone)]
pub(super) struct Frame<'m> {
    /// The next instruction to execute.
    next: Option<Val<'m>>,
    env: HashMap<usize, Value>,
    /// Times each block was entered in this activation.
    visits: HashMap<usize, u32>,
    /// The call instruction in the caller that receives the return value.
    call_site: Option<Val<'m>>,
}

/// One path: the call stack, memory and the path condition.
#[derive(Clone)]
pub(super) struct State<'m> {
    frames: Vec<Frame<'m>>,
    pub(super) memory: Memory,
    globals: HashMap<usize, Pointer>,
    /// Conjuncts of the path condition, including assumptions (divisors ≠ 0, ...).
    pc: Vec<Expr>,
}

/// What executing one instruction did to the path.
enum Flow<'m> {
    Next,
    /// Continue at one of these blocks, each under its condition (the first is taken by this state).
    Branch {
        from: Block<'m>,
        targets: Vec<(Expr, Block<'m>)>,
    },
    End,
}

/// A binary operation applied lane by lane.
pub(super) type LaneFn2<'a, 'm> =
    dyn FnMut(&mut Executor<'m>, &mut State<'m>, Value, Value) -> Result<Value, String> + 'a;
/// A unary operation applied lane by lane.
pub(super) type LaneFn1<'a, 'm> =
    dyn FnMut(&mut Executor<'m>, &mut State<'m>, Value) -> Result<Value, String> + 'a;

/// Why an address could not be computed: an index that is not a constant on this path.
const SYMBOLIC_INDEX: &str = "indexes memory with a symbolic index";

/// Marks an error that ends the path, not the function: what the path did before is modelled.
const PATH_STOP: &str = "\u{0}stop:";

/// An error that stops the current path for `reason` (counted in [`Executor::path_stops`]).
pub(super) fn path_stop(reason: impl std::fmt::Display) -> String {
    format!("{PATH_STOP}{reason}")
}

/// The operation and source location queries of the current instruction are attributed to.
#[derive(Clone)]
pub(super) struct At {
    pub(super) operation: String,
    pub(super) loc: Option<SourceLoc>,
    /// The instruction's number in the order the executor first met it (see [`Query::instruction`]).
    pub(super) instruction: u32,
}

pub(super) struct Executor<'m> {
    pub(super) layout: Layout<'m>,
    build: Build,
    unroll_limit: u32,
    max_paths: usize,
    paths_started: usize,
    steps: usize,
    pub(super) queries: Vec<Query>,
    pub(super) at: At,
    /// Whether exploration was cut short (step or query budget).
    pub(super) truncated: bool,
    /// Whether a bound other than loop unrolling stopped exploration (steps, queries, paths, inlining depth, the
    /// deadline): some paths of the function were not modelled.
    pub(super) cut_short: bool,
    /// When exploration must stop (the function's time budget for modelling).
    pub(super) deadline: Option<std::time::Instant>,
    /// Whether the deadline stopped exploration.
    pub(super) out_of_time: bool,
    /// Paths that stopped at an address with a symbolic index.
    pub(super) symbolic_index_stops: usize,
    /// Other paths that ended early, by reason (`a call to `gsl_error``, `frexp of a computed value`).
    pub(super) path_stops: BTreeMap<String, usize>,
    /// The inputs behind pointer parameters, shared with the other build's executor.
    pointees: super::memory::Pointees,
    /// Each instruction met so far, numbered in the order it was first met (deterministic, as exploration is).
    instruction_numbers: HashMap<Val<'m>, u32>,
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
            at: At {
                operation: String::new(),
                loc: None,
                instruction: 0,
            },
            truncated: false,
            cut_short: false,
            deadline: None,
            out_of_time: false,
            symbolic_index_stops: 0,
            path_stops: BTreeMap::new(),
            pointees,
            instruction_numbers: HashMap::new(),
        }
    }

    /// Explores `function` (the analysed entry point with signature `sig`) and collects its queries.
    pub(super) fn run(&mut self, function: Val<'m>, sig: &FunctionSignature) -> Result<(), String> {
        let params = function.params();
        let declared: Vec<&crate::types::Param> = sig.call_params().collect();
        if params.len() != declared.len() {
            return Err(format!(
                "has {} parameters in this build, {} in the signature",
                params.len(),
                declared.len()
            ));
        }
        let mut state = State {
            frames: vec![],
            memory: Memory::with_pointees(self.pointees.clone()),
            globals: HashMap::new(),
            pc: vec![],
        };
        let mut env = HashMap::new();
        for (i, (p, decl)) in params.iter().zip(declared).enumerate() {
            let index = i as u32;
            let value = match decl.ty {
                ParamType::F64 | ParamType::F32 => {
                    let fmt = if decl.ty == ParamType::F64 {
                        FloatFormat::Double
                    } else {
                        FloatFormat::Single
                    };
                    if fp_format(p.ty()) != Some(fmt) {
                        return Err(format!(
                            "parameter `{}` has type `{}` in this build",
                            decl.name,
                            p.ty().text()
                        ));
                    }
                    Value::Real {
                        e: sym::param(index, VarType::Float(fmt)),
                        fmt,
                    }
                }
                ParamType::Int { bits, signed } => {
                    if p.ty().kind() != LLVMTypeKind::LLVMIntegerTypeKind
                        || p.ty().int_width() != bits
                    {
                        return Err(format!(
                            "parameter `{}` has type `{}` in this build",
                            decl.name,
                            p.ty().text()
                        ));
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
            env.insert(p.id(), value);
        }
        let entry = function.entry_block().ok_or("has no body in this build")?;
        state.frames.push(Frame {
            next: None,
            env,
            visits: HashMap::new(),
            call_site: None,
        });
        self.paths_started = 1;
        let entered = self.enter(&mut state, None, entry);
        if !self.continues(entered)? {
            return Ok(());
        }
        let mut work = vec![state];
        while let Some(mut st) = work.pop() {
            loop {
                if self.steps >= MAX_STEPS || self.queries.len() >= MAX_QUERIES {
                    self.truncated = true;
                    self.cut_short = true;
                    return Ok(());
                }
                if self.steps.is_multiple_of(256)
                    && self
                        .deadline
                        .is_some_and(|d| std::time::Instant::now() >= d)
                {
                    self.truncated = true;
                    self.cut_short = true;
                    self.out_of_time = true;
                    return Ok(());
                }
                self.steps += 1;
                let flow = match self.step(&mut st) {
                    Ok(flow) => flow,
                    Err(e) => {
                        let reason = match e.strip_prefix(PATH_STOP) {
                            Some(reason) => reason.to_string(),
                            // What a callee cannot model ends the paths through it, not the function.
                            None if !e.starts_with("internal") => match st.callee_name() {
                                Some(callee) => format!("`{callee}` {e}"),
                                None => return Err(e),
                            },
                            None => return Err(e),
                        };
                        *self.path_stops.entry(reason).or_default() += 1;
                        Flow::End
                    }
                };
                match flow {
                    Flow::Next => {}
                    Flow::End => break,
                    Flow::Branch { from, targets } => {
                        let feasible: Vec<(Expr, Block<'m>)> =
                            targets.into_iter().filter(|(c, _)| !c.is_false()).collect();
                        let Some((first_cond, first_block)) = feasible.first().cloned() else {
                            break;
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
                            if self.continues(entered)? {
                                forks.push(other);
                            }
                        }
                        work.extend(forks.into_iter().rev());
                        st.assume(first_cond);
                        let entered = self.enter(&mut st, Some(from), first_block);
                        if !self.continues(entered)? {
                            break;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the path goes on after `result`: a path stop is counted and ends it, other errors propagate.
    fn continues(&mut self, result: Result<bool, String>) -> Result<bool, String> {
        match result {
            Ok(go_on) => Ok(go_on),
            Err(e) => match e.strip_prefix(PATH_STOP) {
                Some(reason) => {
                    *self.path_stops.entry(reason.to_string()).or_default() += 1;
                    Ok(false)
                }
                None => Err(e),
            },
        }
    }

    /// Moves the top frame to `block`, evaluating its phis; false when the unroll bound stops the path.
    fn enter(
        &mut self,
        st: &mut State<'m>,
        from: Option<Block<'m>>,
        block: Block<'m>,
    ) -> Result<bool, String> {
        let frame = st.frames.last_mut().ok_or("internal: no frame")?;
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
            let from = from.ok_or("internal: phi in an entry block")?;
            let incoming = inst
                .incoming()
                .into_iter()
                .find(|(_, b)| *b == from)
                .map(|(v, _)| v)
                .ok_or_else(|| {
                    format!(
                        "internal: phi without a value for its predecessor: {}",
                        inst.text()
                    )
                })?;
            phis.push((inst.id(), self.value_of(st, incoming)?));
        }
        let frame = st.frames.last_mut().ok_or("internal: no frame")?;
        for (id, v) in phis {
            frame.env.insert(id, v);
        }
        frame.next = first;
        Ok(true)
    }

    /// The symbolic value of an operand: a register of the current frame or a constant.
    pub(super) fn value_of(&mut self, st: &mut State<'m>, v: Val<'m>) -> Result<Value, String> {
        if let Some(x) = st.frames.last().and_then(|f| f.env.get(&v.id())) {
            return Ok(x.clone());
        }
        if v.is_constant() {
            return self.constant(st, v);
        }
        Err(format!(
            "internal: value used before its definition: {}",
            v.text()
        ))
    }

    pub(super) fn operand(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        i: u32,
    ) -> Result<Value, String> {
        let v = inst
            .operand(i)
            .ok_or_else(|| format!("internal: missing operand {i} of {}", inst.text()))?;
        self.value_of(st, v)
    }

    /// The value of a constant (scalars, aggregates, globals' addresses, constant GEPs).
    fn constant(&mut self, st: &mut State<'m>, v: Val<'m>) -> Result<Value, String> {
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
                return Err(format!("uses the {bits}-bit integer type"));
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
                _ => return Err(format!("uses the constant `{}`", v.text())),
            };
            if n > 1 << 16 {
                return Err("uses a very large constant aggregate".into());
            }
            let mut elems = Vec::with_capacity(n as usize);
            for i in 0..n as u32 {
                let e = v
                    .aggregate_element(i)
                    .ok_or_else(|| format!("uses the constant `{}`", v.text()))?;
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
            return Err(format!("takes the address of function `{}`", v.name()));
        }
        if v.is_constant_expr() && v.const_opcode() == LLVMOpcode::LLVMGetElementPtr {
            return self.gep(st, v).map(Value::Ptr);
        }
        Err(format!("uses the constant expression `{}`", v.text()))
    }

    /// The region of a global variable, created on first use from its initializer.
    fn global(&mut self, st: &mut State<'m>, g: Val<'m>) -> Result<Pointer, String> {
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

    /// Executes the next instruction of the top frame.
    fn step(&mut self, st: &mut State<'m>) -> Result<Flow<'m>, String> {
        let frame = st.frames.last_mut().ok_or("internal: no frame")?;
        let Some(inst) = frame.next else {
            return Ok(Flow::End);
        };
        frame.next = inst.next_instruction();
        let opcode = inst.opcode().ok_or("internal: not an instruction")?;
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
            LLVMRet => return self.ret(st, inst),
            LLVMBr => return self.br(st, inst),
            LLVMSwitch => return self.switch(st, inst),
            LLVMUnreachable => return Ok(Flow::End),
            LLVMFAdd | LLVMFSub | LLVMFMul | LLVMFDiv => {
                let op = match opcode {
                    LLVMFAdd => ArithOp::Add,
                    LLVMFSub => ArithOp::Sub,
                    LLVMFMul => ArithOp::Mul,
                    _ => ArithOp::Div,
                };
                let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
                Some(self.lanes2(st, a, b, &mut |this, st, a, b| this.fp_arith(st, op, a, b))?)
            }
            LLVMFRem => {
                let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
                Some(self.lanes2(st, a, b, &mut |this, st, a, b| this.fp_rem(st, a, b))?)
            }
            LLVMFNeg => {
                let a = self.operand(st, inst, 0)?;
                Some(map1(a, &mut |a| match a {
                    Value::Real { e, fmt } => Ok(Value::Real {
                        e: sym::neg(e),
                        fmt,
                    }),
                    other => Err(format!("internal: fneg of {other:?}")),
                })?)
            }
            LLVMFCmp if non_finite_operand(inst).is_some() => {
                let pred = inst.fcmp_predicate();
                let (side, c) = non_finite_operand(inst).ok_or("internal: fcmp operand")?;
                let other = self.operand(st, inst, 1 - side)?;
                Some(map1(other, &mut |x| fcmp_non_finite(pred, x, side, c))?)
            }
            LLVMFCmp => {
                let pred = inst.fcmp_predicate();
                let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
                Some(self.lanes2(st, a, b, &mut |_, _, a, b| fcmp(pred, a, b))?)
            }
            LLVMICmp => {
                let pred = inst.icmp_predicate();
                let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
                Some(self.lanes2(st, a, b, &mut |_, _, a, b| icmp(pred, a, b))?)
            }
            LLVMAdd | LLVMSub | LLVMMul | LLVMUDiv | LLVMSDiv | LLVMURem | LLVMSRem | LLVMShl
            | LLVMLShr | LLVMAShr | LLVMAnd | LLVMOr | LLVMXor => {
                let (a, b) = (self.operand(st, inst, 0)?, self.operand(st, inst, 1)?);
                Some(self.lanes2(st, a, b, &mut |_, _, a, b| int_binary(opcode, a, b))?)
            }
            LLVMTrunc | LLVMZExt | LLVMSExt => {
                let to = scalar_bits(inst.ty())?;
                let a = self.operand(st, inst, 0)?;
                Some(map1(a, &mut |a| int_cast(opcode, a, to))?)
            }
            LLVMFPToSI | LLVMFPToUI => {
                let to = scalar_bits(inst.ty())?;
                let signed = opcode == LLVMFPToSI;
                let a = self.operand(st, inst, 0)?;
                Some(self.lanes1(st, a, &mut |this, st, a| this.fp_to_int(st, a, to, signed))?)
            }
            LLVMSIToFP | LLVMUIToFP => {
                let fmt = fp_format(inst.ty())
                    .ok_or_else(|| format!("converts to `{}`", inst.ty().text()))?;
                let signed = opcode == LLVMSIToFP;
                let a = self.operand(st, inst, 0)?;
                Some(map1(a, &mut |a| int_to_fp(a, fmt, signed))?)
            }
            LLVMFPTrunc | LLVMFPExt => {
                let fmt = fp_format(inst.ty())
                    .ok_or_else(|| format!("converts to `{}`", inst.ty().text()))?;
                let a = self.operand(st, inst, 0)?;
                Some(self.lanes1(st, a, &mut |this, st, a| this.fp_convert(st, a, fmt))?)
            }
            LLVMBitCast | LLVMAddrSpaceCast => {
                let from = inst
                    .operand(0)
                    .ok_or("internal: cast without operand")?
                    .ty();
                let to = inst.ty();
                let a = self.operand(st, inst, 0)?;
                if from == to
                    || (from.kind() == LLVMTypeKind::LLVMPointerTypeKind
                        && to.kind() == from.kind())
                {
                    Some(a)
                } else {
                    Some(map1(a, &mut |a| bitcast(a, to))?)
                }
            }
            LLVMFreeze => Some(self.operand(st, inst, 0)?),
            LLVMSelect => {
                let c = self.operand(st, inst, 0)?;
                let (a, b) = (self.operand(st, inst, 1)?, self.operand(st, inst, 2)?);
                Some(select(c, a, b)?)
            }
            LLVMAlloca => {
                if inst
                    .operand(0)
                    .map(|n| n.is_constant_int() && n.const_int() == 1)
                    != Some(true)
                {
                    return Err("allocates a variable-length array".into());
                }
                let name = format!("local `{}`", inst.name());
                Some(Value::Ptr(st.memory.new_region(Fill::Uninit, &name)))
            }
            // A path that dereferences the null pointer traps there when run: it ends (the run reports the crash).
            LLVMLoad | LLVMStore
                if self.is_null_operand(st, inst, if opcode == LLVMLoad { 0 } else { 1 })? =>
            {
                return Ok(Flow::End)
            }
            LLVMLoad => {
                let p = self.pointer_operand(st, inst, 0)?;
                Some(st.memory.load(p, inst.ty(), self.layout)?)
            }
            LLVMStore => {
                let v = self.operand(st, inst, 0)?;
                let ty = inst.operand(0).ok_or("internal: store without value")?.ty();
                let p = self.pointer_operand(st, inst, 1)?;
                st.memory.store(p, &v, ty, self.layout)?;
                None
            }
            LLVMGetElementPtr => match self.gep(st, inst) {
                Ok(p) => Some(Value::Ptr(p)),
                // An address the model cannot pin down (a loop remainder after vectorisation, an index computed
                // from an input): the path stops here; what it did before is modelled.
                Err(e) if e == SYMBOLIC_INDEX => {
                    self.symbolic_index_stops += 1;
                    return Ok(Flow::End);
                }
                Err(e) => return Err(e),
            },
            LLVMExtractElement => {
                let v = self.operand(st, inst, 0)?;
                let i = const_index(&self.operand(st, inst, 1)?)?;
                Some(match v {
                    Value::Lanes(lanes) => lanes.get(i).cloned().unwrap_or(Value::Poison),
                    _ => Value::Poison,
                })
            }
            LLVMInsertElement => {
                let n = inst.ty().vector_len() as usize;
                let v = self.operand(st, inst, 0)?;
                let x = self.operand(st, inst, 1)?;
                let i = const_index(&self.operand(st, inst, 2)?)?;
                let mut lanes = match v {
                    Value::Lanes(l) => l,
                    _ => vec![Value::Poison; n],
                };
                if i < lanes.len() {
                    lanes[i] = x;
                }
                Some(Value::Lanes(lanes))
            }
            LLVMShuffleVector => {
                let a = self.operand(st, inst, 0)?;
                let b = self.operand(st, inst, 1)?;
                let width = inst
                    .operand(0)
                    .map(|o| o.ty().vector_len() as usize)
                    .unwrap_or(0);
                let lanes_of = |v: Value| match v {
                    Value::Lanes(l) => l,
                    _ => vec![Value::Poison; width],
                };
                let (a, b) = (lanes_of(a), lanes_of(b));
                Some(Value::Lanes(
                    inst.shuffle_mask()
                        .into_iter()
                        .map(|m| match m {
                            Some(m) if (m as usize) < width => {
                                a.get(m as usize).cloned().unwrap_or(Value::Poison)
                            }
                            Some(m) => b.get(m as usize - width).cloned().unwrap_or(Value::Poison),
                            None => Value::Poison,
                        })
                        .collect(),
                ))
            }
            LLVMExtractValue => {
                let mut v = self.operand(st, inst, 0)?;
                for i in inst.indices() {
                    v = match v {
                        Value::Fields(f) => f.get(i as usize).cloned().unwrap_or(Value::Poison),
                        _ => Value::Poison,
                    };
                }
                Some(v)
            }
            LLVMInsertValue => {
                let agg = self.operand(st, inst, 0)?;
                let x = self.operand(st, inst, 1)?;
                Some(insert_value(
                    agg,
                    inst.ty(),
                    &inst.indices(),
                    x,
                    self.layout,
                )?)
            }
            LLVMCall => return self.call(st, inst),
            LLVMPtrToInt | LLVMIntToPtr => {
                return Err("converts between pointers and integers".into())
            }
            other => return Err(format!("uses the `{}` instruction", opcode_name(other))),
        };
        if let Some(v) = result {
            st.frames
                .last_mut()
                .ok_or("internal: no frame")?
                .env
                .insert(inst.id(), v);
        }
        Ok(Flow::Next)
    }

    fn ret(&mut self, st: &mut State<'m>, inst: Val<'m>) -> Result<Flow<'m>, String> {
        let value = if inst.num_operands() > 0 {
            Some(self.operand(st, inst, 0)?)
        } else {
            None
        };
        let done = st.frames.pop().ok_or("internal: no frame")?;
        match (st.frames.last_mut(), done.call_site) {
            (Some(caller), Some(site)) => {
                if let Some(v) = value {
                    caller.env.insert(site.id(), v);
                }
                Ok(Flow::Next)
            }
            _ => Ok(Flow::End),
        }
    }

    fn br(&mut self, st: &mut State<'m>, inst: Val<'m>) -> Result<Flow<'m>, String> {
        let from = inst
            .parent_block()
            .ok_or("internal: branch outside a block")?;
        if inst.num_successors() == 1 {
            return Ok(Flow::Branch {
                from,
                targets: vec![(sym::tru(), inst.successor(0))],
            });
        }
        let c = match self.operand(st, inst, 0)? {
            Value::Bool(c) => c,
            Value::Poison => return Ok(Flow::End),
            other => return Err(format!("internal: branch on {other:?}")),
        };
        Ok(Flow::Branch {
            from,
            targets: vec![
                (c.clone(), inst.successor(0)),
                (sym::not(c), inst.successor(1)),
            ],
        })
    }

    fn switch(&mut self, st: &mut State<'m>, inst: Val<'m>) -> Result<Flow<'m>, String> {
        let from = inst
            .parent_block()
            .ok_or("internal: switch outside a block")?;
        let x = match self.operand(st, inst, 0)? {
            Value::Int { e, .. } => e,
            Value::Bool(b) => sym::ite(b, sym::int_i(-1), sym::int_i(0)),
            Value::Poison => return Ok(Flow::End),
            other => return Err(format!("internal: switch on {other:?}")),
        };
        // Operands: condition, default block, then (case value, block) pairs; successor 0 is the default.
        let mut by_block: Vec<(Block<'m>, Vec<Expr>)> = Vec::new();
        let mut all_cases = Vec::new();
        for k in 1..inst.num_successors() {
            let case = inst
                .operand(2 * k)
                .ok_or("internal: switch case without value")?;
            let value = match self.constant(st, case)? {
                Value::Int { e, .. } => e,
                Value::Bool(b) => sym::ite(b, sym::int_i(-1), sym::int_i(0)),
                other => return Err(format!("internal: switch case {other:?}")),
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

    fn call(&mut self, st: &mut State<'m>, inst: Val<'m>) -> Result<Flow<'m>, String> {
        let callee = super::calls::classify(inst)?;
        self.at.operation = format!("call {}", callee.name());
        let argc = inst.call_arg_count();
        let result = match callee {
            Callee::Defined(function) => {
                if st.frames.len() >= MAX_INLINE_DEPTH {
                    self.truncated = true;
                    self.cut_short = true;
                    return Ok(Flow::End);
                }
                let params = function.params();
                if params.len() != argc as usize {
                    return Err(format!(
                        "calls `{}` with a different number of arguments",
                        function.name()
                    ));
                }
                let mut env = HashMap::new();
                for (i, p) in params.iter().enumerate() {
                    env.insert(p.id(), self.operand(st, inst, i as u32)?);
                }
                let entry = function
                    .entry_block()
                    .ok_or("internal: inlining a declaration")?;
                st.frames.push(Frame {
                    next: None,
                    env,
                    visits: HashMap::new(),
                    call_site: Some(inst),
                });
                if !self.enter(st, None, entry)? {
                    return Ok(Flow::End);
                }
                return Ok(Flow::Next);
            }
            Callee::Ignored(_) => None,
            Callee::Stop { name } => {
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
                    return Err(format!("`{}` of a non-vector", self.at.operation));
                };
                Some(self.reduce(st, op, start, lanes, inst.allows_reassociation())?)
            }
            Callee::Integer { op, .. } => {
                let a = self.operand(st, inst, 0)?;
                let b = match op {
                    super::calls::IntegerCall::MinMax { .. } => self.operand(st, inst, 1)?,
                    // abs(x) = x < 0 ? 0 - x : x (wrapping, so abs(INT_MIN) = INT_MIN as LLVM defines it).
                    super::calls::IntegerCall::Abs => a.clone(),
                };
                Some(self.lanes2(st, a, b, &mut |_, _, a, b| integer_call(op, a, b))?)
            }
            Callee::Math { func, .. } => {
                let mut args = Vec::with_capacity(argc as usize);
                for i in 0..argc {
                    args.push(self.operand(st, inst, i)?);
                }
                Some(self.math_call(st, func, args, inst.ty())?)
            }
        };
        if let Some(v) = result {
            st.frames
                .last_mut()
                .ok_or("internal: no frame")?
                .env
                .insert(inst.id(), v);
        }
        Ok(Flow::Next)
    }

    fn memory_intrinsic(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        kind: super::calls::MemoryOp,
    ) -> Result<(), String> {
        let dst = self.pointer_operand(st, inst, 0)?;
        let len = match self.operand(st, inst, 2)? {
            Value::Int { e, .. } => {
                sym::const_i64(&e).ok_or("copies or sets a symbolic number of bytes")?
            }
            _ => return Err("copies or sets a symbolic number of bytes".into()),
        };
        let len = u64::try_from(len).map_err(|_| "sets a negative number of bytes".to_string())?;
        match kind {
            super::calls::MemoryOp::Set => {
                let byte = match self.operand(st, inst, 1)? {
                    Value::Int { e, .. } => sym::const_i64(&e),
                    _ => None,
                };
                if byte != Some(0) {
                    return Err("fills memory with a non-zero byte (memset)".into());
                }
                st.memory.zero(dst, len)
            }
            super::calls::MemoryOp::Copy => {
                let src = self.pointer_operand(st, inst, 1)?;
                if src.region == dst.region && (src.offset - dst.offset).unsigned_abs() < len {
                    return Err("copies between overlapping memory".into());
                }
                st.memory.copy(dst, src, len)
            }
        }
    }

    fn is_null_operand(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        i: u32,
    ) -> Result<bool, String> {
        Ok(matches!(self.operand(st, inst, i)?, Value::Ptr(p) if p.is_null()))
    }

    fn pointer_operand(
        &mut self,
        st: &mut State<'m>,
        inst: Val<'m>,
        i: u32,
    ) -> Result<Pointer, String> {
        match self.operand(st, inst, i)? {
            Value::Ptr(p) if !p.is_null() => Ok(p),
            Value::Ptr(_) => Err("dereferences a null pointer".into()),
            Value::Poison => Err("dereferences an undefined pointer".into()),
            other => Err(format!("internal: pointer operand is {other:?}")),
        }
    }

    /// Address arithmetic of a GEP instruction or constant expression with concrete indices.
    fn gep(&mut self, st: &mut State<'m>, inst: Val<'m>) -> Result<Pointer, String> {
        let base = match self.operand(st, inst, 0)? {
            Value::Ptr(p) => p,
            Value::Poison => return Err("indexes an undefined pointer".into()),
            other => return Err(format!("indexes a vector of pointers ({other:?})")),
        };
        let mut ty = inst.gep_source_type();
        let mut offset = base.offset as i128;
        for k in 1..inst.num_operands() {
            let index = match self.operand(st, inst, k)? {
                Value::Int { e, .. } => sym::const_i64(&e).ok_or(SYMBOLIC_INDEX)?,
                Value::Bool(b) => match b.as_bool() {
                    Some(b) => -(b as i64),
                    None => return Err(SYMBOLIC_INDEX.into()),
                },
                _ => return Err("indexes memory with a vector or undefined index".into()),
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
                        .ok_or("internal: struct index out of range")?;
                    offset += self.layout.field_offset(ty, index as u32) as i128;
                    ty = *field;
                }
                LLVMTypeKind::LLVMArrayTypeKind | LLVMTypeKind::LLVMVectorTypeKind => {
                    ty = ty.element();
                    offset += index * self.layout.size(ty) as i128;
                }
                _ => return Err(format!("indexes into the scalar type `{}`", ty.text())),
            }
        }
        let offset = i64::try_from(offset)
            .map_err(|_| "computes an address far out of range".to_string())?;
        Ok(Pointer {
            region: base.region,
            offset,
        })
    }

    // -----------------------------------------------------------------------------------------------------
    // Floating-point operations and their exception conditions
    // -----------------------------------------------------------------------------------------------------

    /// Records the queries for `kinds` at `site` under the current path condition.
    pub(super) fn emit(&mut self, st: &State<'m>, kinds: &[ExceptionKind], site: &Site) {
        for &kind in kinds {
            let condition = sym::exception(kind, site.clone());
            let formula = if condition.is_false() {
                condition
            } else {
                sym::and(st.pc.iter().cloned().chain([condition]))
            };
            self.queries.push(Query {
                build: self.build,
                kind,
                operation: self.at.operation.clone(),
                loc: self.at.loc,
                instruction: self.at.instruction,
                formula,
            });
        }
    }

    pub(super) fn fp_arith(
        &mut self,
        st: &mut State<'m>,
        op: ArithOp,
        a: Value,
        b: Value,
    ) -> Result<Value, String> {
        let ((x, fmt), (y, _)) = match (real_parts(&a), real_parts(&b)) {
            (Some(x), Some(y)) => (x, y),
            _ if is_poison(&a) || is_poison(&b) => return Ok(Value::Poison),
            _ => return Err(format!("internal: FP arithmetic on {a:?} and {b:?}")),
        };
        let site = Site {
            op: SiteOp::Arith(op),
            fmt,
            args: vec![x.clone(), y.clone()],
        };
        use ExceptionKind::*;
        if op == ArithOp::Div {
            self.emit(st, &[Invalid, DivideByZero, Overflow, Underflow], &site);
        } else {
            self.emit(st, &[Overflow, Underflow], &site);
        }
        let r = sym::arith(op, fmt, x, y.clone());
        if op == ArithOp::Div {
            st.assume(sym::ne(y, sym::real_i(0)));
        }
        Ok(Value::Real { e: r, fmt })
    }

    fn fp_rem(&mut self, st: &mut State<'m>, a: Value, b: Value) -> Result<Value, String> {
        let ((x, fmt), (y, _)) = match (real_parts(&a), real_parts(&b)) {
            (Some(x), Some(y)) => (x, y),
            _ => return Ok(Value::Poison),
        };
        self.math_value(st, sym::MathFn::Fmod, fmt, vec![x, y])
    }

    fn fp_to_int(
        &mut self,
        st: &mut State<'m>,
        a: Value,
        bits: u32,
        signed: bool,
    ) -> Result<Value, String> {
        let Some((x, fmt)) = real_parts(&a) else {
            return Ok(Value::Poison);
        };
        let site = Site {
            op: SiteOp::FpToInt { bits, signed },
            fmt,
            args: vec![x.clone()],
        };
        self.emit(st, &[ExceptionKind::Invalid], &site);
        let e = sym::fp_to_int(bits, signed, x);
        Ok(if bits == 1 {
            Value::Bool(sym::ne(e, sym::int_i(0)))
        } else {
            Value::Int { e, bits }
        })
    }

    fn fp_convert(
        &mut self,
        st: &mut State<'m>,
        a: Value,
        to: FloatFormat,
    ) -> Result<Value, String> {
        let Some((x, from)) = real_parts(&a) else {
            return Ok(Value::Poison);
        };
        if from == FloatFormat::Double && to == FloatFormat::Single {
            let site = Site {
                op: SiteOp::Narrow,
                fmt: to,
                args: vec![x.clone()],
            };
            self.emit(
                st,
                &[ExceptionKind::Overflow, ExceptionKind::Underflow],
                &site,
            );
        }
        Ok(Value::Real {
            e: sym::convert(to, x),
            fmt: to,
        })
    }

    /// `llvm.vector.reduce.fadd/fmul` as the code generator expands it: in lane order from `start` without
    /// `reassoc`; with it, halving the vector pairwise (lane i with lane i + n/2) and then `start op result`, where
    /// a `start` of the operation's identity (-0.0, 1.0) is dropped.
    fn reduce(
        &mut self,
        st: &mut State<'m>,
        op: ArithOp,
        start: Value,
        mut lanes: Vec<Value>,
        reassociate: bool,
    ) -> Result<Value, String> {
        if !reassociate || !lanes.len().is_power_of_two() {
            let mut acc = start;
            for lane in lanes {
                acc = self.fp_arith(st, op, acc, lane)?;
            }
            return Ok(acc);
        }
        while lanes.len() > 1 {
            let upper = lanes.split_off(lanes.len() / 2);
            lanes = lanes
                .into_iter()
                .zip(upper)
                .map(|(a, b)| self.fp_arith(st, op, a, b))
                .collect::<Result<_, _>>()?;
        }
        let folded = lanes.pop().ok_or("internal: reducing an empty vector")?;
        let identity = match op {
            ArithOp::Mul => sym::real_i(1),
            _ => sym::real_i(0),
        };
        match &start {
            Value::Real { e, .. } if *e == identity => Ok(folded),
            _ => self.fp_arith(st, op, start, folded),
        }
    }

    /// Applies `f` lane by lane to two vectors, or once to two scalars.
    pub(super) fn lanes2(
        &mut self,
        st: &mut State<'m>,
        a: Value,
        b: Value,
        f: &mut LaneFn2<'_, 'm>,
    ) -> Result<Value, String> {
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

    pub(super) fn lanes1(
        &mut self,
        st: &mut State<'m>,
        a: Value,
        f: &mut LaneFn1<'_, 'm>,
    ) -> Result<Value, String> {
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

impl<'m> State<'m> {
    /// The function the innermost inlined call (if any) executes.
    fn callee_name(&self) -> Option<String> {
        let site = self.frames.last()?.call_site?;
        site.called_value().map(|f| f.name())
    }

    /// Adds an assumption to the path condition (constants are dropped: a constant-false assumption, such as
    /// a division by the constant zero, would make every later query false).
    pub(super) fn assume(&mut self, c: Expr) {
        if !c.is_const() {
            self.pc.push(c);
        }
    }
}

/// The parts of a real value.
pub(super) fn real_parts(v: &Value) -> Option<(Expr, FloatFormat)> {
    match v {
        Value::Real { e, fmt } => Some((e.clone(), *fmt)),
        _ => None,
    }
}

fn is_poison(v: &Value) -> bool {
    matches!(v, Value::Poison)
}

/// The float format of a scalar or vector type.
pub(super) fn fp_format(ty: Ty<'_>) -> Option<FloatFormat> {
    match ty.kind() {
        LLVMTypeKind::LLVMDoubleTypeKind => Some(FloatFormat::Double),
        LLVMTypeKind::LLVMFloatTypeKind => Some(FloatFormat::Single),
        LLVMTypeKind::LLVMVectorTypeKind => fp_format(ty.element()),
        _ => None,
    }
}

/// The width of an integer (or integer vector) type.
fn scalar_bits(ty: Ty<'_>) -> Result<u32, String> {
    let t = if ty.kind() == LLVMTypeKind::LLVMVectorTypeKind {
        ty.element()
    } else {
        ty
    };
    match Scalar::of(t)? {
        Scalar::Int(bits) => Ok(bits),
        _ => Err(format!(
            "internal: expected an integer type, found `{}`",
            ty.text()
        )),
    }
}

fn map1(a: Value, f: &mut dyn FnMut(Value) -> Result<Value, String>) -> Result<Value, String> {
    match a {
        Value::Lanes(xs) => Ok(Value::Lanes(
            xs.into_iter().map(&mut *f).collect::<Result<_, _>>()?,
        )),
        Value::Poison => Ok(Value::Poison),
        x => f(x),
    }
}

fn const_index(v: &Value) -> Result<usize, String> {
    match v {
        Value::Int { e, .. } => sym::const_i64(e).and_then(|i| usize::try_from(i).ok()),
        _ => None,
    }
    .ok_or_else(|| "selects a vector lane with a symbolic index".to_string())
}

fn fcmp(pred: LLVMRealPredicate, a: Value, b: Value) -> Result<Value, String> {
    use LLVMRealPredicate::*;
    let (Some((x, _)), Some((y, _))) = (real_parts(&a), real_parts(&b)) else {
        return Ok(Value::Poison);
    };
    // Values are finite reals: ordered and unordered predicates agree, `uno` never holds.
    let c = match pred {
        LLVMRealPredicateFalse | LLVMRealUNO => sym::fals(),
        LLVMRealPredicateTrue | LLVMRealORD => sym::tru(),
        LLVMRealOEQ | LLVMRealUEQ => sym::eq(x, y),
        LLVMRealONE | LLVMRealUNE => sym::ne(x, y),
        LLVMRealOGT | LLVMRealUGT => sym::gt(x, y),
        LLVMRealOGE | LLVMRealUGE => sym::ge(x, y),
        LLVMRealOLT | LLVMRealULT => sym::lt(x, y),
        LLVMRealOLE | LLVMRealULE => sym::le(x, y),
    };
    Ok(Value::Bool(c))
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

/// The operand (0 or 1) of an `fcmp` that is an infinite or NaN constant, and its value.
fn non_finite_operand(inst: Val<'_>) -> Option<(u32, f64)> {
    (0..2).find_map(|i| {
        let v = inst.operand(i)?;
        (v.is_constant_fp() && !v.const_fp().is_finite()).then(|| (i, v.const_fp()))
    })
}

/// `fcmp` of a finite value `x` with the infinity or NaN `c` (operand `side`): a constant, since NaN is unordered
/// with everything and every finite value lies strictly between −∞ and +∞.
fn fcmp_non_finite(pred: LLVMRealPredicate, x: Value, side: u32, c: f64) -> Result<Value, String> {
    use LLVMRealPredicate::*;
    if matches!(x, Value::Poison) {
        return Ok(Value::Poison);
    }
    let holds = if c.is_nan() {
        matches!(
            pred,
            LLVMRealPredicateTrue
                | LLVMRealUNO
                | LLVMRealUEQ
                | LLVMRealUNE
                | LLVMRealUGT
                | LLVMRealUGE
                | LLVMRealULT
                | LLVMRealULE
        )
    } else {
        // Whether the left operand is the smaller one.
        let left_smaller = (side == 1) == (c > 0.0);
        match pred {
            LLVMRealPredicateFalse | LLVMRealUNO | LLVMRealOEQ | LLVMRealUEQ => false,
            LLVMRealPredicateTrue | LLVMRealORD | LLVMRealONE | LLVMRealUNE => true,
            LLVMRealOLT | LLVMRealULT | LLVMRealOLE | LLVMRealULE => left_smaller,
            LLVMRealOGT | LLVMRealUGT | LLVMRealOGE | LLVMRealUGE => !left_smaller,
        }
    };
    Ok(Value::Bool(sym::boolean(holds)))
}

/// An integer operand in signed form with its width (`i1` as 0/−1).
fn int_parts(v: &Value) -> Option<(Expr, u32)> {
    match v {
        Value::Int { e, bits } => Some((e.clone(), *bits)),
        Value::Bool(b) => Some((sym::ite(b.clone(), sym::int_i(-1), sym::int_i(0)), 1)),
        _ => None,
    }
}

/// `llvm.smin/smax/umin/umax(a, b)` and `llvm.abs(a)` (`b` is `a` again) as a comparison and a choice.
fn integer_call(op: super::calls::IntegerCall, a: Value, b: Value) -> Result<Value, String> {
    use super::calls::IntegerCall;
    use LLVMIntPredicate::*;
    match op {
        IntegerCall::MinMax { signed, min } => {
            let pred = match (signed, min) {
                (true, true) => LLVMIntSLT,
                (true, false) => LLVMIntSGT,
                (false, true) => LLVMIntULT,
                (false, false) => LLVMIntUGT,
            };
            select(icmp(pred, a.clone(), b.clone())?, a, b)
        }
        IntegerCall::Abs => {
            let Some((_, bits)) = int_parts(&a) else {
                return Ok(Value::Poison);
            };
            let zero = Value::Int {
                e: sym::int_i(0),
                bits,
            };
            let negated = int_binary(LLVMOpcode::LLVMSub, zero.clone(), a.clone())?;
            select(icmp(LLVMIntSLT, a.clone(), zero)?, negated, b)
        }
    }
}

fn icmp(pred: LLVMIntPredicate, a: Value, b: Value) -> Result<Value, String> {
    use LLVMIntPredicate::*;
    if let (Value::Ptr(p), Value::Ptr(q)) = (&a, &b) {
        let same = p.region == q.region;
        let c = match pred {
            LLVMIntEQ => same && p.offset == q.offset,
            LLVMIntNE => !(same && p.offset == q.offset),
            _ if !same => return Err("compares pointers into different objects".into()),
            LLVMIntULT | LLVMIntSLT => p.offset < q.offset,
            LLVMIntULE | LLVMIntSLE => p.offset <= q.offset,
            LLVMIntUGT | LLVMIntSGT => p.offset > q.offset,
            LLVMIntUGE | LLVMIntSGE => p.offset >= q.offset,
        };
        return Ok(Value::Bool(sym::boolean(c)));
    }
    let (Some((x, bits)), Some((y, _))) = (int_parts(&a), int_parts(&b)) else {
        return Ok(Value::Poison);
    };
    let u = |e: Expr| sym::unsigned(bits, e);
    let c = match pred {
        LLVMIntEQ => sym::eq(x, y),
        LLVMIntNE => sym::ne(x, y),
        LLVMIntSLT => sym::lt(x, y),
        LLVMIntSLE => sym::le(x, y),
        LLVMIntSGT => sym::gt(x, y),
        LLVMIntSGE => sym::ge(x, y),
        LLVMIntULT => sym::lt(u(x), u(y)),
        LLVMIntULE => sym::le(u(x), u(y)),
        LLVMIntUGT => sym::gt(u(x), u(y)),
        LLVMIntUGE => sym::ge(u(x), u(y)),
    };
    Ok(Value::Bool(c))
}

/// Integer arithmetic and bitwise operations: exact over constants, modelled or opaque otherwise.
fn int_binary(opcode: LLVMOpcode, a: Value, b: Value) -> Result<Value, String> {
    use LLVMOpcode::*;
    if let (Value::Bool(x), Value::Bool(y)) = (&a, &b) {
        let (x, y) = (x.clone(), y.clone());
        return Ok(Value::Bool(match opcode {
            LLVMAnd | LLVMMul => sym::and([x, y]),
            LLVMOr => sym::or([x, y]),
            LLVMXor | LLVMAdd | LLVMSub => sym::ne(
                sym::ite(x, sym::int_i(1), sym::int_i(0)),
                sym::ite(y, sym::int_i(1), sym::int_i(0)),
            ),
            _ => {
                return match (x.as_bool(), y.as_bool()) {
                    (Some(_), Some(_)) => {
                        int_binary(opcode, bool_as_int(&x), bool_as_int(&y)).map(|v| match v {
                            Value::Int { e, .. } => Value::Bool(sym::ne(e, sym::int_i(0))),
                            other => other,
                        })
                    }
                    _ => Ok(Value::Bool(sym::ne(
                        sym::opaque(opcode_name(opcode), 1, vec![bool_int(&x), bool_int(&y)]),
                        sym::int_i(0),
                    ))),
                }
            }
        }));
    }
    let (Value::Int { e: x, bits }, Value::Int { e: y, .. }) = (&a, &b) else {
        if is_poison(&a) || is_poison(&b) {
            return Ok(Value::Poison);
        }
        return Err(format!("internal: integer operation on {a:?} and {b:?}"));
    };
    let bits = *bits;
    let (x, y) = (x.clone(), y.clone());
    if let (Some(p), Some(q)) = (x.as_int(), y.as_int()) {
        return Ok(match const_int_op(opcode, p, q, bits) {
            Some(r) => Value::Int {
                e: sym::int(sym::wrap_signed(&r, bits)),
                bits,
            },
            None => Value::Poison,
        });
    }
    let e = match opcode {
        LLVMAdd => sym::int_arith(IntOp::Add, bits, x, y),
        LLVMSub => sym::int_arith(IntOp::Sub, bits, x, y),
        LLVMMul => sym::int_arith(IntOp::Mul, bits, x, y),
        LLVMShl => match y.as_int().and_then(|k| k.to_u32()).filter(|k| *k < bits) {
            Some(k) => sym::int_arith(IntOp::Mul, bits, x, sym::int(BigInt::one() << k as usize)),
            None => sym::opaque("shl", bits, vec![x, y]),
        },
        LLVMAnd => match (x.as_int(), y.as_int()) {
            (_, Some(m)) => sym::and_mask(bits, x.clone(), m),
            (Some(m), _) => sym::and_mask(bits, y.clone(), m),
            _ => None,
        }
        .unwrap_or_else(|| sym::opaque("and", bits, vec![x, y])),
        _ => sym::opaque(opcode_name(opcode), bits, vec![x, y]),
    };
    Ok(Value::Int { e, bits })
}

fn bool_int(b: &Expr) -> Expr {
    sym::ite(b.clone(), sym::int_i(-1), sym::int_i(0))
}

fn bool_as_int(b: &Expr) -> Value {
    Value::Int {
        e: bool_int(b),
        bits: 1,
    }
}

/// An integer operation over constants (signed form in, unwrapped result out); `None` is poison.
fn const_int_op(opcode: LLVMOpcode, p: &BigInt, q: &BigInt, bits: u32) -> Option<BigInt> {
    use LLVMOpcode::*;
    let up = sym::to_unsigned_value(p, bits);
    let uq = sym::to_unsigned_value(q, bits);
    let shift = || uq.to_u32().filter(|k| *k < bits);
    Some(match opcode {
        LLVMAdd => p + q,
        LLVMSub => p - q,
        LLVMMul => p * q,
        LLVMSDiv if !q.is_zero() => p / q,
        LLVMSRem if !q.is_zero() => p % q,
        LLVMUDiv if !uq.is_zero() => &up / &uq,
        LLVMURem if !uq.is_zero() => &up % &uq,
        LLVMShl => up << shift()? as usize,
        LLVMLShr => up >> shift()? as usize,
        LLVMAShr => {
            let k = shift()?;
            // Floor division by 2^k is an arithmetic shift.
            let d = BigInt::one() << k as usize;
            let (q, r) = (p / &d, p % &d);
            if r.is_negative() {
                q - 1
            } else {
                q
            }
        }
        LLVMAnd => up & uq,
        LLVMOr => up | uq,
        LLVMXor => up ^ uq,
        _ => return None,
    })
}

fn int_cast(opcode: LLVMOpcode, a: Value, to: u32) -> Result<Value, String> {
    use LLVMOpcode::*;
    let as_value = |e: Expr| {
        if to == 1 {
            Value::Bool(sym::ne(e, sym::int_i(0)))
        } else {
            Value::Int { e, bits: to }
        }
    };
    match (opcode, a) {
        (LLVMZExt, Value::Bool(b)) => Ok(Value::Int {
            e: sym::ite(b, sym::int_i(1), sym::int_i(0)),
            bits: to,
        }),
        (LLVMSExt, Value::Bool(b)) => Ok(Value::Int {
            e: bool_int(&b),
            bits: to,
        }),
        (LLVMZExt, Value::Int { e, bits }) => Ok(Value::Int {
            e: sym::unsigned(bits, e),
            bits: to,
        }),
        (LLVMSExt, Value::Int { e, .. }) => Ok(Value::Int { e, bits: to }),
        (LLVMTrunc, Value::Int { e, .. }) => Ok(match e.as_int() {
            Some(v) => as_value(sym::int(sym::wrap_signed(v, to))),
            None => as_value(sym::opaque("trunc", to, vec![e])),
        }),
        (LLVMTrunc, Value::Bool(b)) => Ok(Value::Bool(b)),
        (_, Value::Poison) => Ok(Value::Poison),
        (_, other) => Err(format!("internal: integer cast of {other:?}")),
    }
}

/// A bitcast between a float and an integer of the same width: exact for constants; a symbolic float read as
/// bits is an unconstrained integer, a symbolic integer read as a float cannot be modelled.
fn bitcast(a: Value, to: Ty<'_>) -> Result<Value, String> {
    let to_scalar = if to.kind() == LLVMTypeKind::LLVMVectorTypeKind {
        to.element()
    } else {
        to
    };
    let unsupported = || format!("reinterprets bits as `{}` (bitcast)", to.text());
    match (a, Scalar::of(to_scalar).map_err(|_| unsupported())?) {
        (Value::Real { e, fmt }, Scalar::Int(bits))
            if bits == if fmt == FloatFormat::Double { 64 } else { 32 } =>
        {
            let value = match e.as_real() {
                Some(q) if fmt == FloatFormat::Double => {
                    sym::int_i(sym::const_f64(q).to_bits() as i64)
                }
                Some(q) => sym::int_i((sym::const_f64(q) as f32).to_bits() as i32 as i64),
                None => sym::opaque("bitcast", bits, vec![e]),
            };
            Ok(Value::Int { e: value, bits })
        }
        (Value::Int { e, bits }, Scalar::Float(fmt))
            if bits == if fmt == FloatFormat::Double { 64 } else { 32 } =>
        {
            let v = match (sym::const_i64(&e), fmt) {
                (Some(b), FloatFormat::Double) => f64::from_bits(b as u64),
                (Some(b), FloatFormat::Single) => f32::from_bits(b as u32) as f64,
                (None, _) => return Err(path_stop("computed bits read as a floating-point value")),
            };
            if !v.is_finite() {
                return Err(path_stop("an infinity or NaN built from its bits"));
            }
            Ok(Value::Real {
                e: sym::real_f64(v),
                fmt,
            })
        }
        (Value::Poison, _) => Ok(Value::Poison),
        _ => Err(unsupported()),
    }
}

fn int_to_fp(a: Value, fmt: FloatFormat, signed: bool) -> Result<Value, String> {
    let e = match a {
        Value::Bool(b) => sym::ite(b, sym::int_i(if signed { -1 } else { 1 }), sym::int_i(0)),
        Value::Int { e, bits } => {
            if signed {
                e
            } else {
                sym::unsigned(bits, e)
            }
        }
        Value::Poison => return Ok(Value::Poison),
        other => return Err(format!("internal: int-to-float of {other:?}")),
    };
    Ok(Value::Real {
        e: sym::convert(fmt, e),
        fmt,
    })
}

fn select(c: Value, a: Value, b: Value) -> Result<Value, String> {
    match (c, a, b) {
        (Value::Lanes(cs), Value::Lanes(xs), Value::Lanes(ys)) => Ok(Value::Lanes(
            cs.into_iter()
                .zip(xs)
                .zip(ys)
                .map(|((c, x), y)| select(c, x, y))
                .collect::<Result<_, _>>()?,
        )),
        (Value::Bool(c), a, b) => match c.as_bool() {
            Some(true) => Ok(a),
            Some(false) => Ok(b),
            None => merge(&c, a, b),
        },
        (Value::Poison, _, _) => Ok(Value::Poison),
        (c, _, _) => Err(format!("internal: select on {c:?}")),
    }
}

/// `if c then a else b` of two values of the same type.
fn merge(c: &Expr, a: Value, b: Value) -> Result<Value, String> {
    Ok(match (a, b) {
        (Value::Real { e: x, fmt }, Value::Real { e: y, .. }) => Value::Real {
            e: sym::ite(c.clone(), x, y),
            fmt,
        },
        (Value::Int { e: x, bits }, Value::Int { e: y, .. }) => Value::Int {
            e: sym::ite(c.clone(), x, y),
            bits,
        },
        (Value::Bool(x), Value::Bool(y)) => Value::Bool(sym::ite(c.clone(), x, y)),
        (Value::Ptr(p), Value::Ptr(q)) if p == q => Value::Ptr(p),
        (Value::Ptr(_), Value::Ptr(_)) => {
            return Err("selects between pointers on a symbolic condition".into())
        }
        (Value::Lanes(xs), Value::Lanes(ys)) => Value::Lanes(
            xs.into_iter()
                .zip(ys)
                .map(|(x, y)| merge(c, x, y))
                .collect::<Result<_, _>>()?,
        ),
        (Value::Fields(xs), Value::Fields(ys)) => Value::Fields(
            xs.into_iter()
                .zip(ys)
                .map(|(x, y)| merge(c, x, y))
                .collect::<Result<_, _>>()?,
        ),
        // Choosing poison on one side: the program's value is the other one whenever it is defined.
        (Value::Poison, other) | (other, Value::Poison) => other,
        (x, y) => return Err(format!("internal: select between {x:?} and {y:?}")),
    })
}

/// `insertvalue agg, x, indices`, materialising an undefined aggregate from its type.
fn insert_value(
    agg: Value,
    ty: Ty<'_>,
    indices: &[u32],
    x: Value,
    layout: Layout<'_>,
) -> Result<Value, String> {
    let Some((&first, rest)) = indices.split_first() else {
        return Ok(x);
    };
    let mut fields = match agg {
        Value::Fields(f) => f,
        _ => {
            let n = flatten_type(ty, layout)?.len();
            match unflatten(ty, &mut vec![Value::Poison; n].into_iter())? {
                Value::Fields(f) => f,
                _ => return Err("internal: insertvalue into a non-aggregate".into()),
            }
        }
    };
    let field_ty = match ty.kind() {
        LLVMTypeKind::LLVMStructTypeKind => *ty
            .struct_fields()
            .get(first as usize)
            .ok_or("internal: bad field")?,
        _ => ty.element(),
    };
    let slot = fields
        .get_mut(first as usize)
        .ok_or("internal: insertvalue index out of range")?;
    *slot = insert_value(
        std::mem::replace(slot, Value::Poison),
        field_ty,
        rest,
        x,
        layout,
    )?;
    Ok(Value::Fields(fields))
}

/// The exact `fmod` of two constants (the result of fmod is always exact).
pub(super) fn const_fmod(x: &BigRational, y: &BigRational) -> Option<BigRational> {
    if y.is_zero() {
        return None;
    }
    let q = (x / y).trunc();
    Some(x - q * y)
}

pub(super) fn opcode_name(op: LLVMOpcode) -> &'static str {
    use LLVMOpcode::*;
    match op {
        LLVMRet => "ret",
        LLVMBr => "br",
        LLVMSwitch => "switch",
        LLVMIndirectBr => "indirectbr",
        LLVMInvoke => "invoke",
        LLVMUnreachable => "unreachable",
        LLVMCallBr => "callbr",
        LLVMFNeg => "fneg",
        LLVMAdd => "add",
        LLVMFAdd => "fadd",
        LLVMSub => "sub",
        LLVMFSub => "fsub",
        LLVMMul => "mul",
        LLVMFMul => "fmul",
        LLVMUDiv => "udiv",
        LLVMSDiv => "sdiv",
        LLVMFDiv => "fdiv",
        LLVMURem => "urem",
        LLVMSRem => "srem",
        LLVMFRem => "frem",
        LLVMShl => "shl",
        LLVMLShr => "lshr",
        LLVMAShr => "ashr",
        LLVMAnd => "and",
        LLVMOr => "or",
        LLVMXor => "xor",
        LLVMAlloca => "alloca",
        LLVMLoad => "load",
        LLVMStore => "store",
        LLVMGetElementPtr => "getelementptr",
        LLVMTrunc => "trunc",
        LLVMZExt => "zext",
        LLVMSExt => "sext",
        LLVMFPToUI => "fptoui",
        LLVMFPToSI => "fptosi",
        LLVMUIToFP => "uitofp",
        LLVMSIToFP => "sitofp",
        LLVMFPTrunc => "fptrunc",
        LLVMFPExt => "fpext",
        LLVMPtrToInt => "ptrtoint",
        LLVMIntToPtr => "inttoptr",
        LLVMBitCast => "bitcast",
        LLVMAddrSpaceCast => "addrspacecast",
        LLVMICmp => "icmp",
        LLVMFCmp => "fcmp",
        LLVMPHI => "phi",
        LLVMCall => "call",
        LLVMSelect => "select",
        LLVMUserOp1 | LLVMUserOp2 => "user-op",
        LLVMVAArg => "va_arg",
        LLVMExtractElement => "extractelement",
        LLVMInsertElement => "insertelement",
        LLVMShuffleVector => "shufflevector",
        LLVMExtractValue => "extractvalue",
        LLVMInsertValue => "insertvalue",
        LLVMFreeze => "freeze",
        LLVMFence => "fence",
        LLVMAtomicCmpXchg => "cmpxchg",
        LLVMAtomicRMW => "atomicrmw",
        LLVMResume => "resume",
        LLVMLandingPad => "landingpad",
        LLVMCleanupRet => "cleanupret",
        LLVMCatchRet => "catchret",
        LLVMCatchPad => "catchpad",
        LLVMCleanupPad => "cleanuppad",
        LLVMCatchSwitch => "catchswitch",
    }
}
