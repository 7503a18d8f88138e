//! foe-cc: clang's driver kept warm. Started once by foe (confined as clang is, `process::confine_tool`), it loads
//! clang's libraries and registers LLVM's targets once, then forks a child for each compile foe asks for; the
//! child runs clang's main in-process (`src/driver.cpp`) and exits with clang's exit code. A compile so costs
//! what clang's work costs, without the start of a `clang` process (dynamic relocation of libLLVM and
//! libclang-cpp, static constructors, page faults: about 25 ms of the 115 ms a GSL file's compile takes).
//!
//! Protocol, one JSON object per line. foe-cc writes `{"ready":"<clang>"}` (or `{"unavailable":"<why>"}` and
//! exits); foe writes [`Request`]s and `{"kill":id}`; foe-cc answers each request once with a [`Done`], in the
//! order they end. A child gets the request's working directory, its files as standard input, output and error,
//! a wall-clock limit (`ITIMER_REAL`: the child ends at `SIGALRM`), the asking thread's nice value, and dies with
//! foe-cc, which dies with foe.
//! foe-cc is single-threaded, so a fork leaves no lock held in the child.

use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::io::Write;

#[derive(Deserialize)]
#[serde(untagged)]
enum Message {
    Compile(Request),
    Kill { kill: u64 },
}

/// One compile: clang's arguments (without the program name), run in `cwd` with the three files as its standard
/// streams.
#[derive(Deserialize)]
struct Request {
    id: u64,
    cwd: String,
    args: Vec<String>,
    stdin: Option<String>,
    stdout: String,
    stderr: String,
    timeout_ms: u64,
    /// The nice value of the thread that asks (the shipped builds run at the lowest priority, beside the solver).
    #[serde(default)]
    nice: i32,
}

/// How a compile ended: clang's exit code, or the signal that ended it (`timed_out` when that was its limit or a
/// kill foe asked for).
#[derive(Serialize)]
struct Done {
    id: u64,
    status: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
}

#[cfg(foe_cc_driver)]
extern "C" {
    fn foe_cc_init(clang_path: *const libc::c_char);
    fn foe_cc_compile(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int;
}

fn say(line: &impl Serialize) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, line);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

#[cfg(not(foe_cc_driver))]
fn main() {
    say(&serde_json::json!({
        "unavailable": "foe-cc was built without clang's libraries (libclang-19-dev, libclang-cpp19-dev)"
    }));
    std::process::exit(2);
}

#[cfg(foe_cc_driver)]
fn main() {
    let Some(clang) = std::env::args().nth(1) else {
        say(&serde_json::json!({"unavailable": "usage: foe-cc <path of clang>"}));
        std::process::exit(2);
    };
    // The driver is this build's libraries: it stands in for the clang of the same installation only.
    let prefix = std::path::Path::new(env!("FOE_CC_LLVM_PREFIX"));
    let canonical = std::fs::canonicalize(&clang).ok();
    let prefix = std::fs::canonicalize(prefix).unwrap_or_else(|_| prefix.to_path_buf());
    let Some(clang) = canonical
        .filter(|c| c.starts_with(prefix.join("bin")))
        .and_then(|c| c.to_str().map(str::to_owned))
    else {
        say(&serde_json::json!({
            "unavailable": format!("{clang} is not the clang of {} that foe-cc was built on", prefix.display())
        }));
        std::process::exit(2);
    };
    let Ok(clang_c) = CString::new(clang.clone()) else {
        std::process::exit(2);
    };
    // SAFETY: registers LLVM's targets; `clang_c` lives until `main` returns, after the last compile.
    unsafe { foe_cc_init(clang_c.as_ptr()) };
    let sigchld = match SigChld::new() {
        Ok(s) => s,
        Err(e) => {
            say(&serde_json::json!({"unavailable": format!("no signalfd: {e}")}));
            std::process::exit(2);
        }
    };
    say(&serde_json::json!({ "ready": clang }));
    serve(&sigchld);
}

/// Children running, by process id: the request's id and whether foe asked for it to be killed.
#[cfg(foe_cc_driver)]
type Running = std::collections::HashMap<libc::pid_t, (u64, bool)>;

#[cfg(foe_cc_driver)]
fn serve(sigchld: &SigChld) {
    let mut running = Running::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut open = true;
    while open || !running.is_empty() {
        let mut fds = [
            libc::pollfd {
                fd: if open { 0 } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sigchld.fd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfd structures.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[1].revents != 0 {
            sigchld.drain();
            reap(&mut running);
        }
        if fds[0].revents != 0 {
            let mut buf = [0u8; 65536];
            // SAFETY: reads into a buffer of its length.
            let got = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            if got <= 0 {
                // foe closed the pipe: nothing more will be asked, and nobody reads the answers.
                open = false;
                for pid in running.keys() {
                    // SAFETY: signals a child of this process.
                    unsafe { libc::kill(*pid, libc::SIGKILL) };
                }
                continue;
            }
            pending.extend_from_slice(&buf[..got as usize]);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                handle(&line, &mut running, sigchld);
            }
        }
    }
}

#[cfg(foe_cc_driver)]
fn handle(line: &[u8], running: &mut Running, sigchld: &SigChld) {
    match serde_json::from_slice::<Message>(line) {
        Ok(Message::Compile(request)) => {
            let id = request.id;
            match start(request, sigchld) {
                Ok(pid) => {
                    running.insert(pid, (id, false));
                }
                Err(_) => say(&Done {
                    id,
                    status: Some(126),
                    signal: None,
                    timed_out: false,
                }),
            }
        }
        Ok(Message::Kill { kill }) => {
            for (pid, (id, killed)) in running.iter_mut() {
                if *id == kill {
                    *killed = true;
                    // SAFETY: signals a child of this process.
                    unsafe { libc::kill(*pid, libc::SIGKILL) };
                }
            }
        }
        Err(_) => {}
    }
}

/// Answers for every child that has ended.
#[cfg(foe_cc_driver)]
fn reap(running: &mut Running) {
    loop {
        let mut status = 0;
        // SAFETY: waits for any child without blocking.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        let Some((id, killed)) = running.remove(&pid) else {
            continue;
        };
        let signal = libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status));
        say(&Done {
            id,
            status: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
            signal,
            timed_out: killed || signal == Some(libc::SIGALRM),
        });
    }
}

/// Forks the child for `request`: everything it needs is prepared before the fork.
#[cfg(foe_cc_driver)]
fn start(request: Request, sigchld: &SigChld) -> std::io::Result<libc::pid_t> {
    let c = |s: &str| CString::new(s).map_err(|_| std::io::ErrorKind::InvalidInput);
    let cwd = c(&request.cwd)?;
    let stdin = request.stdin.as_deref().map(c).transpose()?;
    let stdout = c(&request.stdout)?;
    let stderr = c(&request.stderr)?;
    let args: Vec<CString> = request
        .args
        .iter()
        .map(|a| c(a))
        .collect::<Result<_, _>>()?;
    let argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    let parent = std::process::id() as libc::pid_t;
    let timer = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: (request.timeout_ms / 1000) as libc::time_t,
            tv_usec: ((request.timeout_ms % 1000) * 1000) as libc::suseconds_t,
        },
    };
    // SAFETY: foe-cc is single-threaded; the child only makes system calls and then runs clang, and leaves with
    // `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid > 0 {
        return Ok(pid);
    }
    // SAFETY: the child, alone in its process; every pointer is a live C string of this function.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(125);
        }
        sigchld.restore();
        let stdin_fd = match &stdin {
            Some(path) => libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC),
            None => libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC),
        };
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
        let out_fd = libc::open(stdout.as_ptr(), flags, 0o600);
        let err_fd = libc::open(stderr.as_ptr(), flags, 0o600);
        if stdin_fd < 0
            || out_fd < 0
            || err_fd < 0
            || libc::dup2(stdin_fd, 0) < 0
            || libc::dup2(out_fd, 1) < 0
            || libc::dup2(err_fd, 2) < 0
            || libc::chdir(cwd.as_ptr()) != 0
        {
            libc::_exit(124);
        }
        if request.nice > 0 {
            libc::setpriority(libc::PRIO_PROCESS, 0, request.nice);
        }
        if request.timeout_ms > 0 {
            libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut());
        }
        let code = foe_cc_compile(argv.len() as libc::c_int, argv.as_ptr());
        libc::_exit(code);
    }
}

/// `SIGCHLD` as a descriptor to poll: blocked for the process (its children restore the mask they inherit).
#[cfg(foe_cc_driver)]
struct SigChld {
    fd: libc::c_int,
    old: libc::sigset_t,
}

#[cfg(foe_cc_driver)]
impl SigChld {
    fn new() -> std::io::Result<SigChld> {
        // SAFETY: plain signal-mask and signalfd calls on local sets.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            if libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(SigChld { fd, old })
        }
    }

    /// Reads the pending notifications (several ended children may make one).
    fn drain(&self) {
        let mut info = [0u8; 128 * 8];
        // SAFETY: reads into a buffer of its length from a non-blocking descriptor.
        while unsafe { libc::read(self.fd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
    }

    /// In a child: the signal mask foe-cc started with.
    ///
    /// # Safety
    /// Only between fork and the child's work.
    unsafe fn restore(&self) {
        // SAFETY: restores a mask read by `new`.
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}
