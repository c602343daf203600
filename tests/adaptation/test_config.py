"""The trainer's arguments (adaptation/config.py): every default they fall back on, by name (optimizer
arguments, GRPOConfig under TRL's or verl's update, vLLM's colocated engine, the batch layout, the rollout
backend, forbidden tokens, LoRA). Every expected value is worked out by hand in the test's docstring or read from
the source the preset cites."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ttrl_bench.adaptation.presets import resolve_method


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
