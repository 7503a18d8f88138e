//! Symbolic values of LLVM registers and a byte-addressed memory of regions (allocas, out-parameters,
//! globals) whose cells hold scalar symbolic values at constant offsets.

use super::llvm::{LLVMTypeKind, Layout, Ty};
use crate::round::FloatFormat;
use crate::sym::{self, Expr};
use std::collections::BTreeMap;

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

/// The scalar types memory cells hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Float(FloatFormat),
    Int(u32),
    Ptr,
}

impl Scalar {
    pub fn of(ty: Ty<'_>) -> Result<Scalar, String> {
        match ty.kind() {
            LLVMTypeKind::LLVMDoubleTypeKind => Ok(Scalar::Float(FloatFormat::Double)),
            LLVMTypeKind::LLVMFloatTypeKind => Ok(Scalar::Float(FloatFormat::Single)),
            LLVMTypeKind::LLVMIntegerTypeKind => {
                let bits = ty.int_width();
                if bits > 64 {
                    Err(format!("uses the {bits}-bit integer type"))
                } else {
                    Ok(Scalar::Int(bits))
                }
            }
            LLVMTypeKind::LLVMPointerTypeKind => Ok(Scalar::Ptr),
            _ => Err(format!("uses the `{}` type", ty.text())),
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
}

/// The scalar pieces of a type, with their byte offsets, in order.
pub fn flatten_type(ty: Ty<'_>, layout: Layout<'_>) -> Result<Vec<(u64, Scalar)>, String> {
    let mut out = Vec::new();
    flatten_into(ty, layout, 0, &mut out)?;
    Ok(out)
}

fn flatten_into(
    ty: Ty<'_>,
    layout: Layout<'_>,
    base: u64,
    out: &mut Vec<(u64, Scalar)>,
) -> Result<(), String> {
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
                return Err(format!("uses the bit-packed vector type `{}`", ty.text()));
            }
            if n > 1 << 16 {
                return Err(format!("uses the large aggregate `{}`", ty.text()));
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
pub fn unflatten(ty: Ty<'_>, leaves: &mut std::vec::IntoIter<Value>) -> Result<Value, String> {
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
            .ok_or_else(|| "internal: value shorter than its type".to_string()),
    }
}

#[derive(Debug, Clone)]
enum Cell {
    Value { v: Value, size: u64 },
    Zero { size: u64 },
}

impl Cell {
    fn size(&self) -> u64 {
        match self {
            Cell::Value { size, .. } | Cell::Zero { size } => *size,
        }
    }
}

/// What bytes no store has touched hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Zeroed (globals).
    Zero,
    /// Behind a pointer parameter: zeroed, as the runner passes it; reads of bytes never written are recorded
    /// (values passed in through pointers are not modelled).
    Param,
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

/// Names of pointer-parameter regions read before being written, shared by all paths of one function.
pub type ParamReads = std::rc::Rc<std::cell::RefCell<std::collections::BTreeSet<String>>>;

/// The memory of one path.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    regions: Vec<Region>,
    /// Names of pointer-parameter regions read before being written, on any path (shared by all paths).
    pub unwritten_param_reads: ParamReads,
}

impl Memory {
    /// An empty memory that records unwritten pointer-parameter reads into `reads`.
    pub fn noting_param_reads(reads: ParamReads) -> Memory {
        Memory {
            regions: Vec::new(),
            unwritten_param_reads: reads,
        }
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

    fn region_mut(&mut self, p: Pointer) -> Result<&mut Region, String> {
        if p.is_null() {
            return Err("dereferences a null pointer".into());
        }
        self.regions
            .get_mut(p.region as usize)
            .ok_or_else(|| "internal: unknown memory region".to_string())
    }

    fn region(&self, p: Pointer) -> Result<&Region, String> {
        if p.is_null() {
            return Err("dereferences a null pointer".into());
        }
        self.regions
            .get(p.region as usize)
            .ok_or_else(|| "internal: unknown memory region".to_string())
    }

    /// Loads a value of `ty` at `p`.
    pub fn load(&self, p: Pointer, ty: Ty<'_>, layout: Layout<'_>) -> Result<Value, String> {
        let pieces = flatten_type(ty, layout)?;
        let region = self.region(p)?;
        if region.fill == Fill::Param
            && pieces
                .iter()
                .any(|(off, sc)| region.unwritten(p.offset + *off as i64, sc.bytes()))
        {
            self.unwritten_param_reads
                .borrow_mut()
                .insert(region.name.clone());
        }
        let mut leaves = Vec::with_capacity(pieces.len());
        for (off, scalar) in pieces {
            leaves.push(region.read(p.offset + off as i64, scalar)?);
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
    ) -> Result<(), String> {
        let pieces = flatten_type(ty, layout)?;
        let mut leaves = Vec::with_capacity(pieces.len());
        flatten_value(v, &mut leaves);
        if leaves.len() != pieces.len() {
            return Err(format!(
                "stores a value that does not match its type `{}`",
                ty.text()
            ));
        }
        let region = self.region_mut(p)?;
        for ((off, scalar), leaf) in pieces.into_iter().zip(leaves) {
            if !scalar.accepts(&leaf) {
                return Err(format!(
                    "stores a value that does not match its type `{}`",
                    ty.text()
                ));
            }
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

    /// `memset(p, 0, len)`.
    pub fn zero(&mut self, p: Pointer, len: u64) -> Result<(), String> {
        let region = self.region_mut(p)?;
        region.clear(p.offset, len)?;
        if len > 0 {
            region.cells.insert(p.offset, Cell::Zero { size: len });
        }
        Ok(())
    }

    /// `memcpy(dst, src, len)` (non-overlapping).
    pub fn copy(&mut self, dst: Pointer, src: Pointer, len: u64) -> Result<(), String> {
        let source = self.region(src)?;
        let (start, end) = (src.offset, src.offset + len as i64);
        let mut copied: Vec<(i64, Cell)> = Vec::new();
        let mut cursor = start;
        // A cell starting before the range must not reach into it.
        if let Some((&s, c)) = source.cells.range(..start).next_back() {
            if s + c.size() as i64 > start {
                match c {
                    Cell::Zero { size } => {
                        let until = (s + *size as i64).min(end);
                        copied.push((
                            0,
                            Cell::Zero {
                                size: (until - start) as u64,
                            },
                        ));
                        cursor = until;
                    }
                    Cell::Value { .. } => return Err("copies part of a stored value".into()),
                }
            }
        }
        for (&s, c) in source.cells.range(cursor..end) {
            if s > cursor && source.fill != Fill::Uninit {
                copied.push((
                    cursor - start,
                    Cell::Zero {
                        size: (s - cursor) as u64,
                    },
                ));
            }
            let cell_end = s + c.size() as i64;
            if cell_end > end {
                match c {
                    Cell::Zero { .. } => {
                        copied.push((
                            s - start,
                            Cell::Zero {
                                size: (end - s) as u64,
                            },
                        ));
                        cursor = end;
                        break;
                    }
                    Cell::Value { .. } => return Err("copies part of a stored value".into()),
                }
            }
            copied.push((s - start, c.clone()));
            cursor = cell_end;
        }
        if cursor < end && source.fill != Fill::Uninit {
            copied.push((
                cursor - start,
                Cell::Zero {
                    size: (end - cursor) as u64,
                },
            ));
        }
        let target = self.region_mut(dst)?;
        target.clear(dst.offset, len)?;
        for (rel, cell) in copied {
            target.cells.insert(dst.offset + rel, cell);
        }
        Ok(())
    }
}

impl Region {
    /// Whether no cell overlaps the `size` bytes at `at`.
    fn unwritten(&self, at: i64, size: u64) -> bool {
        self.cells
            .range(..at + size as i64)
            .next_back()
            .is_none_or(|(&s, c)| s + c.size() as i64 <= at)
    }

    /// Reads a scalar at byte `at`.
    fn read(&self, at: i64, scalar: Scalar) -> Result<Value, String> {
        let size = scalar.bytes() as i64;
        if let Some((&s, cell)) = self.cells.range(..=at).next_back() {
            let cell_end = s + cell.size() as i64;
            if cell_end > at {
                return match cell {
                    Cell::Zero { .. } if cell_end >= at + size => Ok(scalar.zero()),
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
                    _ => Err(format!("reads memory of {} as another type", self.name)),
                };
            }
        }
        if let Some((&s, _)) = self.cells.range(at + 1..at + size).next() {
            let _ = s;
            return Err(format!("reads memory of {} as another type", self.name));
        }
        Ok(match self.fill {
            Fill::Zero | Fill::Param => scalar.zero(),
            Fill::Uninit => Value::Poison,
        })
    }

    /// Removes what lies in [at, at+len): zero cells are trimmed, value cells must lie wholly inside.
    fn clear(&mut self, at: i64, len: u64) -> Result<(), String> {
        let end = at + len as i64;
        let mut keep: Vec<(i64, Cell)> = Vec::new();
        let mut remove: Vec<i64> = Vec::new();
        if let Some((&s, cell)) = self.cells.range(..at).next_back() {
            let cell_end = s + cell.size() as i64;
            if cell_end > at {
                match cell {
                    Cell::Zero { .. } => {
                        remove.push(s);
                        keep.push((
                            s,
                            Cell::Zero {
                                size: (at - s) as u64,
                            },
                        ));
                        if cell_end > end {
                            keep.push((
                                end,
                                Cell::Zero {
                                    size: (cell_end - end) as u64,
                                },
                            ));
                        }
                    }
                    Cell::Value { .. } => {
                        return Err(format!("partly overwrites a value stored in {}", self.name))
                    }
                }
            }
        }
        for (&s, cell) in self.cells.range(at..end) {
            let cell_end = s + cell.size() as i64;
            remove.push(s);
            if cell_end > end {
                match cell {
                    Cell::Zero { .. } => keep.push((
                        end,
                        Cell::Zero {
                            size: (cell_end - end) as u64,
                        },
                    )),
                    Cell::Value { .. } => {
                        return Err(format!("partly overwrites a value stored in {}", self.name))
                    }
                }
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
