//! The sandbox's side of the fork: what the child does between `fork` and `exec` (namespaces, the read-only
//! remount, limits, Landlock, `no_new_privs`, seccomp), using only system calls on what the parent prepared; the
//! worker's plan ([`Plan`]) and the compiler's ([`ToolPlan`]).

use super::rules::SeccompPrograms;
use super::{Layers, MAX_FILE_BYTES, MAX_OPEN_FILES};
use landlock::{RulesetCreated, RulesetStatus};
use std::ffi::CString;

/// What the child does between fork and exec; everything in it was prepared by the parent.
pub(super) struct Plan {
    pub(super) ruleset: Option<RulesetCreated>,
    pub(super) seccomp: SeccompPrograms,
    pub(super) report: libc::c_int,
    pub(super) parent: libc::pid_t,
    pub(super) memory: u64,
    pub(super) cpu: u64,
    pub(super) scratch: Option<CString>,
    pub(super) disabled: u32,
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
    pub(super) fn apply(&mut self) -> std::io::Result<()> {
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
            // The same addresses every run: a value the user's code reads from memory it never wrote (often an
            // address left on the stack) is then the same in every analysis of the same text. Not a
            // confinement layer: the code runs as code already.
            libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
            // Every descriptor but stdin, stdout and stderr is closed at exec (the report pipe is used first).
            if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
                layers |= Layers::CLOSED_FDS;
            } else {
                for fd in 3..1024 {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
                layers |= Layers::CLOSED_FDS;
            }
            // The limit on open files comes after the pipe below: foe's other threads may hold more descriptors
            // than it allows, and a pipe made under it would fail for want of a free number.
            let rlimits_ok = set_limit(libc::RLIMIT_CORE, 0)
                & set_limit(libc::RLIMIT_AS, self.memory)
                & set_limit(libc::RLIMIT_CPU, self.cpu)
                & set_limit(libc::RLIMIT_FSIZE, MAX_FILE_BYTES);

            layers |= self.enter_namespaces();
            if layers & Layers::PID_NS != 0 {
                become_pid_one();
            }
            // One process is all the worker may have (the namespace counts only its own).
            let nproc_ok =
                set_limit(libc::RLIMIT_NPROC, 1) & set_limit(libc::RLIMIT_NOFILE, MAX_OPEN_FILES);
            if rlimits_ok && nproc_ok {
                layers |= Layers::RLIMITS;
            }
            if layers & Layers::MOUNT_NS != 0 && self.read_only_fs() {
                layers |= Layers::READ_ONLY_FS;
            }
            layers |= self.restrict_landlock();
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 {
                layers |= Layers::NO_NEW_PRIVS;
            }
            self.report_and_filter(layers);
        }
        Ok(())
    }

    /// Landlock's rules, unless disabled: the layers they add (partial where the kernel enforces only some).
    fn restrict_landlock(&mut self) -> u32 {
        let mut layers = 0;
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
        layers
    }

    /// Reports `layers` to the parent, then applies the seccomp filter (unless disabled); a filter that cannot
    /// be applied ends the child.
    fn report_and_filter(&self, layers: u32) {
        let program = if layers & Layers::PID_NS != 0 {
            self.seccomp.pid_ns.as_ref()
        } else {
            self.seccomp.plain.as_ref()
        };
        // SAFETY: `write` of a local buffer to the report pipe, and `_exit`.
        unsafe {
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
            if !private_mounts() {
                return false;
            }
            if !bind_onto_itself(scratch, libc::MS_BIND) {
                return false;
            }
            if !set_mount_attr(
                root.as_ptr(),
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
                0,
                true,
            ) {
                return false;
            }
            // The working directory still points into the mount below the bind mount: enter the writable one.
            set_mount_attr(scratch.as_ptr(), 0, MOUNT_ATTR_RDONLY, false)
                && libc::chdir(scratch.as_ptr()) == 0
        }
    }
}

/// Makes every mount of the new namespace private (nothing propagates out); whether the kernel took it. Only a
/// system call: safe between fork and exec.
unsafe fn private_mounts() -> bool {
    // SAFETY: a constant NUL-terminated path; the other pointers may be null for this call.
    unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) == 0
    }
}

/// Bind-mounts `dir` onto itself (`flags`: `MS_BIND`, with `MS_REC` for what is mounted below it), so that its
/// attributes can differ from its parent's; whether the kernel took it. Only a system call.
unsafe fn bind_onto_itself(dir: &std::ffi::CStr, flags: libc::c_ulong) -> bool {
    // SAFETY: `dir` is NUL-terminated and outlives the call.
    unsafe {
        libc::mount(
            dir.as_ptr(),
            dir.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        ) == 0
    }
}

/// Sets and clears mount attributes (`MOUNT_ATTR_*`) on the mount at `path` (and below it when `recursive`);
/// whether the kernel took them. Only a system call: safe between fork and exec.
unsafe fn set_mount_attr(path: *const libc::c_char, set: u64, clear: u64, recursive: bool) -> bool {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: mount_setattr reads a NUL-terminated path and the struct above.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path,
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) == 0
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

/// Makes the worker PID 1 of the new PID namespace: forks once more; the process above stays outside, waits
/// for the worker and exits as it did (it never returns here).
///
/// # Safety
/// Only between fork and exec, in the child, after the PID namespace was entered.
unsafe fn become_pid_one() {
    // SAFETY: plain system calls on this process, with pointers to memory it owns.
    unsafe {
        // The worker must be PID 1 of the new namespace: fork once more; this process stays outside,
        // waits for it and exits as it did. It holds the write end of `alive` until it ends.
        let mut alive = [0; 2];
        if libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            libc::_exit(1);
        }
        let pid = libc::fork();
        if pid < 0 {
            libc::_exit(1);
        }
        if pid > 0 {
            wait_and_mirror(pid, alive[1]);
        }
        // The worker: die with the process above (which dies with foe). If that one was killed before
        // this line, no signal will come (the worker would outlive foe): the closed pipe tells.
        libc::close(alive[1]);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let mut gone = libc::pollfd {
            fd: alive[0],
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut gone, 1, 0) != 0 {
            libc::_exit(1);
        }
        libc::close(alive[0]);
    }
}

/// The process between foe and the worker (outside the worker's PID namespace): closes every descriptor but
/// `keep` (whose closing tells the worker this process is gone) so only the worker holds the pipes, waits for it
/// and ends the same way. Never returns.
unsafe fn wait_and_mirror(pid: libc::pid_t, keep: libc::c_int) -> ! {
    // SAFETY: system calls on this process's own descriptors and child.
    unsafe {
        let keep = keep as u32;
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32);
        }
        libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32);
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

/// What a compiler or linker does between fork and exec: no sockets (a seccomp filter: a network namespace per
/// compile made the kernel's serialised namespace teardown the bottleneck of a busy machine), the file system
/// read-only but the writable directories, Landlock (writes only there, executing only system programs, no TCP,
/// no signals out), no core dumps. It may fork and exec (clang runs the linker), so no allow-list and no PID
/// namespace of its own.
pub(super) struct ToolPlan {
    pub(super) ruleset: Option<RulesetCreated>,
    /// At most [`MAX_WRITABLE`] directories, bind-mounted writable over the read-only tree.
    pub(super) writable: [Option<CString>; MAX_WRITABLE],
    pub(super) cwd: Option<CString>,
    pub(super) disabled: u32,
    /// No sockets ([`super::rules::tool_seccomp_program`]).
    pub(super) seccomp: Option<&'static seccompiler::BpfProgram>,
    /// Where the layers applied are written (4 bytes, [`Layers`]) just before exec: the probe's pipe.
    pub(super) report: Option<libc::c_int>,
}

pub(super) const MAX_WRITABLE: usize = 3;

impl ToolPlan {
    /// Runs in the child after fork: only system calls from here to exec.
    pub(super) fn apply(&mut self) -> std::io::Result<()> {
        let mut layers = 0u32;
        // SAFETY (whole function): plain system calls on this process, with pointers to memory it owns.
        unsafe {
            if set_limit(libc::RLIMIT_CORE, 0) {
                layers |= Layers::RLIMITS;
            }
            // set by `process::run_tool` before this plan runs
            let mut death: libc::c_int = 0;
            if libc::prctl(libc::PR_GET_PDEATHSIG, &mut death as *mut libc::c_int) == 0
                && death == libc::SIGKILL
            {
                layers |= Layers::DEATH_SIGNAL;
            }
            let others = libc::CLONE_NEWIPC | libc::CLONE_NEWNS;
            let mut namespaces = false;
            if self.disabled & Layers::USER_NS == 0 {
                namespaces = libc::unshare(libc::CLONE_NEWUSER | others) == 0;
                if namespaces {
                    layers |= Layers::USER_NS;
                }
            }
            if !namespaces {
                namespaces = libc::unshare(others) == 0;
            }
            if namespaces {
                layers |= Layers::IPC_NS | Layers::MOUNT_NS;
                if self.disabled & Layers::MOUNT_NS == 0 && self.read_only_fs() {
                    layers |= Layers::READ_ONLY_FS;
                }
            }
            if let Some(ruleset) = self.ruleset.take() {
                if self.disabled & Layers::LANDLOCK == 0 {
                    match ruleset.restrict_self().map(|s| s.ruleset) {
                        Ok(RulesetStatus::FullyEnforced) => layers |= Layers::LANDLOCK,
                        Ok(RulesetStatus::PartiallyEnforced) => {
                            layers |= Layers::LANDLOCK | Layers::LANDLOCK_PARTIAL
                        }
                        _ => {}
                    }
                }
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 {
                layers |= Layers::NO_NEW_PRIVS;
            }
        }
        if let Some(program) = self
            .seccomp
            .filter(|_| self.disabled & Layers::SECCOMP == 0)
        {
            if seccompiler::apply_filter(program).is_ok() {
                layers |= Layers::SECCOMP;
            }
        }
        if let Some(fd) = self.report {
            let bytes = layers.to_le_bytes();
            // SAFETY: write from a buffer this function owns (the filter above allows it).
            unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        }
        Ok(())
    }

    /// Everything read-only and set-uid-free but the writable directories (best effort: a failure leaves the
    /// tree as it was, Landlock still holds).
    unsafe fn read_only_fs(&self) -> bool {
        let root = c"/";
        // SAFETY: mount calls with NUL-terminated paths owned by this process.
        unsafe {
            if !private_mounts() {
                return false;
            }
            for dir in self.writable.iter().flatten() {
                bind_onto_itself(dir, libc::MS_BIND | libc::MS_REC);
            }
            if !set_mount_attr(
                root.as_ptr(),
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
                0,
                true,
            ) {
                return false;
            }
            for dir in self.writable.iter().flatten() {
                set_mount_attr(dir.as_ptr(), 0, MOUNT_ATTR_RDONLY, true);
            }
            // the working directory still points into the mounts below the bind mounts: enter it again
            if let Some(cwd) = &self.cwd {
                libc::chdir(cwd.as_ptr());
            }
        }
        true
    }
}
