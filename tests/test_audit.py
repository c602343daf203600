"""The reward audit: advantages as TRL computes them, and what TTRV's diversity term does to them."""

import numpy as np
import pytest

from ttrl_bench.rewards.audit import audit, grpo_advantages, sample_groups

TTRV_METHODS = {
    "ttrv": {"reward": "ttrv", "params": {"alpha": 0.75}},
    "ttrv-no-diversity": {"reward": "ttrv_frequency_only"},
    "ttrv-no-frequency": {"reward": "ttrv_diversity_only"},
}


def test_group_advantages_by_hand():
    # group [1, 0, 1, 0]: mean .5, unbiased std sqrt(1/3) = .57735 -> +-.5 / .57745 = +-.86588
    adv = grpo_advantages(np.array([1.0, 0.0, 1.0, 0.0]), 4, "group")
    assert adv == pytest.approx([0.86588, -0.86588, 0.86588, -0.86588], abs=1e-5)
    assert grpo_advantages(np.array([1.0, 0.0, 1.0, 0.0]), 4, "none") == pytest.approx([0.5, -0.5, 0.5, -0.5])


def test_batch_scaling_divides_by_the_batch_std():
    # groups [1, 0] and [3, 3]: centred [.5, -.5, 0, 0]; batch std of [1, 0, 3, 3] (ddof 1) = 1.5
    adv = grpo_advantages(np.array([1.0, 0.0, 3.0, 3.0]), 2, "batch")
    assert adv == pytest.approx([0.5 / 1.5001, -0.5 / 1.5001, 0.0, 0.0], abs=1e-6)


def test_diversity_term_changes_nothing_under_group_scaling_but_rescales_under_batch():
    table = audit(sample_groups(64, 8, seed=0), TTRV_METHODS).set_index(["method", "scale_rewards"])
    diff = table["max_abs_diff_vs_ttrv-no-diversity"]
    assert diff[("ttrv", "group")] == pytest.approx(0.0, abs=1e-9)
    assert diff[("ttrv", "none")] == pytest.approx(0.0, abs=1e-9)
    assert diff[("ttrv", "batch")] > 0.1
    # "w/o frequency" (TTRV Table 4) is constant within every group: no learning signal at all
    assert table.loc["ttrv-no-frequency", "advantage_abs_max"].max() == pytest.approx(0.0, abs=1e-9)


def test_sampled_groups_are_seeded():
    assert sample_groups(4, 8, seed=1) == sample_groups(4, 8, seed=1)
    assert all(len(g) == 8 for g in sample_groups(4, 8, seed=1))


def test_unknown_scaling_is_refused():
    with pytest.raises(ValueError, match="scale_rewards"):
        grpo_advantages(np.zeros(4), 2, "global")


def test_audit_covers_dare_with_sampled_uncertainties():
    methods = {**TTRV_METHODS, "dare": {"reward": "dare", "params": {"alpha": 0.5, "tau": 0.05, "uncertainty": "vocab"}}}
    table = audit(sample_groups(16, 8, seed=0), methods).set_index(["method", "scale_rewards"])
    assert table.loc[("dare", "group"), "advantage_std"] > 0


def test_audit_reports_how_often_the_unparsable_convention_changes_ttrv():
    """Every unparsable completion gets p(None) > 0 with unparsable="answer" and 0 with
    "no_reward", and no parsed completion changes: the two shares must be equal."""
    groups = sample_groups(32, 8, seed=0, unparsable=0.25)
    table = audit(groups, TTRV_METHODS).set_index(["method", "scale_rewards"])
    row = table.loc[("ttrv", "group")]
    none_share = sum(a is None for g in groups for a in g) / (32 * 8)
    assert row["convention_unparsable"] == pytest.approx(none_share)
    assert row["changed_by_unparsable"] == pytest.approx(none_share)
    assert np.isnan(table.loc[("ttrv-no-frequency", "group"), "changed_by_unparsable"])  # same either way


def test_audit_of_grounding_groups_counts_points_outside_their_box():
    from ttrl_bench.rewards.audit import sample_object_groups
    from ttrl_bench.rewards.grounding import point_in_box

    groups = sample_object_groups(16, 8, seed=0)
    table = audit(groups, {"vr-ttrl": {"reward": "vr_ttrl_consensus"}}, scales=("group",)).iloc[0]
    outside = sum(a is not None and not point_in_box(a[0]) for g in groups for a in g) / (16 * 8)
    assert 0 < outside < 1  # the sampler produces both kinds
    assert table["convention_point_outside_box"] == pytest.approx(outside)
    flips = ("pixel_iou", "point_in_box", "point_distance", "invalid_object")
    assert {f"changed_by_{n}" for n in flips} <= set(table.index)


def test_sampled_answers_follow_the_stated_shares():
    """The shares and spreads the samplers' docstrings state, over 4,000 completions (a share's
    standard error is below .005): 10 % unparsable, 5 % with an extra object without a point,
    Beta(2, 5) uncertainties (mean 2/7), boxes wider than 20 px on average 110 (U(20, 200)), points
    spread around the box centre by N(0, side / 3): mean offset 0, mean squared offset side^2 / 9."""
    from ttrl_bench.rewards.audit import sample_object_groups, sample_uncertainties

    letters = [a for g in sample_groups(100, 40, seed=0) for a in g]
    assert abs(letters.count(None) / len(letters) - 0.1) < 0.02
    groups = sample_object_groups(1000, 4, seed=0)  # 1,000 boxes: their mean side has s.e. 1.6 px
    answers = [a for g in groups for a in g if a is not None]
    assert abs(len(answers) / 4000 - 0.9) < 0.02
    assert abs(sum(len(a) == 2 for a in answers) / len(answers) - 0.05) < 0.015
    assert all(a[1] == {"bbox_2d": a[0]["bbox_2d"]} for a in answers if len(a) == 2)
    boxes = np.array([a[0]["bbox_2d"] for a in answers])
    points = np.array([a[0]["point_2d"] for a in answers])
    sides = boxes[:, 2:] - boxes[:, :2]
    assert np.all(np.abs(sides.mean(axis=0) - 110) < 6)
    # E[w^2] / 9 for w ~ U(20, 200): (200^3 - 20^3) / (3 * 180) / 9 = 1644, plus the centre's own
    # noise, E[s^2] / 2 for s ~ U(2, 20): 74 -> 1718 px^2, within 10 %
    offsets = points - (boxes[:, :2] + boxes[:, 2:]) / 2
    assert np.all(np.abs(offsets.mean(axis=0)) < 3)
    assert np.all(np.abs((offsets ** 2).mean(axis=0) / 1718 - 1) < 0.1)
    u = sample_uncertainties(groups, seed=0)
    assert u == sample_uncertainties(groups, seed=0)
    assert abs(np.mean(u) - 2 / 7) < 0.01


def test_score_passes_each_rewards_params():
    from ttrl_bench.rewards.audit import rewards_by_method

    # ttrv with alpha 0: p(A) = 2/3, p(B) = 1/3 (the default alpha .75 would subtract .75 * H)
    flat = rewards_by_method([["A", "A", "B"]], {"t": {"reward": "ttrv", "params": {"alpha": 0.0}}})
    assert flat["t"] == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    with pytest.raises(ValueError, match="^all groups must have the same number of completions$"):
        rewards_by_method([["A"], ["A", "B"]], {"t": {"reward": "ttrv"}})
