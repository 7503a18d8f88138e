//! What a run wrote through its pointer parameters (and the struct it returned): the worker reports the 8-byte
//! words of each buffer the call changed; here both builds' words are read back as C values, named as C names them (`*err`, `out[2]`, `r->y`),
//! over the same places for the two builds so that they can be compared.

use crate::ir::PointeeFields;
use crate::report::Output;
use crate::types::{ArgValue, FunctionSignature, Input, ParamType, RETURN_PARAM};
use std::collections::BTreeSet;

/// One 8-byte word of a pointer parameter's buffer as a run left it (only words the run changed are reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawOutput {
    /// The pointer's index among the C parameters.
    pub param: u32,
    /// Byte offset into the buffer, a multiple of 8.
    pub offset: u32,
    pub word: u64,
}

/// The outputs of both builds' runs of `sig` on `input`: every field either run changed, read in
/// both (a word one build left alone holds what the call started with: zeros and the input's values behind the
/// pointer). Fields of pointers whose type the debug info does not give are not read.
pub fn decode_pair(
    sig: &FunctionSignature,
    layouts: &[PointeeFields],
    input: &Input,
    p: &[RawOutput],
    pp: &[RawOutput],
) -> (Vec<Output>, Vec<Output>) {
    let places: BTreeSet<(u32, u32)> = p.iter().chain(pp).map(|o| (o.param, o.offset)).collect();
    let (mut out_p, mut out_pp) = (vec![], vec![]);
    for (param, offset) in places {
        let Some(layout) = layouts.iter().find(|l| l.param == param) else {
            continue;
        };
        let pointer = match param {
            RETURN_PARAM => "return",
            _ => match sig.params.get(param as usize) {
                Some(p) => p.name.as_str(),
                None => continue,
            },
        };
        let start = initial_word(sig, input, param, offset);
        let word_of = |run: &[RawOutput]| {
            run.iter()
                .find(|o| o.param == param && o.offset == offset)
                .map_or(start, |o| o.word)
                .to_le_bytes()
        };
        let (wp, wpp) = (word_of(p), word_of(pp));
        for (index, field, at) in layout.fields_in(offset, 8) {
            let Some(ty) = field.ty else { continue };
            let within = (at - offset) as usize;
            // A field neither run changed is not an output (`cx[1]` beside an `int` written as `*cx`).
            let span = within..(within + ty.bytes() as usize).min(8);
            let initial = start.to_le_bytes();
            if wp[span.clone()] == initial[span.clone()] && wpp[span.clone()] == initial[span] {
                continue;
            }
            let (Some(vp), Some(vpp)) = (ty.read(&wp[within..]), ty.read(&wpp[within..])) else {
                continue;
            };
            let name = layout.name(pointer, index, field);
            for (out, value) in [(&mut out_p, vp), (&mut out_pp, vpp)] {
                out.push(Output {
                    name: name.clone(),
                    value,
                    param,
                    offset: at,
                    ty,
                });
            }
        }
    }
    (out_p, out_pp)
}

/// The word at `offset` of pointer `param`'s buffer as the call starts: zeros, with the input's values behind the
/// pointer stored where they live.
pub fn initial_word(sig: &FunctionSignature, input: &Input, param: u32, offset: u32) -> u64 {
    let mut bytes = [0u8; 8];
    for (p, value) in sig.params.iter().zip(&input.0) {
        let Some(at) = p.pointee.filter(|at| at.param == param) else {
            continue;
        };
        let size = match p.ty {
            ParamType::F64 => 8,
            ParamType::F32 => 4,
            ParamType::Int { bits, .. } => bits.div_ceil(8),
            ParamType::OutPtr { .. } => continue,
        };
        let raw = match value {
            ArgValue::F32(v) => v.to_bits() as u64,
            other => other.bits(),
        }
        .to_le_bytes();
        for k in 0..size {
            let byte = at.offset + k;
            if (offset..offset + 8).contains(&byte) {
                bytes[(byte - offset) as usize] = raw[k as usize];
            }
        }
    }
    u64::from_le_bytes(bytes)
}
