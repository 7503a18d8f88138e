//! The engine's settings: one struct whose fields document their defaults.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Whether the fast-math build runs with flush-to-zero and denormals-are-zero (MXCSR 0x9fc0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FtzMode {
    /// Follow the flags: on when P' is built with `-ffast-math`, `-Ofast` or `-funsafe-math-optimizations`
    /// (clang links `crtfastmath.o` for those), off otherwise.
    #[default]
    Auto,
    On,
    Off,
}

/// Serialised in camelCase: these are also the keys of the editor settings (section `foe`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AnalysisConfig {
    /// The clang to run; default `clang-19` when on PATH, else `clang`.
    pub clang: PathBuf,
    /// Flags of the reference build P; default `-O0 -ffp-contract=off`.
    pub flags_p: Vec<String>,
    /// Flags of the fast-math build P'; default `-O2 -ffast-math`.
    pub flags_p_prime: Vec<String>,
    /// Extra flags for both builds (include paths and defines, e.g. from `compile_commands.json`); default none.
    pub extra_flags: Vec<String>,
    /// Neighbourhood radius r in `nextafter` steps per argument; default 3.
    pub radius: u32,
    /// Most executions of the neighbourhood of one candidate; the full cube is used when it fits; default 4096.
    pub neighbourhood_budget: usize,
    /// Times a loop body is unrolled (a block visited on one path) while modelling; default 2.
    pub unroll_bound: u32,
    /// Most paths explored per function while modelling; default 64.
    pub max_paths: usize,
    /// Time limit of one solver query in milliseconds (half for the query as a whole, half for concretisation
    /// when Z3 gives up on it), halved in functions of many formulae (`solve::MANY_FORMULAE`); default 200.
    pub solver_timeout_ms: u64,
    /// Retry queries whose rounded real model does not raise the exception with Z3's floating-point theory; default true.
    pub fp_theory_fallback: bool,
    /// Try each query in IEEE arithmetic on a fixed ladder of inputs before Z3, and take an input that raises the
    /// exception walked to the edge of where it does instead of asking Z3; default true.
    pub seed_inputs: bool,
    /// CPU-time limit of one execution of one build on one input, in milliseconds (a run that waits without using
    /// the CPU is stopped at [`crate::exec::WALL_FACTOR`] times it by the wall clock); default 500.
    pub exec_timeout_ms: u64,
    /// Floating-point operations one execution of one build may do before it counts as not returning, like a run
    /// past [`AnalysisConfig::exec_timeout_ms`]: a loop that does not end on some input stops after tens of
    /// milliseconds instead of the whole time limit, at the same operation on every machine. The corpus's runs
    /// that hang do 12-177 million in their 500 ms; a handful of its tens of thousands of runs that return do
    /// more than 4.2 million (GSL's Mathieu and Legendre functions on extreme orders), and are cut; default
    /// 4,194,304 (2^22).
    pub exec_op_limit: u32,
    /// Address-space limit of the worker process in MiB; default 2048.
    pub memory_limit_mib: u64,
    /// Flush-to-zero / denormals-are-zero for P'; default follows P''s flags.
    pub ftz_daz: FtzMode,
    /// Also report exceptions the plain build itself raises (the Ariadne view); default false.
    pub report_plain_exceptions: bool,
    /// Finite results of the two builds that differ in at least this many bits (log2 of one plus the floats between
    /// them) are an accuracy divergence; a change of category (NaN, infinite, zero, finite) is always reported;
    /// default 20.
    pub accuracy_bits: u32,
    /// Worker threads for solving; default the number of cores.
    pub threads: usize,
    /// Wall-clock budget of one function (model, solve and search together), in milliseconds; a function that
    /// exceeds it is reported `partial` with what was cut short; default 10000.
    pub function_budget_ms: u64,
    /// Wall-clock budget of one file's analysis after compiling, in milliseconds; the functions still waiting when
    /// it runs out get what is left of each phase; default 30000.
    pub file_budget_ms: u64,
    /// With a `compile_commands.json` entry for the file and P/P' flags left at their defaults, analyse the
    /// user's own build: P' is the entry's code-generation flags (`-O`, `-f`, `-m`, with `-ffast-math` added when
    /// they have no fast-math option), P the same without the fast-math options. An entry with neither an `-O`
    /// level nor a fast-math option keeps the defaults (a database written for tools, or a debug build); default
    /// true.
    pub flags_from_database: bool,
    /// The compilation database to take the file's entry from (a `compile_commands.json` or the directory holding
    /// it), instead of searching the file's directory and its parents; `foe check -p`. Not an editor setting, and
    /// not part of the fingerprint (what it changes, the flags, is in every cache key); default none.
    #[serde(skip)]
    pub compile_commands: Option<PathBuf>,
    /// A first look (`foe check --quick`; the editors show one while a long analysis runs): modelling only long
    /// enough to know the inputs, no solver, no confirmation on the shipped binaries; each function runs on
    /// ordinary, special and sampled inputs. Its results are never cached (cached full results are used). Not an
    /// editor setting, not in the fingerprint; default false.
    #[serde(skip)]
    pub quick: bool,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            clang: default_clang(),
            flags_p: vec!["-O0".into(), "-ffp-contract=off".into()],
            flags_p_prime: vec!["-O2".into(), "-ffast-math".into()],
            extra_flags: vec![],
            radius: 3,
            neighbourhood_budget: 4096,
            unroll_bound: 2,
            max_paths: 64,
            solver_timeout_ms: 200,
            fp_theory_fallback: true,
            seed_inputs: true,
            exec_timeout_ms: 500,
            exec_op_limit: 1 << 22,
            memory_limit_mib: 2048,
            ftz_daz: FtzMode::Auto,
            report_plain_exceptions: false,
            accuracy_bits: 20,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            function_budget_ms: 10_000,
            file_budget_ms: 30_000,
            flags_from_database: true,
            compile_commands: None,
            quick: false,
        }
    }
}

impl AnalysisConfig {
    /// Whether P' runs with FTZ/DAZ set, resolving [`FtzMode::Auto`] from P''s flags.
    pub fn p_prime_ftz(&self) -> bool {
        match self.ftz_daz {
            FtzMode::On => true,
            FtzMode::Off => false,
            FtzMode::Auto => flags_link_crtfastmath(&self.flags_p_prime),
        }
    }

    /// The limits of one run, in words: `500 ms or 4.2 million floating-point operations`.
    pub fn run_limits_in_words(&self) -> String {
        let ops = f64::from(self.exec_op_limit);
        let ops = match self.exec_op_limit {
            n if n >= 1_000_000 => format!("{:.1} million", ops / 1e6),
            n => n.to_string(),
        };
        format!(
            "{} ms or {ops} floating-point operations",
            self.exec_timeout_ms
        )
    }

    /// Whether P runs with FTZ/DAZ set (only if its own flags ask for fast math and the mode is auto).
    pub fn p_ftz(&self) -> bool {
        self.ftz_daz == FtzMode::Auto && flags_link_crtfastmath(&self.flags_p)
    }

    /// The least and most values of the numeric settings, by their editor key: checked where settings are parsed
    /// (an out-of-range value is refused with a warning) and against `package.json`'s `minimum`/`maximum`. The
    /// worker needs 64 MiB of address space to start at all.
    pub const BOUNDS: [(&'static str, u64, Option<u64>); 12] = [
        ("radius", 0, None),
        ("neighbourhoodBudget", 1, None),
        ("unrollBound", 0, None),
        ("maxPaths", 1, None),
        ("solverTimeoutMs", 1, None),
        ("functionBudgetMs", 1, None),
        ("fileBudgetMs", 1, None),
        ("execTimeoutMs", 1, None),
        ("execOpLimit", 1, Some(u32::MAX as u64)),
        ("memoryLimitMib", 64, None),
        ("accuracyBits", 1, Some(64)),
        ("threads", 1, None),
    ];

    /// Why a numeric setting's value is out of its [`AnalysisConfig::BOUNDS`], if it is.
    pub fn out_of_bounds(key: &str, value: u64) -> Option<String> {
        let (_, min, max) = Self::BOUNDS.iter().find(|(k, _, _)| *k == key)?;
        if value < *min {
            return Some(format!("{value} is below its minimum {min}"));
        }
        match max {
            Some(max) if value > *max => Some(format!("{value} is above its maximum {max}")),
            _ => None,
        }
    }

    /// Settings that change how fast results come or when they are cut short, not what they are: left out of cache
    /// keys (a result cut short by a budget is not cached).
    /// Keys as serialised (camelCase).
    pub const NOT_IN_FINGERPRINT: [&'static str; 3] =
        ["threads", "functionBudgetMs", "fileBudgetMs"];

    /// A stable hash of every setting that changes results, for cache keys.
    pub fn fingerprint(&self) -> String {
        let mut value = serde_json::to_value(self).expect("config serialises");
        if let Some(map) = value.as_object_mut() {
            for key in Self::NOT_IN_FINGERPRINT {
                map.remove(key);
            }
        }
        let json = value.to_string();
        blake3::hash(json.as_bytes()).to_hex()[..16].to_string()
    }
}

/// clang links `crtfastmath.o` (which sets FTZ/DAZ at start-up) for these flags; later flags override earlier ones.
fn flags_link_crtfastmath(flags: &[String]) -> bool {
    let mut on = false;
    for f in flags {
        match f.as_str() {
            "-ffast-math" | "-Ofast" | "-funsafe-math-optimizations" => on = true,
            "-fno-fast-math" | "-fno-unsafe-math-optimizations" => on = false,
            _ => {}
        }
    }
    on
}

fn default_clang() -> PathBuf {
    if crate::process::find_program(std::path::Path::new("clang-19")).is_some() {
        PathBuf::from("clang-19")
    } else if std::path::Path::new("/usr/lib/llvm-19/bin/clang").is_file() {
        PathBuf::from("/usr/lib/llvm-19/bin/clang")
    } else {
        PathBuf::from("clang")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ftz_follows_flags() {
        let mut c = AnalysisConfig::default();
        assert!(c.p_prime_ftz());
        assert!(!c.p_ftz());
        c.flags_p_prime = vec!["-O2".into()];
        assert!(!c.p_prime_ftz());
        c.ftz_daz = FtzMode::On;
        assert!(c.p_prime_ftz());
    }

    #[test]
    fn the_thread_count_and_budgets_do_not_change_cache_keys() {
        let a = AnalysisConfig::default();
        let b = AnalysisConfig {
            threads: a.threads + 3,
            function_budget_ms: 1,
            file_budget_ms: 2,
            ..a.clone()
        };
        assert_eq!(
            a.fingerprint(),
            b.fingerprint(),
            "threads and budgets are left out"
        );
        let c = AnalysisConfig {
            radius: a.radius + 1,
            ..a.clone()
        };
        assert_ne!(a.fingerprint(), c.fingerprint());
    }
}
