"""Issue 39: results/paper_tables.py survivors of the seventh session's mutmut run over the whole module (the 1,064
mutants the first run left out: _long_runs, _score_cells, our_cells, compare, layout, the notes, the writers,
published_markers). Every expected value is worked out by hand from the frames built here."""

from __future__ import annotations

import pandas as pd

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
