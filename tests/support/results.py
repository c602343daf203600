"""Builders shared by the results tests: the shipped excerpt of a TTRV authors' log and its text.

The excerpt, as read by hand: config lines 1-183 (7 GPUs on 1 node, train_batch_size 7, ppo_mini_batch_size 1,
ppo_epochs 1, rollout n 16, n_vote 32, val_kwargs n 1, lr_warmup_steps_ratio 0.03, train_files
.../data/mathvista_20/train.parquet); line 195 `filter dataset len: 20`, 197 `filter dataset len: 490`,
199 `Total training steps: 4`; an initial validation of 3 batches ([ground_truth_ratio] 0.395, 0.355,
0.3888...: 79 + 71 + 35 = 185 of 200 + 200 + 90 = 490); the Initial dict at line 223; step:0 at 260; step:1..4
at 271, 282, 293, 325 (timing_s/step 163.553, 153.250, 155.427, 366.539); a final validation (0.425, 0.375,
0.4111...: 85 + 75 + 37 = 197) before step:4; the Final dict from line 326 to the last line, 362.
"""

import json
from pathlib import Path

import pandas as pd

from ttrl_bench.results.author_logs import parse_log


# verl/logs/mathvista/mathvista_20_OpenGVLab_InternVL3-8B_2e_0914_022748.log, the prompt / response
# text and other actors' lines left out (41 kB of its 209 kB); ANSI codes and tqdm \r kept
EXCERPT = Path(__file__).parents[1] / "data" / "mathvista_20_OpenGVLab_InternVL3-8B_2e_0914_022748.excerpt.log"


def _text() -> str:
    return EXCERPT.read_bytes().decode()  # as written: tqdm's bare \r kept


P = "\x1b[36m(TaskRunner pid=3699693)\x1b[0m "  # the excerpt's Ray prefix, ANSI codes included


def _line(number: int) -> str:
    """The excerpt's physical line `number` (1-based), its trailing newline included."""
    return _text().split("\n")[number - 1] + "\n"


def _sub(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _write(tmp_path: Path, text, name: str = "variant.log") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _clean():
    # parsed anew at each call: a cache kept across pytest sessions in one process (mutmut's forked runs) would
    # hand a mutant the real code's result
    return parse_log(EXCERPT)


def _same_row(row: dict) -> None:
    clean = _clean()[0]
    assert {k: v for k, v in row.items() if k != "file"} == {k: v for k, v in clean.items() if k != "file"}


def _eval_dir(root, model, method, train, target, n, metrics):
    """One evaluation job's outputs as `evaluate` / `adapt-per-sample` write them."""
    run_id = f"{model}/{method}/{train}/{target}/n{n}_random/seed0"
    d = root / run_id
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({
        "run_id": run_id, "model": model, "method": method, "train_dataset": train, "target_dataset": target,
        "n_adapt": n, "sampling": "random", "seed": 0, "metric": next(iter(metrics)), "value": next(iter(metrics.values())),
        "n": 200, "n_unparsable": 0, "eval_seconds": 1.0, "config_hash": "h", "git_revision": "r", "versions": {},
        "metrics": metrics}))
    pd.DataFrame({"id": ["a"], "output": ["x"], "correct": [True]}).to_parquet(d / "predictions.parquet")
    return d
