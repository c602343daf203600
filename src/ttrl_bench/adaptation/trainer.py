"""`TestTimeGRPOTrainer`, TRL's GRPOTrainer with the overrides test-time adaptation needs: the
vote / trained rollout split (`n_votes` of which `num_generations` are trained, with verl's or the
first votes trained), placeholder tokens refused in rollouts, verl's advantages, KL clamp, weight
decay and per-round lr schedule (verl_update.py), and ECHO's token advantages and clip ranges
(echo.py)."""

from __future__ import annotations

import logging
import math
from unittest import mock

import torch
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer import grpo_trainer as trl_grpo

from ..generation.precision import generation_precision
from ..runs.processes import process_state
from .echo import LogitStatistics, adaptive_clip, check_token_confidence, hybrid_advantages
from .hyperparameters import check_update
from .placement import trl_construction_overrides
from .reward_bridge import completion_text
from .utils import vllm_rollout_failure
from .verl_update import check_verl_update, clamped_reference, per_round_schedule, steps_per_round, verl_group_advantages
from .vote_selection import STEP_ORDERS, TRAINED_VOTES, trained_first_order, verl_step_order, verl_trained_votes

log = logging.getLogger(__name__)


class PlaceholderInRolloutError(RuntimeError):
    """A rollout sampled an image / video placeholder token: the training forward would count one
    image token too many ("Image features and image tokens do not match", docs/gpu-runs.md)."""


def refuse_placeholders(completion_ids, forbidden: set[int]) -> None:
    for i, ids in enumerate(completion_ids):
        found = forbidden.intersection(ids)
        if found:
            raise PlaceholderInRolloutError(
                f"rollout {i} contains forbidden token id(s) {sorted(found)} (image / video placeholders or ids past the "
                "tokenizer) although they are forbidden at "
                "sampling; the training forward would mismatch image features and tokens"
            )


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
                 step_order: str = "shuffled", **kwargs):
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
        if step_order not in STEP_ORDERS:
            raise ValueError(f"adaptation.hyperparameters.<task>.step_order = {step_order!r}; known: {', '.join(STEP_ORDERS)}")
        self.step_order = step_order  # how a round's rollouts make its steps: TRL's shuffle or verl's chunks
        self.skipped_steps = 0  # optimizer steps skipped for a non-finite gradient norm (`_get_grad_norm`)
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

    def _prepare_inputs(self, generation_batch):
        """TRL's; under `step_order: verl` a round's rollouts are dealt into its steps as verl deals them
        (vote_selection.verl_step_order) where TRL shuffles them (`shuffle_sequence_dict`): this process's rows,
        balanced by token count into one partition per prompt."""
        if self.step_order == "shuffled" or not self.model.training:
            return super()._prepare_inputs(generation_batch)
        steps = steps_per_round(self.args)

        def in_verl_order(batch: dict) -> dict:
            lengths = (batch["prompt_mask"].sum(1) + batch["completion_mask"].sum(1)).tolist()
            order = verl_step_order(lengths, max(1, len(lengths) // self.num_generations), steps)
            return {key: value if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0)
                    else value[order] if isinstance(value, torch.Tensor) else [value[i] for i in order]
                    for key, value in batch.items()}

        with mock.patch.object(trl_grpo, "shuffle_sequence_dict", in_verl_order):
            return super()._prepare_inputs(generation_batch)

    def _get_grad_norm(self, model, grad_norm=None):
        """transformers' pre-clip norm; where it is not finite the step is skipped, as verl's `_optimizer_step`
        does (TTRV dp_actor.py:198-212: zero_grad instead of step): every gradient is set to None, so AdamW
        leaves each parameter and its moments untouched, and no NaN reaches the weights. Both protocols."""
        grad_norm = super()._get_grad_norm(model, grad_norm)
        value = float(grad_norm) if grad_norm is not None else 0.0
        if not math.isfinite(value):
            self.skipped_steps += 1
            log.warning("step %d: gradient norm %s is not finite; optimizer step skipped (%d so far)",
                        self.state.global_step + 1, value, self.skipped_steps)
            model.zero_grad(set_to_none=True)
        return grad_norm

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
        # at every decoded token (accelerate's per-forward autocast; issue 23 finding 7, tests/adaptation/test_per_sample.py)
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
