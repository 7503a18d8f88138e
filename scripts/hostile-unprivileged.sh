#!/usr/bin/env bash
# Runs the hostile suite (tests/tests/hostile_*.rs) again as an unprivileged user: the worker's sandbox must
# hold without root. As root the tests run as `nobody` (setpriv, util-linux); run by another user, as that user.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
tests=$(cargo test -p foe-e2e --no-run --test hostile_sandbox --test hostile_files --test hostile_lsp --test hostile_databases 2>&1 |
  sed -n 's/.*Executable .*(\(.*\))$/\1/p')
run=()
who=$(id -un)
if [ "$(id -u)" = 0 ]; then
  run=(setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/tmp)
  who=nobody
fi
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for test in $tests; do
  echo "== $test as $who"
  # The 200-analysis test already ran as root; it says nothing new about privileges. A passing binary shows its
  # test lines only; a failing one shows everything it printed (the failures' messages and panics).
  if (cd /tmp && "${run[@]}" "$root/$test" --test-threads=1 --skip two_hundred >"$log" 2>&1); then
    grep -E '^test |test result' "$log" || true
  else
    cat "$log"
    status=1
  fi
done
exit $status
