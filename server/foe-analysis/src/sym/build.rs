//! The term constructors: constants and format thresholds, real, integer and boolean nodes. Every
//! constructor folds constants, so a condition that cannot hold comes out as the constant `false`.

use super::*;

// ---------------------------------------------------------------------------------------------------------

pub fn real(q: BigRational) -> Expr {
    mk(Kind::RealConst(q))
}
pub fn real_i(n: i64) -> Expr {
    real(BigRational::from_integer(n.into()))
}
/// The exact value of a finite double (or of a float widened to double).
pub fn real_f64(v: f64) -> Expr {
    real(f64_to_rational(v))
}
pub fn int(n: BigInt) -> Expr {
    mk(Kind::IntConst(n))
}
pub fn int_i(n: i64) -> Expr {
    int(BigInt::from(n))
}
pub fn boolean(b: bool) -> Expr {
    mk(Kind::BoolConst(b))
}
pub fn tru() -> Expr {
    boolean(true)
}
pub fn fals() -> Expr {
    boolean(false)
}
pub fn param(index: u32, ty: VarType) -> Expr {
    mk(Kind::Param { index, ty })
}

pub(super) fn pow2(e: i64) -> BigRational {
    if e >= 0 {
        BigRational::from_integer(BigInt::one() << e as usize)
    } else {
        BigRational::new(BigInt::one(), BigInt::one() << (-e) as usize)
    }
}

/// Ω, the largest finite value of `fmt`.
pub fn max_finite(fmt: FloatFormat) -> BigRational {
    match fmt {
        FloatFormat::Double => f64_to_rational(f64::MAX),
        FloatFormat::Single => f64_to_rational(f32::MAX as f64),
    }
}

/// Ω + 2^(emax−p): the smallest real that rounds to infinity under round-to-nearest-even.
pub fn overflow_threshold(fmt: FloatFormat) -> BigRational {
    match fmt {
        FloatFormat::Double => max_finite(fmt) + pow2(970),
        FloatFormat::Single => max_finite(fmt) + pow2(103),
    }
}

/// λ, the smallest positive normal value of `fmt`.
pub fn min_normal(fmt: FloatFormat) -> BigRational {
    match fmt {
        FloatFormat::Double => pow2(-1022),
        FloatFormat::Single => pow2(-126),
    }
}

/// The smallest positive subnormal value of `fmt`.
pub fn min_subnormal(fmt: FloatFormat) -> BigRational {
    match fmt {
        FloatFormat::Double => pow2(-1074),
        FloatFormat::Single => pow2(-149),
    }
}

/// The exact value `q` rounded to `fmt`, if finite.
fn round_to(q: &BigRational, fmt: FloatFormat) -> Option<BigRational> {
    let v = round_rational(q, fmt);
    v.is_finite().then(|| f64_to_rational(v))
}

// ---------------------------------------------------------------------------------------------------------
// Real-valued constructors (fold constants)
// ---------------------------------------------------------------------------------------------------------

/// The exact real `a op b` over constants (None for a division by zero).
fn exact_arith(op: ArithOp, a: &BigRational, b: &BigRational) -> Option<BigRational> {
    Some(match op {
        ArithOp::Add => a + b,
        ArithOp::Sub => a - b,
        ArithOp::Mul => a * b,
        ArithOp::Div => {
            if b.is_zero() {
                return None;
            }
            a / b
        }
    })
}

/// An IEEE operation of `fmt`: over constants the correctly rounded result (as the program computes it),
/// otherwise the exact real term.
pub fn arith(op: ArithOp, fmt: FloatFormat, a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_real(), b.as_real()) {
        if let Some(r) = exact_arith(op, x, y).and_then(|r| round_to(&r, fmt)) {
            return real(r);
        }
    }
    mk(Kind::Arith { op, fmt, a, b })
}

/// The exact real `a op b` (constants fold without rounding); used inside exception conditions.
pub fn exact(op: ArithOp, a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_real(), b.as_real()) {
        if let Some(r) = exact_arith(op, x, y) {
            return real(r);
        }
    }
    // The format is irrelevant to the real reading; Double marks "exact helper".
    mk(Kind::Arith {
        op,
        fmt: FloatFormat::Double,
        a,
        b,
    })
}

pub fn neg(a: Expr) -> Expr {
    match a.kind() {
        Kind::RealConst(q) => real(-q),
        _ => mk(Kind::Neg(a)),
    }
}

pub fn abs(a: Expr) -> Expr {
    match a.kind() {
        Kind::RealConst(q) => real(q.abs()),
        _ => mk(Kind::Abs(a)),
    }
}

pub fn fma(fmt: FloatFormat, a: Expr, b: Expr, c: Expr) -> Expr {
    if let (Some(x), Some(y), Some(z)) = (a.as_real(), b.as_real(), c.as_real()) {
        if let Some(r) = round_to(&(x * y + z), fmt) {
            return real(r);
        }
    }
    mk(Kind::Fma { fmt, a, b, c })
}

/// A conversion to `fmt` of a real (`fpext`, `fptrunc`) or of an integer (`sitofp`; `uitofp` passes
/// [`unsigned`] of it).
pub fn convert(fmt: FloatFormat, a: Expr) -> Expr {
    let exact = match a.kind() {
        Kind::RealConst(q) => Some(q.clone()),
        Kind::IntConst(i) => Some(BigRational::from_integer(i.clone())),
        _ => None,
    };
    if let Some(q) = exact {
        if let Some(r) = round_to(&q, fmt) {
            return real(r);
        }
    }
    // Widening a real changes nothing; keep the node only where rounding can happen.
    if let Kind::Convert { fmt: inner, .. } | Kind::Arith { fmt: inner, .. } = a.kind() {
        if *inner == fmt {
            return a;
        }
    }
    mk(Kind::Convert { fmt, a })
}

pub fn math(func: MathFn, fmt: FloatFormat, args: Vec<Expr>) -> Expr {
    mk(Kind::Math { func, fmt, args })
}

pub fn to_integral(mode: Integral, fmt: FloatFormat, a: Expr) -> Expr {
    if let Some(q) = a.as_real() {
        let r = match mode {
            Integral::Floor => q.floor(),
            Integral::Ceil => q.ceil(),
            Integral::Trunc => q.trunc(),
            Integral::Round => q.round(),
        };
        return real(r);
    }
    mk(Kind::ToIntegral { mode, fmt, a })
}

pub fn int_to_real(a: Expr) -> Expr {
    match a.kind() {
        Kind::IntConst(i) => real(BigRational::from_integer(i.clone())),
        _ => mk(Kind::IntToReal(a)),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Integer constructors
// ---------------------------------------------------------------------------------------------------------

/// `v` wrapped into the signed range of `bits` (two's complement).
pub fn wrap_signed(v: &BigInt, bits: u32) -> BigInt {
    let modulus = BigInt::one() << bits as usize;
    let half = BigInt::one() << (bits as usize - 1);
    let mut r = v % &modulus;
    if r.is_negative() {
        r += &modulus;
    }
    if r >= half {
        r -= modulus;
    }
    r
}

/// `v` (signed form) read as unsigned of `bits`.
pub fn to_unsigned_value(v: &BigInt, bits: u32) -> BigInt {
    if v.is_negative() {
        v + (BigInt::one() << bits as usize)
    } else {
        v.clone()
    }
}

/// Integer `a op b` of `bits` width: wraps exactly over constants, unbounded over symbolic operands.
pub fn int_arith(op: IntOp, bits: u32, a: Expr, b: Expr) -> Expr {
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        let r = match op {
            IntOp::Add => x + y,
            IntOp::Sub => x - y,
            IntOp::Mul => x * y,
        };
        return int(wrap_signed(&r, bits));
    }
    match (op, a.as_int(), b.as_int()) {
        (IntOp::Add, _, Some(y)) | (IntOp::Sub, _, Some(y)) if y.is_zero() => return a,
        (IntOp::Add, Some(x), _) if x.is_zero() => return b,
        (IntOp::Mul, _, Some(y)) if y.is_one() => return a,
        (IntOp::Mul, Some(x), _) if x.is_one() => return b,
        _ => {}
    }
    mk(Kind::IntArith { op, a, b })
}

/// The unsigned reading of a signed-form integer of `bits`.
pub fn unsigned(bits: u32, a: Expr) -> Expr {
    match a.kind() {
        Kind::IntConst(i) => int(to_unsigned_value(i, bits)),
        Kind::Unsigned { .. } => a,
        _ => mk(Kind::Unsigned { bits, a }),
    }
}

/// The name of the opaque integer `⌊x / 2^k⌋` (arguments `x` and the constant `k`), tied to `x` by
/// [`side_constraints`]: what a mask of low bits needs (`x & -4` is `4⌊x/4⌋`, as a vectorised loop's trip count).
pub const FLOOR_POW2: &str = "floor/2^k";

/// `⌊x / 2^k⌋` of a `bits`-wide integer in signed form.
pub fn floor_pow2(bits: u32, x: Expr, k: u32) -> Expr {
    if let Some(v) = x.as_int() {
        return int(v >> k as usize);
    }
    opaque(FLOOR_POW2, bits, vec![x, int_i(k as i64)])
}

/// `x & m` for a constant `m` whose unsigned form is one run of ones, bits `k` to `j - 1` (`-4`, `0x7ffffffc`,
/// `3`): `2^k⌊x/2^k⌋ - 2^j⌊x/2^j⌋`, exact over the signed form (two's complement); `None` for other masks.
pub fn and_mask(bits: u32, x: Expr, m: &BigInt) -> Option<Expr> {
    let u = to_unsigned_value(m, bits);
    if u.is_zero() {
        return Some(int_i(0));
    }
    let k = u.trailing_zeros()? as u32;
    let run = &u >> k as usize;
    let ones = run.bits() as u32;
    if run != (BigInt::one() << ones as usize) - 1 {
        return None;
    }
    let j = k + ones;
    let low = |x: Expr| {
        let q = floor_pow2(bits, x, k);
        int_arith(IntOp::Mul, bits, int(BigInt::one() << k as usize), q)
    };
    let kept = if k == 0 { x.clone() } else { low(x.clone()) };
    if j >= bits {
        return Some(kept);
    }
    let high = int_arith(
        IntOp::Mul,
        bits,
        int(BigInt::one() << j as usize),
        floor_pow2(bits, x, j),
    );
    Some(int_arith(IntOp::Sub, bits, kept, high))
}

pub fn opaque(op: &str, bits: u32, args: Vec<Expr>) -> Expr {
    mk(Kind::Opaque {
        op: op.to_string(),
        bits,
        args,
    })
}

/// Truncation toward zero of a real to an integer (`fptosi`/`fptoui`).
pub fn fp_to_int(bits: u32, signed: bool, a: Expr) -> Expr {
    if let Some(q) = a.as_real() {
        let t = q.trunc().to_integer();
        let in_range = if signed {
            let half = BigInt::one() << (bits as usize - 1);
            t >= -half.clone() && t < half
        } else {
            !t.is_negative() && t < (BigInt::one() << bits as usize)
        };
        if in_range {
            // Held in signed form like every other integer.
            return int(wrap_signed(&t, bits));
        }
    }
    mk(Kind::FpToInt { bits, signed, a })
}

// ---------------------------------------------------------------------------------------------------------
// Boolean constructors
// ---------------------------------------------------------------------------------------------------------

fn const_cmp(op: CmpOp, a: &Expr, b: &Expr) -> Option<bool> {
    let ord = match (a.kind(), b.kind()) {
        (Kind::RealConst(x), Kind::RealConst(y)) => x.cmp(y),
        (Kind::IntConst(x), Kind::IntConst(y)) => x.cmp(y),
        _ => {
            if a == b {
                return Some(op != CmpOp::Lt);
            }
            return None;
        }
    };
    Some(match op {
        CmpOp::Lt => ord.is_lt(),
        CmpOp::Le => ord.is_le(),
        CmpOp::Eq => ord.is_eq(),
    })
}

pub fn cmp(op: CmpOp, a: Expr, b: Expr) -> Expr {
    match const_cmp(op, &a, &b) {
        Some(v) => boolean(v),
        None => mk(Kind::Cmp { op, a, b }),
    }
}
pub fn lt(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Lt, a, b)
}
pub fn le(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Le, a, b)
}
pub fn gt(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Lt, b, a)
}
pub fn ge(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Le, b, a)
}
pub fn eq(a: Expr, b: Expr) -> Expr {
    cmp(CmpOp::Eq, a, b)
}
pub fn ne(a: Expr, b: Expr) -> Expr {
    not(eq(a, b))
}

pub fn not(a: Expr) -> Expr {
    match a.kind() {
        Kind::BoolConst(b) => boolean(!b),
        Kind::Not(inner) => inner.clone(),
        _ => mk(Kind::Not(a)),
    }
}

/// Conjunction: flattens nested conjunctions, drops `true` and repeats, and is `false` if any part is.
pub fn and(parts: impl IntoIterator<Item = Expr>) -> Expr {
    let mut out: Vec<Expr> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |e: Expr, out: &mut Vec<Expr>| {
        if seen.insert(e.fingerprint()) {
            out.push(e);
        }
    };
    for p in parts {
        match p.kind() {
            Kind::BoolConst(true) => {}
            Kind::BoolConst(false) => return fals(),
            Kind::And(inner) => {
                for e in inner {
                    push(e.clone(), &mut out);
                }
            }
            _ => push(p, &mut out),
        }
    }
    match out.len() {
        0 => tru(),
        1 => out.pop().expect("one part"),
        _ => mk(Kind::And(out)),
    }
}

/// Disjunction: flattens, drops `false` and repeats, and is `true` if any part is.
pub fn or(parts: impl IntoIterator<Item = Expr>) -> Expr {
    let mut out: Vec<Expr> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in parts {
        match p.kind() {
            Kind::BoolConst(false) => {}
            Kind::BoolConst(true) => return tru(),
            Kind::Or(inner) => {
                for e in inner {
                    if seen.insert(e.fingerprint()) {
                        out.push(e.clone());
                    }
                }
            }
            _ => {
                if seen.insert(p.fingerprint()) {
                    out.push(p)
                }
            }
        }
    }
    match out.len() {
        0 => fals(),
        1 => out.pop().expect("one part"),
        _ => mk(Kind::Or(out)),
    }
}

pub fn implies(a: Expr, b: Expr) -> Expr {
    or([not(a), b])
}

pub fn is_int(a: Expr) -> Expr {
    match a.kind() {
        Kind::RealConst(q) => boolean(q.is_integer()),
        _ => mk(Kind::IsInt(a)),
    }
}

/// `if c then a else b` for any sort.
pub fn ite(c: Expr, a: Expr, b: Expr) -> Expr {
    match c.as_bool() {
        Some(true) => a,
        Some(false) => b,
        None if a == b => a,
        None if a.sort() == Sort::Bool => match (a.as_bool(), b.as_bool()) {
            (Some(true), Some(false)) => c,
            (Some(false), Some(true)) => not(c),
            _ => mk(Kind::Ite { c, a, b }),
        },
        None => mk(Kind::Ite { c, a, b }),
    }
}
