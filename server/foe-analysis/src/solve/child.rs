//! Solving one function in a child process. libz3 4.8.12 (Debian 12's) sometimes crashes inside a check (a
//! segfault in nlsat, seen about once in 15 analyses of odometer) and does not always heed interruption; in a
//! child, that costs one function's candidates, not foe or the language server, and a child that overruns is
//! killed. The `foe` binary serves as the child: it calls [`serve_if_child`] first thing in `main`. Where no
//! binary registered itself so (the engine's unit tests), functions are solved in-process.

use super::{known, solve_until, solve_within, KnownVerdict, KnownVerdicts, SolveLimits};
use crate::config::AnalysisConfig;
use crate::domain::Domain;
use crate::model::FunctionQueries;
use crate::process;
use crate::report::FormulaCounts;
use crate::sym::{self, Expr};
use crate::types::{FunctionSignature, Input};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The environment variable that makes the `foe` binary a solver child.
const CHILD_ENV: &str = "FOE_SOLVER_CHILD";

/// Whether this process's executable answers as a solver child.
static CHILD_AVAILABLE: AtomicBool = AtomicBool::new(false);

/// What solving one function gave: the unrestricted solve's counts, and the candidates of both the unrestricted
/// and the in-domain solve.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Solution {
    pub formulae: FormulaCounts,
    pub satisfiable: usize,
    /// Distinct candidate inputs, unrestricted ones first.
    pub candidates: Vec<Input>,
    /// Queries given up on, in either solve.
    pub timeouts: usize,
    /// Queries not solved because enough paths of their site gave no input, in either solve.
    #[serde(default)]
    pub capped: usize,
    /// The Z3 work done, in milliseconds of budget, and whether the work budget ran out (see [`SolveLimits`]).
    #[serde(default)]
    pub work_spent_ms: u64,
    #[serde(default)]
    pub work_exhausted: bool,
    /// Unique formulae whose verdict an earlier function of the file reached.
    #[serde(default)]
    pub known: usize,
    /// The verdicts this solve reached (without the domain), for the file's later functions: its exception
    /// queries', then its cancellation queries' (where it has no domain).
    #[serde(default)]
    pub learned: Vec<(String, KnownVerdict)>,
    /// Inputs where an addition or subtraction of P cancels ([`super::solve_cancellations`]), for the search
    /// aimed at results.
    #[serde(default)]
    pub cancellations: Vec<Input>,
}

#[derive(Serialize, Deserialize)]
struct Request {
    /// Every term of the queries, children before parents, so that the queries below are references.
    terms: Vec<Expr>,
    signature: FunctionSignature,
    queries: FunctionQueries,
    domain: Domain,
    config: AnalysisConfig,
    /// The function's wall-clock safety net for solving, from the moment the child reads the request.
    #[serde(default)]
    budget_ms: Option<u64>,
    /// The function's work budget ([`SolveLimits::work_ms`]).
    #[serde(default)]
    work_ms: Option<u64>,
    /// Verdicts of the file's earlier functions on this function's formulae.
    #[serde(default)]
    known: KnownVerdicts,
}

/// Solves one function in-process: over all inputs (taking over the verdicts `known` from the file's earlier
/// functions), then (with a domain) within it; then, with what is left of the work budget, its cancellations.
pub fn solve_function(
    sig: &FunctionSignature,
    queries: &FunctionQueries,
    domain: &Domain,
    known: &KnownVerdicts,
    cfg: &AnalysisConfig,
    limits: SolveLimits,
) -> Solution {
    let _one_solve = super::limit::exclusive_solve();
    let (queries_p, queries_pp) = (&queries.p, &queries.pp);
    let anywhere = solve_until(sig, queries_p, queries_pp, known, cfg, limits);
    let mut candidates: Vec<Input> = anywhere
        .candidates
        .iter()
        .map(|c| c.input.clone())
        .collect();
    let mut timeouts = anywhere.timeouts;
    let mut capped = anywhere.capped;
    let mut work_spent_ms = anywhere.work_spent_ms;
    let mut work_exhausted = anywhere.work_exhausted;
    if !domain.is_empty() {
        let rest = SolveLimits {
            work_ms: limits.work_ms.map(|w| w.saturating_sub(work_spent_ms)),
            ..limits
        };
        let inside = solve_within(sig, queries_p, queries_pp, domain, &anywhere, cfg, rest);
        timeouts += inside.timeouts;
        capped += inside.capped;
        work_spent_ms += inside.work_spent_ms;
        work_exhausted |= inside.work_exhausted;
        let mut seen: HashSet<Vec<u64>> = candidates.iter().map(Input::key).collect();
        for c in inside.candidates {
            if seen.insert(c.input.key()) {
                candidates.push(c.input);
            }
        }
    }
    let rest = SolveLimits {
        work_ms: limits.work_ms.map(|w| w.saturating_sub(work_spent_ms)),
        ..limits
    };
    let within = (!domain.is_empty()).then_some(domain);
    let cancellations =
        super::solve_cancellations(sig, &queries.cancellations, within, known, cfg, rest);
    work_spent_ms += cancellations.work_spent_ms;
    let mut learned = anywhere.learned;
    learned.extend(cancellations.learned);
    Solution {
        formulae: anywhere.formulae,
        satisfiable: anywhere.satisfiable,
        candidates,
        timeouts,
        capped,
        work_spent_ms,
        work_exhausted,
        known: anywhere.known,
        learned,
        cancellations: cancellations.inputs,
    }
}

/// Whether functions are solved in child processes (each in a process of its own, so several may be solved at
/// once without one's Z3 contexts seeing another's queries). In-process solving shares one pool of solver
/// threads and their contexts, so it solves one function at a time.
pub fn solves_in_children() -> bool {
    CHILD_AVAILABLE.load(Ordering::Acquire)
}

/// Solves one function in a child process when this executable can serve as one (else in-process); a child
/// that crashed is tried once more (the crashes depend on timing). Errors say why no child gave a solution (it
/// crashed, overran its time limit, or `stop()` asked to stop it).
#[allow(clippy::too_many_arguments)]
pub fn solve_function_isolated(
    sig: &FunctionSignature,
    queries: &FunctionQueries,
    domain: &Domain,
    known: &KnownVerdicts,
    cfg: &AnalysisConfig,
    limits: SolveLimits,
    stop: &dyn Fn() -> bool,
) -> Result<Solution, String> {
    if !CHILD_AVAILABLE.load(Ordering::Acquire) {
        return Ok(solve_function(sig, queries, domain, known, cfg, limits));
    }
    // Only the verdicts on this function's formulae cross to the child. When every formula has one (from an
    // earlier function, typically the one a wrapper calls), its cancellation queries' too, and there is no
    // domain, nothing reaches Z3, so no process is needed.
    let mut relevant = KnownVerdicts::new();
    let mut all_known = true;
    for q in queries.p.iter().chain(&queries.pp) {
        let k = known::key(q.formula.fingerprint());
        match known.get(&k) {
            Some(verdict) => {
                relevant.insert(k, verdict.clone());
            }
            None => all_known &= q.formula.is_false(),
        }
    }
    // And those on its cancellation queries (taken over only without a domain).
    if domain.is_empty() {
        for fingerprint in super::cancel::may_ask(&queries.cancellations, known) {
            let k = known::key(fingerprint);
            match known.get(&k) {
                Some(verdict) => {
                    relevant.insert(k, verdict.clone());
                }
                None => all_known = false,
            }
        }
    }
    if all_known && domain.is_empty() {
        return Ok(solve_function(sig, queries, domain, known, cfg, limits));
    }
    let request = Request {
        terms: terms_of(queries),
        signature: sig.clone(),
        queries: queries.clone(),
        domain: domain.clone(),
        config: cfg.clone(),
        budget_ms: None,
        work_ms: limits.work_ms,
        known: relevant,
    };
    solve_with_restarts(request, (&sig.name, queries, cfg, domain), limits, stop)
}

/// Solves `request` in a child, started again (at most [`MAX_ATTEMPTS`] times in all) after one that crashed or
/// ended itself on a query that did not stop when interrupted, each time with the remaining budget.
/// `function`, `queries`, `cfg` and `domain` are the request's.
fn solve_with_restarts(
    mut request: Request,
    (function, queries, cfg, domain): (&str, &FunctionQueries, &AnalysisConfig, &Domain),
    limits: SolveLimits,
    stop: &dyn Fn() -> bool,
) -> Result<Solution, String> {
    // A crash comes from an interrupt that left Z3's heap corrupt (or is one that depends on timing), and a child
    // ends itself when a query does not stop when interrupted: the next attempt takes the queries interrupted
    // before it as given up, so it does not interrupt them again, and the file's later functions take that over.
    let mut given_up: Vec<String> = Vec::new();
    let mut attempt = 1;
    loop {
        let budget = limits
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        request.budget_ms = budget.map(|b| b.as_millis() as u64);
        // Past its budget a child gives up on the queries it has not started; the kill limit leaves it time to
        // finish the running ones (each at most one query limit) and answer.
        let limit = time_limit(queries, cfg).min(budget.map_or(Duration::MAX, |b| {
            b + Duration::from_millis(2 * cfg.solver_timeout_ms + 2_000)
        }));
        let body = sym::with_wire_tables(|| serde_json::to_vec(&request))
            .map_err(|e| format!("cannot encode the solver request: {e}"))?;
        match solve_in_child(&body, limit, stop) {
            Err(ChildError::Crashed {
                message,
                interrupted,
            }) if attempt < MAX_ATTEMPTS => {
                tracing::warn!(
                    function = %function,
                    interrupted = interrupted.len(),
                    "{message}; solving again without the queries it interrupted"
                );
                for label in interrupted {
                    if !request.known.contains_key(&label) {
                        request.known.insert(label.clone(), KnownVerdict::gave_up());
                        given_up.push(label);
                    }
                }
                attempt += 1;
            }
            Ok(mut solution) => {
                // Handed on only from a function without a domain: with one, the query may have been
                // interrupted within it, which says nothing of the formula without it. (A child learns no
                // verdict it was given, so these are not among its own.)
                if domain.is_empty() {
                    let given_up = given_up.into_iter().map(|k| (k, KnownVerdict::gave_up()));
                    solution.learned.extend(given_up);
                }
                return Ok(solution);
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Solver processes started for one function at most: a crash is retried twice.
const MAX_ATTEMPTS: u32 = 3;

/// Why a child gave no solution.
#[derive(Debug, thiserror::Error)]
enum ChildError {
    /// The process died; the labels of the queries the watchdog interrupted before ([`super::limit::INTERRUPTING`]).
    #[error("{message}")]
    Crashed {
        message: String,
        interrupted: Vec<String>,
    },
    #[error("{0}")]
    Other(String),
}

/// Runs one child on an encoded [`Request`].
fn solve_in_child(
    body: &[u8],
    limit: Duration,
    stop: &dyn Fn() -> bool,
) -> Result<Solution, ChildError> {
    let exe = std::env::current_exe()
        .map_err(|e| ChildError::Other(format!("cannot find foe's executable: {e}")))?;
    let mut cmd = process::command(&exe, &std::env::temp_dir());
    cmd.env(CHILD_ENV, "1");
    for passed_on in [
        "FOE_LOG",
        super::limit::DUMP_STOPPED_ENV,
        super::limit::DUMP_SLOWER_THAN_ENV,
    ] {
        if let Some(value) = std::env::var_os(passed_on) {
            cmd.env(passed_on, value);
        }
    }
    let out = process::run_tool_until(cmd, Some(body), limit, stop)
        .map_err(|e| ChildError::Other(format!("cannot start the solver process: {e}")))?;
    if std::env::var_os("FOE_LOG").is_some() {
        // the child's log, passed on
        eprint!("{}", out.stderr);
    }
    if out.timed_out {
        return Err(ChildError::Other(if stop() {
            "stopped".into()
        } else {
            "the solver process overran its time limit and was stopped".into()
        }));
    }
    if out.status != Some(0) {
        let interrupted = out
            .stderr
            .lines()
            .filter_map(|l| l.strip_prefix(super::limit::INTERRUPTING))
            .map(|label| label.trim().to_string())
            .collect();
        let message = match out.status {
            Some(super::limit::DID_NOT_STOP_EXIT) => {
                "a Z3 query did not stop when interrupted, and its solver process ended".to_string()
            }
            Some(code) => format!("the solver process exited with {code} (Z3 crashed)"),
            None => "the solver process was killed by a signal (Z3 crashed)".to_string(),
        };
        return Err(ChildError::Crashed {
            message,
            interrupted,
        });
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| ChildError::Other(format!("cannot read the solver's answer: {e}")))
}

/// A generous wall-clock bound for a child: every unique query at its wall-clock safety net, as if on one thread, plus
/// the FP retries and start-up; it only stops a child that Z3 keeps from heeding interruption.
fn time_limit(queries: &FunctionQueries, cfg: &AnalysisConfig) -> Duration {
    let exceptions = (queries.p.len() + queries.pp.len()) as u64;
    Duration::from_millis(
        exceptions
            .saturating_mul(cfg.solver_timeout_ms)
            .saturating_add(super::cancel::WORK_MS)
            .saturating_mul(2 * super::limit::WALL_CLOCK_FACTOR)
            + 10_000,
    )
}

/// Every term of `queries`' formulae, each once, children before parents.
fn terms_of(queries: &FunctionQueries) -> Vec<Expr> {
    let formulae = queries.p.iter().chain(&queries.pp).map(|q| &q.formula);
    sym::postorder_of(formulae.chain(queries.cancellations.iter().map(|c| &c.formula)))
}

/// In the `foe` binary, before anything else: when started as a solver child, reads one request from stdin,
/// answers on stdout and exits; otherwise records that this executable can serve as a child, and returns.
pub fn serve_if_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        CHILD_AVAILABLE.store(true, Ordering::Release);
        return;
    }
    let code = match serve() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("foe solver process: {e}");
            2
        }
    };
    std::process::exit(code);
}

/// Makes this process's `malloc` keep the memory it is given back. By default glibc unmaps every block over
/// 128 KB when it is freed and hands the top of each heap back to the kernel past 128 KB free, and Z3 frees and
/// asks again for such blocks all the time (a fresh context, after each query it gave up on, allocates megabytes
/// of tables): on `j1.c` half the solver threads' time was the kernel mapping, zeroing and unmapping those pages.
/// A child lives for one function, so holding on to its peak is cheap; its threads' time fell by a third.
fn keep_freed_memory() {
    // The largest threshold glibc accepts on 64-bit targets (`DEFAULT_MMAP_THRESHOLD_MAX`); blocks above it
    // (none of Z3's on this project's queries) are still mapped on their own.
    const MMAP_THRESHOLD: libc::c_int = 32 << 20;
    // SAFETY: `mallopt` only sets allocator parameters; it is called before this process starts any thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
    }
}

fn serve() -> Result<(), String> {
    keep_freed_memory();
    super::limit::end_process_when_hung();
    let mut body = Vec::new();
    std::io::stdin()
        .read_to_end(&mut body)
        .map_err(|e| format!("cannot read the request: {e}"))?;
    let request: Request = sym::with_wire_tables(|| serde_json::from_slice(&body))
        .map_err(|e| format!("cannot decode the request: {e}"))?;
    let limits = SolveLimits {
        work_ms: request.work_ms,
        deadline: request
            .budget_ms
            .map(|ms| Instant::now() + Duration::from_millis(ms)),
    };
    let solution = solve_function(
        &request.signature,
        &request.queries,
        &request.domain,
        &request.known,
        &request.config,
        limits,
    );
    let answer =
        serde_json::to_vec(&solution).map_err(|e| format!("cannot encode the answer: {e}"))?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&answer)
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write the answer: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Query;
    use crate::types::Build;

    #[test]
    fn terms_cross_the_wire_once_each_and_come_back_equal() {
        let x = sym::param(0, sym::VarType::Float(crate::round::FloatFormat::Double));
        // A chain of shared squares: as a tree it would have 2^40 leaves.
        let mut e = x.clone();
        for _ in 0..40 {
            e = sym::arith(
                sym::ArithOp::Mul,
                crate::round::FloatFormat::Double,
                e.clone(),
                e,
            );
        }
        let formula = sym::lt(e, sym::real_i(1));
        let query = Query {
            build: Build::P,
            kind: crate::types::ExceptionKind::Overflow,
            operation: "fmul".into(),
            loc: None,
            instruction: 0,
            formula: formula.clone(),
        };
        let queries = FunctionQueries {
            p: vec![query],
            ..FunctionQueries::default()
        };
        let request = Request {
            terms: terms_of(&queries),
            signature: FunctionSignature {
                name: "f".into(),
                params: vec![crate::types::Param::new("x", crate::types::ParamType::F64)],
                ret: crate::types::ReturnType::F64,
            },
            queries,
            domain: Domain::default(),
            config: AnalysisConfig::default(),
            budget_ms: None,
            work_ms: None,
            known: KnownVerdicts::new(),
        };
        let body = sym::with_wire_tables(|| serde_json::to_vec(&request)).expect("encode");
        assert!(body.len() < 20_000, "{} bytes", body.len());
        let back: Request =
            sym::with_wire_tables(|| serde_json::from_slice(&body)).expect("decode");
        assert_eq!(back.queries.p[0].formula, formula);
        assert_eq!(back.queries.p[0].formula.to_string(), formula.to_string());
    }
}
