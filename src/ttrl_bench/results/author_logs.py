"""Parse the TTRV authors' verl console logs (Akshit21112002/TTRV, verl/logs/<dataset>/...) into one
run row (`author_runs`) and one row per rollout round (`author_steps`).

A log holds, under Ray's `(TaskRunner pid=N)` prefixes and between ANSI codes and tqdm carriage
returns: verl's config pprinted first; `Size of val dataloader`, `filter dataset len` and
`Total training steps` lines; per validation batch a `[ground_truth_ratio] x` line after
`validation generation end`; one `step:K - key:value - ...` line per rollout round (3 decimals);
and the pprinted `Initial validation metrics` / `Final validation metrics` dicts (np.float64 values).

Full-test accuracy is rebuilt from the per-batch ratios: verl's `acc/mean@N` groups samples by
identical prompt text (verl `metric_utils.process_validation_metrics`) and equals accuracy only
when every prompt is unique. Optimizer steps follow verl's mini-batching: `ppo_mini_batch_size`
prompts x rollout.n rollouts / world size per GPU and one optimizer step per mini-batch
(verl/workers/fsdp_workers.py, verl/workers/actor/dp_actor.py `update_policy`), so a round takes
train_batch_size / ppo_mini_batch_size steps per PPO epoch. Warm-up is verl's
`int(lr_warmup_steps_ratio x total_training_steps)` rounds (verl/utils/torch_functional.py).
"""

from __future__ import annotations

import ast
import math
import re
from importlib.resources import files
from pathlib import Path

import pandas as pd

AUTHOR_RUNS_CSV = files("ttrl_bench.results") / "data" / "author_runs.csv"
AUTHOR_STEPS_CSV = files("ttrl_bench.results") / "data" / "author_steps.csv.gz"

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RAY = re.compile(r"\((\w+) pid=\d+(?:, ip=[\d.]+)?\) ?")
_STEP = re.compile(r"step:(\d+) - (.*)")
_NP_FLOAT = re.compile(r"np\.float64\(([^()]*)\)")
# a pprinted dict's continuation line starts with a quote, a closing bracket or a bare value;
# anything else inside a block is noise pasted in by a concurrent writer (a tqdm bar, a path)
_PASTED = re.compile(r"\S {2,}('.*)$")  # `vscode-remote://...log      'param_offload': False,`
_CONTINUATION = re.compile(r"^ *['\"\]}]|^ *[\w.-]+[,}\]]+$")  # `1,`: a value pprint wrapped

RUN_COLUMNS = [
    "file", "dataset", "model", "n_adapt", "n_adapt_kept", "epochs", "n_gpus", "train_batch_size", "rounds",
    "optimizer_steps", "warmup_rounds", "temperature", "votes", "trained_rollouts", "n_test",
    "initial_acc", "final_acc", "reported_key", "initial_reported",
    "final_reported", "train_seconds",
]


class AuthorLogError(ValueError):
    """A log the importer cannot read; the message names the file and line."""


def _lines(path: Path) -> list[tuple[int, str, str]]:
    """(line number, Ray actor or "", text) per printed line: ANSI codes removed, each tqdm
    carriage-return segment its own line (under the actor that printed the line), the Ray prefix
    split off, also mid-line where Ray merged two actors' output into one line."""
    out = []
    with path.open(newline="", errors="replace") as handle:  # newline="": keep tqdm's bare \r
        physical = handle.read().split("\n")
    for number, raw in enumerate(physical, 1):
        actor = ""
        for segment in _ANSI.sub("", raw).split("\r"):
            pieces = _RAY.split(segment)
            if pieces[0].strip():
                out.append((number, actor, pieces[0]))
            for actor, text in zip(pieces[1::2], pieces[2::2]):
                out.append((number, actor, text))
    return out


def _block(lines, start: int, path: Path) -> tuple[str, int]:
    """A pprinted block from lines[start]: its first line plus the TaskRunner continuation lines
    after it (noise lines of other writers skipped), up to the one that closes every bracket."""
    number, _, text = lines[start]
    parts, depth, i = [text], _depth(text), start + 1
    while depth > 0 and i < len(lines):
        _, actor, text = lines[i]
        text = text if _CONTINUATION.match(text) else (_PASTED.search(text) or [None, None])[1]
        if actor == "TaskRunner" and text:
            parts.append(text)
            depth += _depth(text)
        i += 1
    if depth > 0:
        raise AuthorLogError(f"{path}:{number}: a pprinted block never closes")
    return "\n".join(parts), i


def _depth(text: str) -> int:
    """Open minus closed brackets outside quoted strings."""
    plain = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "", text)
    return sum(plain.count(c) for c in "{[(") - sum(plain.count(c) for c in "}])")


def _config(lines, path: Path) -> dict:
    for i, (number, actor, text) in enumerate(lines):
        if actor == "TaskRunner" and text.startswith("{'actor_rollout_ref'"):
            block, _ = _block(lines, i, path)
            try:
                return ast.literal_eval(block)
            except (ValueError, SyntaxError) as err:
                raise AuthorLogError(f"{path}:{number}: verl's config does not parse ({err})") from err
    raise AuthorLogError(f"{path}:1: no pprinted verl config (a line starting with {{'actor_rollout_ref'}})")


def _metrics_dict(block: str, path: Path, number: int) -> dict[str, float]:
    """`("Initial validation metrics: {'k': " "np.float64(0.5), ...}")` -> {'k': 0.5}."""
    try:
        text = ast.literal_eval(block)  # the tuple of adjacent string pieces -> one string
        text = text.split(":", 1)[1] if isinstance(text, str) else block
        return {k: float(v) for k, v in ast.literal_eval(_NP_FLOAT.sub(r"\1", text)).items()}
    except (ValueError, SyntaxError, IndexError, AttributeError) as err:  # AttributeError: no dict
        raise AuthorLogError(f"{path}:{number}: validation metrics do not parse ({err})") from err


def _step_values(text: str, path: Path, number: int) -> dict[str, float]:
    values = {}
    for item in text.split(" - "):
        key, sep, value = item.strip().rpartition(":")
        if not sep:
            continue
        try:
            values[key] = float(value)
        except ValueError:
            if key.startswith(("train/", "actor/", "critic/", "val")):
                raise AuthorLogError(f"{path}:{number}: step value {item!r} is not a number") from None
    return values


def _batch_sizes(n_test: int, ratios: list[float], repeats: int) -> list[int]:
    """Validation batch sizes: the fork's batch size changed between runs (20, 200, 300, ...), so
    take the batch size that splits n_test into len(ratios) batches and makes every batch's
    ratio a whole number of correct answers (rounder sizes first where several fit)."""
    k = len(ratios)
    def fits(b):
        sizes = [b] * (k - 1) + [n_test - b * (k - 1)]
        return sizes[-1] > 0 and all(abs(r * s * repeats - round(r * s * repeats)) < 1e-6 for r, s in zip(ratios, sizes))
    candidates = [b for b in range(1, n_test + 1) if math.ceil(n_test / b) == k and fits(b)]
    if not candidates:
        return []
    best = min(candidates, key=lambda b: (-len(str(b)) + len(str(b).rstrip("0")), b))
    return [best] * (k - 1) + [n_test - best * (k - 1)]


def parse_log(path: Path) -> tuple[dict, pd.DataFrame]:
    """One verl console log -> (run row with RUN_COLUMNS, per-round frame: file, step, keys)."""
    path = Path(path)
    lines = _lines(path)
    config = _config(lines, path)
    try:
        actor = config["actor_rollout_ref"]["actor"]
        rollout = config["actor_rollout_ref"]["rollout"]
        data, trainer = config["data"], config["trainer"]
        model = config["actor_rollout_ref"]["model"]["path"]
        ratio = actor["optim"]["lr_warmup_steps_ratio"]
        repeats = rollout["val_kwargs"]["n"]
        mini_batch, ppo_epochs = actor["ppo_mini_batch_size"], actor["ppo_epochs"]
    except KeyError as err:
        raise AuthorLogError(f"{path}: verl's config has no key {err}") from err
    dataset_lens, total_steps, passes, current, pending = [], None, [], [], False
    steps, dicts = [], {}
    i = 0
    while i < len(lines):
        number, actor_name, text = lines[i]
        i += 1
        if actor_name != "TaskRunner":
            continue
        if match := re.match(r"filter dataset len: (\d+)", text):
            dataset_lens.append(int(match[1]))
        elif match := re.match(r"Total training steps: (\d+)", text):
            total_steps = int(match[1])
        elif text.startswith("validation generation end"):
            pending = True
        elif pending and (match := re.match(r"\[ground_truth_ratio\] (\S+)", text)):
            current.append(float(match[1]))
            pending = False
        elif (match := re.match(r'\("(Initial|Final) validation metrics: ', text)):
            block, _ = _block(lines, i - 1, path)  # scan its lines too: a step line can sit inside
            dicts[match[1]] = _metrics_dict(block, path, number)
        if match := _STEP.search(text):
            if current:
                passes.append(current)
                current = []
            steps.append({"step": int(match[1]), **_step_values(match[2], path, number)})
        elif text.startswith('("') and current:
            passes.append(current)
            current = []
    if current:
        passes.append(current)
    if len(dataset_lens) < 2 or total_steps is None or not passes or set(dicts) != {"Initial", "Final"}:
        raise AuthorLogError(f"{path}:{len(lines) and lines[-1][0]}: incomplete log (dataset lengths {dataset_lens}, "
                             f"total steps {total_steps}, {len(passes)} validation passes, dicts {sorted(dicts)})")
    n_kept, n_test = dataset_lens[0], dataset_lens[1]
    train_dir = Path(data["train_files"][0]).parent.name  # e.g. mathvista_500, resi45_200_online_plot
    nominal = re.search(r"_(\d+)(?:_|$)", train_dir)

    def accuracy(ratios):
        sizes = _batch_sizes(n_test, ratios, repeats)
        if not sizes:
            raise AuthorLogError(f"{path}: no validation batch size splits {n_test} items into {len(ratios)} batches "
                                 f"of whole counts")
        return 100 * sum(r * s for r, s in zip(ratios, sizes)) / n_test

    # the authors' own number: verl's acc/mean@1 (prompts grouped by text; accuracy only when unique)
    reported_key = next((k for k in dicts["Final"] if re.fullmatch(r"val-\w+/.+/acc/mean@1", k)), None)
    frame = pd.DataFrame([s for s in steps if s["step"] >= 1])
    frame = frame.drop(columns=[c for c in frame if c.startswith("val")]).drop_duplicates("step", keep="last")
    rounds = len(frame)  # a step printed twice is one round, as in the steps table
    frame.insert(0, "file", path.name)
    row = {
        "file": path.name,
        "dataset": train_dir[:nominal.start()] if nominal else train_dir,
        "model": model.split("/")[-1],
        "n_adapt": int(nominal[1]) if nominal else n_kept,
        "n_adapt_kept": n_kept,  # after verl's prompt-length filter
        "epochs": trainer["total_epochs"],
        "n_gpus": trainer["n_gpus_per_node"] * trainer["nnodes"],
        "train_batch_size": data["train_batch_size"],
        "rounds": rounds,
        "optimizer_steps": rounds * (data["train_batch_size"] // mini_batch) * ppo_epochs,
        "warmup_rounds": int(ratio * total_steps),
        "temperature": rollout["temperature"],
        "votes": rollout.get("n_vote", rollout["n"]),
        "trained_rollouts": rollout["n"],
        "n_test": n_test,
        "initial_acc": accuracy(passes[0]),
        "final_acc": accuracy(passes[-1]),
        "reported_key": reported_key,
        "initial_reported": 100 * dicts["Initial"][reported_key] if reported_key else None,
        "final_reported": 100 * dicts["Final"][reported_key] if reported_key else None,
        "train_seconds": float(frame["timing_s/step"].sum()) if "timing_s/step" in frame else None,
    }
    return row, frame


def import_logs(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every *.log under `root` (a clone of the authors' repository or its verl/logs) parsed;
    empty files (Git LFS pointers or logs absent from a mirror) are skipped with a note."""
    runs, steps = [], []
    for path in sorted(Path(root).rglob("*.log"), key=lambda p: p.name):
        if path.stat().st_size == 0:
            continue
        row, frame = parse_log(path)
        runs.append(row)
        steps.append(frame)
    if not runs:
        raise AuthorLogError(f"{root}: no verl *.log files found")
    return pd.DataFrame(runs, columns=RUN_COLUMNS), pd.concat(steps, ignore_index=True)


def write_shipped(runs: pd.DataFrame, steps: pd.DataFrame, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    runs.to_csv(out_dir / "author_runs.csv", index=False, float_format="%.10g")
    steps.to_csv(out_dir / "author_steps.csv.gz", index=False, float_format="%.6g",
                 compression={"method": "gzip", "mtime": 0})  # the same bytes on every rebuild


def shipped_runs() -> pd.DataFrame:
    """The parsed rows of the public logs shipped with the package."""
    return pd.read_csv(AUTHOR_RUNS_CSV)


def shipped_steps() -> pd.DataFrame:
    with AUTHOR_STEPS_CSV.open("rb") as handle:
        return pd.read_csv(handle, compression="gzip")
