//! Loading the two builds' LLVM IR (textual, from clang) and describing the file's functions:
//! C signatures, parameter names and source spans from the debug info.

use crate::report::FunctionSpan;
use crate::types::FunctionSignature;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;
use inkwell::types::{AnyTypeEnum, BasicTypeEnum};
use inkwell::values::FunctionValue;
use regex::Regex;
use std::collections::HashMap;
use std::sync::OnceLock;

pub mod fields;
mod signature;
pub use fields::{name_fields, PointeeField, PointeeFields};
pub(crate) use signature::has_attribute;
use signature::{by_value_words, signature_of, SignatureError};

/// Size of the zeroed buffer passed for each pointer (out-)parameter.
pub const OUT_BUFFER_BYTES: u32 = 4096;

/// Parses clang's textual IR into a module of `ctx`.
pub fn parse_module<'ctx>(
    ctx: &'ctx Context,
    ll: &str,
    name: &str,
) -> Result<Module<'ctx>, String> {
    let buffer = MemoryBuffer::create_from_memory_range_copy(ll.as_bytes(), name);
    ctx.create_module_from_ir(buffer)
        .map_err(|e| format!("cannot parse the IR of {name}: {e}"))
}

/// A function defined in the analysed file, as the reference build P has it.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionInfo {
    pub signature: FunctionSignature,
    pub span: Option<FunctionSpan>,
    /// The fields of the structs its pointer parameters point to, to name the inputs behind them.
    pub pointee_fields: Vec<PointeeFields>,
    /// Whether it tests its values for NaN or infinity ([`tests_special_values`]).
    pub tests_special_values: bool,
}

/// Debug-info facts read from the textual IR: subprograms and argument variables.
#[derive(Debug, Default)]
pub struct DebugFacts {
    /// Metadata id of a `DISubprogram` → (line, scopeLine).
    subprograms: HashMap<u32, (u32, u32)>,
    /// (subprogram id, 1-based argument number) → (name, type metadata id).
    args: HashMap<(u32, u32), (String, Option<u32>)>,
    /// Metadata id of a `DIBasicType` → whether it is unsigned.
    unsigned_types: HashMap<u32, bool>,
    /// Metadata id of typedefs/const/volatile → their base type id.
    derived_base: HashMap<u32, u32>,
    /// Function name → its subprogram id (from `define ... @name(...) ... !dbg !N`).
    function_sp: HashMap<String, u32>,
    /// Subprogram id → the id of the `DIFile` it is defined in.
    sp_file: HashMap<u32, u32>,
    /// `DIFile` id → (file name, checksum): two ids may name the analysed file (`/tmp/v.c` and `v.c` in `/tmp`).
    files: HashMap<u32, (String, Option<String>)>,
    /// The compile unit's file.
    unit_file: Option<u32>,
    /// Subprogram id → its function type (`DISubroutineType`).
    sp_type: HashMap<u32, u32>,
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("valid regex"))
}

impl DebugFacts {
    pub fn from_ll(ll: &str) -> DebugFacts {
        static DEFINE: OnceLock<Regex> = OnceLock::new();
        static SUBPROGRAM: OnceLock<Regex> = OnceLock::new();
        static ARG: OnceLock<Regex> = OnceLock::new();
        static BASIC: OnceLock<Regex> = OnceLock::new();
        static DERIVED: OnceLock<Regex> = OnceLock::new();
        let define = re(&DEFINE, r#"(?m)^define [^@]*@"?([\w.$]+)"?\(.*!dbg !(\d+)"#);
        let subprogram = re(
            &SUBPROGRAM,
            r#"(?m)^!(\d+) = distinct !DISubprogram\(.*?\bline: (\d+).*?scopeLine: (\d+)"#,
        );
        let arg = re(
            &ARG,
            r#"(?m)^!\d+ = !DILocalVariable\(name: "([^"]+)", arg: (\d+), scope: !(\d+)(?:.*?type: !(\d+))?"#,
        );
        let basic = re(
            &BASIC,
            r#"(?m)^!(\d+) = !DIBasicType\(.*?encoding: (DW_ATE_\w+)"#,
        );
        let derived = re(
            &DERIVED,
            r#"(?m)^!(\d+) = !DIDerivedType\(tag: DW_TAG_(?:typedef|const_type|volatile_type).*?baseType: !(\d+)"#,
        );
        static FILE: OnceLock<Regex> = OnceLock::new();
        static UNIT: OnceLock<Regex> = OnceLock::new();
        static SP_FILE: OnceLock<Regex> = OnceLock::new();
        let file = re(
            &FILE,
            r#"(?m)^!(\d+) = !DIFile\(filename: "([^"]*)"(?:.*?checksum: "(\w+)")?"#,
        );
        let unit = re(
            &UNIT,
            r#"(?m)^!\d+ = distinct !DICompileUnit\(.*?\bfile: !(\d+)"#,
        );
        let sp_file = re(
            &SP_FILE,
            r#"(?m)^!(\d+) = distinct !DISubprogram\(.*?\bfile: !(\d+)"#,
        );
        let num = |s: &str| s.parse::<u32>().unwrap_or(0);
        let mut facts = DebugFacts::default();
        for c in file.captures_iter(ll) {
            let checksum = c.get(3).map(|m| m.as_str().to_string());
            facts.files.insert(num(&c[1]), (c[2].to_string(), checksum));
        }
        facts.unit_file = unit.captures(ll).map(|c| num(&c[1]));
        for c in sp_file.captures_iter(ll) {
            facts.sp_file.insert(num(&c[1]), num(&c[2]));
        }
        static SP_TYPE: OnceLock<Regex> = OnceLock::new();
        let sp_type = re(
            &SP_TYPE,
            r#"(?m)^!(\d+) = distinct !DISubprogram\(.*?\btype: !(\d+)"#,
        );
        for c in sp_type.captures_iter(ll) {
            facts.sp_type.insert(num(&c[1]), num(&c[2]));
        }
        for c in define.captures_iter(ll) {
            facts.function_sp.insert(c[1].to_string(), num(&c[2]));
        }
        for c in subprogram.captures_iter(ll) {
            facts
                .subprograms
                .insert(num(&c[1]), (num(&c[2]), num(&c[3])));
        }
        for c in arg.captures_iter(ll) {
            let ty = c.get(4).map(|m| num(m.as_str()));
            facts
                .args
                .insert((num(&c[3]), num(&c[2])), (c[1].to_string(), ty));
        }
        for c in basic.captures_iter(ll) {
            facts
                .unsigned_types
                .insert(num(&c[1]), c[2].contains("unsigned"));
        }
        for c in derived.captures_iter(ll) {
            facts.derived_base.insert(num(&c[1]), num(&c[2]));
        }
        facts
    }

    fn arg(&self, function: &str, index: usize) -> Option<&(String, Option<u32>)> {
        let sp = self.function_sp.get(function)?;
        self.args.get(&(*sp, index as u32 + 1))
    }

    fn is_unsigned(&self, mut ty: u32) -> bool {
        for _ in 0..8 {
            if let Some(u) = self.unsigned_types.get(&ty) {
                return *u;
            }
            match self.derived_base.get(&ty) {
                Some(base) => ty = *base,
                None => return false,
            }
        }
        false
    }

    /// The file another than the analysed one that `function` is defined in (a header), by its name as the
    /// `#include` wrote it; None for the analysed file's own functions and when the debug info does not say.
    pub fn header_of(&self, function: &str) -> Option<String> {
        let file = *self.sp_file.get(self.function_sp.get(function)?)?;
        let unit = self.unit_file?;
        let (name, sum) = self.files.get(&file)?;
        let (unit_name, unit_sum) = self.files.get(&unit)?;
        let same = file == unit
            || sum.is_some() && sum == unit_sum
            || std::path::Path::new(unit_name).ends_with(name);
        (!same).then(|| name.trim_start_matches("./").to_string())
    }

    /// The C parameters of `function` in order: (name, debug type id).
    fn c_params(&self, function: &str) -> Vec<&(String, Option<u32>)> {
        (0..).map_while(|i| self.arg(function, i)).collect()
    }

    /// The function type (`DISubroutineType`) of `function`.
    fn function_type(&self, function: &str) -> Option<u32> {
        self.sp_type.get(self.function_sp.get(function)?).copied()
    }

    /// (declaration line, body line) of a function.
    pub fn lines(&self, function: &str) -> Option<(u32, u32)> {
        self.subprograms
            .get(self.function_sp.get(function)?)
            .copied()
    }
}

/// A function whose interface foe cannot drive, and why.
#[derive(Debug, Clone)]
pub struct Undrivable {
    pub name: String,
    /// In C words where the debug info allows (`` `b2Vec2 p` passed by value ``).
    pub reason: String,
    /// Its lines, when the analysed file defines it.
    pub span: Option<FunctionSpan>,
    /// The header that defines it, when it is not the analysed file.
    pub header: Option<String>,
}

/// The functions defined in `module` (P), in source order, with their signatures; a function whose interface
/// foe cannot drive comes back as `Err`.
pub fn describe_functions(module: &Module<'_>, ll: &str) -> Vec<Result<FunctionInfo, Undrivable>> {
    let facts = DebugFacts::from_ll(ll);
    let types = fields::TypeFacts::from_ll(ll);
    let mut out = Vec::new();
    for (function, name) in user_functions(module) {
        let header = facts.header_of(&name);
        let span = facts.lines(&name).map(|(line, body_line)| FunctionSpan {
            line,
            body_line,
            end_line: last_line(function).unwrap_or(body_line).max(body_line),
        });
        let skipped_span = span.clone();
        // A function pointer parameter: the worker has no function to pass (a buffer would be called).
        let function_pointer = facts.c_params(&name).into_iter().find_map(|(param, ty)| {
            types
                .is_function_pointer((*ty)?)
                .then(|| format!("`{param}` is a function pointer, which foe cannot supply"))
        });
        out.push(
            function_pointer
                .map_or_else(
                    || signature_of(function, &facts, &types),
                    |why| Err(SignatureError::Other(why)),
                )
                .map_err(|e| match e {
                    SignatureError::ByValue(ir_words) => {
                        by_value_words(&facts, &types, &name).unwrap_or(ir_words)
                    }
                    SignatureError::Other(reason) => reason,
                })
                .map(|signature| {
                    let pointee_fields = signature::layouts(&facts, &types, &signature);
                    FunctionInfo {
                        signature,
                        span,
                        pointee_fields,
                        tests_special_values: tests_special_values(function),
                    }
                })
                .map_err(|reason| Undrivable {
                    span: if header.is_none() { skipped_span } else { None },
                    name,
                    reason,
                    header,
                }),
        );
    }
    out.sort_by_key(|r| match r {
        Ok(info) => info.span.as_ref().map(|s| s.line).unwrap_or(u32::MAX),
        Err(_) => u32::MAX,
    });
    out
}

/// What the buffers of each of `functions` hold, from the debug info of `ll` (P's IR): what pointer parameters
/// point to, `byval` copies and returned structs, the layouts the runner reads a run's outputs with.
pub fn pointee_layouts(ll: &str, functions: &[FunctionSignature]) -> Vec<Vec<PointeeFields>> {
    let facts = DebugFacts::from_ll(ll);
    let types = fields::TypeFacts::from_ll(ll);
    functions
        .iter()
        .map(|sig| signature::layouts(&facts, &types, sig))
        .collect()
}

/// The functions the analysed file defines (not declarations, intrinsics or foe's own), with their names.
pub fn user_functions<'ctx>(
    module: &Module<'ctx>,
) -> impl Iterator<Item = (FunctionValue<'ctx>, String)> {
    module.get_functions().filter_map(|function| {
        if function.count_basic_blocks() == 0 {
            return None;
        }
        let name = function.get_name().to_string_lossy().into_owned();
        (!name.starts_with("__foe") && !name.starts_with("llvm.")).then_some((function, name))
    })
}

/// Whether `function` (P's body) tests its values for NaN or infinity: `isnan`, `isinf`, `isfinite`, `fpclassify`,
/// `x != x`, an ordered/unordered comparison, a comparison with an infinite constant. Such a function expects
/// these values, so what fast-math makes of them there is a warning, not a hint.
pub fn tests_special_values(function: FunctionValue<'_>) -> bool {
    use inkwell::values::{BasicValueEnum, InstructionOpcode};
    use inkwell::FloatPredicate;
    let infinite = |v: Option<BasicValueEnum<'_>>| match v {
        Some(BasicValueEnum::FloatValue(f)) => {
            f.get_constant().is_some_and(|(x, _)| x.is_infinite())
        }
        _ => false,
    };
    for block in function.get_basic_block_iter() {
        for inst in block.get_instructions() {
            match inst.get_opcode() {
                InstructionOpcode::FCmp => {
                    let (a, b) = (
                        inst.get_operand(0).and_then(|o| o.value()),
                        inst.get_operand(1).and_then(|o| o.value()),
                    );
                    let unordered = matches!(
                        inst.get_fcmp_predicate(),
                        Some(FloatPredicate::UNO | FloatPredicate::ORD)
                    );
                    // `x != x`: the same value, or (at -O0) two loads of the same variable.
                    fn loaded_from(v: Option<BasicValueEnum<'_>>) -> Option<BasicValueEnum<'_>> {
                        use inkwell::values::BasicValue;
                        v.and_then(|v| v.as_instruction_value())
                            .filter(|i| i.get_opcode() == InstructionOpcode::Load)
                            .and_then(|i| i.get_operand(0))
                            .and_then(|o| o.value())
                    }
                    let same = a.is_some() && a == b
                        || loaded_from(a).is_some() && loaded_from(a) == loaded_from(b);
                    if unordered || infinite(a) || infinite(b) || same {
                        return true;
                    }
                }
                InstructionOpcode::Call => {
                    let n = inst.get_num_operands();
                    let callee = n
                        .checked_sub(1)
                        .and_then(|last| inst.get_operand(last))
                        .and_then(|o| o.value())
                        // The name, not the printed callee (printing a function prints its whole body).
                        .map(|v| v.get_name().to_string_lossy().into_owned())
                        .unwrap_or_default();
                    if ["isnan", "isinf", "finite", "fpclassify", "llvm.is.fpclass"]
                        .iter()
                        .any(|name| callee.contains(name))
                    {
                        return true;
                    }
                }
                _ => {}
            }
        }
    }
    false
}

/// The last source line any instruction of `function` is attributed to.
pub fn last_line(function: FunctionValue<'_>) -> Option<u32> {
    let mut last = None;
    for block in function.get_basic_block_iter() {
        for inst in block.get_instructions() {
            if let Some(loc) = inst.get_debug_location() {
                last = last.max(Some(loc.get_line()));
            }
        }
    }
    last
}

/// The textual IR of a module's function definitions, as a cache key reads them: printed once for the module, as
/// printing one function alone walks the whole module's metadata (a file of a hundred functions with their
/// callees took minutes). What an edit elsewhere in the file changes and the function's results do not depend
/// on is normalised away (GSL's `gamma.c` with a pragma in one function missed the cache in all 26 of its
/// functions, and a fix's check re-analysed the whole file for each pragma it tried):
/// - metadata numbering (`!123`), which shifts when other functions change;
/// - attribute group numbers (`#8`), replaced by the group's attributes: a function given `strictfp` adds a
///   group, and every group after it is renumbered;
/// - the arguments of a call foe does not run (a stop: a function without a definition that does not run
///   natively, `instrument::replace_stopping_calls`), which no run and no model reads: `GSL_ERROR` passes
///   `__LINE__` to `gsl_error`, so a line inserted above changed every error path below.
pub struct ModuleText {
    functions: HashMap<String, String>,
}

impl ModuleText {
    pub fn of(module: &inkwell::module::Module<'_>) -> ModuleText {
        static MD: OnceLock<Regex> = OnceLock::new();
        static NAME: OnceLock<Regex> = OnceLock::new();
        static GROUP: OnceLock<Regex> = OnceLock::new();
        static GROUP_DEF: OnceLock<Regex> = OnceLock::new();
        let md = re(&MD, r"!\d+");
        let name = re(&NAME, r#"@("(?:[^"\\]|\\.)*"|[-\w.$]+)\("#);
        let group = re(&GROUP, r"#\d+");
        let group_def = re(&GROUP_DEF, r"(?m)^attributes (#\d+) = (\{.*\})$");
        let text = module.print_to_string().to_string();
        let groups: HashMap<&str, &str> = group_def
            .captures_iter(&text)
            .filter_map(|c| Some((c.get(1)?.as_str(), c.get(2)?.as_str())))
            .collect();
        let stops: std::collections::HashSet<String> = module
            .get_functions()
            .filter(|f| f.count_basic_blocks() == 0)
            .map(|f| f.get_name().to_string_lossy().into_owned())
            .filter(|n| !crate::model::runs_natively(n))
            .collect();
        let normalise = |line: &str| -> String {
            let line = md.replace_all(line, "!");
            let line = group.replace_all(&line, |c: &regex::Captures<'_>| {
                groups
                    .get(&c[0])
                    .map_or_else(|| c[0].to_string(), |g| g.to_string())
            });
            if line.contains("call ") || line.contains("invoke ") {
                if let Some(c) = name.captures(&line) {
                    let callee = c[1].trim_matches('"');
                    if stops.contains(callee) {
                        let end = c.get(0).map_or(line.len(), |m| m.end());
                        return format!("{}…)", &line[..end]);
                    }
                }
            }
            line.into_owned()
        };
        let mut functions = HashMap::new();
        let mut current: Option<(String, String)> = None;
        for line in text.lines() {
            if let Some((_, body)) = current.as_mut() {
                body.push_str(&normalise(line));
                body.push('\n');
                if line == "}" {
                    let (f, body) = current.take().expect("a function");
                    functions.insert(f, body);
                }
            } else if line.starts_with("define ") {
                if let Some(c) = name.captures(line) {
                    let f = c[1].trim_matches('"').to_string();
                    current = Some((f, format!("{}\n", normalise(line))));
                }
            }
        }
        ModuleText { functions }
    }

    /// The text of the definition of `name` (empty when the module defines none).
    pub fn function(&self, name: &str) -> &str {
        self.functions.get(name).map_or("", String::as_str)
    }
}

/// The positions (line, column) of `function`'s instructions in the analysed file, in order, as a report places
/// them (code inlined from a header at its call, `headers::position_in_file`; code of another file's function
/// has none): with its text, what a cache key holds of it (see `pipeline/cache_key.rs`, which counts the lines
/// from the function's first). A header's own lines, mixed in, made the first line a header's, so every line
/// inserted above a function that inlines a header's helper changed its key.
pub fn debug_positions(function: FunctionValue<'_>) -> Vec<(u32, u32)> {
    use inkwell::values::AsValueRef;
    function
        .get_basic_block_iter()
        .flat_map(|block| block.get_instructions())
        // SAFETY: an instruction of the function's live module.
        .filter_map(|inst| unsafe { crate::headers::position_in_file(inst.as_value_ref()) })
        .collect()
}

/// Whether an LLVM type is (a vector of) `double` or `float`.
pub fn is_fp_type(ty: AnyTypeEnum<'_>) -> bool {
    match ty {
        AnyTypeEnum::FloatType(_) => true,
        AnyTypeEnum::VectorType(v) => matches!(v.get_element_type(), BasicTypeEnum::FloatType(_)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LL: &str = r#"
define dso_local double @f(double noundef %0, i32 noundef %1, ptr noundef %2) #0 !dbg !10 {
  %4 = fadd double %0, 1.0, !dbg !20
  ret double %4, !dbg !21
}
!10 = distinct !DISubprogram(name: "f", scope: !1, file: !1, line: 3, type: !11, scopeLine: 4, spFlags: DISPFlagDefinition, unit: !0)
!12 = !DIBasicType(name: "unsigned int", size: 32, encoding: DW_ATE_unsigned)
!13 = !DILocalVariable(name: "x", arg: 1, scope: !10, file: !1, line: 3, type: !14)
!15 = !DILocalVariable(name: "n", arg: 2, scope: !10, file: !1, line: 3, type: !12)
!16 = !DILocalVariable(name: "out", arg: 3, scope: !10, file: !1, line: 3, type: !17)
"#;

    /// Two texts of a file that differ only by a function above `f` given `strictfp` (a new attribute group, the
    /// groups after it renumbered) and a line inserted above (the `__LINE__` passed to the error reporter).
    #[test]
    fn a_function_s_key_text_ignores_attribute_numbering_and_the_arguments_of_calls_foe_does_not_run(
    ) {
        let text = |group: u32, line: u32| {
            format!(
                r#"
declare void @report(ptr, i32)
define double @f(double %x) #{group} {{
  %y = fmul double %x, 2.0
  call void @report(ptr null, i32 {line}) #{group}
  %z = call double @sqrt(double %y) #{group}
  ret double %z
}}
declare double @sqrt(double)
attributes #0 = {{ strictfp }}
attributes #{group} = {{ nounwind }}
"#
            )
        };
        let key = |group, line, sqrt_arg: &str| {
            let ctx = Context::create();
            let src = text(group, line).replace("sqrt(double %y)", sqrt_arg);
            let m = parse_module(&ctx, &src, "t").expect("parses");
            ModuleText::of(&m).function("f").to_string()
        };
        let before = key(1, 1489, "sqrt(double %y)");
        assert_eq!(before, key(2, 1492, "sqrt(double %y)"));
        assert!(before.contains("{ nounwind }"), "{before}");
        // What a call foe runs is given still counts.
        assert_ne!(before, key(1, 1489, "sqrt(double %x)"));
    }

    #[test]
    fn reads_debug_facts() {
        let facts = DebugFacts::from_ll(LL);
        assert_eq!(facts.lines("f"), Some((3, 4)));
        assert_eq!(facts.arg("f", 1).unwrap().0, "n");
        assert!(facts.is_unsigned(12));
    }
}
