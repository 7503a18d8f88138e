//! Exact rounding of rationals to `double` and `float` (round to nearest, ties to even), and `nextafter` steps.
//!
//! Solver models are exact rationals; rounding them through a decimal string would double-round, so this
//! works on big integers throughout.

use num_bigint::{BigInt, Sign};
use num_rational::BigRational;
use num_traits::{One, Signed, Zero};

/// The binary formats foe handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum FloatFormat {
    Double,
    Single,
}

impl FloatFormat {
    /// Precision in bits, including the hidden bit.
    pub fn precision(self) -> u64 {
        match self {
            FloatFormat::Double => 53,
            FloatFormat::Single => 24,
        }
    }
    /// Exponent of the least significant bit of the smallest subnormal.
    fn min_lsb_exp(self) -> i64 {
        match self {
            FloatFormat::Double => -1074,
            FloatFormat::Single => -149,
        }
    }
    /// Values at or above 2^max_exp overflow.
    fn max_exp(self) -> i64 {
        match self {
            FloatFormat::Double => 1024,
            FloatFormat::Single => 128,
        }
    }
}

/// Rounds `value` to the nearest value of `format` (ties to even), returned as an `f64`
/// (exact for both formats); overflow gives a signed infinity.
pub fn round_rational(value: &BigRational, format: FloatFormat) -> f64 {
    let num = value.numer();
    let den = value.denom();
    if num.is_zero() {
        return 0.0;
    }
    let negative = num.is_negative() != den.is_negative();
    let (num, den) = (num.abs(), den.abs());
    let magnitude = round_positive(&num, &den, format);
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// Rounds `num * 2^shift` to the nearest double.
pub fn bigint_times_pow2_to_f64(num: &BigInt, shift: i32) -> f64 {
    let (n, d) = if shift >= 0 {
        (num << shift as usize, BigInt::one())
    } else {
        (num.clone(), BigInt::one() << (-shift) as usize)
    };
    round_rational(&BigRational::new(n, d), FloatFormat::Double)
}

/// Rounds the positive rational num/den.
fn round_positive(num: &BigInt, den: &BigInt, format: FloatFormat) -> f64 {
    let p = format.precision() as i64;
    // floor(log2(num/den)) is within one of bits(num) - bits(den).
    let mut e = num.bits() as i64 - den.bits() as i64;
    if scaled_cmp(num, den, e) == std::cmp::Ordering::Less {
        e -= 1;
    }
    // Now 2^e <= num/den < 2^(e+1). The lsb exponent is e - (p - 1), clamped for subnormals.
    let lsb = (e - (p - 1)).max(format.min_lsb_exp());
    // m = num / den / 2^lsb, rounded to nearest even.
    let (sn, sd) = if lsb >= 0 {
        (num.clone(), den << lsb as usize)
    } else {
        (num << (-lsb) as usize, den.clone())
    };
    let q = &sn / &sd;
    let r = &sn - &q * &sd;
    let twice_r: BigInt = &r << 1usize;
    let mut m = q;
    match twice_r.cmp(&sd) {
        std::cmp::Ordering::Greater => m += 1,
        std::cmp::Ordering::Equal => {
            if (&m & BigInt::one()) == BigInt::one() {
                m += 1
            }
        }
        std::cmp::Ordering::Less => {}
    }
    // m may have become 2^p; the value is m * 2^lsb either way.
    let bits = m.bits() as i64;
    if bits + lsb > format.max_exp() {
        return f64::INFINITY;
    }
    let (_, digits) = m.to_u64_digits();
    let m = digits.first().copied().unwrap_or(0);
    debug_assert!(digits.len() <= 1);
    ldexp_exact(m as f64, lsb)
}

/// Compares num/den with 2^e.
fn scaled_cmp(num: &BigInt, den: &BigInt, e: i64) -> std::cmp::Ordering {
    if e >= 0 {
        num.cmp(&(den << e as usize))
    } else {
        (num << (-e) as usize).cmp(den)
    }
}

/// m * 2^e for an exactly representable result: one IEEE multiplication by an exact power of two is exact.
fn ldexp_exact(m: f64, e: i64) -> f64 {
    debug_assert!((-1074..=1023).contains(&e));
    let pow2 = if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e + 1074))
    };
    m * pow2
}

/// The exact rational value of a finite double.
pub fn f64_to_rational(v: f64) -> BigRational {
    assert!(v.is_finite(), "only finite values are rational");
    if v == 0.0 {
        return BigRational::zero();
    }
    let bits = v.to_bits();
    let sign = if bits >> 63 == 1 {
        Sign::Minus
    } else {
        Sign::Plus
    };
    let exp = ((bits >> 52) & 0x7ff) as i64;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp - 1075)
    };
    let m = BigInt::from_biguint(sign, m.into());
    if e >= 0 {
        BigRational::from_integer(m << e as usize)
    } else {
        BigRational::new(m, BigInt::one() << (-e) as usize)
    }
}

/// Position of a double on a monotone integer line: ..., -MAX, ..., -0 == +0, ..., MAX (NaN is not placed).
pub fn ordered_f64(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    if b < 0 {
        -(b & i64::MAX)
    } else {
        b
    }
}

/// The double at a position of [`ordered_f64`]'s line.
pub fn from_ordered_f64(o: i64) -> f64 {
    if o < 0 {
        f64::from_bits(((-o) as u64) | (1u64 << 63))
    } else {
        f64::from_bits(o as u64)
    }
}

/// The double `k/n` of the way from `lo` to `hi` on [`ordered_f64`]'s line (counted in doubles, so across
/// binades it is near the geometric mean, within one the arithmetic one).
pub fn between_f64(lo: f64, hi: f64, k: i128, n: i128) -> f64 {
    let (l, h) = (i128::from(ordered_f64(lo)), i128::from(ordered_f64(hi)));
    from_ordered_f64(((l * (n - k) + h * k) / n) as i64)
}

/// As [`ordered_f64`] for `float`.
pub fn ordered_f32(x: f32) -> i64 {
    let b = x.to_bits() as i32 as i64;
    if b < 0 {
        -(b & i32::MAX as i64)
    } else {
        b
    }
}

/// As [`from_ordered_f64`] for `float`.
pub fn from_ordered_f32(o: i64) -> f32 {
    if o < 0 {
        f32::from_bits(((-o) as u32) | (1u32 << 31))
    } else {
        f32::from_bits(o as u32)
    }
}

/// The `k`-th representable neighbour of `v` (negative `k` goes down), like `nextafter` applied |k| times.
/// Infinities and NaN are returned unchanged; the walk stops at ±MAX instead of reaching infinity.
pub fn step_f64(v: f64, k: i64) -> f64 {
    if !v.is_finite() || k == 0 {
        return v;
    }
    let max = ordered_f64(f64::MAX);
    from_ordered_f64((ordered_f64(v) + k).clamp(-max, max))
}

/// As [`step_f64`] for `float`.
pub fn step_f32(v: f32, k: i64) -> f32 {
    if !v.is_finite() || k == 0 {
        return v;
    }
    let max = ordered_f32(f32::MAX);
    from_ordered_f32((ordered_f32(v) + k).clamp(-max, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: i64, d: i64) -> BigRational {
        BigRational::new(n.into(), d.into())
    }

    #[test]
    fn rounds_simple_fractions() {
        assert_eq!(round_rational(&q(1, 3), FloatFormat::Double), 1.0 / 3.0);
        assert_eq!(round_rational(&q(-1, 10), FloatFormat::Double), -0.1);
        assert_eq!(
            round_rational(&q(1, 10), FloatFormat::Single),
            0.1f32 as f64
        );
        assert_eq!(round_rational(&q(7, 1), FloatFormat::Double), 7.0);
    }

    #[test]
    fn rounds_at_extremes() {
        let max = f64_to_rational(f64::MAX);
        assert_eq!(round_rational(&max, FloatFormat::Double), f64::MAX);
        // DBL_MAX + 2^970 is the tie between DBL_MAX and 2^1024: it rounds to infinity (even).
        let half_ulp = BigRational::from_integer(BigInt::one() << 970usize);
        assert_eq!(
            round_rational(&(&max + &half_ulp), FloatFormat::Double),
            f64::INFINITY
        );
        let just_below = &max + &half_ulp - BigRational::new(BigInt::one(), BigInt::from(2));
        assert_eq!(round_rational(&just_below, FloatFormat::Double), f64::MAX);
        let tiny = f64_to_rational(5e-324);
        assert_eq!(round_rational(&tiny, FloatFormat::Double), 5e-324);
        let third_tiny = &tiny / BigRational::from_integer(3.into());
        assert_eq!(round_rational(&third_tiny, FloatFormat::Double), 0.0);
        for v in [1e-310, 2.2250738585072014e-308, 1e300, 123.456, -7.5e-320] {
            assert_eq!(round_rational(&f64_to_rational(v), FloatFormat::Double), v);
        }
    }

    #[test]
    fn steps_through_neighbours() {
        assert_eq!(step_f64(1.0, 1), 1.0 + f64::EPSILON);
        assert_eq!(step_f64(0.0, -1), -5e-324);
        assert_eq!(step_f64(-5e-324, 1), 0.0);
        assert_eq!(step_f64(f64::MAX, 3), f64::MAX);
        assert_eq!(step_f32(1.0, 1), 1.0 + f32::EPSILON);
    }
}
