//! What pointer parameters point to, from the debug info's types: an input read at byte 16 of
//! `const struct body *b` is named `b->vel.x` rather than `b[2]`, and a value written at byte 8 of `double *out`
//! is `out[1]`, read as a double. The same layouts name the fields of structs passed or returned by value
//! (`v.x`, `return.y`).

use crate::scalar::ScalarType;
use crate::types::FunctionSignature;
use regex::Regex;
use std::collections::HashMap;
use std::sync::OnceLock;

/// The leaf fields of the struct (or the one scalar) a pointer parameter points to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointeeFields {
    /// Index of the pointer among the C parameters.
    pub param: u32,
    /// The pointee's size in bytes (elements past the first are `b[1].pos.x`, `out[1]`).
    pub struct_bytes: u32,
    /// Every scalar field, by byte offset: its path (`pos.x`; empty for a pointer to a scalar) and its C type
    /// when it is a number foe reads.
    pub fields: Vec<PointeeField>,
    /// Whether the buffer holds a struct passed or returned by value, whose fields C names `v.x`, not `v->x`.
    pub by_value: bool,
}

/// A struct type as a parameter or return value has it: its C name as the source spells it (`b2Vec2`), its size
/// and its scalar fields by byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructLayout {
    pub c_type: String,
    pub bytes: u32,
    pub fields: Vec<PointeeField>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointeeField {
    pub offset: u32,
    pub path: String,
    pub ty: Option<ScalarType>,
}

/// How C names field `path` of a struct or vector passed by value as `whole`: `v.x`, or `a[1]` for a vector's lane.
pub fn by_value_name(whole: &str, path: &str) -> String {
    if path.starts_with('[') {
        format!("{whole}{path}")
    } else {
        format!("{whole}.{path}")
    }
}

impl PointeeFields {
    /// How C names the field at `offset` of element `index`: `*out`, `out[2]`, `r->y`, `r[1].pos.x`.
    pub fn name(&self, pointer: &str, index: u32, field: &PointeeField) -> String {
        if self.by_value && index == 0 && !field.path.is_empty() {
            return by_value_name(pointer, &field.path);
        }
        match (index, field.path.is_empty()) {
            (0, true) => format!("*{pointer}"),
            (i, true) => format!("{pointer}[{i}]"),
            (0, false) => format!("{pointer}->{}", field.path),
            (i, false) => format!("{pointer}[{i}].{}", field.path),
        }
    }

    /// The scalar fields that lie wholly in the `len` bytes from `start`, as (element, field, absolute offset).
    pub fn fields_in(&self, start: u32, len: u32) -> Vec<(u32, &PointeeField, u32)> {
        let size = self.struct_bytes.max(1);
        let mut out = vec![];
        for at in start..start + len {
            let (index, within) = (at / size, at % size);
            for f in self.fields.iter().filter(|f| f.offset == within) {
                let Some(ty) = f.ty else { continue };
                if at + ty.bytes() <= start + len {
                    out.push((index, f, at));
                }
            }
        }
        out
    }
}

/// Type metadata read from the textual IR.
#[derive(Debug, Default)]
pub struct TypeFacts {
    /// Pointer type → pointee type.
    pointer_base: HashMap<u32, u32>,
    /// typedef/const/volatile → base type.
    qualified_base: HashMap<u32, u32>,
    /// Struct type → (size in bits, elements tuple).
    structs: HashMap<u32, (u32, u32)>,
    /// Vector type (`__m128`, `DIFlagVector`) → (size in bits, element type).
    vectors: HashMap<u32, (u32, u32)>,
    /// Tuple → its members.
    tuples: HashMap<u32, Vec<u32>>,
    /// Member → (name, base type, offset in bits, size in bits).
    members: HashMap<u32, (String, u32, u32, u32)>,
    /// Basic type → its C type, for the numbers foe reads.
    scalars: HashMap<u32, ScalarType>,
    /// typedef and struct → its C name.
    names: HashMap<u32, String>,
    /// Function types (`DISubroutineType`).
    subroutines: std::collections::HashSet<u32>,
    /// Function type → its types tuple (the return type first).
    subroutine_types: HashMap<u32, u32>,
    /// Tuple → its first item (`None` for `null`: a function returning `void`).
    tuple_heads: HashMap<u32, Option<u32>>,
}

/// The scalar a `DIBasicType` of this encoding and size in bits stands for.
fn basic_scalar(encoding: &str, bits: u32) -> Option<ScalarType> {
    match (encoding, bits) {
        ("float", 64) => Some(ScalarType::F64),
        ("float", 32) => Some(ScalarType::F32),
        ("signed" | "signed_char", 8 | 16 | 32 | 64) => {
            Some(ScalarType::Int { bits, signed: true })
        }
        ("unsigned" | "unsigned_char", 8 | 16 | 32 | 64) => Some(ScalarType::Int {
            bits,
            signed: false,
        }),
        ("boolean", 8) => Some(ScalarType::Int {
            bits: 8,
            signed: false,
        }),
        _ => None,
    }
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("valid regex"))
}

/// A metadata number (`!12` → 12); 0 where the text is not one.
fn num(s: &str) -> u32 {
    s.parse::<u32>().unwrap_or(0)
}

/// The `name:`, `baseType:`, `size:`, `offset:` and `elements:` fields of one metadata record.
fn fields_of(rest: &str) -> HashMap<String, String> {
    static FIELD: OnceLock<Regex> = OnceLock::new();
    let field = re(
        &FIELD,
        r#"\b(name|baseType|size|offset|elements): (?:!|")?([\w]+)"#,
    );
    field
        .captures_iter(rest)
        .map(|c| (c[1].to_string(), c[2].to_string()))
        .collect()
}

impl TypeFacts {
    /// The type facts of a module's textual IR, one kind of debug-info record at a time.
    pub fn from_ll(ll: &str) -> TypeFacts {
        let mut facts = TypeFacts::default();
        facts.read_derived(ll);
        facts.read_composites(ll);
        facts.read_subroutines(ll);
        facts.read_tuples(ll);
        facts.read_basic(ll);
        facts
    }

    /// Pointers, typedefs, qualifiers and struct members (`!DIDerivedType`).
    fn read_derived(&mut self, ll: &str) {
        static DERIVED: OnceLock<Regex> = OnceLock::new();
        let derived = re(
            &DERIVED,
            r#"(?m)^!(\d+) = !DIDerivedType\(tag: DW_TAG_(\w+),(.*)$"#,
        );
        for c in derived.captures_iter(ll) {
            let id = num(&c[1]);
            let f = fields_of(&c[3]);
            let base = f.get("baseType").map_or(0, |b| num(b));
            match &c[2] {
                "pointer_type" => {
                    self.pointer_base.insert(id, base);
                }
                "typedef" | "const_type" | "volatile_type" => {
                    self.qualified_base.insert(id, base);
                    if let (Some(name), "typedef") = (f.get("name"), &c[2]) {
                        self.names.insert(id, name.clone());
                    }
                }
                "member" => {
                    let name = f.get("name").cloned().unwrap_or_default();
                    let offset = f.get("offset").map_or(0, |o| num(o));
                    let size = f.get("size").map_or(0, |s| num(s));
                    self.members.insert(id, (name, base, offset, size));
                }
                _ => {}
            }
        }
    }

    /// Structs and vector types (`!DICompositeType`).
    fn read_composites(&mut self, ll: &str) {
        static STRUCT: OnceLock<Regex> = OnceLock::new();
        let structure = re(
            &STRUCT,
            r#"(?m)^!(\d+) = (?:distinct )?!DICompositeType\(tag: DW_TAG_structure_type,(.*)$"#,
        );
        for c in structure.captures_iter(ll) {
            let f = fields_of(&c[2]);
            if let Some(name) = f.get("name") {
                self.names.insert(num(&c[1]), format!("struct {name}"));
            }
            if let (Some(size), Some(elements)) = (f.get("size"), f.get("elements")) {
                self.structs.insert(num(&c[1]), (num(size), num(elements)));
            }
        }
        static VECTOR: OnceLock<Regex> = OnceLock::new();
        let vector = re(
            &VECTOR,
            r#"(?m)^!(\d+) = (?:distinct )?!DICompositeType\(tag: DW_TAG_array_type,(.*\bflags: [^,]*DIFlagVector.*)$"#,
        );
        for c in vector.captures_iter(ll) {
            let f = fields_of(&c[2]);
            if let (Some(size), Some(base)) = (f.get("size"), f.get("baseType")) {
                self.vectors.insert(num(&c[1]), (num(size), num(base)));
            }
        }
    }

    /// Function types and their type lists (`!DISubroutineType`).
    fn read_subroutines(&mut self, ll: &str) {
        static SUBROUTINE: OnceLock<Regex> = OnceLock::new();
        let subroutine = re(
            &SUBROUTINE,
            r#"(?m)^!(\d+) = !DISubroutineType\((?:.*?\btypes: !(\d+))?"#,
        );
        for c in subroutine.captures_iter(ll) {
            self.subroutines.insert(num(&c[1]));
            if let Some(types) = c.get(2) {
                self.subroutine_types
                    .insert(num(&c[1]), num(types.as_str()));
            }
        }
    }

    /// Metadata tuples (`!{!1, !2}`): element lists and type lists.
    fn read_tuples(&mut self, ll: &str) {
        static TUPLE: OnceLock<Regex> = OnceLock::new();
        let tuple = re(&TUPLE, r#"(?m)^!(\d+) = !\{([^}]*)\}"#);
        for c in tuple.captures_iter(ll) {
            let head = c[2].split(',').next().unwrap_or("").trim();
            let head = head.strip_prefix('!').map(num);
            self.tuple_heads.insert(num(&c[1]), head);
            let items = c[2]
                .split(',')
                .filter_map(|i| i.trim().strip_prefix('!'))
                .map(num)
                .collect();
            self.tuples.insert(num(&c[1]), items);
        }
    }

    /// Scalar types (`!DIBasicType`).
    fn read_basic(&mut self, ll: &str) {
        static BASIC: OnceLock<Regex> = OnceLock::new();
        let basic = re(
            &BASIC,
            r#"(?m)^!(\d+) = !DIBasicType\(.*?\bsize: (\d+), encoding: DW_ATE_(\w+)"#,
        );
        for c in basic.captures_iter(ll) {
            if let Some(ty) = basic_scalar(&c[3], num(&c[2])) {
                self.scalars.insert(num(&c[1]), ty);
            }
        }
    }

    /// The C name of a parameter type that is a struct (`b2Vec2`, `struct point`) or a named vector (`__m128`,
    /// `b2FloatW`), as the source spells it: the typedef's name when it has one.
    pub fn struct_type_name(&self, ty: u32) -> Option<String> {
        let inner = self.strip(ty);
        if !self.structs.contains_key(&inner) && !self.vectors.contains_key(&inner) {
            return None;
        }
        let mut t = ty;
        for _ in 0..16 {
            if let Some(name) = self.names.get(&t) {
                return Some(name.clone());
            }
            t = *self.qualified_base.get(&t)?;
        }
        None
    }

    /// The layout of a struct type (`ty` a parameter's or return's debug type), with its C name; `None` for
    /// other types and for a struct the source never names (no tag, no typedef).
    pub fn struct_layout(&self, ty: u32) -> Option<StructLayout> {
        let inner = self.strip(ty);
        let size_bits = match (self.structs.get(&inner), self.vectors.get(&inner)) {
            (Some(&(size_bits, _)), _) | (None, Some(&(size_bits, _))) => size_bits,
            (None, None) => return None,
        };
        let c_type = self.struct_type_name(ty)?;
        let mut fields = vec![];
        if self.vectors.contains_key(&inner) {
            self.lanes(inner, 0, "", &mut fields);
        } else {
            self.leaves(inner, 0, "", &mut fields, 0);
        }
        Some(StructLayout {
            c_type,
            bytes: size_bits / 8,
            fields,
        })
    }

    /// The return type of function type `subroutine`, `None` for `void`.
    pub fn return_type(&self, subroutine: u32) -> Option<u32> {
        (*self
            .tuple_heads
            .get(self.subroutine_types.get(&subroutine)?)?)
        .filter(|&t| t != 0)
    }

    /// Whether a parameter type is a pointer to a function.
    pub fn is_function_pointer(&self, ty: u32) -> bool {
        self.pointer_base
            .get(&self.strip(ty))
            .is_some_and(|base| self.subroutines.contains(&self.strip(*base)))
    }

    fn strip(&self, mut ty: u32) -> u32 {
        for _ in 0..16 {
            match self.qualified_base.get(&ty) {
                Some(&b) => ty = b,
                None => break,
            }
        }
        ty
    }

    /// Every scalar field of a struct type, with its byte offset, depth-first (at most 256).
    fn leaves(&self, ty: u32, base: u32, prefix: &str, out: &mut Vec<PointeeField>, depth: u32) {
        let Some(&(_, elements)) = self.structs.get(&ty) else {
            return;
        };
        for member in self.tuples.get(&elements).into_iter().flatten() {
            let Some((name, mty, offset, _)) = self.members.get(member) else {
                continue;
            };
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            let at = base + offset / 8;
            let inner = self.strip(*mty);
            if self.structs.contains_key(&inner) && depth < 8 {
                self.leaves(inner, at, &path, out, depth + 1);
            } else if self.vectors.contains_key(&inner) {
                self.lanes(inner, at, &path, out);
            } else if out.len() < 256 {
                out.push(PointeeField {
                    offset: at,
                    path,
                    ty: self.scalars.get(&inner).copied(),
                });
            }
        }
    }

    /// The lanes of vector type `ty` at byte `base` as fields `path[0]`, `path[1]`, ... (C indexes a vector as an
    /// array: `a[1]` of an `__m128 a`); none when its element is not a number foe reads.
    fn lanes(&self, ty: u32, base: u32, path: &str, out: &mut Vec<PointeeField>) {
        let Some(&(size_bits, element)) = self.vectors.get(&ty) else {
            return;
        };
        let Some(&scalar) = self.scalars.get(&self.strip(element)) else {
            return;
        };
        let count = size_bits / 8 / scalar.bytes().max(1);
        for lane in 0..count.min(64) {
            if out.len() >= 256 {
                break;
            }
            out.push(PointeeField {
                offset: base + lane * scalar.bytes(),
                path: format!("{path}[{lane}]"),
                ty: Some(scalar),
            });
        }
    }

    /// The fields behind a pointer parameter of debug type `ty`, if it points to a struct or a number.
    pub fn pointee_fields(&self, param: u32, ty: u32) -> Option<PointeeFields> {
        let pointee = self.strip(*self.pointer_base.get(&self.strip(ty))?);
        if let Some(&scalar) = self.scalars.get(&pointee) {
            return Some(PointeeFields {
                param,
                struct_bytes: scalar.bytes(),
                fields: vec![PointeeField {
                    offset: 0,
                    path: String::new(),
                    ty: Some(scalar),
                }],
                by_value: false,
            });
        }
        let &(size_bits, _) = self.structs.get(&pointee)?;
        let mut fields = vec![];
        self.leaves(pointee, 0, "", &mut fields, 0);
        (size_bits >= 8 && !fields.is_empty()).then_some(PointeeFields {
            param,
            struct_bytes: size_bits / 8,
            fields,
            by_value: false,
        })
    }

    /// The fields of a struct passed or returned by value (`param` its index among the signature's parameters,
    /// or [`crate::types::RETURN_PARAM`]), named `v.x`.
    pub fn by_value_fields(&self, param: u32, ty: u32) -> Option<PointeeFields> {
        let layout = self.struct_layout(ty)?;
        (layout.bytes > 0 && !layout.fields.is_empty()).then_some(PointeeFields {
            param,
            struct_bytes: layout.bytes,
            fields: layout.fields,
            by_value: true,
        })
    }
}

/// Renames the inputs behind struct pointers after their fields: `b->vel.x`, `b[1].mass`.
pub fn name_fields(sig: &mut FunctionSignature, pointees: &[PointeeFields]) {
    let names: Vec<String> = sig.params.iter().map(|p| p.name.clone()).collect();
    for p in &mut sig.params {
        let Some(at) = p.pointee else { continue };
        let Some(layout) = pointees
            .iter()
            .find(|l| l.param == at.param && l.fields.iter().all(|f| !f.path.is_empty()))
        else {
            continue;
        };
        let (index, within) = (
            at.offset / layout.struct_bytes,
            at.offset % layout.struct_bytes,
        );
        let Some(path) = layout
            .fields
            .iter()
            .find(|f| f.offset == within)
            .map(|f| &f.path)
        else {
            continue;
        };
        let Some(pointer) = names.get(at.param as usize) else {
            continue;
        };
        p.name = if index == 0 && layout.by_value {
            by_value_name(pointer, path)
        } else if index == 0 {
            format!("{pointer}->{path}")
        } else {
            format!("{pointer}[{index}].{path}")
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Param, ParamType, PointeeOf, ReturnType};

    const LL: &str = r#"
!15 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !16, size: 64)
!16 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !17)
!17 = distinct !DICompositeType(tag: DW_TAG_structure_type, name: "body", file: !11, line: 8, size: 448, elements: !18)
!18 = !{!19, !24, !25}
!19 = !DIDerivedType(tag: DW_TAG_member, name: "pos", scope: !17, file: !11, line: 9, baseType: !20, size: 128)
!20 = distinct !DICompositeType(tag: DW_TAG_structure_type, name: "vec2", file: !11, line: 6, size: 128, elements: !21)
!21 = !{!22, !23}
!22 = !DIDerivedType(tag: DW_TAG_member, name: "x", scope: !20, file: !11, line: 6, baseType: !14, size: 64)
!23 = !DIDerivedType(tag: DW_TAG_member, name: "y", scope: !20, file: !11, line: 6, baseType: !14, size: 64, offset: 64)
!24 = !DIDerivedType(tag: DW_TAG_member, name: "vel", scope: !17, file: !11, line: 10, baseType: !20, size: 128, offset: 128)
!25 = !DIDerivedType(tag: DW_TAG_member, name: "mass", scope: !17, file: !11, line: 11, baseType: !14, size: 64, offset: 256)
"#;

    const VECTORS: &str = r#"
!3 = !DIDerivedType(tag: DW_TAG_typedef, name: "__m128", file: !4, line: 21, baseType: !5, align: 128)
!5 = !DICompositeType(tag: DW_TAG_array_type, baseType: !6, size: 128, flags: DIFlagVector, elements: !7)
!6 = !DIBasicType(name: "float", size: 32, encoding: DW_ATE_float)
!7 = !{!8}
!8 = !DISubrange(count: 4)
!9 = !DIDerivedType(tag: DW_TAG_typedef, name: "b2FloatW", file: !4, line: 5, baseType: !3)
!10 = distinct !DICompositeType(tag: DW_TAG_structure_type, name: "b2Vec2W", file: !4, line: 8, size: 256, elements: !11)
!11 = !{!12, !13}
!12 = !DIDerivedType(tag: DW_TAG_member, name: "X", scope: !10, file: !4, line: 8, baseType: !9, size: 128)
!13 = !DIDerivedType(tag: DW_TAG_member, name: "Y", scope: !10, file: !4, line: 8, baseType: !9, size: 128, offset: 128)
"#;

    #[test]
    fn vector_lanes_are_named_as_c_indexes_them() {
        let facts = TypeFacts::from_ll(VECTORS);
        let layout = facts.struct_layout(9).expect("a vector typedef");
        assert_eq!((layout.c_type.as_str(), layout.bytes), ("b2FloatW", 16));
        let lanes: Vec<(u32, &str)> = layout
            .fields
            .iter()
            .map(|f| (f.offset, f.path.as_str()))
            .collect();
        assert_eq!(lanes, [(0, "[0]"), (4, "[1]"), (8, "[2]"), (12, "[3]")]);
        assert_eq!(by_value_name("a", "[1]"), "a[1]");
        assert_eq!(by_value_name("v", "x"), "v.x");
        // A struct of vectors: its members' lanes.
        let wide = facts.struct_layout(10).expect("a struct of vectors");
        let paths: Vec<&str> = wide.fields.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths[..2], ["X[0]", "X[1]"]);
        assert_eq!(wide.fields[4].path, "Y[0]");
        assert_eq!(wide.fields[4].offset, 16);
    }

    #[test]
    fn inputs_behind_struct_pointers_are_named_after_their_fields() {
        let facts = TypeFacts::from_ll(LL);
        let layout = facts
            .pointee_fields(0, 15)
            .expect("a struct behind the pointer");
        assert!(!layout.by_value);
        assert_eq!(layout.struct_bytes, 56);
        let behind = |offset| Param {
            name: "b[?]".into(),
            ty: ParamType::F64,
            pointee: Some(PointeeOf { param: 0, offset }),
            by_value: None,
        };
        let mut sig = FunctionSignature {
            name: "f".into(),
            params: vec![
                Param::new("b", ParamType::OutPtr { bytes: 4096 }),
                behind(24),
                behind(32),
                behind(56 + 8),
            ],
            ret: ReturnType::F64,
        };
        name_fields(&mut sig, &[layout]);
        let names: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["b", "b->vel.y", "b->mass", "b[1].pos.y"]);
    }
}
