"""ECHO's update rule (ECHO: Entropy-Confidence Hybrid Optimization for Test-Time Reinforcement Learning,
arXiv 2602.02150, Sections 3.2-3.4): entropy-confidence hybrid token advantages and a confidence-adaptive
clip range, as the authors' code computes them (user683/ECHO @6f7b311,
verl/verl/trainer/ppo/core_algos.py `apply_hybrid_advantage_shaping`, defaults in
verl/verl/trainer/config/ppo_trainer.yaml `algorithm.hybrid_adv`).

  A_it  = A_i * (1 + mult_coeff * S_it)                                            (Eq. 17)
  S_it  = clamp(alpha * z(H_it) + beta * z(1 - C_it), -s_max, s_max)              (Eq. 16)
  eps_i = eps_min + (eps_max - eps_min) * sigmoid(kappa * (1 - C_tail_i))          (Eq. 14)

H_it is the token entropy and C_it the token confidence, both from the temperature-scaled logits of
the policy that sampled the rollouts (the authors' `compute_log_prob` pass). Which confidence is a
named option (hyper-parameter `token_confidence`), because the paper and the shipped scripts differ:
  - "top_k" (the `clean` protocol, the paper's reading: "C_it ... the token-level top-k confidence
    computed from the logits", Section 3.3 under Eq. 16): the mean probability of the k = 5 most likely
    tokens (dp_actor.py `_compute_topk_confidence`). That path runs only without remove-padding
    (dp_actor.py:266-274).
  - "sampled" (the `authors` protocol): the probability of the sampled token. Every shipped script sets
    `actor_rollout_ref.model.use_remove_padding=True` (verl/examples/ttrl_echo/Qwen2.5/*.sh:53), whose
    forward (dp_actor.py:114-242) computes no confidence, and `compute_log_prob` then falls back to
    exp(log-prob of the sampled token) (dp_actor.py:387-390).
  The two give different clips: five probabilities sum to at most 1, so the top-5 mean is at most 0.2,
  C_tail <= 0.2 and eps >= 0.05 + 0.15 sigmoid(3.2) = 0.194 (the clip stays in [0.194, 0.2): all but
  fixed); the sampled token's probability spans (0, 1], so eps spans [0.125, 0.2) (0.125 at C_tail = 1).
z is verl's `masked_whiten`: one mean and one unbiased variance over every completion token of the
training batch (all prompts, all trained rollouts), not per completion. C_tail_i is the plain mean of C
over the last `tail_window` (16) tokens of completion i (core_algos.py `_compute_tail_confidence`;
Eq. 13's second smoothing is not in the code). The tree rollout of Section 3.1 is off in the authors'
example scripts (verl/examples/ttrl_echo/*/*.sh: `actor_rollout_ref.rollout.deepconf.enable=False`), so
it is not built.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# The token confidence C_it (module docstring): the paper's top-k mean or the sampled token's probability,
# which the authors' shipped scripts compute (hyper-parameter `token_confidence`; plan/protocols.py).
TOKEN_CONFIDENCES = ("top_k", "sampled")


def _identity(t: torch.Tensor) -> torch.Tensor:
    return t


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, reduce: Callable = _identity) -> torch.Tensor:
    """(x - mean) / sqrt(var + 1e-8) with the mean and the unbiased (n - 1) variance over the masked
    entries: verl torch_functional.py `masked_whiten` / `masked_var(unbiased=True)`. `reduce` sums
    the statistics over processes, so the whole training batch is one population, as on the authors'
    driver."""
    m = mask.to(torch.float64)
    x = values.to(torch.float64)
    n, total, squares = reduce(torch.stack([m.sum(), (x * m).sum(), (x * x * m).sum()]))
    if n < 2:
        raise ValueError(f"masked_whiten needs at least 2 completion tokens, got {int(n)}")
    mean = total / n
    var = (squares - n * mean * mean) / (n - 1)
    return ((x - mean) * torch.rsqrt(var.clamp(min=0) + 1e-8)).to(values.dtype)


def check_token_confidence(which: str) -> str:
    if which not in TOKEN_CONFIDENCES:
        raise ValueError(f"adaptation.hyperparameters.<task>.token_confidence = {which!r}; known: "
                         f"{', '.join(TOKEN_CONFIDENCES)}")
    return which


def token_statistics(logits: torch.Tensor, token_ids: torch.Tensor, top_k: int = 5, confidence: str = "top_k"):
    """Per position of (B, T, V) already temperature-scaled logits: the log-probability of `token_ids`,
    the entropy, and the confidence: the mean probability of the `top_k` most likely tokens (dp_actor.py
    `_compute_topk_confidence`) or, `confidence` "sampled", the probability of `token_ids` itself (the
    remove-padding fallback, dp_actor.py:387-390)."""
    check_token_confidence(confidence)
    logp = torch.log_softmax(logits.float(), dim=-1)
    token_logps = logp.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    if confidence == "sampled":
        return token_logps, entropy, token_logps.exp().clamp(0.0, 1.0)
    # at least one token, at most the vocabulary (dp_actor.py:281 clamps both ways)
    confidence = logp.topk(max(1, min(top_k, logp.size(-1))), dim=-1).values.exp().mean(-1).clamp(0.0, 1.0)
    return token_logps, entropy, confidence


def hybrid_advantages(advantages: torch.Tensor, entropy: torch.Tensor, confidence: torch.Tensor, mask: torch.Tensor,
                      alpha: float = 1.0, beta: float = 1.0, s_max: float | None = 2.0, mult_coeff: float = 0.1,
                      reduce: Callable = _identity) -> torch.Tensor:
    """(B, T) token advantages A_i * (1 + mult_coeff * S_it) from the (B,) sequence advantages,
    zero on padding (core_algos.py `apply_hybrid_advantage_shaping`, its additive variant off:
    add_coeff 0.0 in the authors' config)."""
    mask = mask.to(entropy.dtype)
    inverse_confidence = 1.0 - confidence.clamp(0.0, 1.0)
    score = alpha * masked_whiten(entropy, mask, reduce) + beta * masked_whiten(inverse_confidence, mask, reduce)
    if s_max is not None:
        score = score.clamp(-s_max, s_max)
    return advantages.unsqueeze(1) * (1.0 + mult_coeff * score) * mask


def tail_confidence(confidence: torch.Tensor, mask: torch.Tensor, tail_window: int = 16) -> torch.Tensor:
    """(B,) mean confidence over each completion's last `tail_window` tokens (all of them if fewer;
    core_algos.py `_compute_tail_confidence`; a window <= 0 is the whole completion there too). Completions
    are right-padded (TRL's layout)."""
    if tail_window <= 0:
        tail_window = mask.size(1)
    lengths = mask.sum(1, keepdim=True)
    positions = torch.arange(mask.size(1), device=mask.device).unsqueeze(0)
    window = (positions < lengths) & (positions >= lengths - tail_window)
    tail = window.to(confidence.dtype)
    return ((confidence * tail).sum(1) / tail.sum(1).clamp(min=1.0)).clamp(0.0, 1.0)


def adaptive_clip(confidence: torch.Tensor, mask: torch.Tensor, tail_window: int = 16, eps_min: float = 0.05,
                  eps_max: float = 0.2, kappa: float = 4.0) -> torch.Tensor:
    """(B,) clip ranges eps_i = eps_min + (eps_max - eps_min) * sigmoid(kappa * (1 - C_tail_i)):
    confident completions get a tighter trust region (Section 3.2)."""
    c_tail = tail_confidence(confidence, mask, tail_window)
    return eps_min + (eps_max - eps_min) * torch.sigmoid(kappa * (1.0 - c_tail))


class LogitStatistics:
    """Stands in for the policy in TRL's `_get_per_token_logps_and_entropies`, which slices every
    family's image inputs per chunk and reads `.log_probs` / `.entropy`: TRL's fused LM head yields
    no top-k probabilities, so this runs the model's own forward on the completion positions
    (`logits_to_keep`) and keeps each chunk's confidence as well (`confidence`: "top_k" or "sampled")."""

    def __init__(self, model, logits_to_keep: int, temperature: float, top_k: int, confidence: str = "top_k"):
        self.model, self.keep, self.temperature, self.top_k = model, logits_to_keep, temperature, top_k
        self.kind = check_token_confidence(confidence)
        self.confidence: list[torch.Tensor] = []

    def __call__(self, labels=None, fused_lm_head=None, **inputs):
        # position p's logits predict token p + 1: the last `keep` tokens need the `keep + 1` last logits
        logits = self.model(**inputs, logits_to_keep=self.keep + 1).logits[:, :-1] / self.temperature
        logps, entropy, confidence = token_statistics(logits, inputs["input_ids"][:, -self.keep :], self.top_k,
                                                      self.kind)
        self.confidence.append(confidence)
        return _Statistics(logps, entropy)


class _Statistics:
    def __init__(self, log_probs, entropy):
        self.log_probs, self.entropy = log_probs, entropy
