"""Figures from the store (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter, ScalarFormatter  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from .tables import METHOD_LABELS  # noqa: E402


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    fig.savefig(path.with_suffix(".pdf"))
    plt.close(fig)


def _in_domain(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[(runs["method"] == "zero-shot") | (runs["train_dataset"] == runs["target_dataset"])]


def accuracy_bars(runs: pd.DataFrame, path: Path, published: pd.DataFrame | None = None) -> None:
    """Base vs adapted scores per dataset (in-domain runs), one bar per method; a black tick on a
    bar marks the paper's value for that model, method and dataset where one is published
    (`published`: model, method, target_dataset, metric, value under our names). Value labels
    stand upright, so neighbours never overlap (59.1 beside 60.7); a score of 0 gets an x at the
    base, since its bar has no height; the legend sits right of the axes, off the bars."""
    wide = _in_domain(runs).pivot_table(index=["model", "target_dataset", "metric"], columns="method", values="value", aggfunc="mean")
    methods = ["zero-shot"] + sorted(c for c in wide.columns if c != "zero-shot")
    wide = wide.reindex(columns=[m for m in methods if m in wide.columns])
    paper = {} if published is None else published.set_index(["model", "target_dataset", "metric", "method"])["value"].to_dict()
    fig, ax = plt.subplots(figsize=(max(4, 1.6 * len(wide) + 2) + 1.8, 3.6))
    width = 0.8 / max(1, len(wide.columns))
    tick_label = "published"  # one legend entry for all ticks
    for i, method in enumerate(wide.columns):
        xs = [j + i * width for j in range(len(wide))]
        bars = ax.bar(xs, wide[method], width, label=METHOD_LABELS.get(method, method))
        # upright labels: inside tall bars (clear of the published ticks near their tops), above short ones
        values = wide[method].tolist()
        ax.bar_label(bars, [f"{v:.1f}" if v >= 15 else "" for v in values], fontsize=6, rotation=90,
                     label_type="center", color="white")
        ax.bar_label(bars, [f"{v:.1f}" if v < 15 else "" for v in values], fontsize=6, rotation=90, padding=6)
        zeros = [x for x, value in zip(xs, values) if value == 0]
        if zeros:
            ax.scatter(zeros, [1.0] * len(zeros), marker="x", s=18, color=bars.patches[0].get_facecolor(), zorder=3)
        ticks = [(x, paper[(*key, method)]) for x, key in zip(xs, wide.index) if (*key, method) in paper]
        if ticks:
            ax.scatter(*zip(*ticks), marker="_", s=200, color="black", zorder=3, label=tick_label)
            tick_label = None
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(wide))])
    ax.set_xticklabels([f"{m}\n{d}\n({metric})" for m, d, metric in wide.index], fontsize=8)
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 105)
    ax.set_yticks(range(0, 101, 20))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_title("Greedy scores before and after test-time RL", fontsize=9)
    _save(fig, path)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, transform=ax.transAxes)
    ax.set_axis_off()


def cross_dataset_heatmap(runs: pd.DataFrame, path: Path) -> None:
    """TTRV Figure 3: adapt on a dataset (rows), evaluate on another (columns); each cell the
    adapted score minus the same model's zero-shot score on the column's dataset, one panel per
    (model, method) with cross-dataset runs, at most 3 panels a row. In-domain runs fill the
    diagonal. Without any cross-dataset run the figure says so, at a readable size."""
    adapted = runs[runs["method"] != "zero-shot"] if not runs.empty else runs
    panels = [(key, frame) for key, frame in (adapted.groupby(["model", "method"]) if not adapted.empty else [])
              if (frame["train_dataset"] != frame["target_dataset"]).any()]
    if not panels:
        fig, ax = plt.subplots(figsize=(6, 3))
        _empty(ax, "No cross-dataset runs.\n\nAdapting on one dataset and evaluating on another takes\n"
                   "an experiment with `cross` pairs in the config\n(TTRV Table 12: experiments.table12_cross_dataset).")
        ax.set_title("Cross-dataset gains (TTRV Figure 3)", fontsize=9)
        _save(fig, path)
        return
    base = runs[runs["method"] == "zero-shot"].groupby(["model", "target_dataset"])["value"].mean()
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 4 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    grids = {}
    for key, frame in panels:
        frame = frame.assign(delta=frame["value"] - [base.get((key[0], t), float("nan")) for t in frame["target_dataset"]])
        grids[key] = frame.pivot_table(index="train_dataset", columns="target_dataset", values="delta", aggfunc="mean")
    # one colour scale for every panel, so equal colours mean equal gains
    limit = max([1.0] + [float(abs(grid).max().max()) for grid in grids.values() if not grid.isna().all().all()])
    for ax, ((model, method), grid) in zip(axes.flat, grids.items()):
        title = f"{model}: {METHOD_LABELS.get(method, method)}"
        if grid.isna().all().all():
            _empty(ax, f"{title}\nno zero-shot run to compare with")
            continue
        image = ax.imshow(grid, cmap="RdBu", vmin=-limit, vmax=limit)
        for (i, j), value in pd.DataFrame(grid.values).stack().items():
            ax.text(j, i, f"{value:+.1f}", ha="center", va="center", fontsize=7,
                    color="white" if abs(value) > 0.6 * limit else "black")
        ax.set_xticks(range(len(grid.columns)), grid.columns, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(grid.index)), grid.index, fontsize=7)
        ax.set_xlabel("evaluated on")
        ax.set_ylabel("adapted on")
        ax.set_title(title, fontsize=8)
        fig.colorbar(image, ax=ax, shrink=0.8, label="Δ vs zero-shot (points)")
    _save(fig, path)


def _per_sample(method: str) -> bool:
    from ..adaptation.presets import PRESETS, is_per_sample

    return method in PRESETS and is_per_sample(method)


def step_costs(train_log: pd.DataFrame, path: Path) -> None:
    """VR-TTRL Figures 2 and 3: wall time and mean completion length (tokens) per generation round,
    mean over seeds (and VR-TTRL's samples). The training log has one row per round (the reward's call:
    reward_bridge.GroupReward), its `seconds` the whole round's, generation and every optimizer step of it
    (4 in the demo); its `step` is the round's first optimizer step, so rounds are counted here, 1, 2, ...
    Per-sample methods (a round on one sample) get their own row: their few, long rounds would otherwise set
    the y-range of every curve. Legends sit right of the panels, off the curves. Logs written before
    completion_length was recorded leave its panels empty."""
    kinds = [] if train_log.empty else sorted(train_log["method"].map(_per_sample).unique())
    rows = [(False, "adaptation on a dataset (round: one generation batch and its optimizer steps)"),
            (True, "per-sample adaptation (round: one generation round on a sample, mean over samples)")]
    rows = [row for row in rows if row[0] in kinds] or rows[:1]
    if not train_log.empty:
        run = [c for c in ("model", "method", "train_dataset", "seed", "sample") if c in train_log]
        train_log = train_log.assign(round=train_log.groupby(run, dropna=False)["step"].rank(method="dense").astype(int))
    fig, axes = plt.subplots(len(rows), 2, figsize=(10, 3 * len(rows)), squeeze=False)
    for (per_sample, title), row_axes in zip(rows, axes):
        log = train_log[train_log["method"].map(_per_sample) == per_sample] if kinds else train_log
        for ax, column, label in ((row_axes[0], "seconds", "seconds per round"),
                                  (row_axes[1], "completion_length", "completion length (tokens)")):
            if log.empty or column not in log or log[column].isna().all():
                _empty(ax, f"{column} not in the training log")
                continue
            for (model, method, dataset), frame in log.groupby(["model", "method", "train_dataset"]):
                per_round = frame.groupby("round")[column].mean()
                ax.plot(per_round.index, per_round.values, marker=".", label=f"{model}: {METHOD_LABELS.get(method, method)} ({dataset})")
            ax.set_xlabel("generation round")
            ax.set_ylabel(label)
            # costs from zero (a 2-token wobble is not drawn as a swing), 10% head room over the highest
            ax.set_ylim(0, 1.1 * max(float(line.get_ydata().max()) for line in ax.get_lines()) or 1)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        row_axes[0].set_title(title, fontsize=8, loc="left")
        handles, labels = max((ax.get_legend_handles_labels() for ax in row_axes), key=lambda hl: len(hl[0]))
        if handles:  # one legend a row, for both panels
            row_axes[1].legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    fig.suptitle("Cost of adaptation per generation round (VR-TTRL Figures 2, 3)", fontsize=9)
    _save(fig, path)


# (our train_log column, the authors' author_steps key, panel label): what explains a gain. The
# majority-vote label accuracy is how often the pseudo-label TTRV rewards is right; the rollout
# accuracy alone (the share of correct votes) can fall while greedy accuracy rises.
CURVES = [
    ("label_accuracy", "train/label_accuracy", "majority-vote label accuracy"),
    ("majority_fraction", "train/majority_ratio", "majority ratio (votes for the majority answer)"),
    ("unparsable_fraction", None, "unparsable share of votes"),
    ("completion_length", "response_length/mean", "response length (tokens, log scale)"),
]


def _our_curves(axes, train_log: pd.DataFrame, window: int) -> None:
    """Per (model, method, dataset): per step (VR-TTRL: mean over its samples), a running mean over
    `window` steps per seed, then the mean over seeds with a min-max band."""
    if train_log.empty:
        for ax in axes:
            _empty(ax, "no adaptation runs")
        return
    for (model, method, dataset), frame in train_log.groupby(["model", "method", "train_dataset"]):
        color = None
        for ax, (column, _, _) in zip(axes, CURVES):
            if column not in frame or frame[column].isna().all():
                continue
            per_step = frame.groupby(["seed", "step"], as_index=False)[column].mean().sort_values("step")
            per_step["value"] = per_step.groupby("seed")[column].transform(lambda v: v.rolling(window, min_periods=1).mean())
            stats = per_step.groupby("step")["value"].agg(["mean", "min", "max"])
            few = len(stats) <= 3  # VR-TTRL's per-sample rounds: markers, not a line
            line = ax.plot(stats.index, stats["mean"], marker="o" if few else None, ls=":" if few else "-", color=color,
                           label=f"ours, {model}: {METHOD_LABELS.get(method, method)} ({dataset})")
            color = line[0].get_color()
            ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.15, color=color)
    for ax, (column, _, label) in zip(axes, CURVES):
        if column not in train_log or train_log[column].isna().all():
            _empty(ax, f"{column} not in the training log")
        ax.set_xlabel("adaptation step")


def _author_curves(axes, author_runs: pd.DataFrame, author_steps: pd.DataFrame, highlight: set[str]) -> None:
    """Every TTRV log's per-round curve against the fraction of its run (runs last 4 to 310 rounds),
    a 5-round running mean; collapsed runs (final accuracy > 10 points below initial) in red, the
    logs of our (model, dataset) pairs labelled, the median of the others in black."""
    from .provenance import log_runs

    runs = log_runs(author_runs).set_index("file")
    steps = author_steps[author_steps["file"].isin(runs.index)]
    grid = [i / 50 for i in range(51)]
    colors = iter(plt.cm.Dark2.colors * 4)  # not the default cycle, which our runs use
    highlight_colors = {file: next(colors) for file in sorted(highlight)}
    for ax, (_, key, label) in zip(axes, CURVES):
        if key is None:
            _empty(ax, "not in the authors' logs")
            continue
        curves = []
        for file, frame in steps.groupby("file"):
            frame = frame.sort_values("step")
            x = frame["step"] / frame["step"].max()
            y = frame[key].rolling(5, min_periods=1).mean()
            run = runs.loc[file]
            if file in highlight:
                ax.plot(x, y, lw=1.5, color=highlight_colors[file],
                        label=f"authors, {run['model']} {run['dataset']}: {file}")
            elif run["collapsed"]:
                ax.plot(x, y, color="tab:red", lw=0.8, alpha=0.6)
            else:
                ax.plot(x, y, color="grey", lw=0.5, alpha=0.3)
                curves.append(pd.Series(y.values, index=x.values).reindex(grid, method="nearest"))
        if curves:
            ax.plot(grid, pd.concat(curves, axis=1).median(axis=1), color="black", lw=1.8)
        ax.set_xlabel("fraction of the run (round / rounds)")
    # one legend entry per style, named once
    axes[0].plot([], [], color="grey", lw=0.8, label=f"authors' runs ({int((~runs['collapsed']).sum())} logs)")
    axes[0].plot([], [], color="tab:red", lw=0.8,
                 label=f"collapsed: final > 10 points below initial ({int(runs['collapsed'].sum())} logs)")
    axes[0].plot([], [], color="black", lw=1.8, label="median of the runs that did not collapse")


def training_curves(train_log: pd.DataFrame, path: Path, author_runs: pd.DataFrame | None = None,
                    author_steps: pd.DataFrame | None = None, highlight: set[str] = frozenset(), window: int = 10) -> None:
    """What explains a gain, ours (left, per adaptation step) beside the TTRV authors' runs (right,
    per rollout round, from their verl logs): the majority-vote label accuracy, the majority ratio,
    the unparsable share and the response length (TTRV Figure 1 right shows the first two).
    Fractions share a 0-1 axis and lengths a log axis, so no run with few points sets the range;
    the legends sit below the panels. `highlight`: log files of our own (model, dataset) pairs."""
    fig, axes = plt.subplots(len(CURVES), 2, figsize=(11, 2.6 * len(CURVES) + 1.2))
    _our_curves(axes[:, 0], train_log, window)
    if author_runs is None or author_runs.empty or author_steps is None or author_steps.empty:
        for ax in axes[:, 1]:
            _empty(ax, "no authors' logs in the store")
    else:
        _author_curves(axes[:, 1], author_runs, author_steps, highlight)
    for row, (column, _, label) in enumerate(CURVES):
        for ax in axes[row]:
            if ax.axison:
                ax.set_ylabel(label, fontsize=8)
                if column == "completion_length":
                    ax.set_yscale("log")
                    ax.yaxis.set_major_formatter(ScalarFormatter())  # 2, 10, 40: no 4x10^1
                    ax.yaxis.set_minor_formatter(NullFormatter())
                else:
                    ax.set_ylim(-0.02, 1.02)
    axes[0, 0].set_title(f"ours ({window}-step running mean; hidden labels used for plotting only)", fontsize=9)
    axes[0, 1].set_title("TTRV authors' verl logs (5-round running mean)", fontsize=9)
    handles = {}
    for ax in axes.flat:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(text, handle)
    fig.tight_layout(rect=(0, 0.01 + 0.013 * ((len(handles) + 1) // 2), 1, 1))
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=2, fontsize=7, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    fig.savefig(path.with_suffix(".pdf"))
    plt.close(fig)


def advantage_audit(frequency_only, full, num_generations: int, path: Path) -> None:
    """Advantages of TTRV (frequency + diversity) against its frequency term alone, under TRL's
    group and batch reward scaling: on the diagonal, the diversity term changed nothing."""
    from ..rewards.audit import grpo_advantages

    fig, axes = plt.subplots(1, 2, figsize=(7, 3.3), sharex=True, sharey=True)
    for ax, scale in zip(axes, ("group", "batch")):
        x = grpo_advantages(frequency_only, num_generations, scale)
        y = grpo_advantages(full, num_generations, scale)
        ax.scatter(x, y, s=6, alpha=0.5)
        lim = max(abs(x).max(), abs(y).max()) * 1.05
        ax.plot([-lim, lim], [-lim, lim], color="grey", lw=0.8, ls="--")
        ax.set_title(f'scale_rewards="{scale}"', fontsize=9)
        ax.set_xlabel("advantage, frequency term only")
    axes[0].set_ylabel("advantage, TTRV (frequency - 0.75 H)")
    fig.suptitle("TTRV's diversity term cancels under group scaling", fontsize=9)
    _save(fig, path)


VERDICT_COLOURS = {"supported": "tab:green", "contradicted": "tab:red", "not resolved": "tab:grey"}


def claims_forest(points: pd.DataFrame, not_run: list[str], path: Path) -> None:
    """The papers' claims tested (claims.figure_points): per claim and cell, our paired difference
    (arm - baseline, points) with its 95% interval, coloured by verdict; a black diamond at the paper's
    difference for that very cell where it has one, a grey bar over the range of the paper's cells of the
    claim (its models and datasets, for scale). Claims with no run are named below the axes."""
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.5 * max(1, len(points))))
    if points.empty:
        _empty(ax, "No claim has both of its arms run on the same items.")
    labels, legend = [], set()

    def once(text: str) -> str | None:  # one legend entry per kind of mark
        return None if text in legend or legend.add(text) else text

    for y, row in enumerate(points.to_dict("records")):
        if not pd.isna(row["paper_low"]):
            ax.plot([row["paper_low"], row["paper_high"]], [y, y], color="lightgrey", lw=7, solid_capstyle="butt",
                    zorder=1, label=once("the paper's cells\n(its models, datasets)"))
        ax.errorbar(row["difference"], y, xerr=[[row["difference"] - row["low"]], [row["high"] - row["difference"]]],
                    fmt="o", color=VERDICT_COLOURS.get(row["verdict"], "black"), capsize=3, zorder=3)
        if not pd.isna(row["published"]):
            ax.scatter(row["published"], y, marker="D", color="black", s=25, zorder=4, label=once("published, this cell"))
        labels.append(f"{row['label']}  [claimed {'>' if row['direction'] == 'greater' else '<'} 0: {row['verdict']}]")
    if labels:
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_xlabel("arm - baseline (points), paired over the same items; 95% interval")
        for verdict, colour in VERDICT_COLOURS.items():
            ax.errorbar([], [], fmt="o", color=colour, label=f"ours: {verdict}")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.set_title("The papers' claims on our runs", fontsize=9)
    if not_run:
        fig.text(0.01, 0.005, "not run: " + ", ".join(not_run), fontsize=6, wrap=True)
    fig.tight_layout(rect=(0, 0.04 if not_run else 0, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    fig.savefig(path.with_suffix(".pdf"))
    plt.close(fig)
