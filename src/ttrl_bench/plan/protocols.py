"""The two named protocols of a rerun (config `protocol`), as the config keys each one sets.

Layer 1 of the plan (config), its bottom: imports no other plan module (docs/DESIGN.md "The plan's layers").

`authors` reproduces the TTRV authors' pipeline (Akshit21112002/TTRV @b9cf778, their verl fork) around
the update: their chat template, their answer parser in the votes and in the evaluation, their
evaluation budget, their metric beside plain accuracy, and verl's update without TRL's two extra
corrections. `clean` is ours: the schema's defaults, each a stated departure (`SETTINGS`' reasons).
A config key the config sets itself wins over its protocol's value. An experiment may run other protocols
than the config's (`experiments.<e>.protocols`, config.py `variant`); each runs in its own results paths
(n20_random_authors beside n20_random). How each table says which protocol its cells ran:
results/paper_tables.py `provenance_notes`.
"""

from __future__ import annotations

PROTOCOL_NAMES = ("clean", "authors")


# (config key path, the authors' value, where their code has it, our `clean` value, why ours departs)
SETTINGS = [
    (("evaluation", "mcq", "chat_template"), "authors",
     "verl/utils/tokenizer.py hf_tokenizer: InternVL's template without newlines or system turn",
     "model", "the checkpoint's own template, the one it was tuned with"),
    (("adaptation", "hyperparameters", "mcq", "chat_template"), "authors", "the same template in training",
     "model", "as in evaluation"),
    (("evaluation", "mcq", "choice_parser"), "authors",
     "qwen_math_parser.py choice_answer_clean_gpqa (auto_extract 'gpqa'), graded by qwen_eval.py qwen_reward_fn_gpqa",
     "robust", "reads 'the answer is (C)' and boxed letters, never the article 'a' as option A"),
    (("adaptation", "hyperparameters", "mcq", "answer_parser"), "authors",
     "ttt_metrics.py test_time_train_metrics: votes are auto_extract's answers, an unreadable output's text included",
     "robust", "unreadable outputs pooled into one value (rewards/voting.py `unparsable`)"),
    (("evaluation", "mcq", "max_new_tokens"), 1024,
     "every log's data.max_response_length 1024, the validation's greedy budget",
     None, "the config's own budget (the demo: 6; the prompts ask for one letter)"),
    (("adaptation", "hyperparameters", "mcq", "advantages"), "verl",
     "core_algos.py compute_grpo_outcome_advantage: float32 (r - mean) / (std + 1e-6), unanimous groups included",
     "trl", "TRL's (r - mean) / (std + 1e-4) on rewards rounded to 2^-16, so a unanimous group gives exactly 0"),
    (("adaptation", "hyperparameters", "mcq", "kl_clamp"), 10.0,
     "core_algos.py kl_penalty 'low_var_kl': k3 clamped to [-10, 10]",
     None, "TRL's k3, unclamped"),
    (("adaptation", "hyperparameters", "mcq", "trl_vllm_is_correction"), False,
     "verl has no importance-sampling correction for the rollout engine's log-probs",
     True, "TRL's default (GRPOConfig.vllm_importance_sampling_correction)"),
    (("adaptation", "hyperparameters", "mcq", "decay_every_parameter"), True,
     "fsdp_workers.py AdamW over every parameter (biases and norms decayed too)",
     False, "transformers' Trainer: no weight decay on biases and norms"),
    (("adaptation", "hyperparameters", "mcq", "bias_corrected_kl"), False,
     "verl's KL term has no pi / pi_old factor",
     True, "TRL's default (GRPOConfig.use_bias_correction_kl)"),
    (("adaptation", "hyperparameters", "mcq", "trained_votes"), "verl",
     "ray_trainer.py:974-1000, 1140-1160: the prompt's first 16 of 32 votes after _balance_batch's Karmarkar-Karp reorder",
     "first", "the first 16 sampled: an unbiased draw, independent of the completions' lengths"),
    (("adaptation", "hyperparameters", "mcq", "step_order"), "verl",
     "ray_trainer.py:1182 _balance_batch after the reward (one partition per GPU = per prompt), dp_actor.py:294-300: "
     "each GPU's mini-batches consecutive chunks of its partition",
     "shuffled", "TRL's shuffle of a round's rollouts across its steps (grpo_trainer.py _prepare_inputs)"),
    (("adaptation", "hyperparameters", "mcq", "vision_drop_path"), "checkpoint",
     "their logs' vision_config.drop_path_rate (0.1 InternVL3, 0.0 InternVL2.5): the remote-code InternViT drops "
     "paths in the update's train-mode forward (dp_actor.py:283), not in its eval-mode log-probs (:233)",
     None, "the -hf checkpoint as transformers runs it: no drop path"),
    (("adaptation", "hyperparameters", "mcq", "freeze_vision"), "authors",
     "fsdp_workers.py:236-243: InternVL's vision_model frozen (its mlp1 projector trains); every other family, "
     "Qwen2.5-VL included, trains its whole vision tower",
     None, "the presets' vision encoder frozen for every family, its adapter trained (VR-TTRL Appendix C.1; "
     "the TTRV paper is silent)"),
    (("adaptation", "hyperparameters", "mcq", "diversity_entropy"), "normalized",
     "ttt_metrics.py:25-46 test_time_train_metrics: rewards_en = p - 0.75 H / log M (M distinct answers; 0 when M "
     "is 1); the group constant cancels in the advantages, except in verl's float32 residue of an agreeing group",
     None, "the paper's Eq. 7: p - 0.75 H (the preset's `entropy: paper`)"),
    # VR-TTRL (no public code): VisionReasoner's evaluation, dvlab-research/VisionReasoner @a455092
    # (vision_reasoner/models/vision_reasoner_model.py, evaluation/evaluation_segmentation.py), the base
    # VR-TTRL builds on; the rewards follow Seg-Zero @42a3345 under both protocols (rewards/grounding.py)
    (("evaluation", "grounding", "sam2"), "facebook/sam2-hiera-large-hf",
     "vision_reasoner_model.py:35,61 SAM2ImagePredictor.from_pretrained('facebook/sam2-hiera-large') (SAM2, not "
     "SAM2.1; evaluation_segmentation.py:21), the same weights in transformers' format (evaluation/masks.py); "
     "gIoU / cIoU on its masks",
     None, "no SAM2 unless the config names one: box masks, box_giou / box_ciou, our own metrics, never in a "
     "published mask cell"),
    (("evaluation", "grounding", "input_size"), 840,
     "vision_reasoner_model.py:46 resize_size 840, :222-225 every image resized to 840 x 840 (bilinear), "
     ":110-119 answers scaled back with int(v * W / 840 + 0.5); the 10 px / 30 px thresholds are in those pixels",
     None, "the image at its own size, as the model's processor takes it"),
    (("evaluation", "grounding", "query_form"), "visionreasoner",
     "evaluation_segmentation.py:93, evaluation_count.py:57, vision_reasoner_model.py:230: "
     "query.lower().strip('.\"?!')",
     "as_given", "the dataset's query verbatim"),
    (("evaluation", "grounding", "max_new_tokens"), 2048,
     "vision_reasoner_model.py:266 generate(max_new_tokens=2048, do_sample=False)",
     1024, "the rollouts' budget (VR-TTRL presets' max_completion_length); the paper states none for evaluation"),
    (("adaptation", "hyperparameters", "grounding", "max_completion_length"), 2000,
     "Seg-Zero training_scripts/visionreasoner_7b.yaml:6 max_response_length 2000, the trainer VisionReasoner-7B "
     "was trained with (VR-TTRL states no response length)",
     1024, "TTRV's 1,024, the VR-TTRL presets' (a budget the paper does not contradict)"),
    # ECHO: user683/ECHO @6f7b311 (standalone_inference.py, their evaluation; verl/examples/ttrl_echo/Qwen2.5/
    # geometry3k.sh and the verl fork it runs, their training). The adaptation keys sit in the math layer
    # (adaptation/presets.py MATH_METHODS: ECHO, MM-UPT, supervised GRPO), which wins over the mcq layer's
    (("evaluation", "math", "prompt"), "authors",
     "standalone_inference.py:190-201: the system turn 'Please directly answer the question and provide the correct "
     "option letter and  put your answer within \\boxed{}.', the user turn the item's text (data/save_as_json.py:"
     "164-169: question and choices) with no reasoning instruction",
     "training", "the prompt the model was trained on, '... Please reason step by step, and put your final answer "
     "within \\boxed{}.' (geometry3k.sh:50 data.suffix_prompt): the paper gives no evaluation prompt"),
    (("evaluation", "math", "temperature"), 0.7, "standalone_inference.py:36 INFERENCE_CONFIG temperature",
     0.6, "ECHO Table 5 (Appendix A.3): validation temperature 0.6"),
    (("evaluation", "math", "top_p"), 0.9, "standalone_inference.py:37 INFERENCE_CONFIG top_p",
     0.95, "the paper is silent; the scripts' validation top_p 0.95 (geometry3k.sh:75 val_kwargs.top_p)"),
    (("evaluation", "math", "top_k"), 50, "standalone_inference.py:38 INFERENCE_CONFIG top_k",
     None, "no top-k cut: the paper is silent, and verl's rollouts have none (ppo_trainer.yaml top_k -1)"),
    (("evaluation", "math", "max_new_tokens"), 2048, "standalone_inference.py:35 INFERENCE_CONFIG max_tokens",
     3072, "ECHO Appendix A.3: maximum response length 3,072, the rollouts' budget (geometry3k.sh:18)"),
    (("evaluation", "math", "min_image_side"), 28,
     "standalone_inference.py:163-169, 187 ensure_min_image_size: a side under 28 px stretched to 28 (bicubic)",
     None, "the image as it is: the processor's own resize (Qwen2.5-VL's smart_resize keeps the aspect ratio)"),
    (("evaluation", "math", "grader"), "lenient",
     "standalone_inference.py:86-122 check_correctness: a predicted number equal to any number in the gold counts "
     "(gold 2\\sqrt{3} accepts 3), a letter is compared with the gold's first character",
     "exact", "our normal forms, numbers within 1e-4: an answer is right only when it is the gold's value"),
    (("adaptation", "hyperparameters", "math", "token_confidence"), "sampled",
     "dp_actor.py:387-390: with use_remove_padding=True (every shipped script, geometry3k.sh:53) the forward "
     "computes no top-k confidence and compute_log_prob takes exp(log-prob of the sampled token)",
     "top_k", "the paper's C_it, 'the token-level top-k confidence computed from the logits' (Section 3.3), "
     "dp_actor.py:280-286 with k 5"),
    (("adaptation", "hyperparameters", "math", "answer_parser"), "boxed",
     "ttrl_utils.py:106-119 _majority_vote: only \\boxed{} answers vote; ttrl_math/__init__.py:64-75 compute_score: "
     "an unboxed rollout gets 0",
     "robust", "our fallback chain (a stated answer, then the last number): a rollout cut off before its box votes"),
    (("adaptation", "hyperparameters", "math", "chat_template"), "model",
     "their verl's hf_processor: the model's own template for Qwen2.5-VL and Qwen3-VL (set here so that the TTRV "
     "authors' mcq template does not reach ECHO's methods)",
     "model", "the checkpoint's own template"),
    (("adaptation", "hyperparameters", "math", "trl_vllm_is_correction"), False,
     "verl has no importance-sampling correction for the rollout engine's log-probs (dp_actor.py:498-581)",
     True, "TRL's default (GRPOConfig.vllm_importance_sampling_correction)"),
    (("adaptation", "hyperparameters", "math", "bias_corrected_kl"), False,
     "dp_actor.py:564-572: the token-mean of k3, no pi / pi_old factor",
     True, "TRL's default (GRPOConfig.use_bias_correction_kl)"),
    (("adaptation", "hyperparameters", "math", "kl_clamp"), 10.0,
     "core_algos.py:1030-1036 kl_penalty 'low_var_kl': k3 clamped to [-10, 10]",
     None, "TRL's k3, unclamped"),
    (("adaptation", "hyperparameters", "math", "advantages"), "verl",
     "core_algos.py:311-361 compute_grpo_outcome_advantage: (r - mean) / (std + 1e-6)",
     "trl", "TRL's (r - mean) / (std + 1e-4) on rewards rounded to 2^-16"),
    (("adaptation", "hyperparameters", "math", "decay_every_parameter"), True,
     "fsdp_workers.py:413-414 AdamW over actor_module_fsdp.parameters(): biases and norms decayed too",
     False, "transformers' Trainer: no weight decay on biases and norms"),
    (("adaptation", "hyperparameters", "math", "lr_schedule_per"), "round",
     "fsdp_workers.py:694: the scheduler stepped once per update_actor call, once per round",
     "step", "transformers' schedule, stepped per optimizer step"),
    (("adaptation", "hyperparameters", "math", "loss_type"), "bnpo",
     "dp_actor.py:570-580 / core_algos.py:684-685: token-mean per micro-batch (loss_agg_mode token-mean), divided by "
     "the accumulation count: TRL's bnpo over a micro-batch",
     "dapo", "TRL's default: the token mean over the whole optimizer step"),
    (("adaptation", "hyperparameters", "math", "micro_batch_size"), 2,
     "geometry3k.sh:30 MICRO_BATCH_SIZE=2 (ppo_micro_batch_size_per_gpu): under bnpo the token-mean's group",
     1, "ECHO Table 5: micro-batch 1"),
    (("adaptation", "hyperparameters", "math", "dual_clip"), 3.0,
     "core_algos.py:780-786 clip_ratio_c 3.0 (ppo_trainer.yaml:190): negative-advantage ratios capped at 3; "
     "TRL's delta",
     None, "TRL's default: no second clip (the paper names none)"),
    (("adaptation", "hyperparameters", "math", "n_votes"), 32,
     "geometry3k.sh:27-28 N_VOTES_PER_PROMPT=32 = N_SAMPLES_PER_PROMPT=32: every vote trained",
     64, "ECHO Table 5: 64 rollouts vote, 32 are trained"),
    (("adaptation", "hyperparameters", "math", "lora"),
     {"rank": 128, "alpha": 128, "target_modules": "all-linear", "datasets": ["geoqa"]},
     "standalone_inference.py:22: their GeoQA cells load a LoRA adapter (geoQA-Qwen2.5-VL-7B/.../global_step_654/"
     "actor/lora_adapter); rank and alpha the scripts' commented-out lora_rank=128 / lora_alpha=128 "
     "(geometry3k.sh:108-109), targets verl's default all-linear (ppo_trainer.yaml:119); Geometry3k's run is full",
     None, "full fine-tuning of every training set, as ECHO Appendix A.3 describes (no adapter named)"),
    (("adaptation", "hyperparameters", "math", "data_seed"), 1,
     "main_ppo.py:283-286 create_rl_sampler: RandomSampler seeded data_config.get('seed', 1), no script sets one "
     "(geometry3k.sh; ppo_trainer.yaml data.shuffle True)",
     None, "the run's seed (the paper names none)"),
    (("adaptation", "hyperparameters", "math", "step_order"), "verl",
     "ray_trainer.py:1247-1248 _balance_batch (8 GPUs, geometry3k.sh:98), dp_actor.py:438-440: each GPU's "
     "mini-batches consecutive chunks of its partition",
     "shuffled", "TRL's shuffle of a round's rollouts across its steps"),
    (("adaptation", "hyperparameters", "math", "stop_after_rounds"), {"geoqa": 654},
     "standalone_inference.py:22: the GeoQA cells load global_step_654, a checkpoint 654 rounds into a run whose "
     "schedule spans 5 epochs of 8 prompts a round",
     None, "every round of the configured epochs (ECHO Appendix A.3: 5 epochs)"),
    (("adaptation", "hyperparameters", "math", "generation_batch_size"), 8 * 32,
     "geometry3k.sh:26 DATA_TRAIN_BATCH_SIZE=8 prompts x 32 rollouts a round (their checkpoint global_step_1310 = "
     "floor(2,101 / 8) x 5 epochs)",
     5 * 32, "ECHO Table 5: train batch 5 prompts"),
]


def _has(config: dict, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(config, dict) or key not in config:
            return False
        config = config[key]
    return True


def _set(config: dict, path: tuple[str, ...], value) -> None:
    for key in path[:-1]:
        if not isinstance(config.get(key), dict):
            config[key] = {}
        config = config[key]
    config[path[-1]] = value


def apply_protocol(config: dict) -> dict:
    """`config` with its protocol's values filled in (in place) where the config sets none; before the
    schema's defaults, so "set by the config" means written in a config file."""
    name = config.get("protocol", "clean")
    if name not in PROTOCOL_NAMES:
        raise ValueError(f"config key `protocol`: {name!r}; known: {', '.join(PROTOCOL_NAMES)}")
    if name == "authors":
        for path, value, *_ in SETTINGS:
            if not _has(config, path):
                _set(config, path, value)
    return config


def _get(config: dict, path: tuple[str, ...]):
    for key in path:
        config = config[key]
    return config


def describe(name: str, config: dict | None = None, sections=None) -> list[str]:
    """One line per setting: the protocol's value (the one `config` runs, where given) and where it comes
    from (docs and `ttrl-bench plan`); only the task sections named (e.g. {"mcq"}) where `sections` is given."""
    lines = []
    for path, theirs, source, ours, reason in SETTINGS:
        if sections is not None and path[-2] not in sections:  # the task section holds the key in both path shapes
            continue
        value, why = (theirs, source) if name == "authors" else (ours if ours is not None else "the config's", reason)
        if config is not None and _has(config, path):
            value = _get(config, path)
        lines.append(f"{'.'.join(path)} = {value}: {why}")
    return lines
