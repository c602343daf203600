"""Reward audit: which advantages does each reward give GRPO?

SPEC.md asks the pipeline to surface one fact: TTRV's diversity term -alpha*H(P) is the same for
every completion of a group, so the group-mean subtraction of GRPO cancels it. Only the scale of
the advantages can change, and only when rewards are scaled by the batch std
(scale_rewards="batch"). This module computes advantages exactly as TRL does and tabulates them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .registry import get_reward

LETTERS = ["A", "B", "C", "D"]


def grpo_advantages(rewards: np.ndarray, num_generations: int, scale_rewards: str) -> np.ndarray:
    """TRL 1.16 GRPOTrainer (`_generate_and_score_completions`): centre on the group mean, divide
    by the group std ("group"), the batch std ("batch") or nothing ("none"); std is unbiased, eps 1e-4."""
    grouped = rewards.reshape(-1, num_generations)
    centred = (grouped - grouped.mean(axis=1, keepdims=True)).reshape(-1)
    if scale_rewards == "none":
        return centred
    if scale_rewards == "group":
        std = np.repeat(grouped.std(axis=1, ddof=1), num_generations)
    elif scale_rewards == "batch":
        std = np.full_like(rewards, rewards.std(ddof=1))
    else:
        raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', got {scale_rewards!r}")
    return centred / (std + 1e-4)


def sample_groups(n_groups: int, num_generations: int, seed: int, unparsable: float = 0.1) -> list[list]:
    """Answer groups as a VLM produces them on 4-way MCQ: each prompt has its own answer
    distribution (Dirichlet(0.5) over A-D), a share of outputs is unparsable (None)."""
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(n_groups):
        probs = rng.dirichlet([0.5] * 4) * (1 - unparsable)
        choices = rng.choice(5, size=num_generations, p=[*probs, unparsable])
        groups.append([LETTERS[c] if c < 4 else None for c in choices])
    return groups


def sample_object_groups(n_groups: int, num_generations: int, seed: int, unparsable: float = 0.1,
                         invalid: float = 0.05) -> list[list]:
    """Answer groups as a VLM produces them on referring grounding (one target): each prompt has
    a target box (sides 20-200 px) and its own spread (box corners jittered by N(0, s), s ~ U(2, 20)
    px); each completion's point is its box centre moved by N(0, box side / 3), so some points
    fall outside their own box; a share is unparsable (None), another gets an extra object without
    a point (invalid). Shares and spreads are the audit's assumptions, not measured values."""
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(n_groups):
        x, y = rng.uniform(0, 400, size=2)
        w, h = rng.uniform(20, 200, size=2)
        spread = rng.uniform(2, 20)
        group = []
        for _ in range(num_generations):
            if rng.random() < unparsable:
                group.append(None)
                continue
            x1, y1, x2, y2 = np.round([x, y, x + w, y + h] + rng.normal(0, spread, size=4)).tolist()
            px, py = np.round([(x1 + x2) / 2, (y1 + y2) / 2] + rng.normal(0, [w / 3, h / 3])).tolist()
            answer = [{"bbox_2d": [x1, y1, x2, y2], "point_2d": [px, py]}]
            if rng.random() < invalid:
                answer.append({"bbox_2d": [x1, y1, x2, y2]})
            group.append(answer)
        groups.append(group)
    return groups


def sample_uncertainties(groups: list[list], seed: int) -> list[list[float]]:
    """Per-completion uncertainties in [0, 1] for rewards that need them (DARE): Beta(2, 5), a
    skew towards confident completions as normalised token entropies show."""
    rng = np.random.default_rng(seed + 1)
    return [rng.beta(2, 5, size=len(g)).tolist() for g in groups]


def sample_token_statistics(uncertainties: list[float]) -> dict:
    """The policy's view for rewards that need token log-probs (`needs_logprobs`), made from the sampled
    uncertainties u: each completion 4 tokens, each sampled with probability 1 - u at entropy u nats."""
    return {"token_logprobs": [[math.log(1.0 - x)] * 4 for x in uncertainties],
            "token_entropies": [[x] * 4 for x in uncertainties]}


def _score(groups: list[list], rewards: dict[str, dict], seed: int) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """Each named reward on every group: the flat rewards, and the mean over groups of each
    convention count the reward keeps (`Reward.last_stats`)."""
    if any(len(g) != len(groups[0]) for g in groups):
        raise ValueError("all groups must have the same number of completions")
    uncertainties = sample_uncertainties(groups, seed)
    flat, conventions = {}, {}
    for name, spec in rewards.items():
        params = {k: v for k, v in spec.get("params", {}).items() if k != "uncertainty"}  # how u is made
        reward = get_reward(spec["reward"], **params)
        values, stats = [], []
        for g, u in zip(groups, uncertainties):
            extra = {"uncertainties": u} if reward.needs_uncertainty else {}
            extra |= sample_token_statistics(u) if getattr(reward, "needs_logprobs", False) else {}
            values.extend(reward(g, **extra))
            stats.append(reward.last_stats)
        flat[name] = np.array(values, dtype=float)
        conventions[name] = pd.DataFrame(stats).mean().to_dict() if stats and stats[0] else {}
    return flat, conventions


def rewards_by_method(groups: list[list], rewards: dict[str, dict], seed: int = 0) -> dict[str, np.ndarray]:
    """The flattened batch of rewards each named reward gives the same groups."""
    return _score(groups, rewards, seed)[0]


def audit(groups: list[list], rewards: dict[str, dict], scales=("group", "batch", "none"),
          reference: str = "ttrv-no-diversity") -> pd.DataFrame:
    """Per reward and scaling: advantage statistics and the largest difference from the
    advantages of `reference` (TTRV's frequency term alone): 0 means the rest of the reward
    changes nothing in the update. Plus, per reward, how often each convention touched a
    completion (convention_*) and changed its reward (changed_by_*; registry.Reward)."""
    n = len(groups[0])
    flat, conventions = _score(groups, rewards, seed=0)
    rows = []
    for name, values in flat.items():
        for scale in scales:
            adv = grpo_advantages(values, n, scale)
            row = {"method": name, "scale_rewards": scale, "reward_mean": values.mean(),
                   "advantage_std": adv.std(), "advantage_abs_max": np.abs(adv).max()}
            if reference in flat:
                row[f"max_abs_diff_vs_{reference}"] = np.abs(adv - grpo_advantages(flat[reference], n, scale)).max()
            rows.append({**row, **conventions[name]})
    return pd.DataFrame(rows)
