"""The two answers a single-sample method takes from the model as it is, shared by VR-TTRL's
per-sample loop (per_sample.py: the prediction after adaptation, and the vote-only baseline's
prediction) and Appendix C's baselines (baselines.py: the pseudo-answer they train on):
`predict_greedy`, one greedy completion, and `consensus_vote`, VR-TTRL's consensus of N rollouts."""

from __future__ import annotations

import torch

from ..generation.hf import generate_greedy, generate_samples
from ..rewards import grounding


def predict_greedy(model, processor, row: dict, image, max_new_tokens: int) -> str:
    return generate_greedy(model, processor, [row["prompt"]], [image], max_new_tokens, 1,
                           systems=[row.get("system")], progress=False)[0]


def consensus_vote(model, processor, row: dict, image, hp: dict, reward_params: dict, seed: int) -> str:
    """Vote-only: the consensus completion of N rollouts (with the method's thresholds and reward
    conventions) is the prediction."""
    torch.manual_seed(seed)
    texts = generate_samples(model, processor, row["prompt"], image, hp["num_generations"], hp["temperature"],
                             hp["max_completion_length"], system=row.get("system"))
    label, _ = grounding.consensus([grounding.parse_objects(t) for t in texts],
                                   grounding.THRESHOLDS[reward_params.get("thresholds", "base")],
                                   conventions=grounding.Conventions.from_params(reward_params))
    return texts[label]
