//! One truth per text: an analysis that takes some functions from the cache gives what a fresh analysis of the
//! same text gives, function by function, also where the file's budget binds.

use super::*;
use std::collections::HashMap;
use std::sync::Mutex;

/// A cache in memory, as the language server keeps one.
#[derive(Default)]
struct MemoryCache(Mutex<HashMap<String, FunctionReport>>);

impl FunctionCache for MemoryCache {
    fn get(&self, key: &str) -> Option<FunctionReport> {
        self.0.lock().unwrap().get(key).cloned()
    }
    fn put(&self, key: String, report: FunctionReport) {
        self.0.lock().unwrap().insert(key, report);
    }
}

/// Five of the FOE paper's programs in one file (jetengine's slow queries left out).
fn programs() -> String {
    [
        include_str!("../../../../fixtures/bench/turbine1.c"),
        include_str!("../../../../fixtures/bench/turbine3.c"),
        include_str!("../../../../fixtures/bench/carbongas.c"),
        include_str!("../../../../fixtures/bench/kepler0.c"),
        include_str!("../../../../fixtures/bench/odometer.c"),
    ]
    .join("\n")
}

/// A file budget that binds: each function gets far less than its own budget.
fn config() -> AnalysisConfig {
    AnalysisConfig {
        file_budget_ms: 1_000,
        ..AnalysisConfig::default()
    }
}

fn analyse_text(text: &str, cache: &dyn FunctionCache) -> FileReport {
    let path = std::env::temp_dir().join(format!("foe-one-truth-{}.c", std::process::id()));
    let config = config();
    let request = AnalysisRequest {
        path: &path,
        text,
        config: &config,
        only_functions: None,
    };
    analyse(&request, cache, &NoProgress, &CancelToken::default()).expect("the file analyses")
}

/// Each function's report as JSON, without what differs between equal results (time, whether it was cached).
fn results(report: &FileReport) -> Vec<(String, serde_json::Value)> {
    report
        .functions
        .iter()
        .map(|f| {
            let mut value = serde_json::to_value(f).unwrap();
            let map = value.as_object_mut().unwrap();
            map.remove("time_ms");
            map.remove("cached");
            (f.name.clone(), value)
        })
        .collect()
}

/// The functions a wall-clock safety net stopped ([`crate::report::ReasonCode::Clock`]: the machine was loaded, another run may
/// differ, the report is not cached).
fn stopped_by_the_clock(report: &FileReport) -> Vec<&str> {
    report
        .functions
        .iter()
        .filter(|f| f.stopped_by_the_clock())
        .map(|f| f.name.as_str())
        .collect()
}

/// The two analyses give the same report for every function no wall-clock net stopped in either (on a loaded
/// machine a net may stop a phase in one run and not in the other; that is what [`crate::report::ReasonCode::Clock`] says).
fn assert_same(incremental: &FileReport, fresh: &FileReport) {
    let (a, b) = (results(incremental), results(fresh));
    assert_eq!(a.len(), b.len());
    let loaded: Vec<&str> = [
        stopped_by_the_clock(incremental),
        stopped_by_the_clock(fresh),
    ]
    .concat();
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        if loaded.contains(&name.as_str()) {
            continue;
        }
        let differing: Vec<String> = x
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, v)| y.get(k.as_str()) != Some(v))
            .map(|(k, v)| format!("{k}: {v} (incremental) vs {} (fresh)", y[k.as_str()]))
            .collect();
        assert!(differing.is_empty(), "{name}: {differing:#?}");
    }
}

#[test]
fn an_edit_of_one_function_gives_what_a_fresh_analysis_of_the_new_text_gives() {
    let before = programs();
    assert!(config().file_budget_ms / 5 < config().function_budget_ms);
    let cache = MemoryCache::default();
    let first = analyse_text(&before, &cache);
    assert!(first.functions.iter().all(|f| !f.cached));
    // An edit inside carbongas (its constant `a`), lines unchanged: the others keep their keys.
    let after = before.replacen("double a = 0.401;", "double a = 0.402;", 1);
    assert_ne!(before, after);
    let incremental = analyse_text(&after, &cache);
    let cached: Vec<&str> = incremental
        .functions
        .iter()
        .filter(|f| f.cached)
        .map(|f| f.name.as_str())
        .collect();
    // Every unchanged function comes from the cache, but one a net stopped (never cached).
    let not_cached = stopped_by_the_clock(&first);
    let expected: Vec<&str> = ["turbine1", "turbine3", "kepler0", "odometer"]
        .into_iter()
        .filter(|f| !not_cached.contains(f))
        .collect();
    assert_eq!(cached, expected);
    assert_same(&incremental, &analyse_text(&after, &NoCache));
}

#[test]
fn a_new_function_changes_every_share_of_a_bound_file_budget_and_so_every_key() {
    let before = programs();
    let cache = MemoryCache::default();
    analyse_text(&before, &cache);
    let after = format!("{before}\ndouble twice(double x) {{ return x + x; }}\n");
    let incremental = analyse_text(&after, &cache);
    assert!(incremental.functions.iter().all(|f| !f.cached));
    assert_same(&incremental, &analyse_text(&after, &NoCache));
}

#[test]
fn a_wrapper_takes_over_its_callee_s_verdicts_from_the_cache_as_from_a_run() {
    // `f` inlines `f_e`: it takes over `f_e`'s verdicts, solved in the same run or kept with `f_e`'s cached
    // report; both give what a fresh analysis gives.
    let text = "double f_e(double x, double y) {\n  double a = x * y;\n  double b = a / y;\n  return b * 3.0 + x * 0.5;\n}\n\n\
                double f(double x, double y) { return f_e(x, y) + 0.0; }\n";
    let cache = MemoryCache::default();
    let first = analyse_text(text, &cache);
    assert!(
        first.functions[1].reason.contains("taken over"),
        "{}",
        first.functions[1].reason
    );
    let edited = text.replace("+ 0.0", "+ 1.0");
    let incremental = analyse_text(&edited, &cache);
    let f_e_cacheable = !stopped_by_the_clock(&first).contains(&"f_e");
    assert_eq!(incremental.functions[0].cached, f_e_cacheable);
    assert!(!incremental.functions[1].cached);
    assert!(incremental.functions[1].reason.contains("taken over"));
    assert_same(&incremental, &analyse_text(&edited, &NoCache));
}
