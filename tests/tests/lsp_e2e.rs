//! End-to-end LSP sessions: the real `foe lsp` binary driven over stdio by a small JSON-RPC client
//! (`foe_lsp::client::LspClient`: Content-Length framing, serde_json), on C fixtures written to a temp dir.
//!
//! Fixture lines carry their expectation as a trailing `// foe: divergence KIND` comment (the exception kind in
//! the diagnostic's code, or `any`); the diagnostics published must be exactly on those lines.

mod common;

use common::lsp_session::{Session, ANALYSIS, REQUEST};
use foe_e2e::{foe_binary, has_a_fix, repo_root};
use foe_lsp::client::apply_text_edits;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const FLAGGED: &str = include_str!("../nvim/flagged.c");

/// The `// foe: divergence KIND` lines of a fixture, 0-based.
fn expectations(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            l.split("// foe: divergence ")
                .nth(1)
                .map(|k| (i as u64, k.trim().to_string()))
        })
        .collect()
}

/// Whether a diagnostic's cause is flush-to-zero, which no source edit reaches (the link flags set it).
fn from_flush_to_zero(d: &Value) -> bool {
    d["data"]["cause"]["id"] == "flush_to_zero"
}

fn line_of(d: &Value) -> u64 {
    d["range"]["start"]["line"].as_u64().unwrap()
}

fn check_expectations(text: &str, diags: &[Value]) {
    let expected = expectations(text);
    let mut lines: Vec<u64> = diags.iter().map(line_of).collect();
    lines.sort();
    lines.dedup();
    let want: Vec<u64> = expected.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        lines, want,
        "flagged lines (0-based) differ from the fixture's expectations: {diags:#?}"
    );
    for (line, kind) in expected {
        let here: Vec<&Value> = diags.iter().filter(|d| line_of(d) == line).collect();
        let prefix = format!("fast-math-{kind}-");
        let whole = format!("fast-math-{kind}");
        assert!(
            here.iter().any(|d| {
                let code = d["code"].as_str().unwrap();
                kind == "any" || code.starts_with(&prefix) || code == whole
            }),
            "line {line}: expected a {kind} divergence, got {here:#?}"
        );
    }
}

fn on_line<'a>(diags: &'a [Value], text: &str, needle: &str) -> &'a Value {
    let line = text.lines().position(|l| l.contains(needle)).unwrap() as u64;
    diags
        .iter()
        .find(|d| line_of(d) == line)
        .unwrap_or_else(|| panic!("no diagnostic on the line of {needle:?}: {diags:#?}"))
}

#[test]
fn diagnostics_hover_replay_and_verified_fix() {
    let mut s = Session::start(json!({}));
    let (uri, diags) = s.open("flagged.c", FLAGGED);
    check_expectations(FLAGGED, &diags);

    for d in &diags {
        assert_eq!(d["source"], "foe");
        let code = d["code"].as_str().unwrap();
        assert!(code.starts_with("fast-math-"), "{code}");
        let href = d["codeDescription"]["href"].as_str().unwrap();
        assert!(href.ends_with(&format!("diagnostics.md#{code}")), "{href}");
        // Related information, when there is some, points somewhere else than the diagnostic itself.
        for r in d["relatedInformation"].as_array().into_iter().flatten() {
            assert_eq!(r["location"]["uri"], uri.as_str());
            assert_ne!(
                r["location"]["range"], d["range"],
                "related points at itself: {d}"
            );
        }
        assert!(
            d["message"].as_str().unwrap().contains('='),
            "message names the inputs: {d}"
        );
    }
    // Ordered by rank: no warning after an information or a hint.
    let severities: Vec<u64> = diags
        .iter()
        .map(|d| d["severity"].as_u64().unwrap())
        .collect();
    assert!(
        severities.windows(2).all(|w| w[0] <= w[1]),
        "{severities:?}"
    );
    let identity = on_line(&diags, FLAGGED, "2 * x");
    assert_eq!(identity["data"]["function"], "identity");
    assert_eq!(identity["code"], "fast-math-overflow-disappears");
    // Only inputs near DBL_MAX make `2 * x` overflow: a hint by default.
    assert_eq!(identity["severity"], 4, "{identity}");
    assert!(
        !identity["message"]
            .as_str()
            .unwrap()
            .contains("declared domain"),
        "identity declares no domain"
    );
    let turbine = on_line(&diags, FLAGGED, "0.125*(3-2*v)").clone();
    assert_eq!(turbine["data"]["function"], "turbine1");
    let message = turbine["message"].as_str().unwrap();
    assert!(
        message.contains("outside the declared domain"),
        "turbine1's findings lie outside its domain: {message}"
    );
    assert!(
        turbine["severity"].as_u64().unwrap() >= 3,
        "not a warning: {turbine}"
    );

    // The status at rest.
    let status = s
        .client
        .wait_for("foe/status", REQUEST, |p| p["state"] != "analysing")
        .expect("foe/status at rest")
        .params()
        .clone();
    assert_eq!(status["state"], "idle", "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("2 functions analysed"),
        "{status}"
    );

    // Progress was reported while analysing.
    let progress: Vec<&Value> = s
        .client
        .history
        .iter()
        .filter(|r| r.method() == Some("$/progress"))
        .map(|r| r.params())
        .collect();
    assert!(
        progress.iter().any(|p| p["value"]["kind"] == "begin"),
        "no $/progress begin"
    );
    assert!(
        progress.iter().any(|p| p["value"]["kind"] == "end"),
        "no $/progress end"
    );

    // Hover on turbine1's flagged token: the best input in hex, both runs, results and flags; short, no tables.
    let hover = s.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": turbine["range"]["start"] }),
    );
    let md = hover["contents"]["value"].as_str().expect("markdown hover");
    for needle in [
        "Plain build (`",
        "Fast-math build (`",
        "-ffast-math",
        "returns",
        "0x",
        "turbine1",
        turbine["code"].as_str().unwrap(),
    ] {
        assert!(md.contains(needle), "hover lacks {needle:?}:\n{md}");
    }
    assert!(
        md.lines().count() <= 20,
        "a hover of {} lines:\n{md}",
        md.lines().count()
    );
    assert!(!md.contains('|'), "no tables in hovers:\n{md}");

    // `foe replay` with the hover's input confirms the divergence.
    let replay = md
        .lines()
        .find_map(|l| l.split("Replay: `foe replay ").nth(1))
        .expect("replay line in hover");
    let args: Vec<&str> = replay
        .trim_end_matches('`')
        .split_whitespace()
        .skip(1)
        .collect();
    let path = s.dir.path().join("flagged.c");
    let out = Command::new(foe_binary())
        .arg("replay")
        .arg(&path)
        .args(&args)
        .args(["--format", "json"])
        .output()
        .expect("run foe replay");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "foe replay {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replayed: Value = serde_json::from_str(&stdout).expect("foe replay --format json");
    // An exception divergence replays as differing traces, a result divergence as differing outputs.
    assert!(
        !replayed["first_divergence"].is_null() || !replayed["result"].is_null(),
        "foe replay does not confirm the divergence:\n{stdout}"
    );

    // The quick fix on identity: answered at once ("verifying" while the background check runs), then
    // verified; applying it clears identity's diagnostic.
    let identity = on_line(&diags, FLAGGED, "2 * x").clone();
    let deadline = std::time::Instant::now() + ANALYSIS;
    let action = loop {
        let sent = std::time::Instant::now();
        let actions = s.request(
            "textDocument/codeAction",
            json!({ "textDocument": { "uri": uri }, "range": identity["range"], "context": { "diagnostics": [identity] } }),
        );
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "a code action took {:?}",
            sent.elapsed()
        );
        let actions = actions.as_array().unwrap().clone();
        if let Some(a) = actions.iter().find(|a| a["isPreferred"] == true) {
            break a.clone();
        }
        assert!(
            actions
                .iter()
                .any(|a| a["title"].as_str().unwrap().contains("verifying")),
            "no preferred (verified) quick fix: {actions:#?}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the fix was never verified"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(action["kind"], "quickfix");
    assert!(
        action["title"].as_str().unwrap().contains("verified"),
        "{action}"
    );
    assert_eq!(action["diagnostics"][0]["code"], identity["code"]);
    let doc_edit = &action["edit"]["documentChanges"][0];
    assert_eq!(doc_edit["textDocument"]["version"], 1);
    let fixed = apply_text_edits(FLAGGED, doc_edit["edits"].as_array().unwrap());
    assert!(has_a_fix(&fixed), "{fixed}");
    s.client.did_change(&uri, 2, &fixed).unwrap();
    let after = s.diagnostics(&uri, 2);
    // What is left in identity is what only the link flags cause (flush-to-zero of a subnormal input).
    assert!(
        after
            .iter()
            .all(|d| d["data"]["function"] != "identity" || from_flush_to_zero(d)),
        "identity still flagged: {after:#?}"
    );
    on_line(&after, &fixed, "0.125*(3-2*v)");
    s.finish();
}

/// Issue 8's editor check: on turbine1, once the preferred (verified) fix is applied, every diagnostic left names
/// flush-to-zero/denormals-are-zero as its cause (only the link reaches it), or none is left. `exceptions(strict)`
/// keeps the operations in order, so what `-O2` alone reorders is gone too.
#[test]
fn after_turbine1_s_verified_fix_only_flush_to_zero_is_left() {
    let text =
        std::fs::read_to_string(foe_e2e::repo_root().join("fixtures/bench/turbine1.c")).unwrap();
    let mut s = Session::start(json!({}));
    let (uri, diags) = s.open("turbine1.c", &text);
    let flagged = diags
        .iter()
        .find(|d| {
            d["data"]["function"] == "turbine1"
                && !d["message"].as_str().unwrap().contains("flush-to-zero")
        })
        .unwrap_or_else(|| panic!("no turbine1 finding a source edit reaches: {diags:#?}"))
        .clone();
    let deadline = std::time::Instant::now() + ANALYSIS;
    let action = loop {
        let actions = s.request(
            "textDocument/codeAction",
            json!({ "textDocument": { "uri": uri }, "range": flagged["range"], "context": { "diagnostics": [flagged] } }),
        );
        if let Some(a) = actions
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["isPreferred"] == true)
        {
            break a.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the fix was never verified: {actions:#?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        action["title"].as_str().unwrap().contains("verified"),
        "{action}"
    );
    let edits = action["edit"]["documentChanges"][0]["edits"]
        .as_array()
        .unwrap();
    let fixed = apply_text_edits(&text, edits);
    s.client.did_change(&uri, 2, &fixed).unwrap();
    let after = s.diagnostics(&uri, 2);
    for d in after.iter().filter(|d| d["data"]["function"] == "turbine1") {
        let message = d["message"].as_str().unwrap();
        assert!(
            message.contains("cause: flush-to-zero"),
            "a finding left after the verified fix names another cause than flush-to-zero: {message}"
        );
    }
    s.finish();
}

/// Asks for code actions on `diagnostics` until the one editing `function` is preferred (verified), checking that
/// every answer comes at once.
fn verified_action(s: &mut Session, uri: &str, diagnostics: &[Value], function: &str) -> Value {
    verified_action_titled(s, uri, diagnostics, &format!("`{function}`"))
}

/// [`verified_action`] for the action whose title holds `names` (while the check runs, the title may name the
/// narrower fix being tried).
fn verified_action_titled(s: &mut Session, uri: &str, diagnostics: &[Value], names: &str) -> Value {
    let deadline = std::time::Instant::now() + ANALYSIS;
    loop {
        let sent = std::time::Instant::now();
        let actions = s.request(
            "textDocument/codeAction",
            json!({ "textDocument": { "uri": uri }, "range": diagnostics[0]["range"], "context": { "diagnostics": diagnostics } }),
        );
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "a code action took {:?}",
            sent.elapsed()
        );
        let actions = actions.as_array().unwrap().clone();
        let title = |a: &Value| a["title"].as_str().unwrap().to_string();
        match actions.iter().find(|a| title(a).contains(names)) {
            Some(mine) if mine["isPreferred"] == true => return mine.clone(),
            Some(mine) => assert!(
                title(mine).contains("verifying"),
                "the fix {names} is not verified: {mine:#?}"
            ),
            None => assert!(
                actions.iter().any(|a| title(a).contains("verifying")),
                "no action {names}: {actions:#?}"
            ),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the fix {names} was never verified"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_fix_of_an_inlined_helper_goes_into_the_helper_and_is_verified() {
    const HELPERS: &str = include_str!("../../fixtures/editors/helpers.c");
    let mut s = Session::start(json!({}));
    let (uri, diags) = s.open("helpers.c", HELPERS);
    check_expectations(HELPERS, &diags);
    // Flagged at the helper's line, found in the callers that -O2 inlined it into.
    let scale = on_line(&diags, HELPERS, "x * 4.0 / 4.0").clone();
    assert_ne!(scale["data"]["function"], "scale", "{scale}");

    // The overflow diagnostics `g` reported (alone, or with the other callers of the same helper) come from two
    // helpers: one action for each. (Its own line has a flush-to-zero finding, which no source edit reaches.)
    let reported_by_g = |d: &Value| {
        d["data"]["function"] == "g"
            || d["data"]["alsoIn"]
                .as_array()
                .is_some_and(|a| a.iter().any(|n| n == "g"))
    };
    let of_g: Vec<Value> = diags
        .iter()
        .filter(|d| reported_by_g(d))
        .filter(|d| d["code"].as_str().is_some_and(|c| c.contains("overflow")))
        .cloned()
        .collect();
    let actions = s.request(
        "textDocument/codeAction",
        json!({ "textDocument": { "uri": uri }, "range": of_g[0]["range"], "context": { "diagnostics": of_g } }),
    );
    let actions = actions.as_array().unwrap();
    for helper in ["`scale`", "`half`"] {
        assert_eq!(
            actions
                .iter()
                .filter(|a| a["title"].as_str().unwrap().contains(helper))
                .count(),
            1,
            "one action editing {helper}: {actions:#?}"
        );
    }
    assert!(
        actions
            .iter()
            .all(|a| !a["title"].as_str().unwrap().contains("`g`")),
        "g's own body holds no flagged operation: {actions:#?}"
    );

    // The fix on scale's diagnostic puts the narrowest pragma in scale's body (every divergence there comes from
    // re-association), and is verified on the callers.
    let action = verified_action(&mut s, &uri, std::slice::from_ref(&scale), "scale");
    let title = action["title"].as_str().unwrap();
    assert!(
        title.contains("Turn off re-association in `scale` (verified"),
        "{title}"
    );
    assert_eq!(action["diagnostics"][0]["code"], scale["code"]);
    let doc_edit = &action["edit"]["documentChanges"][0];
    let fixed = apply_text_edits(HELPERS, doc_edit["edits"].as_array().unwrap());
    let lines: Vec<&str> = fixed.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("static double scale("))
        .unwrap();
    let pragmas = foe_analysis::fix::FixScope::Reassociation.pragmas();
    let opening: Vec<&str> = lines[head + 1..head + 1 + pragmas.len()]
        .iter()
        .map(|l| l.trim())
        .collect();
    assert_eq!(
        opening, pragmas,
        "the pragma does not open scale's body:\n{fixed}"
    );
    assert_eq!(
        fixed.matches("#pragma").count(),
        pragmas.len(),
        "the callers are not edited:\n{fixed}"
    );

    // Applied, scale's line is clean; half's finding stays.
    s.client.did_change(&uri, 2, &fixed).unwrap();
    let after = s.diagnostics(&uri, 2);
    let scale_line = lines
        .iter()
        .position(|l| l.contains("x * 4.0 / 4.0"))
        .unwrap() as u64;
    assert!(
        after
            .iter()
            .all(|d| line_of(d) != scale_line || from_flush_to_zero(d)),
        "scale's line still flagged: {after:#?}"
    );
    on_line(&after, &fixed, "x * 2.0 * 0.5");
    s.finish();
}

#[test]
fn a_helper_a_header_defines_is_fixed_by_fast_math_off_in_the_whole_file() {
    // The helper is inlined at its call with the header's semantics: pragmas in the caller's body do not reach
    // its operations, so the verified fix is the pragmas at file scope, before the include.
    const CALLER: &str = include_str!("../../fixtures/editors/header_fix.c");
    const HEADER: &str = include_str!("../../fixtures/editors/header_fix.h");
    let mut s = Session::start(json!({}));
    std::fs::write(s.dir.path().join("header_fix.h"), HEADER).unwrap();
    let (uri, diags) = s.open("header_fix.c", CALLER);
    check_expectations(CALLER, &diags);
    let call = on_line(&diags, CALLER, "header_scaled(x) + 1.0").clone();
    let action = verified_action_titled(&mut s, &uri, std::slice::from_ref(&call), "in this file");
    let title = action["title"].as_str().unwrap();
    assert!(
        title.starts_with("Turn off fast-math in this file (verified"),
        "{title}"
    );
    let doc_edit = &action["edit"]["documentChanges"][0];
    let fixed = apply_text_edits(CALLER, doc_edit["edits"].as_array().unwrap());
    let pragmas = foe_analysis::fix::PRECISE_PRAGMAS.join("\n");
    assert!(
        fixed.contains(&format!("{pragmas}\n\n#include \"header_fix.h\"")),
        "the pragmas do not come before the include:\n{fixed}"
    );
    assert!(
        fixed.starts_with("// A helper a header"),
        "the leading comment stays first:\n{fixed}"
    );
    s.client.did_change(&uri, 2, &fixed).unwrap();
    let after = s.diagnostics(&uri, 2);
    assert!(
        after
            .iter()
            .all(|d| !d["code"].as_str().unwrap_or("").contains("overflow")),
        "the overflow is still flagged: {after:#?}"
    );
    s.finish();
}

#[test]
fn editing_one_function_keeps_the_others_cached() {
    let mut s = Session::start(json!({}));
    let text = foe_lsp::bench::many_functions(6);
    let (uri, _) = s.open("many.c", &text);
    let first = s.stats_functions(&uri);
    assert_eq!(first.len(), 6, "{first:#?}");
    assert!(
        first.iter().all(|f| f["cached"] == false),
        "a fresh server has nothing cached: {first:#?}"
    );

    s.client
        .did_change(&uri, 2, &foe_lsp::bench::edit_function(&text, 2))
        .unwrap();
    s.diagnostics(&uri, 2);
    let second = s.stats_functions(&uri);
    for f in &second {
        let edited = f["name"] == "f02";
        assert_eq!(
            f["cached"], !edited,
            "after editing f02 only, {} cached = {}",
            f["name"], f["cached"]
        );
    }

    // A comment line inserted at the top moves every function down: all still come from the cache, and their
    // findings move with them.
    let edited = foe_lsp::bench::edit_function(&text, 2);
    let before = s.diagnostics_now(&uri);
    let shifted = format!("// a comment\n{edited}");
    s.client.did_change(&uri, 3, &shifted).unwrap();
    let after = s.diagnostics(&uri, 3);
    let third = s.stats_functions(&uri);
    assert!(
        third.iter().all(|f| f["cached"] == true),
        "a line inserted above threw the cache away: {third:#?}"
    );
    let lines = |ds: &[Value]| ds.iter().map(line_of).collect::<Vec<_>>();
    assert_eq!(
        lines(&after),
        lines(&before).iter().map(|l| l + 1).collect::<Vec<_>>(),
        "findings did not move with their functions"
    );
    s.finish();
}

#[test]
fn a_flood_of_edits_publishes_only_the_last_version() {
    let mut s = Session::start(json!({}));
    let (uri, _) = s.open("flood.c", FLAGGED);
    let last = 40;
    for v in 2..=last {
        let text = FLAGGED.replace("2 * x", &format!("{v} * x"));
        s.client.did_change(&uri, v, &text).unwrap();
    }
    let diags = s.diagnostics(&uri, last);
    assert!(
        diags.iter().any(|d| d["data"]["function"] == "turbine1"),
        "{diags:#?}"
    );
    s.client.drain(Duration::from_millis(1500));
    let versions: Vec<i64> = s
        .client
        .history
        .iter()
        .filter(|r| r.method() == Some("textDocument/publishDiagnostics"))
        .filter(|r| !foe_lsp::client::is_first_look(r.params()))
        .filter_map(|r| r.params()["version"].as_i64())
        .collect();
    assert_eq!(
        versions,
        vec![1, last],
        "only the opened and the last version are published"
    );
    s.finish();
}

#[test]
fn a_file_that_does_not_compile_gives_one_diagnostic() {
    let mut s = Session::start(json!({}));
    let text =
        "double ok(double x) { return x * 2; }\n\ndouble broken(double x) {\n    return x * ;\n}\n";
    let (_, diags) = s.open("broken.c", text);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let d = &diags[0];
    assert_eq!(d["severity"], 1);
    assert_eq!(d["code"], "compile-error");
    assert_eq!(line_of(d), 3, "clang's first error is on line 4");
    assert!(d["message"].as_str().unwrap().contains("error"), "{d}");
    s.finish();
}

#[test]
fn a_file_whose_runs_crash_is_not_shown_as_all_clear() {
    let mut s = Session::start(json!({}));
    let text =
        std::fs::read_to_string(repo_root().join("fixtures/robustness/unknown_data.c")).unwrap();
    let (uri, diags) = s.open("unknown_data.c", &text);
    let notes: Vec<&Value> = diags
        .iter()
        .filter(|d| d["code"] == "runs-incomplete")
        .collect();
    assert_eq!(notes.len(), 2, "{diags:#?}");
    for d in &notes {
        assert_eq!(
            d["severity"], 3,
            "information, listed in the Problems panel: {d}"
        );
        assert!(d["message"].as_str().unwrap().contains("read SCALE"), "{d}");
    }
    let status = s
        .client
        .wait_for("foe/status", REQUEST, |p| {
            p["uri"] == uri && p["state"] != "analysing"
        })
        .expect("foe/status at rest")
        .params()
        .clone();
    assert_eq!(status["state"], "incomplete", "{status}");
    assert_eq!(status["incomplete"], 2, "{status}");
    s.finish();
}

#[test]
fn while_an_edit_does_not_compile_the_last_findings_stay_marked_stale() {
    let mut s = Session::start(json!({}));
    let (uri, diags) = s.open("stale.c", FLAGGED);
    assert!(!diags.is_empty());
    let broken = FLAGGED.replace("double b = a * 0.5;", "double b = a * ;");
    s.client.did_change(&uri, 2, &broken).unwrap();
    let kept = s.diagnostics(&uri, 2);
    assert_eq!(kept.len(), diags.len(), "{kept:#?}");
    for (k, d) in kept.iter().zip(&diags) {
        assert_eq!(k["code"], d["code"]);
        assert_eq!(k["range"], d["range"]);
        let message = k["message"].as_str().unwrap();
        assert!(
            message.ends_with("(stale: the file does not compile)"),
            "{message}"
        );
    }
    assert!(
        kept.iter().all(|d| d["code"] != "compile-error"),
        "clangd reports the error"
    );
    s.client.did_change(&uri, 3, FLAGGED).unwrap();
    let fresh = s.diagnostics(&uri, 3);
    assert!(fresh
        .iter()
        .all(|d| !d["message"].as_str().unwrap().contains("stale")));
    s.finish();
}

/// `file:line[:col]: severity: message [code]` lines of `foe check`'s text output, with the `cause:` line
/// that may follow, as (line, code, message, cause).
fn text_findings(text: &str) -> Vec<(u64, String, String, Value)> {
    let mut out: Vec<(u64, String, String, Value)> = vec![];
    for l in text.lines() {
        if let Some(cause) = l.trim_start().strip_prefix("cause: ") {
            if let Some(last) = out.last_mut() {
                last.3 = json!(cause);
            }
            continue;
        }
        if l.starts_with(' ') {
            continue;
        }
        let Some((head, rest)) = l.split_once(": ") else {
            continue;
        };
        let Some(line) = head.split(':').nth(1).and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Some((_, rest)) = rest.split_once(": ") else {
            continue;
        };
        let Some((message, code)) = rest.rsplit_once(" [") else {
            continue;
        };
        out.push((
            line,
            code.trim_end_matches(']').to_string(),
            message.to_string(),
            Value::Null,
        ));
    }
    out
}

#[test]
fn one_fixture_renders_the_same_findings_in_text_json_sarif_and_the_editor() {
    // A function whose finding the solver finds the same way every time, and one foe skips.
    let text = "double identity(double x) {\n    double a = 2 * x;\n    return a * 0.5;\n}\n\n\
                double uses_asm(double x) { __asm__ volatile(\"\" ::: \"memory\"); return x * 2.0; }\n";
    let mut s = Session::start(json!({}));
    let (_, diags) = s.open("same.c", text);
    let path = s.dir.path().join("same.c");
    let run = |format: &str| {
        let out = Command::new(foe_binary())
            .args(["check", "--format", format])
            .arg(&path)
            .output()
            .expect("run foe check");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut editor: Vec<(u64, String, String, Value)> = diags
        .iter()
        .map(|d| {
            let cause = d["data"]["cause"].clone();
            (
                line_of(d) + 1,
                d["code"].as_str().unwrap().to_string(),
                d["message"].as_str().unwrap().to_string(),
                cause,
            )
        })
        .collect();
    let json: Value = serde_json::from_str(&run("json")).expect("json");
    let mut from_json: Vec<(u64, String, String, Value)> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["line"].as_u64().unwrap(),
                f["code"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
                f["cause"].clone(),
            )
        })
        .collect();
    let sarif: Value = serde_json::from_str(&run("sarif")).expect("sarif");
    let mut from_sarif: Vec<(u64, String, String, Value)> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["locations"][0]["physicalLocation"]["region"]["startLine"]
                    .as_u64()
                    .unwrap(),
                r["ruleId"].as_str().unwrap().to_string(),
                r["message"]["text"].as_str().unwrap().to_string(),
                r["properties"]["cause"].clone(),
            )
        })
        .collect();
    for r in sarif["runs"][0]["results"].as_array().unwrap() {
        assert!(
            r["partialFingerprints"]["foeFinding/v1"]
                .as_str()
                .is_some_and(|f| f.len() == 16),
            "{r}"
        );
    }
    let mut from_text = text_findings(&run("text"));
    for v in [&mut editor, &mut from_json, &mut from_sarif, &mut from_text] {
        // The text names a cause in words only; the others carry `{id, text}`: compare the words.
        for f in v.iter_mut() {
            if let Some(text) = f.3.get("text").cloned() {
                f.3 = text;
            }
        }
        v.sort_by(|a, b| (a.0, &a.1, &a.2).cmp(&(b.0, &b.1, &b.2)));
    }
    let codes: Vec<&str> = editor.iter().map(|f| f.1.as_str()).collect();
    assert_eq!(
        codes,
        ["fast-math-overflow-disappears", "function-skipped"],
        "{editor:#?}"
    );
    assert_eq!(from_json, editor, "JSON and the editor differ");
    assert_eq!(from_sarif, editor, "SARIF and the editor differ");
    assert_eq!(from_text, editor, "text and the editor differ");
    s.finish();
}

#[test]
fn unknown_requests_are_answered_with_errors_and_the_server_keeps_working() {
    let mut s = Session::start(json!({}));
    let err = s
        .client
        .request("foe/noSuchMethod", Some(json!({})), REQUEST)
        .unwrap_err();
    assert!(
        err.to_string().contains("-32601"),
        "MethodNotFound expected: {err}"
    );
    let err = s
        .client
        .request(
            "textDocument/hover",
            Some(json!({ "nonsense": true })),
            REQUEST,
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("-32602"),
        "InvalidParams expected: {err}"
    );
    // Garbage text and a hover on a document nobody opened do not hurt.
    let (uri, _) = s.open("garbage.c", "\u{0}\u{7f} ☃ double double ((( \n");
    let hover = s.request("textDocument/hover", json!({ "textDocument": { "uri": "file:///nowhere.c" }, "position": { "line": 0, "character": 0 } }));
    assert!(hover.is_null());
    s.client
        .did_change(&uri, 2, "double f(double x) { return x; }\n")
        .unwrap();
    let diags = s.diagnostics(&uri, 2);
    assert!(diags.is_empty(), "{diags:#?}");
    s.finish();
}

/// The figures of docs/editors.md ("What a session shows"): per file, with the default settings, the
/// diagnostics per function by severity, the longest hover, the first code action's latency on the warm file,
/// the findings kept while an edit does not compile, and the functions reused after a line is inserted above.
/// Run: `cargo test -p foe-e2e --test lsp_e2e -- --ignored editor_figures --nocapture`.
#[test]
#[ignore = "measurement; prints the figures of docs/editors.md"]
fn editor_figures() {
    let root = foe_e2e::repo_root();
    let mut rows = vec![];
    for rel in [
        "fixtures/bench/turbine1.c",
        "fixtures/editors/physics.c",
        "fixtures/editors/statistics.c",
    ] {
        let text = std::fs::read_to_string(root.join(rel)).unwrap();
        let name = rel.rsplit('/').next().unwrap();
        let mut s = Session::start(json!({}));
        let opened = std::time::Instant::now();
        let (uri, diags) = s.open(name, &text);
        let analysis_ms = opened.elapsed().as_millis();
        let functions = s.stats_functions(&uri);
        let analysed = functions
            .iter()
            .filter(|f| f["status"] == "analysed")
            .count();
        let by = |sev: u64| diags.iter().filter(|d| d["severity"] == sev).count();
        // The longest hover over every diagnostic.
        let mut hover_lines = 0;
        let mut hover_chars = 0;
        for d in &diags {
            let h = s.request(
                "textDocument/hover",
                json!({ "textDocument": { "uri": uri }, "position": d["range"]["start"] }),
            );
            let md = h["contents"]["value"].as_str().unwrap_or("");
            hover_lines = hover_lines.max(md.lines().count());
            hover_chars = hover_chars.max(md.chars().count());
        }
        // The first code action on the first divergence.
        let first_action_ms = diags
            .iter()
            .find(|d| d["code"].as_str().unwrap_or("").starts_with("fast-math-"))
            .map(|d| {
                let sent = std::time::Instant::now();
                s.request(
                    "textDocument/codeAction",
                    json!({ "textDocument": { "uri": uri }, "range": d["range"], "context": { "diagnostics": [d] } }),
                );
                sent.elapsed().as_millis()
            });
        // An edit that does not compile: what stays.
        let broken = format!("{text}\nint broken( {{\n");
        s.client.did_change(&uri, 2, &broken).unwrap();
        let during = s.diagnostics(&uri, 2);
        let stale = during
            .iter()
            .filter(|d| d["message"].as_str().unwrap_or("").contains("(stale"))
            .count();
        // A comment line inserted at the top of the original text.
        let stats_before = s.client.request("foe/stats", None, REQUEST).unwrap();
        let hits_before = stats_before["cache"]["hits"].as_u64().unwrap_or(0);
        let inserted = std::time::Instant::now();
        s.client
            .did_change(&uri, 3, &format!("// a comment\n{text}"))
            .unwrap();
        let shifted = s.diagnostics(&uri, 3);
        let reanalysis_ms = inserted.elapsed().as_millis();
        let after = s.stats_functions(&uri);
        let cached = after.iter().filter(|f| f["cached"] == true).count();
        let stats_after = s.client.request("foe/stats", None, REQUEST).unwrap();
        let hits = stats_after["cache"]["hits"].as_u64().unwrap_or(0) - hits_before;
        rows.push(format!(
            "| {name} | {analysed}/{} | {} | {} W, {} I, {} H | {:.1} | {hover_lines} lines, {hover_chars} chars | {} | {stale}/{} | {cached}/{} ({hits} hits), {reanalysis_ms} ms, {} diagnostics | {analysis_ms} |",
            functions.len(),
            diags.len(),
            by(2),
            by(3),
            by(4),
            diags.len() as f64 / analysed.max(1) as f64,
            first_action_ms.map_or("-".to_string(), |ms| format!("{ms} ms")),
            diags.len(),
            after.len(),
            shifted.len(),
        ));
        s.finish();
    }
    println!("| file | functions analysed | diagnostics | by severity | per analysed function | longest hover | first code action | stale kept during a compile error | from cache after a line inserted above | first analysis (ms) |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
}
