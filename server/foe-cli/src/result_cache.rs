//! The on-disk cache of `foe check -p`: one file's rendered result, kept with what it was computed from, as
//! ccache's direct mode keeps a manifest. The key names the file, its database entry, this `foe` binary, the
//! clang it runs and the settings that change results; the stored manifest lists every file the result read
//! (the file, the headers clang's `-M` lists, the project units linked in and their headers) with a hash of
//! its contents, and the database entries of those units. A hit needs every one unchanged. Results cut short
//! by a time budget are never stored (the engine does not cache them either).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Bumped when what is stored changes shape.
const FORMAT: &str = "foe-results/1";

/// The cache directory: `--cache-dir`, else `$FOE_CACHE_DIR`, else the user cache directory's `foe/results`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("FOE_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("foe").join("results"))
}

/// The hash of a file's contents; `None` when it cannot be read.
pub fn content_hash(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|b| hash_bytes(&b))
}

pub fn hash_bytes(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// One file a result read, and its contents' hash.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Dependency {
    pub path: PathBuf,
    pub hash: String,
}

/// What the result of one file depends on besides its key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub files: Vec<Dependency>,
    /// Project units linked in, with the hash of their database entries.
    pub entries: Vec<Dependency>,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    format: String,
    manifest: Manifest,
    result: Value,
}

/// The results directory and the parts of every key that do not depend on the file.
pub struct ResultCache {
    dir: PathBuf,
    common: String,
}

impl ResultCache {
    /// `settings` is every setting that changes a result or its rendering, serialised.
    pub fn open(dir: PathBuf, clang: &Path, settings: &str) -> anyhow::Result<ResultCache> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("cannot create the cache {}: {e}", dir.display()))?;
        // what foes killed while writing here left (the default directory is cleaned with foe's cache)
        foe_analysis::scratch::clean_dead_parts(&dir);
        let exe = std::env::current_exe()?;
        let binary =
            content_hash(&exe).ok_or_else(|| anyhow::anyhow!("cannot read {}", exe.display()))?;
        let mut h = blake3::Hasher::new();
        for part in [FORMAT, &binary, &clang_version(clang), settings] {
            h.update(part.as_bytes());
            h.update(b"\0");
        }
        Ok(ResultCache {
            dir,
            common: h.finalize().to_hex().to_string(),
        })
    }

    /// The key of `file` shown as `shown` with its database entry.
    pub fn key(&self, file: &Path, shown: &str, entry: &Value) -> String {
        let mut h = blake3::Hasher::new();
        for part in [
            self.common.as_str(),
            &file.display().to_string(),
            shown,
            &entry.to_string(),
        ] {
            h.update(part.as_bytes());
            h.update(b"\0");
        }
        h.finalize().to_hex()[..32].to_string()
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The stored result of `key` when everything its manifest lists is unchanged; `entries` maps each file of
    /// the database to the hash of its entry.
    pub fn get(&self, key: &str, entries: &HashMap<PathBuf, String>) -> Option<Value> {
        let text = std::fs::read(self.path(key)).ok()?;
        let stored: Stored = serde_json::from_slice(&text).ok()?;
        if stored.format != FORMAT {
            return None;
        }
        let files_same = stored
            .manifest
            .files
            .iter()
            .all(|d| content_hash(&d.path).is_some_and(|h| h == d.hash));
        let entries_same = stored
            .manifest
            .entries
            .iter()
            .all(|d| entries.get(&d.path).is_some_and(|h| *h == d.hash));
        (files_same && entries_same).then_some(stored.result)
    }

    /// Stores `result` under `key`, written under a temporary name and renamed so that a concurrent run never
    /// reads half a file.
    pub fn put(&self, key: &str, manifest: Manifest, result: &Value) -> anyhow::Result<()> {
        let stored = Stored {
            format: FORMAT.to_string(),
            manifest,
            result: result.clone(),
        };
        foe_analysis::scratch::write_cache(&self.path(key), &serde_json::to_vec(&stored)?)?;
        Ok(())
    }
}

/// `clang --version`, so that a new compiler at the same path invalidates results.
fn clang_version(clang: &Path) -> String {
    let cmd = foe_analysis::process::command(clang, &std::env::temp_dir());
    let mut cmd = cmd;
    cmd.arg("--version");
    foe_analysis::process::run_tool(cmd, None, std::time::Duration::from_secs(30))
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_dependency_or_entry_misses() {
        let dir = tempfile::tempdir().unwrap();
        let header = dir.path().join("k.h");
        std::fs::write(&header, "#define K 1\n").unwrap();
        let cache =
            ResultCache::open(dir.path().join("results"), Path::new("clang-19"), "{}").unwrap();
        let entry = serde_json::json!({"file": "a.c"});
        let key = cache.key(Path::new("/p/a.c"), "a.c", &entry);
        let manifest = Manifest {
            files: vec![Dependency {
                path: header.clone(),
                hash: content_hash(&header).unwrap(),
            }],
            entries: vec![Dependency {
                path: "/p/b.c".into(),
                hash: "e1".into(),
            }],
        };
        cache
            .put(&key, manifest, &serde_json::json!({"x": 1}))
            .unwrap();
        let mut entries = HashMap::from([(PathBuf::from("/p/b.c"), "e1".to_string())]);
        assert_eq!(cache.get(&key, &entries), Some(serde_json::json!({"x": 1})));
        entries.insert("/p/b.c".into(), "e2".into());
        assert_eq!(
            cache.get(&key, &entries),
            None,
            "a linked unit's entry changed"
        );
        entries.insert("/p/b.c".into(), "e1".into());
        std::fs::write(&header, "#define K 2\n").unwrap();
        assert_eq!(cache.get(&key, &entries), None, "a header changed");
        let other = cache.key(
            Path::new("/p/a.c"),
            "a.c",
            &serde_json::json!({"file": "a.c", "x": 1}),
        );
        assert_ne!(key, other, "the file's own entry is in its key");
    }
}
