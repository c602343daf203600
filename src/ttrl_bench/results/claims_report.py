"""The claims as text: results/tables/claims.md (one row per claim, then one per claim and cell where a claim
was tested on several) and the section a results front page shows (`claims_section`)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .tables import to_markdown

TITLE = "The papers' claims, tested: paired differences over the same items and seeds"


def _signed(value: float) -> str:
    return "" if pd.isna(value) else f"{value:+.2f}"


def _interval(row) -> str:
    return "" if pd.isna(row["low"]) else f"[{row['low']:+.2f}, {row['high']:+.2f}]"


def _test(row) -> str:
    if row["verdict"] == "not run":
        return ""
    if row["test"] == "McNemar exact":
        return f"McNemar exact: {int(row['only_arm'])} vs {int(row['only_baseline'])} discordant, p = {row['p']:.2g}"
    return "paired bootstrap"


def _published(row) -> str:
    words = row["published_magnitude"]
    cells = "" if not row["paper_cells"] else (
        f"its cells: {row['paper_low']:+.2f} to {row['paper_high']:+.2f} ({int(row['paper_cells'])} cells)")
    return "; ".join(part for part in (words, cells) if part)


def scope_sentence(claims: pd.DataFrame, cells: pd.DataFrame) -> str:
    """What the runs behind the table can and cannot show, in one sentence."""
    run = claims[claims["verdict"] != "not run"]
    if run.empty:
        return "No claim has both of its arms run on the same items yet: every verdict is \"not run\"."
    seeds = int(run["seeds"].max())
    sets = cells.groupby("dataset")["items"].max()
    datasets = " and ".join(f"{n} {d}" for d, n in sets.sort_values(ascending=False).items())
    if seeds == 1:
        return (f"One seed on {datasets} items shows whether two runs' answers differ by more than the "
                "choice of test items explains (the interval and McNemar's test count only that), not whether the "
                "difference would survive another training seed or adaptation set, nor whether it holds on the "
                "papers' models and datasets: the seed sd column needs config/claims-3-seeds.yaml.")
    return (f"{seeds} seeds on {datasets} items: the interval counts which items were drawn (seeds "
            "are strata), the seed sd column how far a seed moves the difference; where the sd is near the "
            "interval's half-width, seeds matter as much as items.")


def claim_rows(claims: pd.DataFrame) -> pd.DataFrame:
    """claims.md's main table: one row per claim."""
    return pd.DataFrame({
        "claim": claims["claim"],
        "paper, where": claims["citation"],
        "claimed": claims["method"] + [" > " if d == "greater" else " < " for d in claims["direction"]]
        + claims["baseline"] + " (" + claims["metric"] + ")",
        "tested on": claims["tested"].fillna(""),
        "seeds x items": [f"{int(s)} x {int(n)}" if not pd.isna(s) else "" for s, n in zip(claims["seeds"], claims["items"])],
        "ours (points)": claims["difference"].map(_signed),
        "95% interval": claims.apply(_interval, axis=1),
        "test": claims.apply(_test, axis=1),
        "seed sd": [("" if v == "not run" else "one seed") if pd.isna(s) else f"{s:.2f}"
                    for s, v in zip(claims["seed_sd"], claims["verdict"])],
        "verdict": claims["verdict"],
        "published": claims.apply(_published, axis=1),
    })


def cell_rows(cells: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "claim": cells["claim"], "model": cells["model"], "trained on": cells["train"], "dataset": cells["dataset"],
        "protocol": cells["protocol"], "metric": cells["metric"], "seeds": cells["seeds"], "items": cells["items"],
        "ours (points)": cells["difference"].map(_signed), "95% interval": cells.apply(_interval, axis=1),
        "seed sd": cells["seed_sd"].map(lambda s: "" if pd.isna(s) else f"{s:.2f}"),
        "verdict": cells["verdict"], "published": cells["published"].map(_signed),
    })


def claims_markdown(claims: pd.DataFrame, cells: pd.DataFrame) -> str:
    """results/tables/claims.md."""
    counts = claims["verdict"].value_counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in ("supported", "contradicted", "not resolved", "not run") if v in counts)
    text = (f"# {TITLE}\n\n{summary} of {len(claims)} claims (results/data/claims.csv). Ours: arm - baseline over "
            "the items both scored, averaged over seeds and then over cells; supported / contradicted: the 95% "
            "interval (McNemar's exact test on one seed of 0/1 scores) excludes 0 on the claimed / the other "
            "side; not resolved: it does not.\n\n"
            f"{scope_sentence(claims, cells)}\n\n{to_markdown(claim_rows(claims), index=False)}")
    if not cells.empty and (claims["cells"].fillna(0) > 1).any():
        text += ("\n## Per claim and cell (published: the paper's own difference for that model and dataset)\n\n"
                 + to_markdown(cell_rows(cells), index=False))
    return text


def claims_section(db_path: Path, link: str = "tables/claims.md", figure: str | None = "figures/claims.png") -> list[str]:
    """The claims' section of a results front page (results/front_page.py), as Markdown lines: the verdicts
    counted, and links to the table (one row per claim) and the figure (None: not drawn); [] while no claim has both
    arms run."""
    from .store import read_table

    claims = read_table(Path(db_path), "claims")
    if claims.empty or (claims["verdict"] == "not run").all():
        return []
    counts = claims["verdict"].value_counts()
    verdicts = ", ".join(f"{int(counts.get(v, 0))} {v}" for v in ("supported", "contradicted", "not resolved", "not run"))
    return ["## The papers' claims, tested", "",
            f"{verdicts} of {len(claims)} claims, each paired over the same items and seeds:",
            f"[claims.md]({link})" + (f", [figure]({figure})" if figure else ""), ""]
