"""Utilities of a GRPO adaptation run apart from the trainer: the per-step progress log (a Trainer
callback), saving the adapted weights in the checkpoint's dtype with a config.json that says so, and
the messages for running out of GPU memory and for failed vLLM rollouts."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import torch
from transformers import TrainerCallback

from ..models.families import parameter_count
from ..models.saved import record_saved
from ..runs.kill_points import kill_point

log = logging.getLogger(__name__)


class ProgressLog(TrainerCallback):
    """One line per optimizer step in the job's log (the trainer's own tqdm bar goes to stderr); the
    losses are kept for run.json, and TRL's own seconds per optimizer step (`step_time`: generation
    and training of the step, without the trainer's construction) for benchmarks/gpu.py."""

    def __init__(self):
        self.losses: list[float] = []
        self.learning_rates: list[float] = []  # the lr each optimizer step ran at (verl logs actor/lr per round)
        self.step_times: list[float] = []

    def on_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        self.learning_rates.append(optimizer.param_groups[0]["lr"])

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))
        if logs and "step_time" in logs:  # logging_steps=1: one optimizer step per log
            self.step_times.append(float(logs["step_time"]))
        if logs:
            log.info("step %d/%d %s", state.global_step, state.max_steps, {k: round(v, 4) for k, v in logs.items() if isinstance(v, float)})


class StopAfterRounds(TrainerCallback):
    """Training stopped after `rounds` generation rounds, the schedule still the whole run's: the ECHO authors'
    GeoQA cells evaluate the checkpoint of round 654 (standalone_inference.py:22, global_step_654) of a run set
    for 5 epochs (hyper-parameter stop_after_rounds). A round is `steps_per_round` optimizer steps."""

    def __init__(self, rounds: int):
        if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
            raise ValueError(f"adaptation.hyperparameters.<task>.stop_after_rounds resolves to {rounds!r}: a positive "
                             "number of rounds per training set ({dataset: rounds}, resolved per job)")
        self.rounds = rounds

    def on_step_end(self, args, state, control, **kwargs):
        from .verl_update import steps_per_round

        if state.global_step >= self.rounds * steps_per_round(args):
            control.should_training_stop = True


def out_of_memory_message(model, hp: dict, err: Exception) -> str:
    free, total = torch.cuda.mem_get_info() if torch.cuda.is_available() else (0, 0)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "this device"
    return (
        f"out of GPU memory adapting a {parameter_count(model) / 1e9:.2f}B-parameter model on {device} "
        f"({total / 2**30:.0f} GiB): {err}\nLower adaptation.hyperparameters.<task>.micro_batch_size (now "
        f"{hp.get('micro_batch_size') or hp['num_generations']}) or generation_batch_size (now "
        f"{hp.get('generation_batch_size') or hp['num_generations']}), keep gradient_checkpointing on, shorten "
        "max_completion_length, or give the job more GPUs (models.<name>.gpus)."
    )


def vllm_rollout_failure(err: Exception) -> RuntimeError:
    """A vLLM rollout's failure, with the way round it: colocated vLLM rollouts (what `rollout_backend: auto`
    picks where vLLM is installed) have not run on a GPU since the trainer's rewrite; transformers' generate has."""
    return RuntimeError(f"vLLM rollouts failed ({type(err).__name__}: {err}); set adaptation.rollout_backend: hf "
                        "(transformers' generate, slower, the path the CPU tests run) and rerun")


def save_adapted(trainer, processor, out: Path, dtype: torch.dtype) -> None:
    """The adapted weights in the checkpoint's own dtype (what evaluation loads), gathered whole from
    however many processes hold shards of them. A LoRA run (hyperparameter `lora`) saves its adapter in
    out/lora_adapter, as the ECHO authors' checkpoint holds one, and beside it the base checkpoint with the
    adapter merged by peft, which evaluation loads like any other. The completion record (models/saved.py)
    comes last."""
    from peft import PeftModel

    state = trainer.accelerator.get_state_dict(trainer.model)  # every process takes part
    if trainer.accelerator.is_main_process:
        model = trainer.accelerator.unwrap_model(trainer.model)
        if isinstance(model, PeftModel):
            model = merged_lora(model, state, out / "lora_adapter")
            state = model.state_dict()
        model.save_pretrained(out, state_dict={k: v.to(dtype) for k, v in state.items()})
        save_config_dtype(model.config, out, dtype)
        kill_point("adapt-save")  # tests/workflow/test_resume.py: a kill with half the checkpoint written
        processor.save_pretrained(out)
        record_saved(out)  # last: what evaluation checks before it trusts the directory
    trainer.accelerator.wait_for_everyone()


def merged_lora(model, state: dict, adapter_dir: Path):
    """Save the adapter of a peft model from its gathered `state` (FSDP2 shards gathered by accelerate), then
    load the base checkpoint again on the host and merge the saved adapter into it with peft
    (merge_and_unload): the merge never touches the training processes' sharded weights."""
    from peft import PeftModel, get_peft_model_state_dict

    from ..models.loading import load_model

    model.save_pretrained(adapter_dir, state_dict=get_peft_model_state_dict(model, state_dict=state))
    base, _ = load_model(model.peft_config["default"].base_model_name_or_path, device="cpu", dtype="fp32")
    return PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()


def save_config_dtype(config, out: Path, dtype: torch.dtype) -> None:
    """config.json saying `dtype`, the tensors' dtype: `save_pretrained` writes the in-memory model's
    dtype (transformers 5.23 modeling_utils.py:3433), fp32 for master weights, and `dtype="auto"`
    (evaluation, vLLM) would load a bf16 checkpoint in fp32 (issue 23 finding 1). A copy: the live
    model keeps saying what it holds."""
    config = copy.deepcopy(config)
    config.dtype = dtype
    for key in config.sub_configs:  # what from_pretrained sets on load (modeling_utils.py _get_dtype)
        if getattr(config, key, None) is not None:
            getattr(config, key).dtype = dtype
    config.save_pretrained(out)
