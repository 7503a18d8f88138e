//! `compile_commands.json` discovery, as clangd does it: the nearest database in the file's directory, its
//! ancestors, or their `build/` subdirectory that lists the file; only the flags that change what the
//! preprocessor sees are kept (`-I`, `-D`, `-U`, `-std`, `-include`, `-isystem`, `-iquote`, `-idirafter`).

use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

#[derive(Debug, Deserialize)]
struct RawEntry {
    directory: String,
    file: String,
    #[serde(default)]
    arguments: Option<Vec<String>>,
    #[serde(default)]
    command: Option<String>,
}

/// One parsed entry: the absolute file and the flags foe keeps, with paths made absolute.
#[derive(Debug, Clone)]
struct Entry {
    file: PathBuf,
    flags: Vec<String>,
}

/// Parsed databases by path, re-read when their modification time changes.
#[derive(Default)]
pub struct CompileCommands {
    parsed: Mutex<HashMap<PathBuf, (Option<SystemTime>, std::sync::Arc<Vec<Entry>>)>>,
}

/// The flags found for a file and the database they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundFlags {
    pub database: PathBuf,
    pub flags: Vec<String>,
}

impl CompileCommands {
    /// The flags of the nearest database listing `file`, or None.
    pub fn flags_for(&self, file: &Path) -> Option<FoundFlags> {
        let file = normalise(file);
        for dir in file.parent()?.ancestors() {
            for db in [dir.join("compile_commands.json"), dir.join("build").join("compile_commands.json")] {
                if !db.is_file() {
                    continue;
                }
                let entries = self.load(&db);
                if let Some(e) = entries.iter().find(|e| e.file == file) {
                    return Some(FoundFlags { database: db, flags: e.flags.clone() });
                }
            }
        }
        None
    }

    fn load(&self, db: &Path) -> std::sync::Arc<Vec<Entry>> {
        let mtime = std::fs::metadata(db).and_then(|m| m.modified()).ok();
        let mut parsed = self.parsed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((t, entries)) = parsed.get(db) {
            if *t == mtime {
                return entries.clone();
            }
        }
        let entries = std::sync::Arc::new(parse(db).unwrap_or_else(|e| {
            tracing::warn!("ignoring {}: {e}", db.display());
            vec![]
        }));
        parsed.insert(db.to_path_buf(), (mtime, entries.clone()));
        entries
    }
}

fn parse(db: &Path) -> Result<Vec<Entry>, String> {
    let text = std::fs::read_to_string(db).map_err(|e| e.to_string())?;
    let raw: Vec<RawEntry> = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    Ok(raw
        .into_iter()
        .map(|r| {
            let dir = PathBuf::from(&r.directory);
            let args = match (r.arguments, r.command) {
                (Some(a), _) => a,
                (None, Some(c)) => split_command(&c),
                (None, None) => vec![],
            };
            Entry { file: normalise(&dir.join(&r.file)), flags: keep_flags(&args, &dir) }
        })
        .collect())
}

/// Keeps the preprocessor-relevant flags of a compiler command line (argv[0] included or not).
fn keep_flags(args: &[String], dir: &Path) -> Vec<String> {
    const WITH_PATH: [&str; 5] = ["-I", "-isystem", "-iquote", "-idirafter", "-include"];
    const WITH_VALUE: [&str; 2] = ["-D", "-U"];
    let abs = |p: &str| normalise(&dir.join(p)).display().to_string();
    let mut out = vec![];
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let next = args.get(i + 1).map(String::as_str);
        if let Some(flag) = WITH_PATH.iter().find(|f| a == **f) {
            if let Some(v) = next {
                out.extend([flag.to_string(), abs(v)]);
                i += 1;
            }
        } else if let Some(flag) = WITH_PATH.iter().find(|f| f.len() == 2 && a.starts_with(**f)) {
            out.push(format!("{flag}{}", abs(&a[flag.len()..])));
        } else if WITH_VALUE.contains(&a) {
            if let Some(v) = next {
                out.extend([a.to_string(), v.to_string()]);
                i += 1;
            }
        } else if WITH_VALUE.iter().any(|f| a.starts_with(f)) || a.starts_with("-std=") {
            out.push(a.to_string());
        }
        i += 1;
    }
    out
}

/// Splits a shell command line (single and double quotes, backslash escapes).
fn split_command(command: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// An absolute path without `.` and `..` components (symlinks are left alone, as clangd does).
fn normalise(p: &Path) -> PathBuf {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf())
    };
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_shell_words() {
        assert_eq!(
            split_command(r#"cc -DNAME="a b" -I 'inc dir' x\ y.c"#),
            vec!["cc", "-DNAME=a b", "-I", "inc dir", "x y.c"]
        );
    }

    #[test]
    fn keeps_preprocessor_flags_with_absolute_paths() {
        let args: Vec<String> = "cc -c -O2 -Iinc -I ../common -DX=1 -D Y -UZ -std=c11 -include cfg.h -o x.o x.c"
            .split(' ')
            .map(str::to_string)
            .collect();
        let flags = keep_flags(&args, Path::new("/p/build"));
        assert_eq!(
            flags,
            vec![
                "-I/p/build/inc", "-I", "/p/common", "-DX=1", "-D", "Y", "-UZ", "-std=c11", "-include",
                "/p/build/cfg.h"
            ]
        );
    }

    #[test]
    fn finds_the_database_in_a_build_subdirectory() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        let db = serde_json::json!([{"directory": root.join("build"), "file": "../src/a.c",
            "command": "clang -I../include -DFOO -c ../src/a.c"}]);
        std::fs::write(root.join("build/compile_commands.json"), db.to_string()).unwrap();
        let cc = CompileCommands::default();
        let found = cc.flags_for(&root.join("src/a.c")).unwrap();
        assert_eq!(found.database, root.join("build/compile_commands.json"));
        assert_eq!(found.flags, vec![format!("-I{}", root.join("include").display()), "-DFOO".to_string()]);
        assert!(cc.flags_for(&root.join("src/other.c")).is_none());
    }
}
