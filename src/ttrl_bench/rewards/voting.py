"""Label-free rewards on one group: the N completions of one prompt, parsed to answers.

Pure functions: no torch, no trainer. `answers[i]` is completion i's parsed answer (any hashable
value) or None when it could not be parsed. Every function returns one float per completion.

Unparsable completions, `unparsable=` (TTRV's and TTRL's papers are silent on them):
  "answer" (default) - as the authors' code treats them (Akshit21112002/TTRV and PRIME-RL/TTRL,
      verl/utils/reward_score/ttrl/ttt_metrics.py, `test_time_train_metrics`): `auto_extract`
      turns a failed extraction into "", which is then one more answer value: it has a frequency
      (`reward_p`), it can win `counter.most_common(1)` and become the pseudo-label, and it counts
      among the outcomes of the entropy and of its normaliser log(len(counter)).
  "no_reward" - this project's earlier convention: an unparsable completion counts in N but never
      becomes the pseudo-label and gets no frequency reward (the entropy still pools it as one outcome).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Sequence

Answer = Hashable | None


UNPARSABLE = ("answer", "no_reward")


def _check_unparsable(unparsable: str) -> None:
    if unparsable not in UNPARSABLE:
        raise ValueError(f"unparsable must be one of {UNPARSABLE}, got {unparsable!r}")


def answer_counts(answers: Sequence[Answer], unparsable: str = "answer") -> Counter:
    """n(a) for every answer value a, in order of first appearance (Counter keeps insertion
    order); None is a value unless unparsable="no_reward"."""
    _check_unparsable(unparsable)
    return Counter(a for a in answers if a is not None or unparsable == "answer")


def majority_answer(answers: Sequence[Answer], unparsable: str = "answer") -> Answer:
    """TTRL's pseudo-label (Zuo et al. 2025): the most frequent answer value. Follows
    PRIME-RL/TTRL ttt_metrics.py `test_time_train_metrics`: `Counter.most_common(1)`, so ties go
    to the tied answer seen first, and None (the authors' "") can win. With
    unparsable="no_reward", None only when nothing parsed."""
    counts = answer_counts(answers, unparsable)
    if not counts:
        return None
    top = max(counts.values())
    return next(a for a in counts if counts[a] == top)


def majority_vote(answers: Sequence[Answer], unparsable: str = "answer") -> list[float]:
    """TTRL baseline (TTRV Table 3): r_i = 1 if a_i equals the majority answer, else 0. Follows
    PRIME-RL/TTRL ttt_metrics.py: `auto_verify` against the estimated label, and grade_answer("", "")
    is True, so when unparsable outputs are the majority they are the ones rewarded."""
    label = majority_answer(answers, unparsable)
    if label is None and unparsable == "no_reward":  # nothing parsed
        return [0.0] * len(answers)
    return [1.0 if a == label else 0.0 for a in answers]


def answer_entropy(answers: Sequence[Answer]) -> float:
    """H(P) in nats of the empirical distribution of outcomes, unparsable outputs pooled into one
    outcome (they are outputs the model produced, and they spread its distribution)."""
    n = len(answers)
    if n == 0:
        return 0.0
    counts = Counter(answers)
    return -sum(c / n * math.log(c / n) for c in counts.values())


def ttrv(answers: Sequence[Answer], alpha: float = 0.75, entropy: str = "paper",
         unparsable: str = "answer") -> list[float]:
    """TTRV (arXiv 2510.06783 Section 3.2): frequency reward + alpha * diversity control.

    entropy="paper":      r_i = p(a_i) - alpha * H(P),  p(a) = n(a) / N  (Eq. 5-7)
    entropy="normalized": r_i = p(a_i) - alpha * H(P) / log(M), M = number of distinct outcomes
                          (None one of them), 0 when M == 1 or N == 1: Akshit21112002/TTRV
                          ttt_metrics.py `test_time_train_metrics` (`rewards_en`, alpha fixed 0.75
                          there)

    p(None) = n(None) / N with unparsable="answer" (the authors' `reward_p`), 0 with "no_reward".
    The diversity term is the same for every completion of a group, so GRPO's group-mean
    subtraction cancels it exactly (see `rewards.audit`).
    """
    if entropy not in ("paper", "normalized"):
        raise ValueError(f"ttrv entropy must be 'paper' or 'normalized', got {entropy!r}")
    n = len(answers)
    counts = answer_counts(answers, unparsable)
    h = answer_entropy(answers)
    if entropy == "normalized":
        distinct = len(set(answers))
        h = h / math.log(distinct) if distinct > 1 else 0.0
    return [counts[a] / n - alpha * h for a in answers]


def ttrv_frequency_only(answers: Sequence[Answer], unparsable: str = "answer") -> list[float]:
    """TTRV ablation "w/o diversity" (Table 4): r_i = p(a_i)."""
    return ttrv(answers, alpha=0.0, unparsable=unparsable)


def ttrv_diversity_only(answers: Sequence[Answer], alpha: float = 0.75, entropy: str = "paper") -> list[float]:
    """TTRV ablation "w/o frequency" (Table 4): r_i = -alpha * H(P); the same for either
    `unparsable` convention, since H counts None as an outcome in both."""
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
    """DARE (arXiv 2601.21804): uncertainty-aware distribution reward + exploration bonus,
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
    counts = answer_counts(answers, "no_reward")  # the summary gives unparsable answers no mass
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
