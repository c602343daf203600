#!/usr/bin/env bash
# The real-size path on a lent GPU, in as few device calls as the budget allows (issue 40). From the
# checkout's root:
#
#   bash benchmarks/gpu_check.sh part1          # on the lent GPU: at most 590 s of command time (its limits)
#   bash benchmarks/gpu_check.sh part2          # the same round with TRL's colocated vLLM, vLLM vs HF greedy
#   bash benchmarks/gpu_check.sh --tiny part1   # the CPU rehearsal (tests/project/test_benchmarks.py runs it)
#
# Every number goes under $OUT (the device tool's folder that comes back; a temporary one elsewhere) as it
# is measured: benchmarks/gpu.py appends one CSV row per finished job, each job in a process of its own,
# so a crash or a timeout keeps what finished. Rows name the card, torch, transformers and TRL.
#
# Part 1 (benchmarks/gpu.py, random weights at the published sizes, full depth):
#   1. TTRV on InternVL3-2B: one round of the `ttrv` preset (4 prompts x 32 votes, 16 trained each, one optimizer
#      step per prompt: 4 steps) on demo digits at 896 px, HF generate, 16 answer tokens: seconds per optimizer
#      step, peak allocated and reserved, the plan's predicted peak beside them;
#   2. greedy evaluation of the same model on 200 items: items per second;
#   3. per-sample VR-TTRL on Qwen2.5-VL-3B, 2 samples, one update each; DARE, one round on InternVL3-2B.
# Part 2 needs vLLM on the machine (its wheel travels in pieces under the 64 MiB `carry` limit: see
# benchmarks/README.md); without it the script says so and stops with exit 3.
#
# The lent machine lacks trl, datasets, duckdb, pycocotools, jsonschema (benchmarks/README.md): put their
# wheels in benchmarks/wheels/ (`pip download --no-deps --only-binary :all: --python-version 3.12 ...`) and
# name it in the call's `carry`; they are installed into /tmp/site once per warm machine.
set -uo pipefail
cd "$(dirname "$0")/.."

tiny="" part=""
for arg in "$@"; do
  case "$arg" in
    --tiny) tiny="--tiny" ;;
    part1|part2) part="$arg" ;;
    *) echo "usage: bash benchmarks/gpu_check.sh [--tiny] part1|part2" >&2; exit 2 ;;
  esac
done
[ -n "$part" ] || { echo "usage: bash benchmarks/gpu_check.sh [--tiny] part1|part2" >&2; exit 2; }

OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
export TTRL_BENCH_BENCHMARK_OUT="$OUT"
PYTHON="${PYTHON:-python3}"
if [ ! -d /tmp/site/trl ] && [ -d benchmarks/wheels ] && ! "$PYTHON" -c "import trl, datasets" 2>/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --target /tmp/site benchmarks/wheels/*.whl
fi
# on the path in every call, the one that carried the wheels or a later one on the same warm machine
[ -d /tmp/site ] && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}"
# each model is built once per machine and reused by every later call (benchmarks/gpu.py build_model)
export TTRL_BENCH_MODELS="${TTRL_BENCH_MODELS:-/tmp/ttrl-bench-models}"
"$PYTHON" - >"$OUT/versions.txt" 2>&1 <<'PY'
import torch, transformers, trl
print("card", torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")
print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__)
PY
cat "$OUT/versions.txt"

if [ -n "$tiny" ]; then internvl=tiny-internvl qwen=tiny-qwen2.5-vl; else internvl=internvl3-2b qwen=qwen2.5-vl-3b; fi
started=$(date +%s)
run() {  # one gpu.py call under its own time limit; its rows are in $OUT whatever happens
  local limit=$1; shift
  [ -z "$tiny" ] || limit=$((limit * 4))  # the CPU rehearsal checks the calls, not the GPU's times (a shared CPU)
  echo "== $(( $(date +%s) - started )) s: gpu.py $*"
  timeout "$limit" "$PYTHON" benchmarks/gpu.py $tiny "$@"
  local rc=$?
  [ "$rc" -eq 0 ] || echo "== exit $rc (124: past its ${limit} s)"
  return "$rc"
}

rc=0
if [ "$part" = part1 ]; then
  # the models first, under a limit of their own. Measured (docs/gpu-runs.md "Time limits of gpu_check.sh"): this
  # call took 216 s on the 2-core CPU machine at load 6.5-8.7 (47% of one core: 103 s of CPU), InternVL3-2B built
  # and saved in 70 s, Qwen2.5-VL-3B in 104 s (7.0 GB); an upper bound for the lent machine's 16 cores. 200 s is
  # about twice its 103 s of CPU work, and keeps part 1's limits (200 + 210 + 90 + 90 = 590 s) under the device's
  # 600 s per command, so a slow call is stopped by its own limit and later calls' rows are not lost to the device's.
  # Every later call reuses the models; its fixed part (imports, the 896 px data) took 38 s there, inside the
  # jobs' limits below, which are otherwise their own GPU work's (not measured here: no GPU).
  run 200 --build-only --models "$internvl" "$qwen" || rc=1
  run 210 --models "$internvl:ttrv,greedy-eval" --adapt-samples 4 --epochs 1 --answer-tokens 16 --eval-samples 200 \
    --rollout-backend hf --csv-tag part1-ttrv || rc=1
  run 90 --models "$qwen:vr-ttrl" --per-sample 2 1 --answer-tokens 128 --csv-tag part1-vr-ttrl || rc=1
  run 90 --models "$internvl:dare" --adapt-samples 4 --epochs 1 --answer-tokens 16 --rollout-backend hf \
    --csv-tag part1-dare || rc=1
else
  if ! "$PYTHON" -c "import vllm" 2>/dev/null; then
    echo "part2: vLLM does not import here; carry its wheel first (benchmarks/README.md)"
    exit 3
  fi
  export VLLM_USE_FLASHINFER_SAMPLER=0  # flashinfer is not carried: the last H100 run needed it (docs/gpu-runs.md)
  run 240 --models "$internvl:ttrv,vllm-agreement" --adapt-samples 4 --epochs 1 --answer-tokens 16 \
    --rollout-backend vllm --csv-tag part2-vllm || rc=1
fi
echo "== $part done in $(( $(date +%s) - started )) s; rows:"
ls "$OUT"/gpu-*.csv
exit "$rc"
