"""VR-TTRL structured rewards against hand-worked geometry."""

import pytest

from ttrl_bench.rewards.grounding import (
    THRESHOLDS,
    answer_format_reward,
    box_iou,
    consensus,
    non_repeat_reward,
    pairwise_accuracy,
    parse_objects,
    thinking_format_reward,
)


def obj(box, point):
    return {"bbox_2d": box, "point_2d": point}


A = obj([0, 0, 100, 100], [50, 50])
A_SHIFTED = obj([5, 5, 105, 105], [55, 55])  # IoU 9025/10975 = .822, L1 5, point 7.07
B = obj([200, 200, 300, 300], [250, 250])


def test_box_iou_by_hand():
    assert box_iou([0, 0, 100, 100], [5, 5, 105, 105]) == pytest.approx(9025 / 10975)
    assert box_iou([0, 0, 10, 10], [20, 20, 30, 30]) == 0.0
    assert box_iou([0, 0, 10, 10], [0, 0, 10, 10]) == 1.0


def test_pairwise_accuracy_counts_passed_tests():
    assert pairwise_accuracy([A], [A_SHIFTED]) == 3.0
    assert pairwise_accuracy([A], [B]) == 0.0
    # strict: IoU .822 > .7 yes, L1 5 < 5 no, point 7.07 < 15 yes -> 2
    assert pairwise_accuracy([A], [A_SHIFTED], THRESHOLDS["strict"]) == 2.0


def test_pairwise_accuracy_matches_objects_and_divides_by_the_larger_count():
    # [A, B] vs [B]: Hungarian pairs B with B (3 tests); divided by max(2, 1)
    assert pairwise_accuracy([A, B], [B]) == 1.5
    # order does not matter
    assert pairwise_accuracy([B, A], [A_SHIFTED, B]) == 3.0


def test_invalid_objects_are_not_compared():
    assert pairwise_accuracy([{"bbox_2d": [1, 2, 3]}], [A]) == 0.0
    assert pairwise_accuracy(None, [A]) == 0.0


def test_consensus_picks_the_answer_closest_to_all_others():
    answers = [[B], [A], [A_SHIFTED], None, [A]]
    label, rewards = consensus(answers)
    # totals: B 0; A 3+3=6 (vs A_SHIFTED, A); A_SHIFTED 6; A 6 -> first of the tied, index 1
    assert label == 1
    assert rewards == [0.0, 3.0, 3.0, 0.0, 3.0]


def test_anti_consensus_picks_the_outlier():
    label, rewards = consensus([[B], [A], [A_SHIFTED]], anti=True)
    assert label == 0
    assert rewards == [3.0, 0.0, 0.0]


def test_consensus_with_nothing_valid():
    assert consensus([None, [{"bbox_2d": "x"}]]) == (None, [0.0, 0.0])


def test_parse_objects():
    text = '<think>one dog.</think><answer>[{"bbox_2d": [1, 2, 3, 4], "point_2d": [2, 3]}]</answer>'
    assert parse_objects(text) == [obj([1, 2, 3, 4], [2, 3])]
    assert parse_objects('<answer>{"bbox_2d": [1, 2, 3, 4]}</answer>') == [{"bbox_2d": [1, 2, 3, 4]}]
    assert parse_objects("<answer>[1, 2]</answer>") is None
    assert parse_objects("<answer>not json</answer>") is None
    assert parse_objects("no tags") is None


def test_format_rewards():
    good = '<think>a. b.</think> <answer>[]</answer>'
    assert thinking_format_reward(good) == 1.0
    assert thinking_format_reward("<answer>[]</answer>") == 0.0
    assert thinking_format_reward(good + " trailing") == 0.0
    # objects: valid box + valid point = 2; box only = 1; point with 3 numbers = 0 -> mean 1
    assert answer_format_reward([A, {"bbox_2d": [1, 2, 3, 4]}, {"point_2d": [1, 2, 3]}]) == 1.0
    assert answer_format_reward([]) == 0.0
    assert non_repeat_reward("<think>The dog is left. The cat is right.</think>") == 1.0
    assert non_repeat_reward("<think>The dog is left. The dog is left.</think>") == 0.0
