#!/usr/bin/env bash
# End-to-end test of the VS Code extension in a real VS Code (code-server in headless Chromium): builds the
# .vsix (`npm test`), installs it into a private code-server, opens a copy of fixtures/editors/physics.c (a physics step
# with structs and pointers; statistics.c beside it) and drives the browser with editors/vscode/e2e/run.mjs, which fails unless foe's diagnostics appear in time.
#
# Usage: scripts/vscode-e2e.sh [--docs]
#   --docs   also copy the screenshots of the hover, the Problems panel and the quick-fix menu to
#            docs/images/vscode-{hover,problems,quickfix}.png (all screenshots stay in the run directory)
# Environment (all optional):
#   FOE_E2E_CACHE     where code-server, playwright-core and the run directory live
#                     (default: ../.cache/foe-vscode beside the repository; never inside it)
#   FOE_BIN           the foe binary (default: target-main/release/foe, else target/release/foe; not built here)
#   FOE_E2E_TIMEOUT   seconds to wait for the first foe diagnostic (default 120)
#   FOE_E2E_FILE      the file to open: physics.c (default) or statistics.c; with FOE_E2E_WORKSPACE, a path in it
#   FOE_E2E_WORKSPACE a project to open instead of the fixtures (e.g. an instantiated ../shared/realworld corpus,
#                     its compile_commands.json at the top): a tour for docs/editors.md, where only a file with no
#                     foe diagnostic fails; with --docs its screenshots go to docs/images/vscode-NAME-*.png
#   FOE_E2E_SKIP_BUILD=1  reuse editors/vscode/foe.vsix instead of running `npm test`
# Idempotent: Chromium (apt), code-server and playwright-core (npm, into the cache) are installed only when missing.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CODE_SERVER_VERSION=4.99.4
PLAYWRIGHT_VERSION=1.65.1
CACHE="${FOE_E2E_CACHE:-$(dirname "$ROOT")/.cache/foe-vscode}"
TIMEOUT="${FOE_E2E_TIMEOUT:-120}"
DOCS=0
for arg in "$@"; do
  case "$arg" in
    --docs) DOCS=1 ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "vscode-e2e: unknown argument $arg" >&2; exit 2 ;;
  esac
done

log() { echo "vscode-e2e: $*" >&2; }
started=$(date +%s)

mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"
case "$CACHE/" in
  "$ROOT"/*) log "FOE_E2E_CACHE ($CACHE) must be outside the repository"; exit 2 ;;
esac

# --- foe binary (never built here) -------------------------------------------------------------------------
if [ -z "${FOE_BIN:-}" ]; then
  for candidate in "$ROOT/target-main/release/foe" "$ROOT/target/release/foe"; do
    if [ -x "$candidate" ]; then FOE_BIN="$candidate"; break; fi
  done
fi
if [ -z "${FOE_BIN:-}" ] || [ ! -x "$FOE_BIN" ]; then
  log "no foe binary (looked for target-main/release/foe and target/release/foe; set FOE_BIN); build it first"
  exit 1
fi
log "foe binary: $FOE_BIN"

# --- system packages ----------------------------------------------------------------------------------------
apt_updated=0
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
apt_install() {
  if [ "$apt_updated" = 0 ]; then
    $sudo_cmd apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >/dev/null
}
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  log "installing chromium (apt)"
  apt_install chromium
fi

# --- code-server (npm, into the cache) ------------------------------------------------------------------------
# Installed with --ignore-scripts, then its postinstall is redone by hand: the stock one fails offline because
# @vscode/ripgrep downloads rg from GitHub (we give it Debian's rg instead) and node-pty's postinstall runs
# `npx node-gyp`, which needs npm's "yes" when the user config says `yes = false`.
CS_DIR="$CACHE/code-server-$CODE_SERVER_VERSION"
CODE_SERVER="$CS_DIR/node_modules/.bin/code-server"
if [ ! -f "$CS_DIR/.foe-installed" ]; then
  log "installing code-server@$CODE_SERVER_VERSION into $CS_DIR"
  missing=()
  command -v rg >/dev/null || missing+=(ripgrep)
  command -v make >/dev/null || missing+=(make)
  command -v g++ >/dev/null || missing+=(g++)
  command -v python3 >/dev/null || missing+=(python3)
  command -v pkg-config >/dev/null || missing+=(pkg-config)
  [ -f /usr/include/krb5.h ] || [ -f /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)
  [ -d /usr/include/X11 ] || missing+=(libx11-dev)
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing build dependencies (apt): ${missing[*]}"
    apt_install "${missing[@]}"
  fi
  rm -rf "$CS_DIR"
  mkdir -p "$CS_DIR"
  (
    cd "$CS_DIR"
    echo '{"private": true}' >package.json
    export npm_config_yes=true npm_config_audit=false npm_config_fund=false
    npm install --ignore-scripts --save-exact "code-server@$CODE_SERVER_VERSION" >install.log 2>&1
    npm rebuild argon2 >>install.log 2>&1
    cd node_modules/code-server/lib/vscode
    npm install --omit=dev --ignore-scripts >>"$CS_DIR/install.log" 2>&1
    mkdir -p node_modules/@vscode/ripgrep/bin
    ln -sfn "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
    npm rebuild >>"$CS_DIR/install.log" 2>&1
    ln -sfn node_modules node_modules.asar
    ln -sfn code-linux.sh bin/remote-cli/code-server
    ln -sfn browser-linux.sh bin/helpers/browser.sh
    cd extensions
    npm install --omit=dev >>"$CS_DIR/install.log" 2>&1
  ) || { log "code-server install failed; see $CS_DIR/install.log"; tail -30 "$CS_DIR/install.log" >&2; exit 1; }
  touch "$CS_DIR/.foe-installed"
fi

# --- playwright-core (npm, into the cache; drives the system Chromium, downloads no browser) -------------------
PW_DIR="$CACHE/playwright-core-$PLAYWRIGHT_VERSION"
if [ ! -f "$PW_DIR/node_modules/playwright-core/package.json" ]; then
  log "installing playwright-core@$PLAYWRIGHT_VERSION into $PW_DIR"
  rm -rf "$PW_DIR"
  mkdir -p "$PW_DIR"
  (cd "$PW_DIR" && echo '{"private": true}' >package.json &&
    npm install --ignore-scripts --save-exact --no-audit --no-fund "playwright-core@$PLAYWRIGHT_VERSION" >install.log 2>&1) ||
    { log "playwright-core install failed; see $PW_DIR/install.log"; exit 1; }
fi

# --- the .vsix ----------------------------------------------------------------------------------------------
VSIX="$ROOT/editors/vscode/foe.vsix"
if [ "${FOE_E2E_SKIP_BUILD:-0}" != 1 ]; then
  log "npm test (tsc + vsce package)"
  if [ ! -d "$ROOT/node_modules/vscode-languageclient" ]; then
    "$ROOT/scripts/setup-editors.sh" >&2
  fi
  (cd "$ROOT" && npm test >"$CACHE/npm-test.log" 2>&1) || { tail -30 "$CACHE/npm-test.log" >&2; exit 1; }
fi
[ -f "$VSIX" ] || { log "missing $VSIX"; exit 1; }

# --- a fresh run directory: profile, extensions, workspace -----------------------------------------------------
RUN="$CACHE/run"
rm -rf "$RUN"
mkdir -p "$RUN/user-data/User" "$RUN/extensions" "$RUN/screenshots"
WORKSPACE="$RUN/workspace"
if [ -n "${FOE_E2E_WORKSPACE:-}" ]; then
  WORKSPACE="$(cd "$FOE_E2E_WORKSPACE" && pwd)"
else
  mkdir -p "$WORKSPACE"
  cp "$ROOT/fixtures/editors/physics.c" "$ROOT/fixtures/editors/statistics.c" "$WORKSPACE/"
fi
cat >"$RUN/user-data/User/settings.json" <<EOF
{
  "foe.path": "$FOE_BIN",
  "security.workspace.trust.enabled": false,
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.enableExperiments": false,
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "extensions.ignoreRecommendations": true,
  "chat.commandCenter.enabled": false,
  "editor.minimap.enabled": false,
  "editor.hover.delay": 300,
  "editor.hover.above": false,
  "window.commandCenter": false,
  "files.autoSave": "off"
}
EOF
printf 'bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n' >"$RUN/config.yaml"
CS_ARGS=(--config "$RUN/config.yaml" --user-data-dir "$RUN/user-data" --extensions-dir "$RUN/extensions"
  --disable-telemetry --disable-update-check --disable-workspace-trust --disable-getting-started-override)

log "installing the extension into code-server"
"$CODE_SERVER" "${CS_ARGS[@]}" --install-extension "$VSIX" >"$RUN/install-extension.log" 2>&1 ||
  { cat "$RUN/install-extension.log" >&2; exit 1; }

PORT="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"

CS_PID=""
cleanup() {
  # code-server was started by setsid: its process group holds it and its children (extension host, foe lsp).
  if [ -n "$CS_PID" ] && kill -0 -- "-$CS_PID" 2>/dev/null; then
    kill -TERM -- "-$CS_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 -- "-$CS_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$CS_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "starting code-server on 127.0.0.1:$PORT"
setsid "$CODE_SERVER" "${CS_ARGS[@]}" --bind-addr "127.0.0.1:$PORT" "$WORKSPACE" >"$RUN/code-server.log" 2>&1 &
CS_PID=$!
healthy() { node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "http://127.0.0.1:$PORT/healthz"; }
for _ in $(seq 120); do
  if healthy; then break; fi
  kill -0 "$CS_PID" 2>/dev/null || { log "code-server exited"; cat "$RUN/code-server.log" >&2; exit 1; }
  sleep 0.5
done
healthy || { log "code-server did not answer"; exit 1; }

status=0
E2E_URL="http://127.0.0.1:$PORT/?folder=$WORKSPACE" \
  E2E_FILE="${FOE_E2E_FILE:-physics.c}" \
  E2E_OUT="$RUN/screenshots" \
  E2E_TIMEOUT="$TIMEOUT" \
  E2E_CHROMIUM="$CHROMIUM" \
  E2E_PLAYWRIGHT="$PW_DIR/node_modules/playwright-core" \
  E2E_PROFILE="$RUN/chromium-profile" \
  E2E_TOUR="$([ -n "${FOE_E2E_WORKSPACE:-}" ] && echo 1 || echo 0)" \
  node "$ROOT/editors/vscode/e2e/run.mjs" || status=$?

if [ "$status" != 0 ]; then
  log "FAILED (exit $status); extension host and foe logs:"
  find "$RUN/user-data/logs" -type f \( -name remoteexthost.log -o -path '*output_logging*foe*' \) 2>/dev/null |
    while read -r f; do echo "--- $f" >&2; tail -40 "$f" >&2; done
  echo "--- $RUN/code-server.log" >&2
  tail -40 "$RUN/code-server.log" >&2
  exit "$status"
fi

if [ "$DOCS" = 1 ]; then
  mkdir -p "$ROOT/docs/images"
  if [ -n "${FOE_E2E_WORKSPACE:-}" ]; then
    base="$(basename "${FOE_E2E_FILE:-physics.c}" .c)"
    for name in hover problems quickfix; do
      [ -f "$RUN/screenshots/vscode-$name.png" ] && cp "$RUN/screenshots/vscode-$name.png" "$ROOT/docs/images/vscode-$base-$name.png"
    done
    log "copied vscode-$base-*.png to docs/images/"
  else
    for name in hover problems quickfix; do cp "$RUN/screenshots/vscode-$name.png" "$ROOT/docs/images/"; done
    log "copied vscode-{hover,problems,quickfix}.png to docs/images/"
  fi
fi
log "passed in $(($(date +%s) - started)) s; screenshots in $RUN/screenshots"
