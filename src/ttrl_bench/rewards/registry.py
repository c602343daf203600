"""Rewards by name, so methods and configs name them (`reward: ttrv`, `reward_params: {...}`).

`get_reward(name, **params)` returns a `Reward`: a function from one group's parsed answers to
its rewards that also keeps, in `last_stats`, how often each convention touched that group:
  convention_<what>   share of completions a convention applies to (e.g. point_outside_box)
  changed_by_<param>  share of completions whose reward changes when reward param <param> takes
                      its other value (the authors' convention <-> the documented departure)
The training log and the reward audit report them.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Sequence
from functools import partial

from . import grounding, voting
from .t3rl import T3RLReward

GroupRewardFn = Callable[..., list[float]]


class Reward:
    """A group reward plus its convention counts for the last group it scored."""

    def __init__(self, fn: GroupRewardFn, counts: Callable[[Sequence], dict] | None = None,
                 alternatives: dict[str, GroupRewardFn] | None = None, needs_uncertainty: bool = False,
                 format_params: dict | None = None, needs_gold: bool = False, unparsable: str = "answer",
                 needs_logprobs: bool = False):
        self.fn = fn
        # may an unparsable answer be the group's pseudo-label (voting.py's conventions; the train log's)
        self.unparsable = unparsable
        self.needs_gold = needs_gold  # called with gold= and score= (the task's): a supervised reward
        self.counts = counts
        self.alternatives = alternatives or {}  # param name -> the same reward with its other value
        self.needs_uncertainty = needs_uncertainty  # called with uncertainties=: DARE's normalised entropy
        # called with token_logprobs= and token_entropies=: per completion, per sampled token, nats (the hooks'
        # table: docs/extending.md)
        self.needs_logprobs = needs_logprobs
        self.format_params = format_params or {}  # for the task's format rewards (VR-TTRL non-repeat)
        self.last_stats: dict[str, float] = {}

    def __call__(self, answers: Sequence, **kwargs) -> list[float]:
        rewards = self.fn(answers, **kwargs)
        n = max(len(answers), 1)
        stats = {f"convention_{k}": v for k, v in (self.counts(answers) if self.counts else {}).items()}
        for name, other in self.alternatives.items():
            changed = sum(abs(a - b) > 1e-12 for a, b in zip(rewards, other(answers, **kwargs)))
            stats[f"changed_by_{name}"] = changed / n
        self.last_stats = stats
        return rewards


def _unparsable_counts(answers: Sequence) -> dict:
    return {"unparsable": sum(a is None for a in answers) / max(len(answers), 1)}


def _voting(fn, unparsable: str, **params) -> Reward:
    """A voting reward with the TTRV/TTRL `unparsable` convention (voting.py) and its flip."""
    voting._check_unparsable(unparsable)
    other = "no_reward" if unparsable == "answer" else "answer"
    return Reward(partial(fn, unparsable=unparsable, **params), _unparsable_counts,
                  {"unparsable": partial(fn, unparsable=other, **params)}, unparsable=unparsable)


def _seeded_random(seed: int = 0) -> Reward:
    """Each group draws from its own seed (seed, seed + 1, ...), so groups differ but reruns match."""
    groups = itertools.count(seed)
    return Reward(lambda answers: voting.random_reward(answers, seed=next(groups)))


def _dare(alpha: float = 0.5, tau: float = 0.05, eps: float = 1e-8) -> Reward:
    """DARE needs each completion's uncertainty: the caller passes `uncertainties=`."""
    return Reward(partial(voting.dare, alpha=alpha, tau=tau, eps=eps), _unparsable_counts, needs_uncertainty=True,
                  unparsable="no_reward")  # unparsable answers get no mass


def _consensus(thresholds: str = "base", anti: bool = False, pixel_iou: bool = True, point_in_box: bool = True,
               point_distance: str = "euclidean", invalid_object: str = "zero_answer",
               non_repeat: str = "output") -> Reward:
    """VR-TTRL consensus on parsed object lists; `thresholds` names a VR-TTRL Table 9 setting, the
    other params are grounding.Conventions fields; `non_repeat` is the scope of the format
    reward's non-repeat check (grounding.non_repeat_reward), applied by the task."""
    if thresholds not in grounding.THRESHOLDS:
        raise TypeError(f"thresholds must be one of {sorted(grounding.THRESHOLDS)}, got {thresholds!r}")
    if non_repeat not in ("output", "thinking"):
        raise TypeError(f"non_repeat must be 'output' or 'thinking', got {non_repeat!r}")
    limits = grounding.THRESHOLDS[thresholds]
    conventions = grounding.Conventions(pixel_iou, point_in_box, point_distance, invalid_object)

    def score(with_conventions):
        return lambda answers: grounding.consensus(answers, limits, anti=anti, conventions=with_conventions)[1]

    alternatives = {name: score(grounding.flipped(conventions, name)) for name in grounding.DEPARTURES}
    return Reward(score(conventions), grounding.convention_counts, alternatives,
                  format_params={"non_repeat": non_repeat})


def gold_match(answers: Sequence, gold, score: Callable) -> list[float]:
    """Binary reward against the ground-truth answer (RLVR's GRPO, the supervised row of ECHO Table 12):
    1 where the task scores the parsed answer fully correct, 0 otherwise (unparsable included; the
    authors' ttrl_math compute_score gives an answer without \\boxed{} 0)."""
    return [1.0 if a is not None and score(a, gold) >= 1.0 else 0.0 for a in answers]


_FACTORIES: dict[str, Callable[..., Reward]] = {
    "majority_vote": lambda unparsable="answer": _voting(voting.majority_vote, unparsable),
    "ttrv": lambda alpha=0.75, entropy="paper", unparsable="answer": _voting(
        voting.ttrv, unparsable, alpha=alpha, entropy=entropy),
    "ttrv_frequency_only": lambda unparsable="answer": _voting(voting.ttrv_frequency_only, unparsable),
    "ttrv_diversity_only": lambda alpha=0.75, entropy="paper": Reward(
        partial(voting.ttrv_diversity_only, alpha=alpha, entropy=entropy), _unparsable_counts),
    "random": _seeded_random,
    "dare": _dare,
    "vr_ttrl_consensus": _consensus,
    "t3rl": T3RLReward,
    "gold": lambda: Reward(gold_match, _unparsable_counts, needs_gold=True),
}

REWARD_NAMES = tuple(_FACTORIES)


def register_reward(name: str, factory: Callable[..., Reward]) -> None:
    """A new reward by name (docs/extending.md): `factory(**reward_params)` returns a Reward, e.g. a voting
    function wrapped by `_voting` for the `unparsable` convention."""
    global REWARD_NAMES
    if name in _FACTORIES:
        raise ValueError(f"reward {name!r} is registered already")
    _FACTORIES[name] = factory
    REWARD_NAMES = tuple(_FACTORIES)


def reward_parameters(name: str) -> list[str]:
    """The `reward_params` a reward accepts."""
    return list(inspect.signature(_FACTORIES[name]).parameters)


def get_reward(name: str, **params) -> Reward:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise KeyError(f"unknown reward {name!r}; known: {', '.join(REWARD_NAMES)}") from None
    try:
        return factory(**params)
    except (TypeError, ValueError) as err:
        raise TypeError(f"reward {name!r}: bad reward_params {params}: {err}") from None
