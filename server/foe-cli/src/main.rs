//! The `foe` binary: check, replay, table, bench and lsp subcommands.
fn main() {
    eprintln!("foe: not yet assembled");
    std::process::exit(2);
}
