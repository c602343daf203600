#!/usr/bin/env bash
# Plants each bug that survived the fast tests in issue 25, one at a time, runs the one test written
# for it, restores the file, and prints "1 failed" per caught bug. About 1 minute on 2 cores.
# Usage (from the repository root, in the project's venv): bash benchmarks/planted_bugs.sh
set -uo pipefail
export PYTHONPATH=$PWD/src
backup=$(mktemp)
plant() {  # file, text, planted text, test file, -k expression
  cp "$1" "$backup"
  python3 - "$1" "$2" "$3" <<'PY'
import sys; p, o, n = sys.argv[1:]; s = open(p).read(); assert o in s, o; open(p, "w").write(s.replace(o, n, 1))
PY
  result=$(timeout 300 python -m pytest -q -x "$4" -k "$5" -p no:cacheprovider 2>&1 | tail -1)
  cp "$backup" "$1"
  echo "[$2 -> $3] $result"
}
plant src/ttrl_bench/rewards/grounding.py "for j in range(len(answers)) if j != i)" "for j in range(len(answers)))" tests/rewards/test_grounding.py "itself"
plant src/ttrl_bench/rewards/grounding.py "(l1 < thresholds.l1)" "(l1 <= thresholds.l1)" tests/rewards/test_grounding.py "boundaries"
plant src/ttrl_bench/rewards/grounding.py "(dist < thresholds.point and inside)" "(dist <= thresholds.point and inside)" tests/rewards/test_grounding.py "boundaries"
plant src/ttrl_bench/rewards/grounding.py "(iou > thresholds.iou)" "(iou >= thresholds.iou)" tests/rewards/test_grounding.py "boundaries"
plant src/ttrl_bench/evaluation/extraction.py $'        return checked(match.group(1))\n    lowered' $'        return match.group(1)\n    lowered' tests/evaluation/test_extraction.py "beyond"
plant src/ttrl_bench/rewards/voting.py "rng.random() < 0.5" "rng.random() < 0.25" tests/rewards/test_voting.py "fair_coin"
plant src/ttrl_bench/rewards/voting.py "w / total >= tau" "w / total > tau" tests/rewards/test_voting.py "pruning_threshold"
plant src/ttrl_bench/adaptation/reward_bridge.py "group_rewards = [round(r * 2**16) / 2**16 for r in group_rewards]" "pass" tests/adaptation/test_reward_bridge.py "grid"
plant src/ttrl_bench/adaptation/layout.py "per_step % generation and generation % per_step" "False" tests/adaptation/test_adaptation.py "neither_divides"
plant src/ttrl_bench/results/paper_tables.py "    ours = ours.drop_duplicates(KEY)" "    pass" tests/results/test_paper_tables.py "repeats_a_key"
rm -f "$backup"
