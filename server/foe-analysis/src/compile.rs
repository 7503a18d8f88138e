//! Compiling the C file twice with clang, to textual LLVM IR with debug info: the reference build P and the
//! fast-math build P'. Include paths and defines come from `compile_commands.json` when one is found, through the
//! allow-list of [`flags`].

pub mod db;
pub mod flags;
pub mod modules;

pub use db::CompileDb;

use crate::config::AnalysisConfig;
use crate::process;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The two builds of one file, as clang's textual IR.
#[derive(Debug, Clone)]
pub struct CompiledPair {
    pub p_ll: String,
    pub pp_ll: String,
}

/// Why a file did not compile.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CompileError {
    /// clang rejected the file: its first error and everything it printed.
    #[error("{first_error}")]
    Rejected {
        first_error: String,
        line: Option<u32>,
        column: Option<u32>,
        stderr: String,
    },
    /// clang could not be run at all.
    #[error("cannot run {clang}: {reason}")]
    Unavailable { clang: String, reason: String },
}

const CLANG_TIMEOUT: Duration = Duration::from_secs(60);

/// The complete argument lists for P and P' (without input and output).
pub fn build_flags(config: &AnalysisConfig, file: &Path) -> (Vec<String>, Vec<String>) {
    let mut base = vec![
        "-S".to_string(),
        "-emit-llvm".into(),
        "-g".into(),
        "-gcolumn-info".into(),
    ];
    if let Some(dir) = source_dir(file) {
        // the text arrives on stdin, so quoted includes need the file's own directory
        base.push("-iquote".into());
        base.push(dir.display().to_string());
    }
    base.extend(config.extra_flags.iter().cloned());
    let mut p = base.clone();
    p.extend(config.flags_p.iter().cloned());
    if optimisation_level(&config.flags_p) == "0" {
        // -O0 marks functions optnone, which would stop the analysis copy's mem2reg; code generation is
        // unaffected because foe generates code at -O0 anyway
        p.extend(["-Xclang".into(), "-disable-O0-optnone".into()]);
    }
    let mut pp = base;
    pp.extend(config.flags_p_prime.iter().cloned());
    if optimisation_level(&config.flags_p_prime) == "0" {
        // a user's own build at -O0 (from compile_commands.json): as for P
        pp.extend(["-Xclang".into(), "-disable-O0-optnone".into()]);
    }
    (p, pp)
}

pub use crate::fast_math::is_fast_math_option;

/// `flags` without their fast-math options (`-Ofast` becomes `-O3`): the same build without fast-math.
pub fn without_fast_math(flags: &[String]) -> Vec<String> {
    flags
        .iter()
        .filter_map(|f| match f.as_str() {
            "-Ofast" => Some("-O3".to_string()),
            f if is_fast_math_option(f) => None,
            f => Some(f.to_string()),
        })
        .collect()
}

/// The last `-O` level among `flags` ("0" when none).
fn optimisation_level(flags: &[String]) -> String {
    flags
        .iter()
        .filter_map(|f| f.strip_prefix("-O"))
        .next_back()
        .map(|l| {
            if l.is_empty() {
                "1".to_string()
            } else {
                l.to_string()
            }
        })
        .unwrap_or_else(|| "0".into())
}

/// Compiles `text` (the content of `file`) as P and P', in parallel.
pub fn compile_pair(
    config: &AnalysisConfig,
    file: &Path,
    text: &str,
) -> Result<CompiledPair, CompileError> {
    let (p_flags, pp_flags) = build_flags(config, file);
    let (p, pp) = std::thread::scope(|s| {
        let p = s.spawn(|| compile_one(config, file, text, &p_flags));
        let pp = compile_one(config, file, text, &pp_flags);
        (p.join().expect("clang thread does not panic"), pp)
    });
    Ok(CompiledPair {
        p_ll: p?,
        pp_ll: pp?,
    })
}

fn compile_one(
    config: &AnalysisConfig,
    file: &Path,
    text: &str,
    flags: &[String],
) -> Result<String, CompileError> {
    let cwd = source_dir(file)
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let make = |modules: &[String]| {
        let mut cmd = process::command(&config.clang, &cwd);
        cmd.args(flags)
            .args(modules)
            .args(["-x", "c", "-", "-o", "-"]);
        cmd
    };
    let out = modules::run(make, Some(text.as_bytes()), CLANG_TIMEOUT).map_err(|e| {
        CompileError::Unavailable {
            clang: config.clang.display().to_string(),
            reason: e.to_string(),
        }
    })?;
    let name = file.display().to_string();
    let stderr = out.stderr.replace("<stdin>", &name);
    if out.timed_out {
        return Err(CompileError::Rejected {
            first_error: format!(
                "{name}: clang did not finish within {} s",
                CLANG_TIMEOUT.as_secs()
            ),
            line: None,
            column: None,
            stderr,
        });
    }
    if out.status != Some(0) {
        let (first_error, line, column) = first_error(&stderr, &name);
        return Err(CompileError::Rejected {
            first_error,
            line,
            column,
            stderr,
        });
    }
    String::from_utf8(out.stdout).map_err(|_| CompileError::Rejected {
        first_error: "clang produced IR that is not UTF-8".into(),
        line: None,
        column: None,
        stderr,
    })
}

/// The files `text` (the content of `file`) includes, as clang's `-M` lists them with P's flags (system headers
/// too), absolute: what a result for the file depends on besides its text and flags.
pub fn included_files(
    config: &AnalysisConfig,
    file: &Path,
    text: &str,
) -> Result<Vec<PathBuf>, CompileError> {
    let (p_flags, _) = build_flags(config, file);
    let cwd = source_dir(file)
        .filter(|d| d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let mut cmd = process::command(&config.clang, &cwd);
    cmd.args(&p_flags).args(["-M", "-x", "c", "-", "-o", "-"]);
    let out = process::run_tool(cmd, Some(text.as_bytes()), CLANG_TIMEOUT).map_err(|e| {
        CompileError::Unavailable {
            clang: config.clang.display().to_string(),
            reason: e.to_string(),
        }
    })?;
    if out.timed_out || out.status != Some(0) {
        let name = file.display().to_string();
        let stderr = out.stderr.replace("<stdin>", &name);
        let (first_error, line, column) = first_error(&stderr, &name);
        return Err(CompileError::Rejected {
            first_error,
            line,
            column,
            stderr,
        });
    }
    Ok(rule_prerequisites(
        &String::from_utf8_lossy(&out.stdout),
        &cwd,
    ))
}

/// The files a make rule written by clang's `-M`/`-MD` names as prerequisites, resolved against `cwd`.
pub(crate) fn rule_prerequisites(rule: &str, cwd: &Path) -> Vec<PathBuf> {
    let joined = rule.replace("\\\n", " ");
    let prerequisites = joined.split_once(": ").map_or("", |(_, p)| p);
    make_words(prerequisites)
        .into_iter()
        .filter(|p| p != "<stdin>")
        .map(|p| cwd.join(p))
        .collect()
}

/// The words of a make rule's prerequisites (`\ ` is a space inside a name).
fn make_words(text: &str) -> Vec<String> {
    let mut words = vec![];
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                cur.push(' ');
                chars.next();
            }
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// clang's first `error:` line, with its line and column when it is in the analysed file.
fn first_error(stderr: &str, name: &str) -> (String, Option<u32>, Option<u32>) {
    let Some(line) = stderr.lines().find(|l| l.contains("error:")) else {
        let fallback = stderr
            .lines()
            .next()
            .unwrap_or("clang failed without a message")
            .to_string();
        return (fallback, None, None);
    };
    let mut pos = (None, None);
    if let Some(rest) = line.strip_prefix(name).and_then(|r| r.strip_prefix(':')) {
        let mut parts = rest.splitn(3, ':');
        pos = (
            parts.next().and_then(|s| s.parse().ok()),
            parts.next().and_then(|s| s.parse().ok()),
        );
    }
    (line.trim().to_string(), pos.0, pos.1)
}

/// The directory of the file being compiled, absolute (`a.c` given bare is in the working directory).
fn source_dir(file: &Path) -> Option<PathBuf> {
    std::path::absolute(file)
        .ok()?
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
}

/// P and P' for the user's own build flags `flags`: P' is them (with `-ffast-math` added when they have no
/// fast-math option of their own), P the same without the fast-math options.
pub fn user_build_pair(flags: &[String]) -> (Vec<String>, Vec<String>) {
    let mut pp = flags.to_vec();
    if !pp.iter().any(|f| is_fast_math_option(f)) {
        pp.push("-ffast-math".into());
    }
    (without_fast_math(&pp), pp)
}

/// Splits a shell-style command line (double and single quotes, backslash escapes).
pub(crate) fn split_command(command: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut in_arg = false;
    let mut chars = command.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (Some(_), c) => cur.push(c),
            (None, '"') | (None, '\'') => {
                quote = Some(c);
                in_arg = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_arg || !cur.is_empty() {
                    args.push(std::mem::take(&mut cur));
                    in_arg = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_arg = true;
            }
        }
    }
    if in_arg || !cur.is_empty() {
        args.push(cur);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prerequisites_of_a_rule_spread_over_lines() {
        let rule = "a.o: a.c inc/b.h \\\n  /usr/include/math.h my\\ dir/c.h\n";
        let cwd = Path::new("/src");
        assert_eq!(
            rule_prerequisites(rule, cwd),
            [
                "/src/a.c",
                "/src/inc/b.h",
                "/usr/include/math.h",
                "/src/my dir/c.h"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn reports_the_first_error() {
        let config = AnalysisConfig::default();
        let err = compile_pair(
            &config,
            Path::new("/tmp/broken.c"),
            "double f(double x) { return x +; }\n",
        )
        .unwrap_err();
        match err {
            CompileError::Rejected {
                first_error,
                line,
                column,
                ..
            } => {
                assert!(first_error.starts_with("/tmp/broken.c:1:"), "{first_error}");
                assert!(first_error.contains("error:"));
                assert_eq!(line, Some(1));
                assert!(column.is_some());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn compiles_both_builds() {
        let config = AnalysisConfig::default();
        let pair = compile_pair(
            &config,
            Path::new("/tmp/id.c"),
            "double id(double x) { double a = 2*x; return a*0.5; }\n",
        )
        .unwrap();
        assert!(pair.p_ll.contains("fmul double"));
        assert!(!pair.pp_ll.contains("fmul"), "fast-math folds 2*x*0.5");
    }

    #[test]
    fn the_user_s_build_flags_make_p_and_p_prime() {
        let dir = crate::scratch::tempdir("foe-test").unwrap();
        let src = dir.path().join("a.c");
        std::fs::write(&src, "int x;").unwrap();
        let db = format!(
            r#"[{{"directory": "{}", "arguments": ["cc", "-Iinc", "-O2", "-march=haswell", "-Wall", "-g", "-MD", "-c", "a.c", "-o", "a.o"], "file": "a.c"}}]"#,
            dir.path().display()
        );
        std::fs::write(dir.path().join("compile_commands.json"), db).unwrap();
        let db = CompileDb::find(&src, None).unwrap();
        let flags = db.entry(&src).unwrap().flags.build.clone();
        assert_eq!(flags, vec!["-O2", "-march=haswell"]);
        let (p, pp) = user_build_pair(&flags);
        assert_eq!(p, vec!["-O2", "-march=haswell"]);
        assert_eq!(pp, vec!["-O2", "-march=haswell", "-ffast-math"]);
        let own: Vec<String> = ["-O3", "-ffast-math", "-fno-finite-math-only"]
            .map(String::from)
            .to_vec();
        let (p, pp) = user_build_pair(&own);
        assert_eq!(p, vec!["-O3"]);
        assert_eq!(pp, own);
    }

    #[test]
    fn removes_fast_math_options() {
        let flags: Vec<String> = ["-O2", "-ffast-math", "-march=native", "-ffp-contract=fast"]
            .map(String::from)
            .to_vec();
        assert_eq!(without_fast_math(&flags), vec!["-O2", "-march=native"]);
        assert_eq!(without_fast_math(&["-Ofast".to_string()]), vec!["-O3"]);
    }

    #[test]
    fn lists_the_included_files() {
        let dir = crate::scratch::tempdir("foe-test").unwrap();
        std::fs::write(dir.path().join("k h.h"), "#define K 2\n").unwrap();
        let src = dir.path().join("a.c");
        let text = "#include \"k h.h\"\nint x = K;\n";
        let files = included_files(&AnalysisConfig::default(), &src, text).unwrap();
        assert_eq!(files, vec![dir.path().join("k h.h")]);
    }

    #[test]
    fn a_command_string_and_an_arguments_array_give_the_same_flags() {
        let dir = crate::scratch::tempdir("foe-test").unwrap();
        let src = dir.path().join("a.c");
        std::fs::write(&src, "int x;").unwrap();
        let arguments = [
            "cc",
            "-fplugin=/x y/evil.so",
            "-DNAME=a b",
            "-o",
            "/x y/a.o",
            "-Xclang",
            "-load",
            "-Xclang",
            "/x y/evil.so",
            "--target=x86_64-/../x y/evil",
            "-O2",
            "-c",
            "a.c",
        ];
        let command = r#"cc '-fplugin=/x y/evil.so' "-DNAME=a b" -o /x\ y/a.o -Xclang -load -Xclang '/x y/evil.so' --target=x86_64-/../x\ y/evil -O2 -c a.c"#;
        let read = |entry: serde_json::Value| {
            let db = dir.path().join("compile_commands.json");
            std::fs::write(&db, serde_json::json!([entry]).to_string()).unwrap();
            let db = CompileDb::find(&src, Some(&db)).unwrap();
            let flags = db.entry(&src).unwrap().flags.clone();
            (flags.meaning, flags.build, flags.dropped)
        };
        let from_arguments = read(serde_json::json!({
            "directory": dir.path(), "file": "a.c", "arguments": arguments,
        }));
        let from_command = read(serde_json::json!({
            "directory": dir.path(), "file": "a.c", "command": command,
        }));
        assert_eq!(from_arguments, from_command);
        assert_eq!(from_command.0, ["-DNAME=a b"]);
        assert_eq!(from_command.1, ["-O2"]);
        assert_eq!(
            from_command.2,
            [
                "-fplugin=/x y/evil.so",
                "-Xclang -load",
                "-Xclang /x y/evil.so",
                "--target=x86_64-/../x y/evil"
            ]
        );
    }

    #[test]
    fn reads_compile_commands() {
        let dir = crate::scratch::tempdir("foe-test").unwrap();
        let src = dir.path().join("a.c");
        std::fs::write(&src, "int x;").unwrap();
        std::fs::create_dir(dir.path().join("build")).unwrap();
        let db = format!(
            r#"[{{"directory": "{}", "command": "cc -Iinc -DN=3 -O3 -std=c11 -o a.o -c a.c", "file": "a.c"}}]"#,
            dir.path().display()
        );
        std::fs::write(dir.path().join("build/compile_commands.json"), db).unwrap();
        let db = CompileDb::find(&src, None).unwrap();
        assert_eq!(
            std::fs::canonicalize(db.path()).unwrap(),
            std::fs::canonicalize(dir.path().join("build/compile_commands.json")).unwrap()
        );
        let flags = db.entry(&src).unwrap().flags.meaning.clone();
        assert_eq!(
            flags,
            vec![
                format!("-I{}/inc", dir.path().display()),
                "-DN=3".into(),
                "-std=c11".into()
            ]
        );
    }
}
