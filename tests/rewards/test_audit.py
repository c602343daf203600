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
    from ttrl_bench.rewards.audit import sample_object_groups

    assert sample_groups(4, 8, seed=1) == sample_groups(4, 8, seed=1)
    assert sample_object_groups(4, 8, seed=1) == sample_object_groups(4, 8, seed=1)
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


def test_mcq_answer_distributions_are_dirichlet_half():
    """Two completions of one prompt agree with probability E[sum_k p_k^2]; for p ~ Dirichlet(a)
    over K = 4 answers, E[p_k^2] = a (a + 1) / (K a (K a + 1)), so the sum is (a + 1) / (K a + 1):
    1.5 / 3 = .5 for the stated a = .5 (a = 1.5 would give 2.5 / 7 = .36). 4,000 pairs: s.e. .008."""
    pairs = sample_groups(4000, 2, seed=0, unparsable=0.0)
    assert abs(sum(a == b for a, b in pairs) / len(pairs) - 0.5) < 0.03


class _QuantileRng:
    """A stand-in for np.random.Generator that draws every value at a fixed point of its
    distribution: uniform(low, high) at quantile q, normal(loc, scale) at loc + z * scale,
    random() = r; so the sampler's output follows from its stated distributions by hand."""

    def __init__(self, q, z, r):
        self.q, self.z, self.r = q, z, r

    def uniform(self, low=0.0, high=1.0, size=None):
        v = low + self.q * (high - low)
        return v if size is None else np.full(size, v)

    def normal(self, loc=0.0, scale=1.0, size=None):
        v = np.asarray(loc) + self.z * np.asarray(scale)
        return v if size is None else np.broadcast_to(v, size).copy()

    def random(self, size=None):
        return self.r


def test_object_groups_follow_their_stated_distributions(monkeypatch):
    from ttrl_bench.rewards import audit as audit_module

    monkeypatch.setattr(audit_module.np.random, "default_rng", lambda seed: _QuantileRng(q=0.5, z=1.0, r=0.5))
    # medians: corner x, y ~ U(0, 400) -> 200; sides ~ U(20, 200) -> 110; spread s ~ U(2, 20) -> 11;
    # corners + one sigma s: [211, 211, 321, 321]; point: centre 266 + side / 3 = 302.67 -> 303;
    # r = .5 is neither unparsable (< .1) nor invalid (< .05)
    answer = [{"bbox_2d": [211, 211, 321, 321], "point_2d": [303, 303]}]
    assert audit_module.sample_object_groups(1, 2, seed=0) == [[answer, answer]]
    # shares of 0: no completion unparsable or invalid, even on random()'s lowest draw 0.0
    monkeypatch.setattr(audit_module.np.random, "default_rng", lambda seed: _QuantileRng(q=0.5, z=1.0, r=0.0))
    assert audit_module.sample_object_groups(1, 2, seed=0, unparsable=0.0, invalid=0.0) == [[answer, answer]]


def test_audit_reports_the_mean_reward():
    from ttrl_bench.rewards.audit import rewards_by_method

    # ttrv with alpha 0 is the answer's frequency: [2/3, 2/3, 1/3] and [1, 1, 1] -> mean (5/3 + 3) / 6 = 7/9
    table = audit([["A", "A", "B"], ["B", "B", "B"]], {"t": {"reward": "ttrv", "params": {"alpha": 0.0}}})
    assert table["reward_mean"].tolist() == pytest.approx([7 / 9] * 3)
    # the audit scores the batch rewards_by_method gives at its default seed (DARE's sampled uncertainties)
    groups = sample_groups(16, 8, seed=0)
    methods = {"dare": {"reward": "dare"}}
    table = audit(groups, methods, scales=("none",))
    assert table["reward_mean"].iloc[0] == pytest.approx(rewards_by_method(groups, methods)["dare"].mean(), abs=1e-12)


def test_no_groups_give_no_rewards():
    from ttrl_bench.rewards.audit import rewards_by_method

    flat = rewards_by_method([], {"t": {"reward": "ttrv"}})
    assert list(flat) == ["t"] and flat["t"].shape == (0,)
