#!/usr/bin/env bash
# Runs kernopt's GPU paths on a machine with an NVIDIA GPU and writes logs under $OUT (default
# /tmp/kernopt-gpu-out). docs/gpu-results.md reports what this script measured.
#
#   scripts/gpu_check.sh discover   # everything at once, in parallel streams, host lock off: what breaks?
#   scripts/gpu_check.sh numbers    # streams chosen by PYTEST, EVAL_TASKS, TIMES_TASKS, OPT_TASKS; host lock on
#   scripts/gpu_check.sh rerun ARGS # pytest ARGS only (re-running what failed)
#
# Needs: python3 with torch (CUDA build) and triton, nvcc, gcc. kernopt's own dependencies that python3
# lacks may come as wheels in .whl/ (installed into /tmp/site). Runs the local sandbox (as root: each
# sandboxed process under a private uid, which must be able to run python3 and open /dev/nvidia*).
set -u
cd "$(dirname "$0")/.."
PHASE=${1:-discover}; shift || true
OUT=${OUT:-/tmp/kernopt-gpu-out}
mkdir -p "$OUT"
T0=$(date +%s)
PY=$(command -v python3)
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
export KERNOPT_SANDBOX=local PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True
KO="$PY -m kernopt"
TRITON_TASKS=(vector_add axpby row_sum softmax layernorm matmul bias_gelu_scale cross_entropy attention conv1d)
CUDA_TASKS=(saxpy reduce_sum transpose stencil2d relu softmax layernorm matmul)
lap() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
DEADLINE=$(( T0 + ${BUDGET_S:-530} ))  # every step ends by then (the device's per-command limit is 600 s)
left() { local l=$(( DEADLINE - $(date +%s) )); [ "$l" -gt 5 ] && echo "$l" || echo 5; }

one_line_json() { "$PY" -c 'import json,sys; t=sys.stdin.read(); print(json.dumps(json.loads(t)) if t.strip() else "{}")'; }

optimize() {  # task budget rounds remeasure_rounds
  lap "optimize $1 (tuner, budget $2)"
  timeout -k 5 "$(left)" $KO optimize "tasks/$1" --policy tuner --budget "$2" --sandbox local --runs-dir /tmp/kruns --json \
    --set eval.rounds="$3" --set eval.remeasure_rounds="$4" 2>>"$OUT/cli.log" | one_line_json >>"$OUT/optimize.jsonl"
}

pytest_gpu() {  # args: extra pytest args
  local n=""
  "$PY" -c "import xdist" 2>/dev/null && n="-n ${XDIST:-6}"
  timeout -k 10 "$(left)" "$PY" -m pytest -m gpu -q -rA -p no:cacheprovider --timeout 400 $n "$@"
}

case "$PHASE" in
discover)
  export KERNOPT_HOST_LOCK=off  # streams overlap on purpose: this phase looks for failures, its timings are noisy
  lap "env" ; timeout -k 5 150 "$PY" scripts/gpu_check.py env >"$OUT/env.log" 2>&1
  lap "env done"; tail -n 30 "$OUT/env.log"
  ( pytest_gpu tests/test_torch_gpu.py tests/test_gpu_hacks.py tests/test_cuda.py >"$OUT/pytest.log" 2>&1; lap "pytest rc=$?" ) &
  ( timeout -k 5 "$(left)" "$PY" scripts/gpu_check.py evals --rounds 2 --out "$OUT/evals.jsonl" \
      $(printf 'tasks/triton/%s ' "${TRITON_TASKS[@]:0:5}") >/dev/null 2>>"$OUT/streams.log"; lap "evals triton A rc=$?" ) &
  ( timeout -k 5 "$(left)" "$PY" scripts/gpu_check.py evals --rounds 2 --out "$OUT/evals.jsonl" \
      $(printf 'tasks/triton/%s ' "${TRITON_TASKS[@]:5}") >/dev/null 2>>"$OUT/streams.log"; lap "evals triton B rc=$?" ) &
  ( timeout -k 5 "$(left)" "$PY" scripts/gpu_check.py evals --rounds 2 --out "$OUT/evals.jsonl" \
      $(printf 'tasks/cuda/%s ' "${CUDA_TASKS[@]}") >/dev/null 2>>"$OUT/streams.log"; lap "evals cuda rc=$?" ) &
  ( {
      lap "task check cuda/relu"; timeout -k 5 "$(left)" $KO task check tasks/cuda/relu --sandbox local
      lap "task check triton/softmax"; timeout -k 5 "$(left)" $KO task check tasks/triton/softmax --sandbox local
      lap "task check cuda/saxpy"; timeout -k 5 "$(left)" $KO task check tasks/cuda/saxpy --sandbox local
      lap "eval cuda/saxpy (CLI)"; timeout -k 5 "$(left)" $KO eval tasks/cuda/saxpy -c tasks/cuda/saxpy/kernel.cu --sandbox local --json
    } >>"$OUT/cli.log" 2>&1
    lap "cli stream done" ) &
  ( optimize cuda/saxpy 8 5 5; optimize triton/softmax 4 5 5; lap "optimize stream done" ) &
  wait
  ;;
numbers)
  # Host lock on (the default): builds and verification overlap, timings never do. What runs comes from
  # the environment: PYTEST (test ids), EVAL_TASKS (A/A evaluations, 2 rounds), TIMES_TASKS (starting
  # kernel, eager, torch.compile: one process each), OPT_TASKS (task:budget, tuner, 5 rounds, re-measured in 5).
  lap "env"; timeout -k 5 150 "$PY" scripts/gpu_check.py env >"$OUT/env.log" 2>&1
  timeout -k 5 120 "$PY" scripts/gpu_check.py overhead >>"$OUT/env.log" 2>&1; lap "overhead"; tail -n 5 "$OUT/env.log"
  [ -n "${PYTEST:-}" ] && ( timeout -k 10 "$(left)" "$PY" -m pytest -m gpu -q -rA -p no:cacheprovider --timeout 450 \
      --durations=0 $PYTEST >"$OUT/pytest.log" 2>&1; lap "pytest rc=$?" ) &
  [ -n "${EVAL_TASKS:-}" ] && ( timeout -k 5 "$(left)" "$PY" scripts/gpu_check.py evals --rounds 2 --out "$OUT/evals.jsonl" \
      $EVAL_TASKS >/dev/null 2>>"$OUT/streams.log"; lap "evals rc=$?" ) &
  [ -n "${TIMES_TASKS:-}" ] && ( timeout -k 5 "$(left)" "$PY" scripts/gpu_check.py times --out "$OUT/evals.jsonl" \
      $TIMES_TASKS >/dev/null 2>>"$OUT/streams.log"; lap "times rc=$?" ) &
  [ -n "${OPT_TASKS:-}" ] && ( for spec in $OPT_TASKS; do optimize "${spec%%:*}" "${spec##*:}" 5 "${OPT_REMEASURE:-5}"; done; lap "optimize done" ) &
  wait
  ;;
rerun)
  pytest_gpu "$@" >"$OUT/pytest.log" 2>&1; lap "pytest rc=$?"
  ;;
esac
lap "summary"
{
  [ -f "$OUT/pytest.log" ] && { grep -E "^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)" "$OUT/pytest.log" | cut -c1-220; tail -n 3 "$OUT/pytest.log"; }
  "$PY" scripts/gpu_check.py table "$OUT/evals.jsonl" "$OUT/optimize.jsonl"
} >"$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
lap "end"
