"""docs/extending.md, followed verbatim (issue 38): every "Append to `FILE`:" block is appended to that file of a
copy of the checkout, every "Write `FILE`:" block written, and the page's last command run there. The guide is
what a user does; if it goes stale, this fails."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

from PIL import Image

from tests.support.workflow import job_counts
from tests.support import REPO
from tests.support.workflow import copy_workflow, workflow_env

GUIDE = (REPO / "docs" / "extending.md").read_text()
STEP = re.compile(r"(Append to|Write) `([^`]+)`:\n\n```\w+\n(.*?)```", re.S)


def _follow_the_guide(work: Path) -> list[str]:
    """Applies the guide's blocks in the copy; returns the source files it touched."""
    touched = []
    for action, path, text in STEP.findall(GUIDE):
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if action == "Append to":
            target.write_text(target.read_text() + "\n\n" + text)
            touched.append(path)
        else:
            target.write_text(text)
    for name in ("q1", "q2"):  # "The images go in my-quiz/images/"
        (work / "my-quiz" / "images").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (56, 56), (200, 30 * len(name), 90)).save(work / "my-quiz" / "images" / f"{name}.png")
    return touched


def test_the_extending_guide_adds_a_method_and_a_local_dataset_that_dry_run_with_the_demo(tmp_path):
    """The four source files the guide names, and no other; the new reward by hand (a group A A B None under
    threshold 0.6: A holds 2/4 = 0.5, so all 0; A A A B: 3/4, so 1 1 1 0); `methods show` and `datasets show`
    print the new entries; and the demo dry-runs with them: 2 datasets x 2 adapting methods = 4 adaptations,
    6 evaluations (the zero-shot of each dataset too), every name and parameter checked first."""
    work = copy_workflow(tmp_path)
    touched = _follow_the_guide(work)
    assert touched == ["src/ttrl_bench/rewards/voting.py", "src/ttrl_bench/rewards/registry.py"] * 2 + [
        "src/ttrl_bench/adaptation/presets.py", "src/ttrl_bench/datasets/registry.py"]
    env = {**workflow_env(), "PYTHONPATH": str(work / "src")}  # the copy's package, not the checkout's
    rewards = subprocess.run(
        [sys.executable, "-c", "from ttrl_bench.rewards.registry import get_reward\n"
         "r = get_reward('confident_majority', threshold=0.6, unparsable='no_reward')\n"
         "print(r(['A', 'A', 'B', None]), r(['A', 'A', 'A', 'B']))"],
        cwd=work, env=env, capture_output=True, text=True, check=True)
    assert rewards.stdout.strip() == "[0.0, 0.0, 0.0, 0.0] [1.0, 1.0, 1.0, 0.0]"
    # TTRV + 0.1 x mean token probability: a unanimous group (p = 1, H = 0: TTRV gives 1 each) whose completions'
    # tokens have probabilities (0.5, 0.25), none, (1): 1 + 0.1 x 0.375, 1 + 0, 1 + 0.1 x 1; and A A B: TTRV's
    # 2/3 - 0.75 H and 1/3 - 0.75 H, H = ln 3 - (2/3) ln 2 = 0.636514, plus 0.1 x 0.5
    bonus = subprocess.run(
        [sys.executable, "-c", "import math\nfrom ttrl_bench.rewards.registry import get_reward\n"
         "r = get_reward('ttrv_confidence')\n"
         "lp = [[math.log(0.5), math.log(0.25)], [], [0.0]]\n"
         "print([round(x, 6) for x in r(['A', 'A', 'A'], token_logprobs=lp, token_entropies=[[0.1] * 2, [], [0.0]])])\n"
         "print([round(x, 6) for x in r(['A', 'A', 'B'], token_logprobs=[[math.log(0.5)]] * 3, token_entropies=None)])\n"
         "print(r.needs_logprobs, r.needs_uncertainty)"],
        cwd=work, env=env, capture_output=True, text=True, check=True)
    h = math.log(3) - 2 / 3 * math.log(2)
    expected = [[1.0375, 1.0, 1.1], [round(2 / 3 - 0.75 * h + 0.05, 6)] * 2 + [round(1 / 3 - 0.75 * h + 0.05, 6)]]
    assert bonus.stdout.split("\n")[:3] == [str(expected[0]), str(expected[1]), "True False"]
    shown = subprocess.run([sys.executable, "-m", "ttrl_bench.cli", "methods", "show", "confident-majority"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert "reward: confident_majority" in shown and 'reward accepts: ["threshold", "unparsable"]' in shown
    shown = subprocess.run([sys.executable, "-m", "ttrl_bench.cli", "datasets", "show", "my-quiz"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert "source: local:json" in shown and "reader: options_list" in shown
    command = re.findall(r"```sh\n(.*?)\n```", GUIDE, re.S)[-1]
    assert command == "snakemake --cores all --configfile extending.yaml -n"
    dry = subprocess.run(command, shell=True, cwd=work, env={**env, "HF_HUB_OFFLINE": "1"}, capture_output=True,
                         text=True)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    counts = job_counts(dry.stdout)
    assert (counts["adapt"], counts["evaluate"]) == (4, 6)
    assert "confident-majority" in dry.stdout and "my-quiz" in dry.stdout
    # step 5's fixture test, written by the guide, passes in the copy
    fixture = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                              "tests/datasets/test_my_quiz.py"], cwd=work, env=env, capture_output=True, text=True)
    assert fixture.returncode == 0 and "1 passed" in fixture.stdout, fixture.stdout[-3000:] + fixture.stderr[-3000:]
    assert not os.path.exists(REPO / "my-quiz")  # the checkout untouched
