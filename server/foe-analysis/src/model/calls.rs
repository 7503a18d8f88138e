//! Calls: which callees the model understands (functions of the module, libm and LLVM intrinsics,
//! memory intrinsics, the modelled C library functions, constrained intrinsics read as their plain
//! counterparts: [`constrained`]), classified without the executor. Executing them is `exec/library.rs`;
//! Ariadne's rules for elementary functions (Figure 3.3 of the thesis) are applied in `exec/fp_ops.rs`.

use super::error::ModelError;
use super::llvm::{LLVMIntPredicate, LLVMOpcode, LLVMRealPredicate, LLVMTypeKind, Val};
use super::memory::Value;
use super::values::{icmp, int_binary, int_parts, opcode_name, select};
use crate::sym::{self, ArithOp, Integral, MathFn};
use num_bigint::BigInt;
use num_traits::ToPrimitive;

/// What a call instruction calls.
pub(super) enum Callee<'m> {
    /// A function defined in the module: inlined.
    Defined(Val<'m>),
    /// A call through a function pointer: the function whose address it holds, when the path knows it.
    Indirect,
    /// Debug, lifetime and assumption intrinsics: no effect on values.
    Ignored(String),
    /// A constrained intrinsic that stands for an FP instruction (`llvm.experimental.constrained.fadd` for
    /// `fadd`; `fcmp` with the predicate its metadata names).
    Instruction {
        name: String,
        opcode: LLVMOpcode,
        predicate: Option<LLVMRealPredicate>,
    },
    Memory {
        name: String,
        kind: MemoryOp,
    },
    Math {
        name: String,
        func: MathCall,
    },
    /// `llvm.vector.reduce.fadd/fmul(start, vector)`.
    Reduce {
        name: String,
        op: ArithOp,
    },
    /// `llvm.smin/smax/umin/umax` and `llvm.abs` on integers.
    Integer {
        name: String,
        op: IntegerCall,
    },
    /// An x86 SSE/SSE2 intrinsic clang leaves as a call (`llvm.x86.sse.max.ps`, `llvm.x86.sse.rsqrt.ps`).
    Sse {
        name: String,
        op: SseCall,
    },
    /// C library functions of the numeric programmer that the model knows (`ldexp`, `frexp`, `modf`,
    /// `nextafter`, the classification functions); they run natively in the worker.
    Libc {
        name: String,
        func: LibcCall,
    },
    /// A function foe does not run: no definition in the module, not libm nor a modelled C library function
    /// (typically an error reporter such as `gsl_error`, I/O, allocation, `exit`). The path ends at the call;
    /// the worker replaces the call by a stop (see [`runs_natively`]).
    Stop {
        name: String,
    },
}

/// C library functions with a model of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LibcCall {
    /// `ldexp`, `scalbn`, `scalbln`: x·2ⁿ, rounded once.
    Scale,
    /// `frexp(x, &e)`: the mantissa in [0.5, 1) and the exponent.
    Frexp,
    /// `modf(x, &ip)`: the fractional part, the integral part stored.
    Modf,
    /// `nextafter(x, y)`: the neighbour of x towards y.
    NextAfter,
    /// `isnan`, `isinf`, `finite`/`isfinite`, `signbit`, `fpclassify` as functions (`__isnan`, `__fpclassify`).
    Classify(Class),
}

/// What a classification function answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    IsNan,
    IsInf,
    IsFinite,
    SignBit,
    /// glibc's `FP_ZERO` etc. numbering: NAN 0, INFINITE 1, ZERO 2, SUBNORMAL 3, NORMAL 4.
    Fpclassify,
}

/// The x86 SSE/SSE2 intrinsics the model reads, lane by lane (`exec/sse.rs`). A `scalar` form (`.ss`, `.sd`)
/// computes lane 0 only and passes the first operand's other lanes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SseCall {
    /// `minps`/`maxps`: `a < b ? a : b` and `a > b ? a : b` (the second operand when they are unordered).
    MinMax { min: bool, scalar: bool },
    /// `rsqrtps`: an estimate of 1/√x, read as 1/√x.
    Rsqrt { scalar: bool },
    /// `rcpps`: an estimate of 1/x, read as 1/x.
    Rcp { scalar: bool },
    /// `movmskps`/`movmskpd`: the lanes' sign bits as an integer.
    MoveMask,
}

/// An `llvm.x86.sse.*` or `llvm.x86.sse2.*` intrinsic (`rest` is its name without `llvm.x86.`).
fn sse_call(rest: &str) -> Option<SseCall> {
    let op = rest
        .strip_prefix("sse2.")
        .or_else(|| rest.strip_prefix("sse."))?;
    let (base, form) = op.split_once('.').unwrap_or((op, ""));
    let scalar = matches!(form, "ss" | "sd");
    if !scalar && !matches!(form, "ps" | "pd") {
        return None;
    }
    Some(match base {
        "min" => SseCall::MinMax { min: true, scalar },
        "max" => SseCall::MinMax { min: false, scalar },
        "rsqrt" => SseCall::Rsqrt { scalar },
        "rcp" => SseCall::Rcp { scalar },
        "movmsk" if !scalar => SseCall::MoveMask,
        _ => return None,
    })
}

/// Integer intrinsics: min, max and abs modelled by a comparison and a choice; the bit manipulations (hashes,
/// bit sets) exact on constants and an uninterpreted integer of their operands otherwise.
#[derive(Debug, Clone, Copy)]
pub(super) enum IntegerCall {
    MinMax { signed: bool, min: bool },
    Abs,
    Bits(BitCall),
}

/// `llvm.fshl`/`fshr` (funnel shifts: rotations when both inputs are the same), `llvm.cttz`/`ctlz`,
/// `llvm.ctpop`, `llvm.bswap`, `llvm.bitreverse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BitCall {
    Funnel { left: bool },
    CountZeros { trailing: bool },
    PopCount,
    ByteSwap,
    BitReverse,
}

impl BitCall {
    /// The integer operands the intrinsic takes (`cttz`/`ctlz`'s second, an `i1` flag, is not one).
    pub(super) fn operands(self) -> u32 {
        match self {
            BitCall::Funnel { .. } => 3,
            _ => 1,
        }
    }

    const ALL: [BitCall; 7] = [
        BitCall::Funnel { left: true },
        BitCall::Funnel { left: false },
        BitCall::CountZeros { trailing: true },
        BitCall::CountZeros { trailing: false },
        BitCall::PopCount,
        BitCall::ByteSwap,
        BitCall::BitReverse,
    ];

    /// The bit manipulation an intrinsic's base name (`fshl` of `llvm.fshl.i32`) stands for.
    fn from_name(base: &str) -> Option<BitCall> {
        BitCall::ALL.into_iter().find(|op| op.name() == base)
    }

    fn name(self) -> &'static str {
        match self {
            BitCall::Funnel { left: true } => "fshl",
            BitCall::Funnel { left: false } => "fshr",
            BitCall::CountZeros { trailing: true } => "cttz",
            BitCall::CountZeros { trailing: false } => "ctlz",
            BitCall::PopCount => "ctpop",
            BitCall::ByteSwap => "bswap",
            BitCall::BitReverse => "bitreverse",
        }
    }

    /// The result on constants of `bits` bits (at most 64), each given as its unsigned bits.
    pub(super) fn on_constants(self, args: &[u64], bits: u32) -> u64 {
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let x = args[0] & mask;
        let r = match self {
            BitCall::Funnel { left } => {
                let (a, b) = (x, args[1] & mask);
                let s = (args[2] & mask) % bits as u64;
                match (s, left) {
                    (0, true) => a,
                    (0, false) => b,
                    (s, true) => (a << s) | (b >> (bits as u64 - s)),
                    (s, false) => (a << (bits as u64 - s)) | (b >> s),
                }
            }
            // Of zero: the width (LLVM's result when zero is not poison).
            BitCall::CountZeros { .. } if x == 0 => bits as u64,
            BitCall::CountZeros { trailing: true } => x.trailing_zeros() as u64,
            BitCall::CountZeros { trailing: false } => (x.leading_zeros() - (64 - bits)) as u64,
            BitCall::PopCount => x.count_ones() as u64,
            BitCall::ByteSwap => x.swap_bytes() >> (64 - bits),
            BitCall::BitReverse => x.reverse_bits() >> (64 - bits),
        };
        r & mask
    }
}

/// A [`BitCall`] on `args` (integers of one width): exact when all are constants, else an uninterpreted integer of
/// them (what the solver may choose freely; the runs compute it).
pub(super) fn bit_call(op: BitCall, args: &[Value]) -> Result<Value, ModelError> {
    let mut exprs = Vec::with_capacity(args.len());
    let mut width = None;
    for a in args {
        let Some((e, bits)) = int_parts(a) else {
            return Ok(Value::Poison);
        };
        width.get_or_insert(bits);
        exprs.push(e);
    }
    let Some(bits) = width.filter(|b| (1..=64).contains(b)) else {
        return Err(ModelError::Unsupported(format!(
            "`llvm.{}` on integers wider than 64 bits",
            op.name()
        )));
    };
    let constants: Option<Vec<u64>> = exprs
        .iter()
        .map(|e| {
            e.as_int()
                .and_then(|v| sym::to_unsigned_value(&sym::wrap_signed(v, bits), bits).to_u64())
        })
        .collect();
    let e = match constants {
        Some(c) => sym::int(sym::wrap_signed(
            &BigInt::from(op.on_constants(&c, bits)),
            bits,
        )),
        None => sym::opaque(op.name(), bits, exprs),
    };
    Ok(Value::Int { e, bits })
}

#[derive(Debug, Clone, Copy)]
pub(super) enum MemoryOp {
    Set,
    Copy,
}

/// The elementary operations a libm call or intrinsic performs.
#[derive(Debug, Clone, Copy)]
pub(super) enum MathCall {
    Fn(MathFn),
    Fabs,
    Fma,
    Integral(Integral),
    MinMax {
        min: bool,
    },
    CopySign,
    /// `llvm.powi`: a real to an integer power.
    Powi,
}

impl Callee<'_> {
    pub(super) fn name(&self) -> String {
        match self {
            Callee::Defined(f) => f.name(),
            Callee::Indirect => "a function pointer".into(),
            Callee::Ignored(n)
            | Callee::Instruction { name: n, .. }
            | Callee::Memory { name: n, .. }
            | Callee::Math { name: n, .. }
            | Callee::Reduce { name: n, .. }
            | Callee::Integer { name: n, .. }
            | Callee::Sse { name: n, .. }
            | Callee::Libc { name: n, .. }
            | Callee::Stop { name: n } => n.clone(),
        }
    }
}

/// The function attribute `project::link_units` gives a definition of a C library name (`sqrt`, `exp`, `floor`)
/// linked from the file's own library (Cephes defines them): the builds run it, the model reads a call of it as a
/// call of the C library's function.
pub const REPLACES_C_LIBRARY: &str = "foe-replaces-c-library";

/// Classifies the callee of `call`; an error names what cannot be modelled.
pub(super) fn classify(call: Val<'_>) -> Result<Callee<'_>, ModelError> {
    let called = call
        .called_value()
        .ok_or_else(|| ModelError::internal("call without a callee"))?;
    if called.is_inline_asm() {
        return Err(ModelError::unsupported("uses inline assembly"));
    }
    if !called.is_function() {
        return Ok(Callee::Indirect);
    }
    classify_function(call, called)
}

/// Classifies a call of the function `called` (named by the call, or the one an indirect call's pointer holds).
pub(super) fn classify_function<'m>(
    call: Val<'m>,
    called: Val<'m>,
) -> Result<Callee<'m>, ModelError> {
    let name = called.name();
    match constrained(call) {
        None => {}
        Some(Err(e)) => return Err(e),
        Some(Ok(Plain::Instruction { opcode, predicate })) => {
            return Ok(Callee::Instruction {
                name,
                opcode,
                predicate,
            })
        }
        Some(Ok(Plain::Intrinsic(plain))) => return intrinsic(plain),
    }
    if name.starts_with("llvm.") {
        return intrinsic(name);
    }
    // The file's library's own definition of a C library name is run by the worker but modelled as the
    // function it stands for.
    if called.entry_block().is_some() && !called.has_attribute(REPLACES_C_LIBRARY) {
        return Ok(Callee::Defined(called));
    }
    let base = name
        .strip_suffix('f')
        .filter(|b| libm_call(b).is_some())
        .unwrap_or(&name);
    if let Some(func) = libm_call(base) {
        return Ok(Callee::Math { name, func });
    }
    match libc_call(&name) {
        Some(func) => Ok(Callee::Libc { name, func }),
        None => Ok(Callee::Stop { name }),
    }
}

/// The prefix of LLVM's constrained floating-point intrinsics, which clang emits for operations under
/// `#pragma clang fp exceptions(strict)` (or `float_control(except, on)`, `-ffp-exception-behavior=strict`):
/// each is a plain operation with its rounding mode and exception behaviour as metadata arguments, kept in
/// place by the optimiser.
const CONSTRAINED: &str = "llvm.experimental.constrained.";

/// The rounding mode the model computes in (and the worker runs in): the only one a constrained operation may
/// name.
const NEAREST: &str = "round.tonearest";

/// What a constrained intrinsic is for foe: its plain counterpart, which raises the same exceptions and rounds
/// the same way when the rounding mode is round-to-nearest.
#[derive(Debug, Clone, PartialEq)]
pub enum Plain {
    /// An instruction (`fadd` ... `fptoui`; `fcmp` for both the quiet `fcmp` and the signalling `fcmps`, with
    /// the predicate the metadata names).
    Instruction {
        opcode: LLVMOpcode,
        predicate: Option<LLVMRealPredicate>,
    },
    /// The plain intrinsic of the same name (`llvm.sqrt.f64` for `llvm.experimental.constrained.sqrt.f64`),
    /// classified as that intrinsic is.
    Intrinsic(String),
}

impl Plain {
    /// The instruction as reports name it (`fadd`, `fcmp olt`); None for an intrinsic.
    pub fn instruction_text(&self) -> Option<String> {
        let Plain::Instruction { opcode, predicate } = self else {
            return None;
        };
        let name = opcode_name(*opcode);
        Some(match predicate.and_then(predicate_name) {
            Some(p) => format!("{name} {p}"),
            None => name.to_string(),
        })
    }
}

/// The constrained operations that are instructions, by the name after [`CONSTRAINED`]; every other
/// constrained operation is the plain intrinsic of its name.
fn constrained_instruction(op: &str) -> Option<LLVMOpcode> {
    use LLVMOpcode::*;
    Some(match op {
        "fadd" => LLVMFAdd,
        "fsub" => LLVMFSub,
        "fmul" => LLVMFMul,
        "fdiv" => LLVMFDiv,
        "frem" => LLVMFRem,
        "fptrunc" => LLVMFPTrunc,
        "fpext" => LLVMFPExt,
        "sitofp" => LLVMSIToFP,
        "uitofp" => LLVMUIToFP,
        "fptosi" => LLVMFPToSI,
        "fptoui" => LLVMFPToUI,
        "fcmp" | "fcmps" => LLVMFCmp,
        _ => return None,
    })
}

/// The `fcmp` predicates by name, as constrained comparisons spell them in metadata and reports name them.
const PREDICATES: [(&str, LLVMRealPredicate); 16] = {
    use LLVMRealPredicate::*;
    [
        ("false", LLVMRealPredicateFalse),
        ("true", LLVMRealPredicateTrue),
        ("oeq", LLVMRealOEQ),
        ("ogt", LLVMRealOGT),
        ("oge", LLVMRealOGE),
        ("olt", LLVMRealOLT),
        ("ole", LLVMRealOLE),
        ("one", LLVMRealONE),
        ("ord", LLVMRealORD),
        ("uno", LLVMRealUNO),
        ("ueq", LLVMRealUEQ),
        ("ugt", LLVMRealUGT),
        ("uge", LLVMRealUGE),
        ("ult", LLVMRealULT),
        ("ule", LLVMRealULE),
        ("une", LLVMRealUNE),
    ]
};

/// The name of an `fcmp` predicate (`olt`).
pub fn predicate_name(p: LLVMRealPredicate) -> Option<&'static str> {
    PREDICATES.iter().find(|(_, q)| *q == p).map(|(n, _)| *n)
}

/// A call of a constrained intrinsic read as its plain counterpart; None for any other call. Err when it rounds
/// other than to nearest (`#pragma STDC FENV_ROUND`, `-frounding-math`): the model computes, and the worker
/// runs, in round-to-nearest only.
pub(super) fn constrained(call: Val<'_>) -> Option<Result<Plain, ModelError>> {
    let name = call.called_value()?.name();
    let rest = name.strip_prefix(CONSTRAINED)?;
    let op = rest.split('.').next().unwrap_or("");
    let metadata: Vec<String> = (value_args(call)..call.call_arg_count())
        .filter_map(|i| call.operand(i)?.metadata_string())
        .collect();
    if let Some(mode) = metadata
        .iter()
        .find(|m| m.starts_with("round.") && *m != NEAREST)
    {
        return Some(Err(ModelError::RoundingMode {
            mode: mode.clone(),
            callee: name,
        }));
    }
    let Some(opcode) = constrained_instruction(op) else {
        return Some(Ok(Plain::Intrinsic(format!("llvm.{rest}"))));
    };
    let predicate = if opcode == LLVMOpcode::LLVMFCmp {
        let found = metadata
            .iter()
            .find_map(|m| PREDICATES.iter().find(|(n, _)| n == m).map(|(_, p)| *p));
        match found {
            Some(p) => Some(p),
            None => {
                return Some(Err(ModelError::internal(format!(
                    "`{name}` without a predicate"
                ))))
            }
        }
    } else {
        None
    };
    Some(Ok(Plain::Instruction { opcode, predicate }))
}

/// The call arguments that are values: all but the metadata arguments (a constrained intrinsic's rounding
/// mode and exception behaviour come after its operands).
pub(super) fn value_args(call: Val<'_>) -> u32 {
    (0..call.call_arg_count())
        .take_while(|&i| {
            call.operand(i)
                .is_some_and(|a| a.ty().kind() != LLVMTypeKind::LLVMMetadataTypeKind)
        })
        .count() as u32
}

/// An LLVM intrinsic (`llvm.sqrt.f64`) by its name.
fn intrinsic(name: String) -> Result<Callee<'static>, ModelError> {
    let rest = name.strip_prefix("llvm.").unwrap_or(&name).to_string();
    let base = rest.split('.').next().unwrap_or("");
    if let Some(op) = BitCall::from_name(base) {
        return Ok(Callee::Integer {
            name,
            op: IntegerCall::Bits(op),
        });
    }
    match base {
        "dbg" | "lifetime" | "assume" | "experimental" | "invariant" | "var" | "annotation"
        | "donothing" | "prefetch" | "sideeffect" | "pseudoprobe" => Ok(Callee::Ignored(name)),
        "memset" => Ok(Callee::Memory {
            name,
            kind: MemoryOp::Set,
        }),
        "memcpy" | "memmove" => Ok(Callee::Memory {
            name,
            kind: MemoryOp::Copy,
        }),
        "fmuladd" => Ok(Callee::Math {
            name,
            func: MathCall::Fma,
        }),
        "powi" => Ok(Callee::Math {
            name,
            func: MathCall::Powi,
        }),
        "minnum" | "minimum" => Ok(Callee::Math {
            name,
            func: MathCall::MinMax { min: true },
        }),
        "maxnum" | "maximum" => Ok(Callee::Math {
            name,
            func: MathCall::MinMax { min: false },
        }),
        "vector" if rest.starts_with("vector.reduce.fadd.") => Ok(Callee::Reduce {
            name,
            op: ArithOp::Add,
        }),
        "vector" if rest.starts_with("vector.reduce.fmul.") => Ok(Callee::Reduce {
            name,
            op: ArithOp::Mul,
        }),
        "smin" | "smax" | "umin" | "umax" => Ok(Callee::Integer {
            op: IntegerCall::MinMax {
                signed: base.starts_with('s'),
                min: base.ends_with("min"),
            },
            name,
        }),
        "abs" => Ok(Callee::Integer {
            name,
            op: IntegerCall::Abs,
        }),
        "x86" => match sse_call(rest.trim_start_matches("x86.")) {
            Some(op) => Ok(Callee::Sse { name, op }),
            None => Err(ModelError::UnmodelledIntrinsic { callee: name }),
        },
        "is" if rest.starts_with("is.fpclass.") => Ok(Callee::Libc {
            name,
            func: LibcCall::Classify(Class::Fpclassify),
        }),
        "rint" | "nearbyint" | "roundeven" => Ok(Callee::Math {
            name,
            func: MathCall::Integral(Integral::Round),
        }),
        other => match libm_call(other) {
            Some(func) => Ok(Callee::Math { name, func }),
            None => Err(ModelError::UnmodelledIntrinsic { callee: name }),
        },
    }
}

/// Whether the worker may execute a call to the declared (not defined) function `name`: LLVM intrinsics, the
/// libm functions and the C library functions the model knows. Any other call is replaced by a stop of the run
/// (`instrument::replace_stopping_calls`), exactly where the model ends the path ([`Callee::Stop`]).
pub fn runs_natively(name: &str) -> bool {
    if name.starts_with("llvm.") || name.starts_with("__foe") {
        return true;
    }
    let base = name
        .strip_suffix('f')
        .filter(|b| libm_call(b).is_some())
        .unwrap_or(name);
    libm_call(base).is_some() || libc_call(name).is_some()
}

/// The modelled C library functions (double forms; `float` forms end in `f`).
fn libc_call(name: &str) -> Option<LibcCall> {
    let base = match name.strip_suffix('f') {
        Some(b) if libc_call_double(b).is_some() => b,
        _ => name,
    };
    libc_call_double(base)
}

fn libc_call_double(name: &str) -> Option<LibcCall> {
    Some(match name {
        "ldexp" | "scalbn" | "scalbln" => LibcCall::Scale,
        "frexp" => LibcCall::Frexp,
        "modf" => LibcCall::Modf,
        "nextafter" => LibcCall::NextAfter,
        "isnan" | "__isnan" => LibcCall::Classify(Class::IsNan),
        "isinf" | "__isinf" => LibcCall::Classify(Class::IsInf),
        "finite" | "__finite" | "isfinite" => LibcCall::Classify(Class::IsFinite),
        "__signbit" | "signbit" => LibcCall::Classify(Class::SignBit),
        "__fpclassify" | "fpclassify" => LibcCall::Classify(Class::Fpclassify),
        _ => return None,
    })
}

/// libm functions (double names; the `f` variants are stripped by the caller).
fn libm_call(name: &str) -> Option<MathCall> {
    if let Some(f) = MathFn::from_name(name) {
        return Some(MathCall::Fn(f));
    }
    Some(match name {
        "fabs" => MathCall::Fabs,
        "fma" => MathCall::Fma,
        "floor" => MathCall::Integral(Integral::Floor),
        "ceil" => MathCall::Integral(Integral::Ceil),
        "trunc" => MathCall::Integral(Integral::Trunc),
        "round" => MathCall::Integral(Integral::Round),
        "fmin" => MathCall::MinMax { min: true },
        "fmax" => MathCall::MinMax { min: false },
        "copysign" => MathCall::CopySign,
        _ => return None,
    })
}

/// `llvm.smin/smax/umin/umax(a, b)` and `llvm.abs(a)` (`b` is `a` again) as a comparison and a choice.
pub(super) fn integer_call(op: IntegerCall, a: Value, b: Value) -> Result<Value, ModelError> {
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
        IntegerCall::Bits(bit) => bit_call(bit, &[a, b]),
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
