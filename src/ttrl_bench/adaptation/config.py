"""The trainer's arguments: `grpo_config` builds TRL's GRPOConfig from a preset's hyper-parameters,
`optimizer_arguments` the TrainingArguments every adaptation shares (GRPO and the Appendix C
baselines), `forbidden_token_kwargs` the sampling arguments that keep placeholder tokens out of
rollouts, `rollout_backend` the rollout engine (vLLM or transformers' generate), and `lora_config` the
peft adapter TRL trains instead of the whole model where a preset asks for one."""

from __future__ import annotations

from pathlib import Path

import torch
from trl import GRPOConfig

from ..generation.backend import choose_backend
from ..generation.precision import bf16_autocast
from ..generation.vllm_settings import forbid_tokens_sampling_kwargs, grpo_vllm_kwargs
from ..runs.processes import process_state
from .layout import batch_layout
from .placement import reference_init_kwargs


def grpo_config(out_dir: Path, hp: dict, seed: int, generation_kwargs: dict | None = None,
                vllm_settings: dict | None = None) -> GRPOConfig:
    """GRPOConfig from a preset's hyper-parameters, for the processes `accelerate launch` started;
    `vllm_settings` (config `adaptation.vllm`) shape TRL's colocated engine when it generates."""
    num_processes = process_state().num_processes
    backend = rollout_backend(hp.get("rollout_backend", "auto"))
    on_gpu = torch.cuda.is_available()
    engine = grpo_vllm_kwargs(vllm_settings, hp["max_completion_length"]) if backend == "vllm" else {}
    return GRPOConfig(
        output_dir=str(out_dir / "trainer"),
        **batch_layout(hp, num_processes),
        num_generations=hp["num_generations"],
        max_completion_length=hp["max_completion_length"],
        temperature=hp["temperature"],
        num_train_epochs=hp["epochs"],
        num_iterations=hp.get("updates_per_generation", 1),
        beta=hp.get("kl_beta", 0.0),
        scale_rewards=hp.get("scale_rewards", "group"),
        loss_type=hp.get("loss_type", "dapo"),
        delta=hp.get("dual_clip"),  # verl's dual clip c (presets.py: the same loss)
        # TRL's corrections verl lacks (presets.py VERL_UPDATE): the policy-loss factor exp(old - vLLM's sampling
        # log-prob), truncated at 3 (TRL's default; vLLM rollouts only), and k3 times the ratio to the old policy
        vllm_importance_sampling_correction=hp.get("trl_vllm_is_correction", True),
        use_bias_correction_kl=hp.get("bias_corrected_kl", True),
        generation_kwargs=generation_kwargs or None,
        use_vllm=backend == "vllm",
        **engine,
        model_init_kwargs=reference_init_kwargs(on_gpu, process_state().device),
        **optimizer_arguments(hp, seed),
        disable_tqdm=False,
    )


def optimizer_arguments(hp: dict, seed: int) -> dict:
    """The TrainingArguments every adaptation shares (GRPO here, the Appendix C baselines in
    baselines.py): the preset's optimizer settings, fp32 master weights with bf16 autocast on GPUs,
    nothing saved or reported by the Trainer itself."""
    on_gpu = torch.cuda.is_available()
    return dict(
        learning_rate=hp["learning_rate"],
        lr_scheduler_type=hp.get("lr_scheduler", "cosine"),
        warmup_steps=hp.get("warmup_ratio", 0.0),  # a float in [0, 1) is a ratio of the total steps
        weight_decay=hp.get("weight_decay", 0.0),
        max_grad_norm=hp.get("max_grad_norm", 1.0),
        gradient_checkpointing=hp.get("gradient_checkpointing", True),
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        remove_unused_columns=False,
        use_cpu=not on_gpu,
        bf16=bf16_autocast(),  # generation/precision.py: the CPU rehearsal may ask for it too
        # reduce (under FSDP: reduce-scatter) gradients after every micro-batch: the Trainer otherwise runs all
        # but the last in `no_sync` (trainer.py ~1895), where FSDP2 keeps whole unsharded gradients (~15 GB per
        # GPU for 8B; issue 23 finding 4). Without several processes there is nothing to sync: a no-op.
        accelerator_config={"gradient_accumulation_kwargs": {"sync_each_batch": True}},
        seed=seed,
        data_seed=hp.get("data_seed"),
    )


def forbidden_token_kwargs(backend: str, token_ids: list[int], tokenizer_size: int) -> dict:
    """Sampling arguments that keep forbidden tokens out of rollouts. transformers' generate:
    `suppress_tokens` (TRL itself suppresses only the image token, not the video one); vLLM: only
    the other ids of the tokenizer are allowed (generation/vllm_settings.py says why)."""
    if backend == "hf":
        return {"suppress_tokens": list(token_ids)}
    return forbid_tokens_sampling_kwargs([i for i in token_ids if i < tokenizer_size], tokenizer_size)


# What `rollout_backend: auto` runs: transformers' generate, until TRL's colocated vLLM rollouts have a recorded GPU
# run in docs/gpu-runs.md (on the last H100 they ran 5 of 20 steps, with VLLM_USE_FLASHINFER_SAMPLER=0 set by
# hand, then failed on image tokens). `rollout_backend: vllm` is the one setting that asks for them.
AUTO_ROLLOUTS = "hf"


def rollout_backend_and_reason(choice: str) -> tuple[str, str]:
    """(the rollout engine, why), for the job's log: choose_backend's checks, with `auto` = AUTO_ROLLOUTS."""
    key = "adaptation.rollout_backend"
    backend = choose_backend(choice, key)
    if choice != "auto":
        return backend, f"{key}: {choice}"
    return AUTO_ROLLOUTS, (f"{key}: auto = transformers' generate, the rollout path that completed on a GPU; colocated "
                           f"vLLM rollouts have no recorded GPU run yet (docs/gpu-runs.md): set {key}: vllm to use them")


def rollout_backend(choice: str) -> str:
    """vLLM rollouts (colocated with the trainer) or transformers' generate; see rollout_backend_and_reason."""
    return rollout_backend_and_reason(choice)[0]


def lora_config(lora: dict | None):
    """peft's LoraConfig for a job's resolved `lora` (lora_for_dataset), as the ECHO authors' verl builds it
    (fsdp_workers.py:315-323: causal LM, rank, alpha, target modules, no bias); None: no adapter."""
    if lora is None:
        return None
    if "datasets" in lora:
        raise ValueError("adaptation.hyperparameters.<task>.lora is resolved per training set (lora_for_dataset, "
                         "plan/resources.py job_method_settings) before the trainer: give --method-json the job's")
    from peft import LoraConfig, TaskType

    return LoraConfig(task_type=TaskType.CAUSAL_LM, r=lora["rank"], lora_alpha=lora["alpha"],
                      target_modules=lora.get("target_modules", "all-linear"), bias="none")
