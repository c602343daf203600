"""Task objects: parsing and scoring of MCQ and grounding predictions, on hand-made outputs."""

import json

import numpy as np
import pandas as pd
import pytest

from ttrl_bench.evaluation.evaluate import predictions_frame
from ttrl_bench.evaluation.tasks import FreeformCountTask, GroundingTask, MCQTask, box_mask, task_for


def test_mcq_predictions_and_accuracy():
    samples = pd.DataFrame({"id": ["a", "b", "c"], "options": [["cat", "dog", "cow", "pig"]] * 3, "answer": ["B", "C", "A"]})
    frame = predictions_frame(["B", "pig", "no idea"], samples, MCQTask())
    assert frame["parsed"].tolist()[:2] == ["B", "D"] and pd.isna(frame["parsed"][2])
    assert frame["correct"].tolist() == [True, False, False]
    assert frame["parse_failure"].tolist() == [False, False, True]
    assert MCQTask().metrics(frame) == {"accuracy": pytest.approx(100 / 3)}


def test_predictions_keep_the_sources_own_id_beside_ours():
    """Issue 57: a local copy's `qid` (kept by the reader as source_id) is a column of the predictions, next to our
    sample id; a manifest without one gives predictions without it."""
    samples = pd.DataFrame({"id": ["my-quiz-000000", "my-quiz-000001"], "source_id": ["q1", "q2"],
                            "options": [["one", "seven"]] * 2, "answer": ["B", "A"]})
    frame = predictions_frame(["B", "B"], samples, MCQTask())
    assert frame[["id", "source_id", "correct"]].values.tolist() == [["my-quiz-000000", "q1", True],
                                                                    ["my-quiz-000001", "q2", False]]
    assert "source_id" not in predictions_frame(["B"], samples.drop(columns="source_id")[:1], MCQTask())


def test_mcq_score_compares_the_parsed_answer_with_the_gold():
    # short_answers_match: same letter 1.0; numbers as numbers ("3.50" == "3.5"); else 0.0
    assert MCQTask().score("B", "B") == 1.0
    assert MCQTask().score("3.50", "3.5") == 1.0
    assert MCQTask().score("A", "B") == 0.0


def test_box_mask_clips_and_orders_corners():
    mask = box_mask([{"bbox_2d": [8, 6, -2, 2], "point_2d": [1, 1]}], width=6, height=5)
    assert mask.sum() == 6 * 3  # x 0..6 (clipped), y 2..5 (clipped)


def test_grounding_predictions_and_metrics():
    samples = pd.DataFrame({
        "id": ["a", "b"],
        "boxes": [[[0, 0, 28, 28]], [[28, 28, 56, 56]]],
        "points": [[[14, 14]], [[42, 42]]],
        "width": [56, 56],
        "height": [56, 56],
    })
    half = '<answer>[{"bbox_2d": [0, 0, 14, 28], "point_2d": [7, 14]}]</answer>'
    two = '<answer>[{"bbox_2d": [28, 28, 56, 56], "point_2d": [42, 42]}, {"bbox_2d": [0, 0, 1, 1], "point_2d": [0, 0]}]</answer>'
    frame = predictions_frame([half, two], samples, GroundingTask())
    # a: I = 14*28 = 392, U = 784; b: I = 784, U = 784 + 1 = 785
    assert frame["intersection"].tolist() == [392, 784]
    assert frame["union"].tolist() == [784, 785]
    assert frame["n_pred"].tolist() == [1, 2]
    assert frame["correct"].tolist() == [True, False]  # counting: one object expected
    assert json.loads(frame["parsed"][0])[0]["bbox_2d"] == [0, 0, 14, 28]
    metrics = GroundingTask().metrics(frame)
    assert metrics["box_giou"] == pytest.approx(100 * (0.5 + 784 / 785) / 2)
    assert metrics["box_ciou"] == pytest.approx(100 * (392 + 784) / (784 + 785))
    assert metrics["count_accuracy"] == 50.0


def test_grounding_format_rewards_add_up():
    text = '<think>one digit.</think><answer>[{"bbox_2d": [0, 0, 14, 28], "point_2d": [7, 14]}]</answer>'
    # thinking format 1 + answer format 2 + non-repeat 1
    assert GroundingTask().format_rewards([text, "garbage"]) == [4.0, 1.0]


def test_free_form_vqa_rows_compare_short_answers():
    # MathVista: one multiple-choice row (5 options) and one free-form row (no options)
    samples = pd.DataFrame({"id": ["mc", "ff", "ff2"], "options": [["15", "30", "45", "60", "90"], [], []],
                            "answer": ["E", "3.5", "cube"]})
    frame = predictions_frame(["(E) 90", "The answer is 3.50.", "**Cube**"], samples, MCQTask())
    assert frame["parsed"].tolist() == ["E", "3.50", "Cube"]
    assert frame["correct"].tolist() == [True, True, True]
    frame = predictions_frame(["F", "3.6", ""], samples, MCQTask())  # F is not among 5 options
    assert frame["parse_failure"].tolist() == [True, False, True]
    assert MCQTask().metrics(frame) == {"accuracy": 0.0}


def test_capture_reads_the_boxed_count_first():
    task = FreeformCountTask()
    # "reason step by step" outputs mention other numbers before the boxed answer
    assert task.parse("There are 3 rows of 4 pairs, so \\boxed{12}.", {}) == 12.0
    assert task.parse("I count seven.", {}) == 7.0
    assert task.parse("no idea", {}) is None


def test_counting_rows_score_against_their_count_column():
    samples = pd.DataFrame({"id": ["a"], "boxes": [[]], "points": [[]], "count": [2], "width": [56], "height": [56]})
    two = '<answer>[{"bbox_2d": [0, 0, 9, 9], "point_2d": [4, 4]}, {"bbox_2d": [20, 20, 29, 29], "point_2d": [24, 24]}]</answer>'
    frame = predictions_frame([two], samples, GroundingTask(primary="count_accuracy"))
    assert frame["correct"].tolist() == [True]


def test_gold_masks_come_from_the_dataset_rle():
    from pycocotools import mask as mask_utils

    gold = np.zeros((10, 10), dtype=bool)
    gold[0:5, 0:4] = True  # 20 px: not the 5x5 box the manifest lists
    rle = mask_utils.encode(np.asfortranarray(gold.astype(np.uint8)))
    samples = pd.DataFrame({"id": ["a"], "boxes": [[[0, 0, 5, 5]]], "points": [[[2, 2]]], "width": [10], "height": [10],
                            "mask": [json.dumps({"size": [10, 10], "counts": rle["counts"].decode()})]})
    box = '<answer>[{"bbox_2d": [0, 0, 5, 5], "point_2d": [2, 2]}]</answer>'
    frame = predictions_frame([box], samples, GroundingTask())
    assert (frame["intersection"][0], frame["union"][0]) == (20, 25)


def test_mme_task_adds_the_official_score():
    samples = pd.DataFrame({"id": ["q1", "q2"], "options": [["No", "Yes"]] * 2, "answer": ["B", "A"],
                            "category": ["OCR", "OCR"], "source_id": ["img", "img"]})
    frame = predictions_frame(["B", "B"], samples, task_for("mme"))
    # acc 50 + acc+ 0 (the image's second question is wrong)
    assert task_for("mme").metrics(frame) == {"accuracy": 50.0, "mme_perception": 50.0, "mme_cognition": 0.0,
                                             "mme_total": 50.0}


def test_freeform_count_columns_and_metrics_by_hand():
    """Capture: parsed [3, unparsable, 2, 8] against gold [3, 5, 2, 10]: sMAPE terms 0, 1, 0,
    2 / 18; 1 - (1 + 1/9) / 4 = 13/18 -> 72.22 %; exact counts 2 of 4."""
    task = FreeformCountTask()
    samples = pd.DataFrame({"answer": ["3", "5", "2", "10"]})
    columns = task.prediction_columns([3.0, None, 2.0, 8.0], samples)
    assert columns == {"parsed": [3.0, None, 2.0, 8.0], "gold": [3.0, 5.0, 2.0, 10.0],
                       "correct": [True, False, True, False]}
    metrics = task.metrics(pd.DataFrame(columns))  # the float column holds NaN for the unparsable count
    assert metrics == {"smape_score": pytest.approx(100 * 13 / 18), "exact_accuracy": 50.0}
    assert task.format_rewards(["7", "x"]) == [0.0, 0.0] and task.gold({"answer": "12"}) == 12.0


def test_grounding_score_is_the_accuracy_reward_over_three():
    """One of two gold objects found exactly: 3 tests passed for the matched pair / max(1, 2) = 1.5,
    / 3 = 0.5; an unparsable answer scores 0."""
    near = {"bbox_2d": [0, 0, 100, 100], "point_2d": [50, 50]}
    far = {"bbox_2d": [200, 200, 300, 300], "point_2d": [250, 250]}
    task = GroundingTask()
    assert task.score([near], [near, far]) == 0.5
    assert task.score([near, far], [near, far]) == 1.0 and task.score(None, [near]) == 0.0


def test_mcq_gold_is_the_letter_and_math_has_no_format_reward():
    from ttrl_bench.evaluation.tasks import MathTask

    assert MCQTask().gold({"answer": "C", "options": ["a", "b", "c"]}) == "C"
    assert MathTask().format_rewards(["\\boxed{1}", ""]) == [0.0, 0.0]
