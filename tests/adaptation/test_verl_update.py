"""adaptation/verl_update.py on its own (fidelity/test_verl_update.py compares it with verl): k3, the clamped
reference, the checks, steps per round and the per-round lr schedule, verl's group advantages. Every expected
value is worked out by hand in the test's docstring or comments, or read from the source a function cites."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from ttrl_bench.adaptation.verl_update import (check_verl_update, clamped_reference, k3, per_round_schedule,
                                              steps_per_round)

from tests.support.adaptation import learning_rates  # the lr of each optimizer step under a schedule
from ttrl_bench.adaptation.verl_update import verl_group_advantages


def test_k3_is_exp_d_minus_d_minus_1():
    """k3(d) = e^d - d - 1 (verl core_algos.py:485-488): 0 at d = 0, e - 2 = 0.718282 at 1, e^-1 = 0.367879 at -1,
    e^2 - 3 = 4.389056 at 2."""
    got = k3(torch.tensor([0.0, 1.0, -1.0, 2.0], dtype=torch.float64))
    assert got.tolist() == pytest.approx([0.0, math.e - 2, math.exp(-1), math.exp(2) - 3], abs=1e-12)
    assert got[0].item() == 0.0


def test_a_small_kl_bound_clamps_each_side_to_its_own_root():
    """Bound b = k3(0.5) = e^0.5 - 1.5 = 0.1487213: its positive root is 0.5; its negative root d solves
    e^d - d - 1 = b, d = -0.6 + (k3(-0.6) - b) / (1 - e^-0.6) = -0.6 + (0.1488116 - 0.1487213) / 0.4511884
    = -0.59980 (one Newton step from -0.6; k3(-0.6) = e^-0.6 + 0.6 - 1 = 0.1488116). With logp 0:
    d = 0.25 (k3 0.0340) and 0 (k3 0) stay; d = 0.8 (k3 e^0.8 - 1.8 = 0.4255) is past the bound on the positive
    side and becomes 0.5; d = -2 (k3 e^-2 + 1 = 1.1353) becomes -0.59980. The side is that of d, not of d > 1."""
    bound = math.exp(0.5) - 1.5
    logps = torch.zeros(4)
    ref = torch.tensor([0.25, 0.0, 0.8, -2.0])
    got = clamped_reference(ref, logps, bound)
    assert got[:2].tolist() == [0.25, 0.0]
    assert got[2].item() == pytest.approx(0.5, abs=1e-6)
    assert got[3].item() == pytest.approx(-0.59980, abs=1e-5)


def test_at_the_bound_itself_the_reference_keeps_its_value_and_the_gradient_passes():
    """torch.clamp(k3, max=b) passes the gradient where k3 equals b exactly (verl core_algos.py:489), so the
    reference is kept there: with logp 0 (requires grad) and ref 1, k3 = e - 2 in float32, and the bound is
    that very float32 number. The result is ref (1.0), which does not depend on logp: d result / d logp = 0.
    Replacing it by logp + root would give d result / d logp = 1."""
    logps = torch.zeros(1, requires_grad=True)
    ref = torch.ones(1)
    bound = k3(ref - logps.detach()).item()  # e - 2 rounded to float32, exactly
    got = clamped_reference(ref, logps, bound)
    assert got.item() == 1.0
    got.sum().backward()
    assert logps.grad.tolist() == [0.0]


def test_the_clamped_reference_keeps_the_policys_bf16_dtype():
    """The root added to logp is cast to logp's dtype: bf16 log-probs give a bf16 reference (a float32 root would
    promote the sum, and the torch.where, to float32). d = -12 + 0 = -12 is past the bound 10 (k3 11.000006)."""
    logps = torch.zeros(2, dtype=torch.bfloat16)
    ref = torch.tensor([-12.0, 0.5], dtype=torch.bfloat16)
    got = clamped_reference(ref, logps, 10.0)
    assert got.dtype == torch.bfloat16
    assert got[1].item() == 0.5


def test_an_unknown_advantage_rule_or_a_bound_not_above_0_is_refused_by_name():
    """The exact message for advantages "ppo": the config key, the value, and the known rules joined by ", ".
    kl_clamp must be a positive number or null: 0 and True are refused, 0.5 (a bound under 1) and 10 pass."""
    with pytest.raises(ValueError) as err:
        check_verl_update({"advantages": "ppo"})
    assert str(err.value) == "adaptation.hyperparameters.<task>.advantages = 'ppo'; known: trl, verl"
    for bad in (0, True):
        with pytest.raises(ValueError) as err:
            check_verl_update({"kl_clamp": bad})
        assert str(err.value) == f"adaptation.hyperparameters.<task>.kl_clamp = {bad!r}; a positive bound or null"
    for good in (0.5, 10, None):
        check_verl_update({"advantages": "verl", "kl_clamp": good})


def test_steps_per_round_counts_whole_optimizer_steps_of_a_generation_batch():
    """steps_per_generation 4 micro-batches x 3 iterations = 12 micro-batches per round, 2 per optimizer step: 6
    optimizer steps, a whole number (an int). 3 micro-batches (1 iteration of 3) with 2 per step are 1.5 steps:
    refused with the exact message."""
    got = steps_per_round(SimpleNamespace(steps_per_generation=4, gradient_accumulation_steps=2), 3)
    assert got == 6 and isinstance(got, int)
    with pytest.raises(ValueError) as err:
        steps_per_round(SimpleNamespace(steps_per_generation=3, gradient_accumulation_steps=2), 1)
    assert str(err.value) == ("lr_schedule_per round needs whole optimizer steps per round: 3 micro-batches per "
                              "generation batch, 2 per step; raise generation_batch_size")


def _learning_rates(args, num_iterations: int, steps: int) -> list[float]:
    """The lr of each optimizer step (base lr 1) under per_round_schedule."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    return learning_rates(per_round_schedule(optimizer, args, num_iterations, steps), optimizer, steps)


def test_the_per_round_schedule_holds_each_rounds_lr_and_counts_warm_up_in_rounds():
    """steps_per_generation 2 x num_iterations 2 = 4 micro-batches, 2 per step: 2 optimizer steps per round.
    7 steps make ceil(7 / 2) = 4 rounds. warmup_steps 1 (not below 1: a count of rounds, not a ratio): 1 round.
    transformers' linear schedule over rounds r: r / 1 under the warm-up, then (4 - r) / (4 - 1): rounds 0..3 give
    0, 1, 2/3, 1/3, each held for its 2 steps (the last round has one step left)."""
    args = SimpleNamespace(steps_per_generation=2, gradient_accumulation_steps=2, warmup_steps=1,
                           lr_scheduler_type="linear", lr_scheduler_kwargs={})
    assert _learning_rates(args, 2, 7) == pytest.approx([0, 0, 1, 1, 2 / 3, 2 / 3, 1 / 3], abs=1e-12)


def test_the_per_round_schedule_passes_the_schedulers_own_arguments():
    """cosine_with_min_lr with lr_scheduler_kwargs min_lr_rate 0.1, warm-up ratio 0.0 (int(0.0 x 4) = 0 rounds),
    1 optimizer step per round (2 micro-batches, 2 per step), 4 steps = 4 rounds. transformers' factor
    0.5 (1 + cos(pi x r / 4)) x 0.9 + 0.1: r = 0: 1; r = 1: 0.5 (1 + 0.707107) x 0.9 + 0.1 = 0.868198; r = 2: 0.55;
    r = 3: 0.5 (1 - 0.707107) x 0.9 + 0.1 = 0.231802. Without the kwargs transformers refuses this schedule."""
    args = SimpleNamespace(steps_per_generation=2, gradient_accumulation_steps=2, warmup_steps=0.0,
                           lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": 0.1})
    assert _learning_rates(args, 1, 4) == pytest.approx([1.0, 0.868198, 0.55, 0.231802], abs=1e-6)



def test_verls_group_advantages_of_a_last_group_of_two_in_float32():
    """float64 rewards [1, 0, 0 | 1, 0.5], groups of 3: the last group has two rewards and is a group (mean and
    unbiased std), not a single. Group 1: mean 1/3, deviations 2/3, -1/3, -1/3, variance (4/9 + 1/9 + 1/9) / 2 =
    1/3, std 0.5773503; group 2: mean 0.75, deviations +-0.25, variance 0.125 / 1, std 0.3535534; each divided by
    (std + 1e-6). Computed and returned in float32 on the input's device."""
    ours = verl_group_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5], dtype=torch.float64), 3)
    assert ours.dtype == torch.float32 and ours.device == torch.device("cpu")
    s1, s2 = math.sqrt(1 / 3) + 1e-6, math.sqrt(0.125) + 1e-6
    assert ours.tolist() == pytest.approx([2 / 3 / s1, -1 / 3 / s1, -1 / 3 / s1, 0.25 / s2, -0.25 / s2], rel=1e-6)
