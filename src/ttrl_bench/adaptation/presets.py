"""Method presets: one GRPO trainer, different rewards and hyper-parameters.

Each preset quotes where its numbers come from. A config overrides any hyper-parameter through
`adaptation.hyperparameters` (all methods) or `adaptation.method_overrides.<method>`.
"""

from __future__ import annotations

import copy

# TTRV Appendix A "Implementation Details": AdamW, cosine schedule, peak lr 5e-7, 32 rollouts at
# temperature 1.0, max response 1024 tokens; authors' run script: 2 epochs, batch 8 prompts.
TTRV_HYPERPARAMETERS = {
    "learning_rate": 5e-7,
    "num_generations": 32,
    "temperature": 1.0,
    "max_completion_length": 1024,
    "epochs": 2,
    "prompts_per_step": 8,
    "kl_beta": 0.0,
    "scale_rewards": "group",
}

PRESETS: dict[str, dict | None] = {
    # No adaptation: the base model evaluated greedily (every table's base row).
    "zero-shot": None,
    # TTRL (Zuo et al. 2025), the baseline of TTRV Table 3: majority-vote pseudo-label, 0/1 reward.
    # Official code votes on 64 and updates on 32; here the N rollouts serve both.
    "ttrl-majority": {
        "reward": "majority_vote",
        "reward_params": {},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "TTRL (Zuo et al. 2025); TTRV Table 3 baseline",
    },
    # TTRV Section 3.2, Eq. 5-7: frequency reward - alpha * H, alpha = 0.75 (Appendix A).
    "ttrv": {
        "reward": "ttrv",
        "reward_params": {"alpha": 0.75, "entropy": "paper"},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "TTRV Section 3.2, Appendix A",
    },
    # TTRV Table 4 ablations.
    "ttrv-no-diversity": {
        "reward": "ttrv_frequency_only",
        "reward_params": {},
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
    # DARE (papers/dare-summary.txt): uncertainty-aware distribution reward + exploration bonus +
    # pruning. alpha, tau are not in the summary: 0.5 / 0.05 are our defaults (SPEC.md). The
    # uncertainty is the completion's mean token entropy divided by log |vocabulary|.
    # Hyper-parameters: TTRV's, so DARE and TTRV differ in the reward alone.
    "dare": {
        "reward": "dare",
        "reward_params": {"alpha": 0.5, "tau": 0.05, "uncertainty": "vocab"},
        "hyperparameters": TTRV_HYPERPARAMETERS,
        "source": "DARE (dare-summary.txt), defaults ours",
    },
}

METHOD_NAMES = tuple(PRESETS)


def resolve_method(name: str, hyperparameters: dict | None = None, overrides: dict | None = None) -> dict | None:
    """The preset for `name` with config overrides applied; None for methods without adaptation."""
    if name not in PRESETS:
        raise KeyError(f"unknown method {name!r}; known: {', '.join(METHOD_NAMES)}")
    preset = copy.deepcopy(PRESETS[name])
    if preset is None:
        return None
    for layer in (hyperparameters or {}, (overrides or {}).get("hyperparameters", {})):
        unknown = set(layer) - set(preset["hyperparameters"]) - {"weight_decay", "max_grad_norm", "rollout_backend"}
        if unknown:
            raise KeyError(f"method {name!r}: unknown hyper-parameter(s) {sorted(unknown)}")
        preset["hyperparameters"].update(layer)
    preset["reward_params"].update((overrides or {}).get("reward_params", {}))
    return preset
