"""How a method's settings are put together (adaptation/presets.py, hyperparameters.py, config.py, placement.py):
the preset's block, under the config's per-task layer `adaptation.hyperparameters.<task>`, under the method's own
`adaptation.method_overrides.<method>`; every default the trainer's arguments fall back on, by name; the errors a
mistyped key gets; and the distributed placement of the KL reference, with fakes for FSDP2 and vLLM (issue 39).
Every expected value is worked out by hand in the test's docstring or read from the source the preset cites."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

from ttrl_bench.adaptation import placement
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


# --- the trainer's arguments: every default by name (config.py) ----------------------------------------------------

def test_optimizer_arguments_default_to_trls_where_a_preset_sets_nothing(monkeypatch):
    """A block naming only the lr: cosine schedule, no warm-up (0.0), no weight decay (0.0), grad clip 1.0,
    gradient checkpointing on, no data seed (the run's seed shuffles); a log line per step, nothing saved or
    reported, the dataset's columns kept, fp32 on the CPU, each micro-batch's gradients reduced (sync_each_batch)."""
    from ttrl_bench.adaptation.config import optimizer_arguments

    monkeypatch.delenv("TTRL_BENCH_AUTOCAST", raising=False)  # bf16 autocast: on GPUs only (generation/precision.py)
    gpu = torch.cuda.is_available()
    args = optimizer_arguments({"learning_rate": 1e-6}, 7)
    assert args == {"learning_rate": 1e-6, "lr_scheduler_type": "cosine", "warmup_steps": 0.0, "weight_decay": 0.0,
                    "max_grad_norm": 1.0, "gradient_checkpointing": True, "logging_steps": 1, "save_strategy": "no",
                    "report_to": "none", "remove_unused_columns": False, "use_cpu": not gpu,
                    "bf16": gpu, "accelerator_config": {"gradient_accumulation_kwargs": {"sync_each_batch": True}},
                    "seed": 7, "data_seed": None}


def test_optimizer_arguments_carry_the_ttrv_authors_settings():
    """The authors' ai2d log (TTRV verl/logs/ai2d/20/ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log): optim.lr
    5e-07 (line 18), lr_warmup_steps_ratio 0.03 (20), warmup_style cosine (23), weight_decay 0.01 (24), grad_clip
    1.0 (14); data shuffled with seed 1 whatever the run's seed (ray_trainer.py:462-497)."""
    from ttrl_bench.adaptation.config import optimizer_arguments

    args = optimizer_arguments({**resolve_method("ttrv")["hyperparameters"], "gradient_checkpointing": False}, 3)
    assert (args["learning_rate"], args["warmup_steps"], args["lr_scheduler_type"], args["weight_decay"],
            args["max_grad_norm"], args["data_seed"], args["seed"], args["gradient_checkpointing"]) == \
        (5e-7, 0.03, "cosine", 0.01, 1.0, 1, 3, False)



def test_optimizer_arguments_pass_a_presets_own_schedule_and_clip_through():
    """A block that sets them (both are keys config `adaptation.hyperparameters` accepts, hyperparameters.py): TRL gets
    the schedule by its own name and the clip as given, not the defaults cosine / 1.0, and the rest as given."""
    from ttrl_bench.adaptation.config import optimizer_arguments

    args = optimizer_arguments({"learning_rate": 2e-6, "lr_scheduler": "constant_with_warmup", "max_grad_norm": 0.25,
                                "warmup_ratio": 0.1, "weight_decay": 0.05, "data_seed": 4}, 9)
    assert (args["learning_rate"], args["lr_scheduler_type"], args["max_grad_norm"], args["warmup_steps"],
            args["weight_decay"], args["data_seed"], args["seed"]) == (
        2e-6, "constant_with_warmup", 0.25, 0.1, 0.05, 4, 9)

_BARE = {"num_generations": 4, "max_completion_length": 8, "temperature": 0.7, "epochs": 2, "learning_rate": 1e-6}


def _choices(monkeypatch, backend):
    """choose_backend answering `backend` (vLLM is not installed on the CPU) and recording what it was asked."""
    from ttrl_bench.adaptation import config

    asked = []
    monkeypatch.setattr(config, "choose_backend", lambda choice, key: asked.append((choice, key)) or backend)
    return asked


def test_grpo_config_defaults_are_trls_update(tmp_path, monkeypatch):
    """A block with only the required keys (rollouts, length, temperature, epochs, lr) on one process: the rollout
    engine is the "auto" choice (asked under the config key adaptation.rollout_backend; HF generate here); one update
    per generation (num_iterations 1), no KL (beta 0.0), group-scaled rewards, TRL's "dapo" loss, no dual clip, TRL's
    vLLM IS correction and bias-corrected KL both on, no extra sampling arguments, no vLLM engine settings
    (vllm_max_model_length stays TRL's None), progress bars on; the reference loaded with TRL's defaults on the CPU,
    in bf16 on the process's GPU. The batch: micro-batch = the 4 rollouts of a step (1 prompt, no
    micro_batch_size), 4 / 4 = 1 accumulation, one group generated at a time."""
    from ttrl_bench.adaptation.config import grpo_config

    asked = _choices(monkeypatch, "hf")
    config = grpo_config(tmp_path, dict(_BARE), seed=5)
    assert asked == [("auto", "adaptation.rollout_backend")]
    assert (config.num_iterations, config.beta, config.scale_rewards, config.loss_type, config.delta) == \
        (1, 0.0, "group", "dapo", None)
    assert (config.vllm_importance_sampling_correction, config.use_bias_correction_kl, config.use_vllm) == \
        (True, True, False)
    assert (config.generation_kwargs, config.vllm_max_model_length, config.disable_tqdm) == (None, None, False)
    if torch.cuda.is_available():  # accelerate names the device "cuda" or "cuda:0"
        assert config.model_init_kwargs["dtype"] is torch.bfloat16
        assert config.model_init_kwargs["device_map"].startswith("cuda")
    else:
        assert config.model_init_kwargs is None
    assert (config.num_generations, config.max_completion_length, config.temperature, config.num_train_epochs) == \
        (4, 8, 0.7, 2)  # 2 epochs, not TrainingArguments' own 3
    assert (config.per_device_train_batch_size, config.gradient_accumulation_steps, config.generation_batch_size) == \
        (4, 1, 4)
    assert (config.output_dir, config.seed, config.learning_rate) == (str(tmp_path / "trainer"), 5, 1e-6)


def test_grpo_config_keeps_progress_bars_when_transformers_is_quiet(tmp_path, monkeypatch):
    """TrainingArguments' own default hides tqdm where transformers logs above WARNING (TRANSFORMERS_VERBOSITY=error);
    the adaptation's rounds keep their progress bars whatever the verbosity."""
    import transformers

    from ttrl_bench.adaptation.config import grpo_config

    _choices(monkeypatch, "hf")
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        assert grpo_config(tmp_path, dict(_BARE), seed=0).disable_tqdm is False
    finally:
        transformers.logging.set_verbosity(level)


def test_grpo_config_takes_verls_update_where_the_block_asks(tmp_path, monkeypatch):
    """VERL_UPDATE's switches (presets.py: TRL's vLLM IS factor and k3 x ratio both off) and the authors' update:
    2 updates per generation, KL 1e-3, bnpo, dual clip 3.0, rewards unscaled ("none"), sampling arguments passed;
    the block's rollout_backend is the one asked for."""
    from ttrl_bench.adaptation.config import grpo_config

    asked = _choices(monkeypatch, "hf")
    hp = {**_BARE, "rollout_backend": "hf", "updates_per_generation": 2, "kl_beta": 1e-3, "scale_rewards": "none",
          "loss_type": "bnpo", "dual_clip": 3.0, "trl_vllm_is_correction": False, "bias_corrected_kl": False}
    config = grpo_config(tmp_path, hp, seed=0, generation_kwargs={"suppress_tokens": [3]})
    assert asked == [("hf", "adaptation.rollout_backend")]
    assert (config.num_iterations, config.beta, config.scale_rewards, config.loss_type, config.delta) == \
        (2, 1e-3, "none", "bnpo", 3.0)
    assert (config.vllm_importance_sampling_correction, config.use_bias_correction_kl) == (False, False)
    assert config.generation_kwargs == {"suppress_tokens": [3]}


def test_grpo_config_with_vllm_rollouts_sizes_trls_colocated_engine(tmp_path, monkeypatch):
    """vLLM chosen: TRL's colocated engine with config adaptation.vllm's memory share (0.45 here, as asked), a model
    length of the default 4096 prompt tokens + the block's 8 completion tokens = 4104, sleep mode off, one GPU per
    engine (generation/vllm_settings.py)."""
    from ttrl_bench.adaptation.config import grpo_config

    _choices(monkeypatch, "vllm")
    config = grpo_config(tmp_path, {**_BARE, "rollout_backend": "vllm"}, seed=0,
                         vllm_settings={"gpu_memory_utilization": 0.45})
    assert (config.use_vllm, config.vllm_mode, config.vllm_gpu_memory_utilization, config.vllm_max_model_length,
            config.vllm_enable_sleep_mode, config.vllm_tensor_parallel_size) == (True, "colocate", 0.45, 4104, False, 1)


def test_grpo_config_lays_the_batch_out_for_the_processes_accelerate_started(tmp_path, monkeypatch):
    """The ttrv preset under `accelerate launch` on 4 processes (the authors' 4 GPUs): 16 trained rollouts a step,
    micro-batch 2 each, 16 / (2 x 4) = 2 accumulations, a round of 64 generated at once (test_ttrv_preset.py); on
    one process the same step takes 16 / 2 = 8 accumulations."""
    from ttrl_bench.adaptation import config

    _choices(monkeypatch, "hf")
    hp = resolve_method("ttrv")["hyperparameters"]
    monkeypatch.setattr(config, "process_state", lambda: SimpleNamespace(num_processes=4, device=torch.device("cpu")))
    built = config.grpo_config(tmp_path, {**hp, "temperature": 1.0}, seed=0)
    assert (built.per_device_train_batch_size, built.gradient_accumulation_steps, built.generation_batch_size) == (2, 2, 64)
    monkeypatch.setattr(config, "process_state", lambda: SimpleNamespace(num_processes=1, device=torch.device("cpu")))
    built = config.grpo_config(tmp_path, {**hp, "temperature": 1.0}, seed=0)
    assert (built.per_device_train_batch_size, built.gradient_accumulation_steps, built.generation_batch_size) == (2, 8, 64)


def test_an_unknown_rollout_backend_is_refused_under_its_config_key(tmp_path):
    """choose_backend's message names the config key the choice came from: adaptation.rollout_backend."""
    from ttrl_bench.adaptation.config import grpo_config, rollout_backend

    message = "adaptation.rollout_backend must be auto, hf or vllm, got 'sglang'"
    with pytest.raises(ValueError) as err:
        rollout_backend("sglang")
    assert str(err.value) == message
    with pytest.raises(ValueError) as err:
        grpo_config(tmp_path, {**_BARE, "rollout_backend": "sglang"}, seed=0)
    assert str(err.value) == message
    assert rollout_backend("hf") == "hf"


def test_forbidden_tokens_are_suppressed_or_left_out_of_the_allowed_ids():
    """HF generate: suppress_tokens [5, 7]. vLLM: allowed ids = the tokenizer's 10 ids less 5 (7 is kept out of
    range: an id at or past the tokenizer's size, e.g. a processor-only placeholder, is dropped before vLLM)."""
    from ttrl_bench.adaptation.config import forbidden_token_kwargs

    assert forbidden_token_kwargs("hf", [5, 7], 10) == {"suppress_tokens": [5, 7]}
    assert forbidden_token_kwargs("vllm", [5, 12], 10) == {"allowed_token_ids": [0, 1, 2, 3, 4, 6, 7, 8, 9]}
    assert forbidden_token_kwargs("vllm", [10, 12], 10) == {}


def test_lora_config_is_the_echo_authors_adapter():
    """peft's LoraConfig as verl's fsdp_workers.py:315-323 builds it: causal LM, r and alpha as given, target
    modules all-linear unless named, no bias; none without `lora`; an unresolved one (still naming its datasets)
    is refused with the way to resolve it."""
    from peft import TaskType

    from ttrl_bench.adaptation.config import lora_config

    assert lora_config(None) is None
    config = lora_config({"rank": 128, "alpha": 64})
    assert (config.task_type, config.r, config.lora_alpha, config.target_modules, config.bias) == \
        (TaskType.CAUSAL_LM, 128, 64, "all-linear", "none")
    assert lora_config({"rank": 8, "alpha": 8, "target_modules": ["q_proj"]}).target_modules == {"q_proj"}
    with pytest.raises(ValueError) as err:
        lora_config({"rank": 8, "alpha": 8, "datasets": ["geoqa"]})
    assert str(err.value) == ("adaptation.hyperparameters.<task>.lora is resolved per training set (lora_for_dataset, "
                              "plan/resources.py job_method_settings) before the trainer: give --method-json the job's")


# --- placement.py: the KL reference's loading and sharding, vLLM's engine size ---------------------------------

def test_the_reference_loads_in_bf16_on_the_processs_own_gpu():
    """GPU: bf16, device_map the process's device ("cuda:1" on the second), not TRL's "auto"; CPU: TRL's defaults."""
    assert placement.reference_init_kwargs(True, torch.device("cuda", 1)) == {"dtype": torch.bfloat16, "device_map": "cuda:1"}
    assert placement.reference_init_kwargs(False, torch.device("cpu")) is None


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)


class _Model(torch.nn.Module):
    """A block as the first child (modules()[1]), a non-block, then two blocks inside a ModuleList."""
    _no_split_modules = ["_Block"]

    def __init__(self):
        super().__init__()
        self.first = _Block()
        self.embed = torch.nn.Embedding(3, 2)
        self.layers = torch.nn.ModuleList([_Block(), _Block()])


def _fsdp_fakes(monkeypatch, fsdp_version, mixed_precision=None, mesh=None):
    """Records fully_shard's and TRL prepare_fsdp's calls instead of sharding (no process group on the CPU)."""
    calls = {"shard": [], "prepare": []}
    monkeypatch.setattr("torch.distributed.fsdp.fully_shard", lambda module, **kw: calls["shard"].append((module, kw)))
    monkeypatch.setattr(placement, "trl_prepare_fsdp", lambda model, acc: calls["prepare"].append((model, acc)) or "root")
    plugin = SimpleNamespace(fsdp_version=fsdp_version, reshard_after_forward=True, cpu_offload="offload-policy",
                             mixed_precision_policy=mixed_precision)
    accelerator = SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin),
                                  parallelism_config=SimpleNamespace(fsdp_dim_names=("dp_shard",)))
    if mesh is not None:
        accelerator.torch_device_mesh = mesh
    return calls, accelerator


def test_fsdp2_shards_each_transformer_block_of_the_reference_before_trls_root_call(monkeypatch):
    """The model's 3 `_Block`s (the first child included), each with accelerate's plugin settings, in module order;
    the embedding and the list are left to TRL's root call, which gets the model and the accelerator and whose
    result is returned. No mixed-precision policy in the plugin: FSDP2's default MixedPrecisionPolicy(); no device
    mesh on the accelerator: mesh None."""
    model = _Model()
    calls, accelerator = _fsdp_fakes(monkeypatch, 2)
    assert placement.shard_reference_per_block(model, accelerator) == "root"
    expected = {"reshard_after_forward": True, "offload_policy": "offload-policy", "mp_policy": MixedPrecisionPolicy(),
                "mesh": None}
    assert calls["shard"] == [(model.first, expected), (model.layers[0], expected), (model.layers[1], expected)]
    assert calls["prepare"] == [(model, accelerator)]


def test_fsdp2_block_sharding_takes_the_plugins_precision_and_the_fsdp_submesh(monkeypatch):
    """With a policy in the plugin and a device mesh, each block gets that policy and mesh[("dp_shard",)] (the FSDP
    dimensions of accelerate's parallelism config), as TRL shards the root (trl models/utils.py:328-334)."""
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    mesh = {("dp_shard",): "fsdp-submesh"}
    calls, accelerator = _fsdp_fakes(monkeypatch, 2, mixed_precision=policy, mesh=mesh)
    placement.shard_reference_per_block(_Model(), accelerator)
    assert [(kw["mp_policy"], kw["mesh"]) for _, kw in calls["shard"]] == [(policy, "fsdp-submesh")] * 3


def test_fsdp1_and_a_model_without_blocks_leave_the_reference_to_trl(monkeypatch):
    """FSDP1 (accelerate's older plugin) wraps by its own policy: no block sharded here, TRL's call alone. A model
    naming no `_no_split_modules` (None) has no blocks: only TRL's root call."""
    calls, accelerator = _fsdp_fakes(monkeypatch, 1)
    model = _Model()
    assert placement.shard_reference_per_block(model, accelerator) == "root"
    assert calls == {"shard": [], "prepare": [(model, accelerator)]}
    calls, accelerator = _fsdp_fakes(monkeypatch, 2)
    plain = _Model()
    plain._no_split_modules = None
    placement.shard_reference_per_block(plain, accelerator)
    assert calls == {"shard": [], "prepare": [(plain, accelerator)]}


def test_trl_construction_overrides_swap_trls_names_and_restore_them(monkeypatch):
    """Inside: TRL's grpo_trainer calls shard_reference_per_block and a vLLM engine whose max_num_seqs is TRL's
    times the votes per trained rollout (TTRV 32 / 16 = 2: 64 -> 128; ECHO 64 / 32 = 2); None stays None (TRL's
    own default). After, also after an error: TRL's own names again."""
    import trl.trainer.grpo_trainer as grpo_trainer

    engines = []
    monkeypatch.setattr(placement, "trl_VLLMGeneration", lambda *a, **kw: engines.append((a, kw)) or "engine")
    saved = grpo_trainer.prepare_fsdp, grpo_trainer.VLLMGeneration
    with placement.trl_construction_overrides(2):
        assert grpo_trainer.prepare_fsdp is placement.shard_reference_per_block
        assert grpo_trainer.VLLMGeneration("model", max_num_seqs=64, gpu_memory_utilization=0.3) == "engine"
        grpo_trainer.VLLMGeneration("model")
    assert engines == [(("model",), {"max_num_seqs": 128, "gpu_memory_utilization": 0.3}),
                       (("model",), {"max_num_seqs": None})]
    assert (grpo_trainer.prepare_fsdp, grpo_trainer.VLLMGeneration) == saved
    with pytest.raises(RuntimeError, match="boom"), placement.trl_construction_overrides(4):
        raise RuntimeError("boom")
    assert (grpo_trainer.prepare_fsdp, grpo_trainer.VLLMGeneration) == saved



def test_grpo_config_asks_placement_for_the_reference_with_cuda_and_this_processs_device(tmp_path, monkeypatch):
    """GRPOConfig.model_init_kwargs are placement.reference_init_kwargs(whether CUDA is present, this process's
    device), as asked: stood in by a recorder that answers {"device_map": "stand-in"} (the real one gives None on
    the CPU, so on the CPU only the recorder tells on_gpu False from a lost flag, or the device from None)."""
    from ttrl_bench.adaptation import config
    from ttrl_bench.runs.processes import process_state

    asked = []
    monkeypatch.setattr(config, "choose_backend", lambda choice, key: "hf")
    monkeypatch.setattr(config, "reference_init_kwargs", lambda on_gpu, device: asked.append((on_gpu, device))
                        or {"device_map": "stand-in"})
    hp = {"num_generations": 4, "max_completion_length": 8, "temperature": 0.7, "epochs": 2, "learning_rate": 1e-6}
    args = config.grpo_config(tmp_path, hp, seed=0)
    assert asked == [(torch.cuda.is_available(), process_state().device)]
    assert type(asked[0][0]) is bool
    assert args.model_init_kwargs == {"device_map": "stand-in"}

def test_optimizer_arguments_run_on_the_gpu_where_cuda_is_there(monkeypatch):
    """use_cpu is `not torch.cuda.is_available()`: True on this CPU machine, False where CUDA answers True
    (stood in here; nothing else of the arguments is read from the device)."""
    import torch

    from ttrl_bench.adaptation.config import optimizer_arguments

    hp = {"learning_rate": 1e-6}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert optimizer_arguments(hp, 0)["use_cpu"] is True
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert optimizer_arguments(hp, 0)["use_cpu"] is False
