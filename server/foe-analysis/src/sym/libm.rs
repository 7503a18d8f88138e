//! The libm table: the elementary functions foe models, their names, arities, the exceptions each can raise
//! and when (C Annex F), and their IEEE values as the system libm computes them.

use super::*;

/// Elementary functions modelled by a fresh value tied to its argument by side constraints
/// (Ariadne's dependent symbolic variables), except `Sqrt` which is exact (y·y = x, y ≥ 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MathFn {
    Sqrt,
    Exp,
    Exp2,
    Log,
    Log2,
    Log10,
    Pow,
    Sin,
    Cos,
    Tan,
    Atan,
    /// `fmod` / LLVM `frem`.
    Fmod,
    Hypot,
    Atan2,
    Cbrt,
    Sinh,
    Cosh,
    Tanh,
    Expm1,
    Log1p,
    Asin,
    Acos,
}

impl MathFn {
    /// Every function of the table.
    pub const ALL: [MathFn; 22] = [
        MathFn::Sqrt,
        MathFn::Exp,
        MathFn::Exp2,
        MathFn::Log,
        MathFn::Log2,
        MathFn::Log10,
        MathFn::Pow,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tan,
        MathFn::Atan,
        MathFn::Fmod,
        MathFn::Hypot,
        MathFn::Atan2,
        MathFn::Cbrt,
        MathFn::Sinh,
        MathFn::Cosh,
        MathFn::Tanh,
        MathFn::Expm1,
        MathFn::Log1p,
        MathFn::Asin,
        MathFn::Acos,
    ];

    /// The function C calls `name` (the double name: `sqrt`, not `sqrtf`).
    pub fn from_name(name: &str) -> Option<MathFn> {
        MathFn::ALL.into_iter().find(|f| f.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            MathFn::Sqrt => "sqrt",
            MathFn::Exp => "exp",
            MathFn::Exp2 => "exp2",
            MathFn::Log => "log",
            MathFn::Log2 => "log2",
            MathFn::Log10 => "log10",
            MathFn::Pow => "pow",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Atan => "atan",
            MathFn::Fmod => "fmod",
            MathFn::Hypot => "hypot",
            MathFn::Atan2 => "atan2",
            MathFn::Cbrt => "cbrt",
            MathFn::Sinh => "sinh",
            MathFn::Cosh => "cosh",
            MathFn::Tanh => "tanh",
            MathFn::Expm1 => "expm1",
            MathFn::Log1p => "log1p",
            MathFn::Asin => "asin",
            MathFn::Acos => "acos",
        }
    }

    pub fn arity(self) -> usize {
        match self {
            MathFn::Pow | MathFn::Fmod | MathFn::Hypot | MathFn::Atan2 => 2,
            _ => 1,
        }
    }

    /// The exception kinds this function can raise on finite arguments, in a fixed order.
    pub fn exception_kinds(self) -> &'static [ExceptionKind] {
        use ExceptionKind::*;
        match self {
            MathFn::Sqrt | MathFn::Fmod => &[Invalid],
            MathFn::Exp | MathFn::Exp2 => &[Overflow, Underflow],
            MathFn::Log | MathFn::Log2 | MathFn::Log10 => &[Invalid, DivideByZero],
            MathFn::Pow => &[Invalid, DivideByZero, Overflow, Underflow],
            MathFn::Hypot | MathFn::Sinh | MathFn::Cosh | MathFn::Expm1 => &[Overflow],
            MathFn::Log1p => &[Invalid, DivideByZero],
            MathFn::Asin | MathFn::Acos => &[Invalid],
            MathFn::Sin
            | MathFn::Cos
            | MathFn::Tan
            | MathFn::Atan
            | MathFn::Atan2
            | MathFn::Cbrt
            | MathFn::Tanh => &[],
        }
    }

    /// Whether this function raises `kind` on the finite arguments `args`, whose IEEE result (the C library's,
    /// [`ieee_math`]) is `r`; `min_normal` is the format's smallest normal number. C Annex F: a pole is
    /// divide-by-zero, an argument outside the domain invalid, an infinite result of a finite argument overflow, a
    /// tiny nonzero-argument result underflow. Must agree with [`MathFn::exception_kinds`] (a test checks it).
    pub fn ieee_raises(self, kind: ExceptionKind, args: &[f64], r: f64, min_normal: f64) -> bool {
        use ExceptionKind::*;
        let x = args.first().copied().unwrap_or(0.0);
        let y = args.get(1).copied().unwrap_or(0.0);
        let tiny = r.abs() < min_normal;
        match (self, kind) {
            (MathFn::Sqrt, Invalid) => x < 0.0,
            (MathFn::Fmod, Invalid) => y == 0.0,
            (MathFn::Exp | MathFn::Exp2, Overflow) => r.is_infinite(),
            (MathFn::Exp | MathFn::Exp2, Underflow) => tiny && x != 0.0,
            (MathFn::Log | MathFn::Log2 | MathFn::Log10, Invalid) => x < 0.0,
            (MathFn::Log | MathFn::Log2 | MathFn::Log10, DivideByZero) => x == 0.0,
            (MathFn::Pow, Invalid) => x < 0.0 && y.fract() != 0.0,
            (MathFn::Pow, DivideByZero) => x == 0.0 && y < 0.0,
            (MathFn::Pow, Overflow) => x != 0.0 && r.is_infinite(),
            (MathFn::Pow, Underflow) => tiny && x != 0.0 && y != 0.0 && r.is_finite(),
            (MathFn::Hypot | MathFn::Sinh | MathFn::Cosh | MathFn::Expm1, Overflow) => {
                r.is_infinite()
            }
            (MathFn::Log1p, Invalid) => x < -1.0,
            (MathFn::Log1p, DivideByZero) => x == -1.0,
            (MathFn::Asin | MathFn::Acos, Invalid) => x.abs() > 1.0,
            _ => false,
        }
    }
}

/// An elementary function evaluated in IEEE arithmetic of `fmt`, as the system libm computes it.
pub fn ieee_math(func: MathFn, fmt: FloatFormat, args: &[f64]) -> f64 {
    let x = args.first().copied().unwrap_or(0.0);
    let y = args.get(1).copied().unwrap_or(0.0);
    // One table for both widths: the same Rust methods exist on `f32` and `f64`.
    macro_rules! evaluate {
        ($x:expr, $y:expr) => {{
            let (x, y) = ($x, $y);
            match func {
                MathFn::Sqrt => x.sqrt(),
                MathFn::Exp => x.exp(),
                MathFn::Exp2 => x.exp2(),
                MathFn::Log => x.ln(),
                MathFn::Log2 => x.log2(),
                MathFn::Log10 => x.log10(),
                MathFn::Pow => x.powf(y),
                MathFn::Sin => x.sin(),
                MathFn::Cos => x.cos(),
                MathFn::Tan => x.tan(),
                MathFn::Atan => x.atan(),
                MathFn::Fmod => x % y,
                MathFn::Hypot => x.hypot(y),
                MathFn::Atan2 => x.atan2(y),
                MathFn::Cbrt => x.cbrt(),
                MathFn::Sinh => x.sinh(),
                MathFn::Cosh => x.cosh(),
                MathFn::Tanh => x.tanh(),
                MathFn::Expm1 => x.exp_m1(),
                MathFn::Log1p => x.ln_1p(),
                MathFn::Asin => x.asin(),
                MathFn::Acos => x.acos(),
            }
        }};
    }
    match fmt {
        FloatFormat::Single => evaluate!(x as f32, y as f32) as f64,
        FloatFormat::Double => evaluate!(x, y),
    }
}

#[cfg(test)]
mod tests {
    use super::MathFn;

    #[test]
    fn every_function_is_found_by_its_name() {
        for f in MathFn::ALL {
            assert_eq!(MathFn::from_name(f.name()), Some(f));
        }
        assert_eq!(MathFn::from_name("sqrtf"), None);
    }
}
