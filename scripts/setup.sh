#!/usr/bin/env bash
# Installs what kernopt needs on Debian/Ubuntu and creates .venv with kernopt in it.
# Usage: scripts/setup.sh [--dev]   (--dev adds the test tools and the torch/triton extra the GPU-target
# tests need; without an NVIDIA GPU that is the pinned CPU build of torch, and Triton runs in its interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."

# libclang-rt-dev: clang's ThreadSanitizer runtime, which the race check links (Debian 12: libclang-rt-14-dev, a
# Recommends of clang that --no-install-recommends skips; without it every race check fails, and fails closed).
# clang-19: the Polly build (a candidate's toolchain = "polly", bench/peers.py's Polly peer); Debian 12's clang-19 has
# Polly built in (clang 14's segfaults on chains of matrix products). Where the release has no clang-19 the Polly
# build is unavailable (the tuner does not offer it, peers shows it so), everything else works.
# bubblewrap: the local sandbox runs every command inside bwrap (its own file system view, pid and network
# namespaces); without it the local sandbox runs nothing (fails closed).
PKGS=(gcc g++ clang clang-19 libomp-dev libclang-rt-dev openmpi-bin libopenmpi-dev binutils bubblewrap python3 python3-venv python3-pip)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup: error: need root or sudo to install: ${missing[*]}" >&2; exit 1; fi
  $SUDO apt-get update -qq
  if [[ " ${missing[*]} " == *" libclang-rt-dev "* ]] && ! apt-cache show libclang-rt-dev >/dev/null 2>&1; then
    # Releases before the split (Debian 11, Ubuntu 22.04) ship the runtime inside libclang-common-*-dev, a clang dependency.
    kept=(); for p in "${missing[@]}"; do [ "$p" = libclang-rt-dev ] || kept+=("$p"); done; missing=("${kept[@]}")
  fi
  if [[ " ${missing[*]} " == *" clang-19 "* ]] && ! apt-cache show clang-19 >/dev/null 2>&1; then
    echo "setup: note: this release has no clang-19 package: the Polly build (toolchain = \"polly\") is unavailable"
    kept=(); for p in "${missing[@]}"; do [ "$p" = clang-19 ] || kept+=("$p"); done; missing=("${kept[@]}")
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The venv's interpreter must be one every user can run: as root, the local sandbox runs candidates
# (and the torch-family runner, with the venv's packages) under a private uid, which cannot enter
# /root, where pyenv-style interpreters live. So Debian's /usr/bin/python3 is preferred.
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  PY=python3
  if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then PY=/usr/bin/python3; fi
fi
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: error: kernopt needs Python >= 3.11 ($PY is $("$PY" --version 2>&1))" >&2; exit 1
fi
if [ -x .venv/bin/python ] && [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null &&
   ! setpriv --reuid=65534 --regid=65534 --clear-groups "$(readlink -f .venv/bin/python)" -I -c "" 2>/dev/null; then
  echo "setup: .venv's interpreter ($(readlink -f .venv/bin/python)) cannot be run by other users; recreating .venv from $PY"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extra=""
[ "${1:-}" = "--dev" ] && extra="[dev,gpu,ray]"
if [ -n "$extra" ] && ! command -v nvidia-smi >/dev/null; then
  echo "setup: no NVIDIA GPU here: GPU targets are verified with the Triton interpreter / compiled only, never timed"
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extra}"
echo "setup: ready ($(.venv/bin/kernopt --version))"
