//! The typed entry wrappers the batch driver calls (arguments from words, pointer buffers watched, the result as
//! bits; a struct passed by value rebuilt as the ABI passes it, a returned one stored into a watched buffer) and
//! the entry table.

use super::*;
use crate::types::{IrArg, RETURN_PARAM};
use inkwell::attributes::AttributeLoc;

/// Why a function cannot be called in one build.
pub type Unavailable = String;

/// Adds `i64 @<entry name>(ptr %args)` to `module` (already prefixed): it reads one 64-bit word per parameter
/// (double and float bit patterns, integers in the low bits, ignored for out-parameters, which get a zeroed
/// buffer of their size from the runtime, between guard pages), calls the build's function and returns the
/// result's bits (floats as their bit pattern, integers sign-extended, or zero-extended when unsigned or
/// `_Bool`, 0 for void and other types). The
/// fields of a struct passed by value are put together as the IR argument ([`FunctionSignature::ir_args`]); a
/// returned struct is stored into a buffer watched as [`RETURN_PARAM`].
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
    let entry = EntryBuilder {
        builder: ctx.create_builder(),
        ctx,
        i64t,
        what: format!("the entry of {}", sig.name),
        buffer_fn: module.get_function(BUFFER_FN).unwrap_or_else(|| {
            let fn_type = ptr.fn_type(&[ctx.i32_type().into(), ctx.i32_type().into()], false);
            module.add_function(BUFFER_FN, fn_type, None)
        }),
        buffers: std::cell::Cell::new(0),
    };
    entry.builder.position_at_end(block);
    let args = wrapper
        .get_nth_param(0)
        .expect("one parameter")
        .into_pointer_value();
    let mut values: Vec<BasicValueEnum<'ctx>> = Vec::with_capacity(sig.params.len());
    for (i, param) in sig.params.iter().enumerate() {
        values.push(entry.load_param(args, i, param.ty)?);
    }
    // The values behind pointers go into their pointer's buffer; the C parameters are passed.
    entry.store_pointees(sig, &values)?;
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
    // A returned struct goes into a buffer of its own, watched like the pointer parameters' (`return.x`).
    let ret_buffer = match sig.ret {
        ReturnType::Struct { bytes, .. } => Some(entry.zeroed_buffer(bytes.div_ceil(8) * 8)?),
        _ => None,
    };
    entry.watch_buffers(watch, sig, &values, ret_buffer)?;
    let call_args = entry.call_args(target, sig, &values, ret_buffer)?;
    let call = entry
        .builder
        .build_call(target, &call_args, "")
        .map_err(entry.error())?;
    copy_abi_attributes(target, call);
    let result = call.try_as_basic_value().basic();
    if let (Some(buffer), ReturnType::Struct { sret: false, .. }, Some(value)) =
        (ret_buffer, sig.ret, result)
    {
        let store = entry
            .builder
            .build_store(buffer, value)
            .map_err(entry.error())?;
        let _ = store.set_alignment(1);
    }
    entry
        .builder
        .build_call(observe, &[], "")
        .map_err(entry.error())?;
    let bits = entry.result_bits(sig.ret, result)?;
    entry
        .builder
        .build_return(Some(&bits))
        .map_err(entry.error())?;
    Ok(Ok(wrapper))
}

/// Puts `target`'s `byval` and `sret` parameter attributes on `call`: they are part of how a call passes its
/// arguments (a `byval` struct is copied onto the stack), so the call site carries them as well.
fn copy_abi_attributes<'ctx>(
    target: FunctionValue<'ctx>,
    call: inkwell::values::CallSiteValue<'ctx>,
) {
    for (i, param) in target.get_param_iter().enumerate() {
        if !param.is_pointer_value() {
            continue;
        }
        for kind in ["byval", "sret"] {
            let id = inkwell::attributes::Attribute::get_named_enum_kind_id(kind);
            if let Some(attr) = target.get_enum_attribute(AttributeLoc::Param(i as u32), id) {
                call.add_attribute(AttributeLoc::Param(i as u32), attr);
            }
        }
    }
}

/// The builder of one entry wrapper, positioned in its body.
struct EntryBuilder<'ctx> {
    ctx: inkwell::context::ContextRef<'ctx>,
    builder: inkwell::builder::Builder<'ctx>,
    i64t: inkwell::types::IntType<'ctx>,
    /// What is built, for errors.
    what: String,
    /// The runtime's `__foe_buffer`.
    buffer_fn: FunctionValue<'ctx>,
    /// Buffers taken from it so far (each its own slot).
    buffers: std::cell::Cell<u32>,
}

impl<'ctx> EntryBuilder<'ctx> {
    /// The error of a failed build step.
    fn error(&self) -> impl FnOnce(inkwell::builder::BuilderError) -> InstrumentError {
        builder_error(self.what.clone())
    }

    /// Parameter `i` of type `ty` from its word in `args`: floats and integers from their bits, a zeroed,
    /// 16-byte-aligned buffer for an out-parameter ([`Self::zeroed_buffer`]).
    fn load_param(
        &self,
        args: inkwell::values::PointerValue<'ctx>,
        i: usize,
        ty: ParamType,
    ) -> Result<BasicValueEnum<'ctx>, InstrumentError> {
        let (ctx, builder, i64t) = (&self.ctx, &self.builder, self.i64t);
        // SAFETY: the driver passes one word per parameter.
        let slot = unsafe {
            builder.build_in_bounds_gep(i64t, args, &[i64t.const_int(i as u64, false)], "")
        }
        .map_err(self.error())?;
        let value: BasicValueEnum<'ctx> = match ty {
            ParamType::F64 => builder
                .build_load(ctx.f64_type(), slot, "")
                .map_err(self.error())?,
            ParamType::F32 => {
                let word = builder
                    .build_load(i64t, slot, "")
                    .map_err(self.error())?
                    .into_int_value();
                let low = builder
                    .build_int_truncate(word, ctx.i32_type(), "")
                    .map_err(self.error())?;
                builder
                    .build_bit_cast(low, ctx.f32_type(), "")
                    .map_err(self.error())?
            }
            ParamType::Int { bits, .. } => {
                let word = builder
                    .build_load(i64t, slot, "")
                    .map_err(self.error())?
                    .into_int_value();
                if bits == 64 {
                    word.into()
                } else {
                    let width = std::num::NonZeroU32::new(bits)
                        .and_then(|b| ctx.custom_width_int_type(b).ok())
                        .ok_or_else(|| InstrumentError::Builder {
                            what: self.what.clone(),
                            message: format!("no {bits}-bit integer type"),
                        })?;
                    builder
                        .build_int_truncate(word, width, "")
                        .map_err(self.error())?
                        .into()
                }
            }
            ParamType::OutPtr { bytes } => self.zeroed_buffer(bytes)?.into(),
        };
        Ok(value)
    }

    /// A zeroed, 16-byte-aligned buffer of `bytes` bytes: the runtime's next slot, which ends at a guard page (a
    /// run that writes past it crashes there, and the worker goes on), or past the slots a stack buffer.
    fn zeroed_buffer(
        &self,
        bytes: u32,
    ) -> Result<inkwell::values::PointerValue<'ctx>, InstrumentError> {
        let (ctx, builder, i64t) = (&self.ctx, &self.builder, self.i64t);
        let slot = self.buffers.get();
        if slot < BUFFER_SLOTS {
            self.buffers.set(slot + 1);
            let i32t = ctx.i32_type();
            let call = builder
                .build_call(
                    self.buffer_fn,
                    &[
                        i32t.const_int(slot as u64, false).into(),
                        i32t.const_int(bytes.max(1) as u64, false).into(),
                    ],
                    "",
                )
                .map_err(self.error())?;
            return call
                .try_as_basic_value()
                .basic()
                .map(|v| v.into_pointer_value())
                .ok_or_else(|| InstrumentError::Builder {
                    what: self.what.clone(),
                    message: "no buffer from the runtime".into(),
                });
        }
        let buf_ty = ctx.i8_type().array_type(bytes.max(1));
        let buf = builder.build_alloca(buf_ty, "").map_err(self.error())?;
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
            .map_err(self.error())?;
        Ok(buf)
    }

    /// The arguments of the call as `target` declares them ([`FunctionSignature::ir_args`]): the `sret` buffer,
    /// each parameter passed as itself, the lanes of a vector argument put together (`insertelement`).
    fn call_args(
        &self,
        target: FunctionValue<'ctx>,
        sig: &FunctionSignature,
        values: &[BasicValueEnum<'ctx>],
        ret_buffer: Option<inkwell::values::PointerValue<'ctx>>,
    ) -> Result<Vec<BasicMetadataValueEnum<'ctx>>, InstrumentError> {
        let missing = |what: &str| InstrumentError::Builder {
            what: self.what.clone(),
            message: format!("no {what} for the call"),
        };
        let mut out = vec![];
        for (at, arg) in sig.ir_args().into_iter().enumerate() {
            let value: BasicValueEnum<'ctx> = match arg {
                IrArg::Sret => ret_buffer.ok_or_else(|| missing("return buffer"))?.into(),
                IrArg::One(i) => *values.get(i).ok_or_else(|| missing("value"))?,
                IrArg::Lanes(lanes) => {
                    let Some(BasicTypeEnum::VectorType(ty)) =
                        target.get_nth_param(at as u32).map(|p| p.get_type())
                    else {
                        return Err(missing("vector argument"));
                    };
                    let mut vector = ty.get_poison();
                    for (lane, i) in lanes.into_iter().enumerate() {
                        let element = *values.get(i).ok_or_else(|| missing("lane"))?;
                        vector = self
                            .builder
                            .build_insert_element(
                                vector,
                                element,
                                self.ctx.i32_type().const_int(lane as u64, false),
                                "",
                            )
                            .map_err(self.error())?;
                    }
                    vector.into()
                }
                IrArg::Packed(fields) => {
                    let Some(BasicTypeEnum::IntType(ty)) =
                        target.get_nth_param(at as u32).map(|p| p.get_type())
                    else {
                        return Err(missing("integer argument"));
                    };
                    self.packed(ty, sig, &fields, values)?.into()
                }
            };
            out.push(value.into());
        }
        Ok(out)
    }

    /// The integer argument of type `ty` that packs the integer `fields` (parameters), each shifted to its byte
    /// offset within the argument's eightbyte.
    fn packed(
        &self,
        ty: inkwell::types::IntType<'ctx>,
        sig: &FunctionSignature,
        fields: &[usize],
        values: &[BasicValueEnum<'ctx>],
    ) -> Result<inkwell::values::IntValue<'ctx>, InstrumentError> {
        let mut word = ty.const_zero();
        for &i in fields {
            let (Some(value), Some(param)) = (values.get(i), sig.params.get(i)) else {
                return Err(InstrumentError::Builder {
                    what: self.what.clone(),
                    message: "no field for a packed argument".into(),
                });
            };
            let offset = param.by_value.as_ref().map_or(0, |b| b.offset % 8);
            let wide = self
                .builder
                .build_int_z_extend_or_bit_cast(value.into_int_value(), ty, "")
                .map_err(self.error())?;
            let shifted = self
                .builder
                .build_left_shift(wide, ty.const_int(8 * offset as u64, false), "")
                .map_err(self.error())?;
            word = self
                .builder
                .build_or(word, shifted, "")
                .map_err(self.error())?;
        }
        Ok(word)
    }

    /// Stores each value that lies behind a pointer parameter into that parameter's buffer, at its offset.
    fn store_pointees(
        &self,
        sig: &FunctionSignature,
        values: &[BasicValueEnum<'ctx>],
    ) -> Result<(), InstrumentError> {
        let (ctx, builder, i64t) = (&self.ctx, &self.builder, self.i64t);
        for (param, value) in sig.params.iter().zip(values) {
            let Some(at) = param.pointee else { continue };
            let buffer = values
                .get(at.param as usize)
                .filter(|b| b.is_pointer_value())
                .ok_or_else(|| InstrumentError::Builder {
                    what: self.what.clone(),
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
            .map_err(self.error())?;
            // A `_Bool` input (an `i1`) goes in as the byte C stores it as: 0 or 1.
            let value = match value {
                BasicValueEnum::IntValue(v) if v.get_type().get_bit_width() < 8 => builder
                    .build_int_z_extend(*v, ctx.i8_type(), "")
                    .map_err(self.error())?
                    .into(),
                v => *v,
            };
            let store = builder.build_store(place, value).map_err(self.error())?;
            let _ = store.set_alignment(1);
        }
        Ok(())
    }

    /// Calls `watch` on each out-parameter buffer passed to the function (its index among the parameters, its
    /// address and size; not a `byval` copy, which the call never changes) and on the returned struct's buffer
    /// ([`RETURN_PARAM`]).
    fn watch_buffers(
        &self,
        watch: FunctionValue<'ctx>,
        sig: &FunctionSignature,
        values: &[BasicValueEnum<'ctx>],
        ret_buffer: Option<inkwell::values::PointerValue<'ctx>>,
    ) -> Result<(), InstrumentError> {
        let ctx = &self.ctx;
        let mut buffers = vec![];
        for (index, (param, value)) in sig.params.iter().zip(values).enumerate() {
            match (param.ty, param.pointee, &param.by_value) {
                (ParamType::OutPtr { bytes }, None, None) => {
                    buffers.push((index as u32, *value, bytes))
                }
                _ => continue,
            }
        }
        if let (Some(buffer), ReturnType::Struct { bytes, .. }) = (ret_buffer, sig.ret) {
            buffers.push((RETURN_PARAM, buffer.into(), bytes.div_ceil(8) * 8));
        }
        for (index, value, bytes) in buffers {
            let args = [
                ctx.i32_type().const_int(index as u64, false).into(),
                value.into(),
                ctx.i32_type().const_int(bytes as u64, false).into(),
            ];
            self.builder
                .build_call(watch, &args, "")
                .map_err(self.error())?;
        }
        Ok(())
    }

    /// The bits of the call's `result` as the entry returns them: floats as their bit pattern, integers
    /// sign-extended (zero-extended when unsigned or `_Bool`), 0 for void and other types.
    fn result_bits(
        &self,
        ret: ReturnType,
        result: Option<BasicValueEnum<'ctx>>,
    ) -> Result<inkwell::values::IntValue<'ctx>, InstrumentError> {
        let (ctx, builder, i64t) = (&self.ctx, &self.builder, self.i64t);
        let bits = match (ret, result) {
            (ReturnType::F64, Some(v)) => builder
                .build_bit_cast(v, i64t, "")
                .map_err(self.error())?
                .into_int_value(),
            (ReturnType::F32, Some(v)) => {
                let low = builder
                    .build_bit_cast(v, ctx.i32_type(), "")
                    .map_err(self.error())?;
                builder
                    .build_int_z_extend(low.into_int_value(), i64t, "")
                    .map_err(self.error())?
            }
            (ReturnType::Int { bits, signed }, Some(BasicValueEnum::IntValue(v))) if bits <= 64 => {
                if bits == 64 {
                    v
                } else if signed && bits > 1 {
                    builder
                        .build_int_s_extend(v, i64t, "")
                        .map_err(self.error())?
                } else {
                    builder
                        .build_int_z_extend(v, i64t, "")
                        .map_err(self.error())?
                }
            }
            _ => i64t.const_zero(),
        };
        Ok(bits)
    }
}

/// Whether the LLVM function still has the C interface the signature describes (the optimiser may change the
/// interface of static functions).
fn check_interface(f: FunctionValue<'_>, sig: &FunctionSignature) -> Result<(), String> {
    let ty = f.get_type();
    if ty.is_var_arg() {
        return Err("it is variadic".into());
    }
    let params: Vec<BasicTypeEnum<'_>> = f.get_param_iter().map(|p| p.get_type()).collect();
    let declared = sig.ir_args();
    if params.len() != declared.len() {
        return Err(format!(
            "it takes {} parameters instead of {}",
            params.len(),
            declared.len()
        ));
    }
    for (i, (llvm, arg)) in params.iter().zip(&declared).enumerate() {
        let byval = crate::ir::has_attribute(f, i, "byval");
        let ok = match arg {
            IrArg::Sret => crate::ir::has_attribute(f, i, "sret"),
            IrArg::Lanes(lanes) => match llvm {
                BasicTypeEnum::VectorType(v) => {
                    v.get_size() as usize == lanes.len()
                        && lanes.iter().all(|&l| {
                            sig.params
                                .get(l)
                                .is_some_and(|p| scalar_matches(p.ty, v.get_element_type()))
                        })
                }
                _ => false,
            },
            IrArg::Packed(fields) => match llvm {
                BasicTypeEnum::IntType(t) => fields.iter().all(|&k| {
                    sig.params.get(k).is_some_and(|p| {
                        matches!(p.ty, ParamType::Int { bits, .. } if bits <= t.get_bit_width())
                    })
                }),
                _ => false,
            },
            IrArg::One(k) => sig.params.get(*k).is_some_and(|p| {
                let memory = p.by_value.as_ref().is_some_and(|b| b.memory);
                scalar_matches(p.ty, *llvm) && memory == byval
            }),
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
        (ReturnType::Struct { sret: true, .. }, None) => true,
        (ReturnType::Struct { sret: false, .. }, Some(_)) => true,
        (ReturnType::Other, Some(_)) => true,
        _ => false,
    };
    if !ok {
        return Err("its return type differs in this build".into());
    }
    Ok(())
}

/// Whether a parameter of type `ty` is passed as the LLVM type `llvm`.
fn scalar_matches(ty: ParamType, llvm: BasicTypeEnum<'_>) -> bool {
    match (ty, llvm) {
        (ParamType::F64, BasicTypeEnum::FloatType(t)) => t.get_bit_width() == 64,
        (ParamType::F32, BasicTypeEnum::FloatType(t)) => t.get_bit_width() == 32,
        (ParamType::Int { bits, .. }, BasicTypeEnum::IntType(t)) => {
            t.get_bit_width() == bits && bits <= 64
        }
        (ParamType::OutPtr { .. }, BasicTypeEnum::PointerType(_)) => true,
        _ => false,
    }
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
