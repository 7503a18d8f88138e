//! Exception conditions: when an operation raises an IEEE exception, over the reals, and the side
//! constraints that tie an elementary function's fresh value to its arguments.

use super::*;

// ---------------------------------------------------------------------------------------------------------
// Exception conditions (Table I of the FOE notes, with round-to-nearest thresholds; Ariadne Fig. 3.3)
// ---------------------------------------------------------------------------------------------------------

/// The exception `kind` at `site`: the atom, or a constant when the real condition folds to one.
pub fn exception(kind: ExceptionKind, site: Site) -> Formula {
    let condition = real_condition(kind, &site);
    if condition.is_const() {
        return condition;
    }
    mk(Kind::Exception { kind, site })
}

/// |e| ≥ t for a constant t > 0.
fn abs_ge(e: &Expr, t: &BigRational) -> Expr {
    or([ge(e.clone(), real(t.clone())), le(e.clone(), real(-t))])
}

/// 0 < |e| < t for a constant t > 0.
fn abs_tiny(e: &Expr, t: &BigRational) -> Expr {
    let zero = real_i(0);
    or([
        and([lt(zero.clone(), e.clone()), lt(e.clone(), real(t.clone()))]),
        and([lt(real(-t), e.clone()), lt(e.clone(), zero)]),
    ])
}

fn rational_f64(v: f64) -> BigRational {
    f64_to_rational(v)
}

/// [`real_condition`] of an exception atom (`Kind::Exception`), remembered per thread by the atom's fingerprint;
/// `None` for any other node. For the solver only: interval refutation expands the same atom in every box it
/// examines (a few per cent of a solver thread's time went to building them again). The model calls
/// [`real_condition`] itself, so the terms it counts as its work do not depend on what a thread solved before.
pub fn atom_condition(atom: &Expr) -> Option<Formula> {
    let Kind::Exception { kind, site } = atom.kind() else {
        return None;
    };
    thread_local! {
        static KNOWN: PerThread<u128, Formula> = Default::default();
    }
    Some(remembered(&KNOWN, &atom.fingerprint(), || {
        real_condition(*kind, site)
    }))
}

/// The condition over the reals under which `site` raises `kind` (false when it cannot). Overflow, underflow and
/// division by zero also require the operands to be finite (|a| ≤ Ω): an operation on an infinity raises none of
/// them.
pub fn real_condition(kind: ExceptionKind, site: &Site) -> Formula {
    let core = operation_condition(kind, site);
    let needs_finite = match kind {
        ExceptionKind::Overflow | ExceptionKind::Underflow => true,
        // Only a finite non-zero dividend divided by zero signals division by zero.
        ExceptionKind::DivideByZero => site.op == SiteOp::Arith(ArithOp::Div),
        ExceptionKind::Invalid => false,
    };
    if !needs_finite || core.is_false() {
        return core;
    }
    // The operands are finite (Ω of their own format); parameters already are. Earlier operations are not
    // constrained: that would be the negation of earlier exception conditions, which makes formulae large.
    let mut finite = Vec::new();
    for arg in &site.args {
        let fmt = match arg.kind() {
            Kind::Arith { fmt, .. } | Kind::Fma { fmt, .. } | Kind::Convert { fmt, .. } => *fmt,
            Kind::Math {
                func:
                    MathFn::Exp
                    | MathFn::Exp2
                    | MathFn::Pow
                    | MathFn::Tan
                    | MathFn::Hypot
                    | MathFn::Sinh
                    | MathFn::Cosh
                    | MathFn::Expm1,
                fmt,
                ..
            } => *fmt,
            _ => continue,
        };
        let max = max_finite(fmt);
        finite.push(le(arg.clone(), real(max.clone())));
        finite.push(ge(arg.clone(), real(-max)));
    }
    and(finite.into_iter().chain([core]))
}

/// The exception condition proper of Table I (and Figure 3.3 for elementary functions).
fn operation_condition(kind: ExceptionKind, site: &Site) -> Formula {
    use ExceptionKind::*;
    let fmt = site.fmt;
    let big = overflow_threshold(fmt);
    let tiny = min_normal(fmt);
    let zero = || real_i(0);
    let arg = |i: usize| site.args.get(i).cloned().unwrap_or_else(zero);
    match (site.op, kind) {
        (SiteOp::Arith(ArithOp::Div), _) => {
            let (x, y) = (arg(0), arg(1));
            match kind {
                Invalid => and([eq(x, zero()), eq(y, zero())]),
                DivideByZero => and([ne(x, zero()), eq(y, zero())]),
                Overflow => {
                    // |x| ≥ |y|·T, y ≠ 0, split on the sign of y.
                    let yt = exact(ArithOp::Mul, y.clone(), real(big));
                    let neg_yt = neg(yt.clone());
                    or([
                        and([
                            gt(y.clone(), zero()),
                            or([ge(x.clone(), yt.clone()), le(x.clone(), neg_yt.clone())]),
                        ]),
                        and([lt(y, zero()), or([ge(x.clone(), neg_yt), le(x, yt)])]),
                    ])
                }
                Underflow => {
                    // 0 < |x| < |y|·λ.
                    let yl = exact(ArithOp::Mul, y.clone(), real(tiny));
                    let neg_yl = neg(yl.clone());
                    and([
                        ne(x.clone(), zero()),
                        or([
                            and([
                                gt(y.clone(), zero()),
                                lt(neg_yl.clone(), x.clone()),
                                lt(x.clone(), yl.clone()),
                            ]),
                            and([lt(y, zero()), lt(yl, x.clone()), lt(x, neg_yl)]),
                        ]),
                    ])
                }
            }
        }
        (SiteOp::Arith(op), Overflow | Underflow) => {
            let r = exact(op, arg(0), arg(1));
            if kind == Overflow {
                abs_ge(&r, &big)
            } else {
                abs_tiny(&r, &tiny)
            }
        }
        (SiteOp::Fma, Overflow | Underflow) => {
            let r = exact(ArithOp::Add, exact(ArithOp::Mul, arg(0), arg(1)), arg(2));
            if kind == Overflow {
                abs_ge(&r, &big)
            } else {
                abs_tiny(&r, &tiny)
            }
        }
        (SiteOp::Narrow, Overflow) => abs_ge(&arg(0), &big),
        (SiteOp::Narrow, Underflow) => abs_tiny(&arg(0), &tiny),
        (SiteOp::FpToInt { bits, signed }, Invalid) => {
            // Valid iff the value truncated toward zero fits: −2^(w−1) − 1 < x < 2^(w−1), or −1 < x < 2^w.
            let x = arg(0);
            let (lo, hi) = if signed {
                let half = BigInt::one() << (bits as usize - 1);
                (-half.clone() - 1, half)
            } else {
                (BigInt::from(-1), BigInt::one() << bits as usize)
            };
            or([
                le(x.clone(), real(BigRational::from_integer(lo))),
                ge(x, real(BigRational::from_integer(hi))),
            ])
        }
        (SiteOp::Math(func), _) => math_condition(func, fmt, kind, &site.args),
        _ => fals(),
    }
}

/// Ariadne's rules for elementary functions, with thresholds of `fmt`.
fn math_condition(func: MathFn, fmt: FloatFormat, kind: ExceptionKind, args: &[Expr]) -> Formula {
    use ExceptionKind::*;
    let zero = || real_i(0);
    let x = args.first().cloned().unwrap_or_else(zero);
    let single = fmt == FloatFormat::Single;
    match (func, kind) {
        (MathFn::Sqrt, Invalid) => lt(x, zero()),
        (MathFn::Fmod, Invalid) => eq(args.get(1).cloned().unwrap_or_else(zero), zero()),
        (MathFn::Exp, Overflow) => {
            // ln(Ω): 709.782712893384 / 88.72283905206835 (the double just below the true value)
            gt(
                x,
                real(rational_f64(if single {
                    88.72283905206835
                } else {
                    709.782712893384
                })),
            )
        }
        (MathFn::Exp, Underflow) => {
            // ln(λ): −708.3964185322641 / −87.33654475055310
            lt(
                x,
                real(rational_f64(if single {
                    -87.3365447505531
                } else {
                    -708.3964185322641
                })),
            )
        }
        (MathFn::Expm1, Overflow) => gt(
            x,
            real(rational_f64(if single {
                88.72283905206835
            } else {
                709.782712893384
            })),
        ),
        // |x| > asinh(Ω) = acosh(Ω) ≈ ln(2Ω): 710.4758600739439 / 89.41598629223294 (doubles below the value).
        (MathFn::Sinh | MathFn::Cosh, Overflow) => {
            let t = real(rational_f64(if single {
                89.41598629223294
            } else {
                710.4758600739439
            }));
            or([gt(x.clone(), t.clone()), lt(x, neg(t))])
        }
        (MathFn::Hypot, Overflow) => {
            let y = args.get(1).cloned().unwrap_or_else(zero);
            let big = overflow_threshold(fmt);
            let squares = exact(
                ArithOp::Add,
                exact(ArithOp::Mul, x.clone(), x),
                exact(ArithOp::Mul, y.clone(), y),
            );
            ge(squares, real(&big * &big))
        }
        (MathFn::Log1p, Invalid) => lt(x, real_i(-1)),
        (MathFn::Log1p, DivideByZero) => eq(x, real_i(-1)),
        (MathFn::Asin | MathFn::Acos, Invalid) => or([gt(x.clone(), real_i(1)), lt(x, real_i(-1))]),
        (MathFn::Exp2, Overflow) => ge(x, real_i(if single { 128 } else { 1024 })),
        (MathFn::Exp2, Underflow) => lt(x, real_i(if single { -126 } else { -1022 })),
        (MathFn::Log | MathFn::Log2 | MathFn::Log10, Invalid) => lt(x, zero()),
        (MathFn::Log | MathFn::Log2 | MathFn::Log10, DivideByZero) => eq(x, zero()),
        (MathFn::Pow, _) => {
            let y = args.get(1).cloned().unwrap_or_else(zero);
            match kind {
                // A negative base with a non-integral exponent.
                Invalid => and([lt(x, zero()), not(is_int(y))]),
                DivideByZero => and([eq(x, zero()), lt(y, zero())]),
                // Sufficient conditions: 2^129 / 2^1025 overflow, 2^-160 / 2^-1080 underflow (inexactly).
                Overflow => and([
                    ge(x, real_i(2)),
                    ge(y, real_i(if single { 129 } else { 1025 })),
                ]),
                Underflow => and([
                    ge(x, real_i(2)),
                    le(y, real_i(if single { -160 } else { -1080 })),
                ]),
            }
        }
        _ => fals(),
    }
}

/// Facts that tie the fresh value of an elementary function (or an unmodelled integer) to its arguments;
/// every query mentioning `e` must include them.
pub fn side_constraints(e: &Expr) -> Vec<Formula> {
    match e.kind() {
        Kind::Math { func, args, .. } => math_side_constraints(*func, args, e.clone()),
        Kind::Opaque { op, args, .. } if op == FLOOR_POW2 => floor_pow2_side_constraints(e, args),
        Kind::Opaque { bits, .. } => {
            let half = BigInt::one() << (*bits as usize - 1);
            vec![ge(e.clone(), int(-half.clone())), lt(e.clone(), int(half))]
        }
        _ => vec![],
    }
}

/// What is known of `d`, the value of `func` at `args`: bounds and monotonicity, exact equations for `sqrt`,
/// `hypot` and `cbrt`.
fn math_side_constraints(func: MathFn, args: &[Expr], d: Expr) -> Vec<Formula> {
    let zero = || real_i(0);
    let one = || real_i(1);
    let x = args.first().cloned().unwrap_or_else(zero);
    match func {
        MathFn::Sqrt => vec![
            ge(d.clone(), zero()),
            eq(exact(ArithOp::Mul, d.clone(), d), x),
        ],
        MathFn::Exp | MathFn::Exp2 => vec![
            gt(d.clone(), zero()),
            implies(ge(x.clone(), zero()), ge(d.clone(), one())),
            implies(le(x.clone(), zero()), le(d.clone(), one())),
            if func == MathFn::Exp {
                ge(d, exact(ArithOp::Add, one(), x))
            } else {
                tru()
            },
        ],
        MathFn::Log | MathFn::Log2 | MathFn::Log10 => vec![
            gt(x.clone(), zero()),
            implies(ge(x.clone(), one()), ge(d.clone(), zero())),
            implies(le(x.clone(), one()), le(d.clone(), zero())),
            if func == MathFn::Log {
                le(d, exact(ArithOp::Sub, x, one()))
            } else {
                tru()
            },
        ],
        MathFn::Sin | MathFn::Cos => vec![ge(d.clone(), real_i(-1)), le(d, one())],
        MathFn::Atan | MathFn::Asin => vec![gt(d.clone(), real_i(-2)), lt(d, real_i(2))],
        MathFn::Atan2 => vec![gt(d.clone(), real_i(-4)), lt(d, real_i(4))],
        MathFn::Acos => vec![ge(d.clone(), zero()), lt(d, real_i(4))],
        MathFn::Tanh => vec![ge(d.clone(), real_i(-1)), le(d, one())],
        // Exact like sqrt: d ≥ 0, d·d = x² + y²; d³ = x.
        MathFn::Hypot => {
            let y = args.get(1).cloned().unwrap_or_else(zero);
            vec![
                ge(d.clone(), zero()),
                eq(
                    exact(ArithOp::Mul, d.clone(), d),
                    exact(
                        ArithOp::Add,
                        exact(ArithOp::Mul, x.clone(), x),
                        exact(ArithOp::Mul, y.clone(), y),
                    ),
                ),
            ]
        }
        MathFn::Cbrt => vec![eq(
            exact(ArithOp::Mul, exact(ArithOp::Mul, d.clone(), d.clone()), d),
            x,
        )],
        // sinh x has the sign of x and |sinh x| ≥ |x|; cosh x ≥ 1; expm1 x ≥ x and > -1.
        MathFn::Sinh => vec![
            implies(ge(x.clone(), zero()), ge(d.clone(), x.clone())),
            implies(le(x.clone(), zero()), le(d, x)),
        ],
        MathFn::Cosh => vec![ge(d, one())],
        MathFn::Expm1 => vec![gt(d.clone(), real_i(-1)), ge(d, x)],
        // Defined for x > -1, and log1p x ≤ x.
        MathFn::Log1p => vec![gt(x.clone(), real_i(-1)), le(d, x)],
        MathFn::Tan => vec![],
        MathFn::Pow => {
            let y = args.get(1).cloned().unwrap_or_else(zero);
            vec![
                implies(gt(x, zero()), gt(d.clone(), zero())),
                implies(eq(y, zero()), eq(d, one())),
            ]
        }
        MathFn::Fmod => {
            let y = args.get(1).cloned().unwrap_or_else(zero);
            vec![
                lt(
                    exact(ArithOp::Mul, d.clone(), d.clone()),
                    exact(ArithOp::Mul, y.clone(), y),
                ),
                ge(exact(ArithOp::Mul, d, x), zero()),
            ]
        }
    }
}

/// The bounds of `e` = `⌊x / 2^k⌋` (arguments `x` and the constant `k`); none when `k` is not a constant.
fn floor_pow2_side_constraints(e: &Expr, args: &[Expr]) -> Vec<Formula> {
    let (Some(x), Some(k)) = (args.first(), args.get(1).and_then(|k| k.as_int()?.to_u32())) else {
        return vec![];
    };
    // 2^k q <= x < 2^k q + 2^k
    let scale = int(BigInt::one() << k as usize);
    let scaled = mk(Kind::IntArith {
        op: IntOp::Mul,
        a: scale.clone(),
        b: e.clone(),
    });
    let next = mk(Kind::IntArith {
        op: IntOp::Add,
        a: scaled.clone(),
        b: scale,
    });
    vec![le(scaled, x.clone()), lt(x.clone(), next)]
}
