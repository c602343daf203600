"""The papers' claims (claims_registry.py) tested on our runs: each claim's two arms paired on the same items
and seeds, the paired difference with its 95% interval (paired.py), a verdict, and the published
difference beside it.

A claim is tested wherever both of its arms ran: on each cell (model, training set, dataset scored,
adaptation set and rerun protocol) and each seed both arms share, over the test items both scored. The
paper's own difference for a cell is read from published.csv where our model and dataset are the
paper's (config models.<m>.paper_name, tables.dataset_names) and our metric is the paper's; the range of
the paper's differences over all its cells is shown beside every claim.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd

from ..runs.path_levels import protocol_name
from .claims_registry import PAPER_METRICS, load_claims
from .paired import mcnemar_exact, interval_verdict, p_value_verdict, paired_bootstrap
from .paper_tables import METRICS, PROVENANCE

BOOTSTRAP_REPS = 2000
BOOTSTRAP_SEED = 0
# a claim's metric -> the primary metrics (runs.metric) of the runs it reads: their task's per-item scores
RUN_METRICS = {"acc": ("accuracy",), "pass@1": ("pass@1", "accuracy"), "giou": ("giou", "box_giou"),
               "count_acc": ("giou", "box_giou", "count_accuracy")}
CELL = ["model", "train", "dataset", "protocol"]
RESULT_COLUMNS = ["cells", "tested", "seeds", "items", "difference", "low", "high", "seed_sd", "test", "p",
                  "only_arm", "only_baseline", "verdict", "paper_cells", "paper_low", "paper_high"]


def item_scores(predictions: pd.DataFrame, claim_metric: str, run_metric: str) -> tuple[str, pd.Series] | None:
    """(our metric's name, per-item score in points indexed by item id), or None where the run's task has no
    such score (a grounding run for an accuracy claim). gIoU per item: intersection / union, 0 where both
    masks are empty (VisionReasoner's convention, evaluation/metrics.py); pass@1 per item: the share of its
    sampled completions that are right (greedy: right or not)."""
    if run_metric not in RUN_METRICS[claim_metric]:
        return None
    ids = predictions["id"].astype(str).to_numpy()
    if claim_metric == "giou":
        union = predictions["union"].to_numpy(dtype=float)
        inter = predictions["intersection"].to_numpy(dtype=float)
        label, values = run_metric, np.divide(inter, union, out=np.zeros_like(union), where=union > 0)
    elif claim_metric == "pass@1" and "n_samples" in predictions and predictions["n_samples"].notna().all():
        label, values = "pass@1", predictions["n_correct"].to_numpy(dtype=float) / predictions["n_samples"].to_numpy(dtype=float)
    else:
        label = "count_accuracy" if claim_metric == "count_acc" else "accuracy"
        values = predictions["correct"].to_numpy(dtype=float)
    return label, pd.Series(100 * values, index=ids)


def _prepared(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs with their provenance (a store from before it: ours, clean) and protocol label: the path level
    the plan gave the run (n20_random, n20_random_authors)."""
    runs = runs.assign(**{c: runs[c].fillna(d) if c in runs else d for c, d in PROVENANCE.items()})
    levels = zip(runs["n_adapt"], runs["sampling"], runs["protocol"])
    return runs.assign(label=[protocol_name(n, sampling, rerun) for n, sampling, rerun in levels])


def pair_runs(claim: dict, runs: pd.DataFrame) -> pd.DataFrame:
    """The claim's pairs of runs: one row per (arm run, baseline run) on the same model, dataset, items,
    rerun protocol and seed (and training set and adaptation set where both adapt), with its cell."""
    if "label" not in runs:
        runs = _prepared(runs)

    def arm(method: str) -> pd.DataFrame:
        frame = runs[runs["method"] == method]
        if method == "zero-shot":
            return frame
        if claim["train"] == "in-domain":
            frame = frame[frame["train_dataset"] == frame["target_dataset"]]
        return frame if claim["protocol"] == "any" else frame[frame["label"].str.startswith(claim["protocol"])]

    a, b = arm(claim["method"]), arm(claim["baseline"])
    if a.empty or b.empty:
        return pd.DataFrame(columns=[*CELL, "seed", "run_id", "run_id_b", "metric", "metric_b"])
    keys = ["model", "target_dataset", "items", "protocol", "seed"]
    if "zero-shot" not in (claim["method"], claim["baseline"]):
        keys += ["train_dataset", "n_adapt", "sampling"]
    pairs = a.merge(b, on=keys, suffixes=("", "_b"))
    if "n_adapt_b" in pairs:  # against the base model: the adapted arm names the cell
        # a base model evaluated under several adaptation sets (without exclusion they share one): the same set first
        same = (pairs["n_adapt"] == pairs["n_adapt_b"]) & (pairs["sampling"] == pairs["sampling_b"])
        pairs = pairs.assign(same=same).sort_values("same", ascending=False).drop_duplicates(["run_id"])
        if claim["method"] == "zero-shot":
            pairs = pairs.assign(train_dataset=pairs["train_dataset_b"], label=pairs["label_b"])
    return pd.DataFrame({
        "model": pairs["model"], "dataset": pairs["target_dataset"], "seed": pairs["seed"],
        "train": pairs["train_dataset"], "protocol": pairs["label"],
        "run_id": pairs["run_id"], "run_id_b": pairs["run_id_b"], "metric": pairs["metric"], "metric_b": pairs["metric_b"],
    }).sort_values([*CELL, "seed"], ignore_index=True)


def _train_of(method: str, name: str) -> str | None:
    """The training set `method` names under `name` ("echo@{train}" names "echo@GeoQA": "GeoQA"), "" for
    `name` itself, None for another method."""
    if "{train}" not in name:
        return "" if method == name else None
    prefix, _, suffix = name.partition("{train}")
    fits = method.startswith(prefix) and method.endswith(suffix) and len(method) > len(prefix) + len(suffix)
    return method[len(prefix):len(method) - len(suffix)] if fits else None


def published_differences(claim: dict, published: pd.DataFrame) -> pd.DataFrame:
    """The paper's own `arm - baseline` per model, dataset (and training set, "" where none is named) in the
    claim's tables, the tables' Mean columns left out."""
    arm, base = claim["paper_method"] or claim["method"], claim["paper_baseline"] or claim["baseline"]
    rows = []
    for table in filter(None, claim["tables"].split(";")):
        paper, number = table.split(":")
        cells = published[(published["paper"] == paper) & (published["table"] == int(number))
                          & published["metric"].isin(PAPER_METRICS[claim["metric"]])]
        sides = ({}, {})
        for method, model, dataset, metric, value in cells[["method", "model", "dataset", "metric", "value"]].itertuples(
                index=False):
            for side, name in zip(sides, (arm, base)):
                train = _train_of(method, name)
                if train is not None and not dataset.endswith("Mean"):
                    side[(model, dataset, metric, train)] = value
        for (model, dataset, metric, train), value in sides[0].items():
            # a baseline without a training set (the base model) pairs with the arm on every one
            other = sides[1].get((model, dataset, metric, train), sides[1].get((model, dataset, metric, "")))
            if other is not None:
                rows.append({"table": table, "model": model, "dataset": dataset, "train": train,
                             "difference": value - other})
    return pd.DataFrame(rows, columns=["table", "model", "dataset", "train", "difference"])


def _seed(*parts: str) -> list[int]:
    """A bootstrap's generator seed: the same for the same claim and cell, whatever else was run."""
    return [BOOTSTRAP_SEED, zlib.crc32("|".join(parts).encode())]


def _test(claim: dict, strata: list[dict], key: str, reps: int) -> dict:
    """The paired result over `strata` (each one seed of one cell: diffs, arm, base): the difference, its
    interval, the seed spread and the verdict (McNemar's where it fits: one seed of one cell, 0/1 scores)."""
    cells = {s["cell"] for s in strata}
    per_cell = {c: sum(s["cell"] == c for s in strata) for c in cells}
    weights = [1 / (len(cells) * per_cell[s["cell"]]) for s in strata]
    difference, low, high = paired_bootstrap([s["diffs"] for s in strata], weights, reps, _seed(claim["claim"], key))
    by_seed = pd.DataFrame({"seed": [s["seed"] for s in strata], "d": [s["diffs"].mean() for s in strata]})
    seed_means = by_seed.groupby("seed")["d"].mean()
    row = {"seeds": len(seed_means), "items": int(round(np.mean([len(s["diffs"]) for s in strata]))),
           "difference": difference, "low": low, "high": high,
           "seed_sd": float(seed_means.std()) if len(seed_means) > 1 else math.nan,
           "test": "paired bootstrap", "p": math.nan, "only_arm": math.nan, "only_baseline": math.nan,
           "verdict": interval_verdict(low, high, claim["direction"])}
    binary = claim["metric"] != "giou" and all(  # right or wrong per item (pass@1: greedy, one completion)
        np.isin(s["arm"], (0.0, 100.0)).all() and np.isin(s["base"], (0.0, 100.0)).all() for s in strata)
    if len(strata) == 1 and binary:
        only_arm, only_base, p = mcnemar_exact(strata[0]["arm"] > 0, strata[0]["base"] > 0)
        row.update(test="McNemar exact", p=p, only_arm=only_arm, only_baseline=only_base,
                   verdict=p_value_verdict(p, difference, claim["direction"]))
    return row


def _strata(claim: dict, pairs: pd.DataFrame, scores: dict) -> list[dict]:
    strata = []
    for pair in pairs.to_dict("records"):
        a = item_scores(scores[pair["run_id"]], claim["metric"], pair["metric"]) if pair["run_id"] in scores else None
        b = item_scores(scores[pair["run_id_b"]], claim["metric"], pair["metric_b"]) if pair["run_id_b"] in scores else None
        if a is None or b is None or a[0] != b[0]:
            continue
        common = a[1].index.intersection(b[1].index)
        if len(common):
            arm, base = a[1][common].to_numpy(), b[1][common].to_numpy()
            strata.append({"cell": tuple(pair[c] for c in CELL), "seed": pair["seed"], "metric": a[0],
                           "arm": arm, "base": base, "diffs": arm - base})
    return strata


def analyse(runs: pd.DataFrame, predictions: pd.DataFrame, published: pd.DataFrame, model_names: dict | None = None,
            dataset_names: dict | None = None, registry: pd.DataFrame | None = None,
            reps: int = BOOTSTRAP_REPS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(claims: one row per claim of the registry, "not run" where no pair of runs has both arms;
    claim_cells: one row per claim and cell tested, with the paper's difference where the cell is one of
    its own)."""
    registry = load_claims(published=published) if registry is None else registry
    model_names, dataset_names = model_names or {}, dataset_names or {}
    scores = dict(tuple(predictions.groupby("run_id"))) if not predictions.empty else {}
    runs = _prepared(runs[runs["method"].isin({*registry["method"], *registry["baseline"]})]) if not runs.empty else runs
    rows, cell_rows = [], []
    for claim in registry.to_dict("records"):
        pairs = pair_runs(claim, runs) if not runs.empty else pd.DataFrame()
        strata = _strata(claim, pairs, scores) if not pairs.empty else []
        paper = published_differences(claim, published)
        row = {**claim, **dict.fromkeys(RESULT_COLUMNS, math.nan), "cells": 0, "tested": "", "verdict": "not run",
               "paper_cells": len(paper), "paper_low": paper["difference"].min(), "paper_high": paper["difference"].max()}
        cells = list(dict.fromkeys(s["cell"] for s in strata))
        for cell in cells:
            in_cell = [s for s in strata if s["cell"] == cell]
            named = dict(zip(CELL, cell))
            cell_rows.append({"claim": claim["claim"], **named, "metric": in_cell[0]["metric"],
                              **_test(claim, in_cell, "|".join(cell), reps),
                              "published": _published_cell(claim, paper, named, in_cell[0]["metric"], model_names,
                                                           dataset_names)})
        if strata:
            row.update(_test(claim, strata, "all", reps), cells=len(cells),
                       tested="; ".join(f"{m}/{d}" for m, _, d, _ in cells))
        rows.append(row)
    claims = pd.DataFrame(rows)
    cell_columns = ["claim", *CELL, "metric", *RESULT_COLUMNS[2:13], "published"]
    return claims, pd.DataFrame(cell_rows, columns=cell_columns)


def _published_cell(claim: dict, paper: pd.DataFrame, cell: dict, metric: str, model_names: dict,
                    dataset_names: dict) -> float:
    """The paper's difference for our cell: our model and dataset (and training set) under the paper's
    names, scored with the paper's metric; NaN where the paper has no such cell."""
    if paper.empty or metric not in METRICS.get(claim["metric"], []):
        return math.nan
    hit = paper[(paper["model"] == model_names.get(cell["model"], cell["model"]))
                & (paper["dataset"] == dataset_names.get(cell["dataset"], cell["dataset"]))]
    if (hit["train"] != "").any():
        hit = hit[hit["train"] == dataset_names.get(cell["train"], cell["train"])]
    return float(hit["difference"].iloc[0]) if len(hit) else math.nan


def figure_points(claims: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """What the claims figure draws: one point and interval per claim and cell (model / dataset), the
    paper's difference for that cell where it has one, and the range of the paper's cells for the claim."""
    if cells.empty:
        return pd.DataFrame(columns=["claim", "label", "direction", "verdict", "difference", "low", "high",
                                     "published", "paper_low", "paper_high"])
    merged = cells.merge(claims[["claim", "direction", "paper_low", "paper_high"]], on="claim")
    label = (merged["claim"] + "\n" + merged["model"] + " / " + merged["dataset"] + " (" + merged["metric"] + ", "
             + merged["seeds"].astype(int).astype(str) + " x " + merged["items"].astype(int).astype(str) + " items)")
    return merged.assign(label=label)[["claim", "label", "direction", "verdict", "difference", "low", "high",
                                       "published", "paper_low", "paper_high"]]
