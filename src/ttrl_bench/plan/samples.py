"""How many samples a job sees: a dataset's test split (prepared, bundled or a local copy's rows) and the
adaptation samples a job's batch layout is planned for.

Layer 2 of the plan (grid): imports grid.py (docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

import json
from pathlib import Path

from ..datasets.readers.bundled import BUNDLED_TEST_SIZES
from ..datasets.registry import REGISTRY
from .grid import adaptation_samples


def split_size(plan, dataset: str) -> int | None:
    """Test samples of a dataset (a training set's rows for ECHO's geometry3k / geoqa): its
    prep_stats.json once prepared, the bundled sets' known size before; None where only
    preparation can tell (the resolution filter drops some)."""
    stats = Path(f"{plan.results}/data/{dataset}/prep_stats.json")
    if stats.exists():
        return json.loads(stats.read_text())["splits"].get(REGISTRY[dataset].manifest_split, 0)
    return BUNDLED_TEST_SIZES.get(dataset)


def local_rows(plan, dataset: str) -> tuple[int, str] | None:
    """Before preparation, the rows of a local JSON-lines copy (config `data.sources.<name>.path`): an upper bound
    of its samples (the resolution filter may drop some), and the copy's path; None for other sources."""
    source = plan.config["data"]["sources"].get(dataset) or {}
    path = Path(source["path"]) if source.get("path") else None
    if path is None or not path.is_dir() or source.get("format") not in (None, "json"):
        return None
    files = sorted(path.glob(source.get("files") or REGISTRY[dataset].local.get("files") or "**/*.jsonl"))
    if not files or any(f.suffix != ".jsonl" for f in files):
        return None
    return sum(1 for f in files for line in f.read_text().splitlines() if line.strip()), str(path)


def layout_samples(plan, job) -> int | None:
    """The adaptation samples a job's batch layout is planned for: one for a per-sample job (each adapt
    call sees one sample), else the protocol's; for "all" the prepared split's (None before)."""
    if job.rule == "adapt_per_sample":
        return 1
    return adaptation_samples(job.protocol) or split_size(plan, job.dataset)
