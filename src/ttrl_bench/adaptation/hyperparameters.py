"""The hyper-parameter blocks of the method presets (presets.py), each with where its numbers come from:
TTRV's (the authors' run logs, and Appendix A), VR-TTRL's, ECHO's, the VR-TTRL Appendix C.1 baselines', verl's
update in TRL's trainer (`VERL_UPDATE`), the keys every preset accepts (`OPTIONAL_HYPERPARAMETERS`), and
`lora_for_dataset`, which resolves a LoRA adapter per training set."""

from __future__ import annotations

# Two sources for TTRV's settings disagree; both are presets.
#
# The authors' published run logs (Akshit21112002/TTRV, verl/logs/<dataset>/<n>/*.log, e.g.
# ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log; each log starts with the run's full config) and the verl fork
# that wrote them. THE DEFAULT: these runs produced the published numbers we compare with. verl's update, in
# TRL's knobs (the authors' fork: verl/workers/fsdp_workers.py, verl/workers/actor/dp_actor.py):
# - a round: train_batch_size prompts (= the GPU count in every log: 4 here; 8-GPU runs are the
#   `ttrv-*-8-prompts` presets) x n_vote 32 rollouts generated at once, the first 16 of each prompt trained on
#   (n 16): TRL's generation batch of 4 x 16 trained completions, old log-probs frozen over it;
# - one optimizer step per 16 trained rollouts: verl multiplies ppo_mini_batch_size 1 by rollout.n 16
#   (fsdp_workers.py:125-126) and update_policy steps the optimizer once per mini-batch (dp_actor.py:303-406),
#   so a round takes as many steps as it has prompts: prompts_per_step 1, 4 steps per generation batch;
# - loss token-mean per micro-batch of 2 rollouts divided by the accumulation count (dp_actor.py:317-395,
#   loss_agg_mode token-mean, ppo_micro_batch_size_per_gpu 2): TRL's loss_type "bnpo" with micro-batch 2;
# - PPO clip 0.2 and dual clip c = 3 (clip_ratio_c, core_algos compute_policy_loss): TRL's `delta` 3.0, the
#   same loss and gradient (for A < 0 both give |A| min(max(r, clip(r)), 3); for A > 0, clip(r) < 3);
# - lr 5e-7, the scheduler stepped once per round (fsdp_workers.py:553, once per update_actor call), warm-up
#   int(0.03 x rounds) rounds (fsdp_workers.py:334), cosine to 0 (torch_functional.py:410-450, min_lr_ratio 0);
# - KL loss k3 (low_var_kl) 1e-3 on the trained rollouts, weight decay 1e-2, grad clip 1.0, 1024 new tokens,
#   2 epochs, data shuffled with seed 1 and drop_last (ray_trainer.py:462-497: RandomSampler seeded 1 ==
#   TRL's RepeatSampler seeded 1, both torch.randperm; incomplete rounds dropped);
# - rollout temperature per family (1.5 in every Qwen2.5-VL log, 1.0 in every InternVL log: "family",
#   models/families.py).
# verl's update without TRL's extra corrections (issue 34 items 4-6): the hyper-parameters of VERL_UPDATE below,
# off by default (TRL's behaviour), make one TRL step compute what verl's does (adaptation/verl_update.py, trainer.py):
# - verl clamps k3 to [-10, 10] (core_algos.py:485-489, kl_penalty low_var_kl): `kl_clamp` 10 (default None: TRL's
#   unclamped k3). k3 exceeds 10 only where a token's log-ratio to the reference passes +2.61 or -11.0 nats, i.e.
#   in a run already collapsing: there verl stops the KL gradient of those tokens and TRL keeps pulling them back.
# - verl's GRPO advantages (core_algos.py:113-154): float32 mean and unbiased std of the group on the driver's CPU,
#   (r - mean) / (std + 1e-6), rewards as the reward manager stores them (float32, ttrl.py:115-161); TRL divides by
#   std + 1e-4 and we round rewards to 2^-16: `advantages` "verl" (default "trl"). Equal rewards then give
#   verl's float32 residue (16 x 0.35: advantage 0.0289 for every rollout of the group), not 0.
# - TRL's vLLM importance-sampling factor exp(old - sampling log-prob), truncated at 3, on the policy loss
#   (grpo_trainer.py `vllm_importance_sampling_correction`); verl has none (dp_actor.py:357-367):
#   `trl_vllm_is_correction` False (default True).
# - TRL's k3 times the ratio to the old policy (grpo_trainer.py `use_bias_correction_kl`; differentiable, so it
#   changes the KL gradient even on-policy); verl's KL loss is the plain token-mean of k3 (dp_actor.py:377-387):
#   `bias_corrected_kl` False (default True).
# - which 16 of the 32 votes are trained: verl reorders the round's rollouts to balance tokens across GPUs before
#   the reward, and keeps each prompt's first 16 in that order (ray_trainer.py:974-1000, 1140-1160): the votes in
#   the first-listed Karmarkar-Karp partitions, so its choice leans on the completions' lengths.
#   `trained_votes` "verl" reproduces that choice (adaptation/vote_selection.py, equal to verl's partitioner on
#   3,000 random rounds); "first" (default) trains the first 16 sampled, an unbiased draw.
# - how a step's 16 are drawn: after the cut verl balances the 64 trained again (ray_trainer.py:1182), each GPU
#   takes its partition and its mini-batches of 4 are consecutive chunks of it (dp_actor.py:294-300), so a step's
#   16 = 4 per GPU; TRL shuffles a generation batch across its steps. `step_order` "verl" deals them as verl does
#   (vote_selection.py verl_step_order), "shuffled" (default) is TRL's. Both mix prompts within a step.
# - a non-finite gradient norm skips the optimizer step, as verl's _optimizer_step (dp_actor.py:198-212), under
#   every setting (trainer.py _get_grad_norm).
# Left out, with what it changes:
# - old and reference log-probs: verl computes them on all 32 votes; only the 16 trained use them (no effect).
TTRV_HYPERPARAMETERS = {
    "learning_rate": 5e-7,
    "lr_scheduler": "cosine",
    "warmup_ratio": 0.03,
    "lr_schedule_per": "round",
    "num_generations": 16,
    "n_votes": 32,
    "temperature": "family",
    "max_completion_length": 1024,
    "epochs": 2,
    "prompts_per_step": 1,
    "generation_batch_size": 4 * 16,  # a round: 4 prompts (4 GPUs) x 16 trained rollouts
    "kl_beta": 1e-3,
    "weight_decay": 1e-2,
    "max_grad_norm": 1.0,
    "scale_rewards": "group",
    "loss_type": "bnpo",
    "dual_clip": 3.0,
    "data_seed": 1,
    # The vision encoder frozen and its adapter trained, for every family. The authors' code freezes
    # InternVL's encoder only (verl fsdp_workers.py:236-243, "internvl will occur a bug when using the
    # vision encoder") and trains Qwen2.5-VL's whole tower: protocol `authors` sets freeze_vision "authors"
    # (plan/protocols.py); the paper is silent.
    "freeze_vision": True,
    # Method, not only memory: with "bnpo" each micro-batch of 2 is one token-mean (the authors' micro-batch).
    "micro_batch_size": 2,
    # Memory (docs/gpu-runs.md: one forward over 8 x 32 rollouts ran out of memory on 80 GB).
    "gradient_checkpointing": True,
}

# TTRV Appendix A "Implementation Details": AdamW, cosine schedule, peak lr 5e-7, 32 rollouts at
# temperature 1.0, max response 1024 tokens; no KL, weight decay or warm-up is stated. Epochs and
# prompts per step from the authors' run script (2 epochs, batch 8 prompts).
# The update is TRL's own (one step per 8 prompts, lr stepped per optimizer step, TRL's default loss), as
# the appendix describes no other.
TTRV_APPENDIX_A_HYPERPARAMETERS = {
    **TTRV_HYPERPARAMETERS,
    "warmup_ratio": 0.0,
    "lr_schedule_per": "step",
    "num_generations": 32,
    "n_votes": 32,
    "temperature": 1.0,
    "prompts_per_step": 8,
    "generation_batch_size": None,
    "kl_beta": 0.0,
    "weight_decay": 0.0,
    "loss_type": "dapo",
    "dual_clip": None,
    "data_seed": None,
    "micro_batch_size": 4,
}

# VR-TTRL Appendix A: N = 8 at temperature 0.6, lr 5e-7, weight decay 1e-2, KL 1e-2 (TRL's
# default k3 "low-variance" estimator), grad clip 1.0, 5 generation rounds x 1 update per sample,
# vision encoder frozen, the adapter trained (Appendix C.1: "language-side and adapter parameters, with the
# vision encoder frozen"; models/families.py freeze_vision_encoder). The response length is not stated;
# 1024 as in TTRV (the `authors` protocol: Seg-Zero's 2,000, visionreasoner_7b.yaml:6, plan/protocols.py). The
# loss is TRL's dapo, the token mean over the step as Seg-Zero's on one device; no entropy bonus (Seg-Zero's
# default 1e-3 is not among the terms Appendix A lists).
VR_TTRL_HYPERPARAMETERS = {
    "learning_rate": 5e-7,
    "num_generations": 8,
    "temperature": 0.6,
    "max_completion_length": 1024,
    "epochs": 5,  # generation rounds on the one sample
    "updates_per_generation": 1,
    "prompts_per_step": 1,
    "kl_beta": 1e-2,
    "weight_decay": 1e-2,
    "max_grad_norm": 1.0,
    "scale_rewards": "group",
    "freeze_vision": True,
    "updates": True,
    "micro_batch_size": 4,
    "gradient_checkpointing": True,
}

# ECHO's update rule (adaptation/echo.py), the authors' defaults (ppo_trainer.yaml, algorithm.hybrid_adv); the paper
# names alpha, beta and a. Here, not in echo.py: the presets, the plan and the figures read them without torch.
ECHO_DEFAULTS = {
    "alpha": 1.0,  # weight of z(entropy)
    "beta": 1.0,  # weight of z(1 - confidence)
    "s_max": 2.0,  # clamp of S
    "mult_coeff": 0.1,  # the paper's a (Eq. 17)
    "tail_window": 16,  # W_tail (Eq. 13: "set to 16 in our code")
    "confidence_topk": 5,
    "eps_min": 0.05,
    "eps_max": 0.2,
    "kappa": 4.0,
    "use_adaptive_clip": True,  # False: TRL's fixed epsilon (ECHO Table 3, the ablation's "-CA-Clip" rows)
}


def check_update(params: dict) -> dict:
    """ECHO's parameters with the defaults filled in; an unknown name is refused."""
    unknown = set(params) - set(ECHO_DEFAULTS)
    if unknown:
        raise KeyError(f"echo update: unknown parameter(s) {sorted(unknown)}; known: {', '.join(ECHO_DEFAULTS)}")
    return {**ECHO_DEFAULTS, **params}


# ECHO Appendix A.3 Table 5 ("following the TTRL setup"): 64 rollouts vote, 32 are trained on, train batch 5
# prompts, PPO mini-batch 1 prompt (verl multiplies ppo_mini_batch_size 1 by rollout.n, then divides it among
# the GPUs, fsdp_workers.py:171-172, and steps the optimizer once per mini-batch, dp_actor.py:434-444, 593: one
# prompt's 32 rollouts a step, so 5 optimizer steps per generation batch, the later ones off-policy: where the
# clip range acts), micro-batch 1, lr 5e-7, KL loss 1e-3 (verl low_var_kl = TRL's k3). Table 5 gives
# only the validation temperature (0.6, evaluation's); the rest from the authors' script
# (user683/ECHO verl/examples/ttrl_echo/Qwen2.5/geometry3k.sh, whose batch 8 and 32/32 votes Table 5
# overrides): rollout temperature 0.8, 3072 new tokens (1024 * K, K = 3), 5 epochs, cosine schedule with 3%
# warm-up; verl's defaults (ppo_trainer.yaml): weight decay 1e-2, grad clip 1.0, clip ratio 0.2, std-scaled
# group advantages, vision tower trained (no freeze in the authors' code). The same settings run MM-UPT and
# supervised GRPO, so the three differ in the update rule or the reward alone.
# Departures: TRL shuffles a generation batch's completions across its optimizer steps (verl balances the round
# into one partition per GPU and takes consecutive chunks of each: `step_order` "verl" under `authors`); TRL's loss
# over the whole step (dapo) and no dual clip.
# Where the paper and the authors' shipped scripts differ, the scripts' value is the `authors` protocol's
# (plan/protocols.py, config `adaptation.hyperparameters.math`; the presets keep the paper's, the `clean` run):
# - prompts per round: Table 5's 5 vs the script's DATA_TRAIN_BATCH_SIZE=8 (geometry3k.sh:26; its checkpoint
#   name global_step_1310 = floor(2,101 Geometry3k rows / 8) x 5 epochs agrees): generation_batch_size 8 x 32;
# - votes: Table 5's 64 vs the script's N_VOTES_PER_PROMPT=32 = N_SAMPLES_PER_PROMPT=32 (geometry3k.sh:27-28):
#   n_votes 32, every vote trained;
# - the loss: verl's token-mean per micro-batch of 2 (ppo_micro_batch_size_per_gpu 2, geometry3k.sh:30;
#   loss_agg_mode token-mean, ppo_trainer.yaml) with dual clip c = 3 (clip_ratio_c, core_algos.py:780-786):
#   TRL's loss_type "bnpo" (token mean over the local batch, trl grpo_config.py) with micro_batch_size 2 and
#   `delta` 3.0 (grpo_trainer.py: the ratio capped at delta), as TTRV_HYPERPARAMETERS above;
# - token confidence and votes: `token_confidence` "sampled" and `answer_parser` "boxed" (adaptation/echo.py,
#   evaluation/math_answers.py).
# - the GeoQA cells' LoRA adapter (`lora`, adaptation/config.py): their evaluation loads a LoRA adapter of the
#   GeoQA run (standalone_inference.py:22, .../geoQA-Qwen2.5-VL-7B/.../global_step_654/actor/lora_adapter); its
#   rank and alpha are the scripts' commented-out `lora_rank=128` / `lora_alpha=128` (geometry3k.sh:108-109),
#   its targets verl's default `target_modules: all-linear` (ppo_trainer.yaml:119), applied as their verl
#   applies it (fsdp_workers.py:311-323: peft's get_peft_model, bias "none"); the reference is the model with
#   the adapter off, as TRL does for a peft model. Geometry3k trains fully (its checkpoint is not an adapter).
ECHO_HYPERPARAMETERS = {
    "learning_rate": 5e-7,
    "lr_scheduler": "cosine",
    "warmup_ratio": 0.03,
    "num_generations": 32,
    "n_votes": 64,
    "temperature": 0.8,
    "max_completion_length": 3072,
    "epochs": 5,
    "prompts_per_step": 1,
    "generation_batch_size": 5 * 32,  # Table 5's train batch of 5 prompts, generated and scored at once
    "kl_beta": 1e-3,
    "weight_decay": 1e-2,
    "max_grad_norm": 1.0,
    "scale_rewards": "group",
    "freeze_vision": False,
    "micro_batch_size": 1,
    "gradient_checkpointing": True,
}

# VR-TTRL Appendix C.1 baselines (adaptation/baselines.py), per sample and restored after each as
# VR-TTRL. C.1 gives the losses, the pseudo-labels and the trainable subset ("the same parameter
# subset as in VR-TTRL ... vision encoder frozen"); "K gradient steps" and "the same computational
# budget as VR-TTRL" (C.2) leave K open: VR-TTRL's 5 updates per sample. The optimizer settings
# (lr 5e-7, weight decay 1e-2, grad clip 1.0) are not stated either: VR-TTRL's (Appendix A). No KL
# term: C.1's losses have none.
BASELINE_HYPERPARAMETERS = {
    "learning_rate": VR_TTRL_HYPERPARAMETERS["learning_rate"],
    "weight_decay": VR_TTRL_HYPERPARAMETERS["weight_decay"],
    "max_grad_norm": VR_TTRL_HYPERPARAMETERS["max_grad_norm"],
    "epochs": VR_TTRL_HYPERPARAMETERS["epochs"],  # K optimizer steps on the one sample
    "max_completion_length": VR_TTRL_HYPERPARAMETERS["max_completion_length"],  # of the pseudo-answer
    "freeze_vision": True,
    "trainable": "language",  # C.1; "norm": Tent's own normalisation-layer parameters
    "updates": True,
    "gradient_checkpointing": True,
}

# verl's update in TRL's trainer (the comment above TTRV_HYPERPARAMETERS says what each changes; adaptation/verl_update.py
# how). Defaults, where a preset sets none, are TRL's behaviour: trl_vllm_is_correction True, bias_corrected_kl
# True, kl_clamp None, advantages "trl". The `authors` protocol (plan/protocols.py; config/ttrv.yaml, dare.yaml)
# sets these values for every mcq method; no preset sets them.
VERL_UPDATE = {
    "trl_vllm_is_correction": False,
    "bias_corrected_kl": False,
    "kl_clamp": 10.0,
    "advantages": "verl",
    # verl's AdamW decays biases and norms too (fsdp_workers.py:322-327); transformers' Trainer spares them
    "decay_every_parameter": True,
}

# Keys every preset accepts though not every preset sets them.
OPTIONAL_HYPERPARAMETERS = {
    "weight_decay", "max_grad_norm", "rollout_backend", "updates_per_generation", "freeze_vision", "n_votes",
    "micro_batch_size", "generation_batch_size", "gradient_checkpointing", "warmup_ratio", "lr_scheduler",
    "lr_schedule_per", "loss_type", "dual_clip", "data_seed", *VERL_UPDATE,
    # the `authors` protocol's (plan/protocols.py): the votes' parser ("robust" unless set) and the chat template
    "answer_parser", "chat_template",
    # ECHO's token confidence (adaptation/echo.py): "top_k" unless set
    "token_confidence",
    # which votes are trained (adaptation/vote_selection.py): "first" unless set; verl's under `authors`
    "trained_votes",
    # how a round's rollouts make its optimizer steps (adaptation/vote_selection.py verl_step_order): TRL's
    # "shuffled" unless set; "verl" under `authors`
    "step_order",
    # the rounds after which a training set's run stops, its schedule the whole run's ({dataset: rounds},
    # rounds_for_dataset; adaptation/utils.py StopAfterRounds): none unless set (ECHO's `authors`: GeoQA, 654)
    "stop_after_rounds",
    # TTRV's diversity term (rewards/voting.py ttrv `entropy`): the preset's "paper" unless set; "normalized"
    # (H / log M) under `authors`
    "diversity_entropy",
    # stochastic depth in the vision encoder's training forward (models/families.py): a rate, or "checkpoint" for
    # the original checkpoint's (plan/resources.py resolves it per model); none unless set
    "vision_drop_path",
    # a LoRA adapter trained instead of the full model (adaptation/config.py lora_config): {rank, alpha,
    # target_modules, datasets: the training sets it applies to}; none unless set (ECHO's `authors`: GeoQA)
    "lora",
}


LORA_KEYS = {"rank", "alpha", "target_modules", "datasets"}


def lora_for_dataset(lora: dict | None, dataset: str) -> dict | None:
    """Hyperparameter `lora` for one adaptation job: its adapter settings where `dataset` (the training set) is
    one of `lora["datasets"]`, else None (full fine-tuning). ECHO's `authors` protocol trains GeoQA's adapter
    and Geometry3k's full model (the comment above ECHO_HYPERPARAMETERS)."""
    if lora is None:
        return None
    unknown = set(lora) - LORA_KEYS
    if unknown or not {"rank", "alpha", "datasets"} <= set(lora):
        raise ValueError(f"adaptation.hyperparameters.<task>.lora = {lora!r}: needs rank, alpha and datasets "
                         f"(target_modules optional); unknown: {sorted(unknown)}")
    return {k: v for k, v in lora.items() if k != "datasets"} if dataset in lora["datasets"] else None


def rounds_for_dataset(stop: dict | int | None, dataset: str) -> int | None:
    """Hyper-parameter `stop_after_rounds` for one adaptation job: the rounds given for `dataset` (the training
    set), else None (the whole run). ECHO's `authors` protocol stops GeoQA at their checkpoint's 654 rounds."""
    if stop is None or isinstance(stop, int):
        return stop
    if not isinstance(stop, dict):
        raise ValueError(f"adaptation.hyperparameters.<task>.stop_after_rounds = {stop!r}: a mapping "
                         "{training set: rounds}")
    return stop.get(dataset)
