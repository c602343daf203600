"""Rewards against values worked out by hand (comments show the arithmetic)."""

import math

import pytest

from ttrl_bench.rewards.registry import get_reward
from ttrl_bench.rewards.voting import (
    answer_entropy,
    dare,
    majority_answer,
    majority_vote,
    random_reward,
    ttrv,
    ttrv_diversity_only,
    ttrv_frequency_only,
)

# H of (1/2, 1/4, 1/4) = 1/2 ln 2 + 2 * 1/4 ln 4 = 0.346574 + 0.693147
H_HALF_QUARTER_QUARTER = 1.0397208


def test_majority_vote_rewards_the_most_frequent_answer():
    assert majority_vote(["A", "B", "A", None]) == [1.0, 0.0, 1.0, 0.0]
    assert majority_vote(["A", "B", "A", None], unparsable="no_reward") == [1.0, 0.0, 1.0, 0.0]


def test_majority_vote_tie_goes_to_the_first_answer_seen():
    """PRIME-RL/TTRL ttt_metrics.py: `Counter(model_answers).most_common(1)`; for n=1 Counter uses
    max(), which keeps the first of equal counts, i.e. the answer seen first."""
    assert majority_answer(["B", "A", "A", "B"]) == "B"
    assert majority_vote(["B", "A", "A", "B"]) == [1.0, 0.0, 0.0, 1.0]
    assert majority_answer([None, "A", None, "A"]) is None  # None seen first wins the tie


def test_majority_vote_unparsable_majority_as_the_authors_code():
    """PRIME-RL/TTRL ttt_metrics.py `test_time_train_metrics`: `auto_extract` maps a failed
    extraction to "" (qwen_math_parser.extract_answer returns "" when nothing is found), "" is
    counted like any answer, wins most_common with 2 of 3, and `auto_verify` against label ""
    gives grade_answer("", "") == True (normalize_answer("") == "") -> the unparsable pair gets 1."""
    assert majority_answer([None, None, "A"]) is None
    assert majority_vote([None, None, "A"]) == [1.0, 1.0, 0.0]
    assert majority_vote([None, None, None]) == [1.0, 1.0, 1.0]


def test_majority_vote_no_reward_option_never_rewards_unparsable():
    """Departure unparsable="no_reward" (this project's earlier rule): None is never the label."""
    assert majority_answer([None, None, "A"], unparsable="no_reward") == "A"
    assert majority_vote([None, None, "A"], unparsable="no_reward") == [0.0, 0.0, 1.0]
    assert majority_answer([None, None, None], unparsable="no_reward") is None
    assert majority_vote([None, None, None], unparsable="no_reward") == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="unparsable"):
        majority_vote(["A"], unparsable="drop")


def test_answer_entropy():
    assert answer_entropy(["A", "A", "B", "C"]) == pytest.approx(H_HALF_QUARTER_QUARTER)
    assert answer_entropy(["A"] * 5) == 0.0
    assert answer_entropy(["A", None]) == pytest.approx(math.log(2))


def test_ttrv_paper_formula():
    # p(A) = .5, p(B) = p(C) = .25; r = p - 0.75 * 1.0397208 = p - 0.7797906
    rewards = ttrv(["A", "A", "B", "C"])
    assert rewards == pytest.approx([-0.2797906, -0.2797906, -0.5297906, -0.5297906])


def test_ttrv_normalized_entropy_as_in_authors_code():
    # H / ln 3 = 1.0397208 / 1.0986123 = 0.9463946; 0.75 * that = 0.7097960
    rewards = ttrv(["A", "A", "B", "C"], entropy="normalized")
    assert rewards == pytest.approx([-0.2097960, -0.2097960, -0.4597960, -0.4597960])


def test_ttrv_single_answer_group_has_no_diversity_penalty():
    assert ttrv(["D"] * 4) == [1.0] * 4
    assert ttrv(["D"] * 4, entropy="normalized") == [1.0] * 4


def test_ttrv_unparsable_is_one_more_answer_as_the_authors_code():
    """Akshit21112002/TTRV ttt_metrics.py `test_time_train_metrics`: `auto_extract` turns an
    unparsable output into "", `reward_p = counter[ans] / total` gives it a frequency, and the
    entropy sums over `counter.values()`, "" included.
    Outcomes A: 2, None: 2 -> p = .5 each; H = ln 2 = 0.693147; 0.75 H = 0.519860."""
    assert ttrv(["A", "A", None, None]) == pytest.approx([-0.019860] * 4, abs=1e-6)


def test_ttrv_normalized_entropy_counts_unparsable_in_the_normaliser():
    """TTRV ttt_metrics.py: `max_entropy = math.log(len(counter))` with "" one of the keys.
    A: 2, B: 1, None: 1 -> H = 1.0397208 (as 1/2, 1/4, 1/4); M = 3 -> H / ln 3 = 0.9463946;
    rewards_en = p - 0.75 * 0.9463946 = p - 0.7097960 -> A -.2097960, B and None -.4597960."""
    rewards = ttrv(["A", "A", "B", None], entropy="normalized")
    assert rewards == pytest.approx([-0.2097960, -0.2097960, -0.4597960, -0.4597960])
    # one completion: `total > 1` fails -> normalized entropy 0, reward_p 1 (even for "")
    assert ttrv([None], entropy="normalized") == [1.0]


def test_ttrv_no_reward_option_gives_unparsable_no_frequency():
    """Departure unparsable="no_reward": p(None) = 0, the entropy unchanged (None still an outcome)."""
    assert ttrv(["A", "A", None, None], unparsable="no_reward") == pytest.approx(
        [-0.019860, -0.019860, -0.519860, -0.519860], abs=1e-6)
    rewards = ttrv(["A", "A", "B", None], entropy="normalized", unparsable="no_reward")
    assert rewards == pytest.approx([-0.2097960, -0.2097960, -0.4597960, -0.7097960])
    assert ttrv_frequency_only([None, "A"], unparsable="no_reward") == [0.0, 0.5]
    assert ttrv_frequency_only([None, "A"]) == [0.5, 0.5]


def test_ttrv_ablations_split_the_reward():
    answers = ["A", "A", "B", "C"]
    assert ttrv_frequency_only(answers) == [0.5, 0.5, 0.25, 0.25]
    assert ttrv_diversity_only(answers) == pytest.approx([-0.7797906] * 4)


def test_ttrv_rejects_unknown_entropy_variant():
    with pytest.raises(ValueError, match="entropy"):
        ttrv(["A"], entropy="bits")


def test_dare_worked_example():
    # n(A) = 3, u(A) = .2 -> 15; n(B) = 1, u(B) = .6 -> 1.6667; p_hat = .9 / .1
    # bonus A = (1 - 3/4)(1 - .2) = .2, bonus B = (1 - 1/4)(1 - .6) = .3
    # r_A = .9 + .5 * .2 = 1.0; r_B = .1 + .5 * .3 = .25
    rewards = dare(["A", "A", "A", "B"], [0.2, 0.2, 0.2, 0.6], alpha=0.5, tau=0.05)
    assert rewards == pytest.approx([1.0, 1.0, 1.0, 0.25])


def test_dare_pruning_drops_rare_answers_and_renormalises():
    # tau = .2 prunes B (p_hat .1); A alone: p_tilde = 1, N' = 3, bonus (1 - 3/3) * .8 = 0
    rewards = dare(["A", "A", "A", "B"], [0.2, 0.2, 0.2, 0.6], alpha=0.5, tau=0.2)
    assert rewards == pytest.approx([1.0, 1.0, 1.0, 0.0])


def test_dare_uncertainty_is_averaged_per_answer_and_none_gets_zero():
    """DARE keeps unparsable completions out of the distribution (no public code to follow)."""
    # u(A) = (.1 + .3) / 2 = .2 -> weight 10; u(B) = .5 -> 2; p_hat = 10/12, 2/12 (N' = 3)
    # bonus A = (1 - 2/3)(.8) = .266667; B = (1 - 1/3)(.5) = .333333
    rewards = dare(["A", "A", "B", None], [0.1, 0.3, 0.5, 0.9], alpha=1.0, tau=0.0)
    assert rewards == pytest.approx([10 / 12 + 0.8 / 3, 10 / 12 + 0.8 / 3, 2 / 12 + 1 / 3, 0.0])


def test_dare_rejects_unnormalised_uncertainty():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        dare(["A"], [2.3])
    with pytest.raises(ValueError, match="uncertainties"):
        dare(["A", "B"], [0.1])


def test_random_reward_is_seeded_bernoulli():
    draws = random_reward([None] * 64, seed=3)
    assert draws == random_reward([None] * 64, seed=3)
    assert set(draws) == {0.0, 1.0}
    assert draws != random_reward([None] * 64, seed=4)


def test_registry_builds_rewards_by_name():
    assert get_reward("ttrv", alpha=0.0)(["A", "B"]) == [0.5, 0.5]
    random_groups = get_reward("random", seed=0)
    first, second = random_groups([None] * 32), random_groups([None] * 32)
    assert first != second  # each group draws from its own seed
    with pytest.raises(KeyError, match="unknown reward 'nope'"):
        get_reward("nope")
    with pytest.raises(TypeError, match="bad reward_params"):
        get_reward("majority_vote", alpha=1)


def _group_advantages(rewards, eps=1e-4):
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1)) ** 0.5
    return [(r - mean) / (std + eps) for r in rewards]


def test_ttrv_diversity_term_cancels_in_group_normalised_advantages():
    # SPEC.md: -alpha * H is constant within a group, so GRPO's group centring removes it.
    for answers in (["A", "A", "B", "C"], ["A", "B", "B", "B", None, "D"]):
        assert _group_advantages(ttrv(answers)) == pytest.approx(_group_advantages(ttrv_frequency_only(answers)))


def test_registry_marks_dare_as_needing_uncertainty_and_builds_consensus():
    reward = get_reward("dare", alpha=0.5, tau=0.05)
    assert reward.needs_uncertainty
    assert reward(["A", "A", "A", "B"], uncertainties=[0.2, 0.2, 0.2, 0.6]) == pytest.approx([1.0, 1.0, 1.0, 0.25])
    box = [{"bbox_2d": [0, 0, 10, 10], "point_2d": [5, 5]}]
    far = [{"bbox_2d": [50, 50, 60, 60], "point_2d": [55, 55]}]
    assert get_reward("vr_ttrl_consensus")([box, box, far]) == [3.0, 3.0, 0.0]
    assert get_reward("vr_ttrl_consensus", anti=True)([box, box, far]) == [0.0, 0.0, 3.0]
    with pytest.raises(TypeError, match="thresholds"):
        get_reward("vr_ttrl_consensus", thresholds="tight")


def test_voting_rewards_report_how_often_the_unparsable_convention_changes_a_reward():
    """`last_stats`: convention_unparsable = share of None; changed_by_unparsable = share of
    completions whose reward differs under the other `unparsable` value."""
    reward = get_reward("ttrv", alpha=0.75)
    reward(["A", "A", None, None])
    # only the two None completions change: p .5 ("answer") vs 0 ("no_reward")
    assert reward.last_stats == {"convention_unparsable": 0.5, "changed_by_unparsable": 0.5}
    vote = get_reward("majority_vote")
    assert vote([None, None, "A"]) == [1.0, 1.0, 0.0]
    # the label moves from None to A: all three rewards change
    assert vote.last_stats == {"convention_unparsable": pytest.approx(2 / 3), "changed_by_unparsable": 1.0}
    assert get_reward("majority_vote", unparsable="no_reward")([None, None, "A"]) == [0.0, 0.0, 1.0]
    vote(["A", "A", "B"])
    assert vote.last_stats == {"convention_unparsable": 0.0, "changed_by_unparsable": 0.0}
    with pytest.raises(TypeError, match="bad reward_params"):
        get_reward("ttrv", unparsable="skip")


def test_random_reward_is_a_fair_coin():
    """random.Random(0) draws .844 .758 .421 .259 .511 .405 .784 .303: r = 1 below 0.5 (TTRV
    Table 5's Bernoulli(0.5)); 10,000 draws average 0.5 within 0.02."""
    assert random_reward([None] * 8, seed=0) == [0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert abs(sum(random_reward([None] * 10_000, seed=1)) / 10_000 - 0.5) < 0.02


def test_dare_keeps_an_answer_exactly_at_the_pruning_threshold():
    """Equal uncertainties 0.5: p_hat(a) = 3/4, p_hat(b) = 1/4 = tau exactly (x / 4x is exact in
    floating point: b / total == tau holds), so b survives (p_hat >= tau). a: 0.75 + 0.5 * (1 - 3/4) * 0.5 = 0.8125;
    b: 0.25 + 0.5 * (1 - 1/4) * 0.5 = 0.4375. Pruned, b would get 0 and a 1.0."""
    assert dare(["a", "a", "a", "b"], [0.5] * 4, tau=0.25) == pytest.approx([0.8125] * 3 + [0.4375])


def test_registry_random_reward_draws_group_g_from_seed_plus_g():
    # random.Random(0): .844 .758 .421 .259; random.Random(1): .134 .847 .764 .255 (r = 1 below .5)
    groups = get_reward("random")
    assert groups([None] * 4) == [0.0, 0.0, 1.0, 1.0]
    assert groups([None] * 4) == [1.0, 0.0, 0.0, 1.0]


def test_dare_defaults_and_params_reach_the_reward():
    """Defaults alpha .5, tau .05 (the worked example above); each param is passed through."""
    four, u = ["A", "A", "A", "B"], [0.2, 0.2, 0.2, 0.6]
    assert dare(four, u) == pytest.approx([1.0, 1.0, 1.0, 0.25])
    reward = get_reward("dare")
    assert reward(four, uncertainties=u) == pytest.approx([1.0, 1.0, 1.0, 0.25])
    # tau .3 prunes B (p_hat .1): A alone, bonus (1 - 3/3) * .8 = 0
    assert get_reward("dare", tau=0.3)(four, uncertainties=u) == pytest.approx([1.0, 1.0, 1.0, 0.0])
    # eps .5: weight A = 2 / (.5 + .5) = 2, B = 1 / (0 + .5) = 2 -> p .5 each; alpha 0: no bonus
    assert get_reward("dare", alpha=0.0, tau=0.0, eps=0.5)(["A", "A", "B"], uncertainties=[0.5, 0.5, 0.0]) == [0.5] * 3
    assert reward.unparsable == "no_reward"
    reward(["A", "A", "A", None], uncertainties=u)
    assert reward.last_stats == {"convention_unparsable": 0.25}


def test_dare_accepts_uncertainties_0_and_1_and_scores_nothing_parsed_0():
    # u = 0: weight 1 / eps, p 1, bonus (1 - 1/1) * 1 = 0; u = 1: p .5 each, bonus (1 - 1/2) * 0 = 0
    assert dare(["A"], [0.0]) == pytest.approx([1.0])
    assert dare(["A", "B"], [1.0, 1.0]) == pytest.approx([0.5, 0.5])
    assert dare([None, None], [0.1, 0.2]) == [0.0, 0.0]
    with pytest.raises(ValueError, match=r"got \[1\.5, 2\.0, 3\.0\]$"):
        dare(["A"] * 4, [1.5, 2.0, 3.0, 4.0])


def test_voting_defaults_and_small_groups():
    from collections import Counter

    from ttrl_bench.rewards.voting import answer_counts

    assert answer_counts(["A", None]) == Counter({"A": 1, None: 1})  # None is a value by default
    assert answer_entropy([]) == 0.0
    # two outcomes: H = ln 2, normalised by ln 2 -> 1; r = 1/2 - 1 * 1
    assert ttrv(["A", "B"], alpha=1.0, entropy="normalized") == pytest.approx([-0.5, -0.5])
    assert ttrv_diversity_only(["A", "B"], alpha=1.0) == pytest.approx([-math.log(2)] * 2)
    assert ttrv_diversity_only(["A", "B"], alpha=1.0, entropy="normalized") == pytest.approx([-1.0, -1.0])


def test_reward_objects_keep_their_conventions_and_counts():
    ttrv_reward = get_reward("ttrv", alpha=0.0)
    assert ttrv_reward.last_stats == {} and ttrv_reward.needs_gold is False and ttrv_reward.unparsable == "answer"
    assert get_reward("random").unparsable == "answer" and get_reward("gold").needs_gold is True
    assert get_reward("ttrv", unparsable="no_reward").unparsable == "no_reward"
    # no None: both conventions give p = 2/3, 2/3, 1/3 (alpha 0 in both): nothing changes
    ttrv_reward(["A", "A", "B"])
    assert ttrv_reward.last_stats == {"convention_unparsable": 0.0, "changed_by_unparsable": 0.0}
    # one completion, unparsable: "answer" makes it the label (1), "no_reward" gives 0: 1 of 1 changed
    vote = get_reward("majority_vote")
    assert vote([None]) == [1.0]
    assert vote.last_stats == {"convention_unparsable": 1.0, "changed_by_unparsable": 1.0}
    # the flip of "no_reward" is "answer": [0, 0, 1] against [1, 1, 0]
    no_reward = get_reward("majority_vote", unparsable="no_reward")
    no_reward([None, None, "A"])
    assert no_reward.last_stats["changed_by_unparsable"] == 1.0


def test_consensus_reward_params_reach_the_conventions():
    """a = [0, 0, 2, 2], b = [0, 0, 2, 1], points (1, 1): pixel IoU 6/9 > .5 (continuous 2/4 = .5 is
    not), box L1 (0 + 0 + 0 + 1) / 4, distance 0 -> 3 tests pixel-wise, 2 continuous."""
    def obj(box, point):
        return [{"bbox_2d": box, "point_2d": point}]

    a, b = obj([0, 0, 2, 2], [1, 1]), obj([0, 0, 2, 1], [1, 1])
    assert get_reward("vr_ttrl_consensus")([a, b]) == [3.0, 3.0]
    assert get_reward("vr_ttrl_consensus", pixel_iou=False)([a, b]) == [3.0, 2.0]
    # loose thresholds (.3 / 20 / 50): [0, 0, 100, 100] vs [0, 0, 100, 40]: IoU 4141/10201 = .41,
    # L1 60/4 = 15, distance |50 - 20| = 30: all pass loose, none base (label a: b scores 0)
    big, low = obj([0, 0, 100, 100], [50, 50]), obj([0, 0, 100, 40], [50, 20])
    assert get_reward("vr_ttrl_consensus", thresholds="loose")([big, low]) == [3.0, 3.0]
    assert get_reward("vr_ttrl_consensus")([big, low]) == [3.0, 0.0]
    # an answer with an invalid object scores 0 under the authors' rule (total 0, the two a's 3 each:
    # label a); with drop_object it is its valid object, a, and every answer scores 3
    mixed = [*a, {"bbox_2d": [0, 0, 1, 1]}]
    assert get_reward("vr_ttrl_consensus")([mixed, a, a]) == [0.0, 3.0, 3.0]
    assert get_reward("vr_ttrl_consensus", invalid_object="drop_object")([mixed, a, a]) == [3.0] * 3
    with pytest.raises(TypeError, match=r"thresholds must be one of \['base', 'loose', 'strict'\], got 'tight'"):
        get_reward("vr_ttrl_consensus", thresholds="tight")
    with pytest.raises(TypeError, match="non_repeat must be 'output' or 'thinking', got 'all'"):
        get_reward("vr_ttrl_consensus", non_repeat="all")
    with pytest.raises(KeyError, match="known: majority_vote, ttrv, "):
        get_reward("nope")


def test_gold_match_rewards_only_fully_correct_parsed_answers():
    """RLVR's binary reward: 1 where the task's score is 1, else 0; an unparsable answer gets 0 even
    from a score that would accept anything."""
    from ttrl_bench.rewards.registry import gold_match

    assert gold_match(["A", None, "B"], "A", lambda a, g: float(a == g)) == [1.0, 0.0, 0.0]
    assert gold_match(["A", None], "A", lambda a, g: 1.0) == [1.0, 0.0]
    assert gold_match(["A"], "A", lambda a, g: 0.99) == [0.0]  # partly right (e.g. 1 - sMAPE) is not right


def test_reward_parameters_are_the_factories_keywords():
    from ttrl_bench.rewards.registry import reward_parameters

    assert reward_parameters("ttrv") == ["alpha", "entropy", "unparsable"]
    assert reward_parameters("majority_vote") == ["unparsable"] and reward_parameters("gold") == []
