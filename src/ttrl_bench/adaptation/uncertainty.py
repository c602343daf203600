"""Per-completion uncertainty for DARE: the mean token entropy of each completion under the current
policy (SPEC.md, DARE: "a forward pass of the policy"), and its normalisation to [0, 1].

The forward is the families' one teacher-forced forward (models/families.py `completion_logits`),
a micro-batch of completions at a time. Nothing here knows a model family.
"""

from __future__ import annotations

import math

import torch

from ..models.families import completion_logits
from .losses import token_entropy


@torch.no_grad()
def completion_entropies(model, processor, prompt_text: str, image, completion_ids: list[list[int]],
                         system: str | None = None, micro_batch: int = 8) -> list[float]:
    """Mean token entropy (nats) of each completion of one prompt; 0.0 for an empty completion."""
    result: list[float] = []
    for start in range(0, len(completion_ids), micro_batch):
        chunk = completion_ids[start : start + micro_batch]
        logits = completion_logits(model, processor, prompt_text, [image] * len(chunk), chunk, system)
        entropy = token_entropy(logits)  # (m, longest)
        result += [float(entropy[i, : len(ids)].mean()) if len(ids) else 0.0 for i, ids in enumerate(chunk)]
    return result


def normalise_uncertainty(entropies: list[float], vocab_size: int, how: str) -> list[float]:
    """Entropies (nats) -> [0, 1], as DARE's bonus (1 - u) needs: "vocab" divides by log |V|
    (the maximum entropy of one token), "minmax" rescales within the group."""
    if how == "vocab":
        return [min(1.0, h / math.log(vocab_size)) for h in entropies]
    if how == "minmax":
        lo, hi = min(entropies), max(entropies)
        return [0.0 if hi == lo else (h - lo) / (hi - lo) for h in entropies]
    raise ValueError(f"uncertainty normalisation must be 'vocab' or 'minmax', got {how!r}")
