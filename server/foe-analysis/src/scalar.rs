//! A scalar as a build produced it ([`Scalar`], bit pattern kept), its C type ([`ScalarType`]) and the categories a
//! special-value divergence compares ([`ValueClass`]).

use crate::fpfmt;
use serde::{Deserialize, Serialize};

/// A scalar a build produced, exactly: the bit pattern is kept (NaN payloads, `-0`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(into = "ScalarRepr", try_from = "ScalarRepr")]
pub enum Scalar {
    F64(f64),
    F32(f32),
    /// A signed integer (or a boolean) of the C type.
    Int(i64),
    /// An unsigned integer of the C type.
    UInt(u64),
}

/// How a [`Scalar`] is written in JSON: its type, its bits (JSON has no NaN or infinity) and its text for readers.
#[derive(Serialize, Deserialize)]
struct ScalarRepr {
    #[serde(rename = "type")]
    ty: String,
    bits: u64,
    #[serde(default)]
    text: String,
}

impl From<Scalar> for ScalarRepr {
    fn from(s: Scalar) -> ScalarRepr {
        let (ty, bits) = match s {
            Scalar::F64(v) => ("f64", v.to_bits()),
            Scalar::F32(v) => ("f32", v.to_bits() as u64),
            Scalar::Int(v) => ("int", v as u64),
            Scalar::UInt(v) => ("uint", v),
        };
        ScalarRepr {
            ty: ty.into(),
            bits,
            text: s.exact(),
        }
    }
}

impl TryFrom<ScalarRepr> for Scalar {
    type Error = String;
    fn try_from(r: ScalarRepr) -> Result<Scalar, String> {
        Ok(match r.ty.as_str() {
            "f64" => Scalar::F64(f64::from_bits(r.bits)),
            "f32" => Scalar::F32(f32::from_bits(r.bits as u32)),
            "int" => Scalar::Int(r.bits as i64),
            "uint" => Scalar::UInt(r.bits),
            other => return Err(format!("unknown scalar type `{other}`")),
        })
    }
}

/// The categories a special-value divergence compares: a value in another category in the other build is what a
/// caller's `isnan`, `isinf` or `== 0` sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueClass {
    Nan,
    Infinite,
    Zero,
    Finite,
}

impl ValueClass {
    pub fn name(self) -> &'static str {
        match self {
            ValueClass::Nan => "NaN",
            ValueClass::Infinite => "infinite",
            ValueClass::Zero => "zero",
            ValueClass::Finite => "finite",
        }
    }
}

impl Scalar {
    /// The value as a double, for comparisons and short forms (integers converted).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::F64(v) => v,
            Scalar::F32(v) => v as f64,
            Scalar::Int(v) => v as f64,
            Scalar::UInt(v) => v as f64,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F64(_) | Scalar::F32(_))
    }

    /// The category of a float; `None` for integers (compared by value).
    pub fn class(self) -> Option<ValueClass> {
        if !self.is_float() {
            return None;
        }
        let v = self.as_f64();
        Some(if v.is_nan() {
            ValueClass::Nan
        } else if v.is_infinite() {
            ValueClass::Infinite
        } else if v == 0.0 {
            ValueClass::Zero
        } else {
            ValueClass::Finite
        })
    }

    /// Whether two values are the same bit pattern (any two NaNs count as the same).
    pub fn same(self, other: Scalar) -> bool {
        match (self, other) {
            (Scalar::F64(a), Scalar::F64(b)) => {
                a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan()
            }
            (Scalar::F32(a), Scalar::F32(b)) => {
                a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan()
            }
            (a, b) => a == b,
        }
    }

    /// The distance between two finite floats of one format in units in the last place (`None` otherwise).
    pub fn ulps(self, other: Scalar) -> Option<u64> {
        // Floats ordered as integers: negative values below -0, which meets +0.
        fn ordinal(bits: i64, min: i64) -> i64 {
            if bits < 0 {
                min - bits
            } else {
                bits
            }
        }
        match (self, other) {
            (Scalar::F64(a), Scalar::F64(b)) if a.is_finite() && b.is_finite() => Some(
                ordinal(a.to_bits() as i64, i64::MIN)
                    .abs_diff(ordinal(b.to_bits() as i64, i64::MIN)),
            ),
            (Scalar::F32(a), Scalar::F32(b)) if a.is_finite() && b.is_finite() => Some(
                ordinal(a.to_bits() as i32 as i64, i32::MIN as i64)
                    .abs_diff(ordinal(b.to_bits() as i32 as i64, i32::MIN as i64)),
            ),
            _ => None,
        }
    }

    /// Exact: a C99 hex float and its round-tripping decimal (`0x1p+0 (1.0000000000000000e0)`), or the integer.
    pub fn exact(self) -> String {
        match self {
            Scalar::F64(v) => format!("{} ({})", fpfmt::hex_f64(v), fpfmt::decimal17(v)),
            Scalar::F32(v) => format!("{} ({})", fpfmt::hex_f64(v as f64), fpfmt::decimal_f32(v)),
            Scalar::Int(v) => v.to_string(),
            Scalar::UInt(v) => v.to_string(),
        }
    }

    /// The C99 hex float (or the integer), for the replay command and JSON.
    pub fn hex(self) -> String {
        match self {
            Scalar::F64(v) => fpfmt::hex_f64(v),
            Scalar::F32(v) => fpfmt::hex_f64(v as f64),
            Scalar::Int(v) => v.to_string(),
            Scalar::UInt(v) => v.to_string(),
        }
    }

    /// Short forms of two scalars that tell them apart ([`fpfmt::short_pair`] for two floats).
    pub fn short_pair(a: Scalar, b: Scalar) -> (String, String) {
        if a.is_float() && b.is_float() {
            fpfmt::short_pair(a.as_f64(), b.as_f64())
        } else {
            (a.short(), b.short())
        }
    }

    /// Three significant digits for messages (`1.27e308`, `-0`, `nan`).
    pub fn short(self) -> String {
        match self {
            Scalar::F64(v) => fpfmt::short(v),
            Scalar::F32(v) => fpfmt::short(v as f64),
            Scalar::Int(v) => v.to_string(),
            Scalar::UInt(v) => v.to_string(),
        }
    }
}

/// The C type of a scalar behind a pointer (an output a function writes, an input it reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ScalarType {
    F64,
    F32,
    Int { bits: u32, signed: bool },
}

impl ScalarType {
    pub fn bytes(self) -> u32 {
        match self {
            ScalarType::F64 => 8,
            ScalarType::F32 => 4,
            ScalarType::Int { bits, .. } => bits.div_ceil(8),
        }
    }

    /// The value of this type in the first [`ScalarType::bytes`] bytes of `bytes` (little-endian); `None` when
    /// there are fewer.
    pub fn read(self, bytes: &[u8]) -> Option<Scalar> {
        let n = self.bytes() as usize;
        let raw = bytes.get(..n)?;
        let mut word = [0u8; 8];
        word[..n].copy_from_slice(raw);
        let bits = u64::from_le_bytes(word);
        Some(match self {
            ScalarType::F64 => Scalar::F64(f64::from_bits(bits)),
            ScalarType::F32 => Scalar::F32(f32::from_bits(bits as u32)),
            ScalarType::Int { bits: 1, .. } => Scalar::Int((bits & 1) as i64),
            ScalarType::Int {
                bits: w,
                signed: true,
            } if w < 64 => {
                let shift = 64 - 8 * n as u32;
                Scalar::Int(((bits << shift) as i64) >> shift)
            }
            ScalarType::Int { signed: true, .. } => Scalar::Int(bits as i64),
            ScalarType::Int { .. } => Scalar::UInt(bits),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_round_trip_through_json_with_their_bits() {
        for s in [
            Scalar::F64(f64::NAN),
            Scalar::F64(-0.0),
            Scalar::F64(f64::INFINITY),
            Scalar::F32(1.5),
            Scalar::Int(-3),
            Scalar::UInt(u64::MAX),
        ] {
            let json = serde_json::to_string(&s).expect("serialise");
            let back: Scalar = serde_json::from_str(&json).expect("parse");
            assert!(back.same(s), "{json}");
            assert_eq!(back.hex(), s.hex());
        }
    }

    #[test]
    fn ulps_count_floats_between_values_across_zero() {
        assert_eq!(
            Scalar::F64(1.0).ulps(Scalar::F64(1.0 + f64::EPSILON)),
            Some(1)
        );
        assert_eq!(Scalar::F64(-0.0).ulps(Scalar::F64(0.0)), Some(0));
        assert_eq!(Scalar::F64(-5e-324).ulps(Scalar::F64(5e-324)), Some(2));
        assert_eq!(Scalar::F32(-0.0).ulps(Scalar::F32(1e-45)), Some(1));
        assert_eq!(Scalar::F64(f64::NAN).ulps(Scalar::F64(1.0)), None);
    }

    #[test]
    fn scalars_are_read_from_little_endian_bytes_by_type() {
        let bytes = (-2.5f64).to_le_bytes();
        assert_eq!(ScalarType::F64.read(&bytes), Some(Scalar::F64(-2.5)));
        let int = (-7i32).to_le_bytes();
        let signed = ScalarType::Int {
            bits: 32,
            signed: true,
        };
        assert_eq!(signed.read(&int), Some(Scalar::Int(-7)));
        let unsigned = ScalarType::Int {
            bits: 32,
            signed: false,
        };
        assert_eq!(unsigned.read(&int), Some(Scalar::UInt(0xffff_fff9)));
        assert_eq!(ScalarType::F64.read(&int), None);
    }
}
