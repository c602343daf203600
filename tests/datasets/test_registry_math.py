"""The math entries of datasets/registry.py (ECHO's training and evaluation sets). Every registry entry through its real loader: a tiny fixture with the source's columns and
types (a save_to_disk dataset, webdataset shards, an image folder, or JSON lines + files) is
prepared with `prepare_dataset` and checked against counts and prompts worked out by hand.

Fixture rows follow one pattern unless a test says otherwise: a good 64x48 image, a 1200x900
image (too large for TTRV's 1000x1000 limit) and bytes that are no image (unreadable)."""

from __future__ import annotations

import datasets
import pytest

from ttrl_bench.datasets.sources import DatasetSourceError

from tests.support.datasets import CORRUPT, GOOD, LARGE, counts, prepare, save
from tests.support.datasets import LOGICVISTA_DIGITS, LOGICVISTA_INLINE, LOGICVISTA_TWO, MATHVERSE_Q, logicvista_copy


# ECHO's prompt suffix (user683/ECHO verl/examples/ttrl_echo/Qwen2.5/geometry3k.sh data.suffix_prompt)
SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."
EASYR1 = {"images": datasets.List(datasets.Image()), "problem": datasets.Value("string"),
          "answer": datasets.Value("string")}


@pytest.mark.parametrize("name", ["geometry3k", "geoqa"])
def test_training_sets_in_easyr1_layout_are_train_rows_kept_whole(tmp_path, name):
    # hiyouga/geometry3k, WaltonFuture/GEOQA_R1V_Train_8K: images (a list), problem with "<image>", answer
    source = save(tmp_path, {"images": [[GOOD], [LARGE], [CORRUPT]],
                             "problem": ["<image>Find x. Round to the nearest tenth.", "<image>Find y.", "<image>q"],
                             "answer": ["3.5", "\\frac{1}{2}", "1"]}, dict(EASYR1))
    stats, manifest = prepare(tmp_path, name, source)
    # no 1000x1000 limit for ECHO's sets: the 1200x900 image stays
    assert counts(stats) == {"original": 3, "kept": 2, "dropped": {"unreadable": 1}}
    assert stats["splits"] == {"train": 2}  # a training set: adaptation reads its rows
    assert list(manifest["answer"]) == ["3.5", "\\frac{1}{2}"]
    assert list(manifest.iloc[0]["options"]) == []
    assert manifest.iloc[0]["prompt"] == "Find x. Round to the nearest tenth." + SUFFIX  # the image goes first


def test_geoqa_r1v_original_layout_reads_too(tmp_path):
    # leonardPKU/GEOQA_R1V_Train_8K: image, problem, solution "<answer> 145° </answer>"
    source = save(tmp_path, {"image": [GOOD], "problem": ["As shown in the figure, find angle 1."],
                             "solution": ["<answer> 145° </answer>"]},
                  {"image": datasets.Image(), "problem": datasets.Value("string"), "solution": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "geoqa", source)
    assert stats["kept"] == 1 and manifest.iloc[0]["answer"] == "145°"


def test_mathvision_math_lists_the_choices_as_echo_writes_them(tmp_path):
    source = save(tmp_path, {"id": ["1", "2", "3"], "question": ["<image1>Which figure?", "How many?", "q"],
                             "options": [["1", "2", "3", "4", "5"], [], ["a", "b"]], "image": ["images/1.jpg"] * 3,
                             "decoded_image": [GOOD, GOOD, GOOD], "answer": ["C", "7", "F"]},
                  {"id": datasets.Value("string"), "question": datasets.Value("string"),
                   "options": datasets.List(datasets.Value("string")), "image": datasets.Value("string"),
                   "decoded_image": datasets.Image(), "answer": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mathvision-math", source)
    # "F" is no letter of 2 options: counted as a bad row
    assert counts(stats) == {"original": 3, "kept": 2, "dropped": {"bad_row": 1}}
    assert list(manifest["answer"]) == ["C", "7"]
    # save_as_json.py: "<image1>" dropped, "\n\nChoices:\nA.1\n..." (--choices_add_letters)
    assert manifest.iloc[0]["prompt"] == "Which figure?\n\nChoices:\nA.1\nB.2\nC.3\nD.4\nE.5" + SUFFIX
    assert manifest.iloc[1]["prompt"] == "How many?" + SUFFIX


def test_mathvista_math_answer_text_becomes_a_letter(tmp_path):
    question = "If AB = AO, what is the degree measure of angle ABO?"
    source = save(tmp_path, {"pid": ["1", "2"], "question": [question, "What is the value of x?"],
                             "decoded_image": [GOOD, GOOD], "choices": [["15", "30", "45"], None],
                             "answer": ["30", "3.5"]},
                  {"pid": datasets.Value("string"), "question": datasets.Value("string"),
                   "decoded_image": datasets.Image(), "choices": datasets.List(datasets.Value("string")),
                   "answer": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mathvista-math", source)
    assert stats["kept"] == 2 and list(manifest["answer"]) == ["B", "3.5"]
    assert manifest.iloc[0]["prompt"] == question + "\n\nChoices:\nA.15\nB.30\nC.45" + SUFFIX


def test_mathverse_math_reads_the_choices_of_the_question(tmp_path):
    source = save(tmp_path, {"sample_index": ["1", "2"], "question_for_eval": [MATHVERSE_Q, "Find the area."],
                             "image": [GOOD, GOOD], "answer": ["B", "12"]},
                  {"sample_index": datasets.Value("string"), "question_for_eval": datasets.Value("string"),
                   "image": datasets.Image(), "answer": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mathverse-math", source)
    assert stats["kept"] == 2 and list(manifest["answer"]) == ["B", "12"]
    assert list(manifest.iloc[0]["options"])[1] == "The turbine completes a single cycle in 35 seconds."
    assert manifest.iloc[0]["prompt"] == MATHVERSE_Q + SUFFIX  # the question lists them already
    assert list(manifest.iloc[1]["options"]) == []


def test_logicvista_math_keeps_several_letter_answers(tmp_path):
    source = logicvista_copy(tmp_path, [GOOD] * 3, [LOGICVISTA_TWO, LOGICVISTA_INLINE, LOGICVISTA_DIGITS],
                             ["C, A", "B", "3"])
    stats, manifest = prepare(tmp_path, "logicvista-math", source)
    assert stats["kept"] == 3 and list(manifest["answer"]) == ["A,C", "B", "3"]  # sorted, comma-joined
    assert manifest.iloc[0]["prompt"] == LOGICVISTA_TWO + SUFFIX  # the question names them already


def test_a_bad_math_row_names_the_file_the_sample_and_the_field(tmp_path, caplog):
    source = save(tmp_path, {"images": [[GOOD], [GOOD]], "problem": ["<image>Find x.", "<image>Find y."],
                             "answer": ["3", "  "]}, dict(EASYR1))
    with caplog.at_level("WARNING"):
        stats, _ = prepare(tmp_path, "geometry3k", source)
    assert counts(stats) == {"original": 2, "kept": 1, "dropped": {"bad_row": 1}}
    warning = next(r.getMessage() for r in caplog.records if "geometry3k-000001" in r.getMessage())
    assert source["path"] in warning and "row 1" in warning and "field 'answer' (column 'answer') is empty" in warning


def test_a_math_source_without_the_answer_column_names_the_config_key(tmp_path):
    source = save(tmp_path, {"images": [[GOOD]], "problem": ["<image>Find x."], "label": ["3"]},
                  {"images": datasets.List(datasets.Image()), "problem": datasets.Value("string"),
                   "label": datasets.Value("string")})
    with pytest.raises(DatasetSourceError, match=r"no column 'answer' for field 'answer'.*data\.sources\.geometry3k\.fields\.answer"):
        prepare(tmp_path, "geometry3k", source)
