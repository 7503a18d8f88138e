//! Symbolic values of LLVM registers and a byte-addressed memory of regions (allocas, pointer parameters,
//! globals) whose cells hold scalar symbolic values at constant offsets. What a function reads through a pointer
//! parameter before writing it is an input of its own ([`PointeeTable`]).

use super::bits;
use super::error::ModelError;
use super::llvm::{LLVMTypeKind, Layout, Ty};
use crate::round::FloatFormat;
use crate::sym::{self, Expr};
use crate::types::SourceLoc;
use std::collections::BTreeMap;

mod pointees;
pub use pointees::{PointeeSlot, PointeeTable, Pointees};

/// Where a pointer points: a region and a byte offset into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pointer {
    pub region: u32,
    pub offset: i64,
}

impl Pointer {
    pub const NULL_REGION: u32 = u32::MAX;
    pub fn null() -> Pointer {
        Pointer {
            region: Pointer::NULL_REGION,
            offset: 0,
        }
    }
    pub fn is_null(self) -> bool {
        self.region == Pointer::NULL_REGION
    }
}

/// The symbolic value of an LLVM register.
#[derive(Debug, Clone)]
pub enum Value {
    /// A `double` or `float`, valued as a real.
    Real {
        e: Expr,
        fmt: FloatFormat,
    },
    /// An integer of `bits` (≥ 2) held in signed form.
    Int {
        e: Expr,
        bits: u32,
    },
    /// An `i1`.
    Bool(Expr),
    Ptr(Pointer),
    /// A vector, lane by lane.
    Lanes(Vec<Value>),
    /// A first-class struct or array, field by field.
    Fields(Vec<Value>),
    /// `undef`/`poison`, or the result of an operation on one.
    Poison,
}

impl Value {
    /// The term a scalar stands for (a real, an integer or a condition).
    pub fn term(&self) -> Option<&Expr> {
        match self {
            Value::Real { e, .. } | Value::Int { e, .. } | Value::Bool(e) => Some(e),
            _ => None,
        }
    }
}

/// The scalar types memory cells hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Float(FloatFormat),
    Int(u32),
    Ptr,
}

impl Scalar {
    pub fn of(ty: Ty<'_>) -> Result<Scalar, ModelError> {
        match ty.kind() {
            LLVMTypeKind::LLVMDoubleTypeKind => Ok(Scalar::Float(FloatFormat::Double)),
            LLVMTypeKind::LLVMFloatTypeKind => Ok(Scalar::Float(FloatFormat::Single)),
            LLVMTypeKind::LLVMIntegerTypeKind => {
                let bits = ty.int_width();
                if bits > 64 {
                    Err(ModelError::Unsupported(format!(
                        "uses the {bits}-bit integer type"
                    )))
                } else {
                    Ok(Scalar::Int(bits))
                }
            }
            LLVMTypeKind::LLVMPointerTypeKind => Ok(Scalar::Ptr),
            _ => Err(ModelError::Unsupported(format!(
                "uses the `{}` type",
                ty.text()
            ))),
        }
    }

    /// Bytes a store of this scalar writes.
    pub fn bytes(self) -> u64 {
        match self {
            Scalar::Float(FloatFormat::Double) | Scalar::Ptr => 8,
            Scalar::Float(FloatFormat::Single) => 4,
            Scalar::Int(bits) => bits.div_ceil(8) as u64,
        }
    }

    /// The all-zero-bytes value of this scalar.
    pub fn zero(self) -> Value {
        match self {
            Scalar::Float(fmt) => Value::Real {
                e: sym::real_i(0),
                fmt,
            },
            Scalar::Int(1) => Value::Bool(sym::fals()),
            Scalar::Int(bits) => Value::Int {
                e: sym::int_i(0),
                bits,
            },
            Scalar::Ptr => Value::Ptr(Pointer::null()),
        }
    }

    /// Whether `v` can live in a cell of this scalar type.
    fn accepts(self, v: &Value) -> bool {
        match (self, v) {
            (Scalar::Float(f), Value::Real { fmt, .. }) => f == *fmt,
            (Scalar::Int(1), Value::Bool(_)) => true,
            (Scalar::Int(b), Value::Int { bits, .. }) => b == *bits,
            (Scalar::Ptr, Value::Ptr(_)) => true,
            (_, Value::Poison) => true,
            _ => false,
        }
    }

    /// `v`, stored or read as this scalar of the same width but another type: a float's bits as an integer, the
    /// float an integer's bits hold (`bits.rs`), a comparison mask kept as the integer it is in a float's place;
    /// `None` for anything else.
    fn reinterpret(self, v: &Value) -> Option<Value> {
        let width = |fmt: FloatFormat| if fmt == FloatFormat::Double { 64 } else { 32 };
        match (self, v) {
            (Scalar::Int(bits), Value::Real { e, fmt }) if bits == width(*fmt) => {
                Some(Value::Int {
                    e: bits::bits_of_float(e.clone(), bits),
                    bits,
                })
            }
            (Scalar::Float(fmt), Value::Int { e, bits }) if *bits == width(fmt) => {
                match bits::float_of_bits(e, *bits) {
                    Some(x) => Some(Value::Real { e: x, fmt }),
                    None => bits::is_mask(e).then(|| v.clone()),
                }
            }
            _ => None,
        }
    }
}

/// The scalar pieces of a type, with their byte offsets, in order.
pub fn flatten_type(ty: Ty<'_>, layout: Layout<'_>) -> Result<Vec<(u64, Scalar)>, ModelError> {
    let mut out = Vec::new();
    flatten_into(ty, layout, 0, &mut out)?;
    Ok(out)
}

fn flatten_into(
    ty: Ty<'_>,
    layout: Layout<'_>,
    base: u64,
    out: &mut Vec<(u64, Scalar)>,
) -> Result<(), ModelError> {
    match ty.kind() {
        LLVMTypeKind::LLVMArrayTypeKind | LLVMTypeKind::LLVMVectorTypeKind => {
            let elem = ty.element();
            let n = if ty.kind() == LLVMTypeKind::LLVMArrayTypeKind {
                ty.array_len()
            } else {
                ty.vector_len() as u64
            };
            if ty.kind() == LLVMTypeKind::LLVMVectorTypeKind
                && elem.kind() == LLVMTypeKind::LLVMIntegerTypeKind
                && !elem.int_width().is_multiple_of(8)
            {
                return Err(ModelError::Unsupported(format!(
                    "uses the bit-packed vector type `{}`",
                    ty.text()
                )));
            }
            if n > 1 << 16 {
                return Err(ModelError::Unsupported(format!(
                    "uses the large aggregate `{}`",
                    ty.text()
                )));
            }
            let stride = layout.size(elem);
            for i in 0..n {
                flatten_into(elem, layout, base + i * stride, out)?;
            }
            Ok(())
        }
        LLVMTypeKind::LLVMStructTypeKind => {
            for (i, field) in ty.struct_fields().into_iter().enumerate() {
                flatten_into(field, layout, base + layout.field_offset(ty, i as u32), out)?;
            }
            Ok(())
        }
        _ => {
            out.push((base, Scalar::of(ty)?));
            Ok(())
        }
    }
}

/// The scalar leaves of a value, in the order of [`flatten_type`].
pub fn flatten_value(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Lanes(xs) | Value::Fields(xs) => xs.iter().for_each(|x| flatten_value(x, out)),
        other => out.push(other.clone()),
    }
}

/// Rebuilds a value of `ty` from its scalar leaves (consumed from the front of `leaves`).
pub fn unflatten(ty: Ty<'_>, leaves: &mut std::vec::IntoIter<Value>) -> Result<Value, ModelError> {
    match ty.kind() {
        LLVMTypeKind::LLVMVectorTypeKind => {
            let n = ty.vector_len();
            let elem = ty.element();
            Ok(Value::Lanes(
                (0..n)
                    .map(|_| unflatten(elem, leaves))
                    .collect::<Result<_, _>>()?,
            ))
        }
        LLVMTypeKind::LLVMArrayTypeKind => {
            let n = ty.array_len();
            let elem = ty.element();
            Ok(Value::Fields(
                (0..n)
                    .map(|_| unflatten(elem, leaves))
                    .collect::<Result<_, _>>()?,
            ))
        }
        LLVMTypeKind::LLVMStructTypeKind => Ok(Value::Fields(
            ty.struct_fields()
                .into_iter()
                .map(|f| unflatten(f, leaves))
                .collect::<Result<_, _>>()?,
        )),
        _ => leaves
            .next()
            .ok_or_else(|| ModelError::internal("value shorter than its type")),
    }
}

#[derive(Debug, Clone)]
enum Cell {
    Value {
        v: Value,
        size: u64,
    },
    Zero {
        size: u64,
    },
    /// Bytes copied from the buffer of pointer parameter `param`, from its byte `offset` on, before anything was
    /// written there: reading them reads that input.
    Pointee {
        param: u32,
        offset: i64,
        size: u64,
    },
}

impl Cell {
    fn size(&self) -> u64 {
        match self {
            Cell::Value { size, .. } | Cell::Zero { size } | Cell::Pointee { size, .. } => *size,
        }
    }
}

/// What bytes no store has touched hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Zeroed (globals).
    Zero,
    /// The buffer passed as pointer parameter `.0`: bytes never written are inputs ([`PointeeTable`]).
    Param(u32),
    /// Uninitialised (allocas): loads give poison.
    Uninit,
}

#[derive(Debug, Clone)]
struct Region {
    cells: BTreeMap<i64, Cell>,
    fill: Fill,
    /// A human name for messages (`out-parameter res`, `alloca`, `@table`).
    name: String,
}

/// The memory of one path.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    regions: Vec<Region>,
    /// The inputs behind pointer parameters (shared by all paths).
    pub pointees: Pointees,
    /// Whether this path read, through a pointer parameter, a value no input stands for (taken as zero).
    pub read_unmodelled: std::cell::Cell<bool>,
    /// Where the path last stored through each pointer parameter, by (parameter, byte offset of the store).
    pub stored_at: BTreeMap<(u32, i64), SourceLoc>,
}

impl Memory {
    /// An empty memory whose pointer parameters' values are the inputs of `pointees`.
    pub fn with_pointees(pointees: Pointees) -> Memory {
        Memory {
            regions: Vec::new(),
            pointees,
            read_unmodelled: std::cell::Cell::new(false),
            stored_at: BTreeMap::new(),
        }
    }

    /// The scalar values stored so far through each pointer parameter, as (C parameter index, byte offset,
    /// value), by parameter and offset: what the caller finds in its buffers when the function returns.
    /// The pointer parameter whose buffer `p` points into, if any.
    pub fn param_of(&self, p: Pointer) -> Option<u32> {
        match self.region(p).ok()?.fill {
            Fill::Param(param) => Some(param),
            _ => None,
        }
    }

    /// Where the path last stored the bytes at `offset` of pointer parameter `param`'s buffer: the last store at
    /// that offset or before it (a store of a struct covers its fields).
    pub fn stored_at(&self, param: u32, offset: i64) -> Option<SourceLoc> {
        self.stored_at
            .range(..=(param, offset))
            .next_back()
            .filter(|((p, _), _)| *p == param)
            .map(|(_, &loc)| loc)
    }

    pub fn written_through_params(&self) -> Vec<(u32, i64, Value)> {
        let mut out = Vec::new();
        for region in &self.regions {
            let Fill::Param(param) = region.fill else {
                continue;
            };
            for (&offset, cell) in &region.cells {
                if let Cell::Value { v, .. } = cell {
                    out.push((param, offset, v.clone()));
                }
            }
        }
        out.sort_by_key(|(param, offset, _)| (*param, *offset));
        out
    }

    pub fn new_region(&mut self, fill: Fill, name: &str) -> Pointer {
        self.regions.push(Region {
            cells: BTreeMap::new(),
            fill,
            name: name.to_string(),
        });
        Pointer {
            region: (self.regions.len() - 1) as u32,
            offset: 0,
        }
    }

    fn region_mut(&mut self, p: Pointer) -> Result<&mut Region, ModelError> {
        if p.is_null() {
            return Err(ModelError::unsupported("dereferences a null pointer"));
        }
        self.regions
            .get_mut(p.region as usize)
            .ok_or_else(|| ModelError::internal("unknown memory region"))
    }

    fn region(&self, p: Pointer) -> Result<&Region, ModelError> {
        if p.is_null() {
            return Err(ModelError::unsupported("dereferences a null pointer"));
        }
        self.regions
            .get(p.region as usize)
            .ok_or_else(|| ModelError::internal("unknown memory region"))
    }

    /// Loads a value of `ty` at `p`; `boolean` when the load reads a C `_Bool` (an input it makes ranges 0..=1).
    pub fn load(
        &self,
        p: Pointer,
        ty: Ty<'_>,
        layout: Layout<'_>,
        boolean: bool,
    ) -> Result<Value, ModelError> {
        let pieces = flatten_type(ty, layout)?;
        let region = self.region(p)?;
        let unmodelled_before = self.pointees.borrow().unmodelled_read_count;
        let mut leaves = Vec::with_capacity(pieces.len());
        for (off, scalar) in pieces {
            leaves.push(region.read(p.offset + off as i64, scalar, boolean, &self.pointees)?);
        }
        if self.pointees.borrow().unmodelled_read_count != unmodelled_before {
            self.read_unmodelled.set(true);
        }
        unflatten(ty, &mut leaves.into_iter())
    }

    /// Stores `v` (of type `ty`) at `p`.
    pub fn store(
        &mut self,
        p: Pointer,
        v: &Value,
        ty: Ty<'_>,
        layout: Layout<'_>,
    ) -> Result<(), ModelError> {
        let pieces = flatten_type(ty, layout)?;
        let mut leaves = Vec::with_capacity(pieces.len());
        flatten_value(v, &mut leaves);
        if leaves.len() != pieces.len() {
            return Err(ModelError::Unsupported(format!(
                "stores a value that does not match its type `{}`",
                ty.text()
            )));
        }
        let region = self.region_mut(p)?;
        for ((off, scalar), leaf) in pieces.into_iter().zip(leaves) {
            let leaf = if scalar.accepts(&leaf) {
                leaf
            } else {
                scalar.reinterpret(&leaf).ok_or_else(|| {
                    ModelError::Unsupported(format!(
                        "stores a value that does not match its type `{}`",
                        ty.text()
                    ))
                })?
            };
            let at = p.offset + off as i64;
            region.clear(at, scalar.bytes())?;
            region.cells.insert(
                at,
                Cell::Value {
                    v: leaf,
                    size: scalar.bytes(),
                },
            );
        }
        Ok(())
    }

    /// Stores one scalar `v` of kind `scalar` at `p` (what a modelled library call writes through a pointer).
    pub fn store_scalar(&mut self, p: Pointer, v: Value, scalar: Scalar) -> Result<(), ModelError> {
        if !scalar.accepts(&v) {
            return Err(ModelError::internal(format!("storing {v:?} as {scalar:?}")));
        }
        let region = self.region_mut(p)?;
        region.clear(p.offset, scalar.bytes())?;
        region.cells.insert(
            p.offset,
            Cell::Value {
                v,
                size: scalar.bytes(),
            },
        );
        Ok(())
    }

    /// `memset(p, 0, len)`.
    pub fn zero(&mut self, p: Pointer, len: u64) -> Result<(), ModelError> {
        let region = self.region_mut(p)?;
        region.clear(p.offset, len)?;
        if len > 0 {
            region.cells.insert(p.offset, Cell::Zero { size: len });
        }
        Ok(())
    }

    /// `memcpy(dst, src, len)` (non-overlapping).
    pub fn copy(&mut self, dst: Pointer, src: Pointer, len: u64) -> Result<(), ModelError> {
        let source = self.region(src)?;
        let (start, end) = (src.offset, src.offset + len as i64);
        let mut copied: Vec<(i64, Cell)> = Vec::new();
        let mut cursor = start;
        // A cell starting before the range may reach into it: only zeros and pointee bytes can be cut.
        if let Some((&s, c)) = source.cells.range(..start).next_back() {
            let cell_end = s + c.size() as i64;
            if cell_end > start {
                let until = cell_end.min(end);
                let part = c
                    .slice(start - s, (until - start) as u64)
                    .ok_or_else(|| ModelError::unsupported("copies part of a stored value"))?;
                copied.push((0, part));
                cursor = until;
            }
        }
        for (&s, c) in source.cells.range(cursor..end) {
            if s > cursor {
                copied.extend(
                    source
                        .gap(cursor, (s - cursor) as u64)
                        .map(|g| (cursor - start, g)),
                );
            }
            let cell_end = s + c.size() as i64;
            if cell_end > end {
                let part = c
                    .slice(0, (end - s) as u64)
                    .ok_or_else(|| ModelError::unsupported("copies part of a stored value"))?;
                copied.push((s - start, part));
                cursor = end;
                break;
            }
            copied.push((s - start, c.clone()));
            cursor = cell_end;
        }
        if cursor < end {
            copied.extend(
                source
                    .gap(cursor, (end - cursor) as u64)
                    .map(|g| (cursor - start, g)),
            );
        }
        let target = self.region_mut(dst)?;
        target.clear(dst.offset, len)?;
        for (rel, cell) in copied {
            target.cells.insert(dst.offset + rel, cell);
        }
        Ok(())
    }
}

impl Cell {
    /// The `size` bytes from byte `from` of this cell, as a cell of their own; `None` for part of a value.
    fn slice(&self, from: i64, size: u64) -> Option<Cell> {
        match self {
            Cell::Zero { .. } => Some(Cell::Zero { size }),
            Cell::Pointee { param, offset, .. } => Some(Cell::Pointee {
                param: *param,
                offset: offset + from,
                size,
            }),
            Cell::Value { v, size: whole } => {
                (from == 0 && size == *whole).then(|| Cell::Value { v: v.clone(), size })
            }
        }
    }
}

impl Region {
    /// What the `size` never-written bytes at `at` hold, as a cell: zeros, pointee bytes, or nothing (poison).
    fn gap(&self, at: i64, size: u64) -> Option<Cell> {
        match self.fill {
            Fill::Zero => Some(Cell::Zero { size }),
            Fill::Param(param) => Some(Cell::Pointee {
                param,
                offset: at,
                size,
            }),
            Fill::Uninit => None,
        }
    }

    /// Reads a scalar at byte `at`.
    fn read(
        &self,
        at: i64,
        scalar: Scalar,
        boolean: bool,
        pointees: &Pointees,
    ) -> Result<Value, ModelError> {
        let size = scalar.bytes() as i64;
        if let Some((&s, cell)) = self.cells.range(..=at).next_back() {
            let cell_end = s + cell.size() as i64;
            if cell_end > at {
                return match cell {
                    Cell::Zero { .. } if cell_end >= at + size => Ok(scalar.zero()),
                    Cell::Pointee { param, offset, .. } if cell_end >= at + size => pointees
                        .borrow_mut()
                        .read(*param, offset + (at - s), scalar, boolean, &self.name),
                    Cell::Value { v, size: cs }
                        if s == at && *cs as i64 == size && scalar.accepts(v) =>
                    {
                        Ok(v.clone())
                    }
                    Cell::Value {
                        v: Value::Int { e, bits },
                        ..
                    } if s == at && scalar == Scalar::Int(1) && *bits == 8 => {
                        // An i8-stored boolean read back as i1.
                        Ok(Value::Bool(sym::ne(e.clone(), sym::int_i(0))))
                    }
                    // A float read as its bits or bits read as a float (`_mm_and_ps` through memory, a union).
                    Cell::Value { v, size: cs } if s == at && *cs as i64 == size => {
                        scalar.reinterpret(v).ok_or_else(|| {
                            ModelError::Unsupported(format!(
                                "reads memory of {} as another type",
                                self.name
                            ))
                        })
                    }
                    _ => Err(ModelError::Unsupported(format!(
                        "reads memory of {} as another type",
                        self.name
                    ))),
                };
            }
        }
        if self.cells.range(at + 1..at + size).next().is_some() {
            return Err(ModelError::Unsupported(format!(
                "reads memory of {} as another type",
                self.name
            )));
        }
        Ok(match self.fill {
            Fill::Zero => scalar.zero(),
            Fill::Param(param) => pointees
                .borrow_mut()
                .read(param, at, scalar, boolean, &self.name)?,
            Fill::Uninit => Value::Poison,
        })
    }

    /// Removes what lies in [at, at+len): zero and pointee cells are trimmed, value cells must lie wholly inside.
    fn clear(&mut self, at: i64, len: u64) -> Result<(), ModelError> {
        let end = at + len as i64;
        let mut keep: Vec<(i64, Cell)> = Vec::new();
        let mut remove: Vec<i64> = Vec::new();
        let partly = || {
            ModelError::Unsupported(format!("partly overwrites a value stored in {}", self.name))
        };
        if let Some((&s, cell)) = self.cells.range(..at).next_back() {
            let cell_end = s + cell.size() as i64;
            if cell_end > at {
                remove.push(s);
                keep.push((s, cell.slice(0, (at - s) as u64).ok_or_else(partly)?));
                if cell_end > end {
                    keep.push((
                        end,
                        cell.slice(end - s, (cell_end - end) as u64)
                            .ok_or_else(partly)?,
                    ));
                }
            }
        }
        for (&s, cell) in self.cells.range(at..end) {
            let cell_end = s + cell.size() as i64;
            remove.push(s);
            if cell_end > end {
                keep.push((
                    end,
                    cell.slice(end - s, (cell_end - end) as u64)
                        .ok_or_else(partly)?,
                ));
            }
        }
        for s in remove {
            self.cells.remove(&s);
        }
        for (s, c) in keep {
            self.cells.insert(s, c);
        }
        Ok(())
    }
}
