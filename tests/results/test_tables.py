"""The DuckDB store and the paper-style tables (results/tables.py): method_table, run_protocols (a run's
protocol, PROVENANCE's "clean" where the store has none), preparation_table (TTRV Table 8's layout) and
to_markdown. Every expected value is worked out by hand from a frame built here."""

import json
import math

import pandas as pd
import pytest

from ttrl_bench.results.store import PUBLISHED_CSV, ingest, query
from ttrl_bench.results.tables import method_table, preparation_table, to_markdown
from ttrl_bench.results.tables import run_protocols


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


# ---------------------------------------------------------------------------------------------------- run_protocols

def test_run_protocols_reads_the_column_and_fills_missing_with_clean():
    """protocol [NaN, "authors", None] at index 10, 20, 30 -> ["clean", "authors", "clean"], same index:
    NaN / None are runs stored before protocols existed (PROVENANCE["protocol"] == "clean")."""
    runs = pd.DataFrame({"protocol": [math.nan, "authors", None]}, index=[10, 20, 30])
    got = run_protocols(runs)
    assert got.tolist() == ["clean", "authors", "clean"]
    assert got.index.tolist() == [10, 20, 30]


def test_run_protocols_without_the_column_is_clean_for_every_run():
    """No `protocol` column, 2 runs at index 5, 7 -> an object Series ["clean", "clean"] on index [5, 7]."""
    runs = pd.DataFrame({"run_id": ["a", "b"]}, index=[5, 7])
    pd.testing.assert_series_equal(run_protocols(runs), pd.Series(["clean", "clean"], index=[5, 7], dtype=object))


def test_run_protocols_of_no_runs_is_empty():
    """0 runs, no column -> an empty Series (nothing to fill)."""
    assert run_protocols(pd.DataFrame()).empty


# ------------------------------------------------------------------------------------------------ preparation_table

def test_preparation_table_reads_only_ttrv_table8_first_value_and_unnamed_datasets():
    """published (by hand): vr-ttrl Table 8 DTD n_original 1 and ttrv Table 1 DTD n_used 2 (other tables: ignored),
    ttrv Table 8 DTD n_original 5640, n_used 5600 then a duplicate 5000 (the first, 5600, is kept; a mean would
    be 5300). prep: "mystery" (not in dataset_names: its own name, no paper numbers), dropped "{}" -> "–";
    "dtd" -> "DTD", dropped given as a dict {too_large: 39, unreadable: 1} -> "too_large 39, unreadable 1".
    Sorted by dataset: dtd, mystery."""
    published = pd.DataFrame([("vr-ttrl", 8, "DTD", "n_original", 1), ("ttrv", 1, "DTD", "n_used", 2),
                              ("ttrv", 8, "DTD", "n_original", 5640), ("ttrv", 8, "DTD", "n_used", 5600),
                              ("ttrv", 8, "DTD", "n_used", 5000)], columns=["paper", "table", "dataset", "metric", "value"])
    prep = pd.DataFrame([{"dataset": "mystery", "original": 10, "kept": 10, "dropped": "{}"},
                         {"dataset": "dtd", "original": 5640, "kept": 5600, "dropped": {"unreadable": 1, "too_large": 39}}])
    table = preparation_table(prep, published, {"dtd": "DTD"})
    assert list(table.columns) == ["dataset", "paper column", "original", "kept", "dropped", "paper original",
                                   "paper used"]
    dtd, mystery = table.to_dict("records")
    assert dtd == {"dataset": "dtd", "paper column": "DTD", "original": 5640, "kept": 5600,
                   "dropped": "too_large 39, unreadable 1", "paper original": 5640, "paper used": 5600}
    assert [mystery[k] for k in ("dataset", "paper column", "original", "kept", "dropped")] == [
        "mystery", "mystery", 10, 10, "–"]
    assert pd.isna(mystery["paper original"]) and pd.isna(mystery["paper used"])


def test_preparation_table_of_nothing_prepared_and_no_table8():
    """No prep stats -> 0 rows with the 7 columns; a dataset with no TTRV Table 8 in `published` (only Table 1)
    -> paper original / paper used blank; dropped '{"too_large": 2}' -> "too_large 2"."""
    published = pd.DataFrame([("ttrv", 1, "DTD", "accuracy", 50.0)], columns=["paper", "table", "dataset", "metric",
                                                                             "value"])
    empty = preparation_table(pd.DataFrame(), published, {})
    assert len(empty) == 0 and len(empty.columns) == 7
    prep = pd.DataFrame([{"dataset": "dtd", "original": 3, "kept": 1, "dropped": json.dumps({"too_large": 2})}])
    row = preparation_table(prep, published, {"dtd": "DTD"}).iloc[0]
    assert (row["paper column"], row["dropped"]) == ("DTD", "too_large 2")
    assert pd.isna(row["paper original"]) and pd.isna(row["paper used"])


# ------------------------------------------------------------------------------------------------------ to_markdown

def test_to_markdown_shows_the_index_by_default():
    """A frame indexed by Model ("m") with dtd 40.0 -> by default the index is the first column:
    "| Model | dtd |", "|---|---|", "| m | 40.00 |"; index=False leaves it out: "| dtd |", "| 40.00 |"."""
    frame = pd.DataFrame({"dtd": [40.0]}, index=pd.Index(["m"], name="Model"))
    assert to_markdown(frame).splitlines() == ["| Model | dtd |", "|---|---|", "| m | 40.00 |"]
    assert to_markdown(frame, index=False).splitlines() == ["| dtd |", "|---|", "| 40.00 |"]


def test_to_markdown_prints_none_as_a_dash_and_honours_digits():
    """An object column holding None and "x" -> "–" and "x" (None is not a float); 1.23456 with digits=4 ->
    "1.2346", 2.6 with digits=0 -> "3", an int 7 -> "7" whatever the digits, NaN -> "–"."""
    frame = pd.DataFrame({"a": pd.Series([None, "x"], dtype=object), "b": [1.23456, math.nan]})
    assert to_markdown(frame, index=False, digits=4).splitlines() == ["| a | b |", "|---|---|", "| – | 1.2346 |",
                                                                     "| x | – |"]
    assert to_markdown(pd.DataFrame({"v": [2.6], "n": [7]}), index=False, digits=0).splitlines()[2] == "| 3 | 7 |"


def test_method_table_skips_a_model_without_zero_shot_averages_seeds_and_rounds_to_two_places():
    """Model "a" has no zero-shot run: no rows for it, and model "b" after it is still laid out. b's zero-shot
    is 40 on dtd and 70 on food (Mean 55); b's TTRV on dtd has seeds 50 and 51 (mean 50.5) and no in-domain food
    run (a cross-dataset food run, 99, is not in Table 1), so its Mean is blank (NaN: a mean over the datasets
    that exist would pretend one); 100/3 on food from DARE prints 33.33. The index is named "Model", the columns
    unnamed."""
    runs = pd.DataFrame([_run("a", "ttrv", "dtd", "dtd", 10.0),
                         _run("b", "zero-shot", "none", "dtd", 40.0),
                         _run("b", "zero-shot", "none", "food", 70.0),
                         _run("b", "ttrv", "dtd", "dtd", 50.0), _run("b", "ttrv", "dtd", "dtd", 51.0, 1),
                         _run("b", "ttrv", "dtd", "food", 99.0),
                         _run("b", "dare", "dtd", "dtd", 40.0), _run("b", "dare", "food", "food", 100 / 3)])
    table = method_table(runs)
    assert list(table.index) == ["b", "w/ DARE", "Δ DARE", "w/ TTRV", "Δ TTRV"]
    assert (table.index.name, table.columns.name, list(table.columns)) == ("Model", None, ["dtd", "food", "Mean"])
    assert table.loc["b"].tolist() == [40.0, 70.0, 55.0]
    # DARE: 40 and 33.33 (mean 36.666... -> 36.67); deltas 0, 33.333 - 70 = -36.666... -> -36.67, Mean -18.33
    assert table.loc["w/ DARE"].tolist() == [40.0, 33.33, 36.67]
    assert table.loc["Δ DARE"].tolist() == [0.0, -36.67, -18.33]
    ttrv = table.loc["w/ TTRV"]
    assert ttrv["dtd"] == 50.5 and math.isnan(ttrv["food"]) and math.isnan(ttrv["Mean"])
    assert table.loc["Δ TTRV", "dtd"] == 10.5


def test_method_table_of_no_runs_is_an_empty_table_indexed_by_model():
    """No runs: an empty table whose index is named "Model" (the Markdown header's first cell)."""
    table = method_table(pd.DataFrame(columns=["model", "method", "train_dataset", "target_dataset", "value"]))
    assert table.empty and table.index.name == "Model"
