"""The provenance of published cells (results/provenance.py): which authors' log gave a cell, the Wilson
interval, each cell's status, and the flags at their boundaries. Every expected number is read by hand from
the named log in Akshit21112002/TTRV (verl/logs/...) or from the hand-made logs below."""

import pandas as pd
import pytest

from ttrl_bench.results import paper_tables as pt
from ttrl_bench.results.author_logs import shipped_runs
from ttrl_bench.results.provenance import flag_counts, provenance
from ttrl_bench.results.store import PUBLISHED_CSV


PUBLISHED = pd.read_csv(PUBLISHED_CSV)


@pytest.fixture(scope="module")
def cell_logs():
    return provenance(PUBLISHED, shipped_runs())


@pytest.fixture(scope="module")
def cells(cell_logs):
    return cell_logs.set_index(["table", "model", "method", "dataset", "metric"])


def test_provenance_of_published_cells(cells):
    # TTRV Table 2 AI2D InternVL3-2B 67.75: the 20-epoch run, best of 2 / 5 / 10 / 20 epochs (47.26 at 2)
    ai2d = cells.loc[(2, "InternVL3-2B", "ttrv", "AI2D", "acc")]
    assert ai2d["log_file"] == "ai2d_20_OpenGVLab_InternVL3-2B_20e_0917_014128.log"
    assert ai2d["selected_on_test"] and ai2d["epochs_tried"] == "2,5,10,20" and not ai2d["subset_metric"]
    # MathVerse InternVL3-2B zero-shot 44.10 is verl's mean@1; the accuracy is 43.20
    mathverse = cells.loc[(2, "InternVL3-2B", "zero-shot", "MathVerse", "acc")]
    assert mathverse["subset_metric"] and mathverse["log_accuracy"] == pytest.approx(100 * 734 / 1699)
    # ImageNet-S InternVL3-2B zero-shot 62.19: the log's 62.1986 truncated, not rounded
    assert cells.loc[(1, "InternVL3-2B", "zero-shot", "ImageNet-S", "top1_acc"), "truncated"]
    # Table 9 InternVL3-8B Resisc45 on 500 samples 93.82: the one 500-sample log collapsed to 24.60
    resisc = cells.loc[(9, "InternVL3-8B", "ttrv-500-samples", "Resisc45", "top1_acc")]
    assert resisc["log_disagrees"] and resisc["collapsed"] and pd.isna(resisc["log_accuracy"])
    assert cells.loc[(1, "GPT-4o", "zero-shot", "ImageNet", "top1_acc"), "no_log"]
    counts = flag_counts(cells.reset_index()).set_index("flag")["cells"]
    assert counts["all TTRV cells"] == (PUBLISHED["paper"] == "ttrv").sum()


def test_wilson_interval_at_mathvistas_490_items():
    # p = 0.5, n = 490, z = 1.95996: half = z sqrt(0.25/490 + z^2/(4 490^2)) / (1 + z^2/490)
    #   = 1.95996 x 0.0226761 / 1.0078397 = 0.044099: 45.59 .. 54.41, "±4.4"
    low, high = pt.wilson(50.0, 490)
    assert (low, high) == pytest.approx((45.590, 54.410), abs=0.002)
    assert pt.half_width({"low": low, "high": high}) == " ±4.4"


@pytest.mark.parametrize("ours, status", [
    (50.0, "differs"),  # 45.6 .. 54.4: the paper's 58.26 outside
    (58.0, "agrees"),   # 53.6 .. 62.3: the paper's 58.26 and the log's accuracy 57.76 inside
    # centre 62.105, half 4.278: 57.83 .. 66.38 holds the paper's 58.26 (mean@1) but not the log's 57.76
    (62.2, "differs"),
])
def test_status_needs_the_paper_and_the_log_inside_our_interval(cell_logs, ours, status):
    runs = pd.DataFrame([{"run_id": "r", "model": "m", "method": "zero-shot", "train_dataset": "none",
                          "target_dataset": "mathvista", "n_adapt": "20", "sampling": "random", "seed": 0,
                          "metric": "accuracy", "value": ours, "n": 490}])
    mine = pt.our_cells(PUBLISHED, runs, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), {"m": "InternVL3-2B"},
                        {"mathvista": "MathVista"})
    comparison = pt.compare(PUBLISHED, mine, cell_logs)
    cell = comparison[(comparison["table"] == 2) & (comparison["model"] == "InternVL3-2B")
                      & (comparison["method"] == "zero-shot") & (comparison["dataset"] == "MathVista")].iloc[0]
    assert cell["paper_value"] == 58.26 and cell["log_accuracy"] == pytest.approx(100 * 283 / 490)
    assert cell["status"] == status
    assert pt.fidelity_summary(comparison).iloc[-1][status.replace(" ", "_")] >= 1


def test_collapsed_is_a_drop_of_more_than_10_points():
    """final < initial - 10: 60 -> 50 (exactly 10 points) is not collapsed, 60 -> 49.99 is; a gain never is."""
    from ttrl_bench.results.provenance import log_runs

    runs = pd.DataFrame({"file": ["a.log", "b.log", "c.log"], "model": "InternVL3-2B", "dataset": "ai2d",
                         "initial_acc": [60.0, 60.0, 60.0], "final_acc": [50.0, 49.99, 75.0]})
    assert log_runs(runs)["collapsed"].tolist() == [False, True, False]


@pytest.mark.parametrize("value, published, how", [
    (62.1986, 62.19, "truncated"),  # ImageNet-S InternVL3-2B zero-shot: the paper truncates
    (62.1986, 62.20, "rounded"),
    (62.1986, 62.18, None),
    (67.92, 67.92, "rounded"),  # both readings agree: rounded first
    (67.74999999999999, 67.75, "rounded"),  # 271/400 in binary: the 1e-9 keeps truncation at 67.75 too
    (67.7599, 67.75, "truncated"),
    (float("nan"), 67.75, None),
])
def test_a_published_value_matches_a_log_truncated_or_rounded_to_two_decimals(value, published, how):
    from ttrl_bench.results.provenance import _matches, _two_decimals

    assert _matches(value, published) == how
    assert _two_decimals(67.74999999999999) == (67.75, 67.75)
    assert _two_decimals(62.1986) == (62.19, 62.2)


def test_provenance_layout_lists_the_cells_a_log_gave_with_its_value_run_and_flags(cell_logs):
    """TTRV Table 2 as `render-tables` writes its authors' log section. MathVerse InternVL3-2B
    zero-shot: the log's mean@1 44.1026 is the paper's 44.10, its accuracy 734/1699 = 43.2019; the run
    is 20 samples x 2 epochs on 4 GPUs, 10 rounds, 40 optimizer steps. Ours 45.00 over 1,699 items:
    Wilson half ~ 1.96 sqrt(0.45 x 0.55 / 1699) = 2.37, "±2.4", 42.65 .. 47.38 holds 44.10 and 43.20."""
    runs = pd.DataFrame([{"run_id": "r", "model": "m", "method": "zero-shot", "train_dataset": "none",
                          "target_dataset": "mathverse", "n_adapt": "20", "sampling": "random", "seed": 0,
                          "metric": "accuracy", "value": 45.0, "n": 1699}])
    mine = pt.our_cells(PUBLISHED, runs, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), {"m": "InternVL3-2B"},
                        {"mathverse": "MathVerse"})
    comparison = pt.compare(PUBLISHED, mine, cell_logs)
    table2 = comparison[(comparison["paper"] == "ttrv") & (comparison["table"] == 2)]
    logs = pt.provenance_layout(table2).set_index(["model", "method", "dataset"])
    # one row per cell a log speaks to (a log_file), none for the others (GPT-4o, ...)
    with_log = table2[table2["log_file"].notna()]
    assert 0 < len(with_log) < len(table2)
    assert sorted(logs.index) == sorted(zip(with_log["model"], with_log["method"], with_log["dataset"]))
    assert list(logs.reset_index().columns) == ["model", "method", "dataset", "paper", "authors' log", "log run",
                                                "log file", "flags", "ours", "status"]
    mathverse = logs.loc[("InternVL3-2B", "zero-shot", "MathVerse")]
    assert mathverse.to_dict() == {
        "paper": "44.10", "authors' log": "44.103 (mean@1; accuracy 43.202)",
        "log run": "20 samples, 2 epochs (of 2,5,10,20), 4 GPUs: 10 rounds, 40 optimizer steps",
        "log file": "mathverse_20_OpenGVLab_InternVL3-2B_2e_0916_154833.log", "flags": "subset_metric",
        "ours": "45.00 ±2.4", "status": "agrees"}
    # AI2D InternVL3-2B ttrv 67.75: the accuracy itself (no "; accuracy"), best of 4 epoch settings, not run by us
    ai2d = logs.loc[("InternVL3-2B", "ttrv", "AI2D")]
    assert (ai2d["authors' log"], ai2d["flags"], ai2d["ours"], ai2d["status"]) == (
        "67.751 (accuracy)", "selected_on_test", "–", "not run")
    assert ai2d["log run"] == "20 samples, 20 epochs (of 2,5,10,20), 4 GPUs: 100 rounds, 400 optimizer steps"
    # a flagless cell shows "–"; a comparison without provenance columns has no log rows
    assert logs.loc[("InternVL3-2B", "zero-shot", "AI2D"), "flags"] == "–"
    plain = pt.compare(PUBLISHED, mine)
    assert pt.provenance_layout(plain).empty and list(pt.provenance_layout(plain).columns) == list(
        logs.reset_index().columns)


def test_only_accuracy_cells_of_ttrv_and_zero_shot_look_for_a_log():
    """A log gives one run's accuracy: TTRV Table 11's std over seeds (method ttrv, metric acc_std) comes
    from no log even when its value equals a log's (67.75, AI2D InternVL3-2B's 20-epoch run), and
    neither does another method's accuracy; the same value as acc is matched to that log."""
    cell = {"paper": "ttrv", "table": 11, "model": "InternVL3-2B", "dataset": "AI2D", "value": 67.75}
    published = pd.DataFrame([{**cell, "method": "ttrv", "metric": "acc_std"},
                              {**cell, "method": "ttrl", "metric": "acc"},
                              {**cell, "method": "ttrv", "metric": "acc"}])
    rows = provenance(published, shipped_runs())
    assert rows["no_log"].tolist() == [True, True, False]
    assert rows["log_file"][:2].isna().all()
    assert rows.loc[2, "log_file"] == "ai2d_20_OpenGVLab_InternVL3-2B_20e_0917_014128.log"
    assert rows.loc[2, "log_metric"] == "accuracy" and not rows.loc[2, "log_disagrees"]


def _log(file, dataset, epochs, initial, final, initial_reported, final_reported, n_adapt=20):
    return {"file": file, "model": "InternVL3-2B", "dataset": dataset, "n_adapt": n_adapt, "epochs": epochs,
            "initial_acc": initial, "final_acc": final, "initial_reported": initial_reported,
            "final_reported": final_reported, "n_gpus": 4, "rounds": 10, "optimizer_steps": 40}


# hand-made logs: per dataset, the epoch settings of one run on 20 samples (and AI2D's on 500)
LOGS = pd.DataFrame([
    _log("a2.log", "ai2d", 2, 40.0, 50.0, 41.0, 70.0),
    _log("a5.log", "ai2d", 5, 40.0, 70.0, 41.0, 45.0),
    _log("a500.log", "ai2d", 2, 42.0, 20.0, 43.0, 21.0, n_adapt=500),  # 42 -> 20: collapsed
    _log("d2.log", "dtd", 2, 40.0, 50.0, 41.0, 30.0),
    _log("d5.log", "dtd", 5, 40.0, 70.0, 41.0, 31.0),
    _log("v2.log", "mathvista", 2, 40.0, 30.0, 41.0, 55.0),
    _log("v5.log", "mathvista", 5, 40.0, 60.0, 41.0, 40.0),
])


@pytest.mark.parametrize("method, dataset, value, expected", [
    # 70 is a5's accuracy and a2's mean@1: accuracy wins; best of a2 / a5's accuracies (50, 70): selected
    ("ttrv", "AI2D", 70.0, dict(log_file="a5.log", log_metric="accuracy", subset_metric=False, selected_on_test=True)),
    # d2's accuracy 50 is not the best accuracy (d5: 70), though above both mean@1s (30, 31): not selected
    ("ttrv", "DTD", 50.0, dict(log_file="d2.log", log_metric="accuracy", selected_on_test=False)),
    # v2's mean@1 55 is the best mean@1 (v5: 40), though not the best accuracy (60): selected, subset_metric
    ("ttrv", "MathVista", 55.0, dict(log_file="v2.log", log_metric="mean@1", subset_metric=True, selected_on_test=True,
                                     log_accuracy=30.0)),
    # one epoch setting on 500 samples: nothing to select among; it collapsed (42 -> 20)
    ("ttrv-500-samples", "AI2D", 20.0, dict(log_file="a500.log", selected_on_test=False, collapsed=True)),
    # zero-shot reads the initial accuracy; the fewest samples, then epochs, first: a2; never selected / collapsed
    ("zero-shot", "AI2D", 40.0, dict(log_file="a2.log", log_metric="accuracy", selected_on_test=False,
                                     collapsed=False)),
    ("zero-shot", "AI2D", 42.0, dict(log_file="a500.log", selected_on_test=False, collapsed=False)),
    # no log gives 65: the nearest final accuracy (a5's 70; a2 50, a500 20), its accuracy not compared
    ("ttrv", "AI2D", 65.0, dict(log_file="a5.log", log_metric="accuracy", log_value=70.0, log_disagrees=True,
                                selected_on_test=False, no_log=False)),
])
def test_provenance_flags_of_hand_made_logs(method, dataset, value, expected):
    published = pd.DataFrame([{"paper": "ttrv", "table": 2, "model": "InternVL3-2B", "method": method,
                               "dataset": dataset, "metric": "acc", "value": value}])
    row = provenance(published, LOGS).iloc[0]
    assert {key: row[key] for key in expected} == expected
    if expected.get("log_disagrees"):
        assert pd.isna(row["log_accuracy"])


def test_flag_counts_of_hand_made_logs():
    """The 7 cells above, a cell no log covers (GPT-4o) and a VR-TTRL cell (not TTRV: left out). A log gives
    the published value of 6 (all but the 65 the logs disagree with and GPT-4o's); selected on test: AI2D 70,
    MathVista 55; subset_metric: MathVista 55; collapsed: the 500-sample AI2D 20; none truncated."""
    cells = [("ttrv", "AI2D", 70.0), ("ttrv", "DTD", 50.0), ("ttrv", "MathVista", 55.0),
             ("ttrv-500-samples", "AI2D", 20.0), ("zero-shot", "AI2D", 40.0), ("zero-shot", "AI2D", 42.0),
             ("ttrv", "AI2D", 65.0)]
    published = pd.DataFrame([{"paper": "ttrv", "table": 2, "model": "InternVL3-2B", "method": method,
                               "dataset": dataset, "metric": "acc", "value": value} for method, dataset, value in cells]
                             + [{"paper": "ttrv", "table": 2, "model": "GPT-4o", "method": "zero-shot",
                                 "dataset": "AI2D", "metric": "acc", "value": 50.0},
                                {"paper": "vr-ttrl", "table": 2, "model": "InternVL3-2B", "method": "zero-shot",
                                 "dataset": "AI2D", "metric": "acc", "value": 40.0}])
    from ttrl_bench.results.provenance import COLUMNS

    rows = provenance(published, LOGS)
    # the published columns, then COLUMNS in order; one row per TTRV cell, numbered from 0
    assert list(rows.columns) == [*published.columns, *COLUMNS] and list(rows.index) == list(range(8))
    assert rows["model"].tolist() == ["InternVL3-2B"] * 7 + ["GPT-4o"]
    assert flag_counts(rows).to_dict("records") == [
        {"flag": "log gives the published value", "cells": 6}, {"flag": "selected_on_test", "cells": 2},
        {"flag": "subset_metric", "cells": 1}, {"flag": "truncated", "cells": 0}, {"flag": "collapsed", "cells": 1},
        {"flag": "no_log", "cells": 1}, {"flag": "log_disagrees", "cells": 1}, {"flag": "all TTRV cells", "cells": 8}]


def test_exploratory_logs_are_left_out():
    """RESISC45's online_plot runs and the _old_prompt runs give no cell, even one whose value they match."""
    from ttrl_bench.results.provenance import log_runs

    runs = pd.DataFrame([_log("resi45_20_online_plot.log", "resi45", 2, 40.0, 50.0, 41.0, 51.0),
                         _log("resi45_20_old_prompt.log", "resi45", 2, 40.0, 50.0, 41.0, 51.0),
                         _log("resi45_20_2e.log", "resi45", 2, 40.0, 60.0, 41.0, 61.0)])
    assert log_runs(runs)["file"].tolist() == ["resi45_20_2e.log"]
    published = pd.DataFrame([{"paper": "ttrv", "table": 1, "model": "InternVL3-2B", "method": "ttrv",
                               "dataset": "Resisc45", "metric": "top1_acc", "value": 50.0}])
    row = provenance(published, runs).iloc[0]
    assert row["log_disagrees"] and row["log_file"] == "resi45_20_2e.log"
