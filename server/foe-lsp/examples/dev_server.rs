//! TEMPORARY development server: the real foe-lsp over a scripted stand-in engine, used only until the real
//! pipeline lands on main. It flags the first `*` of each `double` function's body as an overflow that appears
//! in the fast-math build, unless the body holds the precise pragma; compile errors come from clang.

use foe_analysis::pipeline::{AnalysisError, AnalysisRequest, CancelToken, FunctionCache, Phase, Progress};
use foe_analysis::report::*;
use foe_analysis::types::{ArgValue, ExceptionKind, SourceLoc};
use foe_lsp::engine::Engine;
use std::sync::Arc;

struct Scripted;

impl Engine for Scripted {
    fn analyse(
        &self,
        req: &AnalysisRequest<'_>,
        cache: &dyn FunctionCache,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<FileReport, AnalysisError> {
        progress.phase(Phase::Compile, "");
        let out = std::process::Command::new("clang-19")
            .args(["-fsyntax-only", "-x", "c", "-"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(req.text.as_bytes())?;
                c.wait_with_output()
            })
            .map_err(|e| AnalysisError::Environment(e.to_string()))?;
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if let Some(l) = stderr.lines().find(|l| l.contains(": error:")) {
            let mut parts = l.splitn(4, ':');
            let _ = parts.next();
            let line = parts.next().and_then(|v| v.parse().ok());
            let column = parts.next().and_then(|v| v.parse().ok());
            let message = l.replacen("<stdin>", &req.path.display().to_string(), 1);
            return Err(AnalysisError::Compile { message, line, column, stderr });
        }
        progress.phase(Phase::Solve, "");
        let lines: Vec<&str> = req.text.split('\n').collect();
        let mut functions = vec![];
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i];
            if let Some(rest) = l.strip_prefix("double ") {
                if let Some(p) = rest.find('(') {
                    let name = rest[..p].to_string();
                    let params: Vec<String> = rest[p + 1..rest.find(')').unwrap_or(rest.len())]
                        .split(',')
                        .map(|s| s.trim().rsplit(' ').next().unwrap_or("x").to_string())
                        .collect();
                    let start = i;
                    let mut end = i;
                    while end < lines.len() && !lines[end].starts_with('}') && !(end == i && lines[end].trim_end().ends_with('}')) {
                        end += 1;
                    }
                    let body = lines[start..=end.min(lines.len() - 1)].join("\n");
                    cancel.check()?;
                    let key = format!("{body}|{}|{:?}", params.join(","), req.config.flags_p_prime);
                    if req.only_function.is_some_and(|o| o != name) {
                        functions.push(FunctionReport::skipped(&name, "not selected"));
                    } else if let Some(r) = cache.get(&key) {
                        let mut r = r;
                        r.span = Some(FunctionSpan { line: start as u32 + 1, body_line: start as u32 + 1, end_line: end as u32 + 1 });
                        functions.push(r);
                    } else {
                        std::thread::sleep(std::time::Duration::from_millis(150));
                        let mut r = FunctionReport::skipped(&name, "");
                        r.status = FunctionStatus::Analysed;
                        r.span = Some(FunctionSpan { line: start as u32 + 1, body_line: start as u32 + 1, end_line: end as u32 + 1 });
                        if !body.contains("float_control(precise, on)") {
                            if let Some((ln, col)) = (start..=end).find_map(|k| lines[k].find('*').map(|c| (k, c))) {
                                let loc = SourceLoc { line: ln as u32 + 1, column: col as u32 + 1 };
                                let ev = TraceEvent { kind: ExceptionKind::Overflow, line: Some(loc.line), column: Some(loc.column), operation: "fmul".into() };
                                let inputs = params.iter().enumerate().map(|(j, n)| NamedValue::new(n, ArgValue::F64(-0.25 * (j as f64 + 1.0) * 1e150))).collect();
                                r.divergences.push(Divergence {
                                    inputs,
                                    trace_p: vec![],
                                    trace_p_prime: vec![ev],
                                    first_divergence: 0,
                                    class: DivergenceClass::Appears,
                                    result_p: "0x1p+0 (1)".into(),
                                    result_p_prime: "inf".into(),
                                    in_domain: false,
                                    location: Some(loc),
                                    summary: "fast-math build overflows here, plain build does not".into(),
                                });
                            }
                        }
                        cache.put(key, r.clone());
                        functions.push(r);
                    }
                    i = end;
                }
            }
            i += 1;
        }
        progress.phase(Phase::Done, "");
        Ok(FileReport {
            file: req.path.display().to_string(),
            functions,
            timings_ms: Default::default(),
            flags_p: req.config.flags_p.clone(),
            flags_p_prime: req.config.flags_p_prime.clone(),
            ftz_p_prime: req.config.p_prime_ftz(),
        })
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(foe_lsp::serve(Arc::new(Scripted), tokio::io::stdin(), tokio::io::stdout()));
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
}
