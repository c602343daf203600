"""Paper-style tables from the store, with the published numbers beside ours."""

from __future__ import annotations

import json

import pandas as pd

from .paper_tables import PROVENANCE

# How methods are labelled in the papers' tables (TTRV Table 1: "w/ TTRV" under the base row).
METHOD_LABELS = {
    "ttrv": "TTRV",
    "ttrl-majority": "TTRL",
    "ttrv-no-diversity": "TTRV w/o diversity",
    "ttrv-no-frequency": "TTRV w/o frequency",
    "random-reward": "Random reward",
    "dare": "DARE",
    "vr-ttrl": "VR-TTRL",
    "vr-ttrl-single-gen": "VR-TTRL (single gen)",
    "vr-ttrl-anti-consensus": "VR-TTRL (anti-consensus)",
    "vote-only": "Vote only",
}


def method_table(runs: pd.DataFrame, training_sets: frozenset = frozenset()) -> pd.DataFrame:
    """TTRV Table 1 layout: per model a base (zero-shot) row, a "w/ <method>" row per method
    and a delta row under each, datasets as columns plus their mean. In-domain runs (adapted and
    evaluated on the same dataset), and runs adapted on one of `training_sets` (a training split:
    ECHO's Geometry3k, VR-TTRL Table 11's), as "<method>@<training set>" in ECHO's naming."""
    if runs.empty:
        return pd.DataFrame(index=pd.Index([], name="Model"))
    trained = runs["train_dataset"].isin(training_sets)
    runs = runs.assign(method=runs["method"].where(~trained, runs["method"] + "@" + runs["train_dataset"]))
    in_domain = runs[(runs["method"] == "zero-shot") | (runs["train_dataset"] == runs["target_dataset"]) | trained]
    wide = in_domain.pivot_table(index=["model", "method"], columns="target_dataset", values="value", aggfunc="mean")
    wide["Mean"] = wide.mean(axis=1, skipna=False)
    rows = []
    for model in sorted(wide.index.get_level_values("model").unique()):
        if (model, "zero-shot") not in wide.index:
            continue
        base = wide.loc[(model, "zero-shot")]
        rows.append(pd.Series(base, name=model))
        methods = [m for m in wide.loc[model].index if m != "zero-shot"]
        for method in sorted(methods):
            adapted = wide.loc[(model, method)]
            label = METHOD_LABELS.get(method, method)
            rows.append(pd.Series(adapted, name=f"w/ {label}"))
            rows.append(pd.Series(adapted - base, name=f"Δ {label}"))
    table = pd.DataFrame(rows)
    table.index.name = "Model"
    table.columns.name = None
    return table.round(2)


def preparation_table(prep_stats: pd.DataFrame, published: pd.DataFrame, dataset_names: dict[str, str]) -> pd.DataFrame:
    """TTRV Table 8's layout for every prepared dataset: our original / kept counts and drops by
    reason beside the paper's n_original / n_used (blank where the paper has no such dataset)."""
    table8 = published[(published["paper"] == "ttrv") & (published["table"] == 8)]
    paper = table8.pivot_table(index="dataset", columns="metric", values="value", aggfunc="first")
    rows = []
    for stats in prep_stats.sort_values("dataset").to_dict("records") if not prep_stats.empty else []:
        name = dataset_names.get(stats["dataset"], stats["dataset"])
        dropped = json.loads(stats["dropped"]) if isinstance(stats["dropped"], str) else stats["dropped"]
        rows.append({"dataset": stats["dataset"], "paper column": name, "original": stats["original"],
                     "kept": stats["kept"], "dropped": ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())) or "–",
                     "paper original": paper["n_original"].get(name) if "n_original" in paper else None,
                     "paper used": paper["n_used"].get(name) if "n_used" in paper else None})
    return pd.DataFrame(rows, columns=["dataset", "paper column", "original", "kept", "dropped", "paper original",
                                       "paper used"])


RESCORED = {"accuracy_robust_parser": "ours: our parser, accuracy",
            "accuracy_authors_parser": "the authors' parser, accuracy",
            "authors_mean@1": "the authors' parser, verl mean@1",
            "authors_mean@max": "the authors' parser, verl mean@max"}


def run_protocols(runs: pd.DataFrame) -> pd.Series:
    """Each run's protocol (config `protocol`); a run stored before protocols existed ran ours, clean."""
    default = PROVENANCE["protocol"]
    return runs["protocol"].fillna(default) if "protocol" in runs else pd.Series(default, index=runs.index, dtype=object)


def rescoring_table(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """The same generations scored both ways (evaluation/tasks.py `rescored_metrics`), one row per MCQ run:
    our parser's accuracy, the TTRV authors' parser's, their verl mean@1 and mean@max (with the largest
    group's size), and how much of a gain is answer format: authors' accuracy minus ours."""
    empty = pd.DataFrame(columns=["model", "method", "dataset", *RESCORED.values(), "largest group", "authors - ours"])
    if metrics.empty or runs.empty:
        return empty
    wide = metrics[metrics["metric"].isin([*RESCORED, "authors_max_group"])].pivot_table(
        index="run_id", columns="metric", values="value", aggfunc="first")
    if wide.empty or "accuracy_robust_parser" not in wide:
        return empty
    # a store written before the authors' parser or the group size was scored: those cells are blank
    wide = wide.reindex(columns=[*wide.columns, *(m for m in ("accuracy_authors_parser", "authors_max_group")
                                                  if m not in wide)])
    # the run's protocol as a column where the store holds more than one (a run per protocol per cell)
    protocols = run_protocols(runs)
    keys = ["model", "method", "target_dataset"] + (["protocol"] if protocols.nunique() > 1 else [])
    keyed = runs.assign(protocol=protocols).drop_duplicates("run_id").set_index("run_id")[keys]
    table = keyed.join(wide, how="inner").rename(columns={"target_dataset": "dataset", **RESCORED,
                                                          "authors_max_group": "largest group"})
    table["authors - ours"] = table[RESCORED["accuracy_authors_parser"]] - table[RESCORED["accuracy_robust_parser"]]
    columns = ["model", "method", "dataset", *keys[3:], *[c for c in RESCORED.values() if c in table],
               "largest group", "authors - ours"]
    return table.reset_index(drop=True)[columns].sort_values(["model", "dataset", "method", *keys[3:]]).reset_index(drop=True)


def protocol_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs made under both protocols (config `experiments.<e>.protocols: [authors, clean]`), side by side
    from the same items: accuracy under each, and authors - clean, the part of a score that is the authors'
    template, parser, budget and update. One row per (model, method, dataset), seeds averaged."""
    columns = ["model", "method", "dataset", "authors", "clean", "authors - clean"]
    if runs.empty or "protocol" not in runs:
        return pd.DataFrame(columns=columns)
    runs = runs.assign(protocol=run_protocols(runs))
    scored = runs[runs["metric"] == "accuracy"]
    wide = scored.pivot_table(index=["model", "method", "target_dataset"], columns="protocol", values="value",
                              aggfunc="mean")
    if not {"authors", "clean"} <= set(wide.columns):
        return pd.DataFrame(columns=columns)
    wide = wide.dropna(subset=["authors", "clean"]).reset_index().rename(columns={"target_dataset": "dataset"})
    wide["authors - clean"] = wide["authors"] - wide["clean"]
    wide.columns.name = None
    return wide[columns].sort_values(["model", "dataset", "method"]).reset_index(drop=True)


def to_markdown(frame: pd.DataFrame, index: bool = True, digits: int = 2) -> str:
    """A GitHub-flavoured Markdown table; missing values print as "–"."""
    frame = frame.reset_index() if index else frame
    def cell(v):
        if isinstance(v, float):
            return "–" if pd.isna(v) else f"{v:.{digits}f}"
        return "–" if v is None else str(v)
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"
