"""Test-time adaptation with TRL's GRPOTrainer: rollouts on unlabeled test prompts, a label-free
group reward, GRPO updates. Methods are presets (presets.py) of this one trainer.

At paper scale (docs/gpu-runs.md): trainable weights and AdamW state in fp32 with bf16 autocast on GPUs
(the caller loads the model in fp32), one optimizer step = prompts_per_step x num_generations
completions computed in micro-batches with gradient accumulation, rollouts generated in chunks of
`generation_batch_size`, and the TTRL/TTRV split between the rollouts that vote (`n_votes`) and the
ones trained on (`num_generations`)."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import logging
import math
import os
import time
from pathlib import Path

import pandas as pd
import torch
from accelerate.utils import gather_object, set_seed
from datasets import Dataset
from torch.optim.lr_scheduler import LambdaLR
from transformers import TrainerCallback, get_scheduler
import trl.trainer.grpo_trainer as trl_grpo_trainer
from trl import GRPOConfig, GRPOTrainer
from trl.generation.vllm_generation import VLLMGeneration as trl_VLLMGeneration
from trl.models.utils import disable_gradient_checkpointing, prepare_fsdp as trl_prepare_fsdp

from ..evaluation.tasks import TASKS
from ..generation.backend import choose_backend
from ..generation.precision import bf16_autocast, generation_precision
from ..generation.vllm_settings import (
    collapse_prompts_before_generate,
    forbid_tokens_sampling_kwargs,
    grpo_vllm_environment,
    grpo_vllm_kwargs,
    probe_colocated_expansion,
)
from ..models.families import (
    add_vision_drop_path,
    freeze_vision_encoder,
    freezes_vision_encoder,
    image_span_token_ids,
    parameter_count,
    placeholder_token_ids,
    ttrv_logged_temperature,
    unsampleable_token_ids,
)
from ..rewards.registry import get_reward
from ..rewards.voting import answer_entropy, majority_answer
from ..runs.processes import process_state
from .layout import batch_layout, check_votes, fit_to_samples
from .vote_selection import TRAINED_VOTES, trained_first_order, verl_trained_votes
from .echo import LogitStatistics, adaptive_clip, check_token_confidence, check_update, hybrid_advantages
from .uncertainty import completion_entropies, normalise_uncertainty
from .weights import WeightSnapshot

log = logging.getLogger(__name__)


class SplitGroupError(RuntimeError):
    """The N completions of one prompt did not arrive together: group rewards would be wrong."""


def completion_text(completion) -> str:
    """TRL passes conversational completions as [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, list):
        return "".join(m["content"] if isinstance(m["content"], str) else "" for m in completion)
    return completion


def gathered(*values):
    """Each argument (a list, a dict of lists, or None) concatenated over all processes in process
    order; as is with one process."""
    if process_state().num_processes == 1:
        return values
    out = []
    for value in values:
        if isinstance(value, dict):
            out.append({k: gather_object(list(v)) for k, v in value.items()})
        else:
            out.append(None if value is None else gather_object(list(value)))
    return out


class GroupReward:
    """Adapts a group reward (answers -> rewards) to TRL's reward-function signature.

    TRL calls it with the whole generation batch, prompts repeated `num_generations` times in a
    row. It cuts the batch into groups, refuses a group whose ids differ (a split group), parses
    each completion with the dataset's task, adds the task's format rewards (VR-TTRL), and records
    per-step statistics for the training log. Where the trainer voted on more rollouts than it trains
    on, each trained row carries the extra votes sampled from its prompt next to it (`extra_votes` /
    `extra_vote_ids`): a group's votes are its trained completions, then their extras, gathered from
    every process; the reward sees every vote and returns the trained completions' rewards. The hidden labels are read for the
    log (TTRV Figure 1 curves), and for the reward only by the supervised baseline (`needs_gold`:
    GRPO with ground-truth labels, ECHO Table 12).
    """

    def __init__(self, name: str, params: dict, num_generations: int, task=None, micro_batch: int = 8,
                 reward_grid: bool = True):
        params = dict(params)
        # rewards rounded to multiples of 2^-16 (see _score); off under verl's advantages (`advantages: verl`),
        # which take the float32 rewards as they come, as verl's reward manager stores them
        self.reward_grid = reward_grid
        self.uncertainty_norm = params.pop("uncertainty", "vocab")
        self.reward = get_reward(name, **params)
        # the logged pseudo-label follows the reward's convention (rewards/registry.py Reward.unparsable)
        self.unparsable = getattr(self.reward, "unparsable", "answer")
        self.needs_uncertainty = getattr(self.reward, "needs_uncertainty", False)
        self.needs_texts = getattr(self.reward, "needs_texts", False)  # T3RL verifies the rollouts' text
        self.needs_gold = getattr(self.reward, "needs_gold", False)  # the supervised baseline (ECHO Table 12)
        self.verifications: list[dict] = []
        self.task = task or TASKS["recognition"]
        self.policy = None  # (model, processor), set by `adapt` for rewards that need uncertainty
        self.num_generations = num_generations
        self.micro_batch = micro_batch
        self.records: list[dict] = []
        self._last_time = time.perf_counter()
        self.__name__ = name  # TRL names the logged reward column after the function

    def _uncertainties(self, row: dict, ids: list[list[int]]) -> list[float]:
        model, processor = self.policy
        entropies = completion_entropies(model, processor, row["question"], row["image"], ids,
                                         system=row.get("system"), micro_batch=self.micro_batch)
        return normalise_uncertainty(entropies, model.config.get_text_config().vocab_size, self.uncertainty_norm)

    def __call__(self, prompts, completions, completion_ids=None, trainer_state=None, extra_votes=None,
                 extra_vote_ids=None, **columns) -> list[float]:
        """Rewards of this process's completions. Under several processes a group may be split across
        them (per-sample VR-TTRL: one prompt's 8 rollouts on 2 GPUs), so every process scores the
        whole generation batch, gathered in process order as TRL lays it out, and keeps its slice
        (DARE's forward then runs on every process for every group: redundant, and what FSDP's
        collectives need). Images travel only where the reward's forward needs them."""
        skip = {"log_extra", "log_metric"} | (set() if self.needs_uncertainty else {"image"})
        keys = [k for k in columns if k not in skip]
        local = len(completions)
        texts, ids, votes, vote_id_lists, columns = gathered(
            [completion_text(c) for c in completions], completion_ids, extra_votes, extra_vote_ids, {k: columns[k] for k in keys})
        start = process_state().process_index * local
        return self._score(texts, ids, votes, vote_id_lists, columns, trainer_state)[start : start + local]

    def _score(self, texts, completion_ids, extra_votes, extra_vote_ids, columns, trainer_state) -> list[float]:
        n = self.num_generations
        if len(texts) % n:
            raise SplitGroupError(f"batch of {len(texts)} completions is not a multiple of N={n}")
        rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
        rewards, stats, lengths = [], [], []
        for start in range(0, len(texts), n):
            group_ids = {r["id"] for r in rows[start : start + n]}
            if len(group_ids) != 1:
                raise SplitGroupError(f"completions {start}..{start + n - 1} mix prompts {sorted(group_ids)}")
            row = rows[start]
            group = range(start, start + n)
            votes = texts[start : start + n] + [t for i in group for t in extra_votes[i]] if extra_votes else (
                texts[start : start + n])
            ids = (completion_ids or [[]] * len(texts))[start : start + n]
            ids = ids + [t for i in group for t in extra_vote_ids[i]] if extra_vote_ids else ids
            parsed = [self.task.parse(t, row) for t in votes]
            extra = {"uncertainties": self._uncertainties(row, ids)} if self.needs_uncertainty else {}
            if self.needs_texts:
                extra = {"texts": votes, "options": row.get("options")}
            if self.needs_gold:
                extra = {"gold": self.task.gold(row), "score": self.task.score}
            format_rewards = self.task.format_rewards(votes[:n], **self.reward.format_params)
            group_rewards = [r + f for r, f in zip(self.reward(parsed, **extra)[:n], format_rewards)]
            # TRL centres rewards on their float32 group mean, and 16 equal float32 values do not
            # always sum to exactly 16x (x + x + x rounds): a group of equal rewards (TTRV "w/o
            # frequency") got advantages of ~1e-4 instead of 0, which Adam turns into full steps.
            # On a 2^-16 grid every partial sum is exact, so equal rewards give advantages of 0.
            # verl's advantages (`advantages: verl`) skip the grid: there the unanimous group's rounding is verl's own.
            if self.reward_grid:
                group_rewards = [round(r * 2**16) / 2**16 for r in group_rewards]
            if self.needs_texts:  # T3RL: every verifier decision, per rollout
                step = trainer_state.global_step if trainer_state is not None else len(self.records)
                self.verifications += [{"step": step, "sample": row["id"], "rollout": i, "answer": str(a),
                                        "verified": d.verified, "reason": d.reason, "computed": d.computed}
                                       for i, (a, d) in enumerate(zip(parsed, self.reward.decisions))]
            rewards.extend(group_rewards)
            lengths.extend(map(len, ids))
            # how often each reward convention touched this group (rewards/registry.py)
            stats.append({**self._group_stats(parsed, group_rewards, self.task.gold(row)), **self.reward.last_stats})
        now = time.perf_counter()
        record = {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}
        mean = sum(rewards) / len(rewards)
        record["reward_std"] = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
        # VR-TTRL Figure 3 (reasoning length per step): mean completion length in tokens, over the votes
        record["completion_length"] = sum(lengths) / len(lengths) if completion_ids else float("nan")
        record["votes"] = len(parsed)
        record["step"] = trainer_state.global_step if trainer_state is not None else len(self.records)
        record["seconds"] = now - self._last_time
        self._last_time = now
        self.records.append(record)
        return rewards

    def _group_stats(self, parsed: list, group_rewards: list[float], gold) -> dict:
        """Reward mean over the trained completions; answer statistics over every vote."""
        n = len(parsed)
        hashable = [json.dumps(p, sort_keys=True) if isinstance(p, list) else p for p in parsed]
        voted = any(p is not None for p in parsed) or self.unparsable == "answer"
        label = majority_answer(hashable, self.unparsable)
        return {
            "reward_mean": sum(group_rewards) / len(group_rewards),
            "answer_entropy": answer_entropy(hashable),
            # the authors' train/majority_ratio: votes for the pseudo-label ("" included where it can win)
            "majority_fraction": sum(a == label for a in hashable) / n if voted else 0.0,
            # the authors' train/label_accuracy: is the pseudo-label correct ("" never is)
            "label_accuracy": float(self.task.score(parsed[hashable.index(label)], gold)) if label is not None else 0.0,
            "unparsable_fraction": sum(p is None for p in parsed) / n,
            "rollout_accuracy": sum(self.task.score(p, gold) for p in parsed) / n,
        }


class ProgressLog(TrainerCallback):
    """One line per optimizer step in the job's log (the trainer's own tqdm bar goes to stderr); the
    losses are kept for run.json, and TRL's own seconds per optimizer step (`step_time`: generation
    and training of the step, without the trainer's construction) for benchmarks/gpu.py."""

    def __init__(self):
        self.losses: list[float] = []
        self.learning_rates: list[float] = []  # the lr each optimizer step ran at (verl logs actor/lr per round)
        self.step_times: list[float] = []

    def on_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        self.learning_rates.append(optimizer.param_groups[0]["lr"])

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))
        if logs and "step_time" in logs:  # logging_steps=1: one optimizer step per log
            self.step_times.append(float(logs["step_time"]))
        if logs:
            log.info("step %d/%d %s", state.global_step, state.max_steps, {k: round(v, 4) for k, v in logs.items() if isinstance(v, float)})


def adaptation_dataset(manifest: pd.DataFrame, image_root: Path) -> Dataset:
    """Conversational prompts + an `image` column (TRL inserts the image before the user text);
    the manifest's other columns ride along for the reward's parser and training log. Images are
    decoded when TRL reads a batch (`with_transform`), so only a step's images are in memory."""
    from PIL import Image

    from ..datasets.preprocessing import model_view

    def decode(batch: dict) -> dict:
        images = []
        # a grounding manifest's input_size (GroundingTask.view): the image the rollouts see, resized
        sizes = batch.get("input_size") or [None] * len(batch["id"])
        for sample_id, path, size in zip(batch["id"], batch["image"], sizes):
            try:
                with Image.open(path) as im:
                    images.append(model_view(im.convert("RGB"), size))
            except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
                raise ValueError(f"adaptation sample {sample_id}: image {path} does not decode: {err}") from err
        kept = {"input_size": batch["input_size"]} if "input_size" in batch else {}
        return {"id": batch["id"], "image": images, **kept}

    system = manifest["system"] if "system" in manifest else [None] * len(manifest)
    columns = {
        "prompt": [
            ([{"role": "system", "content": s}] if isinstance(s, str) else []) + [{"role": "user", "content": p}]
            for s, p in zip(system, manifest["prompt"])
        ],
        "image": [str(Path(image_root) / path) for path in manifest["image"]],
        "question": list(manifest["prompt"]),  # the prompt text again, for DARE's forward pass
    }
    for name in manifest.columns.drop(["prompt", "image", "split", "system"], errors="ignore"):
        columns[name] = [v.tolist() if hasattr(v, "tolist") else v for v in manifest[name]]
    decoded = ["id", "image", *(["input_size"] if "input_size" in columns else [])]
    return Dataset.from_dict(columns).with_transform(decode, columns=decoded, output_all_columns=True)


class PlaceholderInRolloutError(RuntimeError):
    """A rollout sampled an image / video placeholder token: the training forward would count one
    image token too many ("Image features and image tokens do not match", docs/gpu-runs.md)."""


class TestTimeGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer with the rollout split of TTRL's and TTRV's code: `n_votes` rollouts per
    prompt vote on the pseudo-label, the first `num_generations` of them are trained on (TTRV
    authors' logs: 32 / 16; TTRL and ECHO Appendix A.3: 64 / 32). The extra rollouts come from the
    same `_generate` call (either backend): each trained rollout's prompt is sampled n_votes /
    num_generations times on the process that holds it, so a group split across processes (ECHO's
    5-prompt generation batch on 4 GPUs, TTRV Table 6's one sample on 2) votes whole; the extras
    reach the reward as `extra_votes` / `extra_vote_ids` of their row (GroupReward gathers them).
    Rollouts never contain placeholder tokens: forbidden at sampling, and refused if one slips by."""

    def __init__(self, *args, n_votes: int, forbidden_token_ids: list[int], update: dict | None = None,
                 lr_schedule_per: str = "step", advantages: str = "trl", kl_clamp: float | None = None,
                 decay_every_parameter: bool = False, token_confidence: str = "top_k", trained_votes: str = "first",
                 **kwargs):
        if lr_schedule_per not in ("step", "round"):
            raise ValueError(f"adaptation.hyperparameters.<task>.lr_schedule_per = {lr_schedule_per!r}; known: step, round")
        check_verl_update({"advantages": advantages, "kl_clamp": kl_clamp})
        self.lr_schedule_per = lr_schedule_per  # read by create_scheduler, which super().__init__ may not call
        # "trl": TRL's group advantages; "verl": verl's compute_grpo_outcome_advantage (`verl_group_advantages`)
        self.advantage_rule = advantages
        # None: TRL's k3 as is; a bound b: verl's low_var_kl, k3 clamped to [-b, b] (`clamped_reference`)
        self.kl_clamp = kl_clamp
        # verl's AdamW decays every parameter (TTRV authors' fork fsdp_workers.py:322-327, `actor_module_fsdp.parameters()`);
        # transformers' Trainer spares biases and norms (`get_decay_parameter_names`)
        self.decay_every_parameter = decay_every_parameter
        self._kl_clamp_inputs = None  # the inputs of the _compute_loss call whose reference is being clamped
        # ECHO's token confidence: the paper's top-k mean or the sampled token's probability (echo.py)
        self.token_confidence = check_token_confidence(token_confidence)
        if trained_votes not in TRAINED_VOTES:
            raise ValueError(f"adaptation.hyperparameters.<task>.trained_votes = {trained_votes!r}; known: {', '.join(TRAINED_VOTES)}")
        self.trained_votes = trained_votes  # which votes are trained: vote_selection.py
        self._gathered_rewards_per_func = None  # the last generation batch's rewards, all processes' (verl's advantages)
        with trl_construction_overrides(n_votes // kwargs["args"].num_generations):  # check_votes: a multiple
            super().__init__(*args, **kwargs)
        self.n_votes = n_votes
        self.forbidden_token_ids = set(forbidden_token_ids)
        # None: TRL's GRPO update; {"rule": "echo", ...}: ECHO's token advantages and clip ranges (echo.py)
        self.update = None
        if update is not None:
            params = dict(update)
            if params.pop("rule", None) != "echo":
                raise ValueError(f"unknown update rule in {update!r}; known: echo")
            self.update = check_update(params)

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        """transformers' schedule, stepped per optimizer step ("step") or, as verl does, once per rollout round
        ("round": the lr of a round's every step is the schedule's value at that round, warm-up
        int(warmup_ratio x rounds) rounds; verl fsdp_workers.py:329-345, 553)."""
        if self.lr_schedule_per == "step" or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        self.lr_scheduler = per_round_schedule(optimizer or self.optimizer, self.args, self.num_iterations,
                                               num_training_steps)
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def _get_train_sampler(self, dataset=None):
        """TRL's sampler, shuffled with `data_seed` where one is set (verl: seed 1 whatever the run's seed)."""
        sampler = super()._get_train_sampler(dataset)
        if self.args.data_seed is not None:
            sampler.generator.manual_seed(self.args.data_seed)
        return sampler

    def get_decay_parameter_names(self, model) -> list[str]:
        """The parameters weight decay applies to: transformers' choice (no biases, no norms), or every one (verl's)."""
        if self.decay_every_parameter:
            return [name for name, _ in model.named_parameters()]
        return super().get_decay_parameter_names(model)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards, gathered over all processes (B_total, reward functions), kept for verl's advantages."""
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._gathered_rewards_per_func = rewards_per_func
        return rewards_per_func

    def _verl_advantages(self, local: int) -> torch.Tensor:
        """verl's GRPO advantages of this process's `local` completions: computed over every process's rewards
        (TRL's weighted sum of the reward functions; one function of weight 1 here, so the reward itself), then
        sliced as TRL slices its own (grpo_trainer.py `process_slice`: process_index x local)."""
        rewards_per_func = self._gathered_rewards_per_func
        rewards = (rewards_per_func * self.reward_weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
        advantages = verl_group_advantages(rewards, self.num_generations)
        start = self.accelerator.process_index * local
        return advantages[start : start + local]

    def _generate_and_score_completions(self, inputs):
        """TRL's rollouts, rewards and (B,) advantages (verl's in place of TRL's under `advantages: verl`); under
        ECHO, (B, T) hybrid advantages and a clip range per completion, from one no-grad forward of the policy
        that sampled them (the authors' old-log-prob pass) over this generation batch, z-scored over all
        processes' tokens."""
        output = super()._generate_and_score_completions(inputs)
        if self.advantage_rule == "verl" and self.model.training:
            local = output["advantages"]
            output["advantages"] = self._verl_advantages(len(local)).to(device=local.device, dtype=local.dtype)
        if self.update is None:
            return output
        p = self.update
        entropy, confidence = self._entropy_and_confidence(output, p["confidence_topk"])
        mask = output["completion_mask"] * output.get("tool_mask", 1)

        def reduce(t):
            return self.accelerator.reduce(t, reduction="sum")

        output["advantages"] = hybrid_advantages(output["advantages"], entropy, confidence, mask, p["alpha"], p["beta"],
                                                 p["s_max"], p["mult_coeff"], reduce)
        if p["use_adaptive_clip"]:
            output["clip_epsilon"] = adaptive_clip(confidence, mask, p["tail_window"], p["eps_min"], p["eps_max"],
                                                   p["kappa"])
            clip = self.accelerator.gather(output["clip_epsilon"])
            self._metrics["train"]["echo/clip_epsilon"].append(clip.mean().item())
        return output

    def _entropy_and_confidence(self, batch: dict, top_k: int):
        """(B, T) token entropies and top-k confidences of `batch`'s completions through TRL's per-token
        helper (it slices each family's image inputs per chunk), the model's logits in place of TRL's
        fused head (which computes no top-k)."""
        completion_ids = batch["completion_ids"]
        stats = LogitStatistics(self.model, completion_ids.size(1), self.temperature, top_k, self.token_confidence)
        keys = ("pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes", "num_tiles",
                "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            _, entropy, _ = self._get_per_token_logps_and_entropies(
                stats, torch.cat([batch["prompt_ids"], completion_ids], dim=1),
                torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1), completion_ids.size(1),
                batch_size=self.args.per_device_train_batch_size, compute_entropy=True,
                **{k: batch.get(k) for k in keys})
        return entropy, torch.cat(stats.confidence, dim=0)

    def _compute_loss(self, model, inputs):
        """TRL's GRPO loss; ECHO's per-completion clip ranges enter it as TRL's epsilons for this call
        ((B, 1) tensors broadcast in its clamp), its (B, T) advantages through `inputs` as TRL allows. Under
        `kl_clamp`, TRL's k3 is verl's clamped one: the policy's log-probs of this call (the first
        `_get_per_token_logps_and_entropies` call inside TRL's `_compute_loss`) rewrite the reference log-probs
        of a copy of `inputs` (`clamped_reference`), the buffered batch untouched."""
        clamp = self.kl_clamp is not None and self.beta != 0.0 and "ref_per_token_logps" in inputs
        if clamp:
            inputs = dict(inputs)
            self._kl_clamp_inputs = inputs
        fixed = self.epsilon_low, self.epsilon_high
        if "clip_epsilon" in inputs:
            self.epsilon_low = self.epsilon_high = inputs["clip_epsilon"].unsqueeze(1)
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self.epsilon_low, self.epsilon_high = fixed
            self._kl_clamp_inputs = None

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        """TRL's; inside a `_compute_loss` call under `kl_clamp`, the policy's log-probs (with their gradient)
        also set that call's reference log-probs to `clamped_reference`'s, before TRL reads them for its k3
        (grpo_trainer.py `_compute_loss`: the policy forward comes first, `per_token_kl` after it)."""
        out = super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, *args,
                                                         **kwargs)
        target, self._kl_clamp_inputs = self._kl_clamp_inputs, None  # only the loss's own policy forward
        if target is not None:
            target["ref_per_token_logps"] = clamped_reference(target["ref_per_token_logps"], out[0], self.kl_clamp)
        return out

    def _generate(self, prompts: list):
        # one autocast region around the round: autocast caches its bf16 copies of the fp32 master weights
        # until the outermost region exits, so transformers' generate casts them once per round instead of
        # at every decoded token (accelerate's per-forward autocast; issue 23 finding 7, tests/test_per_sample.py)
        with generation_precision(self.model):
            try:
                return self._generate_votes(prompts)
            except (ValueError, MemoryError, torch.OutOfMemoryError, PlaceholderInRolloutError):
                raise  # the project's own refusals and memory say what to do already
            except Exception as err:
                if getattr(self, "use_vllm", False):
                    raise vllm_rollout_failure(err) from err
                raise

    def _generate_votes(self, prompts: list):
        trained = self.num_generations
        if not self.model.training or self.n_votes == trained:
            out = super()._generate(prompts)
            refuse_placeholders(out[1], self.forbidden_token_ids)
            return out
        copies = self.n_votes // trained  # check_votes: a whole multiple
        expanded = [prompt for prompt in prompts for _ in range(copies)]
        self.num_generations = copies  # TRL's vLLM server mode samples each run of identical prompts at once
        try:
            prompt_ids, completion_ids, tool_mask, completions, logprobs, extra, images, tool_images = (
                super()._generate(expanded))
        finally:
            self.num_generations = trained
        refuse_placeholders(completion_ids, self.forbidden_token_ids)
        if self.trained_votes == "verl":  # verl's trained votes moved to the front of their rows
            order = self._verl_vote_order([len(p) + len(c) for p, c in zip(prompt_ids, completion_ids)], copies)

            def permuted(values):  # every per-sample list of the round, as `pick` below takes them
                return values if not values else [values[i] for i in order]

            prompt_ids, completion_ids, tool_mask, completions, logprobs, images, tool_images = map(
                permuted, (prompt_ids, completion_ids, tool_mask, completions, logprobs, images, tool_images))
            extra = {key: permuted(v) if isinstance(v, list) and len(v) == len(expanded) else v
                     for key, v in extra.items()}
        keep = range(0, len(expanded), copies)  # the first sample of each row is trained, the others only vote

        def pick(values):
            return None if values is None else [values[i] for i in keep]

        def extras(values):
            return [values[i + 1 : i + copies] for i in keep]

        extra = {key: pick(v) if isinstance(v, list) and len(v) == len(expanded) else v for key, v in extra.items()}
        extra["extra_votes"] = extras([completion_text(c) for c in completions])
        extra["extra_vote_ids"] = extras([list(ids) for ids in completion_ids])
        return (pick(prompt_ids), pick(completion_ids), pick(tool_mask), pick(completions), pick(logprobs), extra,
                pick(images), pick(tool_images) if tool_images else tool_images)

    def _verl_vote_order(self, lengths: list[int], copies: int) -> list[int]:
        """This process's samples reordered so that each row's first sample is one verl trains
        (vote_selection.py): every process's token lengths gathered (the round's rows in process order, each
        prompt's rows consecutive), verl's choice made over the round with as many partitions as prompts (the
        authors' GPUs per round), and each local prompt's votes permuted among its own rows."""
        from accelerate.utils import gather_object

        votes_per_prompt = self.num_generations * copies
        every = gather_object([len(lengths)])  # samples per process
        offset = sum(every[: process_state().process_index])
        if offset % votes_per_prompt or len(lengths) % votes_per_prompt:
            raise ValueError(f"trained_votes: verl needs each prompt's {votes_per_prompt} votes on one process; this "
                             f"process holds samples {offset}..{offset + len(lengths) - 1}: give each process whole "
                             "prompts (generation_batch_size a multiple of num_generations x processes) or use `first`")
        lengths_all = gather_object(list(lengths))
        chosen = verl_trained_votes(lengths_all, votes_per_prompt, self.num_generations,
                                    len(lengths_all) // votes_per_prompt)
        order = []
        for prompt in range(offset // votes_per_prompt, (offset + len(lengths)) // votes_per_prompt):
            start = prompt * votes_per_prompt - offset
            order += [start + i for i in trained_first_order(chosen[prompt], votes_per_prompt, copies)]
        return order


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


def refuse_placeholders(completion_ids, forbidden: set[int]) -> None:
    for i, ids in enumerate(completion_ids):
        found = forbidden.intersection(ids)
        if found:
            raise PlaceholderInRolloutError(
                f"rollout {i} contains forbidden token id(s) {sorted(found)} (image / video placeholders or ids past the "
                "tokenizer) although they are forbidden at "
                "sampling; the training forward would mismatch image features and tokens"
            )


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


def forbidden_token_kwargs(backend: str, token_ids: list[int], tokenizer_size: int) -> dict:
    """Sampling arguments that keep forbidden tokens out of rollouts. transformers' generate:
    `suppress_tokens` (TRL itself suppresses only the image token, not the video one); vLLM: only
    the other ids of the tokenizer are allowed (generation/vllm_settings.py says why)."""
    if backend == "hf":
        return {"suppress_tokens": list(token_ids)}
    return forbid_tokens_sampling_kwargs([i for i in token_ids if i < tokenizer_size], tokenizer_size)


def grpo_config(out_dir: Path, hp: dict, seed: int, generation_kwargs: dict | None = None,
                vllm_settings: dict | None = None) -> GRPOConfig:
    """GRPOConfig from a preset's hyper-parameters, for the processes `accelerate launch` started;
    `vllm_settings` (config `adaptation.vllm`) shape TRL's colocated engine when it generates."""
    num_processes = process_state().num_processes
    backend = rollout_backend(hp.get("rollout_backend", "auto"))
    on_gpu = torch.cuda.is_available()
    engine = grpo_vllm_kwargs(vllm_settings, hp["max_completion_length"]) if backend == "vllm" else {}
    return GRPOConfig(
        output_dir=str(out_dir / "trainer"),
        **batch_layout(hp, num_processes),
        num_generations=hp["num_generations"],
        max_completion_length=hp["max_completion_length"],
        temperature=hp["temperature"],
        num_train_epochs=hp["epochs"],
        num_iterations=hp.get("updates_per_generation", 1),
        beta=hp.get("kl_beta", 0.0),
        scale_rewards=hp.get("scale_rewards", "group"),
        loss_type=hp.get("loss_type", "dapo"),
        delta=hp.get("dual_clip"),  # verl's dual clip c (presets.py: the same loss)
        # TRL's corrections verl lacks (presets.py VERL_UPDATE): the policy-loss factor exp(old - vLLM's sampling
        # log-prob), truncated at 3 (TRL's default; vLLM rollouts only), and k3 times the ratio to the old policy
        vllm_importance_sampling_correction=hp.get("trl_vllm_is_correction", True),
        use_bias_correction_kl=hp.get("bias_corrected_kl", True),
        generation_kwargs=generation_kwargs or None,
        use_vllm=backend == "vllm",
        **engine,
        model_init_kwargs=reference_init_kwargs(on_gpu, process_state().device),
        **optimizer_arguments(hp, seed),
        disable_tqdm=False,
    )


def reference_init_kwargs(on_gpu: bool, device) -> dict | None:
    """How TRL loads the frozen KL reference (GRPOConfig.model_init_kwargs): only run forward, so bf16
    on GPUs (half its memory), and whole on this process's own GPU. TRL's default `device_map="auto"`
    (trl trainer/utils.py:1350-1351; grpo_trainer.py:997 clears it for MULTI_GPU and DeepSpeed, not
    FSDP) would spread every process's copy over all the node's GPUs before FSDP shards it (issue 23
    finding 6)."""
    return {"dtype": torch.bfloat16, "device_map": str(device)} if on_gpu else None


def shard_reference_per_block(model, accelerator):
    """TRL's `prepare_fsdp` for the KL reference, each transformer block sharded first (issue 23
    finding 6). TRL shards the reference as one unit (trl models/utils.py:338, `fully_shard(model)`),
    so every reference forward gathers the whole model on every GPU, where the policy is sharded per
    block (accelerate's TRANSFORMER_BASED_WRAP over the model's `_no_split_modules`). With the same
    blocks sharded here, TRL's call shards only the root's remaining parameters (embeddings, head):
    FSDP2's nesting, one block gathered at a time."""
    plugin = accelerator.state.fsdp_plugin
    if plugin.fsdp_version == 2:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mesh = getattr(accelerator, "torch_device_mesh", None)  # as TRL shards the root (models/utils.py:328-334)
        kwargs = {"reshard_after_forward": plugin.reshard_after_forward, "offload_policy": plugin.cpu_offload,
                  "mp_policy": plugin.mixed_precision_policy or MixedPrecisionPolicy(),
                  "mesh": mesh[tuple(accelerator.parallelism_config.fsdp_dim_names)] if mesh is not None else None}
        blocks = set(model._no_split_modules or ())
        for module in list(model.modules())[1:]:
            if type(module).__name__ in blocks:
                fully_shard(module, **kwargs)
    return trl_prepare_fsdp(model, accelerator)


@contextlib.contextmanager
def trl_construction_overrides(votes_per_trained: int):
    """GRPOTrainer's construction with two of TRL's choices replaced, where the trainer calls the names its
    module imported (trl grpo_trainer.py:71-73) and offers no other hook:
    - the KL reference sharded per block (`shard_reference_per_block`, issue 23 finding 6; line 1186);
    - the colocated vLLM engine sized for the vote expansion (finding 7): TRL sets `max_num_seqs` to
      the trained rollouts of a generation batch (per-device batch x TP x steps_per_generation, line
      1124), and `_generate_votes` submits n_votes / num_generations requests per trained rollout
      (TTRV 32 / 16, ECHO 64 / 32): without this, vLLM decodes a round in that many waves."""

    def vote_sized_engine(*args, max_num_seqs=None, **kwargs):
        return trl_VLLMGeneration(*args, max_num_seqs=max_num_seqs and max_num_seqs * votes_per_trained, **kwargs)

    saved = trl_grpo_trainer.prepare_fsdp, trl_grpo_trainer.VLLMGeneration
    trl_grpo_trainer.prepare_fsdp, trl_grpo_trainer.VLLMGeneration = shard_reference_per_block, vote_sized_engine
    try:
        yield
    finally:
        trl_grpo_trainer.prepare_fsdp, trl_grpo_trainer.VLLMGeneration = saved


def optimizer_arguments(hp: dict, seed: int) -> dict:
    """The TrainingArguments every adaptation shares (GRPO here, the Appendix C baselines in
    baselines.py): the preset's optimizer settings, fp32 master weights with bf16 autocast on GPUs,
    nothing saved or reported by the Trainer itself."""
    on_gpu = torch.cuda.is_available()
    return dict(
        learning_rate=hp["learning_rate"],
        lr_scheduler_type=hp.get("lr_scheduler", "cosine"),
        warmup_steps=hp.get("warmup_ratio", 0.0),  # a float in [0, 1) is a ratio of the total steps
        weight_decay=hp.get("weight_decay", 0.0),
        max_grad_norm=hp.get("max_grad_norm", 1.0),
        gradient_checkpointing=hp.get("gradient_checkpointing", True),
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        remove_unused_columns=False,
        use_cpu=not on_gpu,
        bf16=bf16_autocast(),  # generation/precision.py: the CPU rehearsal may ask for it too
        # reduce (under FSDP: reduce-scatter) gradients after every micro-batch: the Trainer otherwise runs all
        # but the last in `no_sync` (trainer.py ~1895), where FSDP2 keeps whole unsharded gradients (~15 GB per
        # GPU for 8B; issue 23 finding 4). Without several processes there is nothing to sync: a no-op.
        accelerator_config={"gradient_accumulation_kwargs": {"sync_each_batch": True}},
        seed=seed,
        data_seed=hp.get("data_seed"),
    )


def vllm_rollout_failure(err: Exception) -> RuntimeError:
    """A vLLM rollout's failure, with the way round it: colocated vLLM rollouts (what `rollout_backend: auto`
    picks where vLLM is installed) have not run on a GPU since the trainer's rewrite; transformers' generate has."""
    return RuntimeError(f"vLLM rollouts failed ({type(err).__name__}: {err}); set adaptation.rollout_backend: hf "
                        "(transformers' generate, slower, the path the CPU tests run) and rerun")


def rollout_backend(choice: str) -> str:
    """vLLM rollouts (colocated with the trainer) or transformers' generate; see choose_backend."""
    return choose_backend(choice, "adaptation.rollout_backend")


def freeze_vision_tower(model, setting) -> None:
    """Hyperparameter `freeze_vision` (models/families.py freezes_vision_encoder): VR-TTRL Appendix A and
    C.1 freeze the vision encoder and train the adapter; the TTRV authors' code freezes InternVL's only."""
    if freezes_vision_encoder(model.config.model_type, setting):
        log.info("vision encoder frozen; %d adapter parameters in its tower train", freeze_vision_encoder(model))


def out_of_memory_message(model, hp: dict, err: Exception) -> str:
    free, total = torch.cuda.mem_get_info() if torch.cuda.is_available() else (0, 0)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "this device"
    return (
        f"out of GPU memory adapting a {parameter_count(model) / 1e9:.2f}B-parameter model on {device} "
        f"({total / 2**30:.0f} GiB): {err}\nLower adaptation.hyperparameters.<task>.micro_batch_size (now "
        f"{hp.get('micro_batch_size') or hp['num_generations']}) or generation_batch_size (now "
        f"{hp.get('generation_batch_size') or hp['num_generations']}), keep gradient_checkpointing on, shorten "
        "max_completion_length, or give the job more GPUs (models.<name>.gpus)."
    )


def save_adapted(trainer, processor, out: Path, dtype: torch.dtype) -> None:
    """The adapted weights in the checkpoint's own dtype (what evaluation loads), gathered whole from
    however many processes hold shards of them."""
    state = trainer.accelerator.get_state_dict(trainer.model)  # every process takes part
    if trainer.accelerator.is_main_process:
        model = trainer.accelerator.unwrap_model(trainer.model)
        model.save_pretrained(out, state_dict={k: v.to(dtype) for k, v in state.items()})
        save_config_dtype(model.config, out, dtype)
        processor.save_pretrained(out)
    trainer.accelerator.wait_for_everyone()


def save_config_dtype(config, out: Path, dtype: torch.dtype) -> None:
    """config.json saying `dtype`, the tensors' dtype: `save_pretrained` writes the in-memory model's
    dtype (transformers 5.23 modeling_utils.py:3433), fp32 for master weights, and `dtype="auto"`
    (evaluation, vLLM) would load a bf16 checkpoint in fp32 (issue 23 finding 1). A copy: the live
    model keeps saying what it holds."""
    config = copy.deepcopy(config)
    config.dtype = dtype
    for key in config.sub_configs:  # what from_pretrained sets on load (modeling_utils.py _get_dtype)
        if getattr(config, key, None) is not None:
            getattr(config, key).dtype = dtype
    config.save_pretrained(out)


class TestTimeAdaptation:
    """One TestTimeGRPOTrainer for every adaptation a job runs: its colocated vLLM engine and KL
    reference model are built once. Per-sample VR-TTRL adapts 200 samples per split, and an engine
    built per sample costs 30-120 s and keeps its GPU memory when deleted (vllm-project/vllm 21073;
    issue 23 finding 3). `run` adapts on a manifest; each run after the first starts as the first
    did: the caller restores the weights (per_sample.py), `run` empties AdamW's state, lets the
    Trainer build a fresh lr schedule (it does on every `train()`), and reseeds."""

    def __init__(self, model, processor, manifest: pd.DataFrame, image_root: Path, method: dict, out_dir: Path,
                 seed: int, task=None):
        hp = fit_to_samples(method["hyperparameters"], len(manifest))
        check_verl_update(hp)
        if hp["temperature"] == "family":  # the TTRV authors' rollout temperature of the model's family
            hp = {**hp, "temperature": ttrv_logged_temperature(model.config)}
        n_votes = check_votes(hp)
        freeze_vision_tower(model, hp.get("freeze_vision", False))
        if hp.get("vision_drop_path") == "checkpoint":
            raise ValueError("vision_drop_path: checkpoint is resolved per model by the plan (plan/resources.py "
                             "job_method_settings); give --method-json a rate")
        if hp.get("vision_drop_path"):  # the authors' InternViT drops paths in training (models/families.py)
            log.info("vision drop path %s: %d residual branches hooked", hp["vision_drop_path"],
                     add_vision_drop_path(model, float(hp["vision_drop_path"])))
        micro = hp.get("micro_batch_size") or hp["num_generations"]
        self.model, self.processor, self.hp, self.runs = model, processor, hp, 0
        self.new_reward = lambda: GroupReward(method["reward"], method.get("reward_params", {}), hp["num_generations"],
                                              task, micro, reward_grid=hp.get("advantages", "trl") != "verl")
        self.reward = self.new_reward()
        forbidden = unsampleable_token_ids(model.config, processor.tokenizer)
        backend = rollout_backend(hp.get("rollout_backend", "auto"))
        if backend == "vllm":
            os.environ.update(grpo_vllm_environment(method.get("vllm")))
        self.progress = ProgressLog()
        self.trainer = TestTimeGRPOTrainer(
            update=method.get("update"),
            model=model,
            reward_funcs=[self.reward],
            args=grpo_config(out_dir, hp, seed, forbidden_token_kwargs(backend, forbidden, len(processor.tokenizer)),
                             method.get("vllm")),
            train_dataset=adaptation_dataset(manifest, image_root),
            processing_class=processor,
            callbacks=[self.progress],
            n_votes=n_votes,
            forbidden_token_ids=forbidden,
            lr_schedule_per=hp.get("lr_schedule_per", "step"),
            advantages=hp.get("advantages", "trl"),
            kl_clamp=hp.get("kl_clamp"),
            decay_every_parameter=hp.get("decay_every_parameter", False),
            trained_votes=hp.get("trained_votes", "first"),
            token_confidence=hp.get("token_confidence", "top_k"),
        )
        self.reward.policy = (model, processor)
        if backend == "vllm":  # TRL 1.16 + vLLM expand image placeholders twice (huggingface/trl 6294, 6401)
            llm = self.trainer.vllm_generation.llm
            collapse_prompts_before_generate(llm, model.config.image_token_id, image_span_token_ids(processor))
            probe_colocated_expansion(llm, processor, self.trainer.train_dataset[0]["image"],
                                      placeholder_token_ids(model.config))

    def _start_over(self, manifest: pd.DataFrame, image_root: Path) -> None:
        """The trainer as a new one would be, on `manifest`: the Trainer rebuilds its state, step
        count and lr schedule in every `train()` (transformers trainer.py _prepare_for_training) but
        keeps its (accelerate-prepared) optimizer, whose state is emptied; TRL's generation counters
        restart, the engine reloads the (restored) weights at the first generation, and the reward
        is a new one."""
        trainer = self.trainer
        trainer.train_dataset = adaptation_dataset(manifest, image_root)
        if trainer.optimizer is not None:
            trainer.optimizer.state.clear()
        trainer._step, trainer._buffered_inputs = 0, None
        if trainer.use_vllm:
            trainer._last_loaded_step = -1
        self.reward = trainer.reward_funcs[0] = self.new_reward()  # its log, and a seeded reward's stream
        self.reward.policy = (self.model, self.processor)
        self.progress.losses, self.progress.learning_rates, self.progress.step_times = [], [], []

    def run(self, manifest: pd.DataFrame | None = None, image_root: Path | None = None,
            before: WeightSnapshot | None = None, save_dtype: torch.dtype | None = None) -> pd.DataFrame:
        """GRPO on `manifest` (the constructor's on the first run); the log as `adapt` returns it."""
        if self.runs:
            self._start_over(manifest, image_root)
        self.runs += 1
        model, trainer = self.model, self.trainer
        before = before or WeightSnapshot(model)
        # as TRL's constructor does: one seed per process (grpo_trainer.py:1103), so a group split across
        # processes samples different rollouts; every run samples as the first
        set_seed(trainer.args.seed, device_specific=True)
        try:
            trainer.train()
        except torch.OutOfMemoryError as err:
            raise MemoryError(out_of_memory_message(model, self.hp, err)) from err
        model.eval()  # the trainer leaves train mode on; predictions right after adapting need eval mode
        records = pd.DataFrame(self.reward.records)  # one row per generation round
        records.attrs["optimizer_steps"] = trainer.state.global_step
        records.attrs["losses"] = self.progress.losses
        records.attrs["learning_rates"] = self.progress.learning_rates
        records.attrs["step_times"] = self.progress.step_times
        records.attrs["temperature"] = self.hp["temperature"]  # resolved: "family" names none
        records.attrs["verifications"] = self.reward.verifications
        records.attrs["weights_changed"] = before.changed_fraction(model)
        records.attrs["weights_changed_saved"] = before.changed_fraction(model, save_dtype) if save_dtype else None
        log.info("%d optimizer steps changed %.2f%% of the trainable weights", trainer.state.global_step,
                 100 * records.attrs["weights_changed"])
        return records


def adapt(model, processor, manifest: pd.DataFrame, image_root: Path, method: dict, out_dir: Path, seed: int,
          task=None, save_dtype: torch.dtype | None = None, before: WeightSnapshot | None = None,
          save_to: Path | None = None) -> pd.DataFrame:
    """Run GRPO on `manifest`'s prompts with `method`'s reward; returns the per-generation-round log,
    with attrs `optimizer_steps` and the share of trainable weights the adaptation changed
    (`weights_changed`, and `weights_changed_saved` after casting to `save_dtype`), measured against
    `before` (default: a snapshot taken here). With `save_to`, the adapted model is saved there in
    `save_dtype`."""
    adaptation = TestTimeAdaptation(model, processor, manifest, image_root, method, out_dir, seed, task)
    records = adaptation.run(before=before, save_dtype=save_dtype)
    if save_to is not None:
        save_adapted(adaptation.trainer, processor, save_to, save_dtype or model.dtype)
    return records
