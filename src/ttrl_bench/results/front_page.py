"""results/README.md, the front page of a results tree (issue 57): what ran, with counts; per published
table, its cells run, agreeing, differing and not run; the headline rows in TTRV Table 1's layout; every
figure embedded; the long tables linked, never inlined. At most 60 lines of at most 120 characters: a
person reads it first, the tables and the store (benchmark.duckdb) keep everything."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd

from .tables import to_markdown

WIDTH, LINES, HEADLINE_ROWS = 120, 60, 11

# the workflow's figures (rules/aggregate.smk plot_figures, audit_rewards), each with what it shows
FIGURES = [("figures/accuracy.png", "accuracy per dataset and method (ticks: the published values)"),
           ("figures/training_curves.png", "training curves (TTRV Figure 1 right)"),
           ("figures/cross_dataset.png", "adapted on one dataset, evaluated on another (TTRV Figure 3)"),
           ("figures/step_costs.png", "seconds and completion length per generation round (VR-TTRL Figures 2, 3)"),
           ("audit/reward_audit.png", "the advantages each reward gives GRPO (docs/rewards.md)")]
# the long tables, linked where they exist (claims.md is written by another rule when it runs)
TABLES = [("tables/ttrv_table1_layout.md", "our runs in TTRV Table 1's layout, every column, both parsers"),
          ("tables/fidelity.md", "published cells against ours, per table, and where TTRV's cells come from"),
          ("tables/claims.md", "the papers' claims against our runs"),
          ("tables/data_preparation.md", "samples before and after preparation (TTRV Table 8's layout)"),
          ("benchmark.duckdb", "the store: every run, metric, prediction and training-log row")]


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, break_on_hyphens=False)


def what_ran(runs: pd.DataFrame, config_files: list[str]) -> list[str]:
    """One paragraph: the config, and the runs' models, methods, datasets (items evaluated), protocols, seeds."""
    config = " + ".join(config_files) or "this directory's config"
    if runs.empty:
        return _wrapped(f"Config {config}: nothing evaluated yet.")
    primary = runs.drop_duplicates("run_id")
    adapted = primary[primary["method"] != "zero-shot"]
    adaptations = adapted.drop_duplicates(["model", "method", "train_dataset", "n_adapt", "sampling", "seed",
                                           "protocol"])  # a cross-dataset pair's adaptation, evaluated twice
    items = primary.groupby("target_dataset")["n"].max()
    methods = sorted(primary["method"].unique())
    parts = [f"Config {config}: {len(primary)} evaluations ({len(primary) - len(adapted)} zero-shot), "
             f"{len(adaptations)} adaptations.",
             f"Models ({primary['model'].nunique()}): {', '.join(sorted(primary['model'].unique()))}.",
             f"Methods ({len(methods)}): {', '.join(methods)}.",
             f"Datasets ({len(items)}, items evaluated): {', '.join(f'{d} ({int(n)})' for d, n in items.items())}.",
             f"Protocols: {', '.join(sorted(primary['protocol'].dropna().unique())) or 'not recorded'}; adaptation sets: "
             f"{', '.join(sorted({f'{n} {s}' for n, s in zip(adapted['n_adapt'], adapted['sampling'])})) or 'none'}; "
             f"seeds: {', '.join(map(str, sorted(primary['seed'].unique())))}."]
    return _wrapped(" ".join(parts))


def cell_counts(fidelity: pd.DataFrame, link, compact: bool = False) -> list[str]:
    """Per published table (fidelity_summary's rows): cells, run, agree, differ, not run; the table linked.
    `compact`: the tables of which no cell ran in one line after the others."""
    rows = fidelity[fidelity["paper"] != "total"]
    frame = pd.DataFrame({
        "table": [link(f"tables/{p}_table{t}.md", f"{p} {t}") for p, t in zip(rows["paper"], rows["table"])],
        "cells": rows["cells"], "run": rows["agrees"] + rows["differs"], "agree": rows["agrees"],
        "differ": rows["differs"], "not run": rows["not_run"]})
    if not compact:
        return to_markdown(frame, index=False, digits=0).splitlines()
    idle = frame[frame["run"] == 0]
    return to_markdown(frame[frame["run"] > 0], index=False, digits=0).splitlines() + _wrapped(
        f"No cell run in {len(idle)} tables: {', '.join(idle['table'])}.")


def headline_rows(table1: pd.DataFrame, link) -> list[str]:
    """TTRV Table 1's layout (model row, "w/" and "Δ" rows), as many dataset columns as fit the width (the
    Mean always), the first HEADLINE_ROWS rows; the rest in the linked layout table."""
    if table1.empty:
        return ["No zero-shot and adapted accuracy runs to lay out."]
    columns = list(table1.columns)
    while len(columns) > 1 and max(map(len, to_markdown(table1[columns]).splitlines())) > WIDTH:
        columns.pop(-2)  # the last dataset before the Mean
    shown = to_markdown(table1[columns].head(HEADLINE_ROWS)).splitlines()
    left = [f"{len(table1) - HEADLINE_ROWS} more rows"] if len(table1) > HEADLINE_ROWS else []
    left += [f"{len(table1.columns) - len(columns)} more columns"] if len(columns) < len(table1.columns) else []
    return shown + ([f"({', '.join(left)}: {link('tables/ttrv_table1_layout.md', 'the layout table')})"] if left else [])


def front_page(runs: pd.DataFrame, fidelity: pd.DataFrame, table1: pd.DataFrame, results: Path,
               config_files: list[str], claims: list[str] = ()) -> str:
    """The page's text; links are relative to `results`, and only files that exist there are linked. `claims`:
    the claims' section (claims_report.claims_section), shown before the figures."""
    def link(path: str, text: str) -> str:
        return f"[{text}]({path})" if (results / path).exists() else text

    total = fidelity[fidelity["paper"] == "total"].iloc[0]
    for compact in (False, True):  # every table a row, unless the page would run past LINES
        lines = ["# Results", "", *what_ran(runs, config_files), "",
                 f"## Published cells: {int(total['agrees'])} agree, {int(total['differs'])} differ, "
                 f"{int(total['not_run'])} not run of {int(total['cells'])} (agree: the paper's value in our 95% "
                 "interval)", "", *cell_counts(fidelity, link, compact), "",
                 "## Headline: our accuracy in TTRV Table 1's layout (%)", "", *headline_rows(table1, link), "",
                 *claims, "## Figures and tables", ""]
        lines += [f"![{text}]({path})" for path, text in FIGURES if (results / path).exists()]
        lines += [f"- [{Path(path).name}]({path}): {text}" for path, text in TABLES if (results / path).exists()]
        if len(lines) <= LINES:
            break
    return "\n".join(lines) + "\n"


def config_files_of(results: Path) -> list[str]:
    """The config files the results tree was claimed for (plan/results_tree.py), if recorded."""
    record = results / "config_files.json"
    return json.loads(record.read_text())["config_files"] if record.exists() else []
