//! One root for every temporary directory foe makes: `$TMPDIR/foe-<uid>/<pid>/`, a directory per process holding
//! a locked `.lock` file for as long as the process (or a fork of it that has not exec'd) lives.
//!
//! The first use in a process cleans the root of the directories of foes that are gone (killed with SIGKILL, say):
//! a directory is removed only when its lock is free *and* the process its name gives is not alive, so neither a
//! live foe nor one starting (which makes its directory, then takes its lock) ever loses its directory, and a foe
//! in another PID namespace sharing `$TMPDIR` keeps its lock. [`remove_own`] removes this process's directory on
//! every ordinary exit path.
//!
//! Files foe keeps in its cache are written into it through [`write_cache`] and [`into_cache`]: under a temporary
//! name that carries the writer's pid (`.NAME.foe-part-<pid>-<n>`, locked while written), then renamed. The same
//! first use removes the temporary files of foes that are gone ([`clean_dead_parts`]), by the same rule.

pub mod manifest;

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Why there is no scratch directory.
#[derive(Debug, thiserror::Error)]
pub enum ScratchError {
    #[error("cannot make {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} belongs to someone else or is not a directory: foe will not use it")]
    NotOurs { path: PathBuf },
    #[error("cannot lock {path}: {source}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl From<ScratchError> for std::io::Error {
    fn from(e: ScratchError) -> Self {
        std::io::Error::other(e.to_string())
    }
}

/// This process's directory and the lock that marks it alive (held until the process ends).
struct Own {
    dir: PathBuf,
    _lock: File,
}

static OWN: OnceLock<Result<Own, String>> = OnceLock::new();

/// The root shared by this user's foes: `$TMPDIR/foe-<uid>`.
pub fn root() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("foe-{uid}"))
}

/// foe's on-disk cache: `$XDG_CACHE_HOME/foe`, else `~/.cache/foe` (not made here): the other place compilers
/// write (the runtime's object).
pub fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("foe"))
}

/// The directory `sub` of foe's cache, made on first use (`None` without a cache or when it cannot be made).
pub fn cache_subdir(sub: &str) -> Option<PathBuf> {
    let dir = cache_dir()?.join(sub);
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// This process's scratch directory, made (and the root cleaned of dead foes' directories) on first use.
pub fn dir() -> std::io::Result<&'static Path> {
    match OWN.get_or_init(|| make_own().map_err(|e| e.to_string())) {
        Ok(own) => Ok(&own.dir),
        Err(e) => Err(std::io::Error::other(e.clone())),
    }
}

/// A new temporary directory named `prefix…` in this process's scratch directory (removed when dropped).
pub fn tempdir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(prefix).tempdir_in(dir()?)
}

/// Removes this process's scratch directory (and the root when it is left empty). Called on exit; a later
/// [`tempdir`] in the same process fails.
pub fn remove_own() {
    if let Some(Ok(own)) = OWN.get() {
        if let Err(e) = std::fs::remove_dir_all(&own.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::debug!("cannot remove {}: {e}", own.dir.display());
            }
        }
        // only when empty: another foe's directory keeps it
        let _ = std::fs::remove_dir(root());
    }
}

fn make_own() -> Result<Own, ScratchError> {
    let root = root();
    let dir = root.join(std::process::id().to_string());
    // The root may vanish between our mkdir and the next (a foe that ends removes it when empty): try twice.
    let mut made = Ok(());
    for _ in 0..3 {
        made = ensure_root(&root).and_then(|()| make_dir(&dir));
        if made.is_ok() {
            break;
        }
    }
    made?;
    let lock_path = dir.join(".lock");
    let lock = File::create(&lock_path).map_err(|source| ScratchError::Lock {
        path: lock_path.clone(),
        source,
    })?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(ScratchError::Lock {
            path: lock_path,
            source: std::io::Error::last_os_error(),
        });
    }
    let removed = clean_dead(&root) + cache_dir().map_or(0, |c| clean_dead_parts(&c));
    if removed > 0 {
        tracing::debug!(
            removed,
            "removed the scratch directories and cache files of foes that are gone"
        );
    }
    Ok(Own { dir, _lock: lock })
}

/// Makes the root (mode 0700) or checks that the existing one is a directory of ours, not a link.
fn ensure_root(root: &Path) -> Result<(), ScratchError> {
    match std::fs::DirBuilder::new().mode(0o700).create(root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(ScratchError::Create {
                path: root.to_path_buf(),
                source,
            })
        }
    }
    let meta = std::fs::symlink_metadata(root).map_err(|source| ScratchError::Create {
        path: root.to_path_buf(),
        source,
    })?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(ScratchError::NotOurs {
            path: root.to_path_buf(),
        });
    }
    Ok(())
}

fn make_dir(dir: &Path) -> Result<(), ScratchError> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        // a dead process with our pid left it: it is ours now
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(source) => Err(ScratchError::Create {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Removes the directories under `root` whose process is gone: its lock free and its pid not alive. Returns how
/// many were removed.
pub fn clean_dead(root: &Path) -> usize {
    let me = std::process::id();
    let mut removed = 0;
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me || alive(pid) {
            continue;
        }
        let path = entry.path();
        if locked(&path.join(".lock")) {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The part of a cache file's temporary name after its final name: `.foe-part-<pid>-<n>`.
const PART: &str = ".foe-part-";
/// How deep under the cache directory [`clean_dead_parts`] looks (`units/`, `confirm/`, `results/`).
const CACHE_DEPTH: usize = 2;

/// Writes `bytes` to `path` (a file in foe's cache) so that no reader sees half of it and a foe killed meanwhile
/// leaves only a temporary file the next foe removes.
pub fn write_cache(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    with_part(path, |part| part.write_all(bytes))
}

/// Puts `built` (a file in this process's scratch directory) into foe's cache as `path`: renamed when both are on
/// one filesystem, else copied as [`write_cache`] writes.
pub fn into_cache(built: &Path, path: &Path) -> std::io::Result<()> {
    match std::fs::rename(built, path) {
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => with_part(path, |part| {
            std::io::copy(&mut File::open(built)?, part).map(|_| ())
        }),
        other => other,
    }
}

/// Writes through `write` into `path`'s temporary name (locked until renamed), then renames it into place.
fn with_part(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?;
    let part = path.with_file_name(format!(
        ".{}{PART}{}-{n}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = File::create(&part)?;
        // SAFETY: flock on a descriptor this function owns; the lock goes with it.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        write(&mut file)?;
        std::fs::rename(&part, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    result
}

/// Removes the temporary files ([`write_cache`]) under `dir` (and its subdirectories, [`CACHE_DEPTH`] deep) of
/// foes that are gone: the pid in the name not alive and the file not locked. Also removes the runtime build
/// directories older foes made in the cache (`foe-runtime-build*`) once they are an hour old. Returns how many
/// were removed.
pub fn clean_dead_parts(dir: &Path) -> usize {
    let mut removed = 0;
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() {
                if name.starts_with("foe-runtime-build") && old_enough(&entry) {
                    removed += usize::from(std::fs::remove_dir_all(entry.path()).is_ok());
                } else if depth < CACHE_DEPTH {
                    stack.push((entry.path(), depth + 1));
                }
                continue;
            }
            let Some(pid) = name
                .rsplit_once(PART)
                .and_then(|(_, rest)| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !kind.is_file() || alive(pid) || locked(&entry.path()) {
                continue;
            }
            removed += usize::from(std::fs::remove_file(entry.path()).is_ok());
        }
    }
    removed
}

/// Whether a directory left by an older foe is older than any build of the runtime lasts.
fn old_enough(entry: &std::fs::DirEntry) -> bool {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(3600))
}

/// Whether a process with this id exists (one we may not signal exists too).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether someone holds the lock of `path` (a missing lock file is free).
fn locked(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    // SAFETY: flock on a descriptor this function owns; the lock goes with it.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_processes_directories_go_live_ones_stay() {
        let root = tempfile::tempdir().unwrap();
        // a process that is gone: a child that has been reaped
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let dead = root.path().join(gone.to_string());
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(".lock"), "").unwrap();
        std::fs::write(dead.join("left.o"), "x").unwrap();
        // a live process (this test's parent) without a lock: it may be starting
        let parent = std::os::unix::process::parent_id();
        let starting = root.path().join(parent.to_string());
        std::fs::create_dir(&starting).unwrap();
        // a dead pid whose lock is held (a foe in another PID namespace)
        let mut other = std::process::Command::new("true").spawn().unwrap();
        let other_pid = other.id();
        other.wait().unwrap();
        let elsewhere = root.path().join(other_pid.to_string());
        std::fs::create_dir(&elsewhere).unwrap();
        let held = LockedElsewhere::new(&elsewhere.join(".lock"));
        std::fs::create_dir(root.path().join("not-a-pid")).unwrap();
        assert_eq!(clean_dead(root.path()), 1);
        assert!(!dead.exists());
        assert!(starting.exists());
        assert!(elsewhere.exists());
        assert!(root.path().join("not-a-pid").exists());
        held.release();
        assert_eq!(clean_dead(root.path()), 1);
        assert!(!elsewhere.exists());
    }

    /// A lock on a file held by another process, as a foe in another PID namespace holds its own. A lock this
    /// process took would be shared by every process another test forks meanwhile (a worker forked without
    /// `exec` keeps its parent's descriptors), and outlive its release here.
    struct LockedElsewhere(std::process::Child);

    impl LockedElsewhere {
        fn new(path: &Path) -> LockedElsewhere {
            use std::io::BufRead;
            use std::process::Stdio;
            // `flock -o` holds the lock itself and runs the command without the descriptor; the command says
            // when the lock is held and waits for its standard input to close.
            let mut child = std::process::Command::new("flock")
                .arg("-o")
                .arg(path)
                .args(["-c", "echo held; read _"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("flock(1) from util-linux");
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line, "held\n");
            LockedElsewhere(child)
        }

        /// Ends the holder (the lock goes with it) and its command.
        fn release(mut self) {
            self.0.kill().unwrap();
            self.0.wait().unwrap();
            drop(self.0.stdin.take());
        }
    }

    #[test]
    fn cache_files_of_foes_that_are_gone_go_the_rest_stay() {
        let cache = tempdir("foe-test").unwrap();
        let units = cache.path().join("units");
        std::fs::create_dir(&units).unwrap();
        let kept = units.join("k.p.ll");
        write_cache(&kept, b"ir").unwrap();
        assert_eq!(std::fs::read(&kept).unwrap(), b"ir");
        let names = |dir: &Path| {
            let mut n: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        assert_eq!(names(&units), ["k.p.ll"], "no temporary name is left");
        let gone = |_| {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            pid
        };
        // a foe killed while writing; one still writing; a dead pid whose file is locked (another namespace)
        let dead = units.join(format!(".x.pp.ll{PART}{}-0", gone(())));
        std::fs::write(&dead, "half").unwrap();
        let live = units.join(format!(
            ".y.pp.ll{PART}{}-3",
            std::os::unix::process::parent_id()
        ));
        std::fs::write(&live, "half").unwrap();
        let elsewhere = cache.path().join(format!(".z.o{PART}{}-1", gone(())));
        std::fs::write(&elsewhere, "half").unwrap();
        let held = LockedElsewhere::new(&elsewhere);
        // an older foe's runtime build directory, an hour old, and a recent one
        let old = cache.path().join("foe-runtime-buildOLD");
        std::fs::create_dir(&old).unwrap();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3700);
        File::open(&old).unwrap().set_modified(hour_ago).unwrap();
        let recent = cache.path().join("foe-runtime-buildNEW");
        std::fs::create_dir(&recent).unwrap();
        assert_eq!(clean_dead_parts(cache.path()), 2);
        assert!(!dead.exists() && !old.exists());
        assert!(live.exists() && elsewhere.exists() && recent.exists() && kept.exists());
        held.release();
        assert_eq!(clean_dead_parts(cache.path()), 1);
        assert!(!elsewhere.exists());
    }

    #[test]
    fn temporary_directories_are_under_this_process_s_directory() {
        let t = tempdir("foe-test").unwrap();
        let own = root().join(std::process::id().to_string());
        assert_eq!(t.path().parent(), Some(own.as_path()));
        assert!(locked(&own.join(".lock")));
    }
}
