"""results/paper_tables.py's parts one at a time, on frames built here: the summary line, the metric and
provenance notes, the published markers, the flags, to_latex, layout, joined, the fidelity summary, _long_runs,
_score_cells, Table 8's and Table 10's cells, our_cells' refusal and compare on an empty selection. Every
expected value is worked out by hand from the frames built here."""

from __future__ import annotations

import pandas as pd
import pytest

from ttrl_bench.results import paper_tables as pt


def _statuses(*statuses):
    return pd.DataFrame({"status": list(statuses)})


def test_the_summary_line_counts_each_status_and_zero_for_a_status_no_cell_has():
    tail = "; cells read ours ±half our 95% interval / paper (ours - paper, status)."
    assert pt.summary_line(_statuses("agrees", "not run", "differs", "agrees", "not run", "not run")) == (
        "2 of 6 published cells agree with ours, 1 differ, 3 not run" + tail)
    assert pt.summary_line(_statuses("not run")) == "0 of 1 published cells agree with ours, 0 differ, 1 not run" + tail
    assert pt.summary_line(_statuses("agrees", "differs")) == (
        "1 of 2 published cells agree with ours, 1 differ, 0 not run" + tail)


def test_metric_notes_name_our_metrics_per_paper_metric_in_the_tables_order_leaving_out_cells_not_run():
    """pass@1 comes first in the table and stays first (not sorted); it holds accuracy for greedy runs and pass@1
    for sampled ones, joined "; " in sorted order; a metric whose cells were all not run has no note."""
    comparison = pd.DataFrame({
        "metric": ["pass@1", "pass@1", "acc", "giou", "pass@1"],
        "our_metric": ["pass@1", "accuracy", "accuracy", "giou", "accuracy"],
        "status": ["agrees", "differs", "agrees", "not run", "not run"]})
    assert pt.metric_notes(comparison) == ["pass@1: ours is accuracy; pass@1", "acc: ours is accuracy"]


def test_published_markers_take_each_primary_metric_from_the_first_table_under_our_names():
    """TTRV's acc (Table 2) and top1_acc (Table 1) mark accuracy, VR-TTRL's giou and count_acc their own;
    a second table's cell for the same (model, method, dataset, metric) is left out (Table 3's 41.0); Table 2's
    "vote-only-consensus" is our vote-only; cIoU is no primary metric; a model or dataset we do not map (GPT-4o,
    SegMean) has no marker."""
    published = pd.DataFrame(
        [("ttrv", 2, "InternVL3-2B", "zero-shot", "DTD", "acc", 40.0),
         ("ttrv", 3, "InternVL3-2B", "zero-shot", "DTD", "acc", 41.0),
         ("ttrv", 1, "InternVL3-2B", "ttrv", "ImageNet", "top1_acc", 70.0),
         ("vr-ttrl", 2, "VisionReasoner-7B", "vote-only-consensus", "RefCOCOg-test", "giou", 72.81),
         ("vr-ttrl", 2, "VisionReasoner-7B", "vr-ttrl", "PixMo-Count-val", "count_acc", 80.5),
         ("vr-ttrl", 8, "VisionReasoner-7B", "vr-ttrl", "RefCOCOg-test", "ciou", 60.0),
         ("ttrv", 2, "GPT-4o", "zero-shot", "DTD", "acc", 50.0),
         ("vr-ttrl", 2, "VisionReasoner-7B", "vr-ttrl", "SegMean", "giou", 55.0)],
        columns=["paper", "table", "model", "method", "dataset", "metric", "value"])
    markers = pt.published_markers(published, {"m2b": "InternVL3-2B", "vr": "VisionReasoner-7B"},
                                   {"dtd": "DTD", "imagenet": "ImageNet", "refcocog": "RefCOCOg-test",
                                    "pixmo-count": "PixMo-Count-val"})
    assert list(markers.columns) == ["model", "method", "target_dataset", "metric", "value"]
    assert markers.values.tolist() == [
        ["m2b", "zero-shot", "dtd", "accuracy", 40.0],
        ["m2b", "ttrv", "imagenet", "accuracy", 70.0],
        ["vr", "vote-only", "refcocog", "giou", 72.81],
        ["vr", "vr-ttrl", "pixmo-count", "count_accuracy", 80.5]]


def test_a_log_cell_with_two_flags_lists_them_comma_separated_in_the_flags_order():
    """provenance.FLAGS order: selected_on_test before collapsed, joined ", "."""
    from ttrl_bench.results.provenance import FLAGS

    row = {"model": "InternVL3-2B", "method": "ttrv", "dataset": "AI2D", "paper_value": 67.75, "metric": "acc",
           "log_value": 67.751, "log_metric": "accuracy", "log_accuracy": 67.751, "log_n_adapt": 20,
           "log_epochs": 20, "epochs_tried": "2,5,10,20", "log_gpus": 4, "log_rounds": 100,
           "log_optimizer_steps": 400, "log_file": "a.log", **{flag: False for flag in FLAGS},
           "collapsed": True, "selected_on_test": True, "ours": float("nan"), "low": float("nan"),
           "high": float("nan"), "status": "not run"}
    (flags,) = pt.provenance_layout(pd.DataFrame([row]))["flags"]
    assert flags == "selected_on_test, collapsed"


def test_provenance_notes_describe_items_and_protocols_of_the_cells_run_in_the_papers_own_words():
    """ECHO cells: MathVista scored on the TTRV authors' items and ours ("ttrv-authors+ours": both described,
    joined " and ") under the authors' protocol, MathVerse on ours under the clean one; WeMath not run (no note);
    LogicVista without items and under a protocol no table names (its name stands). Notes come per column, values
    sorted. ECHO's own protocol words replace the TTRV ones only when every cell is ECHO's: two papers, or no
    paper column, take the generic words; without an items column only protocols are noted."""
    comparison = pd.DataFrame({
        "paper": "echo", "dataset": ["MathVista", "MathVerse", "WeMath", "LogicVista"],
        "status": ["agrees", "differs", "not run", "agrees"],
        "items": ["ttrv-authors+ours", "ours", "ours", None],
        "protocol": ["authors", "clean", "authors", "special"]})
    items = [f"items: {pt.ITEMS['ours']} for MathVerse",
             f"items: {pt.ITEMS['ttrv-authors']} and {pt.ITEMS['ours']} for MathVista"]
    echo = pt.PAPER_PROTOCOLS["echo"]
    assert pt.provenance_notes(comparison) == [*items, f"protocol: {echo['authors']} for MathVista",
                                               f"protocol: {echo['clean']} for MathVerse",
                                               "protocol: special for LogicVista"]
    generic = [f"protocol: {pt.PROTOCOLS['authors']} for MathVista", f"protocol: {pt.PROTOCOLS['clean']} for MathVerse",
               "protocol: special for LogicVista"]
    assert echo["authors"] != pt.PROTOCOLS["authors"] and echo["clean"] != pt.PROTOCOLS["clean"]
    assert pt.provenance_notes(comparison.assign(paper=["echo", "ttrv", "echo", "echo"])) == [*items, *generic]
    assert pt.provenance_notes(comparison.drop(columns="paper")) == [*items, *generic]
    assert pt.provenance_notes(comparison.drop(columns="items")) == pt.provenance_notes(comparison)[2:]


def test_to_latex_writes_the_whole_booktabs_table_line_by_line():
    """One row (m_1, ttrv) of two cells: the index becomes the first columns (4 x l), every value escaped (_ % −
    –), the row ends in \\\\ and the file in a newline."""
    wide = pd.DataFrame({"AI2D": ["1.00 / 2.00 (−1.00, differs)"], "DTD": ["– / 3.00 (not run)"]},
                        index=pd.MultiIndex.from_tuples([("m_1", "ttrv")], names=["model", "method"]))
    assert pt.to_latex(wide, "Table 2: 50%") == "\n".join([
        r"\begin{table}[t]", r"\centering", r"\caption{Table 2: 50\%}", r"\begin{tabular}{llll}", r"\toprule",
        r"model & method & AI2D & DTD \\", r"\midrule",
        r"m\_1 & ttrv & 1.00 / 2.00 ($-$1.00, differs) & -- / 3.00 (not run) \\",
        r"\bottomrule", r"\end{tabular}", r"\end{table}", ""])


def test_layout_lays_cells_out_in_the_papers_row_and_column_order_with_metrics_where_a_dataset_has_several():
    """ReasonSeg has gIoU and cIoU cells: every column reads "dataset (metric)". Rows keep the paper's order
    ((Q, zero-shot) before (A, zero-shot), not sorted), an empty string where the paper has no cell; the index is
    named (model, method) and the columns are not. Ours 51.50 in [50.0, 53.0]: half width 1.5, delta +1.50."""
    nan = float("nan")
    cells = pd.DataFrame(
        [("Q", "zero-shot", "ReasonSeg", "giou", 40.0, nan, nan, nan, nan, "not run"),
         ("Q", "zero-shot", "ReasonSeg", "ciou", 38.0, nan, nan, nan, nan, "not run"),
         ("Q", "vr-ttrl", "RefCOCOg", "giou", 50.0, 51.5, 50.0, 53.0, 1.5, "agrees"),
         ("A", "zero-shot", "RefCOCOg", "giou", 30.0, nan, nan, nan, nan, "not run")],
        columns=["model", "method", "dataset", "metric", "paper_value", "ours", "low", "high", "delta", "status"])
    wide = pt.layout(cells)
    assert list(wide.index.names) == ["model", "method"] and wide.columns.name is None
    assert list(wide.index) == [("Q", "zero-shot"), ("Q", "vr-ttrl"), ("A", "zero-shot")]
    assert list(wide.columns) == ["ReasonSeg (giou)", "ReasonSeg (ciou)", "RefCOCOg (giou)"]
    assert wide.values.tolist() == [["– / 40.00 (not run)", "– / 38.00 (not run)", ""],
                                    ["", "", "51.50 ±1.5 / 50.00 (+1.50, agrees)"],
                                    ["", "", "– / 30.00 (not run)"]]
    one_metric = pt.layout(cells[cells["metric"] == "giou"])
    assert list(one_metric.columns) == ["ReasonSeg", "RefCOCOg"]


def test_joined_lists_the_distinct_parts_of_a_cells_values_sorted_and_plus_joined():
    assert pt._joined(pd.Series(["ours", "ttrv-authors+ours", None, "ours"])) == "ours+ttrv-authors"


def test_the_fidelity_summary_keeps_the_papers_table_order_and_totals_each_status():
    """VR-TTRL Table 2 comes first in the comparison and stays first (crosstab alone would sort ttrv first); a
    status no cell of a table has counts 0; the total row sums each column."""
    comparison = pd.DataFrame({"paper": ["vr-ttrl", "vr-ttrl", "ttrv"], "table": [2, 2, 1],
                               "status": ["agrees", "not run", "differs"]})
    summary = pt.fidelity_summary(comparison)
    assert list(summary.columns) == ["paper", "table", "cells", "agrees", "differs", "not_run"]
    assert summary.values.tolist() == [["vr-ttrl", 2, 2, 1, 0, 1], ["ttrv", 1, 1, 0, 1, 0], ["total", "", 3, 1, 1, 1]]


RUN_COLUMNS = ["run_id", "model", "method", "train_dataset", "target_dataset", "n_adapt", "sampling", "seed"]


def _two_runs(**extra):
    """a: zero-shot InternVL3-2B ("m") on DTD ("d") on the TTRV authors' items; b: vr-ttrl of a model the paper
    does not name ("x"), 80 s a sample, items not recorded."""
    runs = pd.DataFrame([("a", "m", "zero-shot", "none", "d", "20", "random", 0, "accuracy", 50.0),
                         ("b", "x", "vr-ttrl", "d", "d", "20", "random", 0, "giou", 75.0)],
                        columns=[*RUN_COLUMNS, "metric", "value"])
    return runs.assign(items=["ttrv-authors", None], **extra)


def _long_row(run, metric, value):
    model, train = ("InternVL3-2B", "none") if run == "a" else ("x", "DTD")
    method = "zero-shot" if run == "a" else "vr-ttrl"
    return {"run_id": run, "model": model, "method": method, "train_dataset": "none" if run == "a" else "d",
            "target_dataset": "d", "n_adapt": "20", "sampling": "random", "seed": 0,
            "items": "ttrv-authors" if run == "a" else "ours", "protocol": "clean", "our_metric": metric,
            "value": value, "train": train, "target": "DTD"}


def test_long_runs_give_each_metric_and_the_seconds_per_sample_of_each_run_under_the_papers_names():
    """One row per (run, metric): the metrics table's scores (b's cIoU 70 included), then seconds_per_sample (VR-TTRL
    Table 8): the run's own 80 s, and 0 s for zero-shot, which adapts nothing. Models and datasets take the papers'
    names where we map them (m -> InternVL3-2B, d -> DTD), keep ours otherwise; items default to "ours" and the
    protocol to "clean" (results from before those columns); no item count recorded: n is NaN (float)."""
    names = ({"m": "InternVL3-2B"}, {"d": "DTD"})
    metrics = pd.DataFrame({"run_id": ["a", "b", "b"], "metric": ["accuracy", "giou", "ciou"],
                            "value": [50.0, 75.0, 70.0]})
    long = pt._long_runs(_two_runs(seconds_per_sample=[float("nan"), 80.0]), metrics, *names)
    assert long["n"].isna().all() and long["n"].dtype == "float64"
    assert long.drop(columns="n").to_dict("records") == [
        _long_row("a", "accuracy", 50.0), _long_row("a", "seconds_per_sample", 0.0),
        _long_row("b", "giou", 75.0), _long_row("b", "ciou", 70.0), _long_row("b", "seconds_per_sample", 80.0)]
    # no metrics table: each run's own metric; no seconds column: zero-shot's 0 s alone (b listed first, so the
    # zero-shot run is not at index 0)
    long = pt._long_runs(_two_runs().iloc[::-1].reset_index(drop=True), pd.DataFrame(), *names)
    assert long.drop(columns="n").to_dict("records") == [
        _long_row("b", "giou", 75.0), _long_row("a", "accuracy", 50.0), _long_row("a", "seconds_per_sample", 0.0)]
    assert long["value"].dtype == "float64"
    unnamed = pt._long_runs(_two_runs(), pd.DataFrame(), {}, {})  # nothing mapped: our names stand
    assert unnamed[["model", "train", "target"]].values.tolist() == [["m", "none", "d"], ["m", "none", "d"],
                                                                      ["x", "d", "d"]]
    empty = pt._long_runs(_two_runs().iloc[:0], metrics, *names)
    assert empty.empty and list(empty.columns) == [*RUN_COLUMNS, "n", "items", "protocol", "train", "target",
                                                   "our_metric", "value"]


def test_a_cell_takes_each_runs_first_candidate_metric_and_a_metric_we_do_not_measure_fills_nothing():
    """ECHO Table 2 (main protocol: all samples, random). The zero-shot run on MathVision logged accuracy 30 first and
    sampled pass@1 25 second: the pass@1 cell takes pass@1 (METRICS["pass@1"] lists it before accuracy), 25, not
    the first logged (30) nor both (27.5). echo@Geometry3k's only cell is a metric no run measures ("f1", no
    candidates): no cell, no error, and it does not lend its metric to zero-shot's row."""
    published = pd.DataFrame(
        [("echo", 2, "Qwen2.5-VL-7B", "zero-shot", "MathVision", "pass@1", 24.9),
         ("echo", 2, "Qwen2.5-VL-7B", "echo@Geometry3k", "MathVision", "f1", 10.0)],
        columns=["paper", "table", "model", "method", "dataset", "metric", "value"])
    runs = pd.DataFrame([("z", "q7", "zero-shot", "none", "mathvision", "all", "random", 0, "accuracy", 30.0),
                         ("e", "q7", "echo", "geometry3k", "mathvision", "all", "random", 0, "pass@1", 28.0)],
                        columns=[*RUN_COLUMNS, "metric", "value"])
    metrics = pd.DataFrame({"run_id": ["z", "z", "e"], "metric": ["accuracy", "pass@1", "pass@1"],
                            "value": [30.0, 25.0, 28.0]})
    ours = pt.our_cells(published, runs, metrics, pd.DataFrame(), pd.DataFrame(), {"q7": "Qwen2.5-VL-7B"},
                        {"mathvision": "MathVision", "geometry3k": "Geometry3k"}, main=("all", "random"))
    assert ours[[*pt.KEY, "ours", "our_metric"]].values.tolist() == [
        ["echo", 2, "Qwen2.5-VL-7B", "zero-shot", "MathVision", "pass@1", 25.0, "pass@1"]]


def test_table_8_cells_give_each_datasets_count_before_and_after_the_resolution_filter_as_floats():
    """TTRV Table 8: per dataset n_original (before the filter) then n_used (kept), under the paper's dataset name
    where we map one (dtd -> DTD), ours otherwise; counts as floats (the cells' `ours` column); no prep_stats, no
    cells."""
    prep = pd.DataFrame({"dataset": ["dtd", "newset"], "original": [5640, 10], "kept": [5600, 7]})
    parts = pt._prep_cells(("ttrv", 8), prep, {"dtd": "DTD"})
    cells = pd.concat(parts, ignore_index=True)
    assert list(cells.columns) == ["paper", "table", "model", "method", "dataset", "metric", "ours", "our_metric"]
    assert cells["ours"].dtype == "float64"
    assert cells.values.tolist() == [
        ["ttrv", 8, "-", "resolution-filter", "DTD", "n_original", 5640.0, "prep_stats.original"],
        ["ttrv", 8, "-", "resolution-filter", "newset", "n_original", 10.0, "prep_stats.original"],
        ["ttrv", 8, "-", "resolution-filter", "DTD", "n_used", 5600.0, "prep_stats.kept"],
        ["ttrv", 8, "-", "resolution-filter", "newset", "n_used", 7.0, "prep_stats.kept"]]
    assert pt._prep_cells(("ttrv", 8), prep.iloc[:0], {}) == []


def test_table_10_latency_is_the_mean_wall_time_of_the_paper_models_jobs_per_kind():
    """TTRV Table 10 from Snakemake's benchmark files: evaluate jobs are normal inference, adapt jobs adaptation on
    n<N> samples. A job's model counts when it is one of the paper's, under our key (m2b) or already under the
    paper's name (InternVL3-2B); the demo model's job is left out. Normal inference (10 + 20) / 2 = 15 over 2 jobs;
    adapting on 20 samples 200 (1 job), on 1 sample 30 (1 job, "sample" singular)."""
    benchmarks = pd.DataFrame(
        [("evaluate", "m2b/zero-shot/none/dtd/n20_random/seed0", 10.0),
         ("evaluate", "InternVL3-2B/zero-shot/none/dtd/n20_random/seed0", 20.0),
         ("evaluate", "demo/zero-shot/none/dtd/n20_random/seed0", 99.0),
         ("adapt", "m2b/ttrv/dtd/dtd/n20_random/seed0", 200.0),
         ("adapt", "m2b/ttrv/dtd/dtd/n1_random/seed0", 30.0)], columns=["rule", "job", "seconds"])
    parts = pt._latency_cells(("ttrv", 10), benchmarks, {"InternVL3-2B"}, {"m2b": "InternVL3-2B"})
    cells = pd.concat(parts, ignore_index=True)
    assert cells.values.tolist() == [
        ["ttrv", 10, "unspecified", "normal-inference", "all", "latency_s", 15.0, "benchmark s, mean of 2 jobs"],
        ["ttrv", 10, "unspecified", "adaptation-20-samples", "all", "latency_s", 200.0, "benchmark s, mean of 1 jobs"],
        ["ttrv", 10, "unspecified", "adaptation-1-sample", "all", "latency_s", 30.0, "benchmark s, mean of 1 jobs"]]
    assert list(cells.columns) == ["paper", "table", "model", "method", "dataset", "metric", "ours", "our_metric"]
    assert pt._latency_cells(("ttrv", 10), benchmarks.iloc[:0], {"InternVL3-2B"}, {}) == []


def test_our_cells_refuse_unknown_metric_definitions_naming_the_setting_and_the_known_ones():
    empty = pd.DataFrame()
    with pytest.raises(ValueError) as refused:
        pt.our_cells(empty, empty, empty, empty, empty, {}, {}, definitions="paper")
    assert str(refused.value) == ("evaluation.grounding.metric_definitions must be one of code, appendix_a, "
                                  "got 'paper'")


def test_an_empty_selection_of_published_cells_compares_to_an_empty_table_with_every_column():
    published = pd.DataFrame(columns=[*pt.KEY, "value"])
    comparison = pt.compare(published, pd.DataFrame(columns=pt._OUT))
    assert comparison.empty and list(comparison.columns) == [
        *pt.KEY, "paper_value", "ours", "low", "high", "our_metric", "delta", "status", "items", "protocol"]
