"""Label-free rewards on one group: the N completions of one prompt, parsed to answers.

Pure functions: no torch, no trainer. `answers[i]` is completion i's parsed answer (any hashable
value) or None when it could not be parsed. Every function returns one float per completion.

Unparsable completions (None) are never rewarded for agreeing with each other: they count in
N (the group size) but never become a pseudo-label and get no frequency reward.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Sequence

Answer = Hashable | None


def answer_counts(answers: Sequence[Answer]) -> Counter:
    """n(a) for every parsed answer a, in order of first appearance (Counter keeps insertion order)."""
    return Counter(a for a in answers if a is not None)


def majority_answer(answers: Sequence[Answer]) -> Answer:
    """TTRL's pseudo-label (Zuo et al. 2025): the most frequent parsed answer.

    Ties go to the tied answer that appears first in the group, a rule that depends only on the
    group itself. None when nothing parsed.
    """
    counts = answer_counts(answers)
    if not counts:
        return None
    top = max(counts.values())
    return next(a for a in counts if counts[a] == top)


def majority_vote(answers: Sequence[Answer]) -> list[float]:
    """TTRL baseline (TTRV Table 3): r_i = 1 if a_i equals the majority answer, else 0."""
    label = majority_answer(answers)
    return [1.0 if a is not None and a == label else 0.0 for a in answers]


def answer_entropy(answers: Sequence[Answer]) -> float:
    """H(P) in nats of the empirical distribution of outcomes, unparsable outputs pooled into one
    outcome (they are outputs the model produced, and they spread its distribution)."""
    n = len(answers)
    if n == 0:
        return 0.0
    counts = Counter(answers)
    return -sum(c / n * math.log(c / n) for c in counts.values())


def ttrv(answers: Sequence[Answer], alpha: float = 0.75, entropy: str = "paper") -> list[float]:
    """TTRV (papers/ttrv.txt Section 3.2): frequency reward + alpha * diversity control.

    entropy="paper":      r_i = p(a_i) - alpha * H(P),  p(a) = n(a) / N  (Eq. 5-7)
    entropy="normalized": r_i = p(a_i) - alpha * H(P) / log(M), M = number of distinct outcomes,
                          0 when M == 1 (authors' code, verl/utils/reward_score/ttrl/ttt_metrics.py)

    The diversity term is the same for every completion of a group, so GRPO's group-mean
    subtraction cancels it exactly (see `rewards.audit`).
    """
    if entropy not in ("paper", "normalized"):
        raise ValueError(f"ttrv entropy must be 'paper' or 'normalized', got {entropy!r}")
    n = len(answers)
    counts = answer_counts(answers)
    h = answer_entropy(answers)
    if entropy == "normalized":
        distinct = len(set(answers))
        h = h / math.log(distinct) if distinct > 1 else 0.0
    return [(counts[a] / n if a is not None else 0.0) - alpha * h for a in answers]


def ttrv_frequency_only(answers: Sequence[Answer]) -> list[float]:
    """TTRV ablation "w/o diversity" (Table 4): r_i = p(a_i)."""
    return ttrv(answers, alpha=0.0)


def ttrv_diversity_only(answers: Sequence[Answer], alpha: float = 0.75, entropy: str = "paper") -> list[float]:
    """TTRV ablation "w/o frequency" (Table 4): r_i = -alpha * H(P)."""
    full = ttrv(answers, alpha=alpha, entropy=entropy)
    frequency = ttrv(answers, alpha=0.0)
    return [f - p for f, p in zip(full, frequency)]


def random_reward(answers: Sequence[Answer], seed: int) -> list[float]:
    """Random reward (TTRV Table 5, after Shao et al. 2025): r_i ~ Bernoulli(0.5), seeded."""
    rng = random.Random(seed)
    return [1.0 if rng.random() < 0.5 else 0.0 for _ in answers]


def dare(
    answers: Sequence[Answer],
    uncertainties: Sequence[float],
    alpha: float = 0.5,
    tau: float = 0.05,
    eps: float = 1e-8,
) -> list[float]:
    """DARE (papers/dare-summary.txt): uncertainty-aware distribution reward + exploration bonus,
    with distribution pruning.

    u(a)      = mean uncertainty (in [0, 1]) of the completions whose answer is a
    p_hat(a)  = [n(a) / (u(a) + eps)] / sum_b [n(b) / (u(b) + eps)]
    pruning   : answers with p_hat < tau are dropped, p_hat renormalised over the survivors
    bonus     : b(a) = (1 - n(a) / N') * (1 - u(a)), N' = completions whose answer survived
    r_i       = p_tilde(a_i) + alpha * b(a_i); pruned and unparsable completions get 0.

    alpha = 0.5 and tau = 0.05 are our defaults: the summary gives no values (SPEC.md).
    """
    if len(uncertainties) != len(answers):
        raise ValueError(f"dare: {len(answers)} answers but {len(uncertainties)} uncertainties")
    bad = [u for u in uncertainties if not 0.0 <= u <= 1.0]
    if bad:
        raise ValueError(f"dare: uncertainties must be normalised to [0, 1], got {bad[:3]}")
    counts = answer_counts(answers)
    if not counts:
        return [0.0] * len(answers)
    u = {a: sum(x for b, x in zip(answers, uncertainties) if b == a) / counts[a] for a in counts}
    weight = {a: counts[a] / (u[a] + eps) for a in counts}
    total = sum(weight.values())
    survivors = {a: w for a, w in weight.items() if w / total >= tau}
    surviving_total = sum(survivors.values())
    n_surviving = sum(counts[a] for a in survivors)
    rewards = []
    for a in answers:
        if a not in survivors:
            rewards.append(0.0)
            continue
        p_tilde = survivors[a] / surviving_total
        bonus = (1.0 - counts[a] / n_surviving) * (1.0 - u[a])
        rewards.append(p_tilde + alpha * bonus)
    return rewards
