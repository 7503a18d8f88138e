//! The result model: what an analysis of one file found, as plain serialisable values.
//!
//! This is the engine's public output; the CLI prints it (text, JSON, SARIF) and the language server
//! converts it to diagnostics. It holds no LLVM or Z3 handle.

use crate::types::{ArgValue, ExceptionKind, FunctionSignature, SourceLoc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One value of an input tuple, named after its parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedValue {
    pub name: String,
    /// C99 hexadecimal float (exact), or a decimal integer.
    pub value: String,
    /// Decimal with 17 significant digits (9 for float).
    pub decimal: String,
    #[serde(skip)]
    pub raw: Option<ArgValue>,
}

impl NamedValue {
    pub fn new(name: &str, v: ArgValue) -> NamedValue {
        NamedValue {
            name: name.to_string(),
            value: v.hex(),
            decimal: v.decimal(),
            raw: Some(v),
        }
    }
}

/// One exception raised by one build, where the debug info places it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TraceEvent {
    pub kind: ExceptionKind,
    /// 1-based; `None` when the instruction has no debug location.
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// The LLVM opcode or callee that raised it (`fmul`, `call exp`).
    pub operation: String,
}

impl TraceEvent {
    pub fn loc(&self) -> Option<SourceLoc> {
        Some(SourceLoc {
            line: self.line?,
            column: self.column.unwrap_or(0),
        })
    }
}

/// How two exception traces differ, best-ranked first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceClass {
    /// An exception kind occurs in one build and never in the other.
    Appears,
    /// The same kinds occur, but a different number of times.
    Count,
    /// The same exceptions occur, only in another order.
    Order,
}

/// How one execution of one build ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunEnd {
    Returned { value: Option<String> },
    Crashed { signal: i32, name: String },
    TimedOut { limit_ms: u64 },
}

/// An input on which P and P' raise different exception traces, confirmed by running both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    pub inputs: Vec<NamedValue>,
    pub trace_p: Vec<TraceEvent>,
    pub trace_p_prime: Vec<TraceEvent>,
    /// Index of the first position where the kind sequences differ.
    pub first_divergence: usize,
    pub class: DivergenceClass,
    /// The return value of P, as `%a` hex and decimal (`0x1p+0 (1)`), or how the run ended.
    pub result_p: String,
    pub result_p_prime: String,
    /// Whether the input satisfies the function's declared input domain (`// foe: assume`).
    pub in_domain: bool,
    /// Where the editor should flag it: the first diverging event of P', else of P.
    pub location: Option<SourceLoc>,
    /// One-line summary (`fast-math build overflows here, plain build does not`).
    pub summary: String,
}

/// An exception the plain build itself raises on some input (the Ariadne view).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlainException {
    pub kind: ExceptionKind,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub inputs: Vec<NamedValue>,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FunctionStatus {
    Analysed,
    Skipped,
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
}

impl FunctionReport {
    pub fn skipped(name: &str, reason: impl Into<String>) -> FunctionReport {
        FunctionReport {
            name: name.to_string(),
            status: FunctionStatus::Skipped,
            reason: reason.into(),
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
        }
    }

    /// Moves every source line of the report by `delta` (a cached result reused after lines were inserted
    /// or removed above the function).
    pub fn shift_lines(&mut self, delta: i64) {
        if delta == 0 {
            return;
        }
        let shift = |l: &mut u32| *l = (*l as i64 + delta).max(1) as u32;
        let shift_opt = |l: &mut Option<u32>| {
            if let Some(l) = l {
                *l = (*l as i64 + delta).max(1) as u32;
            }
        };
        if let Some(s) = &mut self.span {
            shift(&mut s.line);
            shift(&mut s.body_line);
            shift(&mut s.end_line);
        }
        for d in &mut self.divergences {
            if let Some(l) = &mut d.location {
                shift(&mut l.line);
            }
            for e in d.trace_p.iter_mut().chain(d.trace_p_prime.iter_mut()) {
                shift_opt(&mut e.line);
            }
        }
        for e in &mut self.plain_exceptions {
            shift_opt(&mut e.line);
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
}

impl FileReport {
    pub fn divergence_count(&self) -> usize {
        self.functions.iter().map(|f| f.divergences.len()).sum()
    }
}
