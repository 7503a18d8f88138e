//! Formatting and parsing of floating-point values: C99 hex floats, 17-digit decimals, short forms.

/// C99 hexadecimal form of a double, as `printf("%a")` prints it (`0x1.8p+1`, `-0x0p+0`, `inf`, `nan`).
pub fn hex_f64(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let sign = if v.is_sign_negative() { "-" } else { "" };
    let bits = v.to_bits();
    let exp_bits = ((bits >> 52) & 0x7ff) as i64;
    let mant = bits & ((1u64 << 52) - 1);
    if exp_bits == 0 && mant == 0 {
        return format!("{sign}0x0p+0");
    }
    let (lead, exp) = if exp_bits == 0 {
        (0, -1022)
    } else {
        (1, exp_bits - 1023)
    };
    let mut frac = format!("{mant:013x}");
    while frac.ends_with('0') {
        frac.pop();
    }
    let frac = if frac.is_empty() {
        String::new()
    } else {
        format!(".{frac}")
    };
    let esign = if exp >= 0 { "+" } else { "-" };
    format!("{sign}0x{lead}{frac}p{esign}{}", exp.abs())
}

/// Decimal with 17 significant digits, enough to round-trip any double.
pub fn decimal17(v: f64) -> String {
    if !v.is_finite() {
        return hex_f64(v);
    }
    format!("{v:.16e}")
}

/// Decimal with 9 significant digits, enough to round-trip any float.
pub fn decimal_f32(v: f32) -> String {
    if !v.is_finite() {
        return hex_f64(v as f64);
    }
    format!("{v:.8e}")
}

/// Short forms of two different values that tell them apart: [`short`] when it does, else as many significant
/// digits as it takes (`2.3125001` and `2.3125003`, not `2.31` and `2.31`).
pub fn short_pair(a: f64, b: f64) -> (String, String) {
    let (sa, sb) = (short(a), short(b));
    if sa != sb || a.to_bits() == b.to_bits() || !a.is_finite() || !b.is_finite() {
        return (sa, sb);
    }
    for digits in 4..=17 {
        let f = |v: f64| {
            let a = v.abs();
            if (1e-4..1e6).contains(&a) {
                // `digits` significant digits in fixed notation.
                let decimals = (digits as i32 - 1 - a.log10().floor() as i32).max(0) as usize;
                let s = format!("{v:.decimals$}");
                if s.contains('.') {
                    s.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    s
                }
            } else {
                format!("{:.*e}", digits - 1, v)
            }
        };
        let (x, y) = (f(a), f(b));
        if x != y {
            return (x, y);
        }
    }
    (format!("{a:e}"), format!("{b:e}"))
}

/// A short form for messages: 3 significant digits, no trailing noise (`-0.25`, `1.34e154`).
pub fn short(v: f64) -> String {
    if !v.is_finite() {
        return hex_f64(v);
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let a = v.abs();
    if (1e-4..1e6).contains(&a) {
        let s = format!("{:.3}", v);
        let s = s.trim_end_matches('0').trim_end_matches('.').to_string();
        if s.parse::<f64>().ok() == Some(v) || a >= 1e-3 {
            return s;
        }
    }
    let s = format!("{v:.2e}");
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let m = if m.contains('.') {
        m.trim_end_matches('0').trim_end_matches('.')
    } else {
        m
    };
    format!("{m}e{e}")
}

/// Parses a value as the user writes it on the command line: decimal, C99 hex float, `inf`, `nan`.
pub fn parse_f64(text: &str) -> Option<f64> {
    let t = text.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let lower = body.to_ascii_lowercase();
    let magnitude = if let Some(hex) = lower.strip_prefix("0x") {
        parse_hex_body(hex)?
    } else if lower == "inf" || lower == "infinity" {
        f64::INFINITY
    } else if lower == "nan" {
        f64::NAN
    } else {
        lower.parse::<f64>().ok()?
    };
    Some(if neg { -magnitude } else { magnitude })
}

/// Parses the part of a hex float after `0x` exactly (`1.8p+1`); inputs with more than 53 bits are rounded.
fn parse_hex_body(hex: &str) -> Option<f64> {
    let (mant, exp) = match hex.split_once('p') {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (hex, 0),
    };
    let (int_part, frac_part) = mant.split_once('.').unwrap_or((mant, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let digits: String = format!("{int_part}{frac_part}");
    if digits.len() > 15 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        // long mantissas: fall back to exact rational rounding
        let num = num_bigint::BigInt::parse_bytes(digits.as_bytes(), 16)?;
        let shift = exp - 4 * frac_part.len() as i32;
        return Some(crate::round::bigint_times_pow2_to_f64(&num, shift));
    }
    let m = u64::from_str_radix(if digits.is_empty() { "0" } else { &digits }, 16).ok()?;
    let shift = exp - 4 * frac_part.len() as i32;
    let num = num_bigint::BigInt::from(m);
    Some(crate::round::bigint_times_pow2_to_f64(&num, shift))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_close_values_are_told_apart() {
        let (x, y) = short_pair(2.3125, 2.3125001);
        assert_ne!(x, y, "{x} {y}");
        assert_eq!(short_pair(1.0, 2.0), ("1".to_string(), "2".to_string()));
        let (x, y) = short_pair(1.0e300, 1.0000001e300);
        assert_ne!(x, y, "{x} {y}");
    }

    #[test]
    fn hex_round_trips() {
        for v in [
            1.0,
            -0.25,
            1.340_780_792_994_259_7e154,
            5e-324,
            f64::MAX,
            0.1,
            -0.0,
            3.0,
        ] {
            let h = hex_f64(v);
            assert_eq!(parse_f64(&h).unwrap().to_bits(), v.to_bits(), "{h}");
        }
        assert_eq!(hex_f64(3.0), "0x1.8p+1");
        assert_eq!(hex_f64(5e-324), "0x0.0000000000001p-1022");
    }

    #[test]
    fn short_forms() {
        assert_eq!(short(-0.25), "-0.25");
        assert_eq!(short(1.340_780_792_994_259_7e154), "1.34e154");
        assert_eq!(short(-0.125), "-0.125");
    }
}
