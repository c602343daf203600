"""Every published table, regenerated from the store: each of the 587 published cells (published.csv)
with our value beside it, its 95% interval, the delta and a status: "agrees" (the paper's value, and
the authors' log's where one produced the cell, inside our interval), "differs" or "not run".

`our_cells` maps our runs onto the papers' vocabulary (models, methods, datasets, metrics) table
by table, as declared in TABLES (table_specs.py); `compare` joins that with the published cells;
`layout` and the writers lay one table out as the paper does (rows: model x method, columns: dataset
[x metric]).
"""

from __future__ import annotations

import math
import re

import pandas as pd
from scipy import stats

from .table_specs import PAPER_TABLES, TABLES, Table  # noqa: F401 (PAPER_TABLES: pt.PAPER_TABLES for its users)

KEY = ["paper", "table", "model", "method", "dataset", "metric"]

# The papers' metric -> ours; the first one a run has wins. seconds_per_sample is the per-sample adaptation
# time of VR-TTRL. VR-TTRL's gIoU / cIoU are SAM2-mask metrics (VisionReasoner's evaluation): only our SAM2
# masks' giou / ciou fill them; box_giou / box_ciou (the boxes as masks, no SAM2) are our own metrics, shown
# in the layout of our runs (ttrv_table1_layout), never in a published mask cell. bbox_ap is VisionReasoner's
# per-row box hit rate (evaluation/tasks.py bbox_hit; VR-TTRL Table 7).
METRICS = {
    "top1_acc": ["accuracy"], "acc": ["accuracy"],
    "pass@1": ["pass@1", "accuracy"],  # sampled pass@1 (ECHO, evaluation.math), else greedy accuracy
    "acc_mean": ["accuracy"], "acc_std": ["accuracy"],  # TTRV Table 11: over seeds
    "giou": ["giou"], "ciou": ["ciou"], "bbox_ap": ["bbox_ap"], "count_acc": ["count_accuracy"],
    "seconds_per_image": ["seconds_per_sample"],
}
# VR-TTRL Appendix A defines cIoU as the box Complete IoU and bbox_AP as COCO's AP over IoU 0.5:0.95, where
# VisionReasoner's code (the default, "code") computes a cumulative mask IoU and a box hit rate
# (evaluation/box_metrics.py); config evaluation.grounding.metric_definitions picks which fills the cells, and
# each cell's `our_metric` names the one it holds.
METRIC_DEFINITIONS = {"code": METRICS,
                      "appendix_a": {**METRICS, "ciou": ["box_complete_iou"], "bbox_ap": ["bbox_ap_coco"]}}
# How a cell aggregates over seeds. TTRV Table 11 says "mean and standard deviation over 5 seeds"
# without saying which std; we use the sample std (ddof=1, pandas' default): one seed gives no std.
SEED_AGGREGATE = {"acc_std": "std"}
# Paper metrics that are percentages of test items: a binomial (Wilson) interval over the items.
# gIoU / cIoU average per-item overlaps in [0, 1], whose variance is at most p(1 - p): the same
# interval is conservative for them.
PROPORTIONS = {"top1_acc", "acc", "pass@1", "acc_mean", "count_acc", "giou", "ciou", "bbox_ap"}
Z95 = stats.norm.ppf(0.975)


def wilson(percent: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion given in percent over n items, in percent."""
    if not n or pd.isna(n) or pd.isna(percent):
        return math.nan, math.nan
    p = percent / 100
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100 * (centre - half), 100 * (centre + half)


def interval(values: pd.Series, n: float, metric: str) -> tuple[float, float]:
    """95% interval of a cell: Wilson over test items; with several seeds also a t interval over
    the seeds (training randomness), and the cell gets the wider of the two on each side."""
    if metric not in PROPORTIONS:
        return math.nan, math.nan
    low, high = wilson(values.mean(), n)
    if len(values) > 1:
        half = stats.t.ppf(0.975, len(values) - 1) * values.std() / math.sqrt(len(values))
        low, high = min(low, values.mean() - half), max(high, values.mean() + half)
    return low, high


_RUN_KEYS = ["run_id", "model", "method", "train_dataset", "target_dataset", "n_adapt", "sampling", "seed"]
# whose test items a cell scored and under which protocol (results from before these columns: ours, clean)
PROVENANCE = {"items": "ours", "protocol": "clean"}
_OUT = [*KEY, "ours", "our_metric", "low", "high", *PROVENANCE]
# what a reader of a Markdown comparison needs; the CSV and the store keep every column
READER_COLUMNS = ["model", "method", "dataset", "metric", "paper_value", "ours", "low", "high", "delta", "status"]


def _paper_names(names: pd.Series, paper_name: dict) -> pd.Series:
    """Our model / dataset names under the papers' names; an unmapped one stands (a map with no hit is all-NaN
    float64, which pandas 4 will refuse to fill with strings)."""
    return names.map(lambda name: paper_name.get(name, name))


def _long_runs(runs: pd.DataFrame, metrics: pd.DataFrame, model_names: dict, dataset_names: dict) -> pd.DataFrame:
    """One row per (run, our metric), models and datasets under the papers' names."""
    if runs.empty:
        return pd.DataFrame(columns=[*_RUN_KEYS, "n", *PROVENANCE, "train", "target", "our_metric", "value"])
    scores = metrics if not metrics.empty else runs[["run_id", "metric", "value"]]
    # zero-shot adapts nothing: 0 s per image (VR-TTRL Table 8, "0 updates")
    seconds = runs["seconds_per_sample"] if "seconds_per_sample" in runs else pd.Series(float("nan"), runs.index)
    seconds = seconds.where(runs["method"] != "zero-shot", 0.0)
    per_sample = pd.DataFrame({"run_id": runs["run_id"], "metric": "seconds_per_sample", "value": seconds})
    runs = runs if "n" in runs else runs.assign(n=math.nan)  # test items behind each score
    runs = runs.assign(**{c: runs[c].fillna(d) if c in runs else d for c, d in PROVENANCE.items()})
    long = runs[[*_RUN_KEYS, "n", *PROVENANCE]].merge(pd.concat([scores[["run_id", "metric", "value"]], per_sample]).dropna(), on="run_id")
    return long.assign(
        model=_paper_names(long["model"], model_names),
        train=_paper_names(long["train_dataset"], dataset_names),
        target=_paper_names(long["target_dataset"], dataset_names),
    ).rename(columns={"metric": "our_metric"})


def _score_cells(key, spec: Table, cells: pd.DataFrame, long: pd.DataFrame, main: tuple[str, str],
                 metrics: dict = METRICS) -> list[pd.DataFrame]:
    out = []
    for paper_method in cells["method"].unique():
        ours = spec.methods.get(paper_method, paper_method)
        method, n_adapt, sampling, *train = (ours, None, None) if isinstance(ours, str) else ours
        protocol = (n_adapt or main[0], sampling or main[1])  # zero-shot: the main protocol (no table sets its own)
        rows = long[(long["method"] == method) & (long["n_adapt"] == protocol[0]) & (long["sampling"] == protocol[1])]
        if method == "zero-shot" and spec.cross:
            # the base model on each pair's target, under the pair's name
            pairs = pd.DataFrame({"dataset": cells["dataset"].unique()})
            pairs["target"] = pairs["dataset"].str.split("->").str[1]
            rows = rows.merge(pairs, on="target")
        elif spec.cross:
            rows = rows[rows["train"] != rows["target"]].assign(dataset=lambda f: f["train"] + "->" + f["target"])
        elif train:  # adapted on that training set, scored on each target
            rows = rows[rows["train"] == train[0]].assign(dataset=lambda f: f["target"])
        else:
            anywhere = method == "zero-shot" or method in spec.trained_elsewhere
            rows = rows[anywhere | (rows["train"] == rows["target"])].assign(dataset=lambda f: f["target"])
        rows = rows.assign(dataset=rows["dataset"].replace({name: paper for paper, name in spec.datasets.items()}))
        for metric in cells.loc[cells["method"] == paper_method, "metric"].unique():
            candidates = metrics.get(metric, [])
            found = rows[rows["our_metric"].isin(candidates)]
            # per run, the first candidate metric it has
            found = found.assign(rank=found["our_metric"].map(candidates.index)).sort_values("rank")
            found = found.drop_duplicates("run_id")
            if found.empty:  # most (table, method, metric) have no run: skip pandas' costly empty agg
                continue
            agg = found.groupby(["model", "dataset"], as_index=False).agg(
                ours=("value", SEED_AGGREGATE.get(metric, "mean")), our_metric=("our_metric", "first"),
                **{c: (c, _joined) for c in PROVENANCE})
            bounds = [interval(group["value"], group["n"].mean(), metric)
                      for _, group in found.groupby(["model", "dataset"])]  # same order as agg's rows
            agg[["low", "high"]] = pd.DataFrame(bounds, columns=["low", "high"])  # found has rows: bounds too
            out.append(agg.assign(paper=key[0], table=key[1], method=paper_method, metric=metric))
    return out


def _prep_cells(key, prep_stats: pd.DataFrame, dataset_names: dict) -> list[pd.DataFrame]:
    """TTRV Table 8: test samples before (n_original) and after (n_used) the resolution filter."""
    if prep_stats.empty:
        return []
    dataset = _paper_names(prep_stats["dataset"], dataset_names)
    return [pd.DataFrame({"paper": key[0], "table": key[1], "model": "-", "method": "resolution-filter",
                          "dataset": dataset, "metric": metric, "ours": prep_stats[column].astype(float),
                          "our_metric": f"prep_stats.{column}"})
            for metric, column in (("n_original", "original"), ("n_used", "kept"))]


def _latency_cells(key, benchmarks: pd.DataFrame, paper_models: set[str], model_names: dict) -> list[pd.DataFrame]:
    """TTRV Table 10 names no model or dataset: ours is the mean wall time of the Snakemake jobs,
    evaluate jobs for normal inference, GRPO adapt jobs of n<N>_* protocols for adapting on N.
    Only jobs of the paper's models count: the demo model's seconds say nothing about a 2-8B VLM."""
    if benchmarks.empty:
        return []
    model = benchmarks["job"].str.split("/").str[0]
    benchmarks = benchmarks[_paper_names(model, model_names).isin(paper_models)]
    n_adapt = benchmarks["job"].str.extract(r"(?:^|/)n(\d+|all)_", expand=False)
    groups = {"normal-inference": benchmarks["rule"] == "evaluate"}
    for n in n_adapt.dropna().unique():
        groups[f"adaptation-{n}-sample" + ("s" if n != "1" else "")] = (benchmarks["rule"] == "adapt") & (n_adapt == n)
    return [pd.DataFrame([{"paper": key[0], "table": key[1], "model": "unspecified", "method": method, "dataset": "all",
                           "metric": "latency_s", "ours": benchmarks.loc[mask, "seconds"].mean(),
                           "our_metric": f"benchmark s, mean of {int(mask.sum())} jobs"}])
            for method, mask in groups.items() if mask.any()]


def _means(cells: pd.DataFrame, ours: pd.DataFrame) -> pd.DataFrame:
    """"Mean" / "SegMean" / "CountMean" cells: the mean of our values over the table's datasets of
    that metric (the other columns of the block), only when we have every one of them."""
    rows = []
    for (paper, table, metric), group in cells.groupby(["paper", "table", "metric"]):
        mean_names = [d for d in group["dataset"].unique() if d.endswith("Mean")]
        parts = [d for d in group["dataset"].unique() if not d.endswith("Mean")]
        if not mean_names:
            continue
        mine = ours[(ours["paper"] == paper) & (ours["table"] == table) & (ours["metric"] == metric)
                    & ours["dataset"].isin(parts)]
        for (model, method), values in mine.groupby(["model", "method"]):
            if values["dataset"].nunique() == len(parts):
                # independent datasets: the mean's standard error from each part's interval
                se = math.sqrt((((values["high"] - values["low"]) / (2 * Z95)) ** 2).sum()) / len(values)
                for name in mean_names:
                    rows.append({"paper": paper, "table": table, "model": model, "method": method, "dataset": name,
                                 "metric": metric, "ours": values["ours"].mean(),
                                 "our_metric": values["our_metric"].iloc[0],
                                 **{c: _joined(values[c]) for c in PROVENANCE},
                                 "low": values["ours"].mean() - Z95 * se, "high": values["ours"].mean() + Z95 * se})
    return pd.DataFrame(rows, columns=_OUT)


def our_cells(published: pd.DataFrame, runs: pd.DataFrame, metrics: pd.DataFrame, prep_stats: pd.DataFrame,
              benchmarks: pd.DataFrame, model_names: dict[str, str], dataset_names: dict[str, str],
              main: tuple[str, str] = ("20", "random"), definitions: str = "code") -> pd.DataFrame:
    """Our value for every cell of the published tables we can fill: columns KEY, ours, our_metric
    (what we measured: giou for the papers' SAM2-mask gIoU, never box_giou). `published` gives each
    table's vocabulary; `main` is the main grid's (n_adapt, sampling); `definitions` which metric
    definitions fill VR-TTRL's cIoU and bbox_AP cells (METRIC_DEFINITIONS)."""
    if definitions not in METRIC_DEFINITIONS:
        raise ValueError(f"evaluation.grounding.metric_definitions must be one of {', '.join(METRIC_DEFINITIONS)}, "
                         f"got {definitions!r}")
    long = _long_runs(runs, metrics, model_names, dataset_names)
    parts = []
    for key, spec in TABLES.items():
        cells = published[(published["paper"] == key[0]) & (published["table"] == key[1])]
        if spec.source == "prep_stats":
            parts += _prep_cells(key, prep_stats, dataset_names)
        elif spec.source == "benchmarks":
            paper_models = set(published.loc[published["paper"] == key[0], "model"])
            parts += _latency_cells(key, benchmarks, paper_models, model_names)
        else:
            parts += _score_cells(key, spec, cells, long, main, METRIC_DEFINITIONS[definitions])
    ours = pd.concat([p for p in parts if not p.empty] or [pd.DataFrame(columns=_OUT)], ignore_index=True).reindex(columns=_OUT)
    ours = pd.concat([ours, _means(published, ours)], ignore_index=True) if not ours.empty else ours
    return ours.dropna(subset=["ours"])


def _status(row) -> str:
    """"agrees": the paper's value, and the accuracy of the authors' log that produced the cell
    (where one did), inside our 95% interval; without an interval (counts, seconds, a std), equal
    at the paper's 2 decimals. "differs" otherwise."""
    if pd.isna(row["ours"]):
        return "not run"
    if pd.isna(row["low"]):
        return "agrees" if round(row["ours"], 2) == round(row["paper_value"], 2) else "differs"
    values = [row["paper_value"]] + ([row["log_accuracy"]] if pd.notna(row.get("log_accuracy")) else [])
    return "agrees" if all(row["low"] <= v <= row["high"] for v in values) else "differs"


def compare(published: pd.DataFrame, ours: pd.DataFrame, provenance: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every published cell, in published.csv's order, with paper_value, ours, our_metric, our 95%
    interval (low, high), delta (ours - paper) and status; our cells without a published counterpart
    are dropped. `provenance` (results.provenance): the authors' log behind each TTRV cell, whose
    accuracy must fall inside our interval too, and its columns carried along."""
    ours = ours.drop_duplicates(KEY).reindex(columns=_OUT)
    merged = published.merge(ours, on=KEY, how="left").rename(columns={"value": "paper_value"})
    extra = []
    if provenance is not None:
        extra = [c for c in provenance.columns if c not in [*KEY, "value"]]
        merged = merged.merge(provenance.drop(columns="value"), on=KEY, how="left")
    merged["delta"] = merged["ours"] - merged["paper_value"]
    merged["status"] = merged.apply(_status, axis=1)
    return merged[[*KEY, "paper_value", "ours", "low", "high", "our_metric", "delta", "status", *PROVENANCE, *extra]]


def _number(value: float, metric: str) -> str:
    return f"{value:.0f}" if metric.startswith("n_") else f"{value:.2f}"  # TTRV Table 8 counts samples


def half_width(row) -> str:
    """" ±4.4": half our 95% interval's width (Wilson is slightly asymmetric), or "" without one."""
    low, high = row.get("low", math.nan), row.get("high", math.nan)
    return "" if pd.isna(low) else f" ±{(high - low) / 2:.1f}"


def cell_text(row) -> str:
    """"39.69 ±4.4 / 54.40 (−14.71, differs)": ours ± half our 95% interval / paper (delta, status),
    or "– / 54.40 (not run)"."""
    paper = _number(row["paper_value"], row["metric"])
    if row["status"] == "not run":
        return f"– / {paper} (not run)"
    delta = _number(row["delta"], row["metric"])
    delta = delta.replace("-", "−") if delta.startswith("-") else "+" + delta
    return f"{_number(row['ours'], row['metric'])}{half_width(row)} / {paper} ({delta}, {row['status']})"


def _run_configuration(row) -> str:
    return (f"{row['log_n_adapt']:.0f} samples, {row['log_epochs']:.0f} epochs (of {row['epochs_tried']}), "
            f"{row['log_gpus']:.0f} GPUs: {row['log_rounds']:.0f} rounds, {row['log_optimizer_steps']:.0f} optimizer steps")


def provenance_layout(comparison: pd.DataFrame) -> pd.DataFrame:
    """The cells an authors' log speaks to, as paper | authors' log (its value, metric and run
    configuration, flags) | ours (± half our 95% interval) | status."""
    from .provenance import FLAGS

    cells = comparison[comparison["log_file"].notna()] if "log_file" in comparison else comparison.iloc[:0]
    rows = [{"model": row["model"], "method": row["method"], "dataset": row["dataset"],
             "paper": _number(row["paper_value"], row["metric"]),
             "authors' log": f"{row['log_value']:.3f} ({row['log_metric']}"
                             + (f"; accuracy {row['log_accuracy']:.3f})" if row["log_metric"] != "accuracy"
                                and pd.notna(row["log_accuracy"]) else ")"),
             "log run": _run_configuration(row), "log file": row["log_file"],
             "flags": ", ".join(flag for flag in FLAGS if row[flag]) or "–",
             "ours": "–" if pd.isna(row["ours"]) else f"{row['ours']:.2f}{half_width(row)}", "status": row["status"]}
            for _, row in cells.iterrows()]
    return pd.DataFrame(rows, columns=["model", "method", "dataset", "paper", "authors' log", "log run", "log file",
                                       "flags", "ours", "status"])


def layout(comparison: pd.DataFrame) -> pd.DataFrame:
    """One table as the paper lays it out: rows (model, method), columns dataset, or
    "dataset (metric)" when a dataset has several metrics; paper order; "" where the paper has
    no cell."""
    several = comparison.groupby("dataset")["metric"].nunique().max() > 1
    column = comparison["dataset"] + (" (" + comparison["metric"] + ")" if several else "")
    frame = comparison.assign(column=column, text=comparison.apply(cell_text, axis=1))
    wide = frame.pivot_table(index=["model", "method"], columns="column", values="text", aggfunc="first")
    rows = list(dict.fromkeys(zip(frame["model"], frame["method"])))
    wide = wide.reindex(index=pd.MultiIndex.from_tuples(rows, names=["model", "method"]),
                        columns=list(dict.fromkeys(frame["column"]))).fillna("")
    wide.columns.name = None
    return wide


def summary_line(comparison: pd.DataFrame) -> str:
    counts = comparison["status"].value_counts()
    return (f"{counts.get('agrees', 0)} of {len(comparison)} published cells agree with ours, "
            f"{counts.get('differs', 0)} differ, {counts.get('not run', 0)} not run; cells read "
            "ours ±half our 95% interval / paper (ours - paper, status).")


def _joined(values: pd.Series) -> str:
    """The distinct values behind a cell, "+"-joined ("ours+ttrv-authors" for a Mean over both)."""
    return "+".join(sorted({part for v in values.dropna() for part in str(v).split("+")}))


ITEMS = {"ttrv-authors": "the TTRV authors' own (Akshit21112002/TTRV verl/data: their prompts, options, "
                         "answers and adaptation samples)",
         "ours": "ours (our own conversion: distractors, prompts and adaptation samples drawn here)"}
PROTOCOLS = {"authors": "authors (the TTRV authors' template, parser and evaluation budget; verl's update)",
             "clean": "clean (ours: the checkpoint's template, our parser; plan/protocols.py)"}


# A paper whose `authors` protocol is not the TTRV authors' pipeline: its own words (VR-TTRL has no code: its
# authors protocol is VisionReasoner's evaluation; ECHO's is user683/ECHO's; docs/protocols.md "VR-TTRL", "ECHO").
PAPER_PROTOCOLS = {"vr-ttrl": {"authors": "authors (VisionReasoner's evaluation @a455092: SAM2 hiera-large masks, "
                                          "best of three candidates; 840 x 840 input; lower-cased queries; 2,048 "
                                          "tokens; plan/protocols.py)"},
                   "echo": {"authors": "authors (the ECHO authors' code @6f7b311: their evaluation prompt, T 0.7, "
                                       "lenient grading; sampled-token confidence, boxed-only votes, their script's "
                                       "batch; plan/protocols.py)",
                            "clean": "clean (the paper's settings: the training prompt, T 0.6, exact grading, top-5 "
                                     "confidence; plan/protocols.py)"}}


def provenance_notes(comparison: pd.DataFrame) -> list[str]:
    """Whose test items each cell scored and under which protocol, e.g. "items: the TTRV authors' own ...
    for AI2D, DTD"; "protocol: authors (...) for AI2D, DTD"."""
    notes = []
    papers = set(comparison["paper"]) if "paper" in comparison else set()
    protocols = {**PROTOCOLS, **PAPER_PROTOCOLS.get(next(iter(papers)), {})} if len(papers) == 1 else PROTOCOLS
    for column, names in (("items", ITEMS), ("protocol", protocols)):
        if column not in comparison:  # a comparison made without provenance columns
            continue
        done = comparison[(comparison["status"] != "not run") & comparison[column].notna()]
        for value, group in done.groupby(column):
            described = " and ".join(names.get(v, v) for v in value.split("+"))
            notes.append(f"{column}: {described} for {', '.join(dict.fromkeys(group['dataset']))}")
    return notes


def metric_notes(comparison: pd.DataFrame) -> list[str]:
    """Which of our metrics stands in for each paper metric (e.g. accuracy for pass@1 of greedy runs)."""
    done = comparison[comparison["status"] != "not run"]
    return [f"{metric}: ours is {'; '.join(sorted(group['our_metric'].unique()))}"
            for metric, group in done.groupby("metric", sort=False)]


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$",
        "{": r"\{", "}": r"\}", "−": "$-$", "–": "--", "->": r"$\to$"}


def tex_escape(text: str) -> str:
    return re.sub("|".join(map(re.escape, sorted(_TEX, key=len, reverse=True))), lambda m: _TEX[m[0]], str(text))


def to_latex(frame: pd.DataFrame, caption: str) -> str:
    """A booktabs tabular (needs \\usepackage{booktabs}); hand-written to avoid a jinja2 dependency."""
    frame = frame.reset_index()
    row = lambda values: " & ".join(tex_escape(v) for v in values) + r" \\"
    return "\n".join([
        r"\begin{table}[t]", r"\centering", rf"\caption{{{tex_escape(caption)}}}",
        rf"\begin{{tabular}}{{{'l' * len(frame.columns)}}}", r"\toprule", row(frame.columns), r"\midrule",
        *(row(values) for values in frame.itertuples(index=False)),
        r"\bottomrule", r"\end{tabular}", r"\end{table}", "",
    ])


STATUSES = ["agrees", "differs", "not run"]


def fidelity_summary(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per (paper, table): published cells, how many agree with ours, differ, not run; and a total."""
    counts = pd.crosstab([comparison["paper"], comparison["table"]], comparison["status"])
    counts = counts.reindex(columns=STATUSES, fill_value=0).reindex(
        list(dict.fromkeys(zip(comparison["paper"], comparison["table"]))))
    counts = counts.rename(columns={"not run": "not_run"}).reset_index()
    counts.insert(2, "cells", counts[["agrees", "differs", "not_run"]].sum(axis=1))
    total = {"paper": "total", "table": "", **counts[["cells", "agrees", "differs", "not_run"]].sum().to_dict()}
    counts = pd.concat([counts, pd.DataFrame([total])], ignore_index=True)
    counts.columns.name = None
    return counts.astype({"cells": int, "agrees": int, "differs": int, "not_run": int})


def published_markers(published: pd.DataFrame, model_names: dict[str, str], dataset_names: dict[str, str]) -> pd.DataFrame:
    """The published score per (our model, method, dataset, our primary metric), from the first
    table reporting it: the paper's tick on the accuracy bars."""
    primary = {"top1_acc": "accuracy", "acc": "accuracy", "giou": "giou", "count_acc": "count_accuracy"}
    model = {paper: ours for ours, paper in model_names.items()}
    dataset = {paper: ours for ours, paper in dataset_names.items()}
    cells = published[published["metric"].isin(primary)]
    cells = cells.assign(model=cells["model"].map(model), target_dataset=cells["dataset"].map(dataset),
                         method=cells["method"].replace(TABLES[("vr-ttrl", 2)].methods),
                         metric=cells["metric"].map(primary))
    return cells.dropna(subset=["model", "target_dataset"]).drop_duplicates(
        ["model", "method", "target_dataset", "metric"])[["model", "method", "target_dataset", "metric", "value"]]
