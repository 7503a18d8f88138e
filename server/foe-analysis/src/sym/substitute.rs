//! Substitution of constants for input parameters: a term with some inputs fixed, rebuilt node by node (shared
//! subterms once). The structure is kept, unfolded: `x / w` with `w` fixed is `x / c`, which Z3 reads as linear.

use super::*;
use std::collections::HashMap;

impl Expr {
    /// `self` with each parameter whose index `values` maps replaced by that term.
    pub fn substitute(&self, values: &HashMap<u32, Expr>) -> Expr {
        let mut done: FingerprintMap<Expr> = FingerprintMap::default();
        for node in self.postorder() {
            let rebuilt = match node.kind() {
                Kind::Param { index, .. } => {
                    values.get(index).cloned().unwrap_or_else(|| node.clone())
                }
                kind => {
                    let new = |e: &Expr| done[&e.fingerprint()].clone();
                    if node.children().iter().all(|c| new(c) == **c) {
                        node.clone()
                    } else {
                        mk(with_children(kind, &new))
                    }
                }
            };
            done.insert(node.fingerprint(), rebuilt);
        }
        done.remove(&self.fingerprint())
            .unwrap_or_else(|| self.clone())
    }
}

/// `kind` with each child replaced by `new(child)`.
fn with_children(kind: &Kind, new: &dyn Fn(&Expr) -> Expr) -> Kind {
    let all = |v: &[Expr]| v.iter().map(new).collect::<Vec<_>>();
    match kind {
        Kind::RealConst(_) | Kind::IntConst(_) | Kind::BoolConst(_) | Kind::Param { .. } => {
            kind.clone()
        }
        Kind::Arith { op, fmt, a, b } => Kind::Arith {
            op: *op,
            fmt: *fmt,
            a: new(a),
            b: new(b),
        },
        Kind::Neg(a) => Kind::Neg(new(a)),
        Kind::Abs(a) => Kind::Abs(new(a)),
        Kind::Fma { fmt, a, b, c } => Kind::Fma {
            fmt: *fmt,
            a: new(a),
            b: new(b),
            c: new(c),
        },
        Kind::Convert { fmt, a } => Kind::Convert {
            fmt: *fmt,
            a: new(a),
        },
        Kind::Math { func, fmt, args } => Kind::Math {
            func: *func,
            fmt: *fmt,
            args: all(args),
        },
        Kind::ToIntegral { mode, fmt, a } => Kind::ToIntegral {
            mode: *mode,
            fmt: *fmt,
            a: new(a),
        },
        Kind::FpToInt { bits, signed, a } => Kind::FpToInt {
            bits: *bits,
            signed: *signed,
            a: new(a),
        },
        Kind::IntToReal(a) => Kind::IntToReal(new(a)),
        Kind::IntArith { op, a, b } => Kind::IntArith {
            op: *op,
            a: new(a),
            b: new(b),
        },
        Kind::Unsigned { bits, a } => Kind::Unsigned {
            bits: *bits,
            a: new(a),
        },
        Kind::Opaque { op, bits, args } => Kind::Opaque {
            op: op.clone(),
            bits: *bits,
            args: all(args),
        },
        Kind::IsInt(a) => Kind::IsInt(new(a)),
        Kind::Ite { c, a, b } => Kind::Ite {
            c: new(c),
            a: new(a),
            b: new(b),
        },
        Kind::Cmp { op, a, b } => Kind::Cmp {
            op: *op,
            a: new(a),
            b: new(b),
        },
        Kind::Not(a) => Kind::Not(new(a)),
        Kind::And(v) => Kind::And(all(v)),
        Kind::Or(v) => Kind::Or(all(v)),
        Kind::Exception { kind, site } => Kind::Exception {
            kind: *kind,
            site: Site {
                op: site.op,
                fmt: site.fmt,
                args: all(&site.args),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::check::Evaluator;
    use crate::types::ArgValue;

    #[test]
    fn a_fixed_input_becomes_its_constant_and_the_rest_is_kept() {
        let ty = VarType::Float(FloatFormat::Double);
        let (x, w) = (param(0, ty), param(1, ty));
        let cell = to_integral(
            Integral::Floor,
            FloatFormat::Double,
            arith(ArithOp::Div, FloatFormat::Double, x, w),
        );
        let f = gt(cell, real_i(2));
        let mut values = HashMap::new();
        values.insert(1, real_f64(0.25));
        let fixed = f.substitute(&values);
        assert_eq!(fixed.params(), vec![(0, ty)]);
        // floor(x / 0.25) > 2 holds from x = 0.75 on; the second input no longer matters
        let holds = |x: f64| Evaluator::new(&fixed).holds(&[ArgValue::F64(x), ArgValue::F64(9.0)]);
        assert_eq!(holds(0.8), Some(true));
        assert_eq!(holds(0.7), Some(false));
        assert_eq!(f.substitute(&HashMap::new()), f);
    }
}
