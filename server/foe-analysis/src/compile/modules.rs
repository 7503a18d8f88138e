//! clang's own headers as modules, for the compiles to IR. A file that includes `<immintrin.h>` (for `_mm_pause`
//! in a spin lock, or for SIMD) makes clang parse some 40,000 lines of intrinsics on every compile: half the
//! time of a Box2D file's compile to IR. With `-fmodules` restricted to clang's builtin module map (no module map
//! of the project or the system is read), those headers are compiled once per set of options into foe's cache
//! and loaded from there; the project's own headers are still included as text.
//!
//! Only the compiles to IR that the analysis reads use them (P and P', the project's units), never the shipped
//! builds: a module is built without the macros the file defines before including it, so a C library header
//! that a builtin one includes (`stdint.h`, `stdlib.h` from `mm_malloc.h`) is read without the file's
//! `_GNU_SOURCE`, and Box2D's `timer.c` does not compile that way. The analysis is safe from such a difference:
//! every reported divergence is confirmed on the shipped binaries, which are compiled as the build compiles them.
//! A compile that fails with the modules is run again without them.

use crate::process::{self, ToolOutput};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable that turns the modules off (`0`).
const ENV: &str = "FOE_BUILTIN_MODULES";

/// The flags that make clang load its own headers as modules from foe's cache; none when there is no cache or
/// `FOE_BUILTIN_MODULES=0`.
pub fn flags() -> &'static [String] {
    static FLAGS: OnceLock<Vec<String>> = OnceLock::new();
    FLAGS.get_or_init(|| {
        if std::env::var_os(ENV).is_some_and(|v| v == "0") {
            return Vec::new();
        }
        let Some(cache) = crate::scratch::cache_subdir("modules") else {
            return Vec::new();
        };
        vec![
            "-fmodules".into(),
            // The builtin module map only: the project's and the system's headers stay text.
            "-fno-implicit-module-maps".into(),
            "-fbuiltin-module-map".into(),
            format!("-fmodules-cache-path={}", cache.display()),
        ]
    })
}

/// Runs the compile `make` builds with the given extra flags: first with [`flags`], and again without them
/// where that fails (not where it timed out).
pub fn run(
    make: impl Fn(&[String]) -> Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> std::io::Result<ToolOutput> {
    let with = flags();
    if !with.is_empty() {
        let out = process::run_tool(make(with), stdin, timeout)?;
        if out.status == Some(0) || out.timed_out {
            return Ok(out);
        }
        tracing::debug!(
            "the compile failed with clang's headers as modules; again without: {}",
            crate::exec::first_error(&out.stderr, false)
        );
    }
    process::run_tool(make(&[]), stdin, timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles `text` to IR with `flags`, with `modules` added.
    fn command(text_flags: &[&str], modules: &[String]) -> Command {
        let clang = crate::config::AnalysisConfig::default().clang;
        let mut cmd = process::command(&clang, &std::env::temp_dir());
        cmd.args(text_flags).args(modules).args([
            "-S",
            "-emit-llvm",
            "-g",
            "-x",
            "c",
            "-",
            "-o",
            "-",
        ]);
        cmd
    }

    #[test]
    fn intrinsics_load_from_the_cache_and_give_the_same_ir() {
        assert!(!flags().is_empty(), "a cache directory for the modules");
        let text = "#include <immintrin.h>\n\
                    float sum4(float *v) { __m128 x = _mm_loadu_ps(v); x = _mm_add_ps(x, _mm_movehl_ps(x, x)); \
                    x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1)); return _mm_cvtss_f32(x) * 0.5f; }\n";
        let flags_p_prime = ["-O2", "-ffast-math"];
        let with = run(
            |m| command(&flags_p_prime, m),
            Some(text.as_bytes()),
            Duration::from_secs(120),
        )
        .unwrap();
        let without = process::run_tool(
            command(&flags_p_prime, &[]),
            Some(text.as_bytes()),
            Duration::from_secs(120),
        )
        .unwrap();
        assert_eq!(with.status, Some(0), "{}", with.stderr);
        let ir = |out: &ToolOutput| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| !l.starts_with("!llvm.linker.options"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(ir(&with), ir(&without));
        let cache = crate::scratch::cache_subdir("modules").unwrap();
        // The cache holds a directory per option set, each with its modules.
        let built = std::fs::read_dir(&cache)
            .unwrap()
            .flatten()
            .filter_map(|set| std::fs::read_dir(set.path()).ok())
            .flatten()
            .flatten()
            .any(|m| {
                m.file_name()
                    .to_string_lossy()
                    .starts_with("_Builtin_intrinsics")
            });
        assert!(built, "the intrinsics module in {}", cache.display());
    }

    #[test]
    fn a_compile_that_fails_with_the_modules_is_run_again_without_them() {
        // The limits module reads glibc's <limits.h>, and with it <features.h>, without the file's _GNU_SOURCE:
        // pthread.h then declares no pthread_setname_np (Box2D's timer.c).
        let text = "#define _GNU_SOURCE\n#include <limits.h>\n#include <pthread.h>\n\
                    int name(void) { return pthread_setname_np(pthread_self(), \"x\") + INT_MAX; }\n";
        let only_with = process::run_tool(
            command(&["-O0"], flags()),
            Some(text.as_bytes()),
            Duration::from_secs(120),
        )
        .unwrap();
        assert_ne!(only_with.status, Some(0), "fails with the modules alone");
        let out = run(
            |m| command(&["-O0"], m),
            Some(text.as_bytes()),
            Duration::from_secs(120),
        )
        .unwrap();
        assert_eq!(out.status, Some(0), "{}", out.stderr);
        assert!(String::from_utf8_lossy(&out.stdout).contains("@pthread_setname_np"));
    }
}
