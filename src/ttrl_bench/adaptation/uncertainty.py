"""Per-completion uncertainty for DARE: the mean token entropy of each completion under the current
policy (SPEC.md, DARE: "a forward pass of the policy"), and its normalisation to [0, 1]; and, from the
same forward, each sampled token's log-probability and entropy for rewards that declare `needs_logprobs`
(rewards/registry.py, docs/extending.md).

The forward is the families' one teacher-forced forward (models/families.py `completion_logits`),
a micro-batch of completions at a time. Nothing here knows a model family.
"""

from __future__ import annotations

import math

import torch

from ..models.families import completion_logits
from .losses import token_entropy


@torch.no_grad()
def completion_token_statistics(model, processor, prompt_text: str, image, completion_ids: list[list[int]],
                                system: str | None = None, micro_batch: int = 8) -> tuple[list[list[float]], list[list[float]]]:
    """Per completion of one prompt, per token: the log-probability (nats) of the token sampled and the
    entropy (nats) of the policy's distribution there, at temperature 1 (the policy's own, not the
    sampling temperature's); empty lists for an empty completion."""
    logprobs: list[list[float]] = []
    entropies: list[list[float]] = []
    for start in range(0, len(completion_ids), micro_batch):
        chunk = completion_ids[start : start + micro_batch]
        logits = completion_logits(model, processor, prompt_text, [image] * len(chunk), chunk, system)
        entropy = token_entropy(logits)  # (m, longest)
        tokens = torch.tensor([ids + [0] * (logits.shape[1] - len(ids)) for ids in chunk], device=logits.device)
        sampled = logits.float().log_softmax(-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        logprobs += [sampled[i, : len(ids)].tolist() for i, ids in enumerate(chunk)]
        entropies += [entropy[i, : len(ids)].tolist() for i, ids in enumerate(chunk)]
    return logprobs, entropies


def completion_entropies(model, processor, prompt_text: str, image, completion_ids: list[list[int]],
                         system: str | None = None, micro_batch: int = 8) -> list[float]:
    """Mean token entropy (nats) of each completion of one prompt; 0.0 for an empty completion."""
    entropies = completion_token_statistics(model, processor, prompt_text, image, completion_ids, system, micro_batch)[1]
    return [sum(e) / len(e) if e else 0.0 for e in entropies]


def normalise_uncertainty(entropies: list[float], vocab_size: int, how: str) -> list[float]:
    """Entropies (nats) -> [0, 1], as DARE's bonus (1 - u) needs: "vocab" divides by log |V|
    (the maximum entropy of one token), "minmax" rescales within the group."""
    if how == "vocab":
        return [min(1.0, h / math.log(vocab_size)) for h in entropies]
    if how == "minmax":
        lo, hi = min(entropies), max(entropies)
        return [0.0 if hi == lo else (h - lo) / (hi - lo) for h in entropies]
    raise ValueError(f"uncertainty normalisation must be 'vocab' or 'minmax', got {how!r}")
