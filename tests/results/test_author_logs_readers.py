"""results/author_logs.py's readers, one at a time: _lines, _block, _depth, _config, _metrics_dict,
_step_values and _batch_sizes.

Every input is the shipped excerpt of verl/logs/mathvista/mathvista_20_OpenGVLab_InternVL3-8B_2e_0914_022748.log
(Akshit21112002/TTRV), its real lines changed where a test says so, or real lines of other logs of that
mirror; the `_batch_sizes` and `_step_values` cases are small hand-made inputs. Every expected value is
read from a named log line or worked out by hand in the docstring.
(The excerpt as read by hand: tests/support/results.py.)"""

import re
from pathlib import Path

import pytest

from ttrl_bench.results.author_logs import AuthorLogError, _batch_sizes, _config, _depth, _lines, _metrics_dict, _step_values, parse_log

from tests.support.results import EXCERPT, _text  # the shipped excerpt and its text as written (tqdm's \r kept)
from tests.support.results import P, _line, _same_row, _sub, _write


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
