//! The worker's sandbox on its own, whatever the gate and the linking let through: a C program started exactly
//! as foe starts its worker (`process::spawn_sandboxed`) tries each hostile action in `main` and prints what it
//! got. Every escape must fail; writing in the scratch directory and plain arithmetic must still work.
//!
//! Run as root and, by `scripts/test.sh`, as an unprivileged user.

use foe_analysis::process::{self, Layers, SandboxLimits};
use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

const PROBE_C: &str = r#"
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char *what, int escaped) { printf("%s %s\n", what, escaped ? "ESCAPED" : "held"); }

int main(int argc, char **argv) {
    int foe = atoi(argv[1]);
    const char *home = argv[2];
    int port = atoi(argv[3]);
    char path[512];
    report("signal-foe", kill(foe, 0) == 0);
    report("signal-parent", getppid() > 1 && kill(getppid(), 0) == 0);
    snprintf(path, sizeof path, "/proc/%d/environ", foe);
    report("read-environ", open(path, O_RDONLY) >= 0);
    snprintf(path, sizeof path, "%s/canary", home);
    report("write-home", open(path, O_CREAT | O_WRONLY, 0644) >= 0);
    report("read-home", open(home, O_RDONLY | O_DIRECTORY) >= 0);
    report("read-etc-passwd", open("/etc/passwd", O_RDONLY) >= 0);
    report("write-tmp", open("/tmp/foe-sandbox-canary", O_CREAT | O_WRONLY, 0644) >= 0);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    report("connect", s >= 0 && connect(s, (struct sockaddr *)&addr, sizeof addr) == 0);
    pid_t child = fork();
    if (child == 0) _exit(0);
    report("fork", child > 0);
    report("setsid", setsid() >= 0);
    report("exec-shell", 0);
    fflush(stdout);
    int scratch = open("scratch-file", O_CREAT | O_WRONLY, 0644);
    printf("scratch-write %s\n", scratch >= 0 ? "works" : "FAILED");
    volatile double x = 2.0;
    printf("libm %s\n", fabs(sqrt(x) * sqrt(x) - 2.0) < 1e-12 ? "works" : "FAILED");
    fflush(stdout);
    char *sh[] = {"/bin/sh", "-c", "echo exec-shell ESCAPED", NULL};
    execv("/bin/sh", sh);
    return 0;
}
"#;

fn compile_probe(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("probe.c");
    std::fs::write(&src, PROBE_C).unwrap();
    let exe = dir.join("probe");
    let out = std::process::Command::new("clang-19")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .output()
        .expect("clang-19 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

#[test]
fn sandboxed_program_cannot_escape() {
    let layers = run_probe();
    assert!(
        layers.missing().is_empty(),
        "this machine (and CI, the same kind) gives every layer; missing: {:?}",
        layers.missing()
    );
    // Without namespaces (a kernel that refuses them), Landlock and seccomp alone still stop every escape the
    // probe tries. (`FOE_SANDBOX_DISABLE` is read when a worker is spawned, here in this process only.)
    for disabled in ["userns,pidns", "userns,pidns,mount"] {
        std::env::set_var("FOE_SANDBOX_DISABLE", disabled);
        let layers = run_probe();
        std::env::remove_var("FOE_SANDBOX_DISABLE");
        assert!(!layers.has(Layers::USER_NS) && !layers.has(Layers::PID_NS));
        assert!(layers.has(Layers::LANDLOCK) && layers.has(Layers::SECCOMP));
    }
}

/// Runs the probe in the sandbox; asserts nothing escaped and the legitimate things work; returns the layers.
fn run_probe() -> Layers {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_probe(dir.path());
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let home = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();

    let mut cmd = process::command(&exe, &scratch);
    cmd.arg(std::process::id().to_string())
        .arg(home.path())
        .arg(port.to_string());
    let limits = SandboxLimits {
        memory_mib: 512,
        cpu_seconds: 10,
    };
    let (mut child, layers) = process::spawn_sandboxed(cmd, &exe, &scratch, limits).unwrap();
    drop(child.stdin.take());
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let (status, timed_out) =
        process::wait_with_deadline(&mut child, Duration::from_secs(30)).unwrap();
    assert!(!timed_out, "the probe hung: {out}");
    eprintln!("layers:\n{}probe said:\n{out}", layers.describe());
    assert_eq!(status, Some(0), "{out}");
    for line in out.lines() {
        assert!(
            !line.contains("ESCAPED") && !line.contains("FAILED"),
            "{line}\n{out}"
        );
    }
    for what in [
        "signal-foe",
        "read-environ",
        "write-home",
        "connect",
        "fork",
        "scratch-write",
        "libm",
    ] {
        assert!(out.contains(what), "the probe did not get to {what}: {out}");
    }
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
    assert!(std::fs::read_dir(home.path()).unwrap().next().is_none());
    assert!(!Path::new("/tmp/foe-sandbox-canary").exists());
    assert!(scratch.join("scratch-file").exists());
    layers
}

#[test]
fn foe_reports_its_sandbox_layers() {
    let out = std::process::Command::new(foe_e2e::foe_binary())
        .arg("--version")
        .env_remove("FOE_SANDBOX_DISABLE")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("sandbox"), "{text}");
    assert!(text.contains("[on ] seccomp allow-list"), "{text}");
    // the compiler's sandbox, probed as clang is started
    let tool = text
        .split_once("sandbox of clang and the linker")
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no line for the compiler's sandbox: {text}"));
    for layer in [
        "user namespace",
        "Landlock",
        "seccomp filter (no sockets)",
        "killed with foe",
    ] {
        assert!(tool.contains(&format!("[on ] {layer}")), "{text}");
    }
    assert!(
        !text.contains("[OFF]"),
        "every layer is available here: {text}"
    );
}
