//! Plain values shared by every stage: source locations, exception kinds, C-level signatures and argument values.
//!
//! Everything here is `Send + Sync` data with no LLVM or Z3 handle, so it can cross threads and be cached.

use serde::{Deserialize, Serialize};

/// A 1-based line and column in the analysed C file, as recorded in the debug info.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourceLoc {
    pub line: u32,
    pub column: u32,
}

/// The four IEEE 754 exceptions foe tracks (inexact is deliberately ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExceptionKind {
    Invalid,
    DivideByZero,
    Overflow,
    Underflow,
}

impl ExceptionKind {
    pub const ALL: [ExceptionKind; 4] = [
        ExceptionKind::Invalid,
        ExceptionKind::DivideByZero,
        ExceptionKind::Overflow,
        ExceptionKind::Underflow,
    ];

    /// The name used in reports, JSON and diagnostics (`divide-by-zero`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ExceptionKind::Invalid => "invalid",
            ExceptionKind::DivideByZero => "divide-by-zero",
            ExceptionKind::Overflow => "overflow",
            ExceptionKind::Underflow => "underflow",
        }
    }

    /// Bit used by the C runtime's trace records (matches `runtime/foe_runtime.h`).
    pub fn runtime_code(self) -> u8 {
        match self {
            ExceptionKind::Invalid => 1,
            ExceptionKind::DivideByZero => 2,
            ExceptionKind::Overflow => 3,
            ExceptionKind::Underflow => 4,
        }
    }

    pub fn from_runtime_code(code: u8) -> Option<ExceptionKind> {
        ExceptionKind::ALL
            .into_iter()
            .find(|k| k.runtime_code() == code)
    }
}

impl std::fmt::Display for ExceptionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which of the two builds a value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Build {
    /// The reference build P (default `-O0 -ffp-contract=off`).
    P,
    /// The fast-math build P' (default `-O2 -ffast-math`).
    PPrime,
}

impl Build {
    pub fn label(self) -> &'static str {
        match self {
            Build::P => "P",
            Build::PPrime => "P'",
        }
    }
}

/// The C type of one parameter, as far as foe can drive it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ParamType {
    F64,
    F32,
    /// An integer of `bits` width (8, 16, 32 or 64); `signed` from the debug info (defaults to signed).
    Int {
        bits: u32,
        signed: bool,
    },
    /// A pointer: the caller passes a buffer of `bytes` bytes, zeroed but for the values the function reads
    /// through it before writing them, which are inputs of their own ([`Param::pointee`]).
    OutPtr {
        bytes: u32,
    },
}

impl ParamType {
    /// C's `int` on the targets foe builds for.
    pub const INT: ParamType = ParamType::Int {
        bits: 32,
        signed: true,
    };

    pub fn is_searchable(self) -> bool {
        !matches!(self, ParamType::OutPtr { .. })
    }

    /// The format of a floating-point parameter.
    pub fn float_format(self) -> Option<crate::round::FloatFormat> {
        match self {
            ParamType::F64 => Some(crate::round::FloatFormat::Double),
            ParamType::F32 => Some(crate::round::FloatFormat::Single),
            _ => None,
        }
    }
}

/// The return type of an analysed function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReturnType {
    Void,
    F64,
    F32,
    Int {
        bits: u32,
        signed: bool,
    },
    /// A C struct returned by value, `bytes` long: in registers (`<2 x float>`, `{ <2 x float>, float }`,
    /// `{ double, double }`), or through the hidden first pointer parameter when `sret`. Its fields are outputs of
    /// their own (`return.x`, [`RETURN_PARAM`]).
    Struct {
        bytes: u32,
        sret: bool,
    },
    /// Anything else (a pointer, a union): run, but its value is not reported.
    Other,
}

/// The parameter index under which the fields of a returned struct are reported as outputs (`return.x`).
pub const RETURN_PARAM: u32 = u32::MAX;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Param {
    /// The C name from the debug info, or `arg<i>` when there is none; `v[1]` for a value behind a pointer.
    pub name: String,
    pub ty: ParamType,
    /// For a value passed in through a pointer parameter: where it lives. Such inputs follow the C parameters
    /// in [`FunctionSignature::params`] and are stored into the pointer's buffer instead of being passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointee: Option<PointeeOf>,
    /// For a piece of a C struct passed by value (a field in a register, or the copy `byval` passes): how it
    /// travels. Such pieces are parameters of their own, in the place of the struct.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_value: Option<ByValue>,
}

impl Param {
    /// A C parameter.
    pub fn new(name: impl Into<String>, ty: ParamType) -> Param {
        Param {
            name: name.into(),
            ty,
            pointee: None,
            by_value: None,
        }
    }
}

/// Where a piece of a C struct passed by value travels (x86-64 ABI as clang lowers it): a field in a register
/// (`float` or `double` argument, or one lane of a `<2 x float>` one), or the whole struct in memory (`byval`: the
/// parameter is then an [`ParamType::OutPtr`] buffer whose fields are inputs behind it, named `s.x`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ByValue {
    /// The IR argument it is passed in (the hidden `sret` pointer counted).
    pub arg: u32,
    /// Its lane in a vector argument; `None` when the argument is the piece itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<u32>,
    /// Its byte offset in the struct (0 for a `byval` copy).
    pub offset: u32,
    /// The struct's C parameter: its index among the C parameters, its name and its type as the source spells
    /// it (`b2Vec2`), and its size in bytes.
    pub c_param: u32,
    pub c_name: String,
    pub c_type: String,
    pub bytes: u32,
    /// Whether the struct goes in memory (`byval`).
    #[serde(default)]
    pub memory: bool,
}

/// One argument of the function as the IR declares it, made of the signature's parameters (indices in
/// [`FunctionSignature::params`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IrArg {
    /// The hidden pointer a struct is returned through (`sret`).
    Sret,
    /// A parameter passed as itself (a scalar, a pointer, a struct field in a register, a `byval` copy).
    One(usize),
    /// A vector argument (`<2 x float>`) whose lanes are these parameters, in order.
    Lanes(Vec<usize>),
    /// An integer argument that packs these integer fields, each at its byte offset within the argument's
    /// eightbyte (`struct { int start; uint16_t count; uint8_t kind, color; }` as one `i64`).
    Packed(Vec<usize>),
}

/// The place of an input behind a pointer: byte `offset` into the buffer passed as parameter `param`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PointeeOf {
    pub param: u32,
    pub offset: u32,
}

/// What foe knows of a C function's interface; the same in both builds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FunctionSignature {
    /// The linkage name (the C name).
    pub name: String,
    pub params: Vec<Param>,
    pub ret: ReturnType,
}

impl FunctionSignature {
    /// The parameters of the C function, in order (the inputs behind pointers follow them in `params`).
    pub fn call_params(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| p.pointee.is_none())
    }

    /// The function's IR arguments, in order, from its parameters: the `sret` pointer first when a struct is
    /// returned through it, then each C parameter's pieces (the lanes of one vector argument together).
    pub fn ir_args(&self) -> Vec<IrArg> {
        let mut out = vec![];
        if matches!(self.ret, ReturnType::Struct { sret: true, .. }) {
            out.push(IrArg::Sret);
        }
        for (i, p) in self.params.iter().enumerate() {
            if p.pointee.is_some() {
                continue;
            }
            match p.by_value.as_ref().and_then(|b| b.lane.map(|l| (b.arg, l))) {
                Some((arg, lane)) => {
                    let same = |q: &Param| q.by_value.as_ref().is_some_and(|b| b.arg == arg);
                    match out.last_mut() {
                        Some(IrArg::Lanes(lanes))
                            if lane > 0 && lanes.last().is_some_and(|&l| same(&self.params[l])) =>
                        {
                            lanes.push(i)
                        }
                        _ => out.push(IrArg::Lanes(vec![i])),
                    }
                }
                None => {
                    // Integer fields of one struct sharing an argument are packed into it.
                    let arg = p.by_value.as_ref().filter(|b| !b.memory).map(|b| b.arg);
                    let shares = |q: &Param| {
                        arg.is_some()
                            && q.by_value
                                .as_ref()
                                .is_some_and(|b| Some(b.arg) == arg && b.lane.is_none())
                    };
                    let packs_with_last = match out.last() {
                        Some(IrArg::Packed(f)) => {
                            f.last().is_some_and(|&f| shares(&self.params[f]))
                        }
                        Some(IrArg::One(f)) => shares(&self.params[*f]),
                        _ => false,
                    };
                    match out.last_mut() {
                        Some(IrArg::Packed(fields)) if packs_with_last => fields.push(i),
                        Some(last) if packs_with_last => {
                            if let IrArg::One(first) = *last {
                                *last = IrArg::Packed(vec![first, i]);
                            }
                        }
                        _ => out.push(IrArg::One(i)),
                    }
                }
            }
        }
        out
    }

    /// The parameters the search drives (every one but pointers; values behind pointers included), in order.
    pub fn searchable_params(&self) -> impl Iterator<Item = (usize, &Param)> {
        self.params
            .iter()
            .enumerate()
            .filter(|(_, p)| p.ty.is_searchable())
    }
}

/// One concrete argument value, exactly as passed to the compiled code.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum ArgValue {
    F64(f64),
    F32(f32),
    Int(i64),
    /// Placeholder for an out-parameter (the runner supplies the buffer).
    OutPtr,
}

impl ArgValue {
    /// Bit pattern used for hashing and equality of inputs (so -0.0 and NaN payloads stay distinct).
    pub fn bits(self) -> u64 {
        match self {
            ArgValue::F64(v) => v.to_bits(),
            ArgValue::F32(v) => v.to_bits() as u64,
            ArgValue::Int(v) => v as u64,
            ArgValue::OutPtr => 0,
        }
    }

    /// The value as a C99 hexadecimal float (`0x1.8p+1`), or a decimal integer.
    pub fn hex(self) -> String {
        match self {
            ArgValue::F64(v) => crate::fpfmt::hex_f64(v),
            ArgValue::F32(v) => crate::fpfmt::hex_f64(v as f64),
            ArgValue::Int(v) => v.to_string(),
            ArgValue::OutPtr => "(out)".into(),
        }
    }

    /// The value in decimal with 17 significant digits (9 for float), or a decimal integer.
    pub fn decimal(self) -> String {
        match self {
            ArgValue::F64(v) => crate::fpfmt::decimal17(v),
            ArgValue::F32(v) => crate::fpfmt::decimal_f32(v),
            ArgValue::Int(v) => v.to_string(),
            ArgValue::OutPtr => "(out)".into(),
        }
    }

    /// A short human form for messages (`1.34e154`).
    pub fn short(self) -> String {
        match self {
            ArgValue::F64(v) => crate::fpfmt::short(v),
            ArgValue::F32(v) => crate::fpfmt::short(v as f64),
            ArgValue::Int(v) => v.to_string(),
            ArgValue::OutPtr => "(out)".into(),
        }
    }
}

/// A tuple of arguments compared by bit pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input(pub Vec<ArgValue>);

impl Input {
    pub fn key(&self) -> Vec<u64> {
        self.0.iter().map(|a| a.bits()).collect()
    }
}
