"""results/tables.py's comparisons: rescoring_table (the same generations scored by our parser and by the TTRV
authors', verl mean@1 / mean@max) and protocol_table (runs under the "authors" and "clean" protocols side by
side). Every expected value is worked out by hand from a frame built here, in the test's docstring."""

import math

import pandas as pd
import pytest

from ttrl_bench.results.tables import protocol_table, rescoring_table


OURS = "ours: our parser, accuracy"
THEIRS = "the authors' parser, accuracy"
MEAN1 = "the authors' parser, verl mean@1"
MEANMAX = "the authors' parser, verl mean@max"
RESCORED_COLUMNS = ["model", "method", "dataset", OURS, THEIRS, MEAN1, MEANMAX, "largest group", "authors - ours"]
PROTOCOL_COLUMNS = ["model", "method", "dataset", "authors", "clean", "authors - clean"]


def _runs(rows, protocol=True):
    """A store-shaped `runs` frame, one row per (run_id, model, method, target, protocol[, metric, value])."""
    keys = ["run_id", "model", "method", "target_dataset", "protocol", "metric", "value"]
    frame = pd.DataFrame([dict(zip(keys, r)) for r in rows])
    frame["train_dataset"] = frame["target_dataset"]
    if "metric" not in frame:
        frame["metric"], frame["value"] = "accuracy", 50.0
    return frame if protocol else frame.drop(columns="protocol", errors="ignore")


def _metrics(per_run):
    """`metrics`: {run_id: {metric: value}} -> one row per (run_id, metric), in that order."""
    return pd.DataFrame([{"run_id": r, "metric": m, "value": v} for r, ms in per_run.items() for m, v in ms.items()])


def _scores(ours, theirs, group, mean1=None, meanmax=None):
    out = {"accuracy": ours, "accuracy_robust_parser": ours, "accuracy_authors_parser": theirs,
           "authors_mean@max": meanmax, "authors_max_group": group}
    if mean1 is not None:
        out["authors_mean@1"] = mean1
    return out


# -------------------------------------------------------------------------------------------------- rescoring_table

def test_rescoring_table_one_row_per_rescored_run_sorted_by_model_dataset_method():
    """5 runs, no `protocol` column (all "clean": one protocol, so no protocol column):
      r1 m-b ttrv dtd        ours 40 theirs 45   mean@1 44 mean@max 46 group 2 -> authors - ours  5
      r2 m-a ttrv food       ours 60 theirs 70   mean@1 68 mean@max 72 group 4 -> 10
      r3 m-a zero-shot dtd   ours 30 theirs 27.5 mean@1 27 mean@max 28 group 3 -> -2.5
      r4 m-a zero-shot food  ours 50 theirs 50   mean@1 49 mean@max 51 group 4 -> 0
      r5 m-a ttrv dtd        only `accuracy` (predictions from before rescoring): no row (inner join)
    sorted by (model, dataset, method): r3 (m-a dtd zero-shot), r2 (m-a food ttrv), r4 (m-a food zero-shot),
    r1 (m-b dtd ttrv); by (model, method, dataset) r2 would come first, by dataset first r1 second."""
    runs = _runs([("r1", "m-b", "ttrv", "dtd"), ("r2", "m-a", "ttrv", "food"), ("r3", "m-a", "zero-shot", "dtd"),
                  ("r4", "m-a", "zero-shot", "food"), ("r5", "m-a", "ttrv", "dtd")], protocol=False)
    metrics = _metrics({"r1": _scores(40.0, 45.0, 2.0, 44.0, 46.0), "r2": _scores(60.0, 70.0, 4.0, 68.0, 72.0),
                        "r3": _scores(30.0, 27.5, 3.0, 27.0, 28.0), "r4": _scores(50.0, 50.0, 4.0, 49.0, 51.0),
                        "r5": {"accuracy": 55.0}})
    table = rescoring_table(runs, metrics)
    expected = pd.DataFrame([
        ["m-a", "zero-shot", "dtd", 30.0, 27.5, 27.0, 28.0, 3.0, -2.5],
        ["m-a", "ttrv", "food", 60.0, 70.0, 68.0, 72.0, 4.0, 10.0],
        ["m-a", "zero-shot", "food", 50.0, 50.0, 49.0, 51.0, 4.0, 0.0],
        ["m-b", "ttrv", "dtd", 40.0, 45.0, 44.0, 46.0, 2.0, 5.0],
    ], columns=RESCORED_COLUMNS)
    assert list(table.columns) == RESCORED_COLUMNS
    assert table.index.tolist() == [0, 1, 2, 3]
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)


def test_rescoring_table_single_protocol_column_has_no_protocol_column():
    """2 runs, both protocol "authors" (one protocol) -> no protocol column; r1 ours 50 theirs 60 (+10, group 5),
    r2 (another dataset, sorted after) ours 20 theirs 10 (-10, group 5); mean@1 absent from the store -> no mean@1
    column: model, method, dataset, ours, theirs, mean@max, largest group, authors - ours."""
    runs = _runs([("r2", "m", "ttrv", "food", "authors"), ("r1", "m", "ttrv", "dtd", "authors")])
    metrics = _metrics({"r1": _scores(50.0, 60.0, 5.0, meanmax=61.0), "r2": _scores(20.0, 10.0, 5.0, meanmax=11.0)})
    table = rescoring_table(runs, metrics)
    columns = ["model", "method", "dataset", OURS, THEIRS, MEANMAX, "largest group", "authors - ours"]
    expected = pd.DataFrame([["m", "ttrv", "dtd", 50.0, 60.0, 61.0, 5.0, 10.0],
                             ["m", "ttrv", "food", 20.0, 10.0, 11.0, 5.0, -10.0]], columns=columns)
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)


def test_rescoring_table_two_protocols_add_a_protocol_column_sorted_last():
    """3 runs of one cell m / dtd: c1 ttrv "clean", a1 ttrv "authors", n1 zero-shot NaN (-> "clean"): two
    protocols, so a protocol column after dataset, and sorting (model, dataset, method, protocol):
      a1 m ttrv dtd authors    ours 60 theirs 58 mean@max 59 group 5 -> -2
      c1 m ttrv dtd clean      ours 50 theirs 55 mean@max 56 group 5 -> 5
      n1 m zero-shot dtd clean ours 30 theirs 30 mean@max 31 group 5 -> 0
    (no authors_mean@1 in the store: no mean@1 column). c1 is stored before a1: only the protocol sort key
    puts a1 first."""
    runs = _runs([("c1", "m", "ttrv", "dtd", "clean"), ("a1", "m", "ttrv", "dtd", "authors"),
                  ("n1", "m", "zero-shot", "dtd", math.nan)])
    metrics = _metrics({"c1": _scores(50.0, 55.0, 5.0, meanmax=56.0), "a1": _scores(60.0, 58.0, 5.0, meanmax=59.0),
                        "n1": _scores(30.0, 30.0, 5.0, meanmax=31.0)})
    table = rescoring_table(runs, metrics)
    columns = ["model", "method", "dataset", "protocol", OURS, THEIRS, MEANMAX, "largest group", "authors - ours"]
    expected = pd.DataFrame([["m", "ttrv", "dtd", "authors", 60.0, 58.0, 59.0, 5.0, -2.0],
                             ["m", "ttrv", "dtd", "clean", 50.0, 55.0, 56.0, 5.0, 5.0],
                             ["m", "zero-shot", "dtd", "clean", 30.0, 30.0, 31.0, 5.0, 0.0]], columns=columns)
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)


def test_rescoring_table_keeps_one_row_per_duplicated_run_id():
    """r1 listed twice in `runs` (its accuracy row 40 and its unparsable_rate row 5: same run, other metric)
    -> one row, not two: ours 40, theirs 50, mean@1 45, mean@max 55, group 2, authors - ours 10."""
    runs = _runs([("r1", "m", "ttrv", "dtd", "clean", "accuracy", 40.0),
                  ("r1", "m", "ttrv", "dtd", "clean", "unparsable_rate", 5.0)])
    table = rescoring_table(runs, _metrics({"r1": _scores(40.0, 50.0, 2.0, 45.0, 55.0)}))
    assert table.values.tolist() == [["m", "ttrv", "dtd", 40.0, 50.0, 45.0, 55.0, 2.0, 10.0]]


def test_rescoring_table_takes_the_first_of_duplicated_metric_rows():
    """r1's accuracy_robust_parser stored twice, 40 then 50 -> the first, 40 (a mean would give 45);
    theirs 46 -> authors - ours 46 - 40 = 6."""
    runs = _runs([("r1", "m", "ttrv", "dtd")], protocol=False)
    metrics = pd.concat([_metrics({"r1": _scores(40.0, 46.0, 1.0, 46.0, 46.0)}),
                         _metrics({"r1": {"accuracy_robust_parser": 50.0}})], ignore_index=True)
    row = rescoring_table(runs, metrics).iloc[0]
    assert (row[OURS], row["authors - ours"]) == (40.0, 6.0)


def test_rescoring_table_of_a_store_without_the_authors_accuracy_or_group_size_leaves_those_cells_blank():
    """A store scored before the authors' parser or the group size were (only some of the four metrics): the run
    keeps its row, the missing cells are blank (NaN) and so is `authors - ours` where the authors' accuracy is
    missing; where it is there, 50 - 40 = 10. (It raised KeyError before.)"""
    runs = pd.DataFrame({"run_id": ["r1"], "model": ["m"], "method": ["ttrv"], "target_dataset": ["dtd"]})

    def metrics(values):
        return pd.DataFrame([{"run_id": "r1", "metric": k, "value": v} for k, v in values.items()])

    no_group = rescoring_table(runs, metrics({"accuracy_robust_parser": 40.0, "accuracy_authors_parser": 50.0}))
    assert list(no_group.columns) == ["model", "method", "dataset", OURS, THEIRS, "largest group", "authors - ours"]
    row = no_group.iloc[0]
    assert (row[OURS], row[THEIRS], row["authors - ours"]) == (40.0, 50.0, 10.0) and math.isnan(row["largest group"])
    no_authors = rescoring_table(runs, metrics({"accuracy_robust_parser": 40.0, "authors_max_group": 2.0})).iloc[0]
    assert (no_authors[OURS], no_authors["largest group"]) == (40.0, 2.0)
    assert math.isnan(no_authors[THEIRS]) and math.isnan(no_authors["authors - ours"])


@pytest.mark.parametrize("case", ["no runs or metrics", "no metrics", "no runs", "runs with no rows",
                                  "only old metrics", "no robust parser"])
def test_rescoring_table_is_empty_with_its_columns(case):
    """Nothing to show -> 0 rows and exactly the columns model, method, dataset, the four rescored columns,
    largest group, authors - ours: no runs / no metrics at all, the CLI's empty `runs` (columns, no rows),
    metrics only of old predictions (accuracy, unparsable_rate), or no accuracy_robust_parser at all."""
    runs = _runs([("r1", "m", "ttrv", "dtd")])
    metrics = _metrics({"r1": _scores(40.0, 50.0, 2.0, 45.0, 55.0)})
    runs, metrics = {
        "no runs or metrics": (pd.DataFrame(), pd.DataFrame()),
        "no metrics": (runs, pd.DataFrame()),
        "no runs": (pd.DataFrame(), metrics),
        "runs with no rows": (runs.iloc[:0], metrics),
        "only old metrics": (runs, _metrics({"r1": {"accuracy": 40.0, "unparsable_rate": 5.0}})),
        "no robust parser": (runs, _metrics({"r1": {"accuracy_authors_parser": 50.0, "authors_max_group": 2.0}})),
    }[case]
    table = rescoring_table(runs, metrics)
    assert list(table.columns) == RESCORED_COLUMNS
    assert len(table) == 0


# --------------------------------------------------------------------------------------------------- protocol_table

def test_protocol_table_side_by_side_seeds_averaged_sorted():
    """Accuracy under each protocol, seeds averaged, authors - clean; cells with one side only dropped;
    other metrics ignored; a NaN protocol is "clean":
      a-model ttrv dtd:    authors 12, clean 10                        -> 12, 10, 2
      m ttrv dtd:          authors (50 + 60) / 2 = 55, clean (40 + 45) / 2 = 42.5 -> 12.5
                           (unparsable_rate 90 / 10 ignored)
      m zero-shot dtd:     authors 20, clean 25                        -> -5
      m ttrv food:         authors 70, clean 64                        -> 6
      m zero-shot food:    authors 30, NaN protocol 35 (clean)         -> -5
      m dare dtd:          authors 80 only                             -> no row
    sorted (model, dataset, method): a-model first, then dtd ttrv, dtd zero-shot, food ttrv, food zero-shot."""
    runs = _runs([
        ("1", "m", "ttrv", "dtd", "authors", "accuracy", 50.0), ("2", "m", "ttrv", "dtd", "authors", "accuracy", 60.0),
        ("3", "m", "ttrv", "dtd", "clean", "accuracy", 40.0), ("4", "m", "ttrv", "dtd", "clean", "accuracy", 45.0),
        ("1", "m", "ttrv", "dtd", "authors", "unparsable_rate", 90.0),
        ("3", "m", "ttrv", "dtd", "clean", "unparsable_rate", 10.0),
        ("5", "m", "zero-shot", "food", "authors", "accuracy", 30.0),
        ("6", "m", "zero-shot", "food", math.nan, "accuracy", 35.0),
        ("7", "m", "ttrv", "food", "authors", "accuracy", 70.0), ("8", "m", "ttrv", "food", "clean", "accuracy", 64.0),
        ("9", "m", "dare", "dtd", "authors", "accuracy", 80.0),
        ("10", "m", "zero-shot", "dtd", "clean", "accuracy", 25.0),
        ("11", "m", "zero-shot", "dtd", "authors", "accuracy", 20.0),
        ("12", "a-model", "ttrv", "dtd", "clean", "accuracy", 10.0),
        ("13", "a-model", "ttrv", "dtd", "authors", "accuracy", 12.0),
    ])
    expected = pd.DataFrame([["a-model", "ttrv", "dtd", 12.0, 10.0, 2.0],
                             ["m", "ttrv", "dtd", 55.0, 42.5, 12.5],
                             ["m", "zero-shot", "dtd", 20.0, 25.0, -5.0],
                             ["m", "ttrv", "food", 70.0, 64.0, 6.0],
                             ["m", "zero-shot", "food", 30.0, 35.0, -5.0]], columns=PROTOCOL_COLUMNS)
    table = protocol_table(runs)
    assert list(table.columns) == PROTOCOL_COLUMNS and table.columns.name is None
    assert table.index.tolist() == [0, 1, 2, 3, 4]
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)


def test_protocol_table_ignores_a_third_protocol():
    """authors / clean / "other": m ttrv dtd authors 50 clean 40 (no "other" run) -> 50, 40, 10 is kept;
    m ttrv food authors 60 clean 50 other 55 -> 60, 50, 10; no "other" column."""
    runs = _runs([("1", "m", "ttrv", "dtd", "authors", "accuracy", 50.0), ("2", "m", "ttrv", "dtd", "clean", "accuracy", 40.0),
                  ("3", "m", "ttrv", "food", "authors", "accuracy", 60.0),
                  ("4", "m", "ttrv", "food", "clean", "accuracy", 50.0),
                  ("5", "m", "ttrv", "food", "other", "accuracy", 55.0)])
    expected = pd.DataFrame([["m", "ttrv", "dtd", 50.0, 40.0, 10.0], ["m", "ttrv", "food", 60.0, 50.0, 10.0]],
                            columns=PROTOCOL_COLUMNS)
    pd.testing.assert_frame_equal(protocol_table(runs), expected, check_dtype=False)


@pytest.mark.parametrize("case", ["no runs", "no protocol column", "only authors", "only clean and NaN",
                                  "both but never the same cell"])
def test_protocol_table_is_empty_with_its_columns(case):
    """Nothing side by side -> 0 rows, columns exactly model, method, dataset, authors, clean, authors - clean:
    no runs; runs stored before protocols (no column: all clean); one protocol only ("authors", or "clean" and NaN
    = clean); both protocols but on different cells (m ttrv dtd authors 50, m ttrv food clean 40: NaN on one side)."""
    runs = {
        "no runs": pd.DataFrame(),
        "no protocol column": _runs([("1", "m", "ttrv", "dtd")], protocol=False),
        "only authors": _runs([("1", "m", "ttrv", "dtd", "authors"), ("2", "m", "ttrv", "food", "authors")]),
        "only clean and NaN": _runs([("1", "m", "ttrv", "dtd", "clean"), ("2", "m", "ttrv", "dtd", math.nan)]),
        "both but never the same cell": _runs([("1", "m", "ttrv", "dtd", "authors", "accuracy", 50.0),
                                               ("2", "m", "ttrv", "food", "clean", "accuracy", 40.0)]),
    }[case]
    table = protocol_table(runs)
    assert list(table.columns) == PROTOCOL_COLUMNS
    assert len(table) == 0


def test_protocol_table_without_protocol_column_reads_nothing_else():
    """A frame without `protocol` (made before protocols existed) returns the empty table at once, whatever else
    it lacks: here it has no `metric` column either -> 0 rows, the 6 columns (no KeyError)."""
    table = protocol_table(pd.DataFrame({"model": ["m"], "method": ["ttrv"], "target_dataset": ["dtd"]}))
    assert list(table.columns) == PROTOCOL_COLUMNS and len(table) == 0
