//! What the examples share: compiling a C source twice (P and P') and building the runner for its functions.

use foe_analysis::exec::Runner;
use foe_analysis::types::FunctionSignature;
use foe_analysis::AnalysisConfig;
use std::time::Duration;

fn compile(cfg: &AnalysisConfig, dir: &std::path::Path, flags: &[&str]) -> String {
    let mut cmd = foe_analysis::process::command(&cfg.clang, dir);
    cmd.args(["-S", "-emit-llvm", "-g", "-o", "-", "example.c"])
        .args(flags);
    let out =
        foe_analysis::process::run_tool(cmd, None, Duration::from_secs(60)).expect("run clang");
    assert_eq!(out.status, Some(0), "{}", out.stderr);
    String::from_utf8(out.stdout).expect("utf-8")
}

/// P's and P''s IR of `source` and the signatures of its functions.
pub fn builds(cfg: &AnalysisConfig, source: &str) -> (String, String, Vec<FunctionSignature>) {
    let dir = foe_analysis::scratch::tempdir("foe-bench").expect("temp dir");
    std::fs::write(dir.path().join("example.c"), source).expect("write");
    let p = compile(
        cfg,
        dir.path(),
        &["-O0", "-Xclang", "-disable-O0-optnone", "-ffp-contract=off"],
    );
    let pp = compile(cfg, dir.path(), &["-O2", "-ffast-math"]);
    let ctx = inkwell::context::Context::create();
    let module = foe_analysis::ir::parse_module(&ctx, &p, "P").expect("parse");
    let sigs: Vec<FunctionSignature> = foe_analysis::ir::describe_functions(&module, &p)
        .into_iter()
        .filter_map(|r| r.ok())
        .map(|i| i.signature)
        .collect();
    (p, pp, sigs)
}

/// The runner of `source`'s functions, with their signatures.
#[allow(dead_code)]
pub fn runner(cfg: &AnalysisConfig, source: &str) -> (Runner, Vec<FunctionSignature>) {
    let (p, pp, sigs) = builds(cfg, source);
    let runner = Runner::build(&p, &pp, &sigs, cfg).expect("build");
    (runner, sigs)
}
