#!/usr/bin/env bash
# Issue 52: RUNS runs of the README's test command (`pytest -ra`), each in a fresh clone of REF, with HOGS
# busy processes beside it, in random order (pytest-randomly: a new seed each run, recorded) and with the
# xdist worker count cycled through WORKERS; one row per run appended to benchmarks/results/suite_repeats.md
# (seed, workers, pass/fail, the failing tests), each run's full output kept in OUT.
#
#   bash benchmarks/suite_repeats.sh [RUNS=5] [LABEL=after] [REF=HEAD]
#   env: WORKERS="auto 3 1" (the README's -n auto comes from pyproject's addopts, 2 workers on 2 cores),
#        HOGS=2 (one per core of a 2-core machine), SHARED_VENV=.venv of this checkout,
#        OUT=a temporary folder for the logs, TIMEOUT_S=3600 per run, RECORD=the record's path,
#        PYTEST_ARGS="" (appended to the command: a trial of this script on one test file)
#
# The clone's .venv is a thin venv over SHARED_VENV's packages (a .pth file: no 5-GB install per run) with
# the clone's own src first on the path, every console script of SHARED_VENV rewritten to its python, and
# pytest-randomly added (not a project dependency: the order is random here, where it is being tested).
# A run that wants the README's install instead: INSTALL=1 runs the README's first command's install part
# verbatim in the clone (minutes, network to PyPI) and then adds pytest-randomly.
set -euo pipefail
unset PYTHONPATH  # the clone's own src, never another checkout's
cd "$(dirname "$0")/.."
REPO=$PWD
RUNS=${1:-5}
LABEL=${2:-after}
REF=$(git rev-parse "${3:-HEAD}")
WORKERS=(${WORKERS:-auto 3 1})
HOGS=${HOGS:-2}
SHARED_VENV=$(cd "${SHARED_VENV:-$REPO/.venv}" && pwd)
OUT=${OUT:-$(mktemp -d /tmp/suite_repeats.XXXXXX)}
TIMEOUT_S=${TIMEOUT_S:-3600}
RECORD=${RECORD:-$REPO/benchmarks/results/suite_repeats.md}
mkdir -p "$OUT" "$(dirname "$RECORD")"

# the README's second bash block, the command as written (what .ci/run runs)
TEST_COMMAND=$(python3 -c 'import re; print(" ".join(l.strip() for l in re.findall(r"```bash\n(.*?)```", open("README.md").read(), re.S)[1].strip().splitlines()))')

thin_venv() {  # $1: the clone
  local clone=$1 site shared_site
  python3 -m venv --without-pip "$clone/.venv"
  site=$("$clone/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  shared_site=$("$SHARED_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # path lines only: SHARED_VENV's own .pth files (its editable install of another checkout) are not read
  echo "$clone/src" > "$site/0_clone_src.pth"
  echo "$shared_site" > "$site/1_shared_venv.pth"
  for script in "$SHARED_VENV"/bin/*; do
    name=$(basename "$script")
    [ -e "$clone/.venv/bin/$name" ] && continue
    if head -c 2 "$script" | grep -q '#!' && head -1 "$script" | grep -q "^#!$SHARED_VENV/bin/python"; then
      sed "1s|.*|#!$clone/.venv/bin/python|" "$script" > "$clone/.venv/bin/$name"
      chmod +x "$clone/.venv/bin/$name"
    fi
  done
  "$SHARED_VENV/bin/python" -m pip install -q --no-deps --target "$site" pytest-randomly
}

{
  if [ ! -s "$RECORD" ]; then
    echo "# The README's test command, repeated (issue 52)"
    echo
    echo "Written by benchmarks/suite_repeats.sh: each row one run of \`$TEST_COMMAND\` in a fresh clone, random"
    echo "order (pytest-randomly; \`--randomly-seed=SEED\` reruns one in the same order), busy processes beside it."
  fi
  echo
  echo "## $LABEL: $(git log -1 --format='%h %s' "$REF" | cut -c1-100)"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)),"
  echo "$HOGS busy processes beside each run; load before the first: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| run | seed | workers (-n) | result | wall s | load (1 min) at the end | failing tests |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
} >> "$RECORD"

hogs=()
stop_hogs() { for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done; hogs=(); }
trap stop_hogs EXIT
for _ in $(seq "$HOGS"); do
  sh -c 'while :; do :; done' &
  hogs+=($!)
done

for run in $(seq "$RUNS"); do
  workers=${WORKERS[$(( (run - 1) % ${#WORKERS[@]} ))]}
  clone=$(mktemp -d /tmp/suite_clone.XXXXXX)
  git clone -q "$REPO" "$clone/repo" && git -C "$clone/repo" checkout -q "$REF"
  if [ "${INSTALL:-0}" = 1 ]; then
    (cd "$clone/repo" && python3 -m venv .venv && . .venv/bin/activate && pip install -q -e ".[test]" pytest-randomly)
  else
    thin_venv "$clone/repo"
  fi
  extra=""
  [ "$workers" != auto ] && extra=" -n $workers"
  log=$OUT/$LABEL-$run.log
  start=$(date +%s)
  set +e
  (cd "$clone/repo" && timeout "$TIMEOUT_S" bash -c "$TEST_COMMAND$extra ${PYTEST_ARGS:-}") > "$log" 2>&1
  rc=$?
  set -e
  wall=$(( $(date +%s) - start ))
  seed=$(grep -m1 -o 'randomly-seed=[0-9]*' "$log" | cut -d= -f2 || true)
  summary=$(grep -E '^=+ .*(passed|failed|error).* in ' "$log" | tail -1 | sed 's/=//g' | xargs || true)
  failing=$(grep -E '^(FAILED|ERROR) ' "$log" | cut -d' ' -f2 | sort -u | paste -sd' ' || true)
  [ "$rc" = 124 ] && summary="timed out after $TIMEOUT_S s; $summary"
  echo "| $run | ${seed:-?} | $workers | $([ "$rc" = 0 ] && echo pass || echo "FAIL (exit $rc)"): $summary | $wall | $(cut -d' ' -f1 /proc/loadavg) | ${failing:-none} |" >> "$RECORD"
  echo "run $run: exit $rc, seed ${seed:-?}, -n $workers, $wall s: $summary (log: $log)"
  rm -rf "$clone"
done
