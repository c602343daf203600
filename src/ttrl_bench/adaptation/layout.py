"""The batch layout of a GRPO adaptation: how a preset's prompts per step, rollouts and vote split
become GRPOConfig's batch fields for a number of processes and adaptation samples. Pure (no torch,
no TRL), so the dry run checks every (preset, GPUs, samples) of a config before any job starts."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def plan_batch_layout(hp: dict, num_processes: int, n_samples: int) -> dict:
    """GRPOConfig's batch fields for a GRPO preset's hyper-parameters (`resolve_method(...)
    ["hyperparameters"]`) adapting on `n_samples` prompts (1 for a per-sample method: each adapt call
    sees one sample) with `num_processes` processes (the job's GPUs); what `adapt` will use. Raises
    ValueError naming the config key of a layout that cannot run."""
    hp = fit_to_samples(hp, n_samples)
    check_votes(hp)
    return batch_layout(hp, num_processes)


def check_votes(hp: dict) -> int:
    """The rollouts that vote per prompt (`n_votes`, default num_generations). Each trained rollout's
    prompt is sampled n_votes / num_generations times where it is generated (trainer.py
    TestTimeGRPOTrainer._generate), so the ratio must be whole; any split of a group across processes
    then works."""
    n, n_votes = hp["num_generations"], hp.get("n_votes") or hp["num_generations"]
    if n_votes < n or n_votes % n:
        raise ValueError(f"adaptation.hyperparameters.<task>.n_votes = {n_votes} must be a multiple of num_generations "
                         f"= {n}: the trained rollouts are the first of the votes, each with the same number of extras")
    return n_votes


def fit_to_samples(hp: dict, n_samples: int) -> dict:
    """With fewer adaptation samples than prompts per step (TTRV Table 6: one sample), a step holds
    them all: the preset's batch cannot be filled from the data. Likewise a generation batch of more
    prompts than there are (ECHO Table 5 generates 5 at once) shrinks to the whole steps they fill."""
    if n_samples < hp.get("prompts_per_step", 1):
        log.warning("%d adaptation samples < prompts_per_step %d: %d prompt(s) per step", n_samples,
                    hp["prompts_per_step"], n_samples)
        hp = {**hp, "prompts_per_step": n_samples}
    per_step = hp["num_generations"] * hp.get("prompts_per_step", 1)
    if (hp.get("generation_batch_size") or 0) > n_samples * hp["num_generations"]:
        steps = max(1, n_samples // hp.get("prompts_per_step", 1))
        log.warning("%d adaptation samples fill no generation batch of %d completions: %d", n_samples,
                    hp["generation_batch_size"], per_step * steps)
        hp = {**hp, "generation_batch_size": per_step * steps}
    return hp


def batch_layout(hp: dict, num_processes: int = 1) -> dict:
    """GRPOConfig's batch fields from the preset. One optimizer step covers prompts_per_step x
    num_generations completions (TTRV authors' logs: 4 x 16); forward/backward runs on
    `micro_batch_size` of them at a time with gradient accumulation; rollouts are generated
    `generation_batch_size` at a time (default: one prompt's group per process, since HF generate
    holds the whole generation batch at once, docs/gpu-runs.md; with fewer prompts per step than
    processes, one group split across them)."""
    n = hp["num_generations"]
    per_step = n * hp.get("prompts_per_step", 1)
    # a step's completions shared by many GPUs leave each fewer than a micro-batch (VR-TTRL on 4 GPUs:
    # 8 rollouts, 2 per GPU): the micro-batch shrinks to them, a memory knob only
    micro = min(hp.get("micro_batch_size") or n, max(1, per_step // num_processes))
    generation = hp.get("generation_batch_size") or n * min(num_processes, hp.get("prompts_per_step", 1))
    key = "adaptation.hyperparameters.<task>"
    if per_step % (micro * num_processes):
        raise ValueError(f"{key}: prompts_per_step x num_generations = {per_step} completions per step is not a "
                         f"multiple of micro_batch_size {micro} x {num_processes} process(es)")
    if generation % n or generation % (micro * num_processes) or per_step % generation and generation % per_step:
        raise ValueError(f"{key}.generation_batch_size = {generation} must be a multiple of num_generations {n} and of "
                         f"micro_batch_size {micro} x {num_processes} process(es), and divide or be divided by the "
                         f"{per_step} completions of one step")
    return {"per_device_train_batch_size": micro,
            "gradient_accumulation_steps": per_step // (micro * num_processes),
            "generation_batch_size": generation}
