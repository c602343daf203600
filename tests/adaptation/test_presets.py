"""How a method's settings are put together (adaptation/presets.py, hyperparameters.py): the preset's block,
under the config's per-task layer `adaptation.hyperparameters.<task>`, under the method's own
`adaptation.method_overrides.<method>`; the sections and tasks a method reads; register_method; lora_for_dataset;
and the errors a mistyped key gets. Every expected value is worked out by hand in the test's docstring or read
from the source the preset cites."""

from __future__ import annotations

import re

import pytest

from ttrl_bench.adaptation import presets
from ttrl_bench.adaptation.hyperparameters import ECHO_DEFAULTS
from ttrl_bench.adaptation.hyperparameters import OPTIONAL_HYPERPARAMETERS, lora_for_dataset
from ttrl_bench.adaptation.presets import (PRESETS, hyperparameter_sections, is_per_sample, method_task,
                                           method_task_of, register_method, resolve_method, task_hyperparameters)


# --- precedence: preset < adaptation.hyperparameters.<task> < adaptation.method_overrides.<method> ---------------

def test_the_task_layer_overrides_the_preset_and_the_methods_own_overrides_override_the_layer():
    """ttrv's preset says lr 5e-7 and 2 epochs (the authors' log: optim.lr 5e-07, total_epochs 2). The task layer
    sets lr 1e-6 and 5 epochs, the method's own overrides 10 epochs: lr 1e-6 (layer over preset), 10 epochs (own
    over layer); keys neither names keep the preset's (16 trained of 32 votes). reward_params of the overrides
    replace the preset's alpha 0.75 by 0.5 and leave its entropy "paper". The preset table itself is untouched."""
    spec = resolve_method("ttrv", {"learning_rate": 1e-6, "epochs": 5},
                          {"hyperparameters": {"epochs": 10}, "reward_params": {"alpha": 0.5}})
    hp = spec["hyperparameters"]
    assert (hp["learning_rate"], hp["epochs"], hp["num_generations"], hp["n_votes"]) == (1e-6, 10, 16, 32)
    assert spec["reward_params"] == {"alpha": 0.5, "entropy": "paper", "unparsable": "answer"}
    assert spec["reward"] == "ttrv"
    assert (PRESETS["ttrv"]["hyperparameters"]["epochs"], PRESETS["ttrv"]["hyperparameters"]["learning_rate"]) == (2, 5e-7)
    assert PRESETS["ttrv"]["reward_params"]["alpha"] == 0.75
    # without any config the preset comes back whole, a copy (not the table's own dict)
    plain = resolve_method("ttrv")
    assert plain == PRESETS["ttrv"] and plain["hyperparameters"] is not PRESETS["ttrv"]["hyperparameters"]


def test_a_task_layer_key_applies_only_to_the_methods_that_use_it():
    """The grounding layer is shared by VR-TTRL (8 rollouts a round, Appendix A) and MEMO (8 augmentations, no
    rollouts): {num_generations 4, augmentations 2} gives VR-TTRL 4 rollouts and no `augmentations` key, and MEMO
    2 augmentations and no `num_generations` key. A method's own override of a key it lacks is a typo: an error."""
    layer = {"num_generations": 4, "augmentations": 2}
    vr, memo = resolve_method("vr-ttrl", layer)["hyperparameters"], resolve_method("memo", layer)["hyperparameters"]
    assert (vr["num_generations"], "augmentations" in vr) == (4, False)
    assert (memo["augmentations"], "num_generations" in memo) == (2, False)
    with pytest.raises(KeyError) as err:
        resolve_method("memo", None, {"hyperparameters": {"num_generations": 4}})
    assert err.value.args[0] == "method 'memo': unknown hyper-parameter(s) ['num_generations']"


def test_keys_no_method_of_the_task_knows_are_refused_by_name():
    """`updates` is a grounding key (VR-TTRL's vote-only switch): in the mcq layer it is unknown, as is a typo; both
    are named, sorted. An unknown method lists the known ones in the table's order."""
    with pytest.raises(KeyError) as err:
        resolve_method("ttrv", {"updates": False, "learning_rat": 1e-6})
    assert err.value.args[0] == "method 'ttrv': unknown hyper-parameter(s) ['learning_rat', 'updates']"
    with pytest.raises(KeyError) as err:
        resolve_method("ttrv", None, {"hyperparameters": {"epoch": 3}})
    assert err.value.args[0] == "method 'ttrv': unknown hyper-parameter(s) ['epoch']"
    with pytest.raises(KeyError) as err:
        resolve_method("ttvr")
    assert err.value.args[0] == f"unknown method 'ttvr'; known: {', '.join(presets.METHOD_NAMES)}"
    assert err.value.args[0].startswith("unknown method 'ttvr'; known: zero-shot, ttrl-majority, ttrv, ")
    # an optional key (OPTIONAL_HYPERPARAMETERS) is accepted by every method, set or not in its preset
    assert resolve_method("ttrv", {"trained_votes": "verl"}, {"hyperparameters": {"kl_clamp": 10.0}})[
        "hyperparameters"].keys() >= {"trained_votes", "kl_clamp"}


def test_zero_shot_resolves_to_no_adaptation_whatever_the_config():
    assert resolve_method("zero-shot") is None
    assert resolve_method("zero-shot", {"learning_rate": 1e-6}, {"hyperparameters": {}}) is None


def test_echo_update_overrides_fill_in_echos_defaults_and_trls_update_has_none():
    """ECHO's update rule keeps its name and the authors' hybrid_adv defaults (hyperparameters.py ECHO_DEFAULTS: kappa 4.0,
    eps 0.05-0.2, ...), kappa replaced by 2.0; twice in a row (the preset's own `rule` is not consumed). TTRV runs
    TRL's update: update parameters for it are an error; an unknown ECHO parameter too."""
    for _ in range(2):
        update = resolve_method("echo", None, {"update": {"kappa": 2.0}})["update"]
        assert update == {"rule": "echo", **{**ECHO_DEFAULTS, "kappa": 2.0}}
        assert list(update)[0] == "rule" and (update["eps_min"], update["eps_max"]) == (0.05, 0.2)
    assert resolve_method("echo")["update"] == {"rule": "echo", **ECHO_DEFAULTS}
    with pytest.raises(KeyError) as err:
        resolve_method("ttrv", None, {"update": {"kappa": 2.0}})
    assert err.value.args[0] == "method 'ttrv' has TRL's standard update: no update parameters to override"
    with pytest.raises(KeyError, match=re.escape("echo update: unknown parameter(s) ['kapa']")):
        resolve_method("echo", None, {"update": {"kapa": 2.0}})


# --- which config sections and tasks a method reads ----------------------------------------------------------------

def test_methods_read_their_tasks_section_and_echos_family_the_math_one_after_it():
    """ECHO, MM-UPT and supervised GRPO read `mcq` then `math` (the later wins); TTRV `mcq` only; VR-TTRL and the
    Appendix C.1 baselines `grounding`; zero-shot fits every dataset (task None)."""
    assert [hyperparameter_sections(m) for m in ("echo", "mm-upt", "supervised-grpo")] == [("mcq", "math")] * 3
    assert hyperparameter_sections("ttrv") == ("mcq",)
    assert hyperparameter_sections("vr-ttrl") == ("grounding",)
    assert [method_task(m) for m in ("ttrv", "dare", "echo", "vr-ttrl", "tent", "zero-shot")] == \
        ["mcq", "mcq", "mcq", "grounding", "grounding", None]
    assert method_task_of(None) is None and method_task_of({"reward": "gold"}) == "mcq"
    assert method_task_of({"task": "grounding"}) == "grounding"


def test_per_sample_methods_are_vr_ttrl_and_its_baselines_not_the_offline_variant():
    """VR-TTRL adapts on one sample at a time (Section 3), as its Appendix C.1 baselines do; TTRV, ECHO and the
    offline train-split variant (Table 11: one training) adapt on the whole sample set; zero-shot adapts on none."""
    assert [is_per_sample(m) for m in ("vr-ttrl", "vote-only", "tent", "memo")] == [True] * 4
    assert [is_per_sample(m) for m in ("ttrv", "echo", "offline-train-split", "zero-shot")] == [False] * 4


def test_each_tasks_layer_accepts_the_keys_of_its_methods():
    """mcq: TTRV's block (every key of ECHO's and DARE's is one of it) and the optional keys; math: ECHO's block,
    whose keys are TTRV's less lr_schedule_per, loss_type, dual_clip and data_seed, all of them optional keys, so
    the same set; grounding adds what only grounding methods set: VR-TTRL's `updates` (vote-only), Tent's
    `trainable`, MEMO's `augmentations` and `memo_form`."""
    mcq = task_hyperparameters("mcq")
    assert task_hyperparameters("math") == mcq
    assert {"learning_rate", "num_generations", "n_votes", "epochs", "lora", "token_confidence"} <= mcq
    assert task_hyperparameters("grounding") - mcq == {"updates", "trainable", "augmentations", "memo_form"}
    assert mcq - task_hyperparameters("grounding") == set()
    assert OPTIONAL_HYPERPARAMETERS <= mcq


# --- register_method (docs/extending.md) -------------------------------------------------------------------------

def test_a_registered_method_joins_the_table_and_the_method_names():
    """A preset naming reward, hyperparameters and source is added last, to PRESETS and METHOD_NAMES, and resolves;
    an existing name or a preset lacking keys is refused, the missing keys named in sorted order."""
    saved = presets.METHOD_NAMES
    preset = {"reward": "gold", "reward_params": {}, "hyperparameters": {"learning_rate": 1e-6, "num_generations": 4},
              "source": "a test"}
    try:
        register_method("my-method", preset)
        assert PRESETS["my-method"] is preset
        assert presets.METHOD_NAMES == saved + ("my-method",)
        assert resolve_method("my-method", None, {"hyperparameters": {"num_generations": 8}})["hyperparameters"] == \
            {"learning_rate": 1e-6, "num_generations": 8}
    finally:
        PRESETS.pop("my-method", None)
        presets.METHOD_NAMES = saved
    with pytest.raises(ValueError) as err:
        register_method("ttrv", preset)
    assert str(err.value) == "method 'ttrv' exists already"
    with pytest.raises(ValueError) as err:
        register_method("my-method", {"reward": "gold"})
    assert str(err.value) == "method 'my-method': its preset needs hyperparameters, source"
    assert "my-method" not in PRESETS and presets.METHOD_NAMES == saved


# --- lora_for_dataset (ECHO's `authors` protocol: GeoQA's adapter, Geometry3k trained fully) --------------------

def test_the_lora_adapter_applies_to_its_training_sets_only():
    """The ECHO authors' GeoQA adapter (rank 128, alpha 128: geometry3k.sh:108-109, all-linear: ppo_trainer.yaml:119)
    for GeoQA, full fine-tuning (None) for Geometry3k; the `datasets` key itself does not reach the adapter."""
    lora = {"rank": 128, "alpha": 128, "target_modules": "all-linear", "datasets": ["geoqa"]}
    assert lora_for_dataset(lora, "geoqa") == {"rank": 128, "alpha": 128, "target_modules": "all-linear"}
    assert lora_for_dataset(lora, "geometry3k") is None
    assert lora_for_dataset(None, "geoqa") is None
    assert lora_for_dataset({"rank": 8, "alpha": 16, "datasets": ["a", "b"]}, "b") == {"rank": 8, "alpha": 16}


def test_a_lora_setting_without_its_datasets_or_with_unknown_keys_is_refused_by_name():
    with pytest.raises(ValueError) as err:
        lora_for_dataset({"rank": 128, "alpha": 128}, "geoqa")
    assert str(err.value) == ("adaptation.hyperparameters.<task>.lora = {'rank': 128, 'alpha': 128}: needs rank, alpha "
                              "and datasets (target_modules optional); unknown: []")
    with pytest.raises(ValueError) as err:
        lora_for_dataset({"rank": 8, "alpha": 8, "datasets": ["geoqa"], "dropout": 0.1, "bias": "none"}, "geoqa")
    assert str(err.value).endswith("needs rank, alpha and datasets (target_modules optional); unknown: ['bias', 'dropout']")
    for lacking in ("rank", "alpha"):
        with pytest.raises(ValueError, match="needs rank, alpha and datasets"):
            lora_for_dataset({k: v for k, v in {"rank": 8, "alpha": 8, "datasets": ["geoqa"]}.items() if k != lacking},
                             "geoqa")


def test_unknown_method_and_hyperparameter_are_named():
    with pytest.raises(KeyError, match="unknown method 'ttrv2'"):
        resolve_method("ttrv2")
    with pytest.raises(KeyError, match="learning_rat"):
        resolve_method("ttrv", {"learning_rat": 1.0})
    assert resolve_method("zero-shot") is None
    assert resolve_method("ttrv", {"num_generations": 4})["hyperparameters"]["num_generations"] == 4
    assert resolve_method("ttrv")["hyperparameters"]["learning_rate"] == 5e-7  # TTRV Appendix A
