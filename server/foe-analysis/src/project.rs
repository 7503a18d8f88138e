//! The project around a file: with a compilation database, the functions and globals a file uses but another
//! translation unit of the database defines are resolved by compiling that unit (P and P', each with its own
//! entry's flags and its build's flags) and linking it into the file's two modules, as the real program links
//! them (P' links the unit compiled at P' flags: no link-time optimisation across units).
//!
//! Which unit defines a symbol is found lazily: a textual prefilter (a line that starts a definition of the
//! name) picks the candidate units, their compiled IR confirms. Compiled units are cached on disk, keyed by
//! the unit's contents, flags and compiler, as the links read them: bitcode without debug info (their lines
//! belong to other files) and the names they define (reading clang's textual IR with its debug info was most of
//! the linking, 180 of 260 ms on GSL's `bessel_Y0.c`); at most [`MAX_UNITS`] units are linked into one file (the
//! transitive closure, breadth first, of what the file reaches: a unit brings only the definitions the symbols
//! asked of it reach, and only their needs are looked for further).
//!
//! A C library name (`sqrt`, `exp`, `floor`) is taken from a unit of the file's own library only (the same top
//! directory under the database's), as a program linked with its library's archive before libm gets it; every
//! other file keeps the C library's. Such definitions are marked ([`crate::model::REPLACES_C_LIBRARY`]): the
//! builds run them, the model reads their calls as the C library function's.

use crate::compile::{self, CompileDb, CompiledPair};
use crate::config::AnalysisConfig;
use crate::scratch::manifest;
use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Most translation units linked into one file's modules.
pub const MAX_UNITS: usize = 12;

/// The file's builds with the project's units it needs linked in.
#[derive(Debug, Clone, Default)]
pub struct Linked {
    /// Units linked, in the order they were linked.
    pub units: Vec<PathBuf>,
    /// Functions the linked units define (as named in the linked modules): not the file's own.
    pub functions: HashSet<String>,
    /// Symbols no unit of the database defines (calls to them stop the path and the run).
    pub unresolved: BTreeSet<String>,
    /// Those of them that are data (an extern constant whose definition is outside the database): its value is
    /// unknown, so a binary linked without it is not the program.
    pub unresolved_data: BTreeSet<String>,
    /// Symbols left unresolved only because [`MAX_UNITS`] units were linked already: a unit of the database may
    /// define them, so a binary whose run stops at one is not the program.
    pub beyond_cap: BTreeSet<String>,
}

/// Whether the C library (libc or libm) defines `name`.
pub(crate) fn c_library_defines(name: &str) -> bool {
    static LIBM: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let Ok(symbol) = std::ffi::CString::new(name) else {
        return false;
    };
    let libm = *LIBM.get_or_init(|| {
        // SAFETY: dlopen with a constant, NUL-terminated name; the handle is never closed.
        unsafe { libc::dlopen(c"libm.so.6".as_ptr(), libc::RTLD_LAZY) as usize }
    });
    // SAFETY: dlsym only looks the name up (NUL-terminated, alive for the call); nothing is called.
    unsafe {
        !libc::dlsym(libc::RTLD_DEFAULT, symbol.as_ptr()).is_null()
            || (libm != 0 && !libc::dlsym(libm as *mut libc::c_void, symbol.as_ptr()).is_null())
    }
}

/// Whether `unit` belongs to the same library as `file`: the same top directory under the database's.
fn same_library(file: &Path, unit: &Path, db_dir: &Path) -> bool {
    let top = |p: &Path| {
        p.strip_prefix(db_dir)
            .ok()
            .and_then(|r| r.components().next())
            .map(|c| c.as_os_str().to_owned())
    };
    top(file).is_some() && top(file) == top(unit)
}

/// Whether some line of `text` starts (at column 0) a definition of `name`: a function header or a global
/// with an initialiser or array bounds, not a prototype nor an `extern` declaration.
fn may_define(text: &str, name: &str) -> bool {
    // Most units do not hold the name at all: one search of the text spares a search per line.
    if !text.contains(name) {
        return false;
    }
    text.lines().any(|line| {
        if line.starts_with(char::is_whitespace)
            || line.starts_with("extern")
            || line.starts_with('#')
            || line.starts_with("//")
            || line.starts_with("/*")
        {
            return false;
        }
        let Some(at) = find_word(line, name) else {
            return false;
        };
        let rest = line[at + name.len()..].trim_start();
        let function_header = rest.starts_with('(') && !line.trim_end().ends_with(';');
        let global = rest.starts_with('=') || rest.starts_with('[') || rest.starts_with(';');
        function_header || global
    })
}

/// The byte offset of `word` in `line` as a whole identifier.
fn find_word(line: &str, word: &str) -> Option<usize> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = line[from..].find(word).map(|i| i + from) {
        let before = line[..i].chars().next_back();
        let after = line[i + word.len()..].chars().next();
        if !before.is_some_and(is_ident) && !after.is_some_and(is_ident) {
            return Some(i);
        }
        from = i + word.len();
    }
    None
}

/// A unit of the database as the links read it: its P and P' as bitcode without debug info, and the names its P
/// defines with external linkage.
struct Unit {
    p: Vec<u8>,
    pp: Vec<u8>,
    defines: HashSet<String>,
}

impl Unit {
    /// The unit of clang's textual IR `pair`.
    fn from_ir(pair: &CompiledPair) -> Result<Unit, String> {
        let context = Context::create();
        let p = crate::ir::parse_module(&context, &pair.p_ll, "unit P")?;
        let pp = crate::ir::parse_module(&context, &pair.pp_ll, "unit P'")?;
        let defines = external_definitions(&p);
        for m in [&p, &pp] {
            m.strip_debug_info();
        }
        Ok(Unit {
            p: p.write_bitcode_to_memory().as_slice().to_vec(),
            pp: pp.write_bitcode_to_memory().as_slice().to_vec(),
            defines,
        })
    }
}

/// The module of one of a unit's builds (`bitcode`, `what` naming it for errors) in `context`.
fn parse_bitcode<'ctx>(
    context: &'ctx Context,
    bitcode: &[u8],
    what: &str,
) -> Result<Module<'ctx>, String> {
    let buffer = MemoryBuffer::create_from_memory_range_copy(bitcode, what);
    Module::parse_bitcode_from_buffer(&buffer, context)
        .map_err(|e| format!("{what}: {}", e.to_string().trim()))
}

/// The names `module` defines with external linkage: functions with a body and data with a value.
fn external_definitions(module: &Module<'_>) -> HashSet<String> {
    let external = |linkage: Linkage| !matches!(linkage, Linkage::Internal | Linkage::Private);
    let functions = module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0 && external(f.get_linkage()))
        .map(|f| f.get_name().to_string_lossy().into_owned());
    let data = module
        .get_globals()
        .filter(|g| !g.is_declaration() && external(g.get_linkage()))
        .map(|g| g.get_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with("llvm."));
    functions.chain(data).collect()
}

/// A unit compiled to P and P' with its entry's flags in `db`, from the disk cache when its contents, flags,
/// compiler and the headers it includes ([`manifest`]) did not change.
fn compile_unit(unit: &Path, base: &AnalysisConfig, db: &CompileDb) -> Option<Unit> {
    let text = std::fs::read(unit).ok()?;
    let text = String::from_utf8_lossy(&text).into_owned();
    let mut config = base.clone();
    if let Some(entry) = db.entry(unit) {
        config
            .extra_flags
            .extend(entry.flags.meaning.iter().cloned());
    }
    let (p_flags, pp_flags) = compile::build_flags(&config, unit);
    let key = {
        let mut h = blake3::Hasher::new();
        // The form of the cached files: bitcode without debug info and the names defined.
        h.update(b"unit bitcode 1\0");
        h.update(text.as_bytes());
        h.update(unit.as_os_str().as_encoded_bytes());
        h.update(p_flags.join("\u{0}").as_bytes());
        h.update(pp_flags.join("\u{0}").as_bytes());
        h.update(config.clang.as_os_str().as_encoded_bytes());
        h.finalize().to_hex()[..24].to_string()
    };
    let paths = crate::scratch::cache_subdir("units")
        .map(|d| ["p.bc", "pp.bc", "defines", "headers"].map(|ext| d.join(format!("{key}.{ext}"))));
    if let Some([p, pp, defines, headers]) = &paths {
        if manifest::holds(headers) {
            if let (Ok(p), Ok(pp), Ok(defines)) = (
                std::fs::read(p),
                std::fs::read(pp),
                std::fs::read_to_string(defines),
            ) {
                let defines = defines.lines().map(str::to_string).collect();
                return Some(Unit { p, pp, defines });
            }
        }
    }
    // The headers' contents are taken before the compile: one edited meanwhile makes the next lookup miss.
    let headers_listed = paths.as_ref().is_some_and(|[.., headers]| {
        compile::included_files(&config, unit, &text)
            .is_ok_and(|files| manifest::write(headers, &files))
    });
    let built = compile::compile_pair(&config, unit, &text)
        .map_err(|e| e.to_string())
        .and_then(|pair| Unit::from_ir(&pair));
    let built = match built {
        Ok(built) => built,
        Err(e) => {
            tracing::debug!(unit = %unit.display(), "project unit does not compile: {e}");
            return None;
        }
    };
    if let Some([p, pp, defines, _]) = paths.as_ref().filter(|_| headers_listed) {
        // Written under temporary names and renamed (`scratch::write_cache`): concurrent foes never read half a
        // file; the names last, so that a unit whose names are cached has its bitcode cached too.
        let mut names: Vec<&str> = built.defines.iter().map(String::as_str).collect();
        names.sort_unstable();
        let _ = crate::scratch::write_cache(p, &built.p)
            .and_then(|()| crate::scratch::write_cache(pp, &built.pp))
            .and_then(|()| crate::scratch::write_cache(defines, names.join("\n").as_bytes()));
    }
    Some(built)
}

/// What `module` uses but does not define: functions (the C library's too: the file's library may define them)
/// and data. LLVM intrinsics and foe's own names are left out.
fn needed_symbols(module: &Module<'_>) -> Vec<String> {
    let functions = module.get_functions().filter_map(|f| {
        let name = f.get_name().to_string_lossy().into_owned();
        (f.count_basic_blocks() == 0
            && !name.starts_with("llvm.")
            && !name.starts_with(crate::instrument::RESERVED_PREFIX))
        .then_some(name)
    });
    let data = module.get_globals().filter_map(|g| {
        let name = g.get_name().to_string_lossy().into_owned();
        (g.is_declaration() && !name.starts_with("llvm.")).then_some(name)
    });
    functions.chain(data).collect()
}

/// Marks the definitions of C library names in `module` that are not among `own` (the file's): they came from the
/// file's library, which the builds run and the model reads as the C library's function
/// ([`crate::model::REPLACES_C_LIBRARY`]).
fn mark_replacements(module: &Module<'_>, own: &HashSet<String>) -> Vec<String> {
    let context = module.get_context();
    let mut marked = Vec::new();
    for f in module.get_functions() {
        let name = f.get_name().to_string_lossy().into_owned();
        if f.count_basic_blocks() > 0
            && !own.contains(&name)
            && crate::model::runs_natively(&name)
            && !name.starts_with("llvm.")
        {
            f.add_attribute(
                AttributeLoc::Function,
                context.create_string_attribute(crate::model::REPLACES_C_LIBRARY, ""),
            );
            marked.push(name);
        }
    }
    marked
}

/// Gives internal linkage to every definition of `module` but `keep`, so that the unit's other symbols cannot
/// clash with the file's own.
fn internalize_except(module: &Module<'_>, keep: &HashSet<String>) {
    for f in module.get_functions() {
        let name = f.get_name().to_string_lossy().into_owned();
        if f.count_basic_blocks() > 0 && !keep.contains(&name) {
            f.set_linkage(Linkage::Internal);
        }
    }
    for g in module.get_globals() {
        let name = g.get_name().to_string_lossy().into_owned();
        if !g.is_declaration() && !keep.contains(&name) && !name.starts_with("llvm.") {
            g.set_linkage(Linkage::Internal);
        }
    }
}

/// Links into `pair` the units of `file`'s compilation database `db` that define what it uses (transitively, at
/// most [`MAX_UNITS`]), each compiled with its entry in `db`. `base` is the configuration without the file's own
/// database flags. Without a database, or an entry of the file in it, or when nothing resolves, `pair` is
/// returned as it is.
///
/// A unit brings only what the symbols asked of it reach (the rest is internalized and deleted before it is
/// linked), and only what that needs is looked for in turn: Box2D's `mover_joint.c` links 2 units, not the 12 of
/// the whole units' closure. A symbol asked of a unit already linked without it (a later unit needs another of
/// its functions) starts the links again with that symbol kept, until no such symbol is left
/// ([`MAX_LINK_PASSES`]), so that every unit is linked once, with its statics once.
pub fn link_units(
    pair: CompiledPair,
    file: &Path,
    base: &AnalysisConfig,
    db: Option<&CompileDb>,
) -> (CompiledPair, Linked) {
    let Some(db) = db.filter(|db| db.entry(file).is_some()) else {
        return (pair, Linked::default());
    };
    let units = db.units_besides(file);
    if units.is_empty() {
        return (pair, Linked::default());
    }
    let mut candidates = Candidates::new(file, db, units, base);
    let mut asked: HashMap<usize, HashSet<String>> = HashMap::new();
    for pass in 1..=MAX_LINK_PASSES {
        let context = Context::create();
        let (Ok(p), Ok(pp)) = (
            crate::ir::parse_module(&context, &pair.p_ll, "P"),
            crate::ir::parse_module(&context, &pair.pp_ll, "P'"),
        ) else {
            return (pair, Linked::default());
        };
        candidates.used.fill(false);
        let own = defined_functions(&p);
        let (linked, late) = link_pass(&context, &p, &pp, &own, &mut candidates, &asked);
        if !late.is_empty() && pass < MAX_LINK_PASSES {
            tracing::trace!(
                pass,
                ?late,
                "symbols of units linked without them: linking again"
            );
            for (unit, symbols) in late {
                asked.entry(unit).or_default().extend(symbols);
            }
            continue;
        }
        if linked.units.is_empty() {
            return (pair, linked);
        }
        let replaced = mark_replacements(&p, &own);
        mark_replacements(&pp, &own);
        if !replaced.is_empty() {
            tracing::debug!(functions = ?replaced, "the file's library defines C library functions");
        }
        tracing::debug!(units = ?linked.units, unresolved = ?linked.unresolved, "linked project units");
        let out = CompiledPair {
            p_ll: p.print_to_string().to_string(),
            pp_ll: pp.print_to_string().to_string(),
        };
        return (out, linked);
    }
    unreachable!("the last pass returns")
}

/// Most passes of [`link_units`]: each pass after the first keeps, in the units linked, the symbols the pass
/// before found asked of them too late.
const MAX_LINK_PASSES: usize = 4;

/// The functions `module` defines.
fn defined_functions(module: &Module<'_>) -> HashSet<String> {
    module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
        .map(|f| f.get_name().to_string_lossy().into_owned())
        .collect()
}

/// One pass of [`link_units`] into `p` and `pp`: each unit linked keeps external what the file and the units
/// linked before still need, and what `asked` lists for it. Returns what was linked, and the symbols some unit
/// already linked defines but did not keep (to keep in the next pass).
fn link_pass<'ctx>(
    context: &'ctx Context,
    p: &Module<'ctx>,
    pp: &Module<'ctx>,
    own: &HashSet<String>,
    candidates: &mut Candidates<'_>,
    asked: &HashMap<usize, HashSet<String>>,
) -> (Linked, HashMap<usize, HashSet<String>>) {
    let mut linked = Linked::default();
    let mut late: HashMap<usize, HashSet<String>> = HashMap::new();
    let mut queue: VecDeque<String> = needed_symbols(p).into();
    let mut seen: HashSet<String> = HashSet::new();
    while let Some(symbol) = queue.pop_front() {
        if !seen.insert(symbol.clone()) {
            continue;
        }
        // Already defined by a unit linked meanwhile.
        if p.get_function(&symbol)
            .is_some_and(|f| f.count_basic_blocks() > 0)
            || p.get_global(&symbol).is_some_and(|g| !g.is_declaration())
        {
            continue;
        }
        // A name the C library defines is taken from a unit of the file's own library only: a database that
        // holds two libraries (GSL beside Cephes, which defines `acosh`) does not link one's replacements of C
        // library functions into the other. Where the file's library defines none, the C library's is used.
        let runs_natively = crate::model::runs_natively(&symbol);
        let from_c_library = runs_natively || c_library_defines(&symbol);
        if let Some(i) = candidates.linked_definer(&symbol, from_c_library) {
            late.entry(i).or_default().insert(symbol.clone());
            linked.unresolve(p, symbol);
            continue;
        }
        if linked.units.len() >= MAX_UNITS {
            // Past the limit the C library's definition of a C library name is used (in every build). Another
            // name is past the limit only where some unit's text may define it; one that no unit's text defines
            // (GSL's `gsl_error`) is unresolved, as it would be below the limit.
            if !runs_natively {
                if candidates.may_define(&symbol, from_c_library) {
                    linked.beyond_cap.insert(symbol.clone());
                }
                linked.unresolve(p, symbol);
            }
            continue;
        }
        let Some(i) = candidates.definer(&symbol, from_c_library) else {
            if !runs_natively {
                linked.unresolve(p, symbol);
            }
            continue;
        };
        let Some(unit_pair) = candidates.compiled[i].clone().flatten() else {
            continue;
        };
        let replacements = candidates.same_library(i);
        let mut keep: HashSet<String> = asked.get(&i).cloned().unwrap_or_default();
        keep.extend(queue.iter().cloned());
        keep.insert(symbol.clone());
        match link_one(context, p, pp, &unit_pair, keep, replacements) {
            Ok((new_functions, needs)) => {
                candidates.used[i] = true;
                linked.units.push(candidates.units[i].clone());
                linked
                    .functions
                    .extend(new_functions.into_iter().filter(|f| !own.contains(f)));
                queue.extend(needs);
            }
            Err(e) => {
                let unit = candidates.units[i].display();
                tracing::debug!(%unit, "cannot link the unit: {e}");
                linked.unresolve(p, symbol);
            }
        }
    }
    (linked, late)
}

impl Linked {
    /// Records `symbol` as unresolved (and as unresolved data when `p` holds it as a global).
    fn unresolve(&mut self, p: &Module<'_>, symbol: String) {
        if p.get_global(&symbol).is_some() {
            self.unresolved_data.insert(symbol.clone());
        }
        self.unresolved.insert(symbol);
    }
}

/// The units of the database that may define what the file uses: their text and builds, each read or compiled
/// once when first needed, and which were linked.
struct Candidates<'a> {
    /// The analysed file, canonical.
    this: PathBuf,
    /// The database's directory, canonical.
    db_dir: PathBuf,
    units: Vec<PathBuf>,
    base: &'a AnalysisConfig,
    /// The database the units' entries are taken from.
    db: &'a CompileDb,
    texts: Vec<Option<String>>,
    compiled: Vec<Option<Option<Rc<Unit>>>>,
    used: Vec<bool>,
}

impl<'a> Candidates<'a> {
    fn new(
        file: &Path,
        db: &'a CompileDb,
        units: Vec<PathBuf>,
        base: &'a AnalysisConfig,
    ) -> Candidates<'a> {
        let this = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        let dir = db.path().parent().unwrap_or(Path::new("/"));
        let db_dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let n = units.len();
        Candidates {
            this,
            db_dir,
            units,
            base,
            db,
            texts: vec![None; n],
            compiled: vec![None; n],
            used: vec![false; n],
        }
    }

    /// Whether unit `i` belongs to the file's own library.
    fn same_library(&self, i: usize) -> bool {
        same_library(&self.this, &self.units[i], &self.db_dir)
    }

    /// Whether unit `i`, not yet linked, may define `symbol` by its text ([`may_define`]; of the file's own
    /// library only when `from_c_library`), the text read once.
    fn text_may_define(&mut self, i: usize, symbol: &str, from_c_library: bool) -> bool {
        if self.used[i] || (from_c_library && !self.same_library(i)) {
            return false;
        }
        let unit = &self.units[i];
        let text = self.texts[i].get_or_insert_with(|| {
            std::fs::read(unit)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        });
        may_define(text, symbol)
    }

    /// Whether some unit not yet linked may define `symbol`, by its text alone (nothing is compiled).
    fn may_define(&mut self, symbol: &str, from_c_library: bool) -> bool {
        (0..self.units.len()).any(|i| self.text_may_define(i, symbol, from_c_library))
    }

    /// A unit already linked that defines `symbol` (of the file's own library only when `from_c_library`): it
    /// was linked before the symbol was asked of it, so it kept the symbol internal or left it out.
    fn linked_definer(&self, symbol: &str, from_c_library: bool) -> Option<usize> {
        (0..self.units.len()).find(|&i| {
            self.used[i]
                && (!from_c_library || self.same_library(i))
                && self.compiled[i]
                    .as_ref()
                    .and_then(|u| u.as_ref())
                    .is_some_and(|u| u.defines.contains(symbol))
        })
    }

    /// The first unit not yet linked that defines `symbol` (of the file's own library only when
    /// `from_c_library`), compiled on the way.
    fn definer(&mut self, symbol: &str, from_c_library: bool) -> Option<usize> {
        for i in 0..self.units.len() {
            if !self.text_may_define(i, symbol, from_c_library) {
                continue;
            }
            let unit = &self.units[i];
            let (base, db) = (self.base, self.db);
            let compiled =
                self.compiled[i].get_or_insert_with(|| compile_unit(unit, base, db).map(Rc::new));
            if compiled
                .as_ref()
                .is_some_and(|u| u.defines.contains(symbol))
            {
                return Some(i);
            }
        }
        None
    }
}

/// Links one unit's P and P' into `p` and `pp`, keeping external only `keep`, the symbols still wanted, what
/// the file still declares (and, for a unit of the file's own library, `replacements`, its definitions of C library
/// names, as the program links them for every caller), and deleting what they do not reach; returns the
/// functions it added and the symbols what it kept needs in turn.
fn link_one<'ctx>(
    context: &'ctx Context,
    p: &Module<'ctx>,
    pp: &Module<'ctx>,
    unit: &Unit,
    mut keep: HashSet<String>,
    replacements: bool,
) -> Result<(Vec<String>, Vec<String>), String> {
    let unit_p = parse_bitcode(context, &unit.p, "unit P")?;
    let unit_pp = parse_bitcode(context, &unit.pp, "unit P'")?;
    // Everything the file (or the units linked so far) still declares may come from this unit.
    keep.extend(needed_symbols(p));
    if replacements {
        keep.extend(
            unit_p
                .get_functions()
                .filter(|f| f.count_basic_blocks() > 0)
                .map(|f| f.get_name().to_string_lossy().into_owned())
                .filter(|n| {
                    crate::model::runs_natively(n)
                        && p.get_function(n)
                            .is_none_or(|f| f.count_basic_blocks() == 0)
                }),
        );
    }
    // Its debug info was stripped before it was cached: events inside it have no position in this file.
    for m in [&unit_p, &unit_pp] {
        internalize_except(m, &keep);
        crate::model::run_passes(m, "globaldce").map_err(|e| e.to_string())?;
    }
    let needs = needed_symbols(&unit_p);
    let before = defined_functions(p);
    p.link_in_module(unit_p)
        .map_err(|e| format!("P: {}", e.to_string().trim()))?;
    pp.link_in_module(unit_pp)
        .map_err(|e| format!("P': {}", e.to_string().trim()))?;
    let added = p
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
        .map(|f| f.get_name().to_string_lossy().into_owned())
        .filter(|n| !before.contains(n))
        .collect();
    Ok((added, needs))
}

#[cfg(test)]
mod tests;
