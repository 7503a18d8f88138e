//! Work the shipped binaries need not do twice. A probe whose object has an earlier binary's code (every section
//! but the debug info the same, byte for byte, with the same relocations and symbols), linked with the same units
//! and the same link command, is that binary: it is not linked again, and its runs are that binary's runs
//! (`-fno-reciprocal-math` often changes nothing in a file that divides by no variable). A binary with debug info
//! (P, P', whose traces are placed by it) is never replaced by one without (a probe's). A binary's run on an
//! input is made once: the sweep's, the confirmation's and the probes' runs share it. The analysed file's object
//! for one set of compile flags is compiled once for a harness and its siblings (the background probes'
//! `-mno-daz-ftz` binary links the shipped binary's object).

use super::harness::ShippedRun;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One linked binary: what went into it and where it is.
struct Linked {
    object: blake3::Hash,
    /// Whether the analysed file's object has debug info (its traces can be placed on lines).
    debug_info: bool,
    units: Option<Vec<PathBuf>>,
    link_flags: Vec<String>,
    exe: PathBuf,
}

/// The binaries a file's harnesses linked (shared by a harness and its siblings).
#[derive(Clone, Default)]
pub(super) struct SameBinaries(Arc<Mutex<Vec<Linked>>>);

impl SameBinaries {
    /// A binary already linked from an object with the same code ([`code_hash`]) and the same units, with a link
    /// command the same as `link_flags`'; one with debug info where `debug_info` asks for it.
    pub(super) fn find(
        &self,
        clang: &Path,
        object: &blake3::Hash,
        debug_info: bool,
        units: Option<&[PathBuf]>,
        link_flags: &[String],
    ) -> Option<PathBuf> {
        let same_inputs: Vec<(Vec<String>, PathBuf)> = {
            let linked = self.0.lock().ok()?;
            linked
                .iter()
                .filter(|l| &l.object == object && l.units.as_deref() == units)
                .filter(|l| l.debug_info || !debug_info)
                .map(|l| (l.link_flags.clone(), l.exe.clone()))
                .collect()
        };
        let mine = || crate::link::linker_command(clang, link_flags);
        same_inputs.into_iter().find_map(|(flags, exe)| {
            let same = flags == link_flags
                || mine().is_some_and(|m| Some(m) == crate::link::linker_command(clang, &flags));
            same.then_some(exe)
        })
    }

    pub(super) fn add(
        &self,
        object: blake3::Hash,
        debug_info: bool,
        units: Option<&[PathBuf]>,
        link_flags: &[String],
        exe: &Path,
    ) {
        if let Ok(mut linked) = self.0.lock() {
            linked.push(Linked {
                object,
                debug_info,
                units: units.map(<[PathBuf]>::to_vec),
                link_flags: link_flags.to_vec(),
                exe: exe.to_path_buf(),
            });
        }
    }
}

/// The analysed file's objects per compile flags, shared by a harness and its siblings: each compiled once, by
/// the first harness that needs it; one that needs it meanwhile waits for that compile. A failed compile is not
/// kept (the next harness tries again).
#[derive(Clone, Default)]
pub(super) struct SharedObjects(Arc<Mutex<HashMap<Vec<String>, ObjectSlot>>>);

/// One set of compile flags' object: `None` until its first compile succeeds; held while it compiles.
type ObjectSlot = Arc<Mutex<Option<PathBuf>>>;

impl SharedObjects {
    /// The object for `compile_flags`: an earlier one, or `compile()`'s (kept when it succeeds).
    pub(super) fn get_or_compile(
        &self,
        compile_flags: &[String],
        compile: impl FnOnce() -> Result<PathBuf, String>,
    ) -> Result<PathBuf, String> {
        let slot = {
            let mut slots = self.0.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(compile_flags.to_vec()).or_default().clone()
        };
        // Held while compiling: a sibling asking for the same flags waits here for the object.
        let mut object = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(obj) = object.as_ref() {
            return Ok(obj.clone());
        }
        let obj = compile()?;
        *object = Some(obj.clone());
        Ok(obj)
    }
}

/// The hash of an object file's code: every section but the debug info (`.debug*` and their relocations), the
/// linker's address-significance table and the tables of symbols, strings and relocations (they hold symbol
/// indices, which the debug info's symbols shift), each section's name, flags, alignment and bytes, its
/// relocations with their targets named, and every symbol but section, file and debug symbols. Objects of the same code with and without debug info hash alike. `None` when
/// the object cannot be read or parsed: then nothing is shared.
pub(super) fn code_hash(obj: &Path) -> Option<blake3::Hash> {
    use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionIndex, SymbolKind};
    let data = std::fs::read(obj).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let skipped = |name: &str| name.starts_with(".debug") || name == ".llvm_addrsig";
    let section_name = |index: SectionIndex| -> Option<String> {
        Some(file.section_by_index(index).ok()?.name().ok()?.to_string())
    };
    let mut h = blake3::Hasher::new();
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for section in file.sections() {
        let name = section.name().ok()?;
        // The symbol and string tables and the relocation sections hold symbol indices, which the debug info's
        // section symbols shift: their content is hashed by name below instead.
        if skipped(name) || section.kind() == object::SectionKind::Metadata {
            continue;
        }
        field(name.as_bytes());
        field(
            format!(
                "{:?} {:?} {}",
                section.kind(),
                section.flags(),
                section.align()
            )
            .as_bytes(),
        );
        field(section.data().ok()?);
        for (offset, reloc) in section.relocations() {
            let target = match reloc.target() {
                RelocationTarget::Symbol(index) => {
                    let symbol = file.symbol_by_index(index).ok()?;
                    match symbol.kind() {
                        SymbolKind::Section => {
                            format!("section {}", section_name(symbol.section_index()?)?)
                        }
                        _ => format!("symbol {}", symbol.name().ok()?),
                    }
                }
                RelocationTarget::Section(index) => format!("section {}", section_name(index)?),
                RelocationTarget::Absolute => "absolute".to_string(),
                _ => return None,
            };
            field(format!("{offset} {:?} {} {target}", reloc.flags(), reloc.addend()).as_bytes());
        }
    }
    for symbol in file.symbols() {
        if matches!(symbol.kind(), SymbolKind::Section | SymbolKind::File) {
            continue;
        }
        let section = match symbol.section_index() {
            Some(index) => section_name(index)?,
            None => format!("{:?}", symbol.section()),
        };
        if skipped(&section) {
            continue;
        }
        field(
            format!(
                "{} {section} {} {} {:?} {:?} {}",
                symbol.name().ok()?,
                symbol.address(),
                symbol.size(),
                symbol.kind(),
                symbol.scope(),
                symbol.is_weak()
            )
            .as_bytes(),
        );
    }
    Some(h.finalize())
}

/// Runs already made, per binary and input line.
#[derive(Default)]
pub(super) struct RunCache(HashMap<PathBuf, HashMap<String, ShippedRun>>);

impl RunCache {
    pub(super) fn get(&self, exe: &Path, line: &str) -> Option<ShippedRun> {
        self.0.get(exe)?.get(line).cloned()
    }

    pub(super) fn insert(&mut self, exe: &Path, line: &str, run: ShippedRun) {
        self.0
            .entry(exe.to_path_buf())
            .or_default()
            .insert(line.to_string(), run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Compiles `text` with `flags` into `dir/name.o`, as the harness compiles the analysed file.
    fn compile(dir: &Path, name: &str, text: &str, flags: &[&str]) -> PathBuf {
        let obj = dir.join(format!("{name}.o"));
        let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        let clang = crate::config::AnalysisConfig::default().clang;
        super::super::build::compile_file(&clang, dir, &flags, text, &obj, dir).unwrap();
        obj
    }

    /// The same code with and without debug info hashes alike (the bytes differ); other code does not.
    #[test]
    fn an_object_s_code_hash_leaves_out_its_debug_info() {
        let dir = crate::scratch::tempdir("foe-test").unwrap();
        let text = "static double k[3] = {1, 2, 3};\n\
                    double sum(double a, double b, double c) { return a + b + c + k[1]; }\n\
                    double scale(double x) { return sum(x, x * 3, x / 7) * k[2]; }\n";
        let with = compile(
            dir.path(),
            "g",
            text,
            &["-O2", "-ffast-math", "-gline-tables-only"],
        );
        let without = compile(dir.path(), "n", text, &["-O2", "-ffast-math"]);
        let other = compile(
            dir.path(),
            "r",
            text,
            &["-O2", "-ffast-math", "-fno-associative-math"],
        );
        assert_ne!(
            std::fs::read(&with).unwrap(),
            std::fs::read(&without).unwrap()
        );
        assert_eq!(code_hash(&with), code_hash(&without));
        assert!(code_hash(&with).is_some());
        assert_ne!(
            code_hash(&with),
            code_hash(&other),
            "re-association changes the code"
        );
    }

    /// A binary with debug info is found for a build without; one without is never found for a build that places
    /// its traces.
    #[test]
    fn a_binary_without_debug_info_never_stands_for_one_with() {
        let same = SameBinaries::default();
        let object = blake3::hash(b"code");
        let flags = vec!["-O2".to_string()];
        let clang = &crate::config::AnalysisConfig::default().clang;
        same.add(
            object,
            false,
            None,
            &flags,
            Path::new("/scratch/pp-reciprocal"),
        );
        assert_eq!(same.find(clang, &object, true, None, &flags), None);
        assert_eq!(
            same.find(clang, &object, false, None, &flags),
            Some(PathBuf::from("/scratch/pp-reciprocal"))
        );
        same.add(object, true, None, &flags, Path::new("/scratch/pp"));
        assert_eq!(
            same.find(clang, &object, true, None, &flags),
            Some(PathBuf::from("/scratch/pp"))
        );
    }

    /// A harness and its sibling asking for the same flags at once compile the object once; a failed compile is
    /// not kept.
    #[test]
    fn an_object_is_compiled_once_for_a_harness_and_its_siblings() {
        let objects = SharedObjects::default();
        let sibling = objects.clone();
        let compiles = AtomicUsize::new(0);
        let flags = vec!["-O2".to_string(), "-ffast-math".to_string()];
        let compile = || {
            compiles.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
            Ok(PathBuf::from("/scratch/pp.o"))
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| objects.get_or_compile(&flags, compile));
            let b = s.spawn(|| sibling.get_or_compile(&flags, compile));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!(a, Ok(PathBuf::from("/scratch/pp.o")));
        assert_eq!(a, b);
        assert_eq!(compiles.load(Ordering::SeqCst), 1);

        let other = vec!["-O2".to_string()];
        assert!(objects.get_or_compile(&other, || Err("no".into())).is_err());
        let again = sibling.get_or_compile(&other, || Ok(PathBuf::from("/scratch/pp-o2.o")));
        assert_eq!(again, Ok(PathBuf::from("/scratch/pp-o2.o")));
    }
}
