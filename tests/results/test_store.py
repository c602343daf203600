"""results/store.py.

What the store makes of each job's files, checked row by row and column by column: the `runs` row of an
adapted run and of an old zero-shot run (OPTIONAL_RUN_COLUMNS absent), predictions and training logs of
several jobs stacked under their identity columns, prep_stats with its `dropped` counts, Snakemake
benchmark TSVs (an empty one before a full one), ingest of nothing and ingest run twice on the same store
(a stale temporary file of a killed ingest included), and read-only connections: that they are read-only,
and the error naming the process that holds the store read-write (DuckDB's real lock message, provoked by
a second process).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import warnings
from contextlib import contextmanager

import duckdb
import pandas as pd
import pytest

from ttrl_bench.results.author_logs import shipped_runs, shipped_steps
from ttrl_bench.results.claims_registry import load_claims
from ttrl_bench.results.store import (
    PREP_COLUMNS,
    PUBLISHED_CSV,
    RUN_COLUMNS,
    StoreLockedError,
    _benchmarks,
    _frames,
    _lock_holder,
    connect_read_only,
    ingest,
    read_table,
)

# the shipped tables every ingest loads (tests/results/test_tables.py), counted from the files themselves: at this
# writing published.csv has 587 rows, the TTRV authors' logs 71 readable runs and 5020 rounds
# and the claims (results/data/claims.csv), each a row of the claims table, "not run" without runs
SHIPPED = {"published": len(pd.read_csv(str(PUBLISHED_CSV))), "author_runs": len(shipped_runs()),
           "author_steps": len(shipped_steps()), "claims": len(load_claims())}


def _metrics(run_id, *, method="ttrv", optional=True, versions=None):
    metrics = {
        "run_id": run_id, "model": "m", "method": method, "train_dataset": "d", "target_dataset": "d",
        "n_adapt": 20, "sampling": "random", "seed": 1, "metric": "accuracy", "value": 50.0, "n": 2,
        "n_unparsable": 1, "eval_seconds": 0.5, "config_hash": "abc", "git_revision": "deadbeef",
        "versions": versions or {"torch": "2.5", "numpy": "2.0"},  # not in sorted order
        "metrics": {"accuracy": 50.0, "unparsable_rate": 50.0},
    }
    if optional:
        metrics.update({"adapt_seconds": 12.0, "seconds_per_sample": 0.25, "items": "ours", "protocol": "clean"})
    return metrics


def _eval_dir(root, name, metrics, ids=("a", "b")):
    d = root / name
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps(metrics))
    pd.DataFrame({"id": list(ids), "correct": [True, False][: len(ids)]}).to_parquet(d / "predictions.parquet")
    return d


def _adapt_dir(root, name, meta, steps):
    d = root / name
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps(meta))
    pd.DataFrame({"step": steps, "reward": [0.5] * len(steps)}).to_parquet(d / "train_log.parquet")
    return d


def _data_dir(root, name, dropped):
    d = root / name
    d.mkdir(parents=True)
    (d / "prep_stats.json").write_text(json.dumps(
        {"dataset": name, "items": "ours", "original": 10, "kept": 7, "dropped": dropped,
         "resolution_rule": "either_side", "splits": {"test": 7}}))
    return d


def test_runs_row_of_an_adapted_run_holds_every_column_with_sorted_versions(tmp_path):
    """One row, columns exactly RUN_COLUMNS in order; n_adapt 20 becomes the string "20" and versions
    {"torch": "2.5", "numpy": "2.0"} the JSON text with sorted keys '{"numpy": "2.0", "torch": "2.5"}'."""
    d = _eval_dir(tmp_path, "e", _metrics("r1"))
    runs = _frames([d], [], [])["runs"]
    assert list(runs.columns) == list(RUN_COLUMNS)
    assert runs.to_dict("records") == [{
        "run_id": "r1", "model": "m", "method": "ttrv", "train_dataset": "d", "target_dataset": "d",
        "n_adapt": "20", "sampling": "random", "seed": 1, "metric": "accuracy", "value": 50.0, "n": 2,
        "n_unparsable": 1, "eval_seconds": 0.5, "adapt_seconds": 12.0, "seconds_per_sample": 0.25,
        "config_hash": "abc", "git_revision": "deadbeef", "versions": '{"numpy": "2.0", "torch": "2.5"}',
        "items": "ours", "protocol": "clean"}]


def test_zero_shot_run_written_before_items_and_protocol_stores_nulls(tmp_path):
    """A zero-shot metrics.json from before 2026-11-26 has none of adapt_seconds, seconds_per_sample, items,
    protocol: the row still has all 20 columns, those four NULL; n_adapt "all" stays "all"."""
    metrics = _metrics("z", method="zero-shot", optional=False, versions={"b": "1", "a": "2"})
    metrics["n_adapt"] = "all"
    d = _eval_dir(tmp_path, "e", metrics)
    db = tmp_path / "s.duckdb"
    ingest(db, [d], [], [])
    runs = read_table(db, "runs")
    assert list(runs.columns) == list(RUN_COLUMNS)
    row = runs.iloc[0]
    assert [row[c] for c in ("run_id", "method", "n_adapt", "versions")] == ["z", "zero-shot", "all",
                                                                             '{"a": "2", "b": "1"}']
    assert all(pd.isna(row[c]) for c in ("adapt_seconds", "seconds_per_sample", "items", "protocol"))


def test_predictions_of_two_runs_are_stacked_under_their_run_id(tmp_path):
    """Run r1 predicts a, b and run r2 predicts c, d: one frame, run_id first, then the file's columns,
    rows in job order and a fresh 0..3 index."""
    dirs = [_eval_dir(tmp_path, "e1", _metrics("r1"), ("a", "b")), _eval_dir(tmp_path, "e2", _metrics("r2"), ("c", "d"))]
    frames = _frames(dirs, [], [])
    predictions = frames["predictions"]
    assert list(predictions.columns) == ["run_id", "id", "correct"]
    assert predictions.values.tolist() == [["r1", "a", True], ["r1", "b", False], ["r2", "c", True], ["r2", "d", False]]
    assert predictions.index.tolist() == [0, 1, 2, 3]
    # metrics: one row per entry of each run's "metrics": 2 runs x (accuracy, unparsable_rate)
    assert frames["metrics"].values.tolist() == [["r1", "accuracy", 50.0], ["r1", "unparsable_rate", 50.0],
                                                 ["r2", "accuracy", 50.0], ["r2", "unparsable_rate", 50.0]]


def test_training_logs_are_stacked_under_model_method_dataset_seed(tmp_path):
    """Each of model, method, train_dataset, seed is inserted at position 0 in turn, so they end up in
    the reverse order seed, train_dataset, method, model, then the log's own step, reward; two adaptations
    (2 and 1 steps) give 3 rows indexed 0..2."""
    a = _adapt_dir(tmp_path, "a1", {"model": "m", "method": "ttrv", "train_dataset": "d", "seed": 0,
                                    "adapt_seconds": 3.0}, [1, 2])
    b = _adapt_dir(tmp_path, "a2", {"model": "n", "method": "echo", "train_dataset": "g", "seed": 7}, [1])
    train_log = _frames([], [a, b], [])["train_log"]
    assert list(train_log.columns) == ["seed", "train_dataset", "method", "model", "step", "reward"]
    assert train_log.values.tolist() == [[0, "d", "ttrv", "m", 1, 0.5], [0, "d", "ttrv", "m", 2, 0.5],
                                         [7, "g", "echo", "n", 1, 0.5]]
    assert train_log.index.tolist() == [0, 1, 2]


def test_prep_stats_row_keeps_the_counts_and_dropped_as_sorted_json(tmp_path):
    """dropped {"too_large": 2, "bad_row": 1} is stored as '{"bad_row": 1, "too_large": 2}'; the columns
    are PREP_COLUMNS then dropped (items and splits are not kept)."""
    d = _data_dir(tmp_path, "dtd", {"too_large": 2, "bad_row": 1})
    prep = _frames([], [], [d])["prep_stats"]
    assert list(prep.columns) == [*PREP_COLUMNS, "dropped"]
    assert prep.to_dict("records") == [{"dataset": "dtd", "original": 10, "kept": 7, "resolution_rule": "either_side",
                                        "dropped": '{"bad_row": 1, "too_large": 2}'}]


def test_benchmarks_skip_an_empty_file_and_read_the_ones_after_it(tmp_path):
    """Sorted, adapt/a_empty.tsv (header only: a job that wrote no row) comes before adapt/m/ttrv/seed0.tsv
    and evaluate/m/d.tsv; it is skipped, not the end. Repeats 8 s / 100 MB and 12 s / 200 MB average to
    10 s / 150 MB. Read as the tab-separated files they are: no pandas ParserWarning (a sniffed separator,
    sep=None, falls back to the python engine with one per file)."""
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (tmp_path / "adapt" / "m" / "ttrv").mkdir(parents=True)
    (tmp_path / "evaluate" / "m").mkdir(parents=True)
    (tmp_path / "adapt" / "a_empty.tsv").write_text(header)
    (tmp_path / "adapt" / "m" / "ttrv" / "seed0.tsv").write_text(
        header + "8.0\t0:00:08\t100.0\t1\t1\t1\t0\t0\t50\t4\n12.0\t0:00:12\t200.0\t1\t1\t1\t0\t0\t50\t6\n")
    (tmp_path / "evaluate" / "m" / "d.tsv").write_text(header + "3.0\t0:00:03\t50.0\t1\t1\t1\t0\t0\t50\t1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        benchmarks = _benchmarks(tmp_path)
    assert benchmarks.to_dict("records") == [
        {"rule": "adapt", "job": "m/ttrv/seed0", "seconds": 10.0, "max_rss_mb": 150.0},
        {"rule": "evaluate", "job": "m/d", "seconds": 3.0, "max_rss_mb": 50.0}]


def test_ingest_twice_over_a_killed_ingests_leftover_gives_the_same_store(tmp_path):
    """A killed ingest left garbage in benchmark.duckdb.tmp: ingest removes it, writes the store, and
    leaves only benchmark.duckdb. Counts per table: 1 run, 2 metrics, 2 predictions, 1 train_log row,
    1 prep_stats row, the shipped tables, 1 benchmark; the same on the second ingest, and train_log reads
    back with its identity columns."""
    jobs = tmp_path / "jobs"
    e = _eval_dir(jobs, "e", _metrics("r1"))
    a = _adapt_dir(jobs, "a", {"model": "m", "method": "ttrv", "train_dataset": "d", "seed": 0}, [1])
    p = _data_dir(jobs, "d", {})
    bench = tmp_path / "bench" / "adapt"
    bench.mkdir(parents=True)
    (bench / "seed0.tsv").write_text("s\th:m:s\tmax_rss\n5.0\t0:00:05\t64.0\n")
    store = tmp_path / "store"
    store.mkdir()
    db = store / "benchmark.duckdb"
    (store / "benchmark.duckdb.tmp").write_text("not a database")
    expected = {"runs": 1, "metrics": 2, "predictions": 2, "train_log": 1, "prep_stats": 1, **SHIPPED,
                "benchmarks": 1}
    assert ingest(db, [e], [a], [p], tmp_path / "bench") == expected
    assert sorted(x.name for x in store.iterdir()) == ["benchmark.duckdb"]
    assert ingest(db, [e], [a], [p], tmp_path / "bench") == expected
    assert sorted(x.name for x in store.iterdir()) == ["benchmark.duckdb"]
    assert read_table(db, "train_log").values.tolist() == [[0, "d", "ttrv", "m", 1, 0.5]]
    assert read_table(db, "benchmarks").values.tolist() == [["adapt", "seed0", 5.0, 64.0]]
    assert read_table(db, "prep_stats")["dropped"].tolist() == ["{}"]


def test_ingest_of_no_jobs_loads_the_shipped_tables_and_logs_the_counts(tmp_path, caplog):
    """No job files: only published, author_runs, author_steps get a table (an empty frame creates none,
    so read_table gives an empty frame for runs); the log line is "ingested <counts> into <path>"."""
    db = tmp_path / "b.duckdb"
    with caplog.at_level(logging.INFO, logger="ttrl_bench.results.store"):
        assert ingest(db, [], [], []) == SHIPPED
    assert caplog.messages == [f"ingested {SHIPPED} into {db}"]
    assert read_table(db, "runs").empty and read_table(db, "train_log").empty


_HOLD = "import sys, duckdb; con = duckdb.connect(sys.argv[1]); print('ready', flush=True); sys.stdin.read()"


@contextmanager
def _held_read_write(db):
    """A second process holding `db` read-write until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_lock_holder_names_the_process_from_duckdbs_real_message(tmp_path):
    """DuckDB says 'Could not set lock on file "<db>": Conflicting lock is held in <exe> (PID <pid>)...';
    /proc/<pid>/cmdline of the holder is its argv joined by spaces: "<python> -c <_HOLD> <db>"."""
    db = tmp_path / "s.duckdb"
    with _held_read_write(db) as proc:
        with pytest.raises(duckdb.IOException) as err:
            duckdb.connect(str(db), read_only=True)
        assert "Conflicting lock is held in " in str(err.value) and f"(PID {proc.pid})" in str(err.value)
        assert _lock_holder(str(err.value)) == f"PID {proc.pid}: {sys.executable} -c {_HOLD} {db}"


def test_lock_holder_of_a_gone_process_uses_the_program_in_the_message():
    """PID 999999999 exceeds Linux's pid_max (at most 2**22), so /proc has no cmdline for it: the name
    comes from the message, "/usr/bin/python3.11"."""
    message = ('IO Error: Could not set lock on file "/x/b.duckdb": Conflicting lock is held in /usr/bin/python3.11 '
               "(PID 999999999). See also https://duckdb.org/docs/current/connect/concurrency")
    assert _lock_holder(message) == "PID 999999999: /usr/bin/python3.11"


def test_lock_holder_of_another_io_error_is_none():
    """A message without "Conflicting lock is held in ... (PID n)" names nobody."""
    assert _lock_holder('IO Error: Cannot open database "/x/b.duckdb" in read-only mode: database does not exist') is None


def test_read_only_connection_while_another_process_writes_names_it(tmp_path):
    """The store held read-write by the helper process: StoreLockedError (transient) with the message
    "<db> is held read-write by another process (PID <pid>: <python> -c <_HOLD> <db>); close it or let it
    finish", caused by DuckDB's IOException."""
    db = tmp_path / "s.duckdb"
    ingest(db, [], [], [])
    with _held_read_write(db) as proc:
        with pytest.raises(StoreLockedError) as err:
            connect_read_only(db)
    assert str(err.value) == (f"{db} is held read-write by another process (PID {proc.pid}: {sys.executable} -c "
                              f"{_HOLD} {db}); close it or let it finish")
    assert isinstance(err.value.__cause__, duckdb.IOException) and StoreLockedError.transient is True


def test_read_only_connection_cannot_write_nor_create_the_store(tmp_path):
    """Opened read-only, a CREATE fails; a store that does not exist is an IOException (not a lock, so
    re-raised as is) and no file appears."""
    db = tmp_path / "s.duckdb"
    ingest(db, [], [], [])
    con = connect_read_only(db)
    try:
        with pytest.raises(duckdb.Error, match="read-only"):
            con.execute("CREATE TABLE t (a INTEGER)")
    finally:
        con.close()
    missing = tmp_path / "missing.duckdb"
    with pytest.raises(duckdb.IOException):
        connect_read_only(missing)
    assert not missing.exists()
