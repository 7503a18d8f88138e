//! The result model: what an analysis of one file found, as plain serialisable values.
//!
//! This is the engine's public output; the CLI prints it (text, JSON, SARIF) and the language server
//! converts it to diagnostics. It holds no LLVM or Z3 handle.

use crate::types::{ExceptionKind, FunctionSignature};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod divergence;
mod run;
pub use crate::scalar::{Scalar, ScalarType, ValueClass};
pub use divergence::{
    Cause, Confirmation, Divergence, DivergenceClass, NamedValue, Reference, ResultDifference,
    TraceEvent,
};
pub use run::{Output, RunEnd};

/// An exception the plain build itself raises on some input (the Ariadne view).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlainException {
    pub kind: ExceptionKind,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub inputs: Vec<NamedValue>,
    /// How many of the inputs run raised it here (Ariadne's input-location pairs); `inputs` is the first.
    #[serde(default)]
    pub inputs_raising: usize,
    /// Ariadne's classification of an overflow or underflow: whether the function's real-number result on this
    /// input is representable (then the exception is an artefact of the evaluation order, avoidable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avoidable: Option<Avoidability>,
}

/// Ariadne's split of the overflows and underflows the plain build raises (thesis, section 5.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Avoidability {
    /// The real-number result is a normal float (in [-Ω, Ω], magnitude at least λ): another evaluation of the
    /// same formula might not raise it.
    Avoidable,
    /// The real-number result itself overflows or is subnormal.
    Unavoidable,
    /// No exact reference for this input (the reason).
    Unknown(String),
}

/// Formula counts in the paper's Table III sense.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormulaCounts {
    /// Exception conditions built from P.
    pub p: usize,
    /// Exception conditions built from P'.
    pub p_prime: usize,
    /// The union after removing syntactic duplicates.
    pub unique: usize,
}

/// What happened to one function. Decided once, in the engine ([`FunctionReport::settle_status`] for the
/// functions that reached the search); every front end renders it as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FunctionStatus {
    /// Both builds ran on at least one input (or no exception is possible in it), and nothing was cut short.
    Analysed,
    /// Both builds ran on inputs, but part of the analysis was cut short (`reason` says what: solver time-outs,
    /// paths stopped at a call or a symbolic index, a time budget).
    Partial,
    /// A helper the fast-math build has no callable copy of (inlined into its callers, or its signature
    /// changed): its operations were analysed inside the callers named in `through`.
    ThroughCallers,
    /// Not analysed, by choice or because foe does not model something it does (`reason`, `reason_code`).
    Skipped,
    /// The analysis was attempted and produced no evidence (a solver crash, the runner, the execution, the
    /// budget ran out before any run).
    Failed,
}

impl FunctionStatus {
    /// Whether both builds ran on some input of this function (its findings, if any, are real).
    pub fn ran(self) -> bool {
        matches!(self, FunctionStatus::Analysed | FunctionStatus::Partial)
    }

    pub fn name(self) -> &'static str {
        match self {
            FunctionStatus::Analysed => "analysed",
            FunctionStatus::Partial => "partial",
            FunctionStatus::ThroughCallers => "through_callers",
            FunctionStatus::Skipped => "skipped",
            FunctionStatus::Failed => "failed",
        }
    }
}

/// Why a function is not (fully) analysed, as a category a benchmark can count; `reason` has the details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// `--function` selected another function.
    NotSelected,
    /// The model does not support a construct of the function (named in `reason`).
    Unsupported,
    /// It calls a function foe cannot model or run.
    ExternalCall,
    /// The fast-math build has no callable copy of it and no analysed caller holds it.
    NoFastMathCopy,
    /// The signature of the fast-math build's copy differs (an unused return value dropped).
    SignatureDiffers,
    /// The solver process crashed or overran.
    SolverFailed,
    /// The instrumented program could not be built.
    RunnerFailed,
    /// Running the builds failed.
    ExecutionFailed,
    /// The function's work budget (its share of the file's) ran out.
    Budget,
    /// A wall-clock safety net stopped a phase before its work budget ran out (the machine was loaded, or the
    /// work undercounts what the function costs): another run of the same text may find more or less, so the
    /// result is not cached.
    Clock,
    /// Some solver queries gave up (time limit or degree bound).
    SolverTimeouts,
    /// Some solver queries were not tried: enough other paths of the same operation gave no input.
    PathsCapped,
    /// Some paths stop early (a symbolic memory index, a call that must not run, the exploration bound).
    PathsStopped,
    /// Some executions crashed or timed out.
    RunsIncomplete,
    /// A first look ([`crate::config::AnalysisConfig::quick`]): ordinary, special and sampled inputs only, no
    /// solver, nothing confirmed on the shipped binaries.
    FirstLook,
}

/// What a phase has to say about a function: text for its report's reason, with the category of what it cut
/// short (`None`: an assumption or a remark, which cuts nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub code: Option<ReasonCode>,
    pub text: String,
}

impl Note {
    /// Something cut short, in the category `code`.
    pub fn cut(code: ReasonCode, text: impl Into<String>) -> Note {
        Note {
            code: Some(code),
            text: text.into(),
        }
    }

    /// A remark that cuts nothing (an assumption, where paths end by design).
    pub fn remark(text: impl Into<String>) -> Note {
        Note {
            code: None,
            text: text.into(),
        }
    }
}

/// Where a function sits in the source, for fixes and diagnostics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionSpan {
    /// Line of the declaration.
    pub line: u32,
    /// Line of the opening brace of the body (`scopeLine` in the debug info).
    pub body_line: u32,
    /// Last line holding code of the function.
    pub end_line: u32,
}

/// Everything found for one function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionReport {
    pub name: String,
    pub status: FunctionStatus,
    /// Why the function was skipped, or notes on a partial analysis (solver time-outs, crashes); empty otherwise.
    pub reason: String,
    /// The categories of `reason`, the main one first; empty when the function was analysed completely.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_codes: Vec<ReasonCode>,
    /// For an inlined helper: the analysed functions its operations were analysed in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub through: Vec<String>,
    /// Wall time spent on this function (model, solve, search), in milliseconds.
    #[serde(default)]
    pub time_ms: u64,
    pub formulae: FormulaCounts,
    pub satisfiable: usize,
    /// Distinct rounded candidate inputs.
    pub candidates: usize,
    /// Candidates whose neighbourhood held a divergent input (the paper's "diff-producing").
    pub diff_producing: usize,
    pub divergences: Vec<Divergence>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plain_exceptions: Vec<PlainException>,
    pub signature: Option<FunctionSignature>,
    pub span: Option<FunctionSpan>,
    /// The declared input domain, as written (`-4.5 <= v <= -0.3`); empty when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domain: Vec<String>,
    /// Solver queries that hit the time limit.
    pub solver_timeouts: usize,
    /// Executions of P and P' run in the search (each counts both builds once).
    pub executions: usize,
    /// Whether this result came from the per-function cache.
    #[serde(default)]
    pub cached: bool,
    /// The solver verdicts this function reached, for the functions that call it (kept with the cached report,
    /// not written out).
    #[serde(skip)]
    pub learned: Vec<(String, crate::solve::KnownVerdict)>,
    /// Where the functions its cache key holds lay when it was made (kept with the cached report, not written
    /// out): a report reused after lines moved moves each position with the function it lies in.
    #[serde(skip)]
    pub line_anchors: Vec<LineAnchor>,
    /// Divergences of the instrumented builds whose set difference the shipped binaries did not show (dropped).
    #[serde(default)]
    pub not_reproduced: usize,
    /// The one-line verdict: what was tried, the worst accuracy loss found, whether exceptions were proved
    /// impossible or only not found; `None` for functions that did not reach the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Whether the function tests its values for NaN or infinity (`isnan`, `x != x`, a comparison with
    /// `INFINITY`): it expects such values, so a finding that needs one is a warning.
    #[serde(default)]
    pub tests_special_values: bool,
    /// How the search's runs ended: whether the two builds were really compared.
    #[serde(default)]
    pub runs: RunTally,
    /// The header that defines the function, when it is not the analysed file (a `static inline` helper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// For a `static` function, the functions of the file that call it: only the inputs they pass reach it, so
    /// what its own analysis finds at inputs no caller's analysis reached is shown as a hint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub static_callers: Vec<String>,
}

/// How a run that passed the run limits is said, followed by the limits in words
/// ([`crate::config::AnalysisConfig::run_limits_in_words`]).
pub const DID_NOT_RETURN: &str = "did not return within";

/// How the runs of a function's search ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunTally {
    /// Runs of either build (two per input).
    pub runs: usize,
    /// Runs that crashed or did not return within the time limit: nothing of them is compared.
    pub incomplete: usize,
    /// How the first of those ended, in words (`crashed (read MAXLOG, which no file defines)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
}

impl RunTally {
    /// Whether the first run that did not complete passed the run limits (rather than crashed).
    pub fn first_passed_the_limits(&self) -> bool {
        self.first
            .as_deref()
            .is_some_and(|f| f.starts_with(DID_NOT_RETURN))
    }

    /// Whether at least half of the runs did not complete: the builds were hardly compared, whatever else the
    /// report says.
    pub fn mostly_incomplete(&self) -> bool {
        self.runs > 0 && 2 * self.incomplete >= self.runs
    }
}

impl FunctionReport {
    /// Whether a wall-clock safety net stopped a phase ([`ReasonCode::Clock`]): another run of the same text may
    /// differ, so the report is not cached.
    pub fn stopped_by_the_clock(&self) -> bool {
        self.reason_codes.contains(&ReasonCode::Clock)
    }

    pub fn skipped(name: &str, reason: impl Into<String>) -> FunctionReport {
        FunctionReport {
            name: name.to_string(),
            status: FunctionStatus::Skipped,
            reason: reason.into(),
            reason_codes: vec![],
            through: vec![],
            time_ms: 0,
            formulae: FormulaCounts::default(),
            satisfiable: 0,
            candidates: 0,
            diff_producing: 0,
            divergences: vec![],
            plain_exceptions: vec![],
            signature: None,
            span: None,
            domain: vec![],
            solver_timeouts: 0,
            executions: 0,
            cached: false,
            learned: vec![],
            line_anchors: vec![],
            not_reproduced: 0,
            tests_special_values: false,
            verdict: None,
            runs: RunTally::default(),
            header: None,
            static_callers: vec![],
        }
    }

    /// A skipped function with the category of why.
    pub fn skipped_because(
        name: &str,
        code: ReasonCode,
        reason: impl Into<String>,
    ) -> FunctionReport {
        let mut r = FunctionReport::skipped(name, reason);
        r.reason_codes = vec![code];
        r
    }

    /// Adds what a phase had to say: its text to `reason`, its category (if it cut something short) to
    /// `reason_codes`.
    pub fn add(&mut self, note: &Note) {
        match note.code {
            Some(code) => self.note(code, &note.text),
            None if note.text.is_empty() => {}
            None if self.reason.is_empty() => self.reason = note.text.clone(),
            None => self.reason = format!("{}; {}", self.reason, note.text),
        }
    }

    /// Adds a note to `reason` and its category to `reason_codes`.
    pub fn note(&mut self, code: ReasonCode, note: &str) {
        if !self.reason_codes.contains(&code) {
            self.reason_codes.push(code);
        }
        if !note.is_empty() {
            self.reason = if self.reason.is_empty() {
                note.to_string()
            } else {
                format!("{}; {note}", self.reason)
            };
        }
    }

    /// Decides the status of a function that reached the search, from what happened to it: `Analysed` only when
    /// both builds ran on an input (or no exception is possible in it) and nothing was cut short; `Partial` when
    /// they ran but something was cut short (`reason_codes` says what); `Failed` when nothing ran.
    pub fn settle_status(&mut self, no_exception_possible: bool) {
        let ran = self.executions > 0;
        self.status = if !ran && !no_exception_possible {
            FunctionStatus::Failed
        } else if self.reason_codes.is_empty() {
            FunctionStatus::Analysed
        } else {
            FunctionStatus::Partial
        };
    }

    /// Every source line the report holds but its span's: its divergences' locations, stops and trace events, the
    /// plain build's exceptions (what [`FunctionReport::move_lines`] moves by where they lie).
    pub fn lines(&self) -> Vec<u32> {
        let mut lines = vec![];
        self.clone().visit_lines(|l| lines.push(*l));
        lines
    }

    /// Calls `visit` on every source line the report holds but its span's.
    fn visit_lines(&mut self, mut visit: impl FnMut(&mut u32)) {
        for d in &mut self.divergences {
            if let Some(l) = &mut d.location {
                visit(&mut l.line);
            }
            for end in [&mut d.end_p, &mut d.end_p_prime] {
                if let RunEnd::Stopped { line: Some(l), .. } = end {
                    visit(l);
                }
            }
            for e in d
                .trace_p
                .iter_mut()
                .chain(d.trace_p_prime.iter_mut())
                .chain(d.shipped_trace_p.iter_mut())
                .chain(d.shipped_trace_p_prime.iter_mut())
            {
                if let Some(l) = &mut e.line {
                    visit(l);
                }
            }
        }
        for e in &mut self.plain_exceptions {
            if let Some(l) = &mut e.line {
                visit(l);
            }
        }
    }

    /// Moves a cached report to where its functions lie now (`now`: where the functions of
    /// [`FunctionReport::line_anchors`] lie in the text being analysed): each position by the move of the function
    /// of the file whose lines held it (C functions do not nest; code a function inlined keeps its helper's
    /// lines, and the key holds each position from that function's first line, so all of a function's positions
    /// moved alike), its span and a position no anchor holds by `span_delta`.
    pub fn move_lines(&mut self, span_delta: i64, now: &[LineAnchor]) {
        let then = std::mem::take(&mut self.line_anchors);
        let moves: Vec<(u32, u32, i64)> = then
            .iter()
            .filter_map(|a| {
                let b = now.iter().find(|b| b.function == a.function)?;
                Some((a.first, a.last, b.first as i64 - a.first as i64))
            })
            .collect();
        self.line_anchors = now.to_vec();
        let delta_at = |l: u32| {
            moves
                .iter()
                .find(|&&(first, last, _)| first <= l && l <= last)
                .map_or(span_delta, |m| m.2)
        };
        let moved = |l: u32, delta: i64| (l as i64 + delta).max(1) as u32;
        if let Some(s) = &mut self.span {
            s.line = moved(s.line, span_delta);
            s.body_line = moved(s.body_line, span_delta);
            s.end_line = moved(s.end_line, span_delta);
        }
        self.visit_lines(|l| *l = moved(*l, delta_at(*l)));
    }
}

/// Where one function of the analysed file lay whose lines hold positions of a cached report: its name and the
/// first and last lines of its positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineAnchor {
    pub function: String,
    pub first: u32,
    pub last: u32,
}

/// What was established about a function's exceptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExceptionVerdict {
    /// The solver refuted every exception condition of both builds on the explored paths (or there are none).
    ProvedImpossible,
    /// Some divergence in the exceptions was found and confirmed.
    Found,
    /// None was found on the inputs run: sampled, not proved.
    NotFound,
}

/// The one line that ends a function's report and hover.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Inputs run on both builds, special values and ordinary magnitudes included.
    pub inputs_tried: usize,
    /// The worst accuracy loss among the result divergences: bits (the fast-math build's error beyond the plain
    /// build's where the exact result is known, else the bits the builds are apart) and its input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_loss: Option<(f64, Vec<NamedValue>)>,
    pub exceptions: ExceptionVerdict,
}

impl Verdict {
    /// `tried 292 inputs (special values included); worst accuracy loss 53 bits (a=1e-8, b=1); exceptions: not
    /// found (sampled, not proved)`.
    pub fn line(&self) -> String {
        let loss = match &self.worst_loss {
            Some((bits, input)) => {
                let at: Vec<String> = input
                    .iter()
                    .take(4)
                    .map(|v| {
                        let short = v
                            .raw
                            .map(|r| r.short())
                            .unwrap_or_else(|| v.decimal.clone());
                        format!("{}={short}", v.name)
                    })
                    .collect();
                format!("worst accuracy loss {bits:.0} bits ({})", at.join(", "))
            }
            None => "no accuracy loss found".into(),
        };
        let exceptions = match self.exceptions {
            ExceptionVerdict::ProvedImpossible => "proved impossible on the explored paths",
            ExceptionVerdict::Found => "divergences found",
            ExceptionVerdict::NotFound => "none found (sampled, not proved)",
        };
        format!(
            "tried {} inputs (special values included); {loss}; exceptions: {exceptions}",
            self.inputs_tried
        )
    }

    /// The verdict of a function's report after its search and confirmation.
    pub fn of(report: &FunctionReport, no_exception_possible: bool) -> Verdict {
        let worst_loss = report
            .divergences
            .iter()
            .filter_map(|d| {
                let r = d.result.as_ref()?;
                let bits = r
                    .reference
                    .as_ref()
                    .and_then(Reference::bits_lost)
                    .or_else(|| r.bits())?;
                (bits > 0.0).then(|| (bits, d.inputs.clone()))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let exceptions = if report.divergences.iter().any(|d| d.class.is_exception()) {
            ExceptionVerdict::Found
        } else if no_exception_possible {
            ExceptionVerdict::ProvedImpossible
        } else {
            ExceptionVerdict::NotFound
        };
        Verdict {
            inputs_tried: report.executions,
            worst_loss,
            exceptions,
        }
    }
}

/// The result for one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileReport {
    pub file: String,
    pub functions: Vec<FunctionReport>,
    /// Wall time per phase in milliseconds: compile, model, solve, build_runner, execute, total.
    pub timings_ms: BTreeMap<String, u64>,
    /// Flags used for P and P', for display.
    pub flags_p: Vec<String>,
    pub flags_p_prime: Vec<String>,
    pub ftz_p_prime: bool,
    /// Other units of the compilation database linked into both builds (what the file calls from them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linked_units: Vec<String>,
    /// Flags of the file's `compile_commands.json` entry foe did not use (`compile::flags`), as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_flags: Vec<String>,
    /// A first look ([`crate::config::AnalysisConfig::quick`]): no solver, nothing confirmed on the shipped
    /// binaries yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub first_look: bool,
}

impl FileReport {
    pub fn divergence_count(&self) -> usize {
        self.functions.iter().map(|f| f.divergences.len()).sum()
    }
}
