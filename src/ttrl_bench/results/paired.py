"""Paired comparisons of two arms scored on the same items: the paired bootstrap (items resampled within
each stratum, a stratum being one seed of one cell), McNemar's exact test for accuracy on one seed, and the
verdict a claim gets from either.

A claim's difference is the mean over its cells (model x dataset, as the papers' "Avg" columns weigh
datasets equally) of the mean over the cell's seeds of the mean per-item difference `arm - baseline`, in
the metric's points. Seeds are strata, never resampled: the interval counts which items were drawn; how
far seeds move a run is reported beside it as the seed-to-seed spread, not folded into the interval.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

VERDICTS = ("supported", "contradicted", "not resolved", "not run")
DIRECTIONS = ("greater", "less")  # the claim: arm > baseline, or arm < baseline
ALPHA = 0.05  # a 95% interval; McNemar's two-sided test at the same level
# Every (chunk of) multinomial draw holds at most this many counts, so a 50,000-item ImageNet stratum of
# distinct per-item differences (gIoU) bootstraps in bounded memory.
_MAX_DRAW = 4_000_000


def resampled_means(diffs: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """`reps` bootstrap means of `diffs` (n items drawn with replacement). Drawn as multinomial counts over
    the distinct values, which is the same distribution as drawing item indices and, for accuracy (at most
    three distinct differences: -100, 0, +100), B x 3 numbers instead of B x n."""
    values, counts = np.unique(np.asarray(diffs, dtype=float), return_counts=True)
    n = int(counts.sum())
    chunk = max(1, _MAX_DRAW // len(values))
    means = [rng.multinomial(n, counts / n, size=min(chunk, reps - start)) @ values / n
             for start in range(0, reps, chunk)]
    return np.concatenate(means)


def paired_bootstrap(strata: Sequence[np.ndarray], weights: Sequence[float], reps: int = 2000, seed: int = 0,
                     level: float = 1 - ALPHA) -> tuple[float, float, float]:
    """(estimate, low, high): the weighted sum of the strata's mean differences and its percentile interval
    (numpy's default linear interpolation) over `reps` replicates, each stratum resampled on its own by one
    generator seeded with `seed` (the same call gives the same interval)."""
    if len(strata) != len(weights) or not len(strata):
        raise ValueError(f"paired bootstrap: {len(strata)} strata for {len(weights)} weights")
    if any(len(d) == 0 for d in strata):
        raise ValueError("paired bootstrap: a stratum without items")
    rng = np.random.default_rng(seed)
    estimate = float(sum(w * np.mean(d) for d, w in zip(strata, weights)))
    replicates = sum(w * resampled_means(d, reps, rng) for d, w in zip(strata, weights))
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return estimate, float(low), float(high)


def mcnemar_exact(arm: Sequence[bool], baseline: Sequence[bool]) -> tuple[int, int, float]:
    """(items only the arm got right, items only the baseline got right, two-sided exact p): McNemar's
    exact test is the binomial test of the discordant pairs against 1/2; p = 1 without any."""
    arm, baseline = np.asarray(arm, dtype=bool), np.asarray(baseline, dtype=bool)
    if arm.shape != baseline.shape:
        raise ValueError(f"McNemar: {arm.size} paired items for the arm, {baseline.size} for the baseline")
    only_arm, only_baseline = int((arm & ~baseline).sum()), int((~arm & baseline).sum())
    discordant = only_arm + only_baseline
    p = stats.binomtest(only_arm, discordant, 0.5).pvalue if discordant else 1.0
    return only_arm, only_baseline, float(p)


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}: expected one of {DIRECTIONS}")


def interval_verdict(low: float, high: float, direction: str) -> str:
    """supported: the interval excludes 0 on the claimed side; contradicted: on the other; not resolved:
    it holds 0 (an end at exactly 0 holds it); not run: no interval."""
    _check_direction(direction)
    if math.isnan(low) or math.isnan(high):
        return "not run"
    if low > 0:
        return "supported" if direction == "greater" else "contradicted"
    if high < 0:
        return "supported" if direction == "less" else "contradicted"
    return "not resolved"


def p_value_verdict(p: float, difference: float, direction: str, alpha: float = ALPHA) -> str:
    """The verdict of a two-sided test: below `alpha` (strictly) the sign of the difference decides it."""
    _check_direction(direction)
    if math.isnan(p):
        return "not run"
    if p >= alpha or difference == 0:
        return "not resolved"
    return "supported" if (difference > 0) == (direction == "greater") else "contradicted"
