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
    assert_eq!(cached, ["turbine1", "turbine3", "kepler0", "odometer"]);
    let mut fresh = Session::start(settings);
    let (fresh_uri, _) = fresh.open("programs.c", &edited);
    let fresh_shown = fresh.at_rest(&fresh_uri, 1);
    assert_eq!(
        shown, fresh_shown,
        "the edited session differs from a fresh server"
    );
    session.finish();
    fresh.finish();
}
