"""The losses of VR-TTRL's Appendix C baselines, on logits that predict a completion's tokens
(models/families.py `completion_logits`) and a mask of the tokens that count. Pure torch: no model,
no trainer. Sums over tokens, as Appendix C writes every loss (Adam is blind to the scale; the
gradient clip is not).

- Tent (Wang et al. 2021; VR-TTRL C.1 "Tent-style entropy minimization"): the entropy of the
  model's distribution at each answer token, summed.
- MEMO (Zhang et al. 2022; VR-TTRL C.1 "MEMO-style consistency TTA"): over K augmented copies,
  (1/K) sum_k KL(p_k || p_bar) per answer token, p_bar the mean of the K distributions (VR-TTRL's
  formula; = H(p_bar) - mean_k H(p_k)); "marginal_entropy" is MEMO's own H(p_bar).
- SFT (VR-TTRL C.1 "SFT (single greedy / majority pseudo-label)"): - sum_t log p(y_t | x, y_<t)
  over the pseudo-label's tokens; the prompt never counts.
"""

from __future__ import annotations

import math

import torch

from ..rewards.grounding import answer_span

MEMO_FORMS = ("kl_to_mean", "marginal_entropy")


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of softmax(logits) over the last dimension, in fp32."""
    logp = logits.float().log_softmax(-1)
    return -(logp.exp() * logp).sum(-1)


def tent_loss(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sum over masked positions of H(p_t); logits (..., T, V), mask (..., T) of 0/1."""
    return (token_entropy(logits) * mask).sum()


def memo_loss(logits: torch.Tensor, mask: torch.Tensor, form: str = "kl_to_mean") -> torch.Tensor:
    """logits (K, T, V): the same answer positions under K augmented images; mask (T,).
    "kl_to_mean": sum_t (1/K) sum_k KL(p_k,t || p_bar_t) (VR-TTRL C.1); "marginal_entropy":
    sum_t H(p_bar_t) (MEMO's objective)."""
    if form not in MEMO_FORMS:
        raise ValueError(f"memo form must be one of {MEMO_FORMS}, got {form!r}")
    logp = logits.float().log_softmax(-1)
    log_mean = torch.logsumexp(logp, dim=0) - math.log(logp.shape[0])  # log p_bar, (T, V)
    if form == "marginal_entropy":
        per_token = -(log_mean.exp() * log_mean).sum(-1)
    else:
        per_token = (logp.exp() * (logp - log_mean)).sum(-1).mean(0)
    return (per_token * mask).sum()


def sft_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """- sum over masked positions of log softmax(logits)[target]; logits (..., T, V)."""
    logp = logits.float().log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return -(logp * mask).sum()


def answer_token_mask(text: str, offsets: list[tuple[int, int]]) -> list[int]:
    """1 for the tokens (character spans `offsets` of `text`) that overlap the structured answer,
    the JSON inside <answer></answer> (C.1: "the tokens corresponding to the structured answer
    (e.g., JSON fields)"); every token when the text has no answer (what the model said is all
    the answer there is)."""
    span = answer_span(text)
    if span is None or span[0] == span[1]:
        return [1] * len(offsets)
    first, last = span
    return [int(start < last and end > first) for start, end in offsets]
