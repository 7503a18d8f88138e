#!/usr/bin/env bash
# Installs everything foe needs on a fresh Debian 12 machine; safe to run again (it only installs what is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(clang-19 llvm-19-dev libclang-19-dev libclang-cpp19-dev libpolly-19-dev zlib1g-dev libzstd-dev libgmp-dev libmpfr-dev libmpc-dev neovim nodejs)
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

# Z3: PyPI's z3-solver wheel (libz3.so and the C headers), unpacked into the prefix .cargo/config.toml names.
config_env() { sed -n "s/^$1 *= *\"\(.*\)\"$/\1/p" .cargo/config.toml; }
z3_prefix=$(config_env FOE_Z3_PREFIX)
z3_sha256=$(config_env FOE_Z3_WHEEL_SHA256)
z3_version=${z3_prefix##*/z3-}
[ -n "$z3_prefix" ] && [ -n "$z3_sha256" ] && [ "$z3_version" != "$z3_prefix" ] ||
  { echo "setup: .cargo/config.toml must set FOE_Z3_PREFIX (…/z3-VERSION) and FOE_Z3_WHEEL_SHA256" >&2; exit 1; }
if [ ! -f "$z3_prefix/lib/libz3.so" ] || [ ! -f "$z3_prefix/include/z3.h" ]; then
  echo "setup: installing Z3 $z3_version (PyPI z3-solver) into $z3_prefix"
  python3 -m pip --version >/dev/null 2>&1 || {
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends python3-pip
  }
  download=$(mktemp -d)
  trap 'rm -rf "$download"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: --dest "$download" "z3-solver==$z3_version"
  wheel=$(ls "$download"/z3_solver-"$z3_version"-*.whl)
  echo "$z3_sha256  $wheel" | sha256sum -c --quiet - ||
    { echo "setup: $wheel does not have the sha256 .cargo/config.toml pins" >&2; exit 1; }
  # Unpack beside the prefix and rename, so that a half-finished unpacking is never taken for an installed Z3.
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && [ ! -w "$(dirname "$z3_prefix")" ] && sudo_cmd="sudo"
  $sudo_cmd mkdir -p "$(dirname "$z3_prefix")"
  $sudo_cmd rm -rf "$z3_prefix.partial"
  $sudo_cmd python3 - "$wheel" "$z3_prefix.partial" <<'PY'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as whl:
    for name in whl.namelist():
        for part in ("lib", "include"):
            prefix = f"z3/{part}/"
            if name.startswith(prefix) and not name.endswith("/"):
                target = os.path.join(dest, part, name[len(prefix):])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with whl.open(name) as src, open(target, "wb") as out:
                    out.write(src.read())
                os.chmod(target, 0o755 if part == "lib" else 0o644)
PY
  $sudo_cmd chmod -R a+rX "$z3_prefix.partial"
  $sudo_cmd mv "$z3_prefix.partial" "$z3_prefix"
fi

command -v cargo >/dev/null || { echo "setup: cargo (rustup) is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup: npm is required (Debian's nodejs or NodeSource)" >&2; exit 1; }

# the editor extensions' dependencies
if [ -x scripts/setup-editors.sh ]; then
  scripts/setup-editors.sh
fi

echo "setup: done"
