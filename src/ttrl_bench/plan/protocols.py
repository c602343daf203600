"""The two named protocols of a rerun (config `protocol`), as the config keys each one sets.

`authors` reproduces the TTRV authors' pipeline (Akshit21112002/TTRV @b9cf778, their verl fork) around
the update: their chat template, their answer parser in the votes and in the evaluation, their
evaluation budget, their metric beside plain accuracy, and verl's update without TRL's two extra
corrections. `clean` is ours: the schema's defaults, each a stated departure (`SETTINGS`' reasons).
A config key the config sets itself wins over its protocol's value. How each table says which protocol
its cells ran: results/paper_tables.py `provenance_notes`.
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


def describe(name: str) -> list[str]:
    """One line per setting: the protocol's value and where it comes from (docs and `ttrl-bench plan`)."""
    lines = []
    for path, theirs, source, ours, reason in SETTINGS:
        value, why = (theirs, source) if name == "authors" else (ours if ours is not None else "the config's", reason)
        lines.append(f"{'.'.join(path)} = {value}: {why}")
    return lines
