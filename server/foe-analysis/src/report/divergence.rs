//! What a divergence is: the input that parts the two builds, what each build did (its trace and its ending),
//! how the two differ ([`DivergenceClass`], [`ResultDifference`] against the exact [`Reference`]), whether the
//! binaries clang ships show it ([`Confirmation`]) and which fast-math option is its [`Cause`].

use super::run::RunEnd;
use super::Scalar;
use crate::types::{ArgValue, ExceptionKind, SourceLoc};
use serde::{Deserialize, Serialize};

/// One value of an input tuple, named after its parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedValue {
    pub name: String,
    /// C99 hexadecimal float (exact), or a decimal integer.
    pub value: String,
    /// Decimal with 17 significant digits (9 for float).
    pub decimal: String,
    #[serde(skip)]
    pub raw: Option<ArgValue>,
}

impl NamedValue {
    pub fn new(name: &str, v: ArgValue) -> NamedValue {
        NamedValue {
            name: name.to_string(),
            value: v.hex(),
            decimal: v.decimal(),
            raw: Some(v),
        }
    }
}

/// One exception raised by one build, where the debug info places it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TraceEvent {
    pub kind: ExceptionKind,
    /// 1-based; `None` when the instruction has no debug location.
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The LLVM opcode or callee that raised it (`fmul`, `call exp`).
    pub operation: String,
}

impl TraceEvent {
    pub fn loc(&self) -> Option<SourceLoc> {
        Some(SourceLoc {
            line: self.line?,
            column: self.column.unwrap_or(0),
        })
    }
}

/// How two exception traces differ, best-ranked first.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceClass {
    /// An exception kind occurs in one build and never in the other.
    #[default]
    Appears,
    /// The same kinds occur, but a different number of times.
    Count,
    /// The same exceptions occur, only in another order.
    Order,
    /// The traces agree (or differ too); an output is NaN, infinite, zero or finite in one build and in another
    /// category in the other, or an integer output differs ([`Divergence::result`] says which).
    SpecialValue,
    /// The traces agree; finite outputs differ by more than the accuracy threshold.
    Accuracy,
    /// One build stops at a call foe does not run (an error handler such as `gsl_error`, reached through a NaN
    /// check the other build folded) where the other returns, or the two stop at different calls.
    Ending,
}

impl DivergenceClass {
    /// Whether the class is about exception traces (the paper's comparison; what Table III counts).
    pub fn is_exception(self) -> bool {
        matches!(
            self,
            DivergenceClass::Appears | DivergenceClass::Count | DivergenceClass::Order
        )
    }

    /// The order findings are ranked in: an exception or a special value that appears or disappears first, then
    /// the same exceptions in another number or order, then lost accuracy.
    pub fn rank(self) -> u8 {
        match self {
            DivergenceClass::Appears => 0,
            DivergenceClass::SpecialValue | DivergenceClass::Ending => 1,
            DivergenceClass::Count => 2,
            DivergenceClass::Order => 3,
            DivergenceClass::Accuracy => 4,
        }
    }
}

/// How the two builds' outputs differ on one input: the output that differs most, its value in each build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultDifference {
    /// [`DivergenceClass::SpecialValue`] or [`DivergenceClass::Accuracy`].
    pub class: DivergenceClass,
    /// The output, as C names it (`*err`, `r->y`); `None` for the return value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    pub plain: Scalar,
    pub fast_math: Scalar,
    /// For finite floats: how many floats lie between the two values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ulps: Option<u64>,
    /// The real-number result of the path the input takes in P, and each build's error against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Reference>,
}

/// The real-number result of an output on the plain build's path (MPFR over the model's terms) and each build's
/// error against it in bits (Herbie's measure: log2 of one plus the floats between the value and the exact result
/// rounded); or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reference", rename_all = "snake_case")]
pub enum Reference {
    Exact {
        /// The exact value rounded to the output's format, short (`1.27e308`).
        value: String,
        /// Whether the exact value is 0 (a compensation term: over the reals nothing is lost to rounding).
        zero: bool,
        bits_plain: f64,
        bits_fast_math: f64,
    },
    /// No exact reference, in C words (`the path stops before returning, at a call to `gsl_error``).
    None { why: String },
}

/// Bits of error of the plain build against the real-number result past which the reference does not judge
/// which build is right ([`Reference::plain_far`]).
pub const PLAIN_FAR_BITS: f64 = 16.0;

impl Reference {
    /// Bits the fast-math build loses beyond the plain build's (negative when it is the more accurate); `None`
    /// without a reference, where the plain build is far from it ([`Reference::plain_far`]), and for an exact value of 0: a compensation term (TwoSum's `err`) is 0 over the reals,
    /// so Herbie's bits would call the plain build's correct error term wrong (seeds 001 and 002 never measure it).
    pub fn bits_lost(&self) -> Option<f64> {
        match self {
            Reference::Exact {
                bits_plain,
                bits_fast_math,
                zero: false,
                ..
            } if !self.plain_far() => Some(bits_fast_math - bits_plain),
            _ => None,
        }
    }

    /// Whether the fast-math build is measurably the closer to the real-number result, while the plain build is
    /// close to it too (contraction's extra bits). A plain build [`Reference::plain_far`] from the real numbers
    /// relies on rounding or cancels: the reals are no judge of which build is right there.
    pub fn fast_math_more_accurate(&self) -> bool {
        !self.plain_far() && self.bits_lost().is_some_and(|lost| lost < 0.0)
    }

    /// Whether the plain build itself is [`PLAIN_FAR_BITS`] or more from a non-zero real-number result: the code
    /// relies on how its operations round (the shift trick `(x + 0x1.8p52) - 0x1.8p52` rounds `x` to an integer,
    /// which over the reals is `x` itself) or cancels catastrophically.
    pub fn plain_far(&self) -> bool {
        matches!(self, Reference::Exact { bits_plain, zero: false, .. } if *bits_plain >= PLAIN_FAR_BITS)
    }
}

impl ResultDifference {
    /// `log2(1 + ulps)`: the bits in which the builds' values disagree (Herbie's measure between them).
    pub fn bits(&self) -> Option<f64> {
        self.ulps.map(|u| ((u as f64) + 1.0).log2())
    }
}

/// An input on which P and P' raise different exception traces or produce different results, confirmed by running
/// both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    pub inputs: Vec<NamedValue>,
    pub trace_p: Vec<TraceEvent>,
    pub trace_p_prime: Vec<TraceEvent>,
    /// Index of the first position where the kind sequences differ.
    pub first_divergence: usize,
    pub class: DivergenceClass,
    /// How the instrumented runs of P and P' ended: what they returned and wrote through pointers, or where they
    /// stopped (a run that stopped at a call foe does not run is compared with the shipped run over the same
    /// extent).
    #[serde(default)]
    pub end_p: RunEnd,
    #[serde(default)]
    pub end_p_prime: RunEnd,
    /// How the builds' outputs differ on this input, when they do (with or without a trace difference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ResultDifference>,
    /// Whether the input satisfies the function's declared input domain (`// foe: assume`).
    pub in_domain: bool,
    /// Where the editor should flag it: the first diverging event of P', else of P.
    pub location: Option<SourceLoc>,
    /// One-line summary (`fast-math build overflows here, plain build does not`).
    pub summary: String,
    /// Whether the binaries clang ships (no instrumentation, real code generation) show it too.
    #[serde(default)]
    pub confirmation: Confirmation,
    /// The exceptions the shipped P and P' raised on this input (sticky flags, sorted); empty when not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shipped_p: Vec<ExceptionKind>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shipped_p_prime: Vec<ExceptionKind>,
    /// The exceptions the shipped P and P' trapped on this input, in order, placed by their debug info (an event
    /// in a shared library such as libm at the call that led there, its `operation` naming the library symbol);
    /// empty when not run or when none was raised.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shipped_trace_p: Vec<TraceEvent>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shipped_trace_p_prime: Vec<TraceEvent>,
    /// Which single option of P' makes the difference, from re-running the input on builds that differ in one.
    #[serde(default)]
    pub cause: Cause,
    /// Candidates whose neighbourhood search gave this input as their best (merged when several did).
    #[serde(default = "one")]
    pub candidates: usize,
    /// Seen only on the binaries clang ships: the instrumented builds agree on this input (a difference of code
    /// generation, such as x86's reciprocal square-root estimate), so the traces and ends above are the shipped
    /// runs' ([`crate::confirm::shipped_only`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shipped_only: bool,
}

fn one() -> usize {
    1
}

/// An empty divergence (no inputs, no events, inside the domain, one candidate), for filling in the fields that
/// matter with `..Divergence::default()`.
impl Default for Divergence {
    fn default() -> Divergence {
        Divergence {
            inputs: vec![],
            trace_p: vec![],
            trace_p_prime: vec![],
            first_divergence: 0,
            class: DivergenceClass::default(),
            end_p: RunEnd::default(),
            end_p_prime: RunEnd::default(),
            result: None,
            in_domain: true,
            location: None,
            summary: String::new(),
            confirmation: Confirmation::default(),
            shipped_p: vec![],
            shipped_p_prime: vec![],
            shipped_trace_p: vec![],
            shipped_trace_p_prime: vec![],
            cause: Cause::default(),
            candidates: one(),
            shipped_only: false,
        }
    }
}

/// What the independent harness (the file built by clang as shipped, the sticky flags read) says of a divergence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confirmation {
    /// The shipped binaries raise different sets of exceptions on the input.
    Confirmed,
    /// The shipped binaries raise the same set; the instrumented traces differ in order or count only, which
    /// the sticky flags cannot show.
    TraceOnly,
    /// The shipped binaries could not be run on the input (no harness, a crash or a time-out).
    #[default]
    NotRun,
}

impl Confirmation {
    /// A short phrase for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Confirmation::Confirmed => "confirmed on the shipped binaries",
            Confirmation::TraceOnly => {
                "the shipped binaries raise the same set (only order or count differ)"
            }
            Confirmation::NotRun => "not run on the shipped binaries",
        }
    }
}

/// Why P' diverges: the one option whose removal from P' makes the shipped P' raise what P raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Flush-to-zero / denormals-are-zero, set for the whole process at start-up when linking with `-ffast-math`
    /// (`crtfastmath.o`); no source change reaches it, linking with `-mno-daz-ftz` does.
    FlushToZero,
    /// Re-association (`-fassociative-math`).
    Reassociation,
    /// Reciprocals instead of divisions (`-freciprocal-math`).
    Reciprocal,
    /// Fused multiply-add contraction (`-ffp-contract=fast`).
    Contraction,
    /// The assumption that no NaN or infinity occurs (`-ffinite-math-only`).
    FiniteMath,
    /// Signed zeros ignored (`-fno-signed-zeros`).
    SignedZeros,
    /// Approximate library functions (`-fapprox-func`).
    ApproxFunc,
    /// Optimisation that happens without fast-math too (plain `-O2` diverges the same way).
    Optimisation,
    /// Code the preprocessor chose by `__FAST_MATH__`, which `-ffast-math` defines: P' without only the macro
    /// (`-U__FAST_MATH__`) does what P does. Every single-option probe drops the macro too, so without this probe
    /// such a divergence would be put down to the first of them.
    FastMathMacro,
    /// No single option: several fast-math options together.
    Combined,
    /// Not looked for past flush-to-zero and plain `-O2`: the shipped binaries differ only in the order or number
    /// of the same exceptions, and the probes built for the file's other divergences do not explain it.
    NotProbed,
    /// Not determined (the shipped binaries show no set difference, or could not be run).
    #[default]
    Undetermined,
}

impl Cause {
    /// A short phrase for messages (`flush-to-zero/denormals-are-zero at start-up`).
    pub fn describe(self) -> &'static str {
        if let Some(option) = crate::fast_math::option(self) {
            return option.description;
        }
        match self {
            Cause::Optimisation => "optimisation that happens without fast-math too (-O2)",
            Cause::Combined => "several fast-math options together",
            Cause::NotProbed => {
                "not looked for beyond flush-to-zero, plain -O2 and re-association (a difference in count or order only)"
            }
            // The single options are described by their row of the table above.
            _ => "undetermined",
        }
    }
}
