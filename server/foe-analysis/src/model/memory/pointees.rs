//! What a function reads through its pointer parameters before writing it: an input of its own per place
//! (a [`PointeeSlot`]), shared by every path and both builds' models of the function.

use super::{Scalar, Value};
use crate::model::error::ModelError;
use crate::round::FloatFormat;
use crate::sym::{self, VarType};
use crate::types::ParamType;
use std::collections::BTreeSet;

/// A value passed in through a pointer: `scalar` at byte `offset` of the buffer of parameter `param`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointeeSlot {
    pub param: u32,
    pub offset: i64,
    pub scalar: Scalar,
    /// A C `_Bool` (first read as one, [`crate::model::llvm::Val::loads_a_bool`]): its input is 0 or 1, as no C
    /// program stores another value there.
    pub boolean: bool,
}

impl PointeeSlot {
    /// The parameter type the runner passes this value as.
    pub fn param_type(self) -> ParamType {
        match self.scalar {
            Scalar::Float(FloatFormat::Double) => ParamType::F64,
            Scalar::Float(FloatFormat::Single) => ParamType::F32,
            Scalar::Int(_) if self.boolean => ParamType::Int {
                bits: 1,
                signed: false,
            },
            Scalar::Int(bits) => ParamType::Int { bits, signed: true },
            Scalar::Ptr => unreachable!("pointers behind pointers are not inputs"),
        }
    }
}

/// The values a function reads through its pointer parameters before writing them. Each becomes an input of
/// its own, numbered after the C parameters. One table serves every path and both builds' models of a function,
/// so a place behind a pointer is the same input in P and P'.
#[derive(Debug, Default)]
pub struct PointeeTable {
    /// The index of the first such input: the number of C parameters.
    pub first_index: u32,
    pub slots: Vec<PointeeSlot>,
    /// Pointers read where no input can stand for the value (a pointer, a boolean, beyond the buffer, too many
    /// inputs): those reads give zeros, as the runner's buffer holds.
    pub unmodelled: BTreeSet<String>,
    /// How many reads gave such zeros, over every path (a path compares it before and after a load to know
    /// whether its own values depend on memory foe does not model).
    pub unmodelled_read_count: u64,
}

/// The shared [`PointeeTable`] of one function.
pub type Pointees = std::rc::Rc<std::cell::RefCell<PointeeTable>>;

impl PointeeTable {
    /// Inputs behind pointers one function may have.
    pub const MAX_SLOTS: usize = 32;

    /// An empty table, shared, whose inputs are numbered from `first_index` (the number of C parameters).
    pub fn shared(first_index: u32) -> Pointees {
        std::rc::Rc::new(std::cell::RefCell::new(PointeeTable {
            first_index,
            ..PointeeTable::default()
        }))
    }

    /// The value of `scalar` at byte `offset` of the buffer of parameter `param` (named `name`), as read before
    /// any write: a new input the first time, the same one after.
    pub(super) fn read(
        &mut self,
        param: u32,
        offset: i64,
        scalar: Scalar,
        boolean: bool,
        name: &str,
    ) -> Result<Value, ModelError> {
        let end = offset + scalar.bytes() as i64;
        for (k, slot) in self.slots.iter().enumerate() {
            let slot_end = slot.offset + slot.scalar.bytes() as i64;
            if slot.param == param && slot.offset < end && offset < slot_end {
                if slot.offset == offset && slot.scalar == scalar {
                    return Ok(self.value(k));
                }
                // A float input read again as its bits (a `float` read as `uint32_t` through a pointer).
                if slot.offset == offset && slot.scalar.bytes() == scalar.bytes() {
                    if let Some(v) = scalar.reinterpret(&self.value(k)) {
                        return Ok(v);
                    }
                }
                return Err(ModelError::Unsupported(format!(
                    "reads memory of {name} as another type"
                )));
            }
        }
        let usable = matches!(scalar, Scalar::Float(_) | Scalar::Int(8 | 16 | 32 | 64))
            && offset >= 0
            && end <= crate::ir::OUT_BUFFER_BYTES as i64
            && self.slots.len() < Self::MAX_SLOTS;
        if !usable {
            self.unmodelled.insert(name.to_string());
            self.unmodelled_read_count += 1;
            return Ok(scalar.zero());
        }
        self.slots.push(PointeeSlot {
            param,
            offset,
            scalar,
            boolean: boolean && scalar == Scalar::Int(8),
        });
        Ok(self.value(self.slots.len() - 1))
    }

    fn value(&self, k: usize) -> Value {
        let slot = self.slots[k];
        let index = self.first_index + k as u32;
        match slot.scalar {
            Scalar::Float(fmt) => Value::Real {
                e: sym::param(index, VarType::Float(fmt)),
                fmt,
            },
            // The input's type is the one the runner passes ([`PointeeSlot::param_type`]: a `_Bool` ranges 0..=1),
            // read as the bytes that hold it.
            Scalar::Int(bits) => {
                let ParamType::Int {
                    bits: input_bits,
                    signed,
                } = slot.param_type()
                else {
                    unreachable!("an integer slot is an integer input")
                };
                Value::Int {
                    e: sym::param(
                        index,
                        VarType::Int {
                            bits: input_bits,
                            signed,
                        },
                    ),
                    bits,
                }
            }
            Scalar::Ptr => Scalar::Ptr.zero(),
        }
    }
}
