//! What the sandbox allows, prepared in the parent before the fork: the Landlock ruleset (files, TCP, signal
//! scoping) and the seccomp allow-list compiled by `seccompiler`.

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The Landlock ruleset for a worker running `exe` with `scratch` writable (`None` when the kernel has no
/// Landlock or the ruleset cannot be made; the spawn then reports the layer missing).
pub(super) fn landlock_ruleset(exe: &Path, scratch: &Path) -> Option<RulesetCreated> {
    landlock_ruleset_with(exe, scratch, CompatLevel::BestEffort)
}

pub(super) fn landlock_ruleset_with(
    exe: &Path,
    scratch: &Path,
    compat: CompatLevel,
) -> Option<RulesetCreated> {
    let abi = ABI::V6;
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let build = || -> Result<Option<RulesetCreated>, landlock::RulesetError> {
        let mut ruleset = Ruleset::default()
            .set_compatibility(compat)
            .handle_access(AccessFs::from_all(abi))?
            .handle_access(AccessNet::from_all(abi))?
            .scope(Scope::from_all(abi))?
            .create()?;
        let mut dirs: Vec<PathBuf> = ["/usr/lib", "/usr/lib64", "/lib", "/lib64"]
            .iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .filter(|d| d.is_dir())
            .collect();
        dirs.sort();
        dirs.dedup();
        for dir in dirs {
            if let Ok(fd) = PathFd::new(dir) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, read))?;
            }
        }
        if let Ok(fd) = PathFd::new("/etc/ld.so.cache") {
            ruleset = ruleset.add_rule(PathBeneath::new(fd, AccessFs::ReadFile))?;
        }
        for file in loader_paths()
            .iter()
            .chain(std::iter::once(&exe.to_path_buf()))
        {
            if let Ok(fd) = PathFd::new(file) {
                ruleset = ruleset
                    .add_rule(PathBeneath::new(fd, AccessFs::ReadFile | AccessFs::Execute))?;
            }
        }
        if let Ok(fd) = PathFd::new("/dev/null") {
            ruleset = ruleset.add_rule(PathBeneath::new(
                fd,
                AccessFs::ReadFile | AccessFs::WriteFile,
            ))?;
        }
        match PathFd::new(scratch) {
            Ok(fd) => Ok(Some(
                ruleset.add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))?,
            )),
            Err(_) => Ok(None),
        }
    };
    match build() {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!("no Landlock ruleset: {e}");
            None
        }
    }
}

/// The Landlock ruleset for a compiler or linker: reading anywhere, executing only programs of the system
/// directories and `program`'s own, writing only in `writable` (and `/dev/null`), no TCP, no signals or abstract
/// sockets beyond its own processes. `None` when the kernel has no Landlock.
pub(super) fn tool_ruleset(program: &Path, writable: &[PathBuf]) -> Option<RulesetCreated> {
    let abi = ABI::V6;
    let build = || -> Result<RulesetCreated, landlock::RulesetError> {
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))?
            .handle_access(AccessNet::from_all(abi))?
            .scope(Scope::from_all(abi))?
            .create()?;
        if let Ok(fd) = PathFd::new("/") {
            ruleset =
                ruleset.add_rule(PathBeneath::new(fd, AccessFs::ReadFile | AccessFs::ReadDir))?;
        }
        let mut exec_dirs: Vec<PathBuf> = ["/usr", "/bin", "/sbin", "/lib", "/lib64"]
            .iter()
            .map(PathBuf::from)
            .chain(
                std::fs::canonicalize(program)
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_path_buf)),
            )
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect();
        exec_dirs.sort();
        exec_dirs.dedup();
        for dir in exec_dirs {
            if let Ok(fd) = PathFd::new(dir) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, AccessFs::from_read(abi)))?;
            }
        }
        for dir in writable {
            if let Ok(fd) = PathFd::new(dir) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))?;
            }
        }
        if let Ok(fd) = PathFd::new("/dev/null") {
            ruleset = ruleset.add_rule(PathBeneath::new(
                fd,
                AccessFs::ReadFile | AccessFs::WriteFile,
            ))?;
        }
        Ok(ruleset)
    };
    match build() {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::debug!("no Landlock ruleset for the compiler: {e}");
            None
        }
    }
}

/// The dynamic loaders a worker may be started through (the kernel opens them for execution).
fn loader_paths() -> &'static [PathBuf] {
    static PATHS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    PATHS.get_or_init(|| {
        [
            "/lib64/ld-linux-x86-64.so.2",
            "/lib/ld-linux-aarch64.so.1",
            "/lib/ld-linux-x86-64.so.2",
        ]
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
    })
}

/// The seccomp programs: with a PID namespace (signals only to PID 1, the worker itself) and without one (no
/// signals to others at all).
#[derive(Clone)]
pub(super) struct SeccompPrograms {
    pub(super) pid_ns: Option<BpfProgram>,
    pub(super) plain: Option<BpfProgram>,
}

pub(super) fn seccomp_programs() -> &'static SeccompPrograms {
    static PROGRAMS: OnceLock<SeccompPrograms> = OnceLock::new();
    PROGRAMS.get_or_init(|| {
        let make = |self_pid: Option<u64>| match seccomp_program(self_pid) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!("cannot build the seccomp filter: {e}");
                None
            }
        };
        SeccompPrograms {
            pid_ns: make(Some(1)),
            plain: make(None),
        }
    })
}

/// What the loader, libc's start-up, the runtime and libm need, and nothing that creates processes, opens
/// sockets, traces, or changes namespaces or privileges. A call outside the list fails with `EPERM`.
const ALLOWED_SYSCALLS: &[libc::c_long] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_close,
    libc::SYS_openat,
    libc::SYS_newfstatat,
    libc::SYS_fstat,
    libc::SYS_statx,
    libc::SYS_lseek,
    libc::SYS_access,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_readlink,
    libc::SYS_getcwd,
    libc::SYS_fcntl,
    libc::SYS_ioctl,
    libc::SYS_dup,
    libc::SYS_dup2,
    libc::SYS_dup3,
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_arch_prctl,
    libc::SYS_set_tid_address,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_prlimit64,
    libc::SYS_getrandom,
    libc::SYS_futex,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_sigaltstack,
    libc::SYS_setitimer,
    libc::SYS_getitimer,
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_sched_yield,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_uname,
    libc::SYS_execve,
    libc::SYS_exit,
    libc::SYS_exit_group,
];

/// The compiler's seccomp program: everything allowed but creating sockets (its "no network", cheaper than a
/// network namespace per compile, whose teardown the kernel serialises), shared by every compile.
pub(super) fn tool_seccomp_program() -> Option<&'static BpfProgram> {
    static PROGRAM: OnceLock<Option<BpfProgram>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let rules: BTreeMap<i64, Vec<SeccompRule>> = [libc::SYS_socket, libc::SYS_socketpair]
                .into_iter()
                .map(|nr| (nr, vec![]))
                .collect();
            let arch = std::env::consts::ARCH.try_into().ok()?;
            let filter = SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(libc::EACCES as u32),
                arch,
            )
            .ok()?;
            filter.try_into().ok()
        })
        .as_ref()
}

fn seccomp_program(self_pid: Option<u64>) -> Result<BpfProgram, seccompiler::Error> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        ALLOWED_SYSCALLS.iter().map(|&nr| (nr, vec![])).collect();
    if let Some(pid) = self_pid {
        // abort() and raise() signal the worker itself, which is PID 1 of its namespace.
        for nr in [libc::SYS_kill, libc::SYS_tgkill, libc::SYS_tkill] {
            let only_self =
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, pid)?;
            rules.insert(nr, vec![SeccompRule::new(vec![only_self])?]);
        }
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(seccompiler::Error::Backend)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )?;
    filter.try_into().map_err(seccompiler::Error::Backend)
}
