//! Which flags of a `compile_commands.json` entry foe uses: one table ([`RULES`]) declares what is kept (what
//! changes the meaning of the code or describes the shipped build), what is left out silently (routine flags foe
//! replaces with its own: compile only, output, debug info, warnings); every other flag is dropped and named.
//!
//! The database is as untrusted as the code: a flag that loads a library into the compiler (`-fplugin=`,
//! `-Xclang -load`), picks a program to run (`-fuse-ld=`, `-B`, `--sysroot`, whose GCC installation clang
//! searches for a linker), passes options through (`-mllvm`, `-Wl,`, `-Xlinker`) or writes a file
//! (`-ftime-trace=`, `-MJ`, `-save-temps`) never reaches clang. Response files (`@file`) are read and their flags
//! go through the same table; configuration files (`--config`) are not read. The entry's compiler is never run:
//! its first argument is skipped, foe always runs its own (`foe.clang`).

use std::path::Path;

/// What a kept flag is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `-I`, `-isystem`, `-iquote`, `-idirafter`, `-include`, `-imacros`, `-nostdinc`.
    Include,
    /// `-D`, `-U`.
    Define,
    /// `-std=`, `-ansi`.
    Language,
    /// `-target`, `--target=`, `-m32`, `-march=`, `-msse4.2`, `-mno-avx`, ...
    Target,
    /// `-ffast-math` and its parts, `-ffp-contract=`, `-ffp-model=`, `-fdenormal-fp-math=`, ... and negations.
    FloatingPoint,
    /// `-O0` ... `-O3`, `-Os`, `-Oz`, `-Ofast`.
    Optimisation,
    /// Code generation that changes behaviour: aliasing, overflow, `char` signedness, PIC, builtins, ...
    Codegen,
    /// Left out silently: compile only, output and dependency files, language (foe says `-x c` itself), debug
    /// info, warnings, diagnostics.
    Routine,
    /// Dropped and named: listed so that the value they take is dropped with them (`-Xclang -load`).
    Refused,
}

impl Family {
    /// Whether the flag changes what the code means (given to every compile of the file, P and P' alike).
    pub fn is_meaning(self) -> bool {
        matches!(self, Family::Include | Family::Define | Family::Language)
    }
    /// Whether the flag describes the shipped build (P and P' are made of these when the entry has one).
    pub fn is_build(self) -> bool {
        matches!(
            self,
            Family::Target | Family::FloatingPoint | Family::Optimisation | Family::Codegen
        )
    }
}

/// How a flag carries its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// The whole argument, nothing more.
    Exact,
    /// The spelling starts the argument; the rest is its value (`-march=haswell`, `-msse4.2`).
    Joined,
    /// The value is the next argument (`-x c`, `-Xclang -load`).
    Separate,
    /// `-Idir` or `-I dir`.
    JoinedOrSeparate,
}

/// One line of the table.
struct Rule {
    spelling: &'static str,
    shape: Shape,
    family: Family,
    /// The value is a path, resolved against the entry's directory.
    path: bool,
}

const fn rule(spelling: &'static str, shape: Shape, family: Family) -> Rule {
    Rule {
        spelling,
        shape,
        family,
        path: false,
    }
}

const fn path_rule(spelling: &'static str, family: Family) -> Rule {
    Rule {
        spelling,
        shape: Shape::JoinedOrSeparate,
        family,
        path: true,
    }
}

use Family::*;
use Shape::*;

/// Every flag foe recognises; the longest matching spelling wins. Anything else is dropped and named.
const RULES: &[Rule] = &[
    // includes
    path_rule("-I", Include),
    path_rule("-isystem", Include),
    path_rule("-iquote", Include),
    path_rule("-idirafter", Include),
    path_rule("-include", Include),
    path_rule("-imacros", Include),
    rule("-nostdinc", Exact, Include),
    // defines
    rule("-D", JoinedOrSeparate, Define),
    rule("-U", JoinedOrSeparate, Define),
    // language
    rule("-std=", Joined, Language),
    rule("-ansi", Exact, Language),
    // target and architecture
    rule("-target", Separate, Target),
    rule("--target=", Joined, Target),
    rule("-m32", Exact, Target),
    rule("-m64", Exact, Target),
    rule("-mx32", Exact, Target),
    rule("-march=", Joined, Target),
    rule("-mtune=", Joined, Target),
    rule("-mcpu=", Joined, Target),
    rule("-mfpmath=", Joined, Target),
    rule("-mfpu=", Joined, Target),
    rule("-mfloat-abi=", Joined, Target),
    rule("-mabi=", Joined, Target),
    rule("-mcmodel=", Joined, Target),
    rule("-mprefer-vector-width=", Joined, Target),
    rule("-msse", Joined, Target),
    rule("-mssse3", Exact, Target),
    rule("-mavx", Joined, Target),
    rule("-mfma", Joined, Target),
    rule("-mf16c", Exact, Target),
    rule("-mbmi", Joined, Target),
    rule("-mpopcnt", Exact, Target),
    rule("-mlzcnt", Exact, Target),
    rule("-maes", Exact, Target),
    rule("-mpclmul", Exact, Target),
    rule("-mmovbe", Exact, Target),
    rule("-mcx16", Exact, Target),
    rule("-msahf", Exact, Target),
    rule("-m80387", Exact, Target),
    rule("-mx87", Exact, Target),
    rule("-mred-zone", Exact, Target),
    rule("-mneon", Exact, Target),
    rule("-mno-", Joined, Target),
    // floating point (and their negations)
    rule("-ffast-math", Exact, FloatingPoint),
    rule("-fno-fast-math", Exact, FloatingPoint),
    rule("-funsafe-math-optimizations", Exact, FloatingPoint),
    rule("-fno-unsafe-math-optimizations", Exact, FloatingPoint),
    rule("-fassociative-math", Exact, FloatingPoint),
    rule("-fno-associative-math", Exact, FloatingPoint),
    rule("-freciprocal-math", Exact, FloatingPoint),
    rule("-fno-reciprocal-math", Exact, FloatingPoint),
    rule("-ffinite-math-only", Exact, FloatingPoint),
    rule("-fno-finite-math-only", Exact, FloatingPoint),
    rule("-fhonor-", Joined, FloatingPoint),
    rule("-fno-honor-", Joined, FloatingPoint),
    rule("-fsigned-zeros", Exact, FloatingPoint),
    rule("-fno-signed-zeros", Exact, FloatingPoint),
    rule("-fapprox-func", Exact, FloatingPoint),
    rule("-fno-approx-func", Exact, FloatingPoint),
    rule("-ftrapping-math", Exact, FloatingPoint),
    rule("-fno-trapping-math", Exact, FloatingPoint),
    rule("-fmath-errno", Exact, FloatingPoint),
    rule("-fno-math-errno", Exact, FloatingPoint),
    rule("-frounding-math", Exact, FloatingPoint),
    rule("-fno-rounding-math", Exact, FloatingPoint),
    rule("-ffp-contract=", Joined, FloatingPoint),
    rule("-ffp-model=", Joined, FloatingPoint),
    rule("-ffp-eval-method=", Joined, FloatingPoint),
    rule("-ffp-exception-behavior=", Joined, FloatingPoint),
    rule("-fdenormal-fp-math", Joined, FloatingPoint),
    rule("-fexcess-precision=", Joined, FloatingPoint),
    rule("-fcx-limited-range", Exact, FloatingPoint),
    rule("-fno-cx-limited-range", Exact, FloatingPoint),
    rule("-fcx-fortran-rules", Exact, FloatingPoint),
    rule("-fno-cx-fortran-rules", Exact, FloatingPoint),
    rule("-fprotect-parens", Exact, FloatingPoint),
    rule("-fno-protect-parens", Exact, FloatingPoint),
    rule("-mdaz-ftz", Exact, FloatingPoint),
    // optimisation
    rule("-O", Joined, Optimisation),
    // code generation
    rule("-fstrict-aliasing", Exact, Codegen),
    rule("-fno-strict-aliasing", Exact, Codegen),
    rule("-fwrapv", Exact, Codegen),
    rule("-fno-wrapv", Exact, Codegen),
    rule("-fstrict-overflow", Exact, Codegen),
    rule("-fno-strict-overflow", Exact, Codegen),
    rule("-funsigned-char", Exact, Codegen),
    rule("-fno-unsigned-char", Exact, Codegen),
    rule("-fsigned-char", Exact, Codegen),
    rule("-fno-signed-char", Exact, Codegen),
    rule("-fPIC", Exact, Codegen),
    rule("-fpic", Exact, Codegen),
    rule("-fPIE", Exact, Codegen),
    rule("-fpie", Exact, Codegen),
    rule("-fno-pic", Exact, Codegen),
    rule("-fno-PIC", Exact, Codegen),
    rule("-fno-pie", Exact, Codegen),
    rule("-fno-PIE", Exact, Codegen),
    rule("-fcommon", Exact, Codegen),
    rule("-fno-common", Exact, Codegen),
    rule("-fbuiltin", Exact, Codegen),
    rule("-fno-builtin", Joined, Codegen),
    rule("-ffreestanding", Exact, Codegen),
    rule("-fhosted", Exact, Codegen),
    rule("-fomit-frame-pointer", Exact, Codegen),
    rule("-fno-omit-frame-pointer", Exact, Codegen),
    rule("-fvectorize", Exact, Codegen),
    rule("-fno-vectorize", Exact, Codegen),
    rule("-fslp-vectorize", Exact, Codegen),
    rule("-fno-slp-vectorize", Exact, Codegen),
    rule("-funroll-loops", Exact, Codegen),
    rule("-fno-unroll-loops", Exact, Codegen),
    rule("-finline-functions", Exact, Codegen),
    rule("-fno-inline-functions", Exact, Codegen),
    rule("-fno-inline", Exact, Codegen),
    rule("-fdelete-null-pointer-checks", Exact, Codegen),
    rule("-fno-delete-null-pointer-checks", Exact, Codegen),
    rule("-fstrict-float-cast-overflow", Exact, Codegen),
    rule("-fno-strict-float-cast-overflow", Exact, Codegen),
    rule("-fvisibility=", Joined, Codegen),
    rule("-ffunction-sections", Exact, Codegen),
    rule("-fno-function-sections", Exact, Codegen),
    rule("-fdata-sections", Exact, Codegen),
    rule("-fno-data-sections", Exact, Codegen),
    rule("-fplt", Exact, Codegen),
    rule("-fno-plt", Exact, Codegen),
    rule("-fsemantic-interposition", Exact, Codegen),
    rule("-fno-semantic-interposition", Exact, Codegen),
    rule("-fstack-protector", Joined, Codegen),
    rule("-fno-stack-protector", Exact, Codegen),
    rule("-fshort-enums", Exact, Codegen),
    rule("-fno-short-enums", Exact, Codegen),
    rule("-fshort-wchar", Exact, Codegen),
    rule("-fms-extensions", Exact, Codegen),
    rule("-fgnu89-inline", Exact, Codegen),
    rule("-fno-gnu89-inline", Exact, Codegen),
    rule("-fjump-tables", Exact, Codegen),
    rule("-fno-jump-tables", Exact, Codegen),
    rule("-fzero-initialized-in-bss", Exact, Codegen),
    rule("-fno-zero-initialized-in-bss", Exact, Codegen),
    rule("-ffinite-loops", Exact, Codegen),
    rule("-fno-finite-loops", Exact, Codegen),
    rule("-ftrivial-auto-var-init=", Joined, Codegen),
    rule("-fopenmp-simd", Exact, Codegen),
    // routine: foe sets its own
    rule("-c", Exact, Routine),
    rule("-S", Exact, Routine),
    rule("-pipe", Exact, Routine),
    // foe analyses C and says so itself (`-x c`)
    rule("-x", JoinedOrSeparate, Routine),
    rule("-o", JoinedOrSeparate, Routine),
    rule("--output", JoinedOrSeparate, Routine),
    rule("-MD", Exact, Routine),
    rule("-MMD", Exact, Routine),
    rule("-MP", Exact, Routine),
    rule("-MF", JoinedOrSeparate, Routine),
    rule("-MT", JoinedOrSeparate, Routine),
    rule("-MQ", JoinedOrSeparate, Routine),
    rule("-g", Joined, Routine),
    rule("-W", Joined, Routine),
    rule("-w", Exact, Routine),
    rule("-pedantic", Joined, Routine),
    rule("-Qunused-arguments", Exact, Routine),
    rule("-fcolor-diagnostics", Exact, Routine),
    rule("-fno-color-diagnostics", Exact, Routine),
    rule("-fdiagnostics-", Joined, Routine),
    rule("-fno-diagnostics-", Joined, Routine),
    rule("-fmessage-length=", Joined, Routine),
    rule("-fno-caret-diagnostics", Exact, Routine),
    rule("-fasynchronous-unwind-tables", Exact, Routine),
    rule("-fno-asynchronous-unwind-tables", Exact, Routine),
    rule("-funwind-tables", Exact, Routine),
    rule("-fno-unwind-tables", Exact, Routine),
    rule("-fexceptions", Exact, Routine),
    rule("-fno-exceptions", Exact, Routine),
    // refused, with the value they take (dropped together, named)
    rule("-Wl,", Joined, Refused),
    rule("-Wa,", Joined, Refused),
    rule("-Wp,", Joined, Refused),
    rule("-Xclang", Separate, Refused),
    rule("-mllvm", Separate, Refused),
    rule("-Xlinker", Separate, Refused),
    rule("-Xassembler", Separate, Refused),
    rule("-Xpreprocessor", Separate, Refused),
    rule("-Xanalyzer", Separate, Refused),
    rule("-Xopenmp-target", Separate, Refused),
    rule("-B", JoinedOrSeparate, Refused),
    rule("--prefix", Separate, Refused),
    rule("-MJ", JoinedOrSeparate, Refused),
    rule("--config", Separate, Refused),
    rule("--sysroot", Separate, Refused),
    rule("-isysroot", JoinedOrSeparate, Refused),
    rule("-ivfsoverlay", JoinedOrSeparate, Refused),
    rule("-iprefix", JoinedOrSeparate, Refused),
    rule("-iwithprefix", JoinedOrSeparate, Refused),
    rule("-iwithprefixbefore", JoinedOrSeparate, Refused),
    rule("-resource-dir", Separate, Refused),
    rule("-gcc-toolchain", Separate, Refused),
    rule("-working-directory", Separate, Refused),
    rule("-serialize-diagnostics", Separate, Refused),
    rule("--serialize-diagnostics", Separate, Refused),
    rule("-ccc-install-dir", Separate, Refused),
    rule("-ccc-gcc-name", Separate, Refused),
    rule("-ccc-arcmt-migrate", Separate, Refused),
    rule("-ccc-objcmt-migrate", Separate, Refused),
    rule("-dependency-file", Separate, Refused),
    rule("-dependency-dot", Separate, Refused),
    rule("-header-include-file", Separate, Refused),
    rule("-include-pch", Separate, Refused),
    rule("-arch", Separate, Refused),
    rule("-L", JoinedOrSeparate, Refused),
    rule("-l", JoinedOrSeparate, Refused),
    rule("-T", JoinedOrSeparate, Refused),
    rule("-u", JoinedOrSeparate, Refused),
    rule("-z", JoinedOrSeparate, Refused),
    rule("-F", JoinedOrSeparate, Refused),
    rule("-framework", Separate, Refused),
];

/// How many response files deep foe reads (clang itself stops at 20 or a cycle).
const MAX_RESPONSE_DEPTH: usize = 8;
/// The largest response file foe reads.
const MAX_RESPONSE_BYTES: u64 = 1 << 20;

/// The flags of one entry, sorted by use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryFlags {
    /// Includes, defines and language: every compile of the file gets them.
    pub meaning: Vec<String>,
    /// Target, floating-point, optimisation and code-generation flags: the shipped build.
    pub build: Vec<String>,
    /// What was dropped, as written (a flag and the value it takes together), in order, each once.
    pub dropped: Vec<String>,
}

/// Sorts an entry's arguments (the compiler first, which is skipped) by [`RULES`]; relative paths are resolved
/// against the entry's `directory`, response files read from there.
pub fn filter(args: &[String], directory: &Path) -> EntryFlags {
    let mut out = EntryFlags::default();
    sort(args.get(1..).unwrap_or_default(), directory, 0, &mut out);
    let mut seen = std::collections::HashSet::new();
    out.dropped.retain(|d| seen.insert(d.clone()));
    out
}

fn sort(args: &[String], directory: &Path, depth: usize, out: &mut EntryFlags) {
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            // only inputs follow
            break;
        }
        if let Some(file) = arg.strip_prefix('@') {
            response_file(arg, file, directory, depth, out);
            continue;
        }
        if !arg.starts_with('-') || arg == "-" {
            // an input (the entry's own file, an object): foe gives its own
            continue;
        }
        let Some(rule) = matching_rule(arg) else {
            out.dropped.push(arg.clone());
            continue;
        };
        let joined = &arg[rule.spelling.len()..];
        let separate = matches!(rule.shape, Separate)
            || (matches!(rule.shape, JoinedOrSeparate) && joined.is_empty());
        let value = if separate {
            let v = args.get(i).cloned();
            if v.is_some() {
                i += 1;
            }
            v
        } else {
            None
        };
        if rule.family == Refused || !value_is_plain(rule, joined, value.as_deref()) {
            out.dropped.push(match &value {
                Some(v) => format!("{arg} {v}"),
                None => arg.clone(),
            });
            continue;
        }
        let kept = match (&value, separate) {
            (Some(v), _) => vec![rule.spelling.to_string(), resolve(rule, v, directory)],
            (None, true) => {
                // a flag that takes a value at the very end: nothing to give clang
                out.dropped.push(arg.clone());
                continue;
            }
            (None, false) if rule.path && !joined.is_empty() => {
                vec![format!(
                    "{}{}",
                    rule.spelling,
                    resolve(rule, joined, directory)
                )]
            }
            (None, false) => vec![arg.clone()],
        };
        if rule.family.is_meaning() {
            out.meaning.extend(kept);
        } else if rule.family.is_build() {
            out.build.extend(kept);
        }
    }
}

/// Reads `@file` (relative to `directory`) and sorts its flags as if they stood in the entry.
fn response_file(arg: &str, file: &str, directory: &Path, depth: usize, out: &mut EntryFlags) {
    if depth >= MAX_RESPONSE_DEPTH {
        out.dropped
            .push(format!("{arg} (response files nested too deep)"));
        return;
    }
    let path = directory.join(file);
    let text = std::fs::metadata(&path)
        .ok()
        .filter(|m| m.is_file() && m.len() <= MAX_RESPONSE_BYTES)
        .and_then(|_| std::fs::read(&path).ok());
    match text {
        Some(bytes) => {
            let words = super::split_command(&String::from_utf8_lossy(&bytes));
            // a response file's relative paths are the entry's, as for clang
            sort(&words, directory, depth + 1, out);
        }
        None => out
            .dropped
            .push(format!("{arg} (not a readable response file)")),
    }
}

/// Whether a kept flag's value is what the flag means and nothing else. A separate value never starts with `-`
/// (it would be a flag clang reads as a value, or a value foe's own flag lists could part from its flag). A path
/// or a macro may hold anything else; an optimisation level is one clang names (`-O2`, `-Ofast`: not `-ObjC`,
/// which compiles the file as Objective-C); every other value (a target triple,
/// an architecture, a model) is a plain word: letters, digits, `_.,+=-`, so no `/` (clang builds paths from a
/// target triple: the GCC installation, `<triple>-ld`).
fn value_is_plain(rule: &Rule, joined: &str, separate: Option<&str>) -> bool {
    if separate.is_some_and(|v| v.starts_with('-')) {
        return false;
    }
    let value = separate.unwrap_or(joined);
    match rule.family {
        Include | Define | Routine | Refused => true,
        Optimisation => {
            matches!(value, "" | "s" | "z" | "g" | "fast")
                || value.bytes().all(|b| b.is_ascii_digit())
        }
        Language | Target | FloatingPoint | Codegen => value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.,+=-".contains(&b)),
    }
}

fn matching_rule(arg: &str) -> Option<&'static Rule> {
    RULES
        .iter()
        .filter(|r| match r.shape {
            Exact => arg == r.spelling,
            Separate => arg == r.spelling,
            Joined | JoinedOrSeparate => arg.starts_with(r.spelling),
        })
        .max_by_key(|r| r.spelling.len())
}

fn resolve(rule: &Rule, value: &str, directory: &Path) -> String {
    if !rule.path || Path::new(value).is_absolute() {
        return value.to_string();
    }
    directory.join(value).display().to_string()
}

#[cfg(test)]
mod tests;
