#!/usr/bin/env bash
# Installs what the editor integrations need: the VS Code extension's npm packages (from package-lock.json).
# Safe to run again: `npm ci` runs only when node_modules is missing or older than the lock file.
# Then `npm test` type-checks the extension (tsc) and packages it (vsce) into editors/vscode/foe.vsix.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v npm >/dev/null; then
  echo "setup-editors: npm not found; the VS Code extension cannot be built (apt-get install nodejs npm)" >&2
  exit 1
fi
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  echo "setup-editors: npm ci"
  npm ci --no-audit --no-fund
else
  echo "setup-editors: node_modules is up to date"
fi

if ! command -v nvim >/dev/null; then
  echo "setup-editors: nvim not found (apt-get install neovim); the headless Neovim test will be skipped" >&2
fi
