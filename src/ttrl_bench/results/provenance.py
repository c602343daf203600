"""Where each published TTRV cell came from: the authors' log (author_runs) that produced it, or none.

A published value matches a log when it equals the log's full-test accuracy or the authors' own
acc/mean@1, truncated or rounded to 2 decimals (the paper truncates: 67.9255 -> 67.92). Flags:
- selected_on_test: the log is one of several epoch settings of the same run (the table shows the
  best on the test set; TTRV Appendix A describes 2 epochs),
- subset_metric: the value matches verl's mean@1 (samples grouped by prompt text), not accuracy,
- truncated: the value is the log's truncated, not rounded, to 2 decimals,
- collapsed: the log's final accuracy is more than 10 points below its initial one,
- no_log: no public log of this model and dataset,
- log_disagrees: logs exist but none gives the published value.
"""

from __future__ import annotations

import math

import pandas as pd

# the authors' log names -> the papers'
LOG_DATASETS = {"ai2d": "AI2D", "dtd": "DTD", "imagenet_1k": "ImageNet", "imagenet_a": "ImageNet-A",
                "imagenet_r": "ImageNet-R", "imagenet_s": "ImageNet-S", "imagenet_v2": "ImageNet-V2",
                "mathverse": "MathVerse", "mathvista": "MathVista", "resi45": "Resisc45"}
LOG_MODELS = {"InternVL2_5-4B": "InternVL2.5-4B", "InternVL3-2B": "InternVL3-2B", "InternVL3-8B": "InternVL3-8B",
              "Qwen2.5-VL-3B-Instruct": "Qwen2.5-VL-3B", "Qwen2.5-VL-7B-Instruct": "Qwen2.5-VL-7B"}
# the paper's method -> the adaptation samples its logs must have (None: any)
ADAPTED = {"ttrv": None, "ttrv-20-samples": 20, "ttrv-500-samples": 500}
FLAGS = ["selected_on_test", "subset_metric", "truncated", "collapsed", "no_log", "log_disagrees"]
COLUMNS = ["log_file", "log_value", "log_metric", "log_accuracy", "log_epochs", "epochs_tried", "log_n_adapt", "log_gpus",
           "log_rounds", "log_optimizer_steps", *FLAGS]
COLLAPSE_POINTS = 10.0


def _two_decimals(value: float) -> tuple[float, float]:
    """(truncated, rounded) to 2 decimals; the 1e-9 keeps 67.75 (stored as 67.7499...) at 67.75."""
    return math.floor(value * 100 + 1e-9) / 100, round(value, 2)


def _matches(value: float, published: float) -> str | None:
    if pd.isna(value):
        return None
    truncated, rounded = _two_decimals(value)
    if abs(rounded - published) < 1e-6:
        return "rounded"
    return "truncated" if abs(truncated - published) < 1e-6 else None


def log_runs(author_runs: pd.DataFrame) -> pd.DataFrame:
    """author_runs under the papers' model and dataset names, the exploratory logs left out
    (RESISC45's "online_plot" runs validate every round; "_old_prompt" runs used another prompt)."""
    runs = author_runs[~author_runs["file"].str.contains("online_plot|old_prompt")]
    return runs.assign(paper_model=runs["model"].map(LOG_MODELS), paper_dataset=runs["dataset"].map(LOG_DATASETS),
                       collapsed=runs["final_acc"] < runs["initial_acc"] - COLLAPSE_POINTS)


def _cell(row, runs: pd.DataFrame) -> dict:
    out = dict.fromkeys(FLAGS, False)
    # Table 11's means / stds over seeds and methods other than TTRV come from no single log
    if row["method"] not in ("zero-shot", *ADAPTED) or row["metric"] not in ("top1_acc", "acc"):
        return {**out, "no_log": True}
    candidates = runs[(runs["paper_model"] == row["model"]) & (runs["paper_dataset"] == row["dataset"])]
    adapted = row["method"] != "zero-shot"
    if adapted and ADAPTED.get(row["method"], -1) is not None:
        candidates = candidates[candidates["n_adapt"] == ADAPTED.get(row["method"], -1)]
    if candidates.empty:
        return {**out, "no_log": True}
    when = "final" if adapted else "initial"
    found = []
    for _, run in candidates.iterrows():
        for metric, column in (("accuracy", f"{when}_acc"), ("mean@1", f"{when}_reported")):
            how = _matches(run[column], row["value"])
            if how:
                found.append((run, metric, run[column], how))
    if found:  # accuracy before mean@1, then the fewest samples and epochs
        found.sort(key=lambda f: (f[1] != "accuracy", f[0]["n_adapt"], f[0]["epochs"]))
        run, metric, value, how = found[0]
        out.update(subset_metric=metric == "mean@1", truncated=how == "truncated")
    else:  # the nearest log, for the reader to see how far off
        run = candidates.loc[(candidates[f"{when}_acc"] - row["value"]).abs().idxmin()]
        metric, value = "accuracy", run[f"{when}_acc"]
        out["log_disagrees"] = True
    siblings = candidates[candidates["n_adapt"] == run["n_adapt"]]
    epochs = sorted(siblings["epochs"].unique())
    column = f"{when}_acc" if metric == "accuracy" else f"{when}_reported"
    best = not out["log_disagrees"] and value >= siblings[column].max()
    out.update(selected_on_test=adapted and len(epochs) > 1 and best,
               collapsed=adapted and bool(run["collapsed"]))
    # the log's full-test accuracy: what our accuracy compares with (None where no log gives the cell)
    accuracy = None if out["log_disagrees"] else run[f"{when}_acc"]
    return {**out, "log_file": run["file"], "log_value": value, "log_metric": metric, "log_accuracy": accuracy,
            "log_epochs": run["epochs"],
            "epochs_tried": ",".join(map(str, epochs)), "log_n_adapt": run["n_adapt"], "log_gpus": run["n_gpus"],
            "log_rounds": run["rounds"], "log_optimizer_steps": run["optimizer_steps"]}


def provenance(published: pd.DataFrame, author_runs: pd.DataFrame) -> pd.DataFrame:
    """Every TTRV cell of `published` (its KEY columns and value) with COLUMNS."""
    ttrv = published[published["paper"] == "ttrv"].reset_index(drop=True)
    runs = log_runs(author_runs)
    rows = pd.DataFrame([_cell(row, runs) for _, row in ttrv.iterrows()], columns=COLUMNS)
    rows[FLAGS] = rows[FLAGS].fillna(False).astype(bool)
    return pd.concat([ttrv, rows], axis=1)


def flag_counts(cells: pd.DataFrame) -> pd.DataFrame:
    """Published TTRV cells per flag (a cell can carry several), and those with a matching log."""
    counts = [{"flag": flag, "cells": int(cells[flag].sum())} for flag in FLAGS]
    matched = int((~cells["no_log"] & ~cells["log_disagrees"]).sum())
    return pd.DataFrame([{"flag": "log gives the published value", "cells": matched}, *counts,
                         {"flag": "all TTRV cells", "cells": len(cells)}])
