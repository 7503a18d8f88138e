//! The real-number result of the path an input takes in the plain build, and Herbie's measure of a build's error
//! against it (bits between the computed value and the exact one rounded).
//!
//! What "the real-number result" is: the model's own terms of the path ([`PathOutputs`], recorded by the
//! executor for P), read over the reals as the solver reads them: every `+ - * /` exact, conversions the identity,
//! elementary functions their mathematical values (MPFR, correctly rounded at a working precision), integers
//! exact. This is the reference Herbie, Ariadne and SPF+REALIZER use: the *whole* path evaluated in real
//! arithmetic. Which path: the one whose path condition holds at the input in the program's own IEEE reading
//! (`solve::check::Evaluator`), i.e. the branches P really takes; the comparisons *inside* a value (a `select`,
//! `fmin`) are read over the reals like the rest of the value.
//!
//! A consequence worth knowing: code that computes a rounding error on purpose (TwoSum's `err`, Kahan's
//! compensation, the low half of a double-double product) has the real-number value 0 there, since over the reals
//! nothing is lost to rounding; the plain build's non-zero compensation is then counted as error. Such an output
//! is one whose exact value [`ExactValue::is_zero`] while the plain build's is not: Herbie's bits say nothing about
//! it, and the builds are better compared with each other (a zero in one build and a finite value in the other).
//!
//! Precision (Ziv's strategy): exact rationals while only rational operations are involved (no loop at all then);
//! otherwise MPFR at 256 bits and again at 512, accepted when every output rounds to the same value of its format
//! at both, else doubled up to [`MAX_PRECISION`].

mod real;
#[cfg(test)]
mod tests;

pub use crate::model::{OutputTerm, PathEnd, PathOutputs, WrittenOutput};
use crate::round::{round_rational, FloatFormat};
use crate::solve::check::Evaluator;
use crate::sym;
use crate::types::{FunctionSignature, Input};
use num_bigint::BigInt;
use real::{big_rational, bigint, Num, RealEvaluator, Value};
use std::fmt;

/// The first working precision of an evaluation that needs MPFR, in bits.
pub const FIRST_PRECISION: u32 = 256;
/// The working precision beyond which foe gives up on an exact value, in bits.
pub const MAX_PRECISION: u32 = 4096;

/// The exact outputs of the path an input takes in P.
#[derive(Debug, Clone, PartialEq)]
pub enum Exact {
    Known {
        /// The return value's (`None` for `void`, or a value foe does not model: a pointer, a struct).
        ret: Option<ExactValue>,
        /// The values the path leaves behind pointer parameters, as (C parameter index, byte offset, value), by
        /// parameter and offset.
        writes: Vec<(u32, u32, ExactValue)>,
    },
    /// No exact reference for this input, and why.
    NoReference(NoReference),
}

/// Why there is no exact reference, in C words (the `Display` text is the message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoReference {
    #[error("no explored path of the plain build holds for this input")]
    NoPath,
    #[error("{0} explored paths of the plain build hold for this input")]
    SeveralPaths(usize),
    #[error("which path the plain build takes for this input cannot be decided")]
    UndecidedPath,
    #[error("the path stops before returning, at {0}")]
    PathStops(String),
    #[error("the value depends on memory foe does not model")]
    UnmodelledMemory,
    #[error("the value depends on an operation foe does not model (`{0}`)")]
    Opaque(String),
    #[error("{0} is NaN or infinite: it has no real-number value")]
    NonFiniteInput(String),
    #[error("the input gives no value for {0}")]
    MissingInput(String),
    #[error("the real-number result divides by zero")]
    DivisionByZero,
    #[error("the real-number result takes `{0}` at its pole")]
    Pole(&'static str),
    #[error("the real-number result takes `{0}` outside its domain")]
    OutsideDomain(&'static str),
    #[error("the real-number result converts a value out of its integer type's range")]
    ConversionOutOfRange,
    #[error("the real-number result is beyond MPFR's exponent range")]
    OutOfRange,
    #[error("the exact value needs more than {0} bits")]
    PrecisionExhausted(u32),
    #[error("internal: {0}")]
    Internal(&'static str),
}

/// The exact value of one output.
#[derive(Debug, Clone, PartialEq)]
pub enum ExactValue {
    /// A `double` or `float` output: its real-number value and the format the program keeps it in.
    Real { value: RealValue, fmt: FloatFormat },
    /// An integer output, in signed form (as the model holds integers).
    Int(BigInt),
    /// A `_Bool` output.
    Bool(bool),
}

/// A real number: exact, or an approximation accurate enough that it rounds like the real value (at least 256
/// bits, and the same rounding to the output's format at two precisions).
#[derive(Debug, Clone, PartialEq)]
pub enum RealValue {
    Exact(rug::Rational),
    Approx(rug::Float),
}

impl ExactValue {
    /// The value rounded to nearest in `fmt` (±infinity beyond its range; a `float` widened to `f64`).
    pub fn round_to(&self, fmt: FloatFormat) -> f64 {
        match self {
            ExactValue::Real { value, .. } => value.round_to(fmt),
            ExactValue::Int(n) => {
                round_rational(&num_rational::BigRational::from_integer(n.clone()), fmt)
            }
            ExactValue::Bool(b) => f64::from(u8::from(*b)),
        }
    }

    /// The value rounded to its own format (`double` for integers and truth values).
    pub fn rounded(&self) -> f64 {
        match self {
            ExactValue::Real { fmt, .. } => self.round_to(*fmt),
            _ => self.round_to(FloatFormat::Double),
        }
    }

    /// Whether the value is exactly zero: for a compensation term (TwoSum's `err`) that is what real arithmetic
    /// gives, so its rounding error is the whole of the plain build's value.
    pub fn is_zero(&self) -> bool {
        match self {
            ExactValue::Real {
                value: RealValue::Exact(q),
                ..
            } => q.cmp0().is_eq(),
            ExactValue::Real {
                value: RealValue::Approx(f),
                ..
            } => f.is_zero(),
            ExactValue::Int(n) => n == &BigInt::default(),
            ExactValue::Bool(b) => !b,
        }
    }

    /// Whether the value is known exactly (not an MPFR approximation).
    pub fn is_exact(&self) -> bool {
        !matches!(
            self,
            ExactValue::Real {
                value: RealValue::Approx(_),
                ..
            }
        )
    }

    /// Whether two evaluations of the same output agree as the program can observe them.
    fn agrees_with(&self, other: &ExactValue) -> bool {
        match (self, other) {
            (ExactValue::Real { fmt, .. }, ExactValue::Real { .. }) => {
                let (a, b) = (self.round_to(*fmt), other.round_to(*fmt));
                a == b && a.is_sign_negative() == b.is_sign_negative()
            }
            _ => self == other,
        }
    }
}

impl fmt::Display for ExactValue {
    /// The value rounded to its format, as Rust prints that float (`1e-20`, `1.27e308`); integers in full.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExactValue::Real {
                fmt: FloatFormat::Single,
                ..
            } => write!(f, "{}", self.rounded() as f32),
            ExactValue::Real { .. } => write!(f, "{}", self.rounded()),
            ExactValue::Int(n) => write!(f, "{n}"),
            ExactValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl RealValue {
    /// Rounded to nearest (ties to even) in `fmt`, subnormals included; ±infinity beyond the format's range.
    pub fn round_to(&self, fmt: FloatFormat) -> f64 {
        // Beyond 2^±1200 no format here can tell the values apart: skip the exact conversion of huge numbers.
        const FAR: i64 = 1200;
        let (negative, log2) = match self {
            RealValue::Exact(q) => {
                if q.cmp0().is_eq() {
                    return 0.0;
                }
                let log2 = i64::from(q.numer().significant_bits())
                    - i64::from(q.denom().significant_bits());
                (q.cmp0().is_lt(), log2)
            }
            RealValue::Approx(x) => match x.get_exp() {
                None => return 0.0,
                Some(e) => (x.is_sign_negative(), i64::from(e)),
            },
        };
        let signed = |m: f64| if negative { -m } else { m };
        if log2 > FAR {
            return signed(f64::INFINITY);
        }
        if log2 < -FAR {
            return signed(0.0);
        }
        let exact = match self {
            RealValue::Exact(q) => big_rational(q),
            RealValue::Approx(x) => match x.to_rational() {
                Some(q) => big_rational(&q),
                None => return f64::NAN,
            },
        };
        round_rational(&exact, fmt)
    }
}

/// The exact outputs of the path `input` takes in P, from the explored paths of P (`ModelledPair::p_outputs`) and
/// the signature the model's inputs are numbered by (`ModelledPair::signature`, values behind pointers included).
pub fn exact_outputs(paths: &[PathOutputs], sig: &FunctionSignature, input: &Input) -> Exact {
    match exact_outputs_of(paths, sig, input) {
        Ok(exact) => exact,
        Err(why) => Exact::NoReference(why),
    }
}

fn exact_outputs_of(
    paths: &[PathOutputs],
    sig: &FunctionSignature,
    input: &Input,
) -> Result<Exact, NoReference> {
    let path = path_taken(paths, input)?;
    let (ret, writes) = match &path.end {
        PathEnd::Stopped(reason) => return Err(NoReference::PathStops(reason.clone())),
        PathEnd::Returned {
            reads_unmodelled_memory: true,
            ..
        } => return Err(NoReference::UnmodelledMemory),
        PathEnd::Returned { ret, writes, .. } => (ret, writes),
    };
    // The outputs foe models: the return value first, then the writes at offsets inside the buffer.
    let ret = ret
        .as_ref()
        .filter(|t| !matches!(t, OutputTerm::Unmodelled(_)));
    let places: Vec<(u32, u32, &OutputTerm)> = writes
        .iter()
        .filter(|w| !matches!(w.value, OutputTerm::Unmodelled(_)))
        .filter_map(|w| Some((w.param, u32::try_from(w.offset).ok()?, &w.value)))
        .collect();
    let terms: Vec<&OutputTerm> = ret
        .into_iter()
        .chain(places.iter().map(|(_, _, t)| *t))
        .collect();
    let mut values = evaluate(&terms, sig, input)?.into_iter();
    let ret = match ret {
        Some(_) => Some(
            values
                .next()
                .ok_or(NoReference::Internal("an output without a value"))?,
        ),
        None => None,
    };
    let writes = places
        .iter()
        .zip(values)
        .map(|((param, offset, _), value)| (*param, *offset, value))
        .collect();
    Ok(Exact::Known { ret, writes })
}

/// The one explored path whose condition holds at `input` in IEEE arithmetic (the plain build's own reading).
fn path_taken<'p>(paths: &'p [PathOutputs], input: &Input) -> Result<&'p PathOutputs, NoReference> {
    let mut holding = Vec::new();
    let mut undecided = 0;
    for path in paths {
        match Evaluator::new(&sym::and(path.condition.iter().cloned())).holds(&input.0) {
            Some(true) => holding.push(path),
            Some(false) => {}
            None => undecided += 1,
        }
    }
    match holding.as_slice() {
        [one] => Ok(one),
        [] if undecided > 0 => Err(NoReference::UndecidedPath),
        [] => Err(NoReference::NoPath),
        several => Err(NoReference::SeveralPaths(several.len())),
    }
}

/// The exact values of `terms` at `input`: exactly if no approximation is needed, else at increasing precision
/// until two successive ones round alike.
fn evaluate(
    terms: &[&OutputTerm],
    sig: &FunctionSignature,
    input: &Input,
) -> Result<Vec<ExactValue>, NoReference> {
    let mut previous: Option<Vec<ExactValue>> = None;
    let mut precision = FIRST_PRECISION;
    loop {
        let mut evaluator = RealEvaluator::new(precision, &input.0, sig);
        let values: Result<Vec<ExactValue>, NoReference> = terms
            .iter()
            .map(|t| exact_value(&mut evaluator, t))
            .collect();
        let approximated = evaluator.approximated;
        match values {
            Ok(values) if !approximated => return Ok(values),
            Ok(values) => {
                let agree = previous.as_ref().is_some_and(|p| {
                    p.len() == values.len() && p.iter().zip(&values).all(|(a, b)| a.agrees_with(b))
                });
                // An approximation that came out zero may be a cancellation that wiped out every bit this
                // precision holds (`(e + 1e-300) - e` is 0 at 256 and at 512 bits): it is never taken as agreeing.
                let cancelled = values.iter().any(|v| !v.is_exact() && v.is_zero());
                if agree && !cancelled {
                    return Ok(values);
                }
                previous = Some(values);
            }
            // A failure that involved no approximation is the real number's; one that did may be the
            // approximation's (a value near zero that came out negative): it must persist at higher precision.
            Err(why) if !approximated || precision >= MAX_PRECISION => return Err(why),
            Err(_) => previous = None,
        }
        if precision >= MAX_PRECISION {
            return Err(NoReference::PrecisionExhausted(MAX_PRECISION));
        }
        precision *= 2;
    }
}

fn exact_value(
    evaluator: &mut RealEvaluator<'_>,
    term: &OutputTerm,
) -> Result<ExactValue, NoReference> {
    let mismatch = NoReference::Internal("an output whose term has another type");
    Ok(match term {
        OutputTerm::Real { term, fmt } => {
            let value = match evaluator.value(term)? {
                Value::Real(Num::Exact(q)) => RealValue::Exact(q),
                Value::Real(Num::Approx(f)) => RealValue::Approx(f),
                Value::Int(n) => RealValue::Exact(rug::Rational::from(n)),
                Value::Bool(_) => return Err(mismatch),
            };
            ExactValue::Real { value, fmt: *fmt }
        }
        OutputTerm::Int { term, .. } => match evaluator.value(term)? {
            Value::Int(n) => ExactValue::Int(bigint(&n)),
            _ => return Err(mismatch),
        },
        OutputTerm::Bool(term) => match evaluator.value(term)? {
            Value::Bool(b) => ExactValue::Bool(b),
            _ => return Err(mismatch),
        },
        OutputTerm::Unmodelled(_) => {
            return Err(NoReference::Internal("an unmodelled output evaluated"))
        }
    })
}

/// Herbie's error of a `double` result: log2(1 + the number of doubles between `computed` and the exact value
/// rounded to a double); a NaN result, or an infinite one where the rounded exact value is another value, counts
/// the full 64 bits.
pub fn bits_of_error_f64(computed: f64, exact: &ExactValue) -> f64 {
    let reference = exact.round_to(FloatFormat::Double);
    let wrong = computed.is_nan() || (computed.is_infinite() && computed != reference);
    let ordinal = |x: f64| signed(i128::from(x.abs().to_bits()), x.is_sign_negative());
    error_bits(wrong, 64.0, ordinal(computed), ordinal(reference))
}

/// [`bits_of_error_f64`] for a `float` result: floats between, 32 bits at most.
pub fn bits_of_error_f32(computed: f32, exact: &ExactValue) -> f64 {
    let reference = exact.round_to(FloatFormat::Single) as f32;
    let wrong = computed.is_nan() || (computed.is_infinite() && computed != reference);
    let ordinal = |x: f32| signed(i128::from(x.abs().to_bits()), x.is_sign_negative());
    error_bits(wrong, 32.0, ordinal(computed), ordinal(reference))
}

/// A float's place on the line of its format's values (its magnitude's bits, negated for a negative value).
fn signed(magnitude: i128, negative: bool) -> i128 {
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// Herbie's bits between two places on a format's line, or the format's whole width for a wrong result.
fn error_bits(wrong: bool, width: f64, computed: i128, reference: i128) -> f64 {
    if wrong {
        width
    } else {
        bits_of(computed - reference)
    }
}

fn bits_of(ulps: i128) -> f64 {
    (1.0 + ulps.unsigned_abs() as f64).log2()
}
