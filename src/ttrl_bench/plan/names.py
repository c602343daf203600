"""The names a config gives (datasets, methods, models, hyper-parameter keys) checked, and its adapting
methods resolved: each preset with the config's per-task hyper-parameters and per-method overrides, its
reward built once. Run when the grid is built (grid.py `Plan`), so a wrong name stops the run first.

Layer 1 of the plan (config): imports no other plan module (docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

import difflib

from ..adaptation.presets import (METHOD_NAMES, OPTIONAL_HYPERPARAMETERS, PRESETS, hyperparameter_sections,
                                  resolve_method, task_hyperparameters)
from ..datasets.registry import REGISTRY
from ..rewards.registry import get_reward, reward_parameters


# where each kind of name is listed, for a message that would otherwise print dozens
LISTED_BY = {"datasets": "ttrl-bench datasets list", "methods": "ttrl-bench methods list"}


def did_you_mean(name, known) -> str:
    """" (did you mean a or b?)" with the known names closest to `name` (difflib), or "" where none is close."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def check_known(key: str, names, known) -> None:
    """Every name is one of `known`; else a ValueError naming the key, each unknown name with its closest known
    ones ("did you mean"), and the known names (or the command that lists them, where there are many)."""
    unknown = [n for n in names if n not in known]
    if not unknown:
        return
    hints = [f"{name!r}{did_you_mean(name, known)}" for name in unknown]
    kind = key.rsplit(".", 1)[-1]
    listed = (f"`{LISTED_BY[kind]}` lists the {len(known)} known" if len(known) > 12 and kind in LISTED_BY
              else f"known: {', '.join(sorted(map(str, known)))}")
    raise ValueError(f"config key `{key}`: unknown name(s) {', '.join(hints)}; {listed}")


def check_names(config: dict, models: dict) -> None:
    """Every dataset, method and model a config names exists."""
    check_known("datasets", config["datasets"], REGISTRY)
    check_known("data.sources", config["data"]["sources"], REGISTRY)
    check_known("methods", config["methods"], METHOD_NAMES)
    check_known("adaptation.method_overrides", config["adaptation"]["method_overrides"], METHOD_NAMES)
    for name, block in config["experiments"].items():
        if not block["enabled"]:
            continue
        check_known(f"experiments.{name}.models", block.get("models", []), models)
        check_known(f"experiments.{name}.methods", block.get("methods", []), METHOD_NAMES)
        pairs = [d for pair in block.get("cross", []) for d in pair]
        check_known(f"experiments.{name}.datasets", block.get("datasets", []) + pairs, REGISTRY)


def check_hyperparameter_keys(config: dict) -> None:
    """Hyper-parameter keys that no preset of their task (or the method they override) knows,
    named by their config path, not by the first method using the section."""
    adaptation = config["adaptation"]
    for task, layer in adaptation["hyperparameters"].items():
        known = task_hyperparameters(task)
        for key in sorted(set(layer) - known):
            raise ValueError(f"config key `adaptation.hyperparameters.{task}.{key}`: unknown hyper-parameter; "
                             f"known for {task} methods: {', '.join(sorted(known))}")
    for method, overrides in adaptation["method_overrides"].items():
        own = (overrides or {}).get("hyperparameters", {})
        known = set((PRESETS[method] or {}).get("hyperparameters", {})) | OPTIONAL_HYPERPARAMETERS
        for key in sorted(set(own) - known):
            raise ValueError(f"config key `adaptation.method_overrides.{method}.hyperparameters.{key}`: unknown "
                             f"hyper-parameter of {method}; known: {', '.join(sorted(known))}")


def check_reward(method: str, spec: dict, overrides: dict | None) -> None:
    """The method's reward accepts its `reward_params` (built once now: a typo fails here, not after
    the queue, in the job's first reward call)."""
    if "reward" not in spec:
        return
    # `uncertainty` is the GRPO reward wrapper's own (adaptation/reward_bridge.py GroupReward: DARE's normalisation)
    params = {k: v for k, v in spec["reward_params"].items() if k != "uncertainty"}
    try:
        get_reward(spec["reward"], **params)
    except (KeyError, TypeError) as err:
        key = (f"adaptation.method_overrides.{method}.reward_params" if "reward_params" in (overrides or {})
               else f"methods (preset {method})")
        raise ValueError(f"config key `{key}`: {err.args[0]}; reward {spec['reward']!r} takes "
                         f"{', '.join(reward_parameters(spec['reward'])) or 'no parameters'}") from None


def resolved_methods(config: dict, methods: list[str]) -> dict[str, dict]:
    """Each adapting method's preset with the config's per-task hyper-parameters and per-method
    overrides applied, its reward built once."""
    check_hyperparameter_keys(config)
    adaptation = config["adaptation"]
    specs = {}
    for method in methods:
        layer = {"rollout_backend": adaptation["rollout_backend"]}
        for section in hyperparameter_sections(method):  # ECHO's methods: the math layer over the mcq one
            layer.update(adaptation["hyperparameters"].get(section, {}))
        overrides = adaptation["method_overrides"].get(method)
        try:
            specs[method] = resolve_method(method, layer, overrides)
        except KeyError as err:
            raise ValueError(f"config key `adaptation.method_overrides.{method}`: {err.args[0]}") from None
        check_reward(method, specs[method], overrides)
    return specs
