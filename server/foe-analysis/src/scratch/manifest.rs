//! What a cached build product was compiled from besides its key: the headers it included, each with a hash of its
//! contents, as ccache's direct mode keeps them. A product keyed by its source's text and flags alone would
//! outlive an edit of a header it includes (a project unit's struct layout, a constant): the analysis would link
//! the unit as it was, and a fresh machine would not. A cached product is used only when its manifest holds: every
//! file it lists still has the contents it had.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// A file's size and modification time when it was hashed, and its hash.
type Stamped = (u64, SystemTime, String);

/// The hash of each file read so far in this process, with the size and modification time it had then: a file
/// that kept both is not read again (many units include the same headers).
static HASHES: Mutex<Option<HashMap<PathBuf, Stamped>>> = Mutex::new(None);

/// The hash of a file's contents now; `None` when it cannot be read.
fn hash_of(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let stamp = (meta.len(), meta.modified().ok()?);
    let mut memo = HASHES.lock().unwrap_or_else(|p| p.into_inner());
    let memo = memo.get_or_insert_with(HashMap::new);
    if let Some((len, modified, hash)) = memo.get(path) {
        if (*len, *modified) == stamp {
            return Some(hash.clone());
        }
    }
    let hash = blake3::hash(&std::fs::read(path).ok()?)
        .to_hex()
        .to_string();
    memo.insert(path.to_path_buf(), (stamp.0, stamp.1, hash.clone()));
    Some(hash)
}

/// Writes the manifest of `files` to `path` (one `hash path` line each); `false` when one cannot be read or the
/// manifest cannot be written, so the product should not be cached.
pub fn write(path: &Path, files: &[PathBuf]) -> bool {
    let mut text = String::new();
    for file in files {
        let (Some(hash), Some(name)) = (hash_of(file), file.to_str()) else {
            return false;
        };
        if name.contains('\n') {
            return false;
        }
        text.push_str(&format!("{hash} {name}\n"));
    }
    super::write_cache(path, text.as_bytes()).is_ok()
}

/// Whether the manifest at `path` exists and every file it lists has the contents it had.
pub fn holds(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    text.lines().all(|line| {
        line.split_once(' ')
            .is_some_and(|(hash, file)| hash_of(Path::new(file)).as_deref() == Some(hash))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_holds_until_a_listed_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let header = dir.path().join("unit.h");
        std::fs::write(&header, "#define N 1\n").unwrap();
        let manifest = dir.path().join("unit.headers");
        assert!(!holds(&manifest), "no manifest yet");
        assert!(write(&manifest, std::slice::from_ref(&header)));
        assert!(holds(&manifest));
        // The same size, so only the contents tell (the modification time may not move within its resolution).
        std::fs::write(&header, "#define N 2\n").unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&header)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(!holds(&manifest), "the header changed");
        std::fs::remove_file(&header).unwrap();
        assert!(!holds(&manifest), "the header is gone");
    }
}
