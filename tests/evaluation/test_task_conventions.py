"""Per-task parsing and scoring conventions taken from the authors' evaluation code."""

import json

import pandas as pd
import pytest

from ttrl_bench.evaluation.evaluate import predictions_frame
from ttrl_bench.evaluation.tasks import FreeformCountTask, GroundingTask, MCQTask

SCENE = {"id": ["a"], "boxes": [[[0, 0, 10, 10]]], "points": [[[5, 5]]], "width": [20], "height": [20]}


def test_capture_count_in_tags_and_integers_only():
    """CAPTURe occluded_scripts/qwen2.py: `safe_string_to_int(extracted)` -> int() or -1, so a
    fractional count is unparsable (scored as sMAPE 100 %)."""
    task = FreeformCountTask()
    assert task.parse("<think>3 rows of 4</think><answer>12</answer>", {}) == 12.0
    assert task.parse("<think>3 rows of 4</think>\nThere are twelve.", {}) == 12.0
    assert task.parse("About 3.5 apples.", {}) is None
    assert task.parse("\\boxed{12.0}", {}) == 12.0
    assert task.score(None, 6.0) == 0.0


def test_mcq_reads_answer_tags():
    samples = pd.DataFrame({"id": ["a"], "options": [["cat", "dog"]], "answer": ["B"]})
    frame = predictions_frame(["<think>not a cat</think><answer>B</answer>"], samples, MCQTask())
    assert frame["correct"].tolist() == [True]


def test_grounding_format_rewards_follow_the_text_as_generated():
    text = '<think>one digit.</think><answer>[{"bbox_2d": [0, 0, 14, 28], "point_2d": [7, 14]}]</answer>'
    task = GroundingTask()
    # thinking 1 + answer format 2 + non-repeat 1; a trailing newline loses the thinking format
    assert task.format_rewards([text, text + "\n"]) == [4.0, 3.0]
    looping = '<think>Left. Left. Left</think><answer>[{"bbox_2d": [0, 0, 1, 1], "point_2d": [0, 0]}]</answer>'
    assert task.format_rewards([looping]) == [4.0]  # "<think>Left" / "Left" / "Left</think>...": no repeat
    assert task.format_rewards([looping], non_repeat="thinking") == [3.0]  # "Left" x3: two repeats
    assert MCQTask().format_rewards(["x"], non_repeat="thinking") == [0.0]


def test_an_invalid_object_makes_the_prediction_an_empty_mask():
    """Seg-Zero evaluation_visionreasoner.py: `extract_bbox_points_think` raises on an object
    without point_2d -> "Reasoning error": intersection 0, union = the gold mask (the gold box
    mask [0:10, 0:10], 100 pixels)."""
    samples = pd.DataFrame(SCENE)
    good = '<answer>[{"bbox_2d": [0, 0, 10, 10], "point_2d": [5, 5]}]</answer>'
    broken = '<answer>[{"bbox_2d": [0, 0, 10, 10], "point_2d": [5, 5]}, {"bbox_2d": [0, 0, 5, 5]}]</answer>'
    frame = predictions_frame([good], samples, GroundingTask())
    assert (frame["intersection"][0], frame["union"][0]) == (100, 100)
    frame = predictions_frame([broken], samples, GroundingTask())
    assert (frame["intersection"][0], frame["union"][0]) == (0, 100)


@pytest.mark.parametrize("empty, giou", [("zero", 50.0), ("one", 100.0), ("skip", 100.0)])
def test_grounding_metrics_take_the_empty_mask_option(empty, giou):
    # two samples: a perfect box (IoU 1), and an empty gold mask with no prediction (I 0, U 0)
    frame = pd.DataFrame({"intersection": [100, 0], "union": [100, 0], "correct": [True, True]})
    metrics = GroundingTask(empty_mask_iou=empty).metrics(frame)
    assert metrics["box_giou"] == pytest.approx(giou)
    assert metrics["box_ciou"] == pytest.approx(100.0)


def test_task_for_passes_the_evaluation_options():
    from ttrl_bench.evaluation.extraction import extract_choice, ttrv_choice
    from ttrl_bench.evaluation.tasks import task_for

    assert task_for("demo-digits").choose is extract_choice
    assert task_for("demo-digits", choice_parser="ttrv").choose is ttrv_choice
    assert task_for("mme", choice_parser="ttrv").choose is ttrv_choice
    assert task_for("demo-digit-scenes").empty_mask_iou == "zero"
    assert task_for("demo-digit-scenes", empty_mask_iou="one").empty_mask_iou == "one"


def test_task_for_keeps_each_option_to_its_tasks(monkeypatch):
    """Defaults give the shared task objects; an option builds a new one only for the tasks it is
    about (pass_k: math; choice_parser: recognition and VQA; empty_mask_iou: grounding)."""
    from types import SimpleNamespace

    from ttrl_bench.evaluation import tasks
    from ttrl_bench.evaluation.extraction import ttrv_choice
    from ttrl_bench.evaluation.tasks import TASKS, MathTask, task_for

    assert task_for("geoqa", pass_k=(2,)).pass_k == (1, 2)
    assert task_for("geoqa") is TASKS["math"]
    assert task_for("demo-digits", pass_k=(1, 4)) is TASKS["recognition"]
    assert not isinstance(task_for("demo-digit-scenes", pass_k=(1, 4)), MathTask)
    assert task_for("demo-digits", choice_parser="robust") is TASKS["recognition"]
    assert task_for("mathvista", choice_parser="ttrv").choose is ttrv_choice  # a VQA set
    assert task_for("demo-digit-scenes", choice_parser="ttrv") is TASKS["grounding"]
    assert task_for("demo-digit-scenes") is TASKS["grounding"]
    assert task_for("demo-digits", empty_mask_iou="one") is TASKS["recognition"]
    monkeypatch.setattr(tasks, "get_dataset", lambda name: SimpleNamespace(task="speech"))
    with pytest.raises(NotImplementedError, match="dataset 'x': task 'speech' has no evaluation yet"):
        task_for("x")


def test_prediction_columns_keep_the_gold_and_leave_unparsable_empty():
    mcq = predictions_frame(["B"], pd.DataFrame({"id": ["a"], "options": [["cat", "dog"]], "answer": ["A"]}), MCQTask())
    assert mcq["gold"].tolist() == ["A"]
    frame = predictions_frame(["no answer"], pd.DataFrame(SCENE), GroundingTask())
    assert frame["parsed"].tolist() == [None]  # not the JSON "null"
    assert json.loads(frame["gold"][0]) == [{"bbox_2d": [0.0, 0.0, 10.0, 10.0], "point_2d": [5.0, 5.0]}]
