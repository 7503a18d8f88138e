//! The C thunks appended to the file for the shipped binaries: one per function, that unpacks the driver's words
//! into the C arguments (structs passed by value put together from their fields), calls the function as it
//! ships and packs its result and the words of its buffers (and returned struct) the call changed.

use crate::types::{FunctionSignature, Param, ParamType, ReturnType, RETURN_PARAM};
use std::collections::BTreeSet;

fn c_int(bits: u32, signed: bool) -> Option<&'static str> {
    Some(match (bits, signed) {
        (1, _) => "_Bool",
        (8, true) => "signed char",
        (8, false) => "unsigned char",
        (16, true) => "short",
        (16, false) => "unsigned short",
        (32, true) => "int",
        (32, false) => "unsigned int",
        (64, true) => "long long",
        (64, false) => "unsigned long long",
        _ => return None,
    })
}

/// The C type a scalar parameter is unpacked into (`void *` never: buffers are arrays).
fn scalar_type(p: &Param) -> Result<&'static str, String> {
    match p.ty {
        ParamType::F64 => Ok("double"),
        ParamType::F32 => Ok("float"),
        ParamType::Int { bits, signed } => {
            c_int(bits, signed).ok_or_else(|| format!("`{}` is a {bits}-bit integer", p.name))
        }
        ParamType::OutPtr { .. } => Ok("void *"),
    }
}

/// Whether `sig` passes or returns a struct by value: then the thunk calls through the function's own type.
fn has_structs(sig: &FunctionSignature) -> bool {
    sig.params.iter().any(|p| p.by_value.is_some()) || matches!(sig.ret, ReturnType::Struct { .. })
}

/// The type of the function pointer the thunk calls `sig` through (`double (*)(double, int)`; the function's own
/// type when a struct is passed or returned by value, which the thunk builds from its fields), or why it cannot be
/// called.
pub(super) fn c_prototype(sig: &FunctionSignature) -> Result<String, String> {
    let mut params = Vec::new();
    for p in sig.call_params().filter(|p| p.by_value.is_none()) {
        params.push(scalar_type(p)?);
    }
    if has_structs(sig) {
        return Ok(format!("__typeof__(&{})", sig.name));
    }
    let ret = match sig.ret {
        ReturnType::Void => "void",
        ReturnType::F64 => "double",
        ReturnType::F32 => "float",
        ReturnType::Int { bits, signed } => {
            c_int(bits, signed).ok_or_else(|| format!("returns a {bits}-bit integer"))?
        }
        ReturnType::Struct { .. } | ReturnType::Other => {
            return Err(
                "its return type (a pointer or a union) cannot be called from the harness".into(),
            )
        }
    };
    let params = if params.is_empty() {
        "void".to_string()
    } else {
        params.join(", ")
    };
    Ok(format!("{ret} (*)({params})"))
}

/// Most changed words of pointer parameters one shipped call reports (`FOE_SHIPPED_OUTPUTS` of the driver).
pub const SHIPPED_OUTPUTS: usize = 256;

/// The C appended to the file: a thunk per function that unpacks the words, calls the function through a
/// volatile pointer (so it is emitted and called as it ships, not inlined into the thunk), and packs the
/// result in `r[0]`, then the words of its pointer parameters' buffers (and of a returned struct) the call changed:
/// their count in `r[1]`, then (parameter, offset, word) triples, at most [`SHIPPED_OUTPUTS`] (as the instrumented
/// runner reports them); and the table the driver calls through. Functions the driver cannot call get an empty
/// thunk.
pub(super) fn thunks(functions: &[FunctionSignature]) -> String {
    let mut out = String::from("\n/* foe confirmation harness */\n");
    for (i, sig) in functions.iter().enumerate() {
        out.push_str(&format!(
            "static void foe_confirm_call_{i}(const unsigned long long *w, unsigned long long *r) {{\n"
        ));
        if let Ok(pointer) = c_prototype(sig) {
            out.push_str(&format!(
                "  static void *volatile fn = (void *)&{};\n",
                sig.name
            ));
            unpack_args(sig, &mut out);
            fill_pointees(sig, &mut out);
            // The buffers as the call starts, to report the words it changed.
            for (k, p) in sig.params.iter().enumerate() {
                if let (ParamType::OutPtr { bytes }, None, None) = (p.ty, p.pointee, &p.by_value) {
                    out.push_str(&format!(
                        "  static unsigned char b{k}[{}]; __builtin_memcpy(b{k}, a{k}, sizeof b{k});\n",
                        bytes.max(1)
                    ));
                }
            }
            let args = assemble_structs(sig, &mut out);
            call_and_pack(sig, &pointer, &args, &mut out);
            report_changed_words(sig, &mut out);
        } else {
            out.push_str("  (void)w; r[0] = 0; r[1] = 0;\n");
        }
        out.push_str("}\n");
    }
    out.push_str(
        "typedef void (*foe_confirm_thunk)(const unsigned long long *, unsigned long long *);\n",
    );
    let entries: Vec<String> = (0..functions.len())
        .map(|i| format!("foe_confirm_call_{i}"))
        .collect();
    out.push_str(&format!(
        "foe_confirm_thunk const foe_confirm_table[] = {{{}}};\nconst int foe_confirm_count = {};\n",
        if entries.is_empty() {
            "0".to_string()
        } else {
            entries.join(", ")
        },
        functions.len()
    ));
    out
}

/// Declares `a<k>` for each parameter passed (not behind a pointer) from the words `w`: a scalar, or a zeroed,
/// aligned buffer for an out-parameter or a `byval` copy.
fn unpack_args(sig: &FunctionSignature, out: &mut String) {
    for (k, p) in sig.params.iter().enumerate() {
        if p.pointee.is_some() {
            continue;
        }
        let c = scalar_type(p).unwrap_or("double");
        match p.ty {
            ParamType::OutPtr { bytes } => out.push_str(&format!(
                "  unsigned char a{k}[{}] __attribute__((aligned(16))) = {{0}};\n",
                bytes.max(1)
            )),
            ParamType::F64 | ParamType::F32 => out.push_str(&format!(
                "  {c} a{k}; __builtin_memcpy(&a{k}, &w[{k}], sizeof a{k});\n"
            )),
            ParamType::Int { .. } => out.push_str(&format!("  {c} a{k} = ({c})w[{k}];\n")),
        }
    }
}

/// Copies the values behind pointers from their words into their pointer's buffer.
fn fill_pointees(sig: &FunctionSignature, out: &mut String) {
    for (k, p) in sig.params.iter().enumerate() {
        let Some(at) = p.pointee else { continue };
        let size = match p.ty {
            ParamType::F64 => 8,
            ParamType::F32 => 4,
            ParamType::Int { bits, .. } => bits.div_ceil(8),
            ParamType::OutPtr { .. } => continue,
        };
        out.push_str(&format!(
            "  __builtin_memcpy(a{} + {}, &w[{k}], {size});\n",
            at.param, at.offset
        ));
    }
}

/// Puts each struct passed by value together as `s<c>` from its pieces (fields at their offsets, or the whole
/// `byval` copy); the C arguments, in call order.
fn assemble_structs(sig: &FunctionSignature, out: &mut String) -> Vec<String> {
    let mut args = Vec::new();
    let mut declared = BTreeSet::new();
    for (k, p) in sig.params.iter().enumerate() {
        if p.pointee.is_some() {
            continue;
        }
        let Some(b) = &p.by_value else {
            args.push(format!("a{k}"));
            continue;
        };
        let c = b.c_param;
        if declared.insert(c) {
            out.push_str(&format!(
                "  {} s{c}; __builtin_memset(&s{c}, 0, sizeof s{c});\n",
                b.c_type
            ));
            args.push(format!("s{c}"));
        }
        if b.memory {
            out.push_str(&format!("  __builtin_memcpy(&s{c}, a{k}, sizeof s{c});\n"));
        } else {
            out.push_str(&format!(
                "  __builtin_memcpy((unsigned char *)&s{c} + {}, &a{k}, sizeof a{k});\n",
                b.offset
            ));
        }
    }
    args
}

/// Calls the function through `fn` (as a `pointer`) with `args` and packs its result in `r[0]`; a returned
/// struct goes into the zeroed buffer `rb`.
fn call_and_pack(sig: &FunctionSignature, pointer: &str, args: &[String], out: &mut String) {
    let call = format!("(({pointer})fn)({})", args.join(", "));
    match sig.ret {
        ReturnType::Void => out.push_str(&format!("  {call};\n  r[0] = 0;\n")),
        ReturnType::F64 | ReturnType::F32 => out.push_str(&format!(
            "  __auto_type res = {call};\n  __builtin_memcpy(r, &res, sizeof res);\n"
        )),
        ReturnType::Struct { bytes, .. } => out.push_str(&format!(
            "  __auto_type res = {call};\n  unsigned char rb[{}] __attribute__((aligned(16))) = {{0}};\n  \
             __builtin_memcpy(rb, &res, sizeof res);\n  r[0] = 0;\n",
            bytes.div_ceil(8).max(1) * 8
        )),
        ReturnType::Int { signed: true, .. } => {
            out.push_str(&format!("  *r = (unsigned long long)(long long){call};\n"))
        }
        _ => out.push_str(&format!("  *r = (unsigned long long){call};\n")),
    }
}

/// Reports the words of the out-parameters' buffers (and of a returned struct, as [`RETURN_PARAM`]) the call
/// changed: their count in `r[1]`, then (parameter, offset, word) triples.
fn report_changed_words(sig: &FunctionSignature, out: &mut String) {
    out.push_str("  unsigned long long n = 0;\n");
    let changed = |index: u64, now: &str, was: &str, bytes: u32| {
        format!(
            "  for (unsigned o = 0; o + 8 <= {bytes}u; o += 8) {{\n    unsigned long long now, was = 0;\n    \
             __builtin_memcpy(&now, {now} + o, 8); {was}\n    \
             if (now != was && n < {SHIPPED_OUTPUTS}) {{ r[2 + 3 * n] = {index}ull; r[3 + 3 * n] = o; \
             r[4 + 3 * n] = now; n++; }}\n  }}\n"
        )
    };
    for (k, p) in sig.params.iter().enumerate() {
        if let (ParamType::OutPtr { bytes }, None, None) = (p.ty, p.pointee, &p.by_value) {
            let was = format!("__builtin_memcpy(&was, b{k} + o, 8);");
            out.push_str(&changed(k as u64, &format!("a{k}"), &was, bytes));
        }
    }
    if let ReturnType::Struct { bytes, .. } = sig.ret {
        let bytes = bytes.div_ceil(8).max(1) * 8;
        out.push_str(&changed(RETURN_PARAM as u64, "rb", "", bytes));
    }
    out.push_str("  r[1] = n;\n");
}
