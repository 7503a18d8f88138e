#!/usr/bin/env bash
# Installs everything foe needs on a fresh Debian 12 machine; safe to run again (it only installs what is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(clang-19 llvm-19-dev libpolly-19-dev libz3-dev zlib1g-dev libzstd-dev neovim nodejs)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

command -v cargo >/dev/null || { echo "setup: cargo (rustup) is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup: npm is required (Debian's nodejs or NodeSource)" >&2; exit 1; }

# the editor extensions' dependencies
if [ -x scripts/setup-editors.sh ]; then
  scripts/setup-editors.sh
fi

echo "setup: done"
