"""The DuckDB store and the paper-style tables."""

import json

import pandas as pd
import pytest

from ttrl_bench.results.store import PUBLISHED_CSV, ingest, query
from ttrl_bench.results.tables import method_table, preparation_table, to_markdown


def _run(model, method, train, target, value, seed=0):
    return {"model": model, "method": method, "train_dataset": train, "target_dataset": target, "value": value, "seed": seed}


@pytest.fixture
def runs():
    return pd.DataFrame(
        [
            _run("m", "zero-shot", "none", "dtd", 40.0),
            _run("m", "zero-shot", "none", "food", 60.0),
            _run("m", "ttrv", "dtd", "dtd", 55.0),
            _run("m", "ttrv", "food", "food", 59.0),
            _run("m", "ttrv", "dtd", "food", 99.0),  # cross-dataset: not in Table 1
        ]
    )


def test_method_table_has_base_method_and_delta_rows(runs):
    table = method_table(runs)
    assert list(table.index) == ["m", "w/ TTRV", "Δ TTRV"]
    assert list(table.columns) == ["dtd", "food", "Mean"]
    assert table.loc["m"].tolist() == [40.0, 60.0, 50.0]
    assert table.loc["w/ TTRV"].tolist() == [55.0, 59.0, 57.0]
    assert table.loc["Δ TTRV"].tolist() == [15.0, -1.0, 7.0]


def test_runs_adapted_on_a_training_set_get_a_row_named_after_it(runs):
    # ECHO trains on Geometry3k and is scored on other sets; VR-TTRL Table 11 on a training split
    runs = pd.concat([runs, pd.DataFrame([_run("m", "echo", "geo-train", "dtd", 44.0),
                                          _run("m", "echo", "geo-train", "food", 70.0)])])
    table = method_table(runs, frozenset({"geo-train"}))
    assert list(table.index) == ["m", "w/ echo@geo-train", "Δ echo@geo-train", "w/ TTRV", "Δ TTRV"]
    # (44 + 70) / 2 = 57; deltas 44 - 40 = 4, 70 - 60 = 10, mean 7
    assert table.loc["w/ echo@geo-train"].tolist() == [44.0, 70.0, 57.0]
    assert table.loc["Δ echo@geo-train"].tolist() == [4.0, 10.0, 7.0]


# The published comparison of every table: tests/results/test_paper_tables.py.


def test_markdown_renders_missing_values_as_dash():
    md = to_markdown(pd.DataFrame({"a": [1.234, float("nan")], "b": ["x", None]}), index=False)
    assert md.splitlines() == ["| a | b |", "|---|---|", "| 1.23 | x |", "| – | – |"]


def _write_job_outputs(root, value):
    eval_dir = root / "eval"
    eval_dir.mkdir(parents=True)
    metrics = {
        "run_id": "m/zero-shot/none/d/seed0", "model": "m", "method": "zero-shot", "train_dataset": "none",
        "target_dataset": "d", "n_adapt": 20, "sampling": "random", "seed": 0, "metric": "accuracy",
        "value": value, "metrics": {"accuracy": value, "unparsable_rate": 50.0}, "n": 2, "n_unparsable": 1, "eval_seconds": 0.1, "config_hash": "abc",
        "git_revision": "deadbeef", "versions": {"torch": "x"},
    }
    (eval_dir / "metrics.json").write_text(json.dumps(metrics))
    pd.DataFrame({"id": ["a", "b"], "raw_output": ["A", "?"], "parsed": ["A", None], "gold": ["A", "B"],
                  "correct": [True, False], "parse_failure": [False, True]}).to_parquet(eval_dir / "predictions.parquet")
    data_dir = root / "data"
    data_dir.mkdir()
    (data_dir / "prep_stats.json").write_text(json.dumps(
        {"dataset": "d", "original": 3, "kept": 2, "dropped": {"too_large": 1}, "resolution_rule": "either_side"}))
    return eval_dir, data_dir


def test_ingest_is_idempotent_and_loads_the_published_numbers(tmp_path):
    eval_dir, data_dir = _write_job_outputs(tmp_path, 50.0)
    db = tmp_path / "benchmark.duckdb"
    first = ingest(db, [eval_dir], [], [data_dir])
    second = ingest(db, [eval_dir], [], [data_dir])
    # author_runs: one row per readable public TTRV log (71 of 91); author_steps: their rounds (shipped CSVs);
    # claims: the 16 of results/data/claims.csv, none with two arms run here (no claim_cells)
    assert first == second == {"runs": 1, "metrics": 2, "predictions": 2, "prep_stats": 1, "published": 587,
                               "author_runs": 71, "author_steps": 5020, "claims": 16}
    assert query(db, "SELECT value FROM runs")["value"].tolist() == [50.0]
    assert query(db, "SELECT count(*) AS n FROM published WHERE paper = 'ttrv' AND \"table\" = 1")["n"][0] == 126


def test_ingest_of_a_corrupt_job_file_names_it_and_keeps_the_old_store(tmp_path):
    eval_dir, data_dir = _write_job_outputs(tmp_path, 50.0)
    db = tmp_path / "benchmark.duckdb"
    ingest(db, [eval_dir], [], [data_dir])
    (eval_dir / "metrics.json").write_text("{truncated")
    with pytest.raises(ValueError, match="metrics.json: not valid JSON"):
        ingest(db, [eval_dir], [], [data_dir])
    assert query(db, "SELECT count(*) AS n FROM runs")["n"][0] == 1


def test_ingest_names_a_missing_key(tmp_path):
    eval_dir, data_dir = _write_job_outputs(tmp_path, 50.0)
    metrics = json.loads((eval_dir / "metrics.json").read_text())
    del metrics["config_hash"]
    (eval_dir / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(ValueError, match=r"metrics.json: missing key\(s\) \['config_hash'\]"):
        ingest(tmp_path / "b.duckdb", [eval_dir], [], [data_dir])


def test_preparation_table_sets_our_counts_beside_ttrv_table8():
    prep = pd.DataFrame([
        {"dataset": "dtd", "original": 5640, "kept": 5600, "resolution_rule": "either_side",
         "dropped": json.dumps({"too_large": 39, "unreadable": 1})},
        {"dataset": "demo-digits", "original": 1797, "kept": 1797, "resolution_rule": "either_side", "dropped": "{}"},
    ])
    table = preparation_table(prep, pd.read_csv(PUBLISHED_CSV), {"dtd": "DTD", "demo-digits": "Digits"})
    demo = table.to_dict("records")[0]
    assert {k: demo[k] for k in ("dataset", "paper column", "original", "kept", "dropped")} == {
        "dataset": "demo-digits", "paper column": "Digits", "original": 1797, "kept": 1797, "dropped": "–"}
    assert pd.isna(demo["paper original"]) and pd.isna(demo["paper used"])  # not in the paper
    dtd = table.iloc[1]
    # published.csv, TTRV Table 8: DTD 5640 original, 5640 used
    assert (dtd["dropped"], dtd["paper original"], dtd["paper used"]) == ("too_large 39, unreadable 1", 5640, 5640)
