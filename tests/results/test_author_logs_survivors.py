"""Issue 39: the survivors of mutmut in results/author_logs.py (the TTRV authors' verl log importer).

Every input is the shipped excerpt of verl/logs/mathvista/mathvista_20_OpenGVLab_InternVL3-8B_2e_0914_022748.log
(Akshit21112002/TTRV), its real lines changed where a test says so, or real lines of other logs of that
mirror; the `_batch_sizes` and `_step_values` cases are small hand-made inputs. Every expected value is
read from a named log line or worked out by hand in the docstring.

The excerpt, as read by hand: config lines 1-183 (7 GPUs on 1 node, train_batch_size 7, ppo_mini_batch_size 1,
ppo_epochs 1, rollout n 16, n_vote 32, val_kwargs n 1, lr_warmup_steps_ratio 0.03, train_files
.../data/mathvista_20/train.parquet); line 195 `filter dataset len: 20`, 197 `filter dataset len: 490`,
199 `Total training steps: 4`; an initial validation of 3 batches ([ground_truth_ratio] 0.395, 0.355,
0.3888...: 79 + 71 + 35 = 185 of 200 + 200 + 90 = 490); the Initial dict at line 223; step:0 at 260; step:1..4
at 271, 282, 293, 325 (timing_s/step 163.553, 153.250, 155.427, 366.539); a final validation (0.425, 0.375,
0.4111...: 85 + 75 + 37 = 197) before step:4; the Final dict from line 326 to the last line, 362.
"""

import gzip
import re
from pathlib import Path

import pandas as pd
import pytest

from ttrl_bench.results.author_logs import (
    AUTHOR_RUNS_CSV,
    AUTHOR_STEPS_CSV,
    RUN_COLUMNS,
    AuthorLogError,
    _batch_sizes,
    _config,
    _depth,
    _lines,
    _metrics_dict,
    _step_values,
    import_logs,
    parse_log,
    shipped_runs,
    shipped_steps,
    write_shipped,
)

from tests.results.test_author_logs import EXCERPT, _text  # the shipped excerpt and its text as written (tqdm's \r kept)

P = "\x1b[36m(TaskRunner pid=3699693)\x1b[0m "  # the excerpt's Ray prefix, ANSI codes included
INITIAL, FINAL = 100 * 185 / 490, 100 * 197 / 490
# a validation pass of 3 batches: 0.4 x 200 + 0.36 x 200 + 0.4 x 90 = 80 + 72 + 36 = 188 of 490 (batch 200:
# 0.36 = 9/25 needs a multiple of 25 in 164..244 (3 batches of 490): 175, 200, 225, and 200 is the roundest)
EXTRA_PASS = "".join(f"{P}validation generation end\n{P}[ground_truth_ratio] {r}\n" for r in ("0.4", "0.36", "0.4"))


def _line(number: int) -> str:
    """The excerpt's physical line `number` (1-based), its trailing newline included."""
    return _text().split("\n")[number - 1] + "\n"


def _sub(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _write(tmp_path: Path, text, name: str = "variant.log") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _clean():
    # parsed anew at each call: a cache kept across pytest sessions in one process (mutmut's forked runs) would
    # hand a mutant the real code's result
    return parse_log(EXCERPT)


def _same_row(row: dict) -> None:
    clean = _clean()[0]
    assert {k: v for k, v in row.items() if k != "file"} == {k: v for k, v in clean.items() if k != "file"}


# --- _lines ----------------------------------------------------------------------------------------------------

def test_lines_split_carriage_returns_and_merged_ray_prefixes(tmp_path):
    """Three real lines: line 1 of the full mathvista_20_..._0914_022748.log (Ray's start-up note, no actor
    prefix: actor ""); excerpt line 184 (`(TaskRunner pid=3699693) \\rGenerating train split: 0 ...\\rGenerating
    train split: 20 ...`: an empty first segment after the prefix, then two \\r segments that keep the actor
    TaskRunner); line 415 of ai2d_20_OpenGVLab_InternVL2_5-4B_10e_0917_062500.log, where Ray merged two
    WorkerDict lines (cut after its 'deprecated.'): two entries. ANSI codes removed."""
    first = ("2025-09-14 02:27:59,636\tINFO worker.py:1942 -- Started a local Ray instance. View the dashboard at "
             "\x1b[1m\x1b[32m127.0.0.1:8265 \x1b[39m\x1b[22m")
    merged = ("\x1b[36m(WorkerDict pid=1615263)\x1b[0m Actor use_remove_padding=True\x1b[32m [repeated 3x across "
              "cluster]\x1b[0m\x1b[36m(WorkerDict pid=1615433)\x1b[0m /home/anirban/kanksha1/miniconda3/envs/ttrl/"
              "lib/python3.10/site-packages/torch/distributed/fsdp/fully_sharded_data_parallel.py:690: FutureWarning:"
              " FSDP.state_dict_type() and FSDP.set_state_dict_type() are being deprecated.")
    path = _write(tmp_path, first + "\n" + _line(184) + merged + "\n")
    assert _lines(path) == [
        (1, "", "2025-09-14 02:27:59,636\tINFO worker.py:1942 -- Started a local Ray instance. View the dashboard "
                "at 127.0.0.1:8265 "),
        (2, "TaskRunner", ""),
        (2, "TaskRunner", "Generating train split: 0 examples [00:00, ? examples/s]"),
        (2, "TaskRunner", "Generating train split: 20 examples [00:00, 2857.74 examples/s]"),
        (3, "WorkerDict", "Actor use_remove_padding=True [repeated 3x across cluster]"),
        (3, "WorkerDict", "/home/anirban/kanksha1/miniconda3/envs/ttrl/lib/python3.10/site-packages/torch/distributed/"
                          "fsdp/fully_sharded_data_parallel.py:690: FutureWarning: FSDP.state_dict_type() and "
                          "FSDP.set_state_dict_type() are being deprecated."),
    ]


def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    """A log cut inside a tqdm bar's '█' (e2 96 88; excerpt line 186) keeps the invalid bytes e2 96: they read
    as U+FFFD and the rest of the log parses to the clean excerpt's row."""
    raw = EXCERPT.read_bytes()
    bar = "█".encode()
    cut = raw.replace(bar + b"| 20/20", b"\xe2\x96| 20/20", 1)
    assert cut != raw
    path = _write(tmp_path, cut)
    assert [text for number, _, text in _lines(path) if number == 186][-1].endswith(
        "█" * 9 + "\ufffd| 20/20 [00:00<00:00, 841.55 examples/s]")
    _same_row(parse_log(path)[0])


# --- _block, _depth, _config ----------------------------------------------------------------------------------

def test_config_block_keeps_its_second_line():
    """Excerpt lines 1-3: `'contents': ['model',` / `'optimizer',` / `'extra']},`: all three items."""
    config = _config(_lines(EXCERPT), EXCERPT)
    assert config["actor_rollout_ref"]["actor"]["checkpoint"]["contents"] == ["model", "optimizer", "extra"]


def test_a_block_one_bracket_short_never_closes(tmp_path):
    """The config (lines 1-183) cut to end at `'val_before_train': True}` (line 183 without its last '}'):
    one bracket stays open at the end of the file: 'cut.log:1: a pprinted block never closes'."""
    head = "\n".join(_text().split("\n")[:183])
    assert head.endswith("'val_before_train': True}}")
    path = _write(tmp_path, head[:-1] + "\n", "cut.log")
    with pytest.raises(AuthorLogError, match=re.escape(f"{path}:1: a pprinted block never closes")):
        parse_log(path)


def test_a_final_dict_cut_short_never_closes_and_names_the_file(tmp_path):
    """The excerpt cut after line 340 (inside the Final dict that opens at line 326, its '(' still open):
    'cut.log:326: a pprinted block never closes'."""
    path = _write(tmp_path, "\n".join(_text().split("\n")[:340]) + "\n", "cut.log")
    with pytest.raises(AuthorLogError, match=re.escape(f"{path}:326: a pprinted block never closes")):
        parse_log(path)


@pytest.mark.parametrize("text, depth", [
    # excerpt line 223 after its prefix: the '{' sits inside the double-quoted piece, only the '(' counts
    ("(\"Initial validation metrics: {'val-aux/GPQA-TTT/reward/mean@1': \"", 1),
    # excerpt line 78: three closing braces
    ("'top_p': 0.95}}},", -3),
    # a bare (unquoted) value with capital X: one '{' and one '}', letters count nothing
    ("{'dtype': X}", 0),
])
def test_depth_counts_brackets_outside_quotes(text, depth):
    """Open minus closed brackets outside quoted strings, read off each text by hand."""
    assert _depth(text) == depth


def test_config_is_the_first_taskrunner_line_that_opens_it(tmp_path):
    """A TaskRunner line printed before the config (newer verl prints `TaskRunner hostname: ..., PID: ...`
    first) is not the config: the row stays the clean excerpt's."""
    path = _write(tmp_path, f"{P}TaskRunner hostname: node1, PID: 3699693\n" + _text())
    _same_row(parse_log(path)[0])


def test_a_config_that_is_no_literal_is_refused_with_file_and_line(tmp_path):
    """Excerpt line 24 `'ppo_epochs': 1,` made `'ppo_epochs': <object object at 0x7f>,` (a repr, no literal):
    'bad.log:1: verl's config does not parse'."""
    path = _write(tmp_path, _sub(_text(), "'ppo_epochs': 1,", "'ppo_epochs': <object object at 0x7f>,"), "bad.log")
    with pytest.raises(AuthorLogError, match=re.escape(f"{path}:1: verl's config does not parse")):
        parse_log(path)


def test_a_log_without_config_is_refused(tmp_path):
    """The excerpt without its config (lines 1-183): 'noconf.log:1: no pprinted verl config'."""
    path = _write(tmp_path, "\n".join(_text().split("\n")[183:]), "noconf.log")
    with pytest.raises(AuthorLogError, match=re.escape(f"{path}:1: no pprinted verl config")):
        parse_log(path)


# --- _metrics_dict, _step_values -------------------------------------------------------------------------------

def test_metrics_dict_reads_a_bare_dict_too():
    """A dict printed bare (no string wrapper) is read as is: {'val-aux/x/acc/mean@1': 0.5}."""
    assert _metrics_dict("{'val-aux/x/acc/mean@1': 0.5}", Path("x.log"), 1) == {"val-aux/x/acc/mean@1": 0.5}


def test_unparsable_metrics_are_refused_with_file_and_line(tmp_path):
    """The Final dict's last value (line 362, pass@1 np.float64(0.4111111111111111)) made np.float64(nan):
    `nan` is no literal: 'nan.log:326: validation metrics do not parse' (326: the dict's first line)."""
    text = _text()
    last = "'val-ttrl/pass@1': np.float64(0.4111111111111111)}\")"
    assert text.rstrip("\n").endswith(last)
    text = text[: text.rindex(last)] + "'val-ttrl/pass@1': np.float64(nan)}\")\n"
    path = _write(tmp_path, text, "nan.log")
    with pytest.raises(AuthorLogError, match=re.escape(f"{path}:326: validation metrics do not parse")):
        parse_log(path)


def test_metrics_that_are_no_dict_are_refused_with_file_and_line():
    """A validation block whose text after the colon is a tuple, not a dict: 'x.log:1: validation metrics do
    not parse' (an AuthorLogError, not an AttributeError)."""
    from ttrl_bench.results.author_logs import _metrics_dict

    with pytest.raises(AuthorLogError, match=re.escape("x.log:1: validation metrics do not parse")):
        _metrics_dict('("Initial validation metrics: (1, 2)")', Path("x.log"), 1)


@pytest.mark.parametrize("item", [
    "actor/entropy_loss:0.5x2",  # step:1 (line 271) actor/entropy_loss:0.552, corrupted
    "critic/score/mean:0.1x9",  # step:1 critic/score/mean:0.129, corrupted
    "val-aux/GPQA-TTT/reward/mean@1:0.3x4",  # step:0 (line 260) val-aux/GPQA-TTT/reward/mean@1:0.374, corrupted
])
def test_a_non_number_of_actor_critic_or_val_is_refused(item):
    """A train/, actor/, critic/ or val... value that is no number: 'x.log:271: step value '<item>' ...'."""
    with pytest.raises(AuthorLogError, match=re.escape(f"x.log:271: step value {item!r} is not a number")):
        _step_values(f"global_seqlen/min:8289.000 - {item} - timing_s/step:163.553", Path("x.log"), 271)


def test_step_values_split_on_dashes_and_the_last_colon():
    """Hand-made items: `train/label_accuracy: 0.429` (a space after the colon: 0.429); a key with a colon
    `val-core/hf:mathvista/acc/mean@1:0.374` (the value after the last colon: 0.374); an item without a colon
    (`(no metrics)`) is skipped and the items after it still read; a non-number of another key
    (`perf/mfu/actor:n/a`) is left out."""
    text = ("train/label_accuracy: 0.429 - val-core/hf:mathvista/acc/mean@1:0.374 - (no metrics) - "
            "perf/mfu/actor:n/a - timing_s/step:163.553")
    assert _step_values(text, Path("x.log"), 1) == {
        "train/label_accuracy": 0.429, "val-core/hf:mathvista/acc/mean@1": 0.374, "timing_s/step": 163.553}


# --- _batch_sizes ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_test, ratios, repeats, sizes", [
    # 2 batches of 10 items: b in 5..9 (ceil(10/b) = 2); 0.25 b whole only for b = 8, last 2: 0.5 x 2 = 1
    (10, [0.25, 0.5], 1, [8, 2]),
    # one batch: b = 5 (ceil(5/b) = 1 needs b >= 5, b <= n_test), 0.4 x 5 = 2
    (5, [0.4], 1, [5]),
    # 11 items: b in 6..10, 0.5 b whole for 6, 8, 10; 10 the roundest, its last batch a single item
    (11, [0.5, 1.0], 1, [10, 1]),
    # 2 samples per prompt (val n = 2): b in 2..3; 0.25 x 2 x 2 = 1 whole, 0.25 x 3 x 2 = 1.5 not
    (4, [0.25, 0.25], 2, [2, 2]),
    # 1e-6 x 1 x 1 is 1e-6 off the whole 0: not under the 1e-6 tolerance, no batch size
    (1, [1e-6], 1, []),
    # 2 items in 2 batches: b = 1 only (ceil(2/1) = 2, ceil(2/2) = 1)
    (2, [1.0, 0.0], 1, [1, 1]),
    # 150 items: b in 75..149, every even b fits (0.5 b and 0.5 (150 - b) whole); the most trailing zeros: 100
    (150, [0.5, 0.5], 1, [100, 50]),
])
def test_batch_sizes_by_hand(n_test, ratios, repeats, sizes):
    """The batch size that splits n_test into len(ratios) batches with whole counts, the roundest first."""
    assert _batch_sizes(n_test, ratios, repeats) == sizes


# --- parse_log ---------------------------------------------------------------------------------------------------

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
