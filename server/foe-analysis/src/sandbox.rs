//! The sandbox of the worker that runs the user's code: the layers Linux gives an unprivileged process,
//! applied between `fork` and `exec`, each one falling back when the kernel refuses it.
//!
//! Layers, outermost first: new user, PID, network, IPC and mount namespaces (the worker is PID 1 of its own
//! namespace, so no other process is visible or signalable, it has no network, and when it ends everything in
//! it ends); the filesystem remounted read-only in the mount namespace; Landlock (reads only of the system
//! libraries, the worker binary and `/dev/null`, writes only in a private scratch directory, no TCP, no signals
//! or abstract sockets beyond the sandbox); `no_new_privs`; a seccomp allow-list of the system calls the
//! runtime needs (no `fork`, `clone`, sockets, `ptrace`, ...); resource limits (memory, CPU, processes, open
//! files, file size, no core dumps); every descriptor but stdin, stdout and stderr closed at `exec`.
//!
//! Everything that allocates (the Landlock ruleset, the seccomp programs, paths) is prepared in the parent;
//! the code that runs in the child after `fork` only makes system calls. Each spawn reports over a pipe which
//! layers it applied; the first report is logged, and [`probe`] gives them to `foe --version`.

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;

/// Limits for a child that runs the user's code.
#[derive(Debug, Clone, Copy)]
pub struct SandboxLimits {
    /// Address-space limit in MiB.
    pub memory_mib: u64,
    /// CPU-seconds limit (a backstop behind the wall-clock limits of the caller).
    pub cpu_seconds: u64,
}

/// Open descriptors a worker may hold (the protocol's two, stdin/stdout/stderr, `/dev/null`, the loader's).
const MAX_OPEN_FILES: u64 = 32;
/// Largest file the worker may write in its scratch directory.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// The sandbox layers one spawn applied (a bit set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layers(u32);

impl Layers {
    pub const USER_NS: u32 = 1;
    pub const PID_NS: u32 = 2;
    pub const NET_NS: u32 = 4;
    pub const IPC_NS: u32 = 8;
    pub const MOUNT_NS: u32 = 16;
    pub const READ_ONLY_FS: u32 = 32;
    pub const LANDLOCK: u32 = 64;
    pub const LANDLOCK_PARTIAL: u32 = 128;
    pub const SECCOMP: u32 = 256;
    pub const NO_NEW_PRIVS: u32 = 512;
    pub const RLIMITS: u32 = 1024;
    pub const CLOSED_FDS: u32 = 2048;
    pub const DEATH_SIGNAL: u32 = 4096;

    const NAMES: &'static [(u32, &'static str)] = &[
        (Self::USER_NS, "user namespace"),
        (Self::PID_NS, "PID namespace (no other process visible or signalable)"),
        (Self::NET_NS, "network namespace (no network)"),
        (Self::IPC_NS, "IPC namespace"),
        (Self::MOUNT_NS, "mount namespace"),
        (Self::READ_ONLY_FS, "filesystem read-only but the scratch directory"),
        (Self::LANDLOCK, "Landlock (reads of system libraries only, writes in the scratch directory, no TCP, no signals out)"),
        (Self::SECCOMP, "seccomp allow-list (no fork, sockets, ptrace, ...)"),
        (Self::NO_NEW_PRIVS, "no_new_privs"),
        (Self::RLIMITS, "limits on memory, CPU, processes, open files and file size"),
        (Self::CLOSED_FDS, "descriptors closed but the protocol's"),
        (Self::DEATH_SIGNAL, "killed with foe"),
    ];

    pub fn bits(self) -> u32 {
        self.0
    }
    pub fn has(self, layer: u32) -> bool {
        self.0 & layer == layer
    }
    /// The layers every machine should give (a missing one is logged as a warning).
    pub fn missing(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(bit, _)| !self.has(*bit))
            .map(|(_, name)| *name)
            .collect()
    }
    /// One line per layer: what is active and what is not.
    pub fn describe(self) -> String {
        let mut out = String::new();
        for (bit, name) in Self::NAMES {
            let mark = if self.has(*bit) { "on " } else { "OFF" };
            let partial = if *bit == Self::LANDLOCK && self.has(Self::LANDLOCK_PARTIAL) {
                " (partially: an older kernel ABI)"
            } else {
                ""
            };
            out.push_str(&format!("  [{mark}] {name}{partial}\n"));
        }
        out
    }
}

/// The layers a worker gets on this machine, found by starting `/bin/true` in the sandbox once.
pub fn probe() -> Result<Layers, String> {
    static PROBED: OnceLock<Result<Layers, String>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            let dir = tempfile::Builder::new()
                .prefix("foe-probe")
                .tempdir()
                .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
            let program = ["/bin/true", "/usr/bin/true"]
                .into_iter()
                .find(|p| Path::new(p).exists())
                .ok_or("no /bin/true to probe with")?;
            let cmd = crate::process::command(program, dir.path());
            let limits = SandboxLimits {
                memory_mib: 256,
                cpu_seconds: 5,
            };
            let (mut child, layers) = spawn(cmd, Path::new(program), dir.path(), limits)
                .map_err(|e| format!("cannot start a sandboxed process: {e}"))?;
            let status = child.wait().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err(format!("a sandboxed /bin/true failed ({status})"));
            }
            Ok(layers)
        })
        .clone()
}

/// Spawns `cmd` (which runs `exe`) in the sandbox with `scratch` as its only writable directory; returns the
/// child and the layers it got. The caller sets up stdio; the child is its own process group.
pub fn spawn(
    mut cmd: Command,
    exe: &Path,
    scratch: &Path,
    limits: SandboxLimits,
) -> std::io::Result<(Child, Layers)> {
    let (report_r, report_w) = pipe()?;
    let mut plan = Plan {
        ruleset: landlock_ruleset(exe, scratch),
        seccomp: seccomp_programs().clone(),
        report: report_w.as_raw_fd(),
        parent: std::process::id() as libc::pid_t,
        memory: limits.memory_mib.saturating_mul(1 << 20),
        cpu: limits.cpu_seconds,
        scratch: CString::new(scratch.as_os_str().as_bytes()).ok(),
        disabled: disabled_layers(),
    };
    // SAFETY: `Plan::apply` makes only system calls (no allocation, no locks) between fork and exec.
    unsafe {
        cmd.pre_exec(move || plan.apply());
    }
    let spawned = cmd.spawn();
    drop(report_w);
    let child = spawned?;
    let mut bytes = [0u8; 4];
    let mut file = std::fs::File::from(report_r);
    let layers = match file.read_exact(&mut bytes) {
        Ok(()) => Layers(u32::from_le_bytes(bytes)),
        Err(_) => Layers::default(),
    };
    log_once(layers);
    Ok((child, layers))
}

fn log_once(layers: Layers) {
    static LOGGED: OnceLock<()> = OnceLock::new();
    LOGGED.get_or_init(|| {
        let missing = layers.missing();
        if missing.is_empty() {
            tracing::info!("worker sandbox: every layer active");
        } else {
            tracing::warn!(
                "worker sandbox: the kernel refused {}; the other layers hold (see `foe --version`)",
                missing.join(", ")
            );
        }
    });
}

/// Layers switched off by `FOE_SANDBOX_DISABLE` (comma-separated: `userns`, `pidns`, `landlock`, `seccomp`),
/// to test the fallbacks.
fn disabled_layers() -> u32 {
    let Ok(list) = std::env::var("FOE_SANDBOX_DISABLE") else {
        return 0;
    };
    list.split(',')
        .map(|name| match name.trim() {
            "userns" => Layers::USER_NS,
            "pidns" => Layers::PID_NS,
            "landlock" => Layers::LANDLOCK,
            "seccomp" => Layers::SECCOMP,
            "mount" => Layers::MOUNT_NS,
            _ => 0,
        })
        .fold(0, |a, b| a | b)
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors that this function then owns.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The Landlock ruleset for a worker running `exe` with `scratch` writable (`None` when the kernel has no
/// Landlock or the ruleset cannot be made; the spawn then reports the layer missing).
fn landlock_ruleset(exe: &Path, scratch: &Path) -> Option<RulesetCreated> {
    landlock_ruleset_with(exe, scratch, CompatLevel::BestEffort)
}

fn landlock_ruleset_with(
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
struct SeccompPrograms {
    pid_ns: Option<BpfProgram>,
    plain: Option<BpfProgram>,
}

fn seccomp_programs() -> &'static SeccompPrograms {
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

/// What the child does between fork and exec; everything in it was prepared by the parent.
struct Plan {
    ruleset: Option<RulesetCreated>,
    seccomp: SeccompPrograms,
    report: libc::c_int,
    parent: libc::pid_t,
    memory: u64,
    cpu: u64,
    scratch: Option<CString>,
    disabled: u32,
}

const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const AT_RECURSIVE: libc::c_uint = 0x8000;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

impl Plan {
    /// Runs in the child after fork: only system calls from here to exec.
    fn apply(&mut self) -> std::io::Result<()> {
        let mut layers = 0u32;
        // SAFETY (whole function): plain system calls on this process, with pointers to memory it owns.
        unsafe {
            // Die with foe; if foe died before this line, do not run at all.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                layers |= Layers::DEATH_SIGNAL;
            }
            if libc::getppid() != self.parent {
                libc::_exit(1);
            }
            libc::setpgid(0, 0);
            // Every descriptor but stdin, stdout and stderr is closed at exec (the report pipe is used first).
            if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
                layers |= Layers::CLOSED_FDS;
            } else {
                for fd in 3..1024 {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
                layers |= Layers::CLOSED_FDS;
            }
            let rlimits_ok = set_limit(libc::RLIMIT_CORE, 0)
                & set_limit(libc::RLIMIT_AS, self.memory)
                & set_limit(libc::RLIMIT_CPU, self.cpu)
                & set_limit(libc::RLIMIT_NOFILE, MAX_OPEN_FILES)
                & set_limit(libc::RLIMIT_FSIZE, MAX_FILE_BYTES);

            layers |= self.enter_namespaces();
            if layers & Layers::PID_NS != 0 {
                // The worker must be PID 1 of the new namespace: fork once more; this process stays outside,
                // waits for it and exits as it did.
                let pid = libc::fork();
                if pid < 0 {
                    libc::_exit(1);
                }
                if pid > 0 {
                    wait_and_mirror(pid);
                }
                // The worker: die with the process above (which dies with foe).
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            }
            // One process is all the worker may have (the namespace counts only its own).
            let nproc_ok = set_limit(libc::RLIMIT_NPROC, 1);
            if rlimits_ok && nproc_ok {
                layers |= Layers::RLIMITS;
            }
            if layers & Layers::MOUNT_NS != 0 && self.read_only_fs() {
                layers |= Layers::READ_ONLY_FS;
            }
            if let Some(ruleset) = self.ruleset.take() {
                if self.disabled & Layers::LANDLOCK == 0 {
                    if let Ok(status) = ruleset.restrict_self() {
                        match status.ruleset {
                            RulesetStatus::FullyEnforced => layers |= Layers::LANDLOCK,
                            RulesetStatus::PartiallyEnforced => {
                                layers |= Layers::LANDLOCK | Layers::LANDLOCK_PARTIAL
                            }
                            RulesetStatus::NotEnforced => {}
                        }
                    }
                }
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 {
                layers |= Layers::NO_NEW_PRIVS;
            }
            let program = if layers & Layers::PID_NS != 0 {
                self.seccomp.pid_ns.as_ref()
            } else {
                self.seccomp.plain.as_ref()
            };
            // The report goes out before the filter (it allows write, but keep the order obvious).
            if let Some(program) = program.filter(|_| self.disabled & Layers::SECCOMP == 0) {
                let bytes = (layers | Layers::SECCOMP).to_le_bytes();
                libc::write(self.report, bytes.as_ptr().cast(), bytes.len());
                if seccompiler::apply_filter(program).is_err() {
                    // Too late to report differently: refuse to run unprotected.
                    libc::_exit(1);
                }
            } else {
                let bytes = layers.to_le_bytes();
                libc::write(self.report, bytes.as_ptr().cast(), bytes.len());
            }
        }
        Ok(())
    }

    /// New user, PID, network, IPC and mount namespaces; without user namespaces (a kernel that refuses them
    /// to unprivileged users), the others alone where the process may create them (root).
    unsafe fn enter_namespaces(&self) -> u32 {
        let others = libc::CLONE_NEWNET | libc::CLONE_NEWIPC | libc::CLONE_NEWNS;
        let pid = if self.disabled & Layers::PID_NS != 0 {
            0
        } else {
            libc::CLONE_NEWPID
        };
        let got = |flags: libc::c_int| {
            let mut l = Layers::NET_NS | Layers::IPC_NS | Layers::MOUNT_NS;
            if flags & libc::CLONE_NEWPID != 0 {
                l |= Layers::PID_NS;
            }
            if flags & libc::CLONE_NEWUSER != 0 {
                l |= Layers::USER_NS;
            }
            l
        };
        let mut attempts = [0; 2];
        let mut n = 0;
        if self.disabled & Layers::USER_NS == 0 {
            attempts[n] = libc::CLONE_NEWUSER | pid | others;
            n += 1;
        }
        attempts[n] = pid | others;
        n += 1;
        for &flags in &attempts[..n] {
            // SAFETY: unshare affects only this (single-threaded) child.
            if unsafe { libc::unshare(flags) } == 0 {
                return got(flags);
            }
        }
        0
    }

    /// In the new mount namespace: nothing propagates out, everything is read-only and set-uid-free except the
    /// scratch directory.
    unsafe fn read_only_fs(&self) -> bool {
        let Some(scratch) = &self.scratch else {
            return false;
        };
        let root = c"/";
        // SAFETY: mount calls with NUL-terminated paths owned by this process.
        unsafe {
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return false;
            }
            if libc::mount(
                scratch.as_ptr(),
                scratch.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                return false;
            }
            let read_only = MountAttr {
                attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
                attr_clr: 0,
                propagation: 0,
                userns_fd: 0,
            };
            if libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                root.as_ptr(),
                AT_RECURSIVE,
                &read_only as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            ) != 0
            {
                return false;
            }
            let writable = MountAttr {
                attr_set: 0,
                attr_clr: MOUNT_ATTR_RDONLY,
                propagation: 0,
                userns_fd: 0,
            };
            // The working directory still points into the mount below the bind mount: enter the writable one.
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                scratch.as_ptr(),
                0u32,
                &writable as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            ) == 0
                && libc::chdir(scratch.as_ptr()) == 0
        }
    }
}

/// Sets a soft and hard resource limit; whether it held.
unsafe fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> bool {
    let lim = libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct above.
    unsafe { libc::setrlimit(resource, &lim) == 0 }
}

/// The process between foe and the worker (outside the worker's PID namespace): closes every descriptor so
/// only the worker holds the pipes, waits for it and ends the same way. Never returns.
unsafe fn wait_and_mirror(pid: libc::pid_t) -> ! {
    // SAFETY: system calls on this process's own descriptors and child.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
        let mut status = 0;
        loop {
            let r = libc::waitpid(pid, &mut status, 0);
            if r == pid {
                break;
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(1);
            }
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        let sig = libc::WTERMSIG(status);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seccomp_programs_build() {
        let programs = seccomp_programs();
        assert!(programs.pid_ns.is_some());
        assert!(programs.plain.is_some());
    }

    #[test]
    fn describes_every_layer() {
        let all = Layers(u32::MAX);
        assert!(all.missing().is_empty());
        assert!(Layers::default().describe().contains("[OFF] seccomp"));
    }

    #[test]
    fn landlock_rules_fit_this_kernel() {
        // Every rule is valid for the kind of file it names (a hard requirement would fail otherwise).
        let scratch = tempfile::tempdir().unwrap();
        let ruleset = landlock_ruleset_with(
            Path::new("/bin/true"),
            scratch.path(),
            CompatLevel::HardRequirement,
        );
        assert!(ruleset.is_some());
    }
}
