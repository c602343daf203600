"""Figures from the store (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .tables import METHOD_LABELS  # noqa: E402


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    fig.savefig(path.with_suffix(".pdf"))
    plt.close(fig)


def accuracy_bars(runs: pd.DataFrame, path: Path) -> None:
    """Base vs adapted accuracy per dataset (in-domain runs), one bar per method."""
    in_domain = runs[(runs["method"] == "zero-shot") | (runs["train_dataset"] == runs["target_dataset"])]
    wide = in_domain.pivot_table(index=["model", "target_dataset", "metric"], columns="method", values="value", aggfunc="mean")
    methods = ["zero-shot"] + sorted(c for c in wide.columns if c != "zero-shot")
    wide = wide.reindex(columns=[m for m in methods if m in wide.columns])
    fig, ax = plt.subplots(figsize=(max(4, 1.6 * len(wide) + 2), 3.2))
    width = 0.8 / len(wide.columns)
    for i, method in enumerate(wide.columns):
        xs = [j + i * width for j in range(len(wide))]
        bars = ax.bar(xs, wide[method], width, label=METHOD_LABELS.get(method, method))
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(wide))])
    ax.set_xticklabels([f"{m}\n{d}\n({metric})" for m, d, metric in wide.index], fontsize=8)
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title("Greedy scores before and after test-time RL", fontsize=9)
    _save(fig, path)


def training_curves(train_log: pd.DataFrame, path: Path, window: int = 10) -> None:
    """TTRV Figure 1 (right): rollout accuracy against the hidden labels and the entropy of the
    answer distribution per adaptation step (per generation round for VR-TTRL, averaged over its
    samples), as a running mean over `window` steps since each step sees different prompts; mean
    over seeds with a min-max band."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for (model, method, dataset), frame in train_log.groupby(["model", "method", "train_dataset"]):
        for ax, column, label in (
            (axes[0], "rollout_accuracy", "rollout accuracy"),
            (axes[1], "answer_entropy", "answer entropy (nats)"),
        ):
            # per seed and step (VR-TTRL: mean over its samples), then a running mean over steps
            per_step = frame.groupby(["seed", "step"], as_index=False)[column].mean().sort_values("step")
            per_step["value"] = per_step.groupby("seed")[column].transform(lambda v: v.rolling(window, min_periods=1).mean())
            stats = per_step.groupby("step")["value"].agg(["mean", "min", "max"])
            line = ax.plot(stats.index, stats["mean"], label=f"{model}: {METHOD_LABELS.get(method, method)} ({dataset})")
            ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.15, color=line[0].get_color())
            ax.set_xlabel("adaptation step")
            ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Adaptation dynamics, {window}-step running mean (hidden labels used for plotting only)", fontsize=9)
    _save(fig, path)


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
