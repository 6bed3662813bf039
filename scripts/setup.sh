#!/usr/bin/env bash
# Installs what kernopt needs on Debian/Ubuntu and creates .venv with kernopt in it.
# Usage: scripts/setup.sh [--dev]   (--dev adds the test tools and the torch/triton extra the GPU-target
# tests need; without an NVIDIA GPU that is the pinned CPU build of torch, and Triton runs in its interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(gcc g++ clang libomp-dev openmpi-bin libopenmpi-dev binutils python3 python3-venv python3-pip)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup: error: need root or sudo to install: ${missing[*]}" >&2; exit 1; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: error: kernopt needs Python >= 3.11 ($PY is $("$PY" --version 2>&1))" >&2; exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extra=""
[ "${1:-}" = "--dev" ] && extra="[dev,gpu]"
if [ -n "$extra" ] && ! command -v nvidia-smi >/dev/null; then
  echo "setup: no NVIDIA GPU here: GPU targets are verified with the Triton interpreter / compiled only, never timed"
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extra}"
echo "setup: ready ($(.venv/bin/kernopt --version))"
