"""The published tables: which exist (`PAPER_TABLES`, in published.csv's order) and how each reads our runs
(`TABLES`: its title, the paper's methods mapped onto ours, its datasets and source). paper_tables.py
scores and lays them out."""

from __future__ import annotations

from dataclasses import dataclass, field

# The (paper, table) pairs of published.csv in its order; tests/results/test_paper_tables.py checks the CSV.
PAPER_TABLES = [
    ("ttrv", 1), ("ttrv", 2), ("ttrv", 3), ("ttrv", 4), ("ttrv", 5), ("ttrv", 6), ("ttrv", 7), ("ttrv", 9),
    ("ttrv", 10), ("ttrv", 11), ("ttrv", 12), ("ttrv", 8),
    ("vr-ttrl", 2), ("vr-ttrl", 3), ("vr-ttrl", 8), ("vr-ttrl", 7), ("vr-ttrl", 9), ("vr-ttrl", 10), ("vr-ttrl", 11),
    ("echo", 2), ("echo", 12),
]


@dataclass(frozen=True)
class Table:
    """How one published table reads our runs.

    `methods`: a paper method -> our method, or (our method, n_adapt, sampling) for a protocol
    other than the main grid's (None: the main grid's), or (our method, n_adapt, sampling, train)
    for a method adapted on another dataset than the column's (`train`: its paper name, ECHO's
    "echo@Geometry3k" = ECHO trained on Geometry3k); unlisted methods are ours by the same name
    (methods we never implemented simply have no runs: "not run"). Zero-shot rows are always the
    main protocol's. `cross`: datasets are "Train->Target" (adapt on Train, evaluate on Target).
    `source`: "runs", or "prep_stats" / "benchmarks" for the two tables that are not scores.
    `datasets`: a paper dataset name of this table -> the name our runs carry (a table that names
    a split differently from the paper's other tables). `trained_elsewhere`: our methods whose runs
    adapt on another dataset (a training split) and count under the dataset they are evaluated on."""

    title: str
    methods: dict = field(default_factory=dict)
    cross: bool = False
    source: str = "runs"
    datasets: dict = field(default_factory=dict)
    trained_elsewhere: tuple = ()


TABLES = {
    ("ttrv", 1): Table("TTRV Table 1: image recognition, top-1 accuracy (%), zero-shot vs TTRV"),
    ("ttrv", 2): Table("TTRV Table 2: visual question answering, accuracy (%), zero-shot vs TTRV"),
    ("ttrv", 3): Table("TTRV Table 3: reward ablation (TTRL majority, TTRV without frequency / diversity)"),
    ("ttrv", 4): Table("TTRV Table 4: TTRV with random vs biased-4 sampling of the adaptation set",
                       {"ttrv-random-sampling": ("ttrv", None, "random"), "ttrv-biased-sampling": ("ttrv", None, "biased-4")}),
    ("ttrv", 5): Table("TTRV Table 5: TTRV vs a random reward"),
    ("ttrv", 6): Table("TTRV Table 6: TTRV adapting on a single test sample", {"ttrv-1-sample": ("ttrv", "1", None)}),
    ("ttrv", 7): Table("TTRV Table 7: TTRV on Qwen2.5-VL-3B"),
    ("ttrv", 9): Table("TTRV Table 9: TTRV adapting on 20 vs 500 test samples",
                       {"ttrv-20-samples": ("ttrv", "20", None), "ttrv-500-samples": ("ttrv", "500", None)}),
    ("ttrv", 10): Table("TTRV Table 10: latency (s) of inference and adaptation (ours: mean Snakemake job wall time)",
                        source="benchmarks"),
    ("ttrv", 11): Table("TTRV Table 11: mean and std of accuracy (%) over seeds"),
    ("ttrv", 12): Table("TTRV Table 12: cross-dataset, adapt on the left, evaluate on the right", cross=True),
    ("ttrv", 8): Table("TTRV Table 8: test samples before and after the resolution filter", source="prep_stats"),
    ("vr-ttrl", 2): Table("VR-TTRL Table 2: reasoning segmentation gIoU and counting accuracy (%)",
                          {"vote-only-consensus": "vote-only"}),
    ("vr-ttrl", 3): Table("VR-TTRL Table 3: reward ablation (single generation, anti-consensus), gIoU (%)"),
    ("vr-ttrl", 8): Table("VR-TTRL Table 8: number of updates per sample (0 updates = the base model)",
                          {"vr-ttrl-0-updates": "zero-shot", "vr-ttrl-5-updates": "vr-ttrl"}),
    ("vr-ttrl", 7): Table("VR-TTRL Table 7: number of rollouts (8 = the default)", {"vr-ttrl-8-rollouts": "vr-ttrl"}),
    ("vr-ttrl", 9): Table("VR-TTRL Table 9: consensus thresholds"),
    # Tables 10-11's "RefCOCOg testA" holds Table 2's RefCOCOg-test numbers (50.46, 56.38; RefCOCOg
    # has no testA): our refcocog runs. The methods carry our names (Appendix C.1's four baselines).
    ("vr-ttrl", 10): Table("VR-TTRL Table 10: single-sample baselines (Tent, MEMO, SFT on greedy / majority "
                           "pseudo-labels) vs VR-TTRL", datasets={"RefCOCOg-testA": "RefCOCOg-test"}),
    # "Offline (train-only)": trained on the training split once (config/vr-ttrl.yaml table11_offline,
    # 200 samples), evaluated on the split VR-TTRL adapts on.
    ("vr-ttrl", 11): Table("VR-TTRL Table 11: offline training on the train split vs VR-TTRL",
                           {"offline-train-split": ("offline-train-split", "200", None)},
                           datasets={"RefCOCOg-testA": "RefCOCOg-test"}, trained_elsewhere=("offline-train-split",)),
    # ECHO: methods adapted on a training set (method@set), evaluated on the four targets
    ("echo", 2): Table("ECHO Table 2: multimodal math reasoning, pass@1 (%) of MM-UPT and ECHO trained on "
                       "Geometry3k or GeoQA",
                       {f"{m}@{train}": (m, None, None, train) for m in ("mm-upt", "echo")
                        for train in ("Geometry3k", "GeoQA")}),
    # the paper names no training set; its ECHO row is Table 2's ECHO@Geometry3k (config/echo.yaml)
    ("echo", 12): Table("ECHO Table 12: supervised GRPO vs ECHO, both trained on Geometry3k, pass@1 (%)",
                        {"echo": ("echo", None, None, "Geometry3k"),
                         "supervised-grpo": ("supervised-grpo", None, None, "Geometry3k")}),
}
