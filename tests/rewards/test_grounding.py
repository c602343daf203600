"""VR-TTRL structured rewards against geometry worked out by hand from the Seg-Zero code
(dvlab-research/Seg-Zero verl/utils/reward_score/vision_reasoner.py), one test per rule, and one
per departure option (grounding.Conventions / non_repeat scope)."""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from ttrl_bench.rewards.grounding import (
    MAX_OBJECTS,
    THRESHOLDS,
    Conventions,
    answer_format_reward,
    box_iou,
    consensus,
    convention_counts,
    non_repeat_reward,
    pairwise_accuracy,
    parse_objects,
    thinking_format_reward,
)
from ttrl_bench.rewards.registry import get_reward


def obj(box, point):
    return {"bbox_2d": box, "point_2d": point}


A = obj([0, 0, 100, 100], [50, 50])
A_SHIFTED = obj([5, 5, 105, 105], [55, 55])  # pixel IoU 9216/11186 = .824, L1 5, point 7.07
B = obj([200, 200, 300, 300], [250, 250])
CONTINUOUS = Conventions(pixel_iou=False)


def test_box_iou_is_inclusive_pixel_as_batch_iou():
    """`batch_iou`: inter = max(0, xB - xA + 1) * max(0, yB - yA + 1), area = (x2 - x1 + 1)(y2 - y1 + 1).
    [0,0,100,100] vs [5,5,105,105]: inter 96 * 96 = 9216, areas 101^2 = 10201, union 11186."""
    assert box_iou([0, 0, 100, 100], [5, 5, 105, 105]) == pytest.approx(9216 / 11186)
    # touching edges share a pixel column: inter 1 * 11 = 11, union 121 + 121 - 11 = 231
    assert box_iou([0, 0, 10, 10], [10, 0, 20, 10]) == pytest.approx(11 / 231)
    # a one-pixel box [5,5,5,5] is area 1, so two copies overlap fully
    assert box_iou([5, 5, 5, 5], [5, 5, 5, 5]) == 1.0
    assert box_iou([0, 0, 10, 10], [20, 20, 30, 30]) == 0.0


def test_continuous_iou_option():
    """Departure pixel_iou=False: `compute_bbox_iou` of the authors' evaluation, continuous areas."""
    assert box_iou([0, 0, 100, 100], [5, 5, 105, 105], pixel=False) == pytest.approx(9025 / 10975)
    assert box_iou([0, 0, 10, 10], [10, 0, 20, 10], pixel=False) == 0.0
    assert box_iou([5, 5, 5, 5], [5, 5, 5, 5], pixel=False) == 0.0  # union 0


def test_pixel_convention_decides_the_iou_test():
    """[0,0,3,3] vs [1,0,4,3]: pixel IoU 12 / 20 = .6 > .5 passes; continuous 6 / 12 = .5 does not.
    Mean box L1 (1 + 0 + 1 + 0) / 4 = .5 < 10 and equal points pass either way: 3 vs 2."""
    p, q = [obj([0, 0, 3, 3], [1, 1])], [obj([1, 0, 4, 3], [1, 1])]
    assert pairwise_accuracy(p, q) == 3.0
    assert pairwise_accuracy(p, q, conventions=CONTINUOUS) == 2.0


def test_pairwise_accuracy_counts_passed_tests():
    assert pairwise_accuracy([A], [A_SHIFTED]) == 3.0
    assert pairwise_accuracy([A], [B]) == 0.0
    # strict: IoU .824 > .7 yes, L1 5 < 5 no, point 7.07 < 15 yes -> 2
    assert pairwise_accuracy([A], [A_SHIFTED], THRESHOLDS["strict"]) == 2.0


def test_point_counts_only_inside_its_own_box():
    """`point_reward = (points_dist_matrix < 30) & points_in_box[:, None]`, `batch_points_in_box`
    checks the *predicted* point against the *predicted* box, edges included. Pred point
    [110, 50] lies 10 px right of its box [0,0,100,100]; target point [95, 50]: distance 15 < 30
    but outside -> the point test fails: IoU 1 + L1 0 -> 2. The other way round the predicted
    point [95, 50] is inside its box -> 3: the reward is not symmetric."""
    outside, inside = [obj([0, 0, 100, 100], [110, 50])], [obj([0, 0, 100, 100], [95, 50])]
    assert pairwise_accuracy(outside, inside) == 2.0
    assert pairwise_accuracy(inside, outside) == 3.0
    # the corner is inside: [100, 100] vs [80, 80] is 28.3 px
    assert pairwise_accuracy([obj([0, 0, 100, 100], [100, 100])], [obj([0, 0, 100, 100], [80, 80])]) == 3.0


def test_point_in_box_option():
    """Departure point_in_box=False: the paper's Point L1 reward alone (VR-TTRL Section 3.2.2)."""
    outside, inside = [obj([0, 0, 100, 100], [110, 50])], [obj([0, 0, 100, 100], [95, 50])]
    assert pairwise_accuracy(outside, inside, conventions=Conventions(point_in_box=False)) == 3.0


def test_point_distance_is_euclidean_and_the_paper_l1_is_an_option():
    """`batch_points_distance` = sqrt(dx^2 + dy^2): [0,0] vs [20,20] is 28.28 < 30 -> passes;
    the paper calls it "Point L1" (Section 3.2.2): 20 + 20 = 40 -> fails."""
    p, q = [obj([0, 0, 100, 100], [0, 0])], [obj([0, 0, 100, 100], [20, 20])]
    assert pairwise_accuracy(p, q) == 3.0
    assert pairwise_accuracy(p, q, conventions=Conventions(point_distance="l1")) == 2.0


def test_pairwise_accuracy_matches_objects_and_divides_by_the_larger_count():
    # [A, B] vs [B]: Hungarian pairs B with B (3 tests); divided by max(2, 1)
    assert pairwise_accuracy([A, B], [B]) == 1.5
    assert pairwise_accuracy([B, A], [A_SHIFTED, B]) == 3.0


def test_object_lists_are_capped_at_120():
    """`MAX_OBJECTS = 120`: 121 copies of A against [A] -> one matched pair (3) / max(120, 1)."""
    assert MAX_OBJECTS == 120
    assert pairwise_accuracy([A] * 121, [A]) == pytest.approx(3 / 120)
    assert pairwise_accuracy([A], [A] * 130) == pytest.approx(3 / 120)


def test_one_invalid_object_zeroes_the_answer():
    """`[item['bbox_2d'] for item in data]` raises KeyError on an object without a box, a
    3-number box makes `np.split(boxes, 4, axis=1)` raise; the bare `except` returns 0."""
    assert pairwise_accuracy([A, {"point_2d": [1, 2]}], [A]) == 0.0
    assert pairwise_accuracy([A, obj([1, 2, 3], [1, 1])], [A]) == 0.0
    assert pairwise_accuracy([A], [A, "junk"]) == 0.0
    assert pairwise_accuracy([], [A]) == 0.0  # np.split of an empty array raises too
    assert pairwise_accuracy(None, [A]) == 0.0


def test_drop_object_option_scores_the_valid_objects():
    """Departure invalid_object="drop_object" (this project's earlier rule)."""
    drop = Conventions(invalid_object="drop_object")
    assert pairwise_accuracy([A, {"point_2d": [1, 2]}], [A], conventions=drop) == 3.0
    assert pairwise_accuracy([A, obj([1, 2, 3], [1, 1]), B], [A], conventions=drop) == 1.5


def test_consensus_picks_the_answer_closest_to_all_others():
    answers = [[B], [A], [A_SHIFTED], None, [A]]
    label, rewards = consensus(answers)
    # totals: B 0; A 3+3=6 (vs A_SHIFTED, A); A_SHIFTED 6; A 6 -> first of the tied, index 1
    assert label == 1
    assert rewards == [0.0, 3.0, 3.0, 0.0, 3.0]


def test_consensus_totals_use_each_answer_as_the_prediction():
    """X's point lies outside its box: totals X = acc(X, Y) + acc(X, Z) = 2 + 2 = 4, Y = Z = 3 + 3
    = 6 -> label Y; rewards acc(., Y) = [2, 3, 3]. Without the in-box test all totals are 6, the
    label is X (first) and every reward is 3."""
    x = [obj([0, 0, 100, 100], [110, 50])]
    y = z = [obj([0, 0, 100, 100], [95, 50])]
    assert consensus([x, y, z]) == (1, [2.0, 3.0, 3.0])
    assert consensus([x, y, z], conventions=Conventions(point_in_box=False)) == (0, [3.0, 3.0, 3.0])


def test_anti_consensus_picks_the_outlier():
    label, rewards = consensus([[B], [A], [A_SHIFTED]], anti=True)
    assert label == 0
    assert rewards == [3.0, 0.0, 0.0]


def test_consensus_with_nothing_scorable():
    # every answer totals 0: the paper's rule ("the answer that maximizes the total reward among them")
    # takes the first of the tied as the label, and every reward is 0 against it
    assert consensus([None, [{"bbox_2d": "x"}], []]) == (0, [0.0, 0.0, 0.0])
    # an answer with one invalid object totals 0 (it scores 0 against every other) and so does the
    # valid one (it scores 0 against the invalid one): first of the tied, so every reward is 0
    assert consensus([[A, {"bbox_2d": "x"}], [A_SHIFTED]]) == (0, [0.0, 0.0])
    assert consensus([[A_SHIFTED], [A, {"bbox_2d": "x"}]]) == (0, [3.0, 0.0])
    assert consensus([[A, {"bbox_2d": "x"}], [A_SHIFTED]], conventions=Conventions(invalid_object="drop_object")) == (
        0, [3.0, 3.0])


def test_parse_objects_needs_a_json_list():
    text = '<think>one dog.</think><answer>[{"bbox_2d": [1, 2, 3, 4], "point_2d": [2, 3]}]</answer>'
    assert parse_objects(text) == [obj([1, 2, 3, 4], [2, 3])]
    # a lone object: the authors' `for item in data` walks the dict's keys and fails
    assert parse_objects('<answer>{"bbox_2d": [1, 2, 3, 4]}</answer>') is None
    assert parse_objects("<answer>[1, 2]</answer>") == [1, 2]  # a list; its items are invalid objects
    assert parse_objects("<answer>not json</answer>") is None
    assert parse_objects("no tags") is None


def test_thinking_format_matches_the_text_as_generated():
    """`re.fullmatch(r"<think>.*?</think>\\s*<answer>.*?</answer>", predict_str, re.DOTALL)`,
    no strip: a trailing newline or a leading space fails."""
    good = "<think>a. b.</think> <answer>[]</answer>"
    assert thinking_format_reward(good) == 1.0
    assert thinking_format_reward(good + "\n") == 0.0
    assert thinking_format_reward(" " + good) == 0.0
    assert thinking_format_reward("<answer>[]</answer>") == 0.0


def test_answer_format_reward_as_segmentation_format():
    """`segmentation_format`: a JSON list; per dict item (bbox_2d a list of 4) + (point_2d a list
    of 2), divided by len(list); entry types unchecked; a dict or empty list scores 0; a string
    item holding a key name raises inside the loop and the sum so far is returned."""
    box_only, strings = {"bbox_2d": [1, 2, 3, 4]}, {"bbox_2d": ["a", "b", "c", "d"], "point_2d": ["x", "y"]}
    wrap = lambda items: "<answer>" + __import__("json").dumps(items) + "</answer>"  # noqa: E731
    # (2 + 1 + 0) / 3 for A, a box-only object, a 3-number point
    assert answer_format_reward(wrap([A, box_only, {"point_2d": [1, 2, 3]}])) == pytest.approx(1.0)
    assert answer_format_reward(wrap([strings])) == 2.0
    assert answer_format_reward(wrap(A)) == 0.0  # not a list
    assert answer_format_reward(wrap([])) == 0.0
    assert answer_format_reward(wrap([A, [1, 2], A])) == pytest.approx(4 / 3)  # a list item adds 0
    assert answer_format_reward(wrap([A, "bbox_2d", A])) == pytest.approx(2 / 3)  # stops at the string
    assert answer_format_reward(wrap([A, "point_2d", A])) == pytest.approx(2 / 3)  # `'point_2d'` indexes a str
    assert answer_format_reward(wrap([A, ["point_2d"], A])) == pytest.approx(2 / 3)  # ... or a list: raises
    assert answer_format_reward(wrap([A, 7, A])) == pytest.approx(2 / 3)  # `'bbox_2d' in 7` raises
    assert answer_format_reward("no answer") == 0.0


def test_non_repeat_splits_the_whole_output_and_tolerates_one_repeat():
    """`vision_reasoner_non_repeat_reward`: `predict_str.split('.')`, stripped, empties dropped;
    `repeats` counts sentences seen before and the reward is 0 once repeats >= 2."""
    assert non_repeat_reward("A cat. A cat. A dog.") == 1.0  # one repeat: tolerated
    assert non_repeat_reward("A cat. A cat. A cat.") == 0.0
    assert non_repeat_reward("A cat. A cat. A dog. A dog.") == 0.0
    # the whole output: "<think>Look left" and "Look left</think>..." differ from "Look left"
    thinking_repeats = "<think>Look left. Look left. Look left</think><answer>[]</answer>"
    assert non_repeat_reward(thinking_repeats) == 1.0
    # and text after the tags counts: "...</answer> Dog", then "Dog" three times (2 repeats)
    assert non_repeat_reward("<think>ok</think><answer>x</answer> Dog. Dog. Dog. Dog.") == 0.0


def test_non_repeat_thinking_scope_option():
    """Departure non_repeat="thinking": the paper's "split the thinking process" (Section 3.2.1)."""
    thinking_repeats = "<think>Look left. Look left. Look left</think><answer>[]</answer>"
    assert non_repeat_reward(thinking_repeats, scope="thinking") == 0.0
    assert non_repeat_reward("<think>ok</think><answer>x</answer> Dog. Dog. Dog.", scope="thinking") == 1.0
    with pytest.raises(TypeError, match="non_repeat"):
        non_repeat_reward("x", scope="answer")


def test_convention_counts_and_changes_reach_last_stats():
    """Group [X (point outside its box), Y, Z, None, [A, invalid]]: shares of 5 completions."""
    x = [obj([0, 0, 100, 100], [110, 50])]
    y = [obj([0, 0, 100, 100], [95, 50])]
    group = [x, y, y, None, [A, {"bbox_2d": [1]}]]
    assert convention_counts(group) == {"unparsable": 0.2, "invalid_object": 0.2, "over_max_objects": 0.0,
                                        "point_outside_box": 0.2}
    reward = get_reward("vr_ttrl_consensus")
    # label Y: X 2, Y 3, Y 3, None 0, [A, invalid] 0 (A vs Y would pass IoU .. but the answer is zeroed)
    assert reward(group) == [2.0, 3.0, 3.0, 0.0, 0.0]
    stats = reward.last_stats
    assert stats["convention_point_outside_box"] == 0.2
    # in-box off: label X, everyone scores 3 against X except None and [A, invalid]: X 2 -> 3 changes
    assert stats["changed_by_point_in_box"] == pytest.approx(0.2)
    # drop_object: [A] vs Y: IoU 1, L1 0, point [50,50] vs [95,50] = 45 > 30 -> 2: that one changes
    assert stats["changed_by_invalid_object"] == pytest.approx(0.2)
    assert stats["changed_by_pixel_iou"] == 0.0 and stats["changed_by_point_distance"] == 0.0
    assert reward.format_params == {"non_repeat": "output"}
    assert get_reward("vr_ttrl_consensus", non_repeat="thinking").format_params == {"non_repeat": "thinking"}
    with pytest.raises(TypeError, match="point_distance"):
        get_reward("vr_ttrl_consensus", point_distance="manhattan")


def test_conventions_from_a_methods_reward_params():
    params = {"thresholds": "base", "anti": False, "point_in_box": False, "invalid_object": "drop_object"}
    assert Conventions.from_params(params) == Conventions(point_in_box=False, invalid_object="drop_object")
    with pytest.raises(TypeError, match="invalid_object"):
        Conventions.from_params({"invalid_object": "keep"})


def test_string_coordinate_makes_the_answer_invalid():
    """`np.array([["40", 93, 298, 104]])` is an array of strings: batch_iou's np.maximum raises and
    the authors' bare `except` returns 0, whichever side the answer is on."""
    text = '<answer>[{"bbox_2d": ["40", 93, 298, 104], "point_2d": [150, 98]}]</answer>'
    as_string = parse_objects(text)
    as_number = [obj([40, 93, 298, 104], [150, 98])]
    assert pairwise_accuracy(as_number, as_number) == 3.0
    assert pairwise_accuracy(as_string, as_number) == 0.0
    assert pairwise_accuracy(as_number, as_string) == 0.0
    assert pairwise_accuracy(as_string, as_string) == 0.0
    # the string answer comes first, every total is 0 (each valid answer scores 0 against the other
    # valid one, too far, and against the string one): the string answer is the label, rewards all 0
    assert consensus([as_string, as_number, [B]]) == (0, [0.0, 0.0, 0.0])
    assert consensus([as_number, as_string, [B]]) == (0, [3.0, 0.0, 0.0])


def _authors_rule(pred, target):
    """An independent numpy reading of `vision_reasoner_accuracy_reward` (base thresholds): arrays
    built from the lists as they are, any exception scores 0."""
    try:
        pb, pp = np.array([o["bbox_2d"] for o in pred][:120]), np.array([o["point_2d"] for o in pred][:120])
        tb, tp = np.array([o["bbox_2d"] for o in target][:120]), np.array([o["point_2d"] for o in target][:120])
        lo = np.maximum(pb[:, None, :2], tb[None, :, :2])
        hi = np.minimum(pb[:, None, 2:], tb[None, :, 2:])
        inter = np.prod(np.maximum(0, hi - lo + 1), axis=2)
        area_p, area_t = np.prod(pb[:, 2:] - pb[:, :2] + 1, axis=1), np.prod(tb[:, 2:] - tb[:, :2] + 1, axis=1)
        iou = inter / (area_p[:, None] + area_t[None, :] - inter)
        l1 = np.abs(pb[:, None, :] - tb[None, :, :]).mean(axis=2)
        dist = np.sqrt(((pp[:, None, :] - tp[None, :, :]) ** 2).sum(axis=2))
        inside = np.all((pp >= pb[:, :2]) & (pp <= pb[:, 2:]), axis=1)
        passed = (iou > 0.5) + (l1 < 10).astype(float) + ((dist < 30) & inside[:, None])
        rows, cols = linear_sum_assignment(3 - passed)
        return passed[rows, cols].sum() / max(len(pb), len(tb))
    except Exception:
        return 0.0


def test_consensus_agrees_with_the_authors_rule_on_string_coordinates():
    """200 seeded groups of 2-5 answers near two places, a coordinate turned into a string with
    probability 0.1: our rewards equal the authors' accuracy rule with the paper's label (highest
    total over all answers, first on ties)."""
    rng = np.random.default_rng(25)
    strings = 0
    for _ in range(200):
        answers = []
        for _ in range(rng.integers(2, 6)):
            objects = []
            for _ in range(rng.integers(1, 3)):
                x, y = rng.choice([0, 300]) + rng.integers(0, 8, 2)
                o = obj([int(x), int(y), int(x) + 100, int(y) + 100], [int(x) + 50, int(y) + 50])
                if rng.random() < 0.1:
                    o["bbox_2d"][rng.integers(4)] = str(o["bbox_2d"][0])
                    strings += 1
                objects.append(o)
            answers.append(objects)
        totals = [sum(_authors_rule(a, b) for j, b in enumerate(answers) if j != i) for i, a in enumerate(answers)]
        label = answers[int(np.argmax(totals))]
        assert consensus(answers)[1] == pytest.approx([_authors_rule(a, label) for a in answers]), answers
    assert strings > 30


def test_consensus_never_counts_an_answer_against_itself():
    """P's point lies outside its box, so P scores 2 against itself and [B] 3. Totals without
    self-agreement: P = acc(P, [B]) = 0, [B] = 0 -> P is the label (first), rewards [2, 0]; counting
    self-agreement would give totals 2 and 3, label [B], rewards [0, 3]."""
    p = [obj([0, 0, 100, 100], [110, 50])]
    assert consensus([p, [B]]) == (0, [2.0, 0.0])


def test_thresholds_are_strict_at_their_boundaries():
    """IoU > t, box L1 < t, point distance < t (vision_reasoner.py): exactly at each threshold a
    test fails. Shift by 10 px: L1 = 10 (fails), pixel IoU 91^2 / (2 * 101^2 - 91^2) = .683
    (passes), points 30 apart (fails) -> 1. Boxes 100 x 1 and 50 x 1 px: IoU 50 / 100 = .5 (fails),
    L1 12.5 (fails), same point inside (passes) -> 1. A point on its box's edge is inside."""
    assert pairwise_accuracy([obj([0, 0, 100, 100], [50, 50])], [obj([10, 10, 110, 110], [50, 80])]) == 1.0
    assert pairwise_accuracy([obj([0, 0, 99, 0], [10, 0])], [obj([0, 0, 49, 0], [10, 0])]) == 1.0
    on_edge = [obj([0, 0, 100, 100], [100, 0])]
    assert pairwise_accuracy(on_edge, on_edge) == 3.0


def test_iou_distance_and_counts_by_hand():
    from ttrl_bench.rewards.grounding import convention_counts, flipped

    assert box_iou([0, 5, 10, 15], [0, 5, 10, 15]) == 1.0  # y1 > x1: each corner read from its own index
    assert box_iou([0, 0, 10, 10], [0, 20, 10, 30]) == 0.0  # overlapping in x only
    # points 40 px apart in x alone: IoU and L1 pass, distance 40 >= 30 fails -> 2
    a = [{"bbox_2d": [0, 0, 100, 100], "point_2d": [10, 50]}]
    b = [{"bbox_2d": [0, 0, 100, 100], "point_2d": [50, 50]}]
    assert pairwise_accuracy(a, b) == 2.0
    # 120 objects are allowed, 121 are over; one unparsable completion of one
    assert convention_counts([a * 120, a * 121])["over_max_objects"] == 0.5
    assert convention_counts([None])["unparsable"] == 1.0
    assert flipped(Conventions(pixel_iou=False), "pixel_iou").pixel_iou is True  # back to the default
    assert non_repeat_reward("a.. a. a.") == 0.0  # an empty piece is skipped, not the end
    with pytest.raises(TypeError, match="point_distance must be 'euclidean' or 'l1', got 'manhattan'"):
        Conventions(point_distance="manhattan")
