//! One truth per text, in the editor: after an edit, an LSP session shows what a fresh server shows for the new
//! text, also where the file's budget binds (each function's share of it is fixed by the text).

mod common;

use common::lsp_session::Session;
use foe_e2e::repo_root;
use serde_json::json;

/// Five of the FOE paper's programs in one file: with a file budget of a second, every function gets a fifth of
/// it, far less than its own budget.
fn five_programs() -> String {
    ["turbine1", "turbine3", "carbongas", "kepler0", "odometer"]
        .iter()
        .map(|name| {
            std::fs::read_to_string(repo_root().join(format!("fixtures/bench/{name}.c"))).unwrap()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One truth per text: after an edit of one function, the session (the others from its cache) shows what a
/// fresh server shows for the new text, also where the file's budget binds.
#[test]
fn after_an_edit_the_session_shows_what_a_fresh_server_shows() {
    let settings = json!({ "fileBudgetMs": 1000 });
    let text = five_programs();
    let mut session = Session::start(settings.clone());
    let (uri, _) = session.open("programs.c", &text);
    session.at_rest(&uri, 1);
    // A function a wall-clock net stopped (a loaded machine) is not cached, and another run may differ.
    let stopped_at_first = stopped_by_the_clock(&mut session, &uri);
    let edited = text.replacen("double a = 0.401;", "double a = 0.402;", 1);
    assert_ne!(edited, text);
    session.client.did_change(&uri, 2, &edited).unwrap();
    session.diagnostics(&uri, 2);
    let shown = session.at_rest(&uri, 2);
    let cached: Vec<String> = session
        .stats_functions(&uri)
        .iter()
        .filter(|f| f["cached"] == true)
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<&str> = ["turbine1", "turbine3", "kepler0", "odometer"]
        .into_iter()
        .filter(|f| !stopped_at_first.iter().any(|s| s == f))
        .collect();
    assert_eq!(cached, expected);
    let mut fresh = Session::start(settings);
    let (fresh_uri, _) = fresh.open("programs.c", &edited);
    let fresh_shown = fresh.at_rest(&fresh_uri, 1);
    let stopped = [
        stopped_by_the_clock(&mut session, &uri),
        stopped_by_the_clock(&mut fresh, &fresh_uri),
    ]
    .concat();
    if stopped.is_empty() {
        assert_eq!(
            shown, fresh_shown,
            "the edited session differs from a fresh server"
        );
    } else {
        // The diagnostics of the functions no net stopped: what each function found, compared function by function.
        let found = |s: &mut Session, uri: &str| -> Vec<(String, String, u64)> {
            s.stats_functions(uri)
                .iter()
                .filter(|f| !stopped.iter().any(|n| f["name"] == n.as_str()))
                .map(|f| {
                    let name = f["name"].as_str().unwrap_or_default().to_string();
                    (
                        name,
                        f["status"].to_string(),
                        f["divergences"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        };
        assert_eq!(
            found(&mut session, &uri),
            found(&mut fresh, &fresh_uri),
            "the edited session differs from a fresh server (the clock stopped {stopped:?})"
        );
    }
    session.finish();
    fresh.finish();
}

/// The functions of the document's latest analysis a wall-clock safety net stopped.
fn stopped_by_the_clock(session: &mut Session, uri: &str) -> Vec<String> {
    session
        .stats_functions(uri)
        .iter()
        .filter(|f| f["stoppedByTheClock"] == true)
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect()
}
