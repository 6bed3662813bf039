#!/usr/bin/env bash
# Sets everything up, then optimizes the built-in gemm task with the offline tuner (no model, no GPU,
# no Docker: the local sandbox unless KERNOPT_SANDBOX=docker).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/kernopt optimize "${1:-tasks/openmp/gemm}" --budget "${BUDGET:-20}" --sandbox "${KERNOPT_SANDBOX:-local}"
