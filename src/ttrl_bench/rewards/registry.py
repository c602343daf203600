"""Rewards by name, so methods and configs name them (`reward: ttrv`, `reward_params: {...}`).

`get_reward(name, **params)` returns a function from one group's parsed answers to its rewards.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from functools import partial

from . import voting

GroupReward = Callable[[Sequence[voting.Answer]], list[float]]


def _seeded_random(seed: int = 0) -> GroupReward:
    """Each group draws from its own seed (seed, seed + 1, ...), so groups differ but reruns match."""
    groups = itertools.count(seed)
    return lambda answers: voting.random_reward(answers, seed=next(groups))


_FACTORIES: dict[str, Callable[..., GroupReward]] = {
    "majority_vote": lambda: voting.majority_vote,
    "ttrv": lambda alpha=0.75, entropy="paper": partial(voting.ttrv, alpha=alpha, entropy=entropy),
    "ttrv_frequency_only": lambda: voting.ttrv_frequency_only,
    "ttrv_diversity_only": lambda alpha=0.75, entropy="paper": partial(
        voting.ttrv_diversity_only, alpha=alpha, entropy=entropy
    ),
    "random": _seeded_random,
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
