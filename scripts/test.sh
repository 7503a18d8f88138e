#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite: rustfmt and clippy, Rust unit and end-to-end tests (CLI on fixtures,
# LSP over stdio, headless Neovim, hostile files), the hostile suite again as an unprivileged user, the
# VS Code extension's type-check and packaging, and the extension in a real VS Code.
#
# With cargo-nextest (on this project's machines) every test runs in a process of its own, once: a test that
# fails fails the suite (a flaky test is a bug to find, not to retry).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Style first: rustfmt's layout and clippy's lints, warnings as errors (said, not failed, where the toolchain
# came without them: rustup's minimal profile).
if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all -- --check; else echo "test: no rustfmt, layout not checked"; fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets -- -D warnings
else
  echo "test: no clippy, lints not checked"
fi
cargo build -p foe-cli -p foe-cc
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast --test-threads 2
else
  cargo test --workspace --no-fail-fast -- --test-threads=2
fi
scripts/hostile-unprivileged.sh
if [ -f package.json ] && grep -q '"test"' package.json; then
  npm test
  # The extension in a real VS Code (code-server in Debian's headless Chromium, both installed by the script when
  # missing) against the debug build: diagnostics, status, hover, quick fix and trace.
  FOE_E2E_SKIP_BUILD=1 FOE_BIN="$PWD/target/debug/foe" scripts/vscode-e2e.sh
fi
