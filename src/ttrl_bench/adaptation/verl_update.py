"""verl's GRPO update in TRL's terms (presets.py VERL_UPDATE says which presets ask for it): the
hyper-parameter check, verl's group advantages, the reference log-probs that make TRL's k3 verl's
clamped low_var_kl, and the lr schedule stepped once per rollout round. Pure functions; the trainer
(trainer.py) calls them."""

from __future__ import annotations

import functools
import math

import torch
from torch.optim.lr_scheduler import LambdaLR
from transformers import get_scheduler


VERL_ADVANTAGES = ("trl", "verl")


def check_verl_update(hp: dict) -> None:
    """The hyper-parameters that make TRL's update verl's (presets.py VERL_UPDATE says which)."""
    rule = hp.get("advantages", "trl")
    if rule not in VERL_ADVANTAGES:
        raise ValueError(f"adaptation.hyperparameters.<task>.advantages = {rule!r}; known: {', '.join(VERL_ADVANTAGES)}")
    if rule == "verl" and hp.get("scale_rewards", "group") != "group":  # verl's GRPO always divides by the group std
        raise ValueError(f"advantages: verl scales by the group's std; scale_rewards = {hp['scale_rewards']!r} asks otherwise")
    bound = hp.get("kl_clamp")
    if bound is not None and not (isinstance(bound, (int, float)) and not isinstance(bound, bool) and bound > 0):
        raise ValueError(f"adaptation.hyperparameters.<task>.kl_clamp = {bound!r}; a positive bound or null")


def verl_group_advantages(rewards: torch.Tensor, group_size: int, epsilon: float = 1e-6) -> torch.Tensor:
    """verl's GRPO outcome advantages (TTRV authors' fork, verl/verl/trainer/ppo/core_algos.py:113-154,
    compute_grpo_outcome_advantage): per group of `group_size` consecutive rewards (verl groups by the prompt's
    uid; TRL lays each prompt's completions out consecutively), in float32 on the CPU as verl's driver
    computes them (ray_trainer.py:1198, "executed on the driver process"), (r - mean) / (std + 1e-6), with
    torch.mean and torch.std (unbiased) of the group; a group of one has mean 0 and std 1.
    TRL differs in 1e-4 for 1e-6 and a nan-aware mean and std on the device. With 16 equal rewards, torch's
    float32 mean need not be the reward itself (16 x 0.35: 2^-25 off on the CPU), and verl then gives every
    rollout the same small nonzero advantage (0.0289 for 0.35): reproduced here, not rounded away."""
    scores = rewards.detach().to("cpu", torch.float32)
    advantages = torch.empty_like(scores)
    for start in range(0, len(scores), group_size):
        group = scores[start : start + group_size].clone()  # a tensor of its own, as verl's torch.tensor(list)
        if len(group) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = torch.mean(group), torch.std(group.unsqueeze(0))  # verl: torch.std(torch.tensor([scores]))
        advantages[start : start + group_size] = (group - mean) / (std + epsilon)
    return advantages.to(rewards.device)


def k3(log_ratio: torch.Tensor) -> torch.Tensor:
    """The k3 ("low-variance") KL estimate of d = ref - policy log-prob, as TRL and verl write it:
    exp(d) - d - 1 (trl grpo_trainer.py `_compute_loss`; verl core_algos.py:485-488)."""
    return torch.exp(log_ratio) - log_ratio - 1


@functools.lru_cache(maxsize=8)  # asked on every loss computation under kl_clamp: one bisection per bound
def k3_roots(bound: float) -> tuple[float, float]:
    """The two log-ratios d < 0 < d' where exp(d) - d - 1 = `bound` (k3 is convex with its minimum 0 at d = 0),
    by bisection in float64: for 10, d = -10.99998 and d' = 2.6109."""

    def solve(lo: float, hi: float) -> float:  # k3(lo) - bound and k3(hi) - bound of opposite signs
        f = lambda d: math.expm1(d) - d - bound
        sign_lo = f(lo) > 0
        for _ in range(200):
            mid = (lo + hi) / 2
            if (f(mid) > 0) == sign_lo:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    return solve(-(bound + 1.0), 0.0), solve(0.0, 2.0 * math.log(bound + 2.0))


def clamped_reference(ref_logps: torch.Tensor, logps: torch.Tensor, bound: float) -> torch.Tensor:
    """Reference log-probs with which TRL's own k3 formula, exp(ref - logp) - (ref - logp) - 1, becomes verl's
    low_var_kl (TTRV authors' fork, verl/verl/trainer/ppo/core_algos.py:485-489: torch.clamp(k3, -10, 10)):
    where k3 <= bound, the reference as is (the value and gradient unchanged); where k3 > bound, `logps` (with
    its gradient) plus the root d of k3(d) = bound on the same side, so that ref - logp is d with zero gradient,
    as torch.clamp gives past its bound. The value is the bound up to float32 rounding of (logp + d) - logp (a
    few 1e-6 for log-probs of tens). k3 >= 0, so the lower bound -10 never acts. Under TRL's
    `use_bias_correction_kl` (bias_corrected_kl) TRL multiplies k3 by the differentiable ratio to the old
    policy: that factor keeps a gradient where verl's has none; the authors' protocol turns it off."""
    d_low, d_high = k3_roots(float(bound))
    log_ratio = (ref_logps - logps).detach()
    inside = k3(log_ratio) <= bound  # torch.clamp passes the gradient at the bound itself
    at_bound = logps + torch.where(log_ratio > 0, d_high, d_low).to(logps.dtype)
    return torch.where(inside, ref_logps, at_bound)


def steps_per_round(args, num_iterations: int = 1) -> int:
    """Optimizer steps per generation batch (a rollout round): TRL counts `steps_per_generation` in
    micro-batches, `gradient_accumulation_steps` of which make an optimizer step."""
    micro_steps = args.steps_per_generation * num_iterations
    if micro_steps % args.gradient_accumulation_steps:
        raise ValueError(f"lr_schedule_per round needs whole optimizer steps per round: {micro_steps} micro-batches per "
                         f"generation batch, {args.gradient_accumulation_steps} per step; raise generation_batch_size")
    return micro_steps // args.gradient_accumulation_steps


def per_round_schedule(optimizer, args, num_iterations: int, num_training_steps: int) -> LambdaLR:
    """transformers' schedule `args.lr_scheduler_type` over rounds, held for each round's steps. Its warm-up is
    int(ratio x rounds) rounds, verl's rule (a float warmup_steps < 1 is a ratio, else a count of rounds)."""
    per_round = steps_per_round(args, num_iterations)
    rounds = -(-num_training_steps // per_round)
    warmup = int(args.warmup_steps * rounds) if args.warmup_steps < 1 else int(args.warmup_steps)
    # the round schedule's own multiplier: transformers' lambdas, built on the optimizer and read back
    by_round = get_scheduler(args.lr_scheduler_type, optimizer, num_warmup_steps=warmup, num_training_steps=rounds,
                             scheduler_specific_kwargs=args.lr_scheduler_kwargs).lr_lambdas[0]
    return LambdaLR(optimizer, lambda step: by_round(step // per_round))
