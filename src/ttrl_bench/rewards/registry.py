"""Rewards by name, so methods and configs name them (`reward: ttrv`, `reward_params: {...}`).

`get_reward(name, **params)` returns a function from one group's parsed answers to its rewards.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from functools import partial

from . import grounding, voting
from .t3rl import T3RLReward

GroupReward = Callable[[Sequence[voting.Answer]], list[float]]


def _seeded_random(seed: int = 0) -> GroupReward:
    """Each group draws from its own seed (seed, seed + 1, ...), so groups differ but reruns match."""
    groups = itertools.count(seed)
    return lambda answers: voting.random_reward(answers, seed=next(groups))


def _dare(alpha: float = 0.5, tau: float = 0.05, eps: float = 1e-8):
    """DARE needs each completion's uncertainty: the caller passes `uncertainties=`."""
    reward = partial(voting.dare, alpha=alpha, tau=tau, eps=eps)
    reward.needs_uncertainty = True
    return reward


def _consensus(thresholds: str = "base", anti: bool = False) -> GroupReward:
    """VR-TTRL consensus on parsed object lists; `thresholds` names a VR-TTRL Table 9 setting."""
    if thresholds not in grounding.THRESHOLDS:
        raise TypeError(f"thresholds must be one of {sorted(grounding.THRESHOLDS)}, got {thresholds!r}")
    return lambda answers: grounding.consensus(answers, grounding.THRESHOLDS[thresholds], anti=anti)[1]


_FACTORIES: dict[str, Callable[..., GroupReward]] = {
    "majority_vote": lambda: voting.majority_vote,
    "ttrv": lambda alpha=0.75, entropy="paper": partial(voting.ttrv, alpha=alpha, entropy=entropy),
    "ttrv_frequency_only": lambda: voting.ttrv_frequency_only,
    "ttrv_diversity_only": lambda alpha=0.75, entropy="paper": partial(
        voting.ttrv_diversity_only, alpha=alpha, entropy=entropy
    ),
    "random": _seeded_random,
    "dare": _dare,
    "vr_ttrl_consensus": _consensus,
    "t3rl": T3RLReward,
}

REWARD_NAMES = tuple(_FACTORIES)


def get_reward(name: str, **params) -> GroupReward:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise KeyError(f"unknown reward {name!r}; known: {', '.join(REWARD_NAMES)}") from None
    try:
        return factory(**params)
    except TypeError as err:
        raise TypeError(f"reward {name!r}: bad reward_params {params}: {err}") from None
