"""Paired comparisons (results/paired.py): the bootstrap interval and McNemar's p worked out by hand on small
paired vectors, and the verdicts at and around their edges."""

import math

import numpy as np
import pytest

from ttrl_bench.results.paired import (interval_verdict, mcnemar_exact, p_value_verdict, paired_bootstrap,
                                       resampled_means)


def test_bootstrap_of_two_items_spans_both_ends():
    # differences 0 and 100: a resample of 2 items has mean 0 (p 1/4), 50 (1/2) or 100 (1/4); 1/4 of the
    # replicates sit at each end, far more than the 2.5% each percentile needs: the interval is [0, 100]
    assert paired_bootstrap([np.array([0.0, 100.0])], [1.0]) == (50.0, 0.0, 100.0)


def test_bootstrap_upper_end_is_a_resample_of_probability_one_in_27():
    # differences 0, 0, 3: the mean is 3 only when all three draws are the 3, p = (1/3)^3 = 3.7% > 2.5%, so
    # the 97.5th percentile is 3; the mean is 0 with p = (2/3)^3 = 29.6%: the 2.5th is 0
    assert paired_bootstrap([np.array([0.0, 0.0, 3.0])], [1.0]) == (1.0, 0.0, 3.0)


def test_bootstrap_resamples_each_seed_on_its_own():
    # seed A: differences 2, 2 (every resample 2); seed B: 0, 4 (0, 2, 4 with p 1/4, 1/2, 1/4); the claim's
    # difference is their mean: 1, 2 or 3 with p 1/4, 1/2, 1/4 -> estimate 2, interval [1, 3]. Pooling the four
    # items instead would let a replicate reach 0.5 (three 0s and one 2 ...): stratification keeps each seed whole
    strata = [np.array([2.0, 2.0]), np.array([0.0, 4.0])]
    assert paired_bootstrap(strata, [0.5, 0.5]) == (2.0, 1.0, 3.0)


def test_bootstrap_of_equal_differences_has_no_width():
    assert paired_bootstrap([np.full(5, 100.0)], [1.0]) == (100.0, 100.0, 100.0)


def test_bootstrap_is_reproducible_by_its_seed():
    diffs = [np.linspace(-30, 50, 41)]
    assert paired_bootstrap(diffs, [1.0], seed=3) == paired_bootstrap(diffs, [1.0], seed=3)
    assert paired_bootstrap(diffs, [1.0], seed=3)[1:] != paired_bootstrap(diffs, [1.0], seed=4)[1:]


def test_resampled_means_draw_items_in_chunks_with_the_same_distribution(monkeypatch):
    # 200 distinct values: with a draw cap of 1000 counts, 5 replicates per chunk; every replicate still
    # averages 200 draws, so each lies within the values' range and the replicates average near the mean
    import ttrl_bench.results.paired as paired

    monkeypatch.setattr(paired, "_MAX_DRAW", 1000)
    values = np.arange(200.0)
    means = resampled_means(values, 40, np.random.default_rng(0))
    assert len(means) == 40 and means.min() >= 0 and means.max() <= 199
    assert abs(means.mean() - 99.5) < 4 * 57.7 / math.sqrt(200 * 40)  # 4 standard errors of the mean of means


def test_bootstrap_refuses_mismatched_or_empty_strata():
    with pytest.raises(ValueError, match="2 strata for 1 weights"):
        paired_bootstrap([np.array([1.0]), np.array([2.0])], [1.0])
    with pytest.raises(ValueError, match="without items"):
        paired_bootstrap([np.array([])], [1.0])


def test_mcnemar_six_to_none_is_one_in_32():
    # 6 items only the arm gets right, none only the baseline: two-sided exact p = 2 * (1/2)^6 = 1/32;
    # the concordant items (4 both right, 3 both wrong) do not enter
    arm = [True] * 6 + [True] * 4 + [False] * 3
    base = [False] * 6 + [True] * 4 + [False] * 3
    assert mcnemar_exact(arm, base) == (6, 0, pytest.approx(1 / 32, rel=1e-12))  # scipy's sum: a rounding away


def test_mcnemar_five_to_none_is_one_in_16():
    assert mcnemar_exact([True] * 5, [False] * 5) == (5, 0, 1 / 16)


def test_mcnemar_five_to_one():
    # P(X <= 1) for X ~ Bin(6, 1/2) = (1 + 6) / 64; two-sided: 14 / 64
    only_arm, only_base, p = mcnemar_exact([True] * 5 + [False], [False] * 5 + [True])
    assert (only_arm, only_base) == (5, 1) and p == pytest.approx(14 / 64, rel=1e-12)


def test_mcnemar_without_discordant_items_is_one():
    assert mcnemar_exact([True, False], [True, False]) == (0, 0, 1.0)


def test_mcnemar_refuses_unpaired_vectors():
    with pytest.raises(ValueError, match="3 paired items for the arm, 2 for the baseline"):
        mcnemar_exact([True, True, False], [True, False])


@pytest.mark.parametrize("low, high, direction, verdict", [
    (1e-9, 5.0, "greater", "supported"),
    (0.0, 5.0, "greater", "not resolved"),  # an end at 0 holds 0
    (-5.0, 0.0, "greater", "not resolved"),
    (-5.0, -1e-9, "greater", "contradicted"),
    (-5.0, -1e-9, "less", "supported"),
    (-5.0, 0.0, "less", "not resolved"),
    (1e-9, 5.0, "less", "contradicted"),
    (-1.0, 1.0, "less", "not resolved"),
    (math.nan, math.nan, "greater", "not run"),
])
def test_interval_verdicts_at_their_edges(low, high, direction, verdict):
    assert interval_verdict(low, high, direction) == verdict


@pytest.mark.parametrize("p, difference, direction, verdict", [
    (1 / 32, 1.04, "greater", "supported"),  # 6 vs 0 discordant
    (1 / 16, 0.87, "greater", "not resolved"),  # 5 vs 0: one item short
    (0.05, 3.0, "greater", "not resolved"),  # p must fall below alpha
    (0.0499, 3.0, "greater", "supported"),
    (0.0499, -3.0, "greater", "contradicted"),
    (0.0499, -3.0, "less", "supported"),
    (0.0499, 3.0, "less", "contradicted"),
    (math.nan, 0.0, "less", "not run"),
])
def test_p_value_verdicts_at_their_edges(p, difference, direction, verdict):
    assert p_value_verdict(p, difference, direction) == verdict


def test_verdicts_refuse_an_unknown_direction():
    with pytest.raises(ValueError, match="direction 'up'"):
        interval_verdict(1.0, 2.0, "up")
    with pytest.raises(ValueError, match="direction 'up'"):
        p_value_verdict(0.01, 2.0, "up")
