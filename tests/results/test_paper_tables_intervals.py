"""results/paper_tables.py's intervals and flags at their boundaries: the Mean cell's interval from its
parts, Wilson at 0 and 100 %, one seed against two (the t interval), each status at its interval's edges and
without an interval at the paper's two decimals."""

import math

import pandas as pd
import pytest

from ttrl_bench.results import paper_tables as pt


Z = 1.959963984540054  # the normal's 97.5% quantile (scipy.stats.norm.ppf(0.975))


def _part(dataset, ours, se):
    """Our cell of one dataset with a symmetric 95% interval of standard error `se`."""
    return {"paper": "p", "table": 2, "model": "M", "method": "ttrv", "dataset": dataset, "metric": "count_acc",
            "ours": ours, "our_metric": "count_accuracy", "items": "ours", "protocol": "clean",
            "low": ours - Z * se, "high": ours + Z * se}


def test_mean_cell_interval_is_the_mean_of_independent_parts():
    """CountMean over three datasets at 60, 70, 80 with standard errors 3, 4, 12: mean 70, and the mean's
    standard error sqrt(3^2 + 4^2 + 12^2) / 3 = sqrt(169) / 3 = 13 / 3, so the interval is 70 -+ 1.95996 x 13/3
    = 70 -+ 8.4932: 61.5068 .. 78.4932 (not divided by 3: 70 -+ 25.4795). With two of them (3, 4): 65 -+ Z x 5/2."""
    cells = pd.DataFrame({"paper": "p", "table": 2, "metric": "count_acc", "dataset": ["A", "B", "C", "CountMean"]})
    ours = pd.DataFrame([_part("A", 60.0, 3.0), _part("B", 70.0, 4.0), _part("C", 80.0, 12.0)])
    mean = pt._means(cells, ours)
    assert len(mean) == 1
    row = mean.iloc[0]
    assert (row["dataset"], row["ours"]) == ("CountMean", pytest.approx(70.0))
    assert (row["low"], row["high"]) == (pytest.approx(61.50682, abs=1e-4), pytest.approx(78.49318, abs=1e-4))
    two = pd.DataFrame({"paper": "p", "table": 2, "metric": "count_acc", "dataset": ["A", "B", "SegMean"]})
    row = pt._means(two, ours[ours["dataset"] != "C"]).iloc[0]
    assert (row["dataset"], row["ours"]) == ("SegMean", pytest.approx(65.0))
    assert (row["low"], row["high"]) == (pytest.approx(65 - 4.89991, abs=1e-4), pytest.approx(65 + 4.89991, abs=1e-4))
    # a part missing: no mean at all
    assert pt._means(cells, ours[ours["dataset"] != "C"]).empty


def test_wilson_interval_at_0_and_100_percent():
    """Wilson at p = 0 over n items: centre = half = (z^2 / 2n) / (1 + z^2 / n), so low = 0 exactly and
    high = z^2 / (n + z^2) = 3.841459 / 103.841459 = 3.69934% for n = 100; p = 100% mirrors it: 96.30066 .. 100.
    No items: no interval."""
    low, high = pt.wilson(0.0, 100)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(3.69934, abs=1e-5)
    low, high = pt.wilson(100.0, 100)
    assert low == pytest.approx(96.30066, abs=1e-5) and high == pytest.approx(100.0, abs=1e-12)
    assert all(math.isnan(v) for v in pt.wilson(50.0, 0)) and all(math.isnan(v) for v in pt.wilson(50.0, math.nan))


def test_interval_of_one_seed_is_wilson_and_of_two_the_wider_t_interval():
    """One value: Wilson alone (50% of 490 items: 45.590 .. 54.410, test_author_logs). Two seeds 60 and 64: mean
    62, sample sd sqrt(8), t(0.975, 1 df) = 12.7062: half 12.7062 x sqrt(8) / sqrt(2) = 25.4124, wider than Wilson's
    at 62% of 490 (about 4.3): 36.5876 .. 87.4124. Not a proportion (seconds): no interval."""
    assert pt.interval(pd.Series([50.0]), 490, "acc") == (pytest.approx(45.590, abs=0.002), pytest.approx(54.410, abs=0.002))
    low, high = pt.interval(pd.Series([60.0, 64.0]), 490, "acc")
    assert (low, high) == (pytest.approx(36.5876, abs=1e-3), pytest.approx(87.4124, abs=1e-3))
    assert all(math.isnan(v) for v in pt.interval(pd.Series([80.0]), 490, "seconds_per_image"))


@pytest.mark.parametrize("paper_value, log_accuracy, status", [
    (50.0, None, "agrees"),      # exactly the low edge: inside
    (60.0, None, "agrees"),      # exactly the high edge: inside
    (49.999, None, "differs"),   # just under
    (60.001, None, "differs"),   # just over
    (55.0, 60.0, "agrees"),      # the log's accuracy at the edge too
    (55.0, 60.001, "differs"),   # the log's just outside
])
def test_status_agrees_at_the_interval_edges_and_differs_just_outside(paper_value, log_accuracy, status):
    row = pd.Series({"ours": 55.0, "low": 50.0, "high": 60.0, "paper_value": paper_value,
                     "log_accuracy": math.nan if log_accuracy is None else log_accuracy})
    assert pt._status(row) == status


def test_status_without_an_interval_compares_at_the_papers_two_decimals():
    """Counts and std cells: 5640.004 shows as 5640.00 (agrees), 5640.006 as 5640.01 (differs); no value: not run."""
    def row(ours):
        return pd.Series({"ours": ours, "low": math.nan, "high": math.nan, "paper_value": 5640.0})
    assert pt._status(row(5640.004)) == "agrees" and pt._status(row(5640.006)) == "differs"
    assert pt._status(row(math.nan)) == "not run"


def test_status_without_an_interval_rounds_both_values_to_two_decimals():
    """A std over seeds (TTRV Table 11) of 1.234 shows as 1.23: it agrees with the paper's 1.23 (not with 1.00,
    what rounding the paper's value to 0 decimals would compare with); 1.236 shows as 1.24 and differs."""
    def row(ours, paper_value):
        return pd.Series({"ours": ours, "low": math.nan, "high": math.nan, "paper_value": paper_value})
    assert pt._status(row(1.234, 1.23)) == "agrees" and pt._status(row(1.236, 1.23)) == "differs"
    assert pt._status(row(1.0, 1.23)) == "differs"


def test_mean_cell_takes_only_its_own_tables_parts_and_names_its_cell():
    """The CountMean of paper p's Table 2 over A (60, se 3) and B (70, se 4): 65 -+ Z x 5/2, whatever our cells of
    dataset A at 0 say for another paper, another table or another metric; a block without a Mean column before
    it (paper "a", sorted first) changes nothing."""
    cells = pd.DataFrame({"paper": ["a", "p", "p", "p"], "table": [1, 2, 2, 2], "metric": ["acc", *["count_acc"] * 3],
                          "dataset": ["X", "A", "B", "CountMean"]})
    others = [{**_part("A", 0.0, 1.0), **where} for where in ({"paper": "q"}, {"table": 3}, {"metric": "giou"})]
    ours = pd.DataFrame([_part("A", 60.0, 3.0), _part("B", 70.0, 4.0), *others])
    mean = pt._means(cells, ours)
    assert list(mean.columns) == pt._OUT  # compare's columns, in order
    rows = mean.to_dict("records")
    assert len(rows) == 1
    assert rows[0] == {"paper": "p", "table": 2, "model": "M", "method": "ttrv", "dataset": "CountMean",
                       "metric": "count_acc", "ours": pytest.approx(65.0), "our_metric": "count_accuracy",
                       "low": pytest.approx(65 - 4.89991, abs=1e-4), "high": pytest.approx(65 + 4.89991, abs=1e-4),
                       "items": "ours", "protocol": "clean"}
