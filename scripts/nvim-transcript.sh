#!/usr/bin/env bash
# Prints a transcript of a headless Neovim session on one file of a compilation database (docs/editors.md):
# the foe plugin (editors/nvim) and the real `foe lsp`, see scripts/nvim-transcript.lua for what it records.
#
# Usage: scripts/nvim-transcript.sh DIR FILE [--foe BIN]
#   DIR   the directory holding compile_commands.json (e.g. an instantiated ../shared/realworld corpus)
#   FILE  the file, relative to DIR (gsl/specfunc/gamma.c)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 2 ] || { sed -n '5,7p' "$0"; exit 2; }
DIR="$(cd "$1" && pwd)"
FILE="$2"
FOE="$ROOT/target/release/foe"
if [ "${3:-}" = "--foe" ]; then FOE="$(realpath "$4")"; fi
[ -x "$FOE" ] || { echo "nvim-transcript: no foe binary at $FOE (cargo build --release -p foe-cli -p foe-cc)" >&2; exit 1; }
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
cd "$DIR"
FOE_NVIM_PLUGIN="$ROOT/editors/nvim" FOE_BIN="$FOE" FOE_NVIM_FILE="$FILE" FOE_NVIM_OUT="$OUT" \
  timeout 600 nvim --headless --clean -u "$ROOT/scripts/nvim-transcript.lua" >/dev/null 2>&1 || true
cat "$OUT"
