//! A function's C signature from its IR and debug info: each C parameter as one parameter, or, for a struct
//! passed by value, as its pieces the way clang lowers it on x86-64 (a field per `float`, `double` or integer
//! argument, a parameter per lane of a `<2 x float>` one, a buffer for a `byval` copy), named as C names them
//! (`v.x`, `xf.q.c`); a struct returned by value (in registers or through `sret`).

use super::fields::{by_value_name, PointeeField, PointeeFields, StructLayout, TypeFacts};
use super::{DebugFacts, OUT_BUFFER_BYTES};
use crate::scalar::ScalarType;
use crate::types::{ByValue, FunctionSignature, Param, ParamType, ReturnType, RETURN_PARAM};
use inkwell::types::BasicTypeEnum;
use inkwell::values::FunctionValue;

/// Why a signature cannot be driven: a struct or vector passed by value (said in C words where the debug info
/// names the parameter), or another reason.
pub(super) enum SignatureError {
    ByValue(String),
    Other(String),
}

/// The first C parameter of `function` that is a struct passed by value, in C words: `` `b2Vec2 p` passed by
/// value ``.
pub(super) fn by_value_words(
    facts: &DebugFacts,
    types: &TypeFacts,
    function: &str,
) -> Option<String> {
    facts.c_params(function).into_iter().find_map(|(name, ty)| {
        let c_type = types.struct_type_name((*ty)?)?;
        Some(format!("`{c_type} {name}` passed by value"))
    })
}

pub(super) fn signature_of(
    function: FunctionValue<'_>,
    facts: &DebugFacts,
    types: &TypeFacts,
) -> Result<FunctionSignature, SignatureError> {
    let name = function.get_name().to_string_lossy().into_owned();
    if function.get_type().is_var_arg() {
        return Err(SignatureError::Other(
            "variadic functions cannot be driven".into(),
        ));
    }
    let ir: Vec<BasicTypeEnum<'_>> = function.get_param_iter().map(|p| p.get_type()).collect();
    let sret = !ir.is_empty() && has_attribute(function, 0, "sret");
    let ret = return_of(function, facts, types, &name, sret)?;
    let c_params = facts.c_params(&name);
    let mut params = Vec::new();
    let mut at = usize::from(sret);
    let mut k = 0;
    while at < ir.len() {
        let debug = c_params.get(k).copied();
        let layout = debug
            .and_then(|(_, ty)| *ty)
            .and_then(|ty| types.struct_layout(ty));
        match (layout, debug) {
            (Some(layout), Some((c_name, _))) => {
                let c = Struct {
                    function,
                    ir: &ir,
                    c_param: k as u32,
                    c_name,
                    layout: &layout,
                };
                at = c.pieces(at, &mut params)?;
            }
            _ => {
                params.push(scalar_param(function, ir[at], at, debug, facts)?);
                at += 1;
            }
        }
        k += 1;
    }
    Ok(FunctionSignature { name, params, ret })
}

/// A parameter passed as itself: a float, an integer or a pointer (a buffer); `debug` its C name and type.
fn scalar_param(
    function: FunctionValue<'_>,
    ty: BasicTypeEnum<'_>,
    i: usize,
    debug: Option<&(String, Option<u32>)>,
    facts: &DebugFacts,
) -> Result<Param, SignatureError> {
    let unsigned = debug
        .and_then(|(_, ty)| *ty)
        .is_some_and(|t| facts.is_unsigned(t));
    let ty = match ty {
        BasicTypeEnum::FloatType(t) => match t.get_bit_width() {
            64 => ParamType::F64,
            32 => ParamType::F32,
            bits => {
                return Err(SignatureError::Other(format!(
                    "parameter {} has a {bits}-bit floating type",
                    i + 1
                )))
            }
        },
        BasicTypeEnum::IntType(t) => match t.get_bit_width() {
            bits @ (1 | 8 | 16 | 32 | 64) => ParamType::Int {
                bits,
                signed: !unsigned,
            },
            bits => {
                return Err(SignatureError::Other(format!(
                    "parameter {} is a {bits}-bit integer",
                    i + 1
                )))
            }
        },
        BasicTypeEnum::PointerType(_) => {
            if has_attribute(function, i, "byval") {
                return Err(SignatureError::ByValue(format!(
                    "parameter {} is a struct passed by value",
                    i + 1
                )));
            }
            ParamType::OutPtr {
                bytes: OUT_BUFFER_BYTES,
            }
        }
        // A vector or aggregate the debug info does not describe as a struct foe can split.
        other @ (BasicTypeEnum::VectorType(_)
        | BasicTypeEnum::StructType(_)
        | BasicTypeEnum::ArrayType(_)) => {
            return Err(SignatureError::ByValue(format!(
                "parameter {} has unsupported type {}",
                i + 1,
                other.print_to_string()
            )))
        }
        other => {
            return Err(SignatureError::Other(format!(
                "parameter {} has unsupported type {}",
                i + 1,
                other.print_to_string()
            )))
        }
    };
    let name = debug.map_or_else(|| format!("arg{}", i + 1), |(n, _)| n.clone());
    Ok(Param::new(name, ty))
}

/// One C struct parameter being split into the IR arguments clang passes it in.
struct Struct<'a, 'ctx> {
    function: FunctionValue<'ctx>,
    ir: &'a [BasicTypeEnum<'ctx>],
    c_param: u32,
    c_name: &'a str,
    layout: &'a StructLayout,
}

impl Struct<'_, '_> {
    /// Appends the struct's pieces from IR argument `at` on to `params`; the first IR argument after them.
    fn pieces(&self, mut at: usize, params: &mut Vec<Param>) -> Result<usize, SignatureError> {
        let layout = self.layout;
        let first = self
            .ir
            .get(at)
            .ok_or_else(|| self.refused("is not passed"))?;
        if matches!(first, BasicTypeEnum::PointerType(_))
            && has_attribute(self.function, at, "byval")
        {
            // In memory: a buffer the entry fills with the fields the function reads (inputs behind it).
            params.push(self.piece(
                self.c_name.to_string(),
                ParamType::OutPtr {
                    bytes: layout.bytes,
                },
                at,
                None,
                0,
                true,
            ));
            return Ok(at + 1);
        }
        // In registers: one IR argument per eightbyte of the struct, or one vector argument for a 16-byte vector
        // (`__m128` as `<4 x float>`, `__m128d` as `<2 x double>`).
        let mut lo = 0;
        while lo < layout.bytes {
            let ty = *self
                .ir
                .get(at)
                .ok_or_else(|| self.refused("is not passed whole"))?;
            let span = vector_bytes(ty).unwrap_or(8).max(8);
            let inside: Vec<&PointeeField> = layout
                .fields
                .iter()
                .filter(|f| (lo..lo + span).contains(&f.offset))
                .collect();
            let split = self.split_word(ty, lo, &inside).ok_or_else(|| {
                self.refused(&format!(
                    "is passed as `{}`, which foe cannot split into its fields",
                    ty.print_to_string().to_string_lossy()
                ))
            })?;
            for (field, ty, lane) in split {
                let name = by_value_name(self.c_name, &field.path);
                params.push(self.piece(name, ty, at, lane, field.offset, false));
            }
            at += 1;
            lo += span;
        }
        Ok(at)
    }

    /// The fields `inside` the eightbyte at `lo` as IR type `ty` carries them: (field, type, vector lane); `None`
    /// when `ty` does not carry them one by one (two `int`s packed in an `i64`, a `float` beside an `int`).
    fn split_word<'f>(
        &self,
        ty: BasicTypeEnum<'_>,
        lo: u32,
        inside: &[&'f PointeeField],
    ) -> Option<Vec<(&'f PointeeField, ParamType, Option<u32>)>> {
        let at = |f: &PointeeField, offset: u32, want: ScalarType| {
            f.offset == offset && f.ty == Some(want)
        };
        match (ty, inside) {
            (BasicTypeEnum::FloatType(t), [f])
                if t.get_bit_width() == 64 && at(f, lo, ScalarType::F64) =>
            {
                Some(vec![(*f, ParamType::F64, None)])
            }
            (BasicTypeEnum::FloatType(t), [f])
                if t.get_bit_width() == 32 && at(f, lo, ScalarType::F32) =>
            {
                Some(vec![(*f, ParamType::F32, None)])
            }
            // A vector of floats or doubles, one field per lane: `<2 x float>` (two floats of a struct),
            // `<4 x float>` (`__m128`), `<2 x double>` (`__m128d`).
            (BasicTypeEnum::VectorType(v), fields) if v.get_size() as usize == fields.len() => {
                let (want, param) = match v.get_element_type() {
                    BasicTypeEnum::FloatType(e) if e.get_bit_width() == 32 => {
                        (ScalarType::F32, ParamType::F32)
                    }
                    BasicTypeEnum::FloatType(e) if e.get_bit_width() == 64 => {
                        (ScalarType::F64, ParamType::F64)
                    }
                    _ => return None,
                };
                fields
                    .iter()
                    .enumerate()
                    .map(|(lane, f)| {
                        let lane = lane as u32;
                        at(f, lo + lane * want.bytes(), want).then_some((*f, param, Some(lane)))
                    })
                    .collect()
            }
            // Integers packed into one integer argument (`struct { int start; uint16_t count; uint8_t a, b; }` as
            // an `i64`), each whole inside it; the argument is put together from them by byte offset.
            (BasicTypeEnum::IntType(t), fields) if !fields.is_empty() => fields
                .iter()
                .map(|f| match f.ty {
                    Some(ScalarType::Int { bits, signed })
                        if f.offset + bits.div_ceil(8) <= lo + t.get_bit_width() / 8 =>
                    {
                        Some((*f, ParamType::Int { bits, signed }, None))
                    }
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }

    fn piece(
        &self,
        name: String,
        ty: ParamType,
        arg: usize,
        lane: Option<u32>,
        offset: u32,
        memory: bool,
    ) -> Param {
        Param {
            name,
            ty,
            pointee: None,
            by_value: Some(ByValue {
                arg: arg as u32,
                lane,
                offset,
                c_param: self.c_param,
                c_name: self.c_name.to_string(),
                c_type: self.layout.c_type.clone(),
                bytes: self.layout.bytes,
                memory,
            }),
        }
    }

    /// Refused in C words already: not replaced by the generic `` `T v` passed by value ``.
    fn refused(&self, why: &str) -> SignatureError {
        SignatureError::Other(format!(
            "`{} {}` passed by value {why}",
            self.layout.c_type, self.c_name
        ))
    }
}

/// The return type: a scalar, `void`, or a struct the debug info describes (in registers, or through `sret`).
fn return_of(
    function: FunctionValue<'_>,
    facts: &DebugFacts,
    types: &TypeFacts,
    name: &str,
    sret: bool,
) -> Result<ReturnType, SignatureError> {
    let layout = facts
        .function_type(name)
        .and_then(|t| types.return_type(t))
        .and_then(|t| types.struct_layout(t));
    if let Some(layout) = &layout {
        return Ok(ReturnType::Struct {
            bytes: layout.bytes,
            sret,
        });
    }
    if sret {
        return Err(SignatureError::Other(
            "it returns a struct the debug info does not describe".into(),
        ));
    }
    Ok(match function.get_type().get_return_type() {
        None => ReturnType::Void,
        Some(BasicTypeEnum::FloatType(t)) if t.get_bit_width() == 64 => ReturnType::F64,
        Some(BasicTypeEnum::FloatType(t)) if t.get_bit_width() == 32 => ReturnType::F32,
        Some(BasicTypeEnum::IntType(t)) if t.get_bit_width() <= 64 => ReturnType::Int {
            bits: t.get_bit_width(),
            signed: true,
        },
        Some(_) => ReturnType::Other,
    })
}

/// The bytes a vector type carries (`<4 x float>`: 16); `None` for other types.
fn vector_bytes(ty: BasicTypeEnum<'_>) -> Option<u32> {
    let BasicTypeEnum::VectorType(v) = ty else {
        return None;
    };
    let element_bits = match v.get_element_type() {
        BasicTypeEnum::FloatType(e) => e.get_bit_width(),
        BasicTypeEnum::IntType(e) => e.get_bit_width(),
        _ => return None,
    };
    Some(v.get_size() * element_bits / 8)
}

/// Whether IR parameter `index` of `function` carries the enum attribute `kind` (`byval`, `sret`).
pub(crate) fn has_attribute(function: FunctionValue<'_>, index: usize, kind: &str) -> bool {
    use inkwell::attributes::{Attribute, AttributeLoc};
    let id = Attribute::get_named_enum_kind_id(kind);
    function
        .get_enum_attribute(AttributeLoc::Param(index as u32), id)
        .is_some()
}

/// The layouts of what `sig`'s buffers hold, to name and read a run's outputs and inputs behind pointers: what
/// each pointer parameter points to (`b->vel.x`), each `byval` copy (`s.x`) and a returned struct (`return.x`).
pub(super) fn layouts(
    facts: &DebugFacts,
    types: &TypeFacts,
    sig: &FunctionSignature,
) -> Vec<PointeeFields> {
    let c_params = facts.c_params(&sig.name);
    let mut out = vec![];
    let mut next = 0;
    for (i, p) in sig.params.iter().enumerate() {
        if p.pointee.is_some() {
            continue;
        }
        let c = p.by_value.as_ref().map_or(next, |b| b.c_param);
        next = c + 1;
        let (ParamType::OutPtr { .. }, Some((_, Some(ty)))) = (p.ty, c_params.get(c as usize))
        else {
            continue;
        };
        let layout = match &p.by_value {
            Some(_) => types.by_value_fields(i as u32, *ty),
            None => types.pointee_fields(i as u32, *ty),
        };
        out.extend(layout);
    }
    if let ReturnType::Struct { .. } = sig.ret {
        let ret = facts
            .function_type(&sig.name)
            .and_then(|t| types.return_type(t));
        out.extend(ret.and_then(|t| types.by_value_fields(RETURN_PARAM, t)));
    }
    out
}
