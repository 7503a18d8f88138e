#!/usr/bin/env bash
# Runs the trust tests N times in a row (default 20) on a loaded machine: hostile compilation databases, hostile
# files, the hostile LSP sessions and what they leave behind, SIGKILL mid-analysis, the worker's and the
# compiler's sandboxes, the scratch directory and the flag table. Two busy loops (`yes`) load the CPU for the
# whole run and are killed on exit. No retries: the first failure stops the run, naming the test and the
# iteration (a flaky test is a bug to find).
#
# Usage: scripts/stress-trust.sh [N]    (honours CARGO_TARGET_DIR; needs cargo-nextest)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20}
# `two_hundred_analyses_leave_nothing_behind` is left to the ordinary suite: it is a run of 200 analyses in a row
# itself, and takes over 15 minutes under this load.
filter='(binary(hostile_databases) | binary(hostile_files) | binary(hostile_lsp) | binary(hostile_sandbox)
  | (package(foe-analysis) & (test(hostile) | test(scratch::) | test(sandbox::) | test(compile::flags::))))
  & !test(two_hundred)'

# the tests run the foe binary as built: build it first, and the tests, outside the timed loop
cargo build -q -p foe-cli -p foe-cc
cargo nextest run -p foe-e2e -p foe-analysis --no-run >/dev/null 2>&1 ||
  cargo nextest run -p foe-e2e -p foe-analysis --no-run

load=()
log=$(mktemp)
stop_load() {
  for pid in "${load[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  rm -f "$log"
}
trap stop_load EXIT
trap 'exit 130' INT TERM
for _ in 1 2; do
  yes >/dev/null &
  load+=($!)
done

start=$(date +%s)
for i in $(seq 1 "$n"); do
  if ! cargo nextest run -p foe-e2e -p foe-analysis -E "$filter" --retries 0 --test-threads 2 \
    --fail-fast >"$log" 2>&1; then
    echo "iteration $i of $n FAILED after $(($(date +%s) - start)) s; failing tests:"
    grep -E '^ *(FAIL|TIMEOUT|SIGSEGV|SIGABRT|SIGKILL|LEAK-FAIL) ' "$log" | sort -u || true
    echo "--- end of the log:"
    tail -n 80 "$log"
    exit 1
  fi
  summary=$(grep -Eo '[0-9]+ tests? run: [0-9]+ passed[^,]*' "$log" | tail -1)
  echo "iteration $i of $n passed: $summary ($(($(date +%s) - start)) s so far)"
done
echo "all $n iterations passed in $(($(date +%s) - start)) s under a load of two busy loops on $(nproc) cores"
