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

mod child;
mod rules;

use child::{Plan, ToolPlan};
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
pub(crate) const MAX_OPEN_FILES: u64 = 32;
/// Largest file the worker may write in its scratch directory.
pub(crate) const MAX_FILE_BYTES: u64 = 16 << 20;

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

    /// The layers of the compiler's sandbox ([`confine_tool`]), as [`Layers::describe_tool`] names them.
    const TOOL_NAMES: &'static [(u32, &'static str)] = &[
        (Self::USER_NS, "user namespace"),
        (Self::IPC_NS, "IPC namespace"),
        (Self::MOUNT_NS, "mount namespace"),
        (Self::READ_ONLY_FS, "filesystem read-only but foe's scratch directory and cache"),
        (Self::LANDLOCK, "Landlock (writes in foe's scratch directory and cache only, runs system programs only, no TCP, no signals out)"),
        (Self::SECCOMP, "seccomp filter (no sockets)"),
        (Self::NO_NEW_PRIVS, "no_new_privs"),
        (Self::RLIMITS, "no core dumps"),
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
    /// One line per layer of the worker's sandbox: what is active and what is not.
    pub fn describe(self) -> String {
        self.describe_with(Self::NAMES)
    }
    /// One line per layer of the compiler's sandbox ([`probe_tool`]).
    pub fn describe_tool(self) -> String {
        self.describe_with(Self::TOOL_NAMES)
    }
    fn describe_with(self, names: &[(u32, &str)]) -> String {
        let mut out = String::new();
        for (bit, name) in names {
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

/// A scratch directory and the `/bin/true` the probes start.
fn probe_program() -> Result<(tempfile::TempDir, &'static str), String> {
    let dir = crate::scratch::tempdir("foe-probe")
        .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let program = ["/bin/true", "/usr/bin/true"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("no /bin/true to probe with")?;
    Ok((dir, program))
}

/// The layers a worker gets on this machine, found by starting `/bin/true` in the sandbox once.
pub fn probe() -> Result<Layers, String> {
    static PROBED: OnceLock<Result<Layers, String>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            let (dir, program) = probe_program()?;
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

/// The layers clang and the linker get on this machine, found by starting `/bin/true` once as
/// [`crate::process::run_tool`] starts them.
pub fn probe_tool() -> Result<Layers, String> {
    static PROBED: OnceLock<Result<Layers, String>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            let (dir, program) = probe_program()?;
            let (report_r, report_w) = pipe().map_err(|e| e.to_string())?;
            let mut cmd = crate::process::command(program, dir.path());
            cmd.stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            crate::process::confine_tool(&mut cmd, Some(report_w.as_raw_fd()))
                .map_err(|e| e.to_string())?;
            let spawned = cmd.spawn();
            drop(report_w);
            let mut child = spawned.map_err(|e| format!("cannot start a confined process: {e}"))?;
            let mut bytes = [0u8; 4];
            let layers = std::fs::File::from(report_r)
                .read_exact(&mut bytes)
                .map(|()| Layers(u32::from_le_bytes(bytes)));
            let status = child.wait().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err(format!("a confined /bin/true failed ({status})"));
            }
            layers.map_err(|e| format!("no report from the confined process: {e}"))
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
        ruleset: rules::landlock_ruleset(exe, scratch),
        seccomp: rules::seccomp_programs().clone(),
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

/// Makes `cmd` (a compiler or linker, `program`) start in the compiler's sandbox: no network, nothing writable
/// but `writable` (at most three directories) and `/dev/null`, executing only system programs and `program`'s
/// own directory, no signals beyond its own processes, no core dumps. Each layer is best effort (the kernel may
/// refuse it); `FOE_SANDBOX_DISABLE` switches them off as for the worker. The layers applied are written to
/// `report` (4 bytes, [`Layers`]) when given, just before exec.
pub fn confine_tool(
    cmd: &mut Command,
    program: &Path,
    writable: &[PathBuf],
    report: Option<std::os::fd::RawFd>,
) {
    let mut dirs: [Option<CString>; child::MAX_WRITABLE] = Default::default();
    for (slot, dir) in dirs.iter_mut().zip(writable) {
        *slot = CString::new(dir.as_os_str().as_bytes()).ok();
    }
    let mut plan = ToolPlan {
        ruleset: rules::tool_ruleset(program, writable),
        writable: dirs,
        cwd: cmd
            .get_current_dir()
            .and_then(|d| CString::new(d.as_os_str().as_bytes()).ok()),
        disabled: disabled_layers(),
        seccomp: rules::tool_seccomp_program(),
        report,
    };
    // SAFETY: `ToolPlan::apply` makes only system calls (no allocation, no locks) between fork and exec.
    unsafe {
        cmd.pre_exec(move || plan.apply());
    }
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

#[cfg(test)]
mod tests {
    use super::rules::*;
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
    fn the_compiler_s_sandbox_reports_what_it_applied() {
        let layers = probe_tool().unwrap();
        let text = layers.describe_tool();
        assert_eq!(text.lines().count(), Layers::TOOL_NAMES.len());
        // what every Linux foe supports gives regardless of privileges
        for layer in [Layers::NO_NEW_PRIVS, Layers::RLIMITS, Layers::DEATH_SIGNAL] {
            assert!(layers.has(layer), "{text}");
        }
        // the probe says what the kernel grants: the layers the worker's probe finds, the compiler gets too
        let worker = probe().unwrap();
        for layer in [Layers::USER_NS, Layers::MOUNT_NS, Layers::LANDLOCK] {
            assert_eq!(layers.has(layer), worker.has(layer), "{text}");
        }
    }

    #[test]
    fn landlock_rules_fit_this_kernel() {
        // Every rule is valid for the kind of file it names (a hard requirement would fail otherwise).
        let scratch = crate::scratch::tempdir("foe-test").unwrap();
        let ruleset = landlock_ruleset_with(
            Path::new("/bin/true"),
            scratch.path(),
            landlock::CompatLevel::HardRequirement,
        );
        assert!(ruleset.is_some());
    }
}
