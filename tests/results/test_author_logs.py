"""The TTRV authors' verl logs: the importer, the shipped rows, and the provenance of published cells.

Every expected number is read by hand from the named log in Akshit21112002/TTRV (verl/logs/...):
validation accuracy = sum over the validation batches of [ground_truth_ratio] x batch size / items,
with the batch size the one that makes every batch's count whole (e.g. 0.4033... x 300 = 121).
"""

from pathlib import Path

import pandas as pd
import pytest

from ttrl_bench.results import paper_tables as pt
from ttrl_bench.results.author_logs import AuthorLogError, parse_log, shipped_runs, shipped_steps
from ttrl_bench.results.provenance import flag_counts, provenance
from ttrl_bench.results.store import PUBLISHED_CSV, ingest, read_table

# verl/logs/mathvista/mathvista_20_OpenGVLab_InternVL3-8B_2e_0914_022748.log, the prompt / response
# text and other actors' lines left out (41 kB of its 209 kB); ANSI codes and tqdm \r kept
EXCERPT = Path(__file__).parents[1] / "data" / "mathvista_20_OpenGVLab_InternVL3-8B_2e_0914_022748.excerpt.log"
PUBLISHED = pd.read_csv(PUBLISHED_CSV)
RUNS = shipped_runs().set_index("file")


def test_excerpt_parses_to_the_numbers_of_its_lines():
    row, steps = parse_log(EXCERPT)
    # config: 7 GPUs, train_batch_size 7, 2 epochs; "Total training steps: 4"; 20 + 490 items
    assert (row["n_gpus"], row["train_batch_size"], row["epochs"], row["rounds"]) == (7, 7, 2, 4)
    # one optimizer step per prompt (ppo_mini_batch_size 1): 7 per round x 4 rounds; int(0.03 x 4) = 0
    assert (row["optimizer_steps"], row["warmup_rounds"]) == (28, 0)
    assert (row["dataset"], row["model"], row["n_adapt"], row["n_test"]) == ("mathvista", "InternVL3-8B", 20, 490)
    assert (row["temperature"], row["votes"], row["trained_rollouts"]) == (1.0, 32, 16)
    # before: 0.395 x 200 + 0.355 x 200 + 0.3888... x 90 = 79 + 71 + 35; after: 85 + 75 + 37
    assert row["initial_acc"] == pytest.approx(100 * 185 / 490)
    assert row["final_acc"] == pytest.approx(100 * 197 / 490)
    # the pprinted dicts: acc/mean@1 np.float64(0.3739669421487603) -> np.float64(0.3987603305785124)
    assert row["reported_key"] == "val-aux/GPQA-TTT/acc/mean@1"
    assert row["initial_reported"] == pytest.approx(37.39669421487603)
    assert row["final_reported"] == pytest.approx(39.87603305785124)
    # step:1 ... train/label_accuracy:0.429 - train/majority_ratio:0.634; step:4 response_length/mean:11.545
    assert steps["step"].tolist() == [1, 2, 3, 4]
    assert steps.loc[0, ["train/label_accuracy", "train/majority_ratio"]].tolist() == [0.429, 0.634]
    assert steps.loc[3, "response_length/mean"] == 11.545
    assert not [c for c in steps if c.startswith("val")]  # validation keys belong to the run row


def _text() -> str:
    return EXCERPT.read_bytes().decode()  # as written: tqdm's bare \r kept


def _corrupt(tmp_path, text: str, name: str = "corrupted.log") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def test_corrupted_blocks_of_the_mirror_are_read_past(tmp_path):
    """The mirror's corruptions: a path pasted into the config (ai2d_500_..._2e_0915_075431.log:12),
    a value pprint wrapped onto its own line (mathvista_20_..._InternVL3-2B_2e_0916_181330.log:33),
    tqdm and another actor's lines inside a pprinted dict (imagenet_a_20_Qwen..._0825_025412.log)."""
    text = _text()
    prefix = "\x1b[36m(TaskRunner pid=3699693)\x1b[0m "
    text = text.replace(f"{prefix}                                  'ppo_epochs': 1,",
                        f"{prefix}                              vscode-remote://ssh-remote/verl/logs/x.log    "
                        "'ppo_epochs': 1,", 1)
    text = text.replace(f"{prefix}                                  'ppo_mini_batch_size': 1,",
                        f"{prefix}                                  'ppo_mini_batch_size': \n{prefix}1,", 1)
    text = text.replace(f'{prefix} "np.float64(0.0), \'val-aux/GPQA-TTT/reward/best@1/mean\': "',
                        f"{prefix}\rTraining Progress:   0%|          | 0/4 [00:00<?, ?it/s]\n"
                        "\x1b[36m(WorkerDict pid=3701238)\x1b[0m   warnings.warn(\n"
                        f'{prefix} "np.float64(0.0), \'val-aux/GPQA-TTT/reward/best@1/mean\': "', 1)
    assert text != _text()
    row, steps = parse_log(_corrupt(tmp_path, text))
    clean, clean_steps = parse_log(EXCERPT)
    assert {k: v for k, v in row.items() if k != "file"} == {k: v for k, v in clean.items() if k != "file"}
    assert steps.drop(columns="file").equals(clean_steps.drop(columns="file"))


def test_a_log_it_cannot_parse_is_refused_with_file_and_line(tmp_path):
    lines = _text().split("\n")
    # the excerpt's line 271 is step:1; a value that is no number there
    assert "step:1 - " in lines[270]
    lines[270] = lines[270].replace("train/label_accuracy:0.429", "train/label_accuracy:0.4x9")
    with pytest.raises(AuthorLogError, match=r"broken\.log:271: .*train/label_accuracy"):
        parse_log(_corrupt(tmp_path, "\n".join(lines), "broken.log"))
    # a config that does not close: named at its first line
    with pytest.raises(AuthorLogError, match=r"cut\.log:1: "):
        parse_log(_corrupt(tmp_path, "\n".join(_text().split("\n")[:20]), "cut.log"))


# (log, GPUs, rounds, optimizer steps, warm-up rounds, items, correct before, correct after), read by hand
HAND_READ = [
    # Total training steps: 10; 4 GPUs x 10 rounds; 2,704 items in batches of 300 (+ 4):
    # 121+119+124+116+110+118+127+116+121+1 = 1073 before; 149+143+144+136+133+143+150+132+147+1 = 1278 after
    ("ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log", 4, 10, 40, 0, 2704, 1073, 1278),
    # 1,699 items in batches of 300 (+ 199): 155+140+136+113+102+88 = 734 (43.20); 167+154+152+132+105+89 = 799
    ("mathverse_20_OpenGVLab_InternVL3-2B_2e_0916_154833.log", 4, 10, 40, 0, 1699, 734, 799),
    # 7 GPUs: 7 prompts a round, 4 rounds (the zero-shot score 37.76, against 39.18 on 8 GPUs)
    ("mathvista_20_OpenGVLab_InternVL3-8B_2e_0914_022748.log", 7, 4, 28, 0, 490, 185, 197),
    # file name "500e", config total_epochs 2; 450 of 500 samples kept, 8 GPUs: 112 rounds, int(0.03 x 112) = 3;
    # 23 batches of 200 (+ 100): 3761 correct before (83.58), 1107 after (24.60): a collapse
    ("resi45_500_OpenGVLab_InternVL3-8B_500e_0912_145612.log", 8, 112, 896, 3, 4500, 3761, 1107),
]


@pytest.mark.parametrize("log, gpus, rounds, steps, warmup, items, before, after", HAND_READ)
def test_shipped_rows_equal_the_logs_own_lines(log, gpus, rounds, steps, warmup, items, before, after):
    run = RUNS.loc[log]
    assert (run["n_gpus"], run["rounds"], run["optimizer_steps"], run["warmup_rounds"], run["n_test"]) == (
        gpus, rounds, steps, warmup, items)
    assert run["initial_acc"] == pytest.approx(100 * before / items)
    assert run["final_acc"] == pytest.approx(100 * after / items)


def test_shipped_rows_of_other_logs():
    # Qwen2.5-VL-7B on ImageNet-A: rollout temperature 1.5; 8 GPUs, 4 rounds; unique prompts, so the
    # rebuilt accuracy equals acc/mean@1: np.float64(0.980045533681532) -> np.float64(0.9805812240524977)
    qwen = RUNS.loc["imagenet_a_20_Qwen_Qwen2.5-VL-7B-Instruct_0826_204339.log"]
    assert (qwen["temperature"], qwen["n_gpus"], qwen["rounds"], qwen["optimizer_steps"]) == (1.5, 8, 4, 32)
    assert qwen["initial_acc"] == pytest.approx(98.0045533681532) == qwen["initial_reported"]
    assert qwen["final_acc"] == pytest.approx(98.05812240524977)
    # MathVerse InternVL3-2B: mean@1 np.float64(0.441025641025641), the published zero-shot 44.10
    mathverse = RUNS.loc["mathverse_20_OpenGVLab_InternVL3-2B_2e_0916_154833.log"]
    assert mathverse["initial_reported"] == pytest.approx(44.1025641025641)
    # the 20-epoch AI2D run: Total training steps: 100 -> 400 optimizer steps, int(0.03 x 100) = 3 warm-up rounds
    ai2d = RUNS.loc["ai2d_20_OpenGVLab_InternVL3-2B_20e_0917_014128.log"]
    assert (ai2d["epochs"], ai2d["rounds"], ai2d["optimizer_steps"], ai2d["warmup_rounds"]) == (20, 100, 400, 3)
    assert len(RUNS) == 71  # every log of the public mirror under 4 MiB
    steps = shipped_steps()
    ai2d_steps = steps[steps["file"] == "ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log"]
    assert ai2d_steps["step"].tolist() == list(range(1, 11))


def test_ingest_loads_the_authors_runs(tmp_path):
    db = tmp_path / "b.duckdb"
    counts = ingest(db, [], [], [])
    assert counts["author_runs"] == 71 and counts["author_steps"] == len(shipped_steps())
    assert read_table(db, "author_runs").set_index("file").loc[HAND_READ[0][0], "rounds"] == 10


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


def test_training_curves_draw_ours_beside_the_authors(tmp_path):
    from ttrl_bench.results import figures

    steps = [{"model": "m", "method": "ttrv", "train_dataset": "d", "seed": 0, "step": s, "label_accuracy": 0.5,
              "majority_fraction": 0.6, "unparsable_fraction": 0.1, "completion_length": 2.0} for s in range(20)]
    steps += [{"model": "m", "method": "vr-ttrl", "train_dataset": "g", "seed": 0, "step": s, "majority_fraction": 0.9,
               "unparsable_fraction": 0.0, "completion_length": 41.0} for s in range(2)]  # older log: no label_accuracy
    runs = shipped_runs()
    runs = runs[runs["file"].str.startswith("ai2d_20_")]  # 12 logs, 3 collapsed (InternVL3-2B 5 and 10 epochs, 3-8B 20)
    author_steps = shipped_steps()
    author_steps = author_steps[author_steps["file"].isin(runs["file"])]
    log = "ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log"
    figures.training_curves(pd.DataFrame(steps), tmp_path / "curves.png", runs, author_steps, {log})
    figures.training_curves(pd.DataFrame(), tmp_path / "empty.png")
    for name in ("curves", "empty"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000 and (tmp_path / f"{name}.pdf").exists()


def test_import_author_logs_command_writes_both_files_or_refuses(tmp_path, caplog):
    from ttrl_bench.cli import main

    logs = tmp_path / "verl" / "logs" / "mathvista"
    logs.mkdir(parents=True)
    (logs / EXCERPT.name).write_bytes(EXCERPT.read_bytes())
    (logs / "absent_from_the_mirror.log").write_bytes(b"")  # a log over 4 MiB: an empty file, skipped
    assert main(["import-author-logs", str(tmp_path / "verl"), "--out-dir", str(tmp_path / "out")]) == 0
    runs = pd.read_csv(tmp_path / "out" / "author_runs.csv")
    assert runs["file"].tolist() == [EXCERPT.name] and runs["rounds"].tolist() == [4]
    assert len(pd.read_csv(tmp_path / "out" / "author_steps.csv.gz")) == 4
    (logs / "cut.log").write_bytes(b"\n".join(EXCERPT.read_bytes().split(b"\n")[:20]))
    assert main(["import-author-logs", str(tmp_path / "verl"), "--out-dir", str(tmp_path / "out")]) == 1
    assert "cut.log:1: " in caplog.text


# --- provenance flags at their boundaries (issue 39) ----------------------------------------------------------

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


# --- start-up and card of a log (results/author_timing.py, issue 51) -------------------------------------------

LOG_HEAD = (  # the shape of the authors' logs' first lines (ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log)
    "2025-09-16 23:52:40,101\tINFO worker.py:1942 -- Started a local Ray instance.\n"
    "\x1b[36m(WorkerDict pid=1)\x1b[0m [rank0]:[W916 23:53:31.413058891 ProcessGroupNCCL.cpp:4561] barrier\n"
    "\x1b[36m(WorkerDict pid=1)\x1b[0m Before building vllm rollout, memory allocated (GB): 1.95, memory reserved "
    "(GB): 9.16, device memory used/total (GB): 9.80/47.37\n"
    "\x1b[36m(WorkerDict pid=1)\x1b[0m WARNING 09-16 23:54:16 [topk_topp_sampler.py:69] FlashInfer is not available.\n"
    "\x1b[36m(TaskRunner pid=2)\x1b[0m [prompt] <|im_start|>user<img>\n"
    "WARNING 09-16 23:59:59 [later] after validation began: not start-up\n")


def test_a_logs_start_up_runs_from_its_launch_to_the_last_timestamp_before_validation():
    """Launch 23:52:26 (the file name's 0916_235226); the last stamp before the first `[prompt]` is vLLM's
    23:54:16 (glog's [W916 23:53:31 and Ray's 23:52:40 come earlier; 23:59:59 comes after): 110 s. The card's
    total memory is verl's 47.37 GB. A name without a launch time, or a log without a stamp: None."""
    from ttrl_bench.results.author_timing import card_memory_gb, launch_time, startup_seconds

    name = "ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log"
    assert str(launch_time(name, 2025)) == "2025-09-16 23:52:26"
    assert startup_seconds(LOG_HEAD, name) == 110.0
    assert startup_seconds(LOG_HEAD.split("WARNING 09-16 23:54")[0], name) == 65.0  # then glog's 23:53:31
    assert launch_time("mathverse_20_OpenGVLab_InternVL3-8B_2e_0912_050407_old_prompt.log", 2025).hour == 5
    assert startup_seconds(LOG_HEAD, "no_time.log") is None and startup_seconds("no stamps\n", name) is None
    assert card_memory_gb(LOG_HEAD) == 47.37 and card_memory_gb("nothing") is None
