#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite: Rust unit and end-to-end tests (CLI on fixtures,
# LSP over stdio, headless Neovim) and the VS Code extension's type-check and packaging.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build -p foe-cli
cargo test --workspace --no-fail-fast -- --test-threads=2
scripts/hostile-unprivileged.sh
if [ -f package.json ] && grep -q '"test"' package.json; then
  npm test
fi
