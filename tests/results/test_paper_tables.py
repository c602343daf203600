"""Every published table regenerated from our runs: hand-worked cells against published.csv."""

import json
import math

import pandas as pd
import pytest

from ttrl_bench.results import figures
from ttrl_bench.results import paper_tables as pt
from ttrl_bench.results.store import PUBLISHED_CSV, ingest, read_table

from tests.support.results import _eval_dir


MODELS = {"m2b": "InternVL3-2B", "m4b": "InternVL2.5-4B", "m4": "InternVL3-4B", "vr": "VisionReasoner-7B",
          "q7": "Qwen2.5-VL-7B"}


PUBLISHED = pd.read_csv(PUBLISHED_CSV)
DATASETS = {"imagenet": "ImageNet", "imagenet-a": "ImageNet-A", "dtd": "DTD", "seed-bench": "SEED",
            "pixmo-count": "PixMo-Count-val", "pixmo-count-test": "PixMo-Count-test", "countbench": "CountBench-test",
            "refcocog": "RefCOCOg-test", "reasonseg": "ReasonSeg-val", "reasonseg-train": "ReasonSeg-train",
            "refcocog-train": "RefCOCOg-train"}


def _run(model, method, train, target, value, seed=0, n="20", sampling="random", metric="accuracy", extra=None,
         seconds_per_sample=None):
    run_id = f"{model}/{method}/{train}/{target}/n{n}_{sampling}/seed{seed}"
    return ({"run_id": run_id, "model": model, "method": method, "train_dataset": train, "target_dataset": target,
             "n_adapt": n, "sampling": sampling, "seed": seed, "metric": metric, "value": value,
             "seconds_per_sample": seconds_per_sample},
            [{"run_id": run_id, "metric": k, "value": v} for k, v in {metric: value, **(extra or {})}.items()])


RUNS = [
    _run("m2b", "zero-shot", "none", "imagenet", 60.0),
    _run("m2b", "ttrv", "imagenet", "imagenet", 99.0),
    _run("m4b", "zero-shot", "none", "dtd", 40.0),
    _run("m4b", "ttrv", "dtd", "dtd", 60.0, seed=0),  # TTRV Table 11: two seeds
    _run("m4b", "ttrv", "dtd", "dtd", 64.0, seed=1),
    _run("m4b", "zero-shot", "none", "seed-bench", 50.0),
    _run("m4b", "ttrv", "dtd", "seed-bench", 70.0),  # TTRV Table 12: cross-dataset
    _run("m4b", "ttrv", "imagenet-a", "imagenet-a", 93.0, n="1"),  # TTRV Table 6: one sample
    _run("m4", "zero-shot", "none", "imagenet-a", 90.0),
    _run("m4", "ttrv", "imagenet-a", "imagenet-a", 96.5),  # TTRV Table 4: random
    _run("m4", "ttrv", "imagenet-a", "imagenet-a", 94.0, sampling="biased-4"),
    _run("vr", "vr-ttrl", "pixmo-count", "pixmo-count", 80.0, metric="count_accuracy"),
    _run("vr", "vr-ttrl", "pixmo-count-test", "pixmo-count-test", 70.0, metric="count_accuracy"),
    _run("vr", "vr-ttrl", "countbench", "countbench", 90.0, metric="count_accuracy"),
    # VR-TTRL's gIoU / cIoU cells: SAM2-mask metrics (giou / ciou), never box_giou (test_box_masks_never_fill...)
    _run("vr", "vr-ttrl", "refcocog", "refcocog", 75.0, metric="giou", extra={"ciou": 70.0},
         seconds_per_sample=80.0),
    _run("vr", "tent", "refcocog", "refcocog", 60.0, metric="giou", extra={"ciou": 55.0}),  # VR-TTRL Table 10
    # VR-TTRL Table 11: trained offline on the training splits (200 samples), evaluated on the test splits
    _run("q7", "offline-train-split", "reasonseg-train", "reasonseg", 45.0, n="200", metric="giou",
         extra={"ciou": 44.0}),
    _run("q7", "offline-train-split", "refcocog-train", "refcocog", 52.0, n="200", metric="giou",
         extra={"ciou": 51.0}),
]
RUNS_FRAME = pd.DataFrame([run for run, _ in RUNS])
METRICS_FRAME = pd.DataFrame([m for _, ms in RUNS for m in ms])
PREP = pd.DataFrame([{"dataset": "dtd", "original": 5640, "kept": 5600}])
BENCHMARKS = pd.DataFrame([
    {"rule": "evaluate", "job": "m2b/zero-shot/none/imagenet/n20_random/seed0", "seconds": 10.0},
    {"rule": "evaluate", "job": "m2b/ttrv/imagenet/imagenet/n20_random/seed0", "seconds": 20.0},
    {"rule": "adapt", "job": "m2b/ttrv/imagenet/n20_random/seed0", "seconds": 200.0},
    {"rule": "adapt_per_sample", "job": "vr/vr-ttrl/refcocog/n20_random/seed0", "seconds": 999.0},  # not TTRV
    {"rule": "evaluate", "job": "demo/zero-shot/none/imagenet/n20_random/seed0", "seconds": 1000.0},  # no TTRV model
])


@pytest.fixture(scope="module")
def comparison():
    ours = pt.our_cells(PUBLISHED, RUNS_FRAME, METRICS_FRAME, PREP, BENCHMARKS, MODELS, DATASETS)
    return pt.compare(PUBLISHED, ours)


def _cell(comparison, paper, table, model, method, dataset, metric):
    row = comparison[(comparison["paper"] == paper) & (comparison["table"] == table) & (comparison["model"] == model)
                     & (comparison["method"] == method) & (comparison["dataset"] == dataset)
                     & (comparison["metric"] == metric)]
    assert len(row) == 1
    return row.iloc[0]


@pytest.mark.parametrize("where, ours, paper", [
    # TTRV Table 1 (published.csv: InternVL3-2B zero-shot ImageNet 56.00, TTRV 98.31)
    (("ttrv", 1, "InternVL3-2B", "zero-shot", "ImageNet", "top1_acc"), 60.0, 56.00),
    (("ttrv", 1, "InternVL3-2B", "ttrv", "ImageNet", "top1_acc"), 99.0, 98.31),
    # TTRV Table 9: the main protocol's 20 samples
    (("ttrv", 9, "InternVL3-2B", "ttrv-20-samples", "ImageNet", "top1_acc"), 99.0, 98.31),
    # TTRV Table 11: seeds 60 and 64 -> mean 62, sample std sqrt(((60-62)^2 + (64-62)^2) / 1) = sqrt(8)
    (("ttrv", 11, "InternVL2.5-4B", "ttrv", "DTD", "acc_mean"), 62.0, 81.87),
    (("ttrv", 11, "InternVL2.5-4B", "ttrv", "DTD", "acc_std"), math.sqrt(8), 0.80),
    # TTRV Table 12: TTRV adapted on DTD, scored on SEED; zero-shot = the base model on SEED
    (("ttrv", 12, "InternVL2.5-4B", "ttrv", "DTD->SEED", "acc"), 70.0, 59.07),
    (("ttrv", 12, "InternVL2.5-4B", "zero-shot", "DTD->SEED", "acc"), 50.0, 56.25),
    # TTRV Table 2: the cross run is not an in-domain SEED cell, the zero-shot one is
    (("ttrv", 2, "InternVL2.5-4B", "zero-shot", "SEED", "acc"), 50.0, None),
    # TTRV Table 4: sampling random / biased-4
    (("ttrv", 4, "InternVL3-4B", "ttrv-random-sampling", "ImageNet-A", "top1_acc"), 96.5, 96.00),
    (("ttrv", 4, "InternVL3-4B", "ttrv-biased-sampling", "ImageNet-A", "top1_acc"), 94.0, 95.09),
    (("ttrv", 4, "InternVL3-4B", "zero-shot", "ImageNet-A", "top1_acc"), 90.0, 90.67),
    # TTRV Table 6: n_adapt 1
    (("ttrv", 6, "InternVL2.5-4B", "ttrv-1-sample", "ImageNet-A", "acc"), 93.0, None),
    # TTRV Table 8: prep_stats
    (("ttrv", 8, "-", "resolution-filter", "DTD", "n_original"), 5640.0, 5640.0),
    (("ttrv", 8, "-", "resolution-filter", "DTD", "n_used"), 5600.0, 5640.0),
    # TTRV Table 10: evaluate jobs of TTRV's models (10 + 20) / 2, not the demo's; the one n20 GRPO adapt job
    (("ttrv", 10, "unspecified", "normal-inference", "all", "latency_s"), 15.0, 25.5),
    (("ttrv", 10, "unspecified", "adaptation-20-samples", "all", "latency_s"), 200.0, 226.2),
    # VR-TTRL Table 2: CountMean = (80 + 70 + 90) / 3, all three counting sets present
    (("vr-ttrl", 2, "VisionReasoner-7B", "vr-ttrl", "CountMean", "count_acc"), 80.0, 80.50),
    # VR-TTRL Table 7: 8 rollouts = our default vr-ttrl
    (("vr-ttrl", 7, "VisionReasoner-7B", "vr-ttrl-8-rollouts", "RefCOCOg-test", "giou"), 75.0, 73.19),
    (("vr-ttrl", 7, "VisionReasoner-7B", "vr-ttrl-8-rollouts", "RefCOCOg-test", "ciou"), 70.0, 69.16),
    (("vr-ttrl", 7, "VisionReasoner-7B", "vr-ttrl-8-rollouts", "RefCOCOg-test", "seconds_per_image"), 80.0, 86.70),
    # VR-TTRL Table 10 (its "RefCOCOg testA" is our refcocog, Table 2's RefCOCOg-test): Tent and VR-TTRL gIoU
    (("vr-ttrl", 10, "VisionReasoner-7B", "tent", "RefCOCOg-testA", "giou"), 60.0, 62.77),
    (("vr-ttrl", 10, "VisionReasoner-7B", "vr-ttrl", "RefCOCOg-testA", "giou"), 75.0, 73.19),
    # VR-TTRL Table 11: offline training on the train split, scored on ReasonSeg val (gIoU) and RefCOCOg (cIoU)
    (("vr-ttrl", 11, "Qwen2.5-VL-7B", "offline-train-split", "ReasonSeg-val", "giou"), 45.0, 47.65),
    (("vr-ttrl", 11, "Qwen2.5-VL-7B", "offline-train-split", "RefCOCOg-testA", "ciou"), 51.0, 53.27),
])
def test_cells_with_our_run(comparison, where, ours, paper):
    cell = _cell(comparison, *where)
    assert cell["status"] in ("agrees", "differs")
    assert cell["ours"] == pytest.approx(ours)
    assert cell["delta"] == pytest.approx(ours - cell["paper_value"])
    if paper is not None:
        assert cell["paper_value"] == pytest.approx(paper)


@pytest.mark.parametrize("where", [
    ("ttrv", 1, "InternVL3-2B", "zero-shot", "Mean", "top1_acc"),  # 1 of the 8 datasets only
    ("ttrv", 2, "InternVL2.5-4B", "ttrv", "SEED", "acc"),  # only a cross run adapted-and-scored there
    ("ttrv", 11, "InternVL2.5-4B", "zero-shot", "DTD", "acc_std"),  # one seed: no std
    ("ttrv", 8, "-", "resolution-filter", "ImageNet", "n_original"),
    ("ttrv", 10, "unspecified", "adaptation-500-samples", "all", "latency_s"),
    ("vr-ttrl", 7, "VisionReasoner-7B", "vr-ttrl-8-rollouts", "RefCOCOg-test", "bbox_ap"),  # not measured
    ("vr-ttrl", 10, "VisionReasoner-7B", "tent", "ReasonSeg-val", "giou"),  # no Tent run on ReasonSeg
    ("vr-ttrl", 10, "Qwen2.5-VL-7B", "tent", "RefCOCOg-testA", "giou"),  # nor with Qwen
    # the offline runs adapt elsewhere, but only Table 11 reads them so; Table 2 has no such row
    ("vr-ttrl", 11, "Qwen2.5-VL-7B", "vr-ttrl", "ReasonSeg-val", "giou"),
])
def test_cells_without_our_run_are_not_run(comparison, where):
    cell = _cell(comparison, *where)
    assert cell["status"] == "not run" and pd.isna(cell["ours"]) and pd.isna(cell["delta"])


def test_mask_cells_name_the_mask_metric(comparison):
    assert _cell(comparison, "vr-ttrl", 7, "VisionReasoner-7B", "vr-ttrl-8-rollouts", "RefCOCOg-test",
                 "giou")["our_metric"] == "giou"


def test_box_masks_never_fill_a_published_mask_cell():
    """Issue 35: a run without SAM2 (box_giou / box_ciou, the boxes as masks) is our own metric: the
    paper's SAM2-mask gIoU / cIoU cells stay "not run" however close its value."""
    box_only = [_run("vr", "vr-ttrl", "refcocog", "refcocog", 73.19, metric="box_giou", extra={"box_ciou": 69.16})]
    ours = pt.our_cells(PUBLISHED, pd.DataFrame([r for r, _ in box_only]), pd.DataFrame([m for _, ms in box_only for m in ms]),
                        PREP, BENCHMARKS, MODELS, DATASETS)
    assert not ours["our_metric"].isin(["box_giou", "box_ciou"]).any()
    cell = _cell(pt.compare(PUBLISHED, ours), "vr-ttrl", 7, "VisionReasoner-7B", "vr-ttrl-8-rollouts", "RefCOCOg-test",
                 "giou")
    assert cell["status"] == "not run" and pd.isna(cell["ours"])


def test_every_published_cell_appears_exactly_once(comparison):
    assert len(comparison) == 587
    assert not comparison.duplicated(pt.KEY).any()
    assert comparison[pt.KEY].equals(PUBLISHED[pt.KEY])
    fidelity = pt.fidelity_summary(comparison)
    assert fidelity.iloc[-1][["paper", "cells"]].tolist() == ["total", 587]
    assert fidelity.iloc[-1]["agrees"] == (comparison["status"] == "agrees").sum()
    assert fidelity.iloc[-1]["differs"] == (comparison["status"] == "differs").sum()


def test_without_runs_every_table_lays_out_as_not_run():
    empty = pd.DataFrame()
    comparison = pt.compare(PUBLISHED, pt.our_cells(PUBLISHED, empty, empty, empty, empty, {}, {}))
    assert (comparison["status"] == "not run").all()
    for paper, table in pt.PAPER_TABLES:
        cells = comparison[(comparison["paper"] == paper) & (comparison["table"] == table)]
        wide = pt.layout(cells)
        assert (wide != "").sum().sum() == len(cells)  # one layout cell per published cell
        pt.to_latex(wide, pt.TABLES[(paper, table)].title)
    fidelity = pt.fidelity_summary(comparison)
    assert fidelity.iloc[-1][["cells", "agrees", "differs", "not_run"]].tolist() == [587, 0, 0, 587]
    assert len(fidelity) == len(pt.PAPER_TABLES) + 1


def test_paper_tables_list_every_table_of_published_csv():
    assert pt.PAPER_TABLES == list(PUBLISHED[["paper", "table"]].drop_duplicates().itertuples(index=False, name=None))
    assert list(pt.TABLES) == pt.PAPER_TABLES


def test_cell_text():
    row = {"metric": "acc", "paper_value": 54.40, "status": "differs", "ours": 39.69, "delta": 39.69 - 54.40,
           "low": 35.4, "high": 44.2}
    assert pt.cell_text(row) == "39.69 ±4.4 / 54.40 (−14.71, differs)"
    assert pt.cell_text({**row, "ours": 55.0, "delta": 0.6, "status": "agrees"}) == "55.00 ±4.4 / 54.40 (+0.60, agrees)"
    assert pt.cell_text({**row, "status": "not run"}) == "– / 54.40 (not run)"
    assert pt.cell_text({"metric": "n_used", "paper_value": 5640.0, "status": "differs", "ours": 5600.0,
                         "delta": -40.0}) == "5600 / 5640 (−40, differs)"


def test_layout_keeps_paper_order_and_splits_metrics_only_where_needed(comparison):
    table1 = pt.layout(comparison[(comparison["paper"] == "ttrv") & (comparison["table"] == 1)])
    assert table1.index[0] == ("GPT-4o", "zero-shot")
    assert list(table1.columns)[:2] == ["ImageNet", "ImageNet-V2"] and table1.columns[-1] == "Mean"
    assert table1.loc[("InternVL3-2B", "zero-shot"), "ImageNet"] == "60.00 / 56.00 (+4.00, differs)"
    table11 = pt.layout(comparison[(comparison["paper"] == "ttrv") & (comparison["table"] == 11)])
    assert list(table11.columns)[:2] == ["DTD (acc_mean)", "ImageNet-A (acc_mean)"]
    assert table11.loc[("InternVL2.5-4B", "ttrv"), "DTD (acc_std)"] == "2.83 / 0.80 (+2.03, differs)"


def test_latex_escapes_and_uses_booktabs():
    assert pt.tex_escape("top1_acc 100% & #1 −2 A->B") == r"top1\_acc 100\% \& \#1 $-$2 A$\to$B"
    tex = pt.to_latex(pd.DataFrame({"n_used": ["5 / 6 (−1)"]}, index=pd.Index(["m_1"], name="model")), "Table 8: 50%")
    assert r"\caption{Table 8: 50\%}" in tex and r"\toprule" in tex and r"\bottomrule" in tex
    assert r"model & n\_used \\" in tex and r"m\_1 & 5 / 6 ($-$1) \\" in tex


def test_ingest_reads_snakemake_benchmark_files(tmp_path):
    bench = tmp_path / "benchmarks" / "adapt" / "m" / "ttrv" / "d" / "n20_random"
    bench.mkdir(parents=True)
    (bench / "seed0.tsv").write_text("s\th:m:s\tmax_rss\n12.5\t0:00:12\t100.0\n")
    db = tmp_path / "b.duckdb"
    counts = ingest(db, [], [], [], tmp_path / "benchmarks")
    assert counts["benchmarks"] == 1
    assert read_table(db, "benchmarks").to_dict("records") == [
        {"rule": "adapt", "job": "m/ttrv/d/n20_random/seed0", "seconds": 12.5, "max_rss_mb": 100.0}]
    assert read_table(db, "runs").empty  # no eval dirs: no table, read as empty


def test_figures_draw_with_and_without_cross_runs(tmp_path):
    markers = pt.published_markers(PUBLISHED, MODELS, DATASETS)
    # TTRV Table 1: InternVL3-2B zero-shot ImageNet 56.00 is the tick on our bar
    tick = markers[(markers["model"] == "m2b") & (markers["method"] == "zero-shot") & (markers["target_dataset"] == "imagenet")]
    assert tick[["metric", "value"]].values.tolist() == [["accuracy", 56.0]]
    figures.accuracy_bars(RUNS_FRAME, tmp_path / "accuracy.png", markers)
    figures.cross_dataset_heatmap(RUNS_FRAME, tmp_path / "cross.png")
    figures.cross_dataset_heatmap(pd.DataFrame(), tmp_path / "empty.png")
    log = pd.DataFrame({"model": "m", "method": "vr-ttrl", "train_dataset": "d", "seed": 0, "step": [0, 1, 0, 1],
                        "seconds": [1.0, 2.0, 3.0, 4.0], "completion_length": [10.0, 12.0, 14.0, 16.0]})
    figures.step_costs(log, tmp_path / "steps.png")
    figures.step_costs(log.drop(columns="completion_length"), tmp_path / "steps_old.png")
    for name in ("accuracy", "cross", "empty", "steps", "steps_old"):
        assert (tmp_path / f"{name}.png").stat().st_size > 0 and (tmp_path / f"{name}.pdf").exists()


def test_render_tables_cli_writes_every_table(tmp_path):
    from ttrl_bench.cli import main

    db = tmp_path / "b.duckdb"
    ingest(db, [], [], [])
    assert main(["render-tables", "--db", str(db), "--out-dir", str(tmp_path / "t"), "--model-names", json.dumps(MODELS)]) == 0
    for paper, table in pt.PAPER_TABLES:
        for ext in ("md", "tex", "csv"):
            assert (tmp_path / "t" / f"{paper}_table{table}.{ext}").exists()
    fidelity = (tmp_path / "t" / "fidelity.md").read_text()
    assert "| total |  | 587 | 0 | 0 | 587 |" in fidelity
    # the authors' logs give 49 of the 375 TTRV cells (tests/results/test_provenance.py checks them one by one)
    assert "| log gives the published value | 49 |" in fidelity and "| all TTRV cells | 375 |" in fidelity
    assert "0 of 126 cells agree" in (tmp_path / "t" / "ttrv_table1_layout.md").read_text()


def test_appendix_c_baselines_and_offline_runs_in_the_store_render_in_tables_10_and_11(tmp_path):
    """VR-TTRL Tables 10 and 11 from ingested job outputs: the four baselines' cells and the offline
    variant's (trained on a training split, scored on the test split) read ours / paper (delta)."""
    from ttrl_bench.cli import main

    names = {"qwen": "Qwen2.5-VL-7B"}
    dirs = [_eval_dir(tmp_path / "eval", "qwen", method, "refcocog", "refcocog", 20, {"giou": value})
            for method, value in [("tent", 40.0), ("memo", 41.0), ("sft-greedy-pseudo-label", 36.0),
                                  ("sft-majority-pseudo-label", 47.0)]]
    dirs.append(_eval_dir(tmp_path / "eval", "qwen", "offline-train-split", "reasonseg-train", "reasonseg", 200,
                          {"giou": 48.0, "ciou": 50.0}))
    db = tmp_path / "b.duckdb"
    ingest(db, dirs, [], [])
    out = tmp_path / "t"
    assert main(["render-tables", "--db", str(db), "--out-dir", str(out), "--model-names", json.dumps(names)]) == 0
    table10 = pd.read_csv(out / "vr-ttrl_table10.csv").set_index(["model", "method", "dataset"])
    qwen = table10.loc[("Qwen2.5-VL-7B", slice(None), "RefCOCOg-testA"), "delta"].droplevel([0, 2]).round(2)
    # published (Table 10, Qwen2.5-VL-7B, RefCOCOg testA): Tent 39.43, MEMO 41.29, SFT greedy 36.43, SFT majority 46.73
    assert qwen[["tent", "memo", "sft-greedy-pseudo-label", "sft-majority-pseudo-label"]].tolist() == [
        0.57, -0.29, -0.43, 0.27]
    text = (out / "vr-ttrl_table10.md").read_text()
    assert "40.00 ±6.7 / 39.43 (+0.57, agrees)" in text and "not implemented" not in text
    # Table 11: ReasonSeg val gIoU 48.00 against the published 47.65
    table11 = (out / "vr-ttrl_table11.md").read_text()
    assert "48.00 ±6.9 / 47.65 (+0.35, agrees)" in table11 and "not implemented" not in table11


# ECHO Tables 2 and 12: methods adapted on a training set (Geometry3k / GeoQA), scored on four targets
ECHO_DATASETS = {"geometry3k": "Geometry3k", "geoqa": "GeoQA", "mathvision-math": "MathVision",
                 "mathverse-math": "MathVerse", "mathvista-math": "MathVista", "logicvista-math": "LogicVista"}
ECHO_RUNS = [
    _run("q7", "zero-shot", "none", "mathvision-math", 25.0, n="all", metric="pass@1"),
    _run("q7", "zero-shot", "none", "mathverse-math", 44.0, n="all"),  # greedy: accuracy stands in
    *[_run("q7", "echo", "geometry3k", target, value, n="all", metric="pass@1")
      for target, value in [("mathvision-math", 30.0), ("mathverse-math", 40.0), ("mathvista-math", 70.0),
                            ("logicvista-math", 20.0)]],
    _run("q7", "echo", "geoqa", "mathvision-math", 31.0, n="all", metric="pass@1"),
    _run("q7", "mm-upt", "geometry3k", "mathvision-math", 28.0, n="all", metric="pass@1"),
    _run("q7", "supervised-grpo", "geometry3k", "mathvision-math", 29.0, n="all", metric="pass@1"),
]


@pytest.fixture(scope="module")
def echo_comparison():
    runs = pd.DataFrame([run for run, _ in ECHO_RUNS])
    metrics = pd.DataFrame([m for _, ms in ECHO_RUNS for m in ms])
    ours = pt.our_cells(PUBLISHED, runs, metrics, pd.DataFrame(), pd.DataFrame(), {"q7": "Qwen2.5-VL-7B"},
                        ECHO_DATASETS, main=("all", "random"))
    return pt.compare(PUBLISHED, ours)


@pytest.mark.parametrize("where, ours, paper", [
    # published.csv: Table 2 Qwen2.5-VL-7B zero-shot MathVision 24.9, MathVerse 43.8
    (("echo", 2, "Qwen2.5-VL-7B", "zero-shot", "MathVision", "pass@1"), 25.0, 24.9),
    (("echo", 2, "Qwen2.5-VL-7B", "zero-shot", "MathVerse", "pass@1"), 44.0, 43.8),
    # method@set: the run adapted on that set, on each target
    (("echo", 2, "Qwen2.5-VL-7B", "echo@Geometry3k", "MathVision", "pass@1"), 30.0, 28.1),
    (("echo", 2, "Qwen2.5-VL-7B", "echo@GeoQA", "MathVision", "pass@1"), 31.0, 28.5),
    (("echo", 2, "Qwen2.5-VL-7B", "mm-upt@Geometry3k", "MathVision", "pass@1"), 28.0, 27.3),
    # Mean over the 4 targets: (30 + 40 + 70 + 20) / 4 = 40.0 (paper 42.4)
    (("echo", 2, "Qwen2.5-VL-7B", "echo@Geometry3k", "Mean", "pass@1"), 40.0, 42.4),
    # Table 12: both trained on Geometry3k (ECHO row = Table 2's echo@Geometry3k)
    (("echo", 12, "Qwen2.5-VL-7B", "echo", "MathVision", "pass@1"), 30.0, 28.1),
    (("echo", 12, "Qwen2.5-VL-7B", "supervised-grpo", "MathVision", "pass@1"), 29.0, 28.3),
    (("echo", 12, "Qwen2.5-VL-7B", "zero-shot", "MathVision", "pass@1"), 25.0, 24.9),
])
def test_echo_cells_render_from_runs_adapted_on_a_training_set(echo_comparison, where, ours, paper):
    row = _cell(echo_comparison, *where)
    assert row["status"] in ("agrees", "differs")
    assert math.isclose(row["ours"], ours) and math.isclose(row["paper_value"], paper)


def test_echo_cells_without_a_run_stay_not_run(echo_comparison):
    # ECHO on GeoQA has no MathVerse run; the GeoQA run never fills a Geometry3k cell; Qwen3-VL has no run
    assert _cell(echo_comparison, "echo", 2, "Qwen2.5-VL-7B", "echo@GeoQA", "MathVerse", "pass@1")["status"] == "not run"
    assert _cell(echo_comparison, "echo", 2, "Qwen2.5-VL-7B", "mm-upt@GeoQA", "MathVision", "pass@1")["status"] == "not run"
    assert _cell(echo_comparison, "echo", 2, "Qwen3-VL-8B", "echo@Geometry3k", "MathVision", "pass@1")["status"] == "not run"
    # the Mean needs all four targets: echo@GeoQA has one
    assert _cell(echo_comparison, "echo", 2, "Qwen2.5-VL-7B", "echo@GeoQA", "Mean", "pass@1")["status"] == "not run"


def test_echo_titles_no_longer_say_not_implemented():
    assert "not implemented" not in pt.TABLES[("echo", 2)].title
    assert "not implemented" not in pt.TABLES[("echo", 12)].title


def test_compare_keeps_one_row_per_published_cell_when_ours_repeats_a_key():
    """Two of our rows for one cell (a rerun ingested twice) must not duplicate the published cell:
    the first is kept. 52 against 50 with no interval (no item count) differs."""
    key = {"paper": "ttrv", "table": 1, "model": "m", "method": "ttrv", "dataset": "d", "metric": "accuracy"}
    published = pd.DataFrame([{**key, "value": 50.0}, {**key, "dataset": "e", "value": 40.0}])
    ours = pd.DataFrame([{**key, "ours": 52.0, "our_metric": "accuracy"}, {**key, "ours": 99.0, "our_metric": "accuracy"}])
    table = pt.compare(published, ours)
    assert list(table["ours"].fillna(-1)) == [52.0, -1] and list(table["delta"].fillna(0)) == [2.0, 0]
    assert list(table["status"]) == ["differs", "not run"]


def test_each_table_says_whose_items_each_cell_scored():
    """Issue 33: DTD under the TTRV authors' items, ImageNet under ours; runs from before the `items` column
    count as ours. TTRV Table 1's InternVL3-2B row has both datasets."""
    runs = pd.DataFrame([
        {**_run("m2b", "zero-shot", "none", "imagenet", 60.0)[0]},
        {**_run("m2b", "zero-shot", "none", "dtd", 40.0)[0], "items": "ttrv-authors"},
        {**_run("m2b", "ttrv", "dtd", "dtd", 50.0)[0], "items": "ttrv-authors"},
    ])
    metrics = pd.DataFrame([{"run_id": r, "metric": "accuracy", "value": v} for r, v in zip(runs["run_id"], runs["value"])])
    cells = pt.compare(PUBLISHED, pt.our_cells(PUBLISHED, runs, metrics, pd.DataFrame(), pd.DataFrame(), MODELS, DATASETS))
    table1 = cells[(cells["paper"] == "ttrv") & (cells["table"].astype(str) == "1")]
    ran = table1[table1["status"] != "not run"].set_index(["method", "dataset"])["items"].to_dict()
    assert ran == {("zero-shot", "ImageNet"): "ours", ("zero-shot", "DTD"): "ttrv-authors", ("ttrv", "DTD"): "ttrv-authors"}
    assert pt.provenance_notes(table1) == [f"items: {pt.ITEMS['ours']} for ImageNet",
                                           f"items: {pt.ITEMS['ttrv-authors']} for DTD",
                                           f"protocol: {pt.PROTOCOLS['clean']} for ImageNet, DTD"]
