"""The papers' headline claims as data (data/claims.csv, beside published.csv): each a comparison of two arms
on the same items, read and checked here; claims.py tests them on our runs.

One row per claim:
  claim               its id (unique)
  paper               ttrv, vr-ttrl, echo, dare or t3rl
  citation            the paper (title or arXiv id) and the section / table / figure the claim is made in
  statement           the claim in words
  method, baseline    the two arms as our method names (adaptation/presets.py; zero-shot = the base model)
  paper_method,       the arms' names in published.csv where they differ from ours; "{train}" stands for the
  paper_baseline        training set's paper name (ECHO's "echo@Geometry3k")
  models              the paper's models it is shown on (";"-separated), or words for a text-only paper
  protocol            the adaptation set both arms use (n20_random: TTRV Appendix A's 20 random test samples),
                      or "any"
  train               in-domain (the adapted arm adapts on the dataset it is scored on), same (both arms
                      adapt on the same set, scored on any: ECHO), or any
  datasets            the paper's datasets it is shown on (";"-separated, or words)
  metric              acc, pass@1, giou or count_acc (the papers' metric names)
  direction           greater (arm > baseline) or less (arm < baseline)
  published_magnitude the paper's own words or numbers for the size, where its text gives them
  tables              the published.csv tables ("paper:N", ";"-separated) whose cells give the published
                      difference per model and dataset; empty for DARE and T3RL (text math, no rows)
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

import pandas as pd

from .paired import DIRECTIONS
from .table_specs import PAPER_TABLES

CLAIMS_CSV = files("ttrl_bench.results") / "data" / "claims.csv"
PUBLISHED_CSV = files("ttrl_bench.results") / "data" / "published.csv"
COLUMNS = ("claim", "paper", "citation", "statement", "method", "baseline", "paper_method", "paper_baseline",
           "models", "protocol", "train", "datasets", "metric", "direction", "published_magnitude", "tables")
PAPERS = ("ttrv", "vr-ttrl", "echo", "dare", "t3rl")
# a claim's metric -> the papers' metric names its cells carry in published.csv
PAPER_METRICS = {"acc": ("acc", "top1_acc"), "pass@1": ("pass@1",), "giou": ("giou",), "count_acc": ("count_acc",)}
TRAINS = ("in-domain", "same", "any")
_CITES = re.compile(r"\b(Section|Table|Tables|Figure|abstract|Appendix)\b", re.I)
_PROTOCOL = re.compile(r"n(\d+|all)_(random|biased-\d+)")
_OPTIONAL = {"paper_method", "paper_baseline", "published_magnitude", "tables"}


def _problems(row: dict, published: pd.DataFrame) -> list[str]:
    """What is wrong with one row, each naming its field."""
    from ..adaptation.presets import METHOD_NAMES  # here: it imports torch, which the rest of results needs not

    methods = {"zero-shot", *METHOD_NAMES}
    problems = [f"field {c}: empty" for c in COLUMNS if c not in _OPTIONAL and not row[c]]
    checks = {
        "paper": (row["paper"] in PAPERS, f"one of {PAPERS}"),
        "citation": (bool(_CITES.search(row["citation"])), "names no Section, Table, Figure, Appendix or abstract"),
        "method": (row["method"] in methods, "not a method of adaptation/presets.py (nor zero-shot)"),
        "baseline": (row["baseline"] in methods, "not a method of adaptation/presets.py (nor zero-shot)"),
        "protocol": (row["protocol"] == "any" or bool(_PROTOCOL.fullmatch(row["protocol"])),
                     "'any' or n<samples>_<sampling> (n20_random)"),
        "train": (row["train"] in TRAINS, f"one of {TRAINS}"),
        "metric": (row["metric"] in PAPER_METRICS, f"one of {tuple(PAPER_METRICS)}"),
        "direction": (row["direction"] in DIRECTIONS, f"one of {DIRECTIONS}"),
    }
    problems += [f"field {c}: {row[c]!r} {why}" for c, (ok, why) in checks.items() if row[c] and not ok]
    if row["method"] == row["baseline"]:
        problems.append("fields method and baseline: the same arm")
    for table in filter(None, row["tables"].split(";")):
        paper, _, number = table.partition(":")
        if not number.isdigit() or (paper, int(number)) not in PAPER_TABLES:
            problems.append(f"field tables: {table!r} is not a published table (paper:N of published.csv)")
            continue
        if paper != row["paper"]:
            problems.append(f"field tables: {table!r} is another paper's table")
        cells = published[(published["paper"] == paper) & (published["table"] == int(number))]
        for field, ours in (("paper_method", "method"), ("paper_baseline", "baseline")):
            name = row[field] or row[ours]
            pattern = re.escape(name).replace(re.escape("{train}"), ".+")
            if not cells["method"].str.fullmatch(pattern).any():
                problems.append(f"field {field if row[field] else ours}: {name!r} has no cell in {table}")
    return problems


def load_claims(path: Path | None = None, published: pd.DataFrame | None = None) -> pd.DataFrame:
    """The registry, checked: a bad row is an error naming the file, its line, its claim and the field."""
    source = path or CLAIMS_CSV
    frame = pd.read_csv(source, dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{source}: missing column(s) {missing}")
    published = pd.read_csv(PUBLISHED_CSV) if published is None else published
    errors = []
    for line, row in zip(range(2, len(frame) + 2), frame.to_dict("records")):
        row = {c: row[c].strip() for c in COLUMNS}
        errors += [f"{source}: line {line} (claim {row['claim'] or '?'}): {p}" for p in _problems(row, published)]
    repeated = sorted(frame.loc[frame["claim"].duplicated(), "claim"])
    if repeated:
        errors.append(f"{source}: claim id(s) {repeated} repeated")
    if errors:
        raise ValueError("\n".join(errors))
    return frame[list(COLUMNS)].apply(lambda column: column.str.strip())
