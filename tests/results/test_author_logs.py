"""The TTRV authors' verl logs (results/author_logs.py): the importer and the shipped rows.

Every expected number is read by hand from the named log in Akshit21112002/TTRV (verl/logs/...):
validation accuracy = sum over the validation batches of [ground_truth_ratio] x batch size / items,
with the batch size the one that makes every batch's count whole (e.g. 0.4033... x 300 = 121).

The parse_log, import_logs and write_shipped tests at the end: every input is the shipped excerpt of
verl/logs/mathvista/mathvista_20_OpenGVLab_InternVL3-8B_2e_0914_022748.log
(Akshit21112002/TTRV), its real lines changed where a test says so, or real lines of other logs of that
mirror; the `_batch_sizes` and `_step_values` cases are small hand-made inputs. Every expected value is
read from a named log line or worked out by hand in the docstring.
(The excerpt as read by hand: tests/support/results.py.)
"""

import gzip
import re
from pathlib import Path

import pandas as pd
import pytest

from ttrl_bench.results.author_logs import AuthorLogError, parse_log, shipped_runs, shipped_steps
from ttrl_bench.results.author_logs import AUTHOR_RUNS_CSV, AUTHOR_STEPS_CSV, RUN_COLUMNS, import_logs, write_shipped
from ttrl_bench.results.store import ingest, read_table

from tests.support.results import EXCERPT, _text
from tests.support.results import P, _clean, _line, _same_row, _sub, _write


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


INITIAL, FINAL = 100 * 185 / 490, 100 * 197 / 490


# a validation pass of 3 batches: 0.4 x 200 + 0.36 x 200 + 0.4 x 90 = 80 + 72 + 36 = 188 of 490 (batch 200:
# 0.36 = 9/25 needs a multiple of 25 in 164..244 (3 batches of 490): 175, 200, 225, and 200 is the roundest)
EXTRA_PASS = "".join(f"{P}validation generation end\n{P}[ground_truth_ratio] {r}\n" for r in ("0.4", "0.36", "0.4"))


def test_a_missing_config_key_is_named(tmp_path):
    """Without the actor's `'ppo_epochs': 1,` (line 24; the critic's at line 114 stays):
    'nokey.log: verl's config has no key 'ppo_epochs''."""
    path = _write(tmp_path, _sub(_text(), _line(24), ""), "nokey.log")
    with pytest.raises(AuthorLogError, match=re.escape(f"{path}: verl's config has no key 'ppo_epochs'")):
        parse_log(path)


def test_a_ratio_line_before_any_validation_is_no_validation_ratio(tmp_path):
    """A training batch's `[ground_truth_ratio] 0.28125` (the excerpt's first training ratio, after step:0)
    moved before the first `validation generation end`: not counted; the row is the clean one."""
    path = _write(tmp_path, _sub(_text(), _line(199), _line(199) + f"{P}[ground_truth_ratio] 0.28125\n"))
    _same_row(parse_log(path)[0])


def test_the_first_line_of_a_log_is_read(tmp_path):
    """`filter dataset len: 20` (line 195) moved to the top of the file: still the first of the two lengths
    (20 kept for adaptation, 490 test items); the row is the clean one."""
    text = _sub(_text(), _line(195), "")
    _same_row(parse_log(_write(tmp_path, _line(195) + text))[0])


def test_validation_passes_between_steps_and_after_the_initial_dict(tmp_path):
    """A 188-of-490 pass (EXTRA_PASS) before step:2 (line 282) and one between the Initial dict and step:0
    (line 260): passes are initial (185), 188, 188, final (197): initial_acc 185/490, final_acc 197/490."""
    text = _sub(_text(), _line(282), EXTRA_PASS + _line(282))
    text = _sub(text, _line(260), EXTRA_PASS + _line(260))
    row, _ = parse_log(_write(tmp_path, text))
    assert row["initial_acc"] == pytest.approx(INITIAL) and row["final_acc"] == pytest.approx(FINAL)


def test_a_pass_at_the_end_of_the_log_is_the_last(tmp_path):
    """A 188-of-490 pass appended after the Final dict, closed by no step or dict line: it is the last pass
    printed, so final_acc = 100 x 188 / 490; initial_acc stays 185/490."""
    row, _ = parse_log(_write(tmp_path, _text() + EXTRA_PASS))
    assert row["initial_acc"] == pytest.approx(INITIAL) and row["final_acc"] == pytest.approx(100 * 188 / 490)


def test_an_incomplete_log_names_its_last_line(tmp_path):
    """The excerpt cut after step:4 (line 325, the Final dict gone): 'cut.log:325: incomplete log (dataset
    lengths [20, 490], total steps 4, 2 validation passes, dicts ['Initial'])'."""
    path = _write(tmp_path, "\n".join(_text().split("\n")[:325]) + "\n", "cut.log")
    message = (f"{path}:325: incomplete log (dataset lengths [20, 490], total steps 4, 2 validation passes, "
               "dicts ['Initial'])")
    with pytest.raises(AuthorLogError, match=re.escape(message)):
        parse_log(path)


@pytest.mark.parametrize("line, what", [
    (199, "total steps None, 2 validation passes"),  # `Total training steps: 4` removed
    (197, "dataset lengths [20], total steps 4"),  # `filter dataset len: 490` removed
])
def test_a_log_without_steps_total_or_test_length_is_incomplete(tmp_path, line, what):
    """One line removed: the log is refused as incomplete, naming what is missing."""
    path = _write(tmp_path, _sub(_text(), _line(line), ""))
    with pytest.raises(AuthorLogError, match=re.escape(what)):
        parse_log(path)


def test_no_batch_size_fits_is_refused(tmp_path):
    """The first initial ratio 0.395 (line 206) made 0.3951 = 3951/10000 (3951 = 3^2 x 439, prime to 10000):
    no batch size up to 490 makes it whole: 'odd.log: no validation batch size splits 490 items into 3 batches'."""
    path = _write(tmp_path, _sub(_text(), "[ground_truth_ratio] 0.395\n", "[ground_truth_ratio] 0.3951\n"), "odd.log")
    with pytest.raises(AuthorLogError, match=re.escape(f"{path}: no validation batch size splits 490 items into 3 "
                                                       "batches of whole counts")):
        parse_log(path)


def test_without_acc_mean_at_1_nothing_is_reported(tmp_path):
    """The dicts' `'val-aux/GPQA-TTT/acc/mean@1'` (lines 239, 342) renamed `.../acc/mean@4`: no key matches
    val-*/.../acc/mean@1: reported_key, initial_reported and final_reported are None."""
    text = _text().replace("acc/mean@1'", "acc/mean@4'")
    assert text.count("acc/mean@4'") == 2
    row, _ = parse_log(_write(tmp_path, text))
    assert (row["reported_key"], row["initial_reported"], row["final_reported"]) == (None, None, None)


def test_a_repeated_step_keeps_its_last_line(tmp_path):
    """step:1 (line 271) printed again with train/label_accuracy 0.5 instead of 0.429: one row per step
    (1, 2, 3, 4), step 1's the later line's 0.5; the run's rounds and optimizer steps are the clean log's (4
    rounds: a step printed twice is one round)."""
    second = _line(271).replace("train/label_accuracy:0.429", "train/label_accuracy:0.5")
    row, steps = parse_log(_write(tmp_path, _sub(_text(), _line(271), _line(271) + second)))
    assert steps["step"].tolist() == [1, 2, 3, 4]
    assert steps.loc[steps["step"] == 1, "train/label_accuracy"].tolist() == [0.5]
    clean = _clean()[0]
    assert (row["rounds"], row["optimizer_steps"]) == (4, clean["optimizer_steps"]) and clean["rounds"] == 4


def test_steps_frame_starts_with_the_file_and_sums_timing():
    """The steps frame's first column is `file` (the excerpt's name on all 4 rows); train_seconds is the sum of
    the 4 rounds' timing_s/step: 163.553 + 153.250 + 155.427 + 366.539 = 838.769."""
    row, steps = _clean()
    assert steps.columns[0] == "file" and steps["file"].tolist() == [EXCERPT.name] * 4
    assert row["train_seconds"] == pytest.approx(838.769)


def test_without_timing_train_seconds_is_none(tmp_path):
    """Every ` - timing_s/step:...` item removed from the step lines: train_seconds None."""
    text, count = re.subn(r" - timing_s/step:[0-9.]+", "", _text())
    assert count == 4
    assert parse_log(_write(tmp_path, text))[0]["train_seconds"] is None


def test_adaptation_set_nominal_and_kept(tmp_path):
    """`filter dataset len: 20` (line 195) made 18 (two prompts over the length limit): n_adapt 20 from
    .../data/mathvista_20/..., n_adapt_kept 18; the clean excerpt keeps all 20."""
    assert _clean()[0]["n_adapt_kept"] == 20
    row, _ = parse_log(_write(tmp_path, _sub(_text(), "filter dataset len: 20\n", "filter dataset len: 18\n")))
    assert (row["n_adapt"], row["n_adapt_kept"]) == (20, 18)


def test_a_train_dir_without_a_count(tmp_path):
    """train_files .../data/mathvista/train.parquet (line 139 without `_20`): dataset 'mathvista' and
    n_adapt the kept count, 20."""
    path = _write(tmp_path, _sub(_text(), "/data/mathvista_20/train.parquet", "/data/mathvista/train.parquet"))
    row, _ = parse_log(path)
    assert (row["dataset"], row["n_adapt"], row["n_adapt_kept"]) == ("mathvista", 20, 20)


def test_model_is_the_last_path_component(tmp_path):
    """The model path (line 39) 'OpenGVLab/InternVL3-8B' as a local checkout '/models/OpenGVLab/InternVL3-8B':
    model 'InternVL3-8B'."""
    text = _sub(_text(), "'path': 'OpenGVLab/InternVL3-8B'", "'path': '/models/OpenGVLab/InternVL3-8B'")
    path = _write(tmp_path, text)
    assert parse_log(path)[0]["model"] == "InternVL3-8B"


def test_config_arithmetic(tmp_path):
    """The excerpt's config changed: nnodes 2 (line 174), the actor's ppo_epochs 2 (line 24) and
    ppo_mini_batch_size 2 (line 28), `Total training steps: 112` (line 199), no n_vote (line 69).
    n_gpus = 7 x 2 = 14; optimizer_steps = 4 rounds x (7 // 2 = 3) x 2 = 24; warmup_rounds = int(0.03 x 112 =
    3.36) = 3; votes = rollout n = 16."""
    text = _sub(_text(), "'nnodes': 1,", "'nnodes': 2,")
    text = _sub(text, "'ppo_epochs': 1,", "'ppo_epochs': 2,")
    text = _sub(text, "'ppo_mini_batch_size': 1,", "'ppo_mini_batch_size': 2,")
    text = _sub(text, "Total training steps: 4", "Total training steps: 112")
    text = _sub(text, _line(69), "")
    row, _ = parse_log(_write(tmp_path, text))
    assert [row[k] for k in ("n_gpus", "optimizer_steps", "warmup_rounds", "votes", "trained_rollouts")] == [
        14, 24, 3, 16, 16]
    assert all(type(row[k]) is int for k in ("n_gpus", "optimizer_steps", "warmup_rounds", "votes"))


# --- import_logs ---------------------------------------------------------------------------------------------------

def test_import_logs_sorts_by_file_name_and_numbers_steps(tmp_path):
    """Two copies of the excerpt: a/zz.log and b/aa.log (path order zz first, name order aa first): runs in
    name order aa, zz with RUN_COLUMNS; steps 4 + 4 rows numbered 0..7, aa's first."""
    for folder, name in (("a", "zz.log"), ("b", "aa.log")):
        (tmp_path / "logs" / folder).mkdir(parents=True)
        (tmp_path / "logs" / folder / name).write_bytes(EXCERPT.read_bytes())
    runs, steps = import_logs(tmp_path / "logs")
    assert runs["file"].tolist() == ["aa.log", "zz.log"] and list(runs.columns) == RUN_COLUMNS
    assert list(steps.index) == list(range(8))
    assert steps["file"].tolist() == ["aa.log"] * 4 + ["zz.log"] * 4


def test_import_logs_of_an_empty_tree_names_the_root(tmp_path):
    """No *.log under the root: '<root>: no verl *.log files found'."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(AuthorLogError, match=re.escape(f"{tmp_path / 'empty'}: no verl *.log files found")):
        import_logs(tmp_path / "empty")


# --- write_shipped -------------------------------------------------------------------------------------------------

def test_write_shipped_reproduces_the_shipped_bytes(tmp_path):
    """The shipped tables written into a nested, not yet existing folder, twice (parents / exist_ok): both
    files are byte for byte the shipped ones (no index, %.10g / %.6g floats, gzip with mtime 0)."""
    out = tmp_path / "out" / "nested"
    runs, steps = shipped_runs(), shipped_steps()
    write_shipped(runs, steps, out)
    write_shipped(runs, steps, out)
    assert (out / "author_runs.csv").read_bytes() == AUTHOR_RUNS_CSV.read_bytes()
    assert (out / "author_steps.csv.gz").read_bytes() == AUTHOR_STEPS_CSV.read_bytes()


def test_write_shipped_float_formats(tmp_path):
    """1e-07 in %.10g is '1e-07' (exponent -7 < -4); 1234567.0 in %.6g is '1.23457e+06' (exponent 6 >= 6
    digits): lower-case e in both files."""
    write_shipped(pd.DataFrame({"x": [1e-07]}), pd.DataFrame({"y": [1234567.0]}), tmp_path)
    assert (tmp_path / "author_runs.csv").read_text() == "x\n1e-07\n"
    assert gzip.decompress((tmp_path / "author_steps.csv.gz").read_bytes()).decode() == "y\n1.23457e+06\n"
