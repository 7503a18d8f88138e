//! Measures the runner: time to build it for a small file, raw executions per second (both builds per
//! execution), and the neighbourhood search's throughput. Run with
//! `cargo run --release -p foe-analysis --example exec_bench`.

mod common;

use foe_analysis::exec::Runner;
use foe_analysis::search::search;
use foe_analysis::types::{ArgValue, Input};
use foe_analysis::AnalysisConfig;
use std::time::{Duration, Instant};

const SOURCE: &str = r#"
double identity(double x) { double a = 2 * x; double b = a * 0.5; return b; }
double turbine1(double v, double w, double r) {
  return 3 + 2/(r*r) - 0.125*(3-2*v)*(w*w*r*r)/(1-v) - 4.5;
}
"#;

fn main() {
    let cfg = AnalysisConfig::default();
    let (p, pp, sigs) = common::builds(&cfg, SOURCE);

    // Build time: the first build may compile the runtime into the cache; report the later ones.
    let mut runner = Runner::build(&p, &pp, &sigs, &cfg).expect("build");
    let mut times = vec![];
    for _ in 0..5 {
        let t = Instant::now();
        runner = Runner::build(&p, &pp, &sigs, &cfg).expect("build");
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "runner build: median {:.1} ms (min {:.1} ms)",
        ms(times[2]),
        ms(times[0])
    );

    for (name, n) in [("identity", 1usize), ("turbine1", 3)] {
        let inputs: Vec<Input> = (0..200_000u64)
            .map(|i| {
                Input(
                    (0..n)
                        .map(|j| ArgValue::F64(1.0 + (i * 3 + j as u64) as f64 * 1e-3))
                        .collect(),
                )
            })
            .collect();
        runner.run(name, &inputs[..1000]).expect("warm up");
        let t = Instant::now();
        let raw = runner.run_raw(name, &inputs).expect("run");
        let dt = t.elapsed();
        assert_eq!(raw.len(), inputs.len());
        println!(
            "{name}: {} executions in {:.1} ms = {:.0} executions/s (raw)",
            inputs.len(),
            ms(dt),
            inputs.len() as f64 / dt.as_secs_f64()
        );
        let t = Instant::now();
        let outs = runner.run(name, &inputs).expect("run");
        let dt = t.elapsed();
        assert_eq!(outs.len(), inputs.len());
        println!(
            "{name}: {:.0} executions/s (with report conversion)",
            inputs.len() as f64 / dt.as_secs_f64()
        );
    }

    // The search: 200 candidates of turbine1, radius 3 (343 points each).
    let sig = sigs
        .iter()
        .find(|s| s.name == "turbine1")
        .expect("turbine1");
    let candidates: Vec<Input> = (0..200)
        .map(|i| {
            Input(vec![
                ArgValue::F64(-0.3 - i as f64 * 0.01),
                ArgValue::F64(0.5 + i as f64 * 1e-3),
                ArgValue::F64(0.75),
            ])
        })
        .collect();
    let t = Instant::now();
    let out = search(&mut runner, sig, &candidates, None, &cfg, None).expect("search");
    let dt = t.elapsed();
    println!(
        "search turbine1: {} candidates, {} executions in {:.1} ms = {:.0} executions/s, {} diff-producing",
        candidates.len(),
        out.executions,
        ms(dt),
        out.executions as f64 / dt.as_secs_f64(),
        out.diff_producing
    );
    let s = runner.stats();
    println!(
        "worker starts: {}, executions: {}",
        s.worker_starts, s.executions
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
