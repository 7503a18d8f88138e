#!/usr/bin/env bash
# Sets up a fresh machine and runs foe on the bundled turbine1 example (the FOE paper's running example).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p foe-cli -p foe-cc
set +e
target/release/foe check fixtures/bench/turbine1.c
status=$?
set -e
# exit 1 means "divergences found", which is the expected outcome here
[ "$status" -le 1 ] || exit "$status"
