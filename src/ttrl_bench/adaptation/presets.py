"""Method presets: one GRPO trainer, different rewards and hyper-parameters.

Each preset quotes where its numbers come from (its hyper-parameter block's sources: hyperparameters.py). A config overrides any hyper-parameter through
`adaptation.hyperparameters` (all methods) or `adaptation.method_overrides.<method>`.
"""

from __future__ import annotations

import copy

from .hyperparameters import (BASELINE_HYPERPARAMETERS, ECHO_DEFAULTS, ECHO_HYPERPARAMETERS, OPTIONAL_HYPERPARAMETERS,
                              TTRV_APPENDIX_A_HYPERPARAMETERS, TTRV_HYPERPARAMETERS, VERL_UPDATE, VR_TTRL_HYPERPARAMETERS,
                              check_update)

__all__ = ["BASELINE_HYPERPARAMETERS", "ECHO_HYPERPARAMETERS", "METHOD_NAMES", "OPTIONAL_HYPERPARAMETERS", "PRESETS",
           "TTRV_APPENDIX_A_HYPERPARAMETERS", "TTRV_HYPERPARAMETERS", "VERL_UPDATE", "VISIONREASONER_CONVENTIONS",
           "VR_TTRL_HYPERPARAMETERS", "hyperparameter_sections", "is_per_sample", "method_task", "method_task_of",
           "register_method", "resolve_method", "task_hyperparameters"]

# VisionReasoner's reward conventions as the Seg-Zero code has them (rewards/grounding.py says
# where each comes from; the departures are options of the same names).
VISIONREASONER_CONVENTIONS = {"pixel_iou": True, "point_in_box": True, "point_distance": "euclidean",
                              "invalid_object": "zero_answer", "non_repeat": "output"}

PRESETS: dict[str, dict | None] = {
    # No adaptation: the base model evaluated greedily (every table's base row).
    "zero-shot": None,
    # TTRL (Zuo et al. 2025), the baseline of TTRV Table 3: majority-vote pseudo-label, 0/1 reward.
    # TTRL's own code votes on 64 and updates on 32; as TTRV's baseline it runs TTRV's settings
    # (vote 32, train 16), so that the two differ in the reward alone.
    "ttrl-majority": {
        "reward": "majority_vote",
        "reward_params": {"unparsable": "answer"},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "TTRL (Zuo et al. 2025, arXiv 2504.16084); TTRV Table 3 baseline",
    },
    # TTRV Section 3.2, Eq. 5-7: frequency reward - alpha * H, alpha = 0.75 (Appendix A).
    "ttrv": {
        "reward": "ttrv",
        "reward_params": {"alpha": 0.75, "entropy": "paper", "unparsable": "answer"},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "TTRV Section 3.2; settings from the authors' run logs (verl/logs)",
    },
    # The same reward with the settings TTRV Appendix A states (32 rollouts, all trained; 8 prompts).
    "ttrv-appendix-a": {
        "reward": "ttrv",
        "reward_params": {"alpha": 0.75, "entropy": "paper", "unparsable": "answer"},
        "hyperparameters": TTRV_APPENDIX_A_HYPERPARAMETERS,
        "source": "TTRV Section 3.2, Appendix A",
    },
    # TTRV Table 4 ablations.
    "ttrv-no-diversity": {
        "reward": "ttrv_frequency_only",
        "reward_params": {"unparsable": "answer"},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "TTRV Table 4 (w/o diversity)",
    },
    "ttrv-no-frequency": {
        "reward": "ttrv_diversity_only",
        "reward_params": {"alpha": 0.75, "entropy": "paper"},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "TTRV Table 4 (w/o frequency)",
    },
    # TTRV Table 5: random Bernoulli(0.5) reward (after Shao et al. 2025).
    "random-reward": {
        "reward": "random",
        "reward_params": {"seed": 0},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "TTRV Table 5",
    },
    # T3RL (arXiv 2603.02203, Figure 2): verification-weighted majority vote, verified rollouts
    # weigh omega = 5 (SPEC.md), binary reward against the weighted pseudo-label; the verifier executes
    # the computation each rollout claims in a sandbox (rewards/t3rl.py). TTRV's settings, as TTRL's.
    "t3rl": {
        "reward": "t3rl",
        "reward_params": {"omega": 5.0, "verifier": "arithmetic"},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "T3RL, Tool Verification for Test-Time RL (arXiv 2603.02203), Figure 2",
    },
    # ECHO (arXiv 2602.02150 Sections 3.2-3.4): TTRL's majority-vote reward on math answers, with ECHO's update
    # rule (adaptation/echo.py; the authors' hybrid_adv defaults). The authors' vote (verl/trainer/ppo/
    # ttrl_utils.py `_majority_vote`) drops answers without \boxed{} before counting and their reward
    # (ttrl_math compute_score) gives them 0: unparsable "no_reward". The tree rollout is off in the authors'
    # example scripts (deepconf.enable=False), so it is not built.
    "echo": {
        "reward": "majority_vote",
        "reward_params": {"unparsable": "no_reward"},
        "update": {"rule": "echo", **ECHO_DEFAULTS},
        "hyperparameters": ECHO_HYPERPARAMETERS,
        "source": "ECHO Sections 3.2-3.4, Appendix A.3 Table 5; user683/ECHO hybrid_adv defaults",
    },
    # MM-UPT (Wei et al. 2025; ECHO's baseline, Table 2): majority-vote GRPO on the unlabeled training set,
    # TRL's standard GRPO update, ECHO's Table 5 settings.
    "mm-upt": {
        "reward": "majority_vote",
        "reward_params": {"unparsable": "no_reward"},
        "hyperparameters": ECHO_HYPERPARAMETERS,
        "source": "MM-UPT (Wei et al. 2025) as ECHO's Table 2 baseline; settings ECHO Table 5",
    },
    # GRPO with ground-truth labels (ECHO Table 12 "GRPO"): binary reward against the gold answer, standard
    # update; no vote, so all 32 rollouts are generated and trained on.
    "supervised-grpo": {
        "reward": "gold",
        "reward_params": {},
        "hyperparameters": {**ECHO_HYPERPARAMETERS, "n_votes": 32},
        "source": "ECHO Appendix B.2 Table 12 (supervised GRPO); settings ECHO Table 5",
    },
    # DARE (arXiv 2601.21804): uncertainty-aware distribution reward + exploration bonus +
    # pruning. alpha, tau are not in the summary: 0.5 / 0.05 are our defaults (SPEC.md). The
    # uncertainty is the completion's mean token entropy divided by log |vocabulary|.
    # Hyper-parameters: TTRV's, so DARE and TTRV differ in the reward alone.
    "dare": {
        "reward": "dare",
        "reward_params": {"alpha": 0.5, "tau": 0.05, "uncertainty": "vocab"},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "DARE, Distribution-Aware Reward Estimation for Test-Time RL (arXiv 2601.21804), defaults ours",
    },
    # VR-TTRL (Single-Sample Test-Time RL for VLMs, anonymous submission): per-sample GRPO with the geometric consensus reward plus the
    # VisionReasoner format rewards; thresholds "base" 0.5/10/30 (Table 9 has loose and strict).
    "vr-ttrl": {
        "reward": "vr_ttrl_consensus",
        "reward_params": {"thresholds": "base", "anti": False, **VISIONREASONER_CONVENTIONS},
        "hyperparameters": VR_TTRL_HYPERPARAMETERS,
        "task": "grounding",
        "per_sample": True,
        "source": "VR-TTRL Section 3, Appendix A",
    },
    # VR-TTRL "single gen": 1 generation round, 10 updates on it (TRL's num_iterations).
    "vr-ttrl-single-gen": {
        "reward": "vr_ttrl_consensus",
        "reward_params": {"thresholds": "base", "anti": False, **VISIONREASONER_CONVENTIONS},
        "hyperparameters": {**VR_TTRL_HYPERPARAMETERS, "epochs": 1, "updates_per_generation": 10},
        "task": "grounding",
        "per_sample": True,
        "source": "VR-TTRL ablation (single generation)",
    },
    # VR-TTRL anti-consensus ablation: the pseudo-label is the least agreed-on completion.
    "vr-ttrl-anti-consensus": {
        "reward": "vr_ttrl_consensus",
        "reward_params": {"thresholds": "base", "anti": True, **VISIONREASONER_CONVENTIONS},
        "hyperparameters": VR_TTRL_HYPERPARAMETERS,
        "task": "grounding",
        "per_sample": True,
        "source": "VR-TTRL ablation (anti-consensus)",
    },
    # VR-TTRL Table 9: matching thresholds loose (0.3/20/50) and strict (0.7/5/15).
    "vr-ttrl-loose-thresholds": {
        "reward": "vr_ttrl_consensus",
        "reward_params": {"thresholds": "loose", "anti": False, **VISIONREASONER_CONVENTIONS},
        "hyperparameters": VR_TTRL_HYPERPARAMETERS,
        "task": "grounding",
        "per_sample": True,
        "source": "VR-TTRL Table 9 (loose)",
    },
    "vr-ttrl-strict-thresholds": {
        "reward": "vr_ttrl_consensus",
        "reward_params": {"thresholds": "strict", "anti": False, **VISIONREASONER_CONVENTIONS},
        "hyperparameters": VR_TTRL_HYPERPARAMETERS,
        "task": "grounding",
        "per_sample": True,
        "source": "VR-TTRL Table 9 (strict)",
    },
    # Vote-only baseline: the same N rollouts and consensus, no update; the pseudo-label answers.
    "vote-only": {
        "reward": "vr_ttrl_consensus",
        "reward_params": {"thresholds": "base", "anti": False, **VISIONREASONER_CONVENTIONS},
        "hyperparameters": {**VR_TTRL_HYPERPARAMETERS, "updates": False},
        "task": "grounding",
        "per_sample": True,
        "source": "VR-TTRL baseline (vote only)",
    },
}

_BASELINE = {"reward_params": {}, "task": "grounding", "per_sample": True}
PRESETS.update({
    # C.1 "Tent-style entropy minimization": sum of the answer tokens' entropies, the answer being
    # the model's greedy one (the evaluation decoding, Appendix A) on the unadapted sample.
    "tent": {**_BASELINE, "objective": "tent", "pseudo_label": "greedy", "hyperparameters": BASELINE_HYPERPARAMETERS,
             "source": "VR-TTRL Appendix C.1 (Tent, Wang et al. 2021)"},
    # C.1 "MEMO-style consistency TTA": (1/K) sum_k KL(p_k || p_bar) over K augmentations (crop, flip,
    # colour jitter), answer tokens only. K is not given: 8, VR-TTRL's rollouts per round (the same
    # forward budget). memo_form "marginal_entropy" is MEMO's own objective, H(p_bar).
    "memo": {**_BASELINE, "objective": "memo", "pseudo_label": "greedy",
             "hyperparameters": {**BASELINE_HYPERPARAMETERS, "augmentations": 8, "memo_form": "kl_to_mean"},
             "source": "VR-TTRL Appendix C.1 (MEMO, Zhang et al. 2022)"},
    # C.1 "SFT (single greedy pseudo-label)": NLL of the greedy answer, prompt masked.
    "sft-greedy-pseudo-label": {**_BASELINE, "objective": "sft", "pseudo_label": "greedy",
                                "hyperparameters": BASELINE_HYPERPARAMETERS,
                                "source": "VR-TTRL Appendix C.1 (SFT, single greedy pseudo-label)"},
    # C.1 "SFT (majority pseudo-label)": NLL of VR-TTRL's consensus completion of N = 8 rollouts at
    # temperature 0.6 (VR-TTRL's, Appendix A), with VR-TTRL's thresholds and reward conventions.
    "sft-majority-pseudo-label": {
        **_BASELINE, "objective": "sft", "pseudo_label": "consensus",
        "reward": "vr_ttrl_consensus",
        "reward_params": {"thresholds": "base", "anti": False, **VISIONREASONER_CONVENTIONS},
        "hyperparameters": {**BASELINE_HYPERPARAMETERS, "num_generations": VR_TTRL_HYPERPARAMETERS["num_generations"],
                            "temperature": VR_TTRL_HYPERPARAMETERS["temperature"]},
        "source": "VR-TTRL Appendix C.1 (SFT, majority pseudo-label)"},
    # VR-TTRL Table 11 / Appendix D "Offline (train-only)": the same consensus + format GRPO, trained
    # once on a training split (a registry training set: reasonseg-train, refcocog-train, adapted on
    # through config `cross` pairs), then evaluated on the test split like any adapted model.
    # The size of the training set and the schedule are not stated: VR-TTRL's per-sample settings
    # run as one training (5 epochs of 1 prompt per step over n training samples; config
    # n_samples 200, so its budget is VR-TTRL's on 200 test samples).
    "offline-train-split": {
        "reward": "vr_ttrl_consensus",
        "reward_params": {"thresholds": "base", "anti": False, **VISIONREASONER_CONVENTIONS},
        "hyperparameters": {k: v for k, v in VR_TTRL_HYPERPARAMETERS.items() if k != "updates"},
        "task": "grounding",
        "source": "VR-TTRL Table 11, Appendix D"},
})

# VR-TTRL Table 7 (rollouts per round) and Table 8 (updates per image; 5 is the default).
for _n in (16, 32):
    PRESETS[f"vr-ttrl-{_n}-rollouts"] = {**PRESETS["vr-ttrl"], "source": "VR-TTRL Table 7",
                                         "hyperparameters": {**VR_TTRL_HYPERPARAMETERS, "num_generations": _n}}
for _k in (1, 2, 3, 10, 15):
    PRESETS[f"vr-ttrl-{_k}-updates"] = {**PRESETS["vr-ttrl"], "source": "VR-TTRL Table 8",
                                        "hyperparameters": {**VR_TTRL_HYPERPARAMETERS, "epochs": _k}}

# The TTRV authors' other run configurations (verl/logs): 2, 5, 10 and 20 epochs (ai2d/20, mathverse, mathvista
# InternVL3-2B/8B: TTRV Table 2 shows the best of them on the test set), and 8 prompts per round where the run
# had 8 GPUs (train_batch_size = n_gpus_per_node in every log: 5 rounds per epoch on 20 samples with 4, 2 with 8).
# config/ttrv.yaml reruns each published cell with its log's configuration.
for _epochs in (2, 5, 10, 20):
    for _prompts in (4, 8):
        if (_epochs, _prompts) != (2, 4):  # that one is "ttrv"
            PRESETS[f"ttrv-{_epochs}-epochs" + ("-8-prompts" if _prompts == 8 else "")] = {
                **PRESETS["ttrv"], "source": "TTRV; run configuration of the authors' logs (verl/logs)",
                "hyperparameters": {**TTRV_HYPERPARAMETERS, "epochs": _epochs, "generation_batch_size": _prompts * 16}}

METHOD_NAMES = tuple(PRESETS)


def register_method(name: str, preset: dict) -> None:
    """A new method (docs/extending.md): a preset naming its reward, reward_params, hyperparameters and source.
    Called at the end of this module, so every importer of METHOD_NAMES sees it."""
    global METHOD_NAMES
    if name in PRESETS:
        raise ValueError(f"method {name!r} exists already")
    missing = {"reward", "hyperparameters", "source"} - set(preset)
    if missing:
        raise ValueError(f"method {name!r}: its preset needs {', '.join(sorted(missing))}")
    PRESETS[name] = preset
    METHOD_NAMES = tuple(PRESETS)

# ECHO and its baselines (ECHO Table 2, 12): their config layer is `adaptation.hyperparameters.math`, applied
# over the mcq layer (their answers are of the mcq family), so the ECHO authors' settings (plan/protocols.py)
# reach these methods and not TTRV's, and TTRV's mcq settings reach them only where the math layer sets none.
MATH_METHODS = ("echo", "mm-upt", "supervised-grpo")


def hyperparameter_sections(name: str) -> tuple[str, ...]:
    """The `adaptation.hyperparameters` sections a method reads, later ones winning."""
    task = method_task(name)
    return (task, "math") if name in MATH_METHODS else (task,)


def method_task(name: str) -> str | None:
    """The task kind a method adapts on: "mcq" (answers are option letters), "grounding"
    (answers are object lists), or None for zero-shot, which fits every dataset. ECHO and its
    baselines are "mcq": math answers are discrete values too (evaluation/tasks.py MathTask.family)."""
    return method_task_of(PRESETS[name])


def method_task_of(preset: dict | None) -> str | None:
    return None if preset is None else preset.get("task", "mcq")


def is_per_sample(name: str) -> bool:
    return bool(PRESETS[name] and PRESETS[name].get("per_sample"))


def task_hyperparameters(task: str) -> set[str]:
    """The keys of config `adaptation.hyperparameters.<task>`: those of every preset of the task ("math":
    of MATH_METHODS)."""
    if task == "math":
        return set().union(*(set(PRESETS[m]["hyperparameters"]) for m in MATH_METHODS)) | OPTIONAL_HYPERPARAMETERS
    return set().union(*(set(p["hyperparameters"]) for p in PRESETS.values()
                         if p and method_task_of(p) == task)) | OPTIONAL_HYPERPARAMETERS


def resolve_method(name: str, hyperparameters: dict | None = None, overrides: dict | None = None) -> dict | None:
    """The preset for `name` with config overrides applied; None for methods without adaptation."""
    if name not in PRESETS:
        raise KeyError(f"unknown method {name!r}; known: {', '.join(METHOD_NAMES)}")
    preset = copy.deepcopy(PRESETS[name])
    if preset is None:
        return None
    # The config's per-task layer sets keys for every method of a task; a key some of them lack (the
    # rollouts of VR-TTRL beside Tent, which has none) applies where it is used. A key no method of
    # the task knows, or one a method's own overrides name and it lacks, is an error (a typo).
    known = set(preset["hyperparameters"]) | OPTIONAL_HYPERPARAMETERS
    layer = hyperparameters or {}
    unknown = set(layer) - task_hyperparameters(method_task(name))
    own = (overrides or {}).get("hyperparameters", {})
    unknown |= set(own) - known
    if unknown:
        raise KeyError(f"method {name!r}: unknown hyper-parameter(s) {sorted(unknown)}")
    preset["hyperparameters"].update({k: v for k, v in layer.items() if k in known})
    preset["hyperparameters"].update(own)
    # TTRV's diversity term, H (the paper's Eq. 7) or H / log M (the authors' ttt_metrics.py:31-46): the
    # hyper-parameter reaches the rewards that have the term; a method override's reward_params wins
    if "diversity_entropy" in preset["hyperparameters"] and "entropy" in preset["reward_params"]:
        preset["reward_params"]["entropy"] = preset["hyperparameters"]["diversity_entropy"]
    preset["reward_params"].update((overrides or {}).get("reward_params", {}))
    update = (overrides or {}).get("update", {})
    if update:
        if "update" not in preset:
            raise KeyError(f"method {name!r} has TRL's standard update: no update parameters to override")
        rule = preset["update"].pop("rule")
        preset["update"] = {"rule": rule, **check_update({**preset["update"], **update})}
    return preset
