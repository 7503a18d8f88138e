//! The compilation database of a request: found once (as clangd does), read and parsed once, its entries indexed
//! by their file, canonicalised once at load; every reader of the request's flags takes it from here.

use super::flags::{self, EntryFlags};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One `compile_commands.json`, parsed.
#[derive(Debug)]
pub struct CompileDb {
    /// The database as found (the given file, or the candidate the search stopped at).
    path: PathBuf,
    /// The command of each file the lookup can reach, by canonical file: the first entry of a file; `None` when
    /// that entry has no `arguments` array nor `command` string. Entries after the first one without a
    /// `directory` or `file` string are not reached (as ever: the lookup stops there).
    commands: HashMap<PathBuf, Option<Command>>,
    /// Every file the database names (entries with a `directory` and a `file`), canonical, in its order, once.
    units: Vec<PathBuf>,
}

/// The arguments and directory of one entry, and its flags sorted by [`flags::filter`] when first asked for.
#[derive(Debug)]
struct Command {
    args: Vec<String>,
    directory: PathBuf,
    flags: OnceLock<EntryFlags>,
}

/// A file's entry in a [`CompileDb`].
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The database it is in.
    pub db: &'a Path,
    /// The command as written (the compiler first).
    pub args: &'a [String],
    /// The entry's `directory`.
    pub directory: &'a Path,
    /// Its flags sorted by use ([`flags::filter`]).
    pub flags: &'a EntryFlags,
}

/// The databases read, one path per read: for tests.
#[cfg(test)]
static LOADS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// How many times the database at `path` was read in this process: for tests.
#[cfg(test)]
pub(crate) fn loads(path: &Path) -> usize {
    let loads = LOADS.lock().unwrap_or_else(|p| p.into_inner());
    loads.iter().filter(|p| *p == path).count()
}

impl CompileDb {
    /// The database holding `file`'s entry: only `database` when given (a file or the directory holding
    /// `compile_commands.json`, as `clang-tidy -p`), else the first `compile_commands.json` or
    /// `build/compile_commands.json` with an entry for it in its directory and their parents (as clangd).
    /// `None` when there is none, or the entry has no command; a database that cannot be read or is not a JSON
    /// array is passed over.
    pub fn find(file: &Path, database: Option<&Path>) -> Option<CompileDb> {
        let file = canonical(file);
        let holding = |db: CompileDb| db.command(&file).is_some().then_some(db);
        if let Some(db) = database {
            let db = if db.is_dir() {
                db.join("compile_commands.json")
            } else {
                db.to_path_buf()
            };
            return CompileDb::load(&db).and_then(holding);
        }
        file.ancestors()
            .skip(1)
            .flat_map(|d| {
                [
                    d.join("compile_commands.json"),
                    d.join("build").join("compile_commands.json"),
                ]
            })
            .find_map(|candidate| CompileDb::load(&candidate).and_then(holding))
    }

    /// Reads and parses the database at `path`, canonicalising each entry's file.
    pub fn load(path: &Path) -> Option<CompileDb> {
        #[cfg(test)]
        LOADS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(path.to_path_buf());
        let text = std::fs::read_to_string(path).ok()?;
        let entries: Vec<serde_json::Value> = serde_json::from_str(&text).ok()?;
        let mut db = CompileDb {
            // Canonical: a relative `compile_commands.json` has the empty path as its parent, which no unit lies
            // under (the file's own library would then be the whole database).
            path: canonical(path),
            commands: HashMap::new(),
            units: Vec::new(),
        };
        let mut named = HashSet::new();
        let mut reachable = true;
        for entry in &entries {
            let (Some(directory), Some(file)) = (
                entry.get("directory").and_then(|d| d.as_str()),
                entry.get("file").and_then(|f| f.as_str()),
            ) else {
                reachable = false;
                continue;
            };
            let directory = PathBuf::from(directory);
            let file = canonical(&directory.join(file));
            if named.insert(file.clone()) {
                db.units.push(file.clone());
            }
            if reachable {
                db.commands
                    .entry(file)
                    .or_insert_with(|| command(entry, directory));
            }
        }
        Some(db)
    }

    /// The database's path, canonical.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `file`'s entry; the flags foe does not use are logged once per database, file and flags in the process.
    pub fn entry(&self, file: &Path) -> Option<Entry<'_>> {
        let command = self.command(&canonical(file))?;
        let flags = command
            .flags
            .get_or_init(|| flags::filter(&command.args, &command.directory));
        if !flags.dropped.is_empty() {
            warn_dropped(&self.path, file, &flags.dropped);
        }
        Some(Entry {
            db: &self.path,
            args: &command.args,
            directory: &command.directory,
            flags,
        })
    }

    /// The files the database names but `file`, canonical, in its order.
    pub fn units_besides(&self, file: &Path) -> Vec<PathBuf> {
        let this = canonical(file);
        self.units.iter().filter(|u| **u != this).cloned().collect()
    }

    fn command(&self, canonical: &Path) -> Option<&Command> {
        self.commands.get(canonical)?.as_ref()
    }
}

/// `path` with symbolic links resolved, or as it is when it does not exist.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// An entry's command: its `arguments` array, else its `command` string split as a shell would.
fn command(entry: &serde_json::Value, directory: PathBuf) -> Option<Command> {
    let args: Vec<String> = if let Some(a) = entry.get("arguments").and_then(|a| a.as_array()) {
        a.iter()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    } else {
        super::split_command(entry.get("command")?.as_str()?)
    };
    Some(Command {
        args,
        directory,
        flags: OnceLock::new(),
    })
}

/// Logs what `db`'s entry of `file` has that foe drops, once per database, file and flags in the process.
fn warn_dropped(db: &Path, file: &Path, dropped: &[String]) {
    static WARNED: std::sync::Mutex<Vec<(PathBuf, PathBuf, Vec<String>)>> =
        std::sync::Mutex::new(Vec::new());
    let key = (db.to_path_buf(), file.to_path_buf(), dropped.to_vec());
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if !warned.contains(&key) {
        tracing::warn!(
            "{}: the entry of {} has flags foe does not use (only includes, defines, language, target, \
             floating-point and optimisation flags are): dropped {}",
            db.display(),
            file.display(),
            dropped.join(", ")
        );
        warned.push(key);
    }
}

#[cfg(test)]
mod tests;
