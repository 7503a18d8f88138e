//! Work the shipped binaries need not do twice. A probe whose object is byte for byte an earlier binary's object,
//! linked with the same units and the same link command, is that binary: it is not linked again, and its runs
//! are that binary's runs (`-fno-reciprocal-math` often changes nothing in a file that divides by no variable).
//! A binary's run on an input is made once: the sweep's, the confirmation's and the probes' runs share it. The
//! analysed file's object for one set of compile flags is compiled once for a harness and its siblings (the
//! background probes' `-mno-daz-ftz` binary links the shipped binary's object).

use super::harness::ShippedRun;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One linked binary: what went into it and where it is.
struct Linked {
    object: blake3::Hash,
    units: Option<Vec<PathBuf>>,
    link_flags: Vec<String>,
    exe: PathBuf,
}

/// The binaries a file's harnesses linked (shared by a harness and its siblings).
#[derive(Clone, Default)]
pub(super) struct SameBinaries(Arc<Mutex<Vec<Linked>>>);

impl SameBinaries {
    /// A binary already linked from the same object and units with a link command the same as `link_flags`'.
    pub(super) fn find(
        &self,
        clang: &Path,
        object: &blake3::Hash,
        units: Option<&[PathBuf]>,
        link_flags: &[String],
    ) -> Option<PathBuf> {
        let same_inputs: Vec<(Vec<String>, PathBuf)> = {
            let linked = self.0.lock().ok()?;
            linked
                .iter()
                .filter(|l| &l.object == object && l.units.as_deref() == units)
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
        units: Option<&[PathBuf]>,
        link_flags: &[String],
        exe: &Path,
    ) {
        if let Ok(mut linked) = self.0.lock() {
            linked.push(Linked {
                object,
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

/// The hash of an object file's bytes (`None` when it cannot be read: then nothing is shared).
pub(super) fn object_hash(obj: &Path) -> Option<blake3::Hash> {
    std::fs::read(obj).ok().map(|bytes| blake3::hash(&bytes))
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
