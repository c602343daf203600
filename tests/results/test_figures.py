"""Figures a reader meets beside the main one (issue 26 point 8): cross_dataset without cross runs
is one readable panel, not a strip of empty heatmaps; in step_costs VR-TTRL's few long steps do not
set the y-range of the other methods, and the legend sits off the curves."""

import pandas as pd
from PIL import Image

from ttrl_bench.results import figures


def _runs(pairs):
    """Greedy scores: zero-shot on every target, then an adapted run per (method, train, target)."""
    rows = [{"model": "m", "method": "zero-shot", "train_dataset": "none", "target_dataset": t, "value": 50.0}
            for t in {t for _, _, t in pairs}]
    rows += [{"model": "m", "method": m, "train_dataset": a, "target_dataset": t, "value": 60.0} for m, a, t in pairs]
    return pd.DataFrame(rows)


def test_without_cross_dataset_runs_the_figure_says_so_at_a_readable_size(tmp_path):
    # the demo: six methods, each adapted and evaluated on the same dataset only
    in_domain = _runs([(m, "demo-digits", "demo-digits") for m in ("ttrv", "ttrl", "dare", "random-reward",
                                                                   "ttrv-no-frequency", "vr-ttrl")])
    for runs, name in ((in_domain, "in_domain"), (pd.DataFrame(), "empty")):
        figures.cross_dataset_heatmap(runs, tmp_path / f"{name}.png")
        assert Image.open(tmp_path / f"{name}.png").size == (900, 450)  # 6 x 3 in at 150 dpi, not 3600 x 540


def test_cross_dataset_panels_wrap_at_three_a_row(tmp_path):
    pairs = [(m, "dtd", "seed-bench") for m in ("ttrv", "ttrl", "dare", "random-reward")]
    figures.cross_dataset_heatmap(_runs(pairs + [("ttrv-no-frequency", "dtd", "dtd")]), tmp_path / "cross.png")
    # 4 methods with cross runs (the in-domain-only one has no panel): 2 rows of 3, 4.5 x 4 in each
    assert Image.open(tmp_path / "cross.png").size == (int(3 * 4.5 * 150), 2 * 4 * 150)


def test_step_costs_give_per_sample_methods_their_own_y_range_and_keep_legends_off_the_curves(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.append(fig))
    # TTRV: 10 optimizer steps of ~2-token answers; VR-TTRL: 2 generation rounds of 41-token answers on each of
    # its samples. Only per-sample logs have a `sample` column: after ingest the dataset runs' is NaN (the demo's
    # store), and their rounds must still be counted (a groupby dropping NaN keys left them uncountable)
    log = pd.DataFrame([{"model": "m", "method": "ttrv", "train_dataset": "d", "seed": 0, "step": s,
                         "seconds": 1.0, "completion_length": 2.0} for s in range(10)]
                       + [{"model": "m", "method": "vr-ttrl", "train_dataset": "s", "seed": 0, "step": s,
                           "sample": sample, "seconds": 9.0, "completion_length": 41.0}
                          for sample in ("a", "b") for s in range(2)])
    assert log["sample"].isna().sum() == 10
    figures.step_costs(log, tmp_path / "steps.png")
    fig = drawn[0]
    fig.canvas.draw()
    (seconds, length), (vr_seconds, vr_length) = [fig.axes[0:2], fig.axes[2:4]]
    assert length.get_ylim()[1] < 5 and seconds.get_ylim()[1] < 5  # TTRV's scale, not VR-TTRL's 41 / 9
    assert vr_length.get_ylim()[0] < 41 < vr_length.get_ylim()[1] and vr_seconds.get_ylim()[0] < 9 < vr_seconds.get_ylim()[1]
    # rounds counted per run: TTRV's 10, VR-TTRL's 2 per sample (the mean over its two samples)
    assert list(seconds.get_lines()[0].get_xdata()) == list(range(1, 11))
    assert list(vr_seconds.get_lines()[0].get_xdata()) == [1, 2]
    for ax in (length, vr_length):
        legend, panel = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert legend.x0 >= panel.x1  # right of the panel, over no curve
    assert [t.get_text() for t in length.get_legend().get_texts()] == ["m: TTRV (d)"]


def test_claims_figure_grows_a_row_per_point_and_names_the_claims_not_run(tmp_path):
    # claims.figure_points' columns: two tested cells (one with the paper's own cell), and none at all
    points = pd.DataFrame({
        "claim": ["ttrv-vs-base", "random-vs-base"], "label": ["ttrv-vs-base\nm / d", "random-vs-base\nm / d"],
        "direction": ["greater", "less"], "verdict": ["supported", "not resolved"], "difference": [20.0, -3.0],
        "low": [15.0, -7.0], "high": [25.0, 1.0], "published": [float("nan"), -4.96], "paper_low": [-10.14, -4.96],
        "paper_high": [52.49, -1.53]})
    figures.claims_forest(points, ["t3rl-vs-ttrl"], tmp_path / "two.png")
    figures.claims_forest(points.iloc[:0], ["t3rl-vs-ttrl"], tmp_path / "none.png")
    two, none = Image.open(tmp_path / "two.png"), Image.open(tmp_path / "none.png")
    # 10 x (1.2 + 0.5 per point) inches at 150 dpi: 1500 x 330 for two points, 1500 x 255 for none (one row's room)
    assert two.size == (1500, 330) and none.size == (1500, 255)
    assert (tmp_path / "two.pdf").exists()


def test_step_costs_plot_each_rounds_seconds_at_its_round_and_say_so(tmp_path, monkeypatch):
    """Issue 57: the training log has a row per generation round, `seconds` the whole round's and `step` its first
    optimizer step (0, 4, 8 with 4 steps a round, the demo's). The figure plots rounds 1, 2, 3 against those
    seconds (mean over the two seeds: (2 + 2.2) / 2 = 2.1, ...) and its axes say "per round", never "per step"."""
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.append(fig))
    log = pd.DataFrame([{"model": "m", "method": "ttrv", "train_dataset": "d", "seed": seed, "step": step,
                         "seconds": seconds + 0.2 * seed, "completion_length": 3.0}
                        for seed in (0, 1) for step, seconds in ((0, 2.0), (4, 1.8), (8, 2.4))])
    figures.step_costs(log, tmp_path / "steps.png")
    seconds, length = drawn[0].axes
    line = seconds.get_lines()[0]
    assert list(line.get_xdata()) == [1, 2, 3]
    assert [round(y, 6) for y in line.get_ydata()] == [2.1, 1.9, 2.5]
    assert (seconds.get_xlabel(), seconds.get_ylabel()) == ("generation round", "seconds per round")
    assert length.get_xlabel() == "generation round" and "optimizer steps" in seconds.get_title(loc="left")
