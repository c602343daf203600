"""The DuckDB store: every job writes its own files, this module alone writes the database.

Ingest rebuilds every table from the files under results/ into a new database file, then
renames it over the old one: running it twice gives the same store, and a killed ingest leaves
the previous store intact.
"""

from __future__ import annotations

import json
import logging
import os
import re
from importlib.resources import files
from pathlib import Path

import duckdb
import pandas as pd

from ..runs.kill_points import kill_point
from .author_logs import shipped_runs, shipped_steps
from .claims import analyse

log = logging.getLogger(__name__)

PUBLISHED_CSV = files("ttrl_bench.results") / "data" / "published.csv"


# What one row of `runs` / `prep_stats` holds, read from each job's metrics.json / prep_stats.json.
RUN_COLUMNS = (
    "run_id", "model", "method", "train_dataset", "target_dataset", "n_adapt", "sampling", "seed", "metric",
    "value", "n", "n_unparsable", "eval_seconds", "adapt_seconds", "seconds_per_sample", "config_hash",
    "git_revision", "versions", "items", "protocol",
)
# absent for zero-shot rows; `items` (whose test items: "ttrv-authors" or "ours") and `protocol` ("clean" or
# "authors") absent from runs evaluated before 2026-11-26
OPTIONAL_RUN_COLUMNS = {"adapt_seconds", "seconds_per_sample", "items", "protocol"}
PREP_COLUMNS = ("dataset", "original", "kept", "resolution_rule")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err}); rerun the job that wrote it") from err


def _benchmarks(benchmark_dir: Path | None) -> pd.DataFrame:
    """Snakemake `benchmark:` files under results/benchmarks/<rule>/<wildcards...>.tsv: wall
    seconds and peak memory per job (TTRV Table 10's latencies)."""
    rows = []
    for path in sorted(benchmark_dir.rglob("*.tsv")) if benchmark_dir else []:
        frame = pd.read_csv(path, sep="\t")
        if frame.empty:
            continue
        rule, *job = path.relative_to(benchmark_dir).with_suffix("").parts
        # one row per repeat (`benchmark: repeat(...)`); we keep the mean
        rows.append({"rule": rule, "job": "/".join(job), "seconds": frame["s"].mean(), "max_rss_mb": frame["max_rss"].mean()})
    return pd.DataFrame(rows)


def _frames(eval_dirs: list[Path], adapt_dirs: list[Path], data_dirs: list[Path]) -> dict[str, pd.DataFrame]:
    runs, metric_rows, predictions, train_logs, prep = [], [], [], [], []
    for d in eval_dirs:
        metrics = _read_json(d / "metrics.json")
        missing = set(RUN_COLUMNS) - set(metrics) - OPTIONAL_RUN_COLUMNS
        if missing:
            raise ValueError(f"{d / 'metrics.json'}: missing key(s) {sorted(missing)}; rerun the job that wrote it")
        run = {key: metrics.get(key) for key in RUN_COLUMNS}
        run["n_adapt"] = str(run["n_adapt"])  # an int or "all"
        run["versions"] = json.dumps(metrics["versions"], sort_keys=True)
        runs.append(run)
        metric_rows.extend({"run_id": metrics["run_id"], "metric": k, "value": v} for k, v in metrics["metrics"].items())
        frame = pd.read_parquet(d / "predictions.parquet")
        frame.insert(0, "run_id", metrics["run_id"])
        predictions.append(frame)
    for d in adapt_dirs:
        meta = _read_json(d / "run.json")
        frame = pd.read_parquet(d / "train_log.parquet")
        for key in ("model", "method", "train_dataset", "seed"):
            frame.insert(0, key, meta[key])
        train_logs.append(frame)
    for d in data_dirs:
        stats = _read_json(d / "prep_stats.json")
        prep.append({**{key: stats[key] for key in PREP_COLUMNS}, "dropped": json.dumps(stats["dropped"], sort_keys=True)})
    return {
        "runs": pd.DataFrame(runs),
        "metrics": pd.DataFrame(metric_rows),
        "predictions": pd.concat(predictions, ignore_index=True) if predictions else pd.DataFrame(),
        "train_log": pd.concat(train_logs, ignore_index=True) if train_logs else pd.DataFrame(),
        "prep_stats": pd.DataFrame(prep),
        "published": pd.read_csv(PUBLISHED_CSV),
        # the TTRV authors' runs, parsed from their public verl logs (`ttrl-bench import-author-logs`)
        "author_runs": shipped_runs(),
        "author_steps": shipped_steps(),
    }


def ingest(db_path: Path, eval_dirs: list[Path], adapt_dirs: list[Path], data_dirs: list[Path],
           benchmark_dir: Path | None = None, model_names: dict | None = None,
           dataset_names: dict | None = None) -> dict[str, int]:
    """Rebuild the store at `db_path` from job outputs; returns row counts per table. The papers' claims are
    tested on the runs here (claims.py: `claims`, `claim_cells`), our names mapped to the papers' by
    `model_names` / `dataset_names` for the published differences."""
    frames = {**_frames(eval_dirs, adapt_dirs, data_dirs), "benchmarks": _benchmarks(benchmark_dir)}
    frames["claims"], frames["claim_cells"] = analyse(frames["runs"], frames["predictions"], frames["published"],
                                                      model_names, dataset_names)
    tmp = db_path.with_suffix(".duckdb.tmp")
    tmp.unlink(missing_ok=True)
    counts = {}
    with duckdb.connect(str(tmp)) as con:
        for name, frame in frames.items():
            if frame.empty:
                continue
            con.register("frame", frame)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
            con.unregister("frame")
            counts[name] = len(frame)
            kill_point("ingest")  # tests/workflow/test_resume.py: a kill with part of the store written
    os.replace(tmp, db_path)
    log.info("ingested %s into %s", counts, db_path)
    return counts


class StoreLockedError(RuntimeError):
    """Another process holds the store read-write; the same command works once it lets go."""

    transient = True


def _lock_holder(message: str) -> str | None:
    """"python3.11 (PID 123: python -m ttrl_bench.cli ingest ...)" from DuckDB's lock error."""
    held = re.search(r"Conflicting lock is held in (.+?) \(PID (\d+)\)", message)
    if not held:
        return None
    program, pid = held.groups()
    try:  # what the process runs, where /proc says (Linux)
        program = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip() or program
    except OSError:
        pass
    return f"PID {pid}: {program}"


def connect_read_only(db_path: Path):
    """Readers never take the write lock; a store another process holds read-write (an ingest,
    a DuckDB shell) is an error naming that process."""
    try:
        return duckdb.connect(str(db_path), read_only=True)
    except duckdb.IOException as err:
        holder = _lock_holder(str(err))
        if holder is None:
            raise
        raise StoreLockedError(f"{db_path} is held read-write by another process ({holder}); "
                               "close it or let it finish") from err


def query(db_path: Path, sql: str) -> pd.DataFrame:
    with connect_read_only(db_path) as con:
        return con.execute(sql).df()


def read_table(db_path: Path, name: str) -> pd.DataFrame:
    """A whole table, or an empty frame where ingest had no rows for it (it creates none then)."""
    with connect_read_only(db_path) as con:
        names = {row[0] for row in con.execute("SHOW TABLES").fetchall()}
        return con.execute(f"SELECT * FROM {name}").df() if name in names else pd.DataFrame()
