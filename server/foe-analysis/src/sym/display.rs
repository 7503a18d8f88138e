//! Display of terms: an SMT-LIB-like prefix form, cut off when large.

use super::*;

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut budget = 2000usize;
        write_expr(self, f, &mut budget)
    }
}

fn write_expr(e: &Expr, f: &mut fmt::Formatter<'_>, budget: &mut usize) -> fmt::Result {
    if *budget == 0 {
        return write!(f, "…");
    }
    *budget -= 1;
    let head: String = match e.kind() {
        Kind::RealConst(q) => {
            let v = const_f64(q);
            return if q.is_integer()
                && q.abs() < BigRational::from_integer(BigInt::from(1u64 << 53))
            {
                write!(f, "{}", q.to_integer())
            } else if f64_to_rational(v) == *q || !v.is_finite() {
                write!(f, "{v:e}")
            } else {
                write!(f, "~{v:e}")
            };
        }
        Kind::IntConst(i) => return write!(f, "{i}"),
        Kind::BoolConst(b) => return write!(f, "{b}"),
        Kind::Param { index, ty } => {
            return match ty {
                VarType::Float(_) => write!(f, "x{index}"),
                VarType::Int { .. } => write!(f, "n{index}"),
            }
        }
        Kind::Arith { op, .. } => op.symbol().to_string(),
        Kind::Neg(_) => "-".into(),
        Kind::Abs(_) => "abs".into(),
        Kind::Fma { .. } => "fma".into(),
        Kind::Convert { fmt, .. } => format!(
            "to_{}",
            if *fmt == FloatFormat::Single {
                "f32"
            } else {
                "f64"
            }
        ),
        Kind::Math { func, .. } => func.name().into(),
        Kind::ToIntegral { mode, .. } => format!("{mode:?}").to_lowercase(),
        Kind::FpToInt { bits, signed, .. } => {
            format!("fpto{}i{bits}", if *signed { "s" } else { "u" })
        }
        Kind::IntToReal(_) => "to_real".into(),
        Kind::IntArith { op, .. } => match op {
            IntOp::Add => "+i",
            IntOp::Sub => "-i",
            IntOp::Mul => "*i",
        }
        .into(),
        Kind::Unsigned { bits, .. } => format!("u{bits}"),
        Kind::Opaque { op, bits, .. } => format!("{op}.i{bits}"),
        Kind::IsInt(_) => "is_int".into(),
        Kind::Ite { .. } => "ite".into(),
        Kind::Cmp { op, .. } => match op {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "=",
        }
        .into(),
        Kind::Not(_) => "not".into(),
        Kind::And(_) => "and".into(),
        Kind::Or(_) => "or".into(),
        Kind::Exception { kind, site } => {
            let op = match site.op {
                SiteOp::Arith(op) => op.symbol().to_string(),
                SiteOp::Fma => "fma".into(),
                SiteOp::Narrow => "fptrunc".into(),
                SiteOp::FpToInt { .. } => "fptoi".into(),
                SiteOp::Math(m) => m.name().into(),
            };
            format!("{kind}@{op}")
        }
    };
    write!(f, "({head}")?;
    for c in e.children() {
        write!(f, " ")?;
        write_expr(c, f, budget)?;
    }
    write!(f, ")")
}
