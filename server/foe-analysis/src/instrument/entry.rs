//! The typed entry wrappers the batch driver calls (arguments from words, pointer buffers watched, the result as
//! bits) and the entry table.

use super::*;

/// Why a function cannot be called in one build.
pub type Unavailable = String;

/// Adds `i64 @<entry name>(ptr %args)` to `module` (already prefixed): it reads one 64-bit word per parameter
/// (double and float bit patterns, integers in the low bits, ignored for out-parameters, which get a zeroed
/// stack buffer of their size), calls the build's function and returns the result's bits (floats as their bit
/// pattern, integers sign-extended, or zero-extended when unsigned or `_Bool`, 0 for void and other types).
pub fn add_entry<'ctx>(
    module: &Module<'ctx>,
    build: Build,
    index: usize,
    sig: &FunctionSignature,
) -> Result<Result<FunctionValue<'ctx>, Unavailable>, InstrumentError> {
    let Some(target) = module.get_function(&format!("{}{}", build_prefix(build), sig.name)) else {
        return Ok(Err(match build {
            Build::P => "it is not defined in the plain build".into(),
            Build::PPrime => "the fast-math build no longer defines it (inlined or removed)".into(),
        }));
    };
    if let Err(reason) = check_interface(target, sig) {
        return Ok(Err(reason));
    }
    let ctx = module.get_context();
    let i64t = ctx.i64_type();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let name = match build {
        Build::P => format!("__foe_entry_p_{index}"),
        Build::PPrime => format!("__foe_entry_pp_{index}"),
    };
    let wrapper = module.add_function(&name, i64t.fn_type(&[ptr.into()], false), None);
    let block = ctx.append_basic_block(wrapper, "entry");
    let builder = ctx.create_builder();
    builder.position_at_end(block);
    let what = format!("the entry of {}", sig.name);
    let args = wrapper
        .get_nth_param(0)
        .expect("one parameter")
        .into_pointer_value();
    let mut values: Vec<BasicValueEnum<'ctx>> = Vec::with_capacity(sig.params.len());
    for (i, param) in sig.params.iter().enumerate() {
        // SAFETY: the driver passes one word per parameter.
        let slot = unsafe {
            builder.build_in_bounds_gep(i64t, args, &[i64t.const_int(i as u64, false)], "")
        }
        .map_err(builder_error(what.clone()))?;
        let value: BasicValueEnum<'ctx> = match param.ty {
            ParamType::F64 => builder
                .build_load(ctx.f64_type(), slot, "")
                .map_err(builder_error(what.clone()))?,
            ParamType::F32 => {
                let word = builder
                    .build_load(i64t, slot, "")
                    .map_err(builder_error(what.clone()))?
                    .into_int_value();
                let low = builder
                    .build_int_truncate(word, ctx.i32_type(), "")
                    .map_err(builder_error(what.clone()))?;
                builder
                    .build_bit_cast(low, ctx.f32_type(), "")
                    .map_err(builder_error(what.clone()))?
            }
            ParamType::Int { bits, .. } => {
                let word = builder
                    .build_load(i64t, slot, "")
                    .map_err(builder_error(what.clone()))?
                    .into_int_value();
                if bits == 64 {
                    word.into()
                } else {
                    let width = std::num::NonZeroU32::new(bits)
                        .and_then(|b| ctx.custom_width_int_type(b).ok())
                        .ok_or_else(|| InstrumentError::Builder {
                            what: what.clone(),
                            message: format!("no {bits}-bit integer type"),
                        })?;
                    builder
                        .build_int_truncate(word, width, "")
                        .map_err(builder_error(what.clone()))?
                        .into()
                }
            }
            ParamType::OutPtr { bytes } => {
                let buf_ty = ctx.i8_type().array_type(bytes.max(1));
                let buf = builder
                    .build_alloca(buf_ty, "")
                    .map_err(builder_error(what.clone()))?;
                if let Some(inst) = buf.as_instruction() {
                    let _ = inst.set_alignment(16);
                }
                builder
                    .build_memset(
                        buf,
                        16,
                        ctx.i8_type().const_zero(),
                        i64t.const_int(bytes.max(1) as u64, false),
                    )
                    .map_err(builder_error(what.clone()))?;
                buf.into()
            }
        };
        values.push(value);
    }
    // The values behind pointers go into their pointer's buffer; the C parameters are passed.
    for (param, value) in sig.params.iter().zip(&values) {
        let Some(at) = param.pointee else { continue };
        let buffer = values
            .get(at.param as usize)
            .filter(|b| b.is_pointer_value())
            .ok_or_else(|| InstrumentError::Builder {
                what: what.clone(),
                message: format!("`{}` is not behind a pointer parameter", param.name),
            })?
            .into_pointer_value();
        // SAFETY: the offset lies inside the buffer (the model only makes inputs of bytes within it).
        let place = unsafe {
            builder.build_in_bounds_gep(
                ctx.i8_type(),
                buffer,
                &[i64t.const_int(at.offset as u64, false)],
                "",
            )
        }
        .map_err(builder_error(what.clone()))?;
        let store = builder
            .build_store(place, *value)
            .map_err(builder_error(what.clone()))?;
        let _ = store.set_alignment(1);
    }
    // The pointer parameters' buffers as the call starts: the words the call changes are the run's outputs.
    let watch = module.get_function(WATCH_FN).unwrap_or_else(|| {
        let fn_type = ctx.void_type().fn_type(
            &[ctx.i32_type().into(), ptr.into(), ctx.i32_type().into()],
            false,
        );
        module.add_function(WATCH_FN, fn_type, None)
    });
    let observe = module.get_function(OBSERVE_FN).unwrap_or_else(|| {
        module.add_function(OBSERVE_FN, ctx.void_type().fn_type(&[], false), None)
    });
    for (index, (param, value)) in sig
        .params
        .iter()
        .zip(&values)
        .filter(|(p, _)| p.pointee.is_none())
        .enumerate()
    {
        let ParamType::OutPtr { bytes } = param.ty else {
            continue;
        };
        let args = [
            ctx.i32_type().const_int(index as u64, false).into(),
            (*value).into(),
            ctx.i32_type().const_int(bytes as u64, false).into(),
        ];
        builder
            .build_call(watch, &args, "")
            .map_err(builder_error(what.clone()))?;
    }
    let call_args: Vec<BasicMetadataValueEnum<'ctx>> = sig
        .params
        .iter()
        .zip(&values)
        .filter(|(p, _)| p.pointee.is_none())
        .map(|(_, v)| (*v).into())
        .collect();
    let call = builder
        .build_call(target, &call_args, "")
        .map_err(builder_error(what.clone()))?;
    builder
        .build_call(observe, &[], "")
        .map_err(builder_error(what.clone()))?;
    let result = call.try_as_basic_value().basic();
    let bits = match (sig.ret, result) {
        (ReturnType::F64, Some(v)) => builder
            .build_bit_cast(v, i64t, "")
            .map_err(builder_error(what.clone()))?
            .into_int_value(),
        (ReturnType::F32, Some(v)) => {
            let low = builder
                .build_bit_cast(v, ctx.i32_type(), "")
                .map_err(builder_error(what.clone()))?;
            builder
                .build_int_z_extend(low.into_int_value(), i64t, "")
                .map_err(builder_error(what.clone()))?
        }
        (ReturnType::Int { bits, signed }, Some(BasicValueEnum::IntValue(v))) if bits <= 64 => {
            if bits == 64 {
                v
            } else if signed && bits > 1 {
                builder
                    .build_int_s_extend(v, i64t, "")
                    .map_err(builder_error(what.clone()))?
            } else {
                builder
                    .build_int_z_extend(v, i64t, "")
                    .map_err(builder_error(what.clone()))?
            }
        }
        _ => i64t.const_zero(),
    };
    builder
        .build_return(Some(&bits))
        .map_err(builder_error(what))?;
    Ok(Ok(wrapper))
}

/// Whether the LLVM function still has the C interface the signature describes (the optimiser may change the
/// interface of static functions).
fn check_interface(f: FunctionValue<'_>, sig: &FunctionSignature) -> Result<(), String> {
    let ty = f.get_type();
    if ty.is_var_arg() {
        return Err("it is variadic".into());
    }
    let params: Vec<BasicTypeEnum<'_>> = f.get_param_iter().map(|p| p.get_type()).collect();
    let declared: Vec<&crate::types::Param> = sig.call_params().collect();
    if params.len() != declared.len() {
        return Err(format!(
            "it takes {} parameters instead of {}",
            params.len(),
            declared.len()
        ));
    }
    for (i, (llvm, param)) in params.iter().zip(declared).enumerate() {
        let ok = match (param.ty, llvm) {
            (ParamType::F64, BasicTypeEnum::FloatType(t)) => t.get_bit_width() == 64,
            (ParamType::F32, BasicTypeEnum::FloatType(t)) => t.get_bit_width() == 32,
            (ParamType::Int { bits, .. }, BasicTypeEnum::IntType(t)) => {
                t.get_bit_width() == bits && bits <= 64
            }
            (ParamType::OutPtr { .. }, BasicTypeEnum::PointerType(_)) => true,
            _ => false,
        };
        if !ok {
            return Err(format!(
                "parameter {} has type {} in this build",
                i + 1,
                llvm.print_to_string().to_string_lossy()
            ));
        }
    }
    let ret = ty.get_return_type();
    let ok = match (sig.ret, ret) {
        (ReturnType::Void, None) => true,
        (ReturnType::F64, Some(BasicTypeEnum::FloatType(t))) => t.get_bit_width() == 64,
        (ReturnType::F32, Some(BasicTypeEnum::FloatType(t))) => t.get_bit_width() == 32,
        (ReturnType::Int { bits, .. }, Some(BasicTypeEnum::IntType(t))) => {
            t.get_bit_width() == bits
        }
        (ReturnType::Other, Some(_)) => true,
        _ => false,
    };
    if !ok {
        return Err("its return type differs in this build".into());
    }
    Ok(())
}

/// Adds the entry table the driver calls through: `[2N x ptr]` (P, P' per function; null when unavailable)
/// and its length N.
pub fn add_entry_table<'ctx>(
    module: &Module<'ctx>,
    entries: &[(Option<FunctionValue<'ctx>>, Option<FunctionValue<'ctx>>)],
) {
    let ctx = module.get_context();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let values: Vec<_> = entries
        .iter()
        .flat_map(|(p, pp)| [*p, *pp])
        .map(|f| {
            f.map(|f| f.as_global_value().as_pointer_value())
                .unwrap_or_else(|| ptr.const_null())
        })
        .collect();
    let table = module.add_global(ptr.array_type(values.len() as u32), None, ENTRY_TABLE);
    table.set_initializer(&ptr.const_array(&values));
    table.set_linkage(Linkage::External);
    let count = module.add_global(ctx.i32_type(), None, ENTRY_COUNT);
    count.set_initializer(&ctx.i32_type().const_int(entries.len() as u64, false));
    count.set_constant(true);
    count.set_linkage(Linkage::External);
}
