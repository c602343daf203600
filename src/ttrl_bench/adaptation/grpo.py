"""Test-time adaptation with TRL's GRPOTrainer: rollouts on unlabeled test prompts, a label-free
group reward, GRPO updates. Methods are presets (presets.py) of this one trainer.

At paper scale (docs/gpu-runs.md): trainable weights and AdamW state in fp32 with bf16 autocast on GPUs
(the caller loads the model in fp32), one optimizer step = prompts_per_step x num_generations
completions computed in micro-batches with gradient accumulation, rollouts generated in chunks of
`generation_batch_size`, and the TTRL/TTRV split between the rollouts that vote (`n_votes`) and the
ones trained on (`num_generations`).

This module holds the run: `TestTimeAdaptation` (one trainer for every adaptation of a job), `adapt`,
the adaptation dataset and `freeze_vision_tower`. The parts, as TRL lays out its own: the trainer
subclass in trainer.py, verl's update rules in verl_update.py, the reward function TRL calls in
reward_bridge.py, GRPOConfig and optimizer arguments in config.py, distributed placement of the
models in placement.py, and the progress log, saving and error messages in utils.py."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd
import torch
from accelerate.utils import set_seed
from datasets import Dataset

from ..generation.vllm_settings import collapse_prompts_before_generate, grpo_vllm_environment, probe_colocated_expansion
from ..models.families import (
    add_vision_drop_path,
    freeze_vision_encoder,
    freezes_vision_encoder,
    image_span_token_ids,
    placeholder_token_ids,
    ttrv_logged_temperature,
    unsampleable_token_ids,
)
from .config import forbidden_token_kwargs, grpo_config, lora_config, rollout_backend_and_reason
from .layout import check_votes, fit_to_samples
from .reward_bridge import GroupReward
from .trainer import TestTimeGRPOTrainer
from .utils import ProgressLog, StopAfterRounds, out_of_memory_message, save_adapted
from .verl_update import check_verl_update
from .weights import WeightSnapshot

log = logging.getLogger(__name__)


def adaptation_dataset(manifest: pd.DataFrame, image_root: Path) -> Dataset:
    """Conversational prompts + an `image` column (TRL inserts the image before the user text);
    the manifest's other columns ride along for the reward's parser and training log. Images are
    decoded when TRL reads a batch (`with_transform`), so only a step's images are in memory."""
    from ..datasets.preprocessing import DECODE_ERRORS, open_model_view

    def decode(batch: dict) -> dict:
        images = []
        # a grounding manifest's input_size (GroundingTask.view): the image the rollouts see, resized
        sizes = batch.get("input_size") or [None] * len(batch["id"])
        for sample_id, path, size in zip(batch["id"], batch["image"], sizes):
            try:
                images.append(open_model_view(path, size))
            except DECODE_ERRORS as err:
                raise ValueError(f"adaptation sample {sample_id}: image {path} does not decode: {err}") from err
        kept = {"input_size": batch["input_size"]} if "input_size" in batch else {}
        return {"id": batch["id"], "image": images, **kept}

    system = manifest["system"] if "system" in manifest else [None] * len(manifest)
    columns = {
        "prompt": [
            ([{"role": "system", "content": s}] if isinstance(s, str) else []) + [{"role": "user", "content": p}]
            for s, p in zip(system, manifest["prompt"])
        ],
        "image": [str(Path(image_root) / path) for path in manifest["image"]],
        "question": list(manifest["prompt"]),  # the prompt text again, for DARE's forward pass
    }
    for name in manifest.columns.drop(["prompt", "image", "split", "system"], errors="ignore"):
        columns[name] = [v.tolist() if hasattr(v, "tolist") else v for v in manifest[name]]
    decoded = ["id", "image", *(["input_size"] if "input_size" in columns else [])]
    return Dataset.from_dict(columns).with_transform(decode, columns=decoded, output_all_columns=True)


def freeze_vision_tower(model, setting) -> None:
    """Hyperparameter `freeze_vision` (models/families.py freezes_vision_encoder): VR-TTRL Appendix A and
    C.1 freeze the vision encoder and train the adapter; the TTRV authors' code freezes InternVL's only."""
    if freezes_vision_encoder(model.config.model_type, setting):
        log.info("vision encoder frozen; %d adapter parameters in its tower train", freeze_vision_encoder(model))


class TestTimeAdaptation:
    """One TestTimeGRPOTrainer for every adaptation a job runs: its colocated vLLM engine and KL
    reference model are built once. Per-sample VR-TTRL adapts 200 samples per split, and an engine
    built per sample costs 30-120 s and keeps its GPU memory when deleted (vllm-project/vllm 21073;
    issue 23 finding 3). `run` adapts on a manifest; each run after the first starts as the first
    did: the caller restores the weights (per_sample.py), `run` empties AdamW's state, lets the
    Trainer build a fresh lr schedule (it does on every `train()`), and reseeds."""

    def __init__(self, model, processor, manifest: pd.DataFrame, image_root: Path, method: dict, out_dir: Path,
                 seed: int, task=None):
        hp = fit_to_samples(method["hyperparameters"], len(manifest))
        check_verl_update(hp)
        if hp["temperature"] == "family":  # the TTRV authors' rollout temperature of the model's family
            hp = {**hp, "temperature": ttrv_logged_temperature(model.config)}
        n_votes = check_votes(hp)
        freeze_vision_tower(model, hp.get("freeze_vision", False))
        if hp.get("vision_drop_path") == "checkpoint":
            raise ValueError("vision_drop_path: checkpoint is resolved per model by the plan (plan/resources.py "
                             "job_method_settings); give --method-json a rate")
        if hp.get("vision_drop_path"):  # the authors' InternViT drops paths in training (models/families.py)
            log.info("vision drop path %s: %d residual branches hooked", hp["vision_drop_path"],
                     add_vision_drop_path(model, float(hp["vision_drop_path"])))
        micro = hp.get("micro_batch_size") or hp["num_generations"]
        self.model, self.processor, self.hp, self.runs = model, processor, hp, 0
        self.new_reward = lambda: GroupReward(method["reward"], method.get("reward_params", {}), hp["num_generations"],
                                              task, micro, reward_grid=hp.get("advantages", "trl") != "verl")
        self.reward = self.new_reward()
        forbidden = unsampleable_token_ids(model.config, processor.tokenizer)
        backend, why = rollout_backend_and_reason(hp.get("rollout_backend", "auto"))
        log.info("rollouts: %s (%s)", backend, why)
        if backend == "vllm":
            os.environ.update(grpo_vllm_environment(method.get("vllm")))
        self.progress = ProgressLog()
        self.trainer = TestTimeGRPOTrainer(
            update=method.get("update"),
            model=model,
            reward_funcs=[self.reward],
            args=grpo_config(out_dir, hp, seed, forbidden_token_kwargs(backend, forbidden, len(processor.tokenizer)),
                             method.get("vllm")),
            train_dataset=adaptation_dataset(manifest, image_root),
            processing_class=processor,
            callbacks=[self.progress, *([StopAfterRounds(hp["stop_after_rounds"])] if hp.get("stop_after_rounds") else [])],
            n_votes=n_votes,
            forbidden_token_ids=forbidden,
            lr_schedule_per=hp.get("lr_schedule_per", "step"),
            advantages=hp.get("advantages", "trl"),
            kl_clamp=hp.get("kl_clamp"),
            decay_every_parameter=hp.get("decay_every_parameter", False),
            trained_votes=hp.get("trained_votes", "first"),
            step_order=hp.get("step_order", "shuffled"),
            token_confidence=hp.get("token_confidence", "top_k"),
            peft_config=lora_config(hp.get("lora")),  # TRL wraps the model; its reference: the adapter off
        )
        self.reward.policy = (model, processor)
        if backend == "vllm":  # TRL 1.16 + vLLM expand image placeholders twice (huggingface/trl 6294, 6401)
            llm = self.trainer.vllm_generation.llm
            size = method.get("image_size_bound")  # the bound the caller gave the processor (models/families.py)
            collapse_prompts_before_generate(llm, model.config.image_token_id, image_span_token_ids(processor), size)
            probe_colocated_expansion(llm, processor, self.trainer.train_dataset[0]["image"],
                                      placeholder_token_ids(model.config), size)

    def _start_over(self, manifest: pd.DataFrame, image_root: Path) -> None:
        """The trainer as a new one would be, on `manifest`: the Trainer rebuilds its state, step
        count and lr schedule in every `train()` (transformers trainer.py _prepare_for_training) but
        keeps its (accelerate-prepared) optimizer, whose state is emptied; TRL's generation counters
        restart, the engine reloads the (restored) weights at the first generation, and the reward
        is a new one."""
        trainer = self.trainer
        trainer.train_dataset = adaptation_dataset(manifest, image_root)
        if trainer.optimizer is not None:
            trainer.optimizer.state.clear()
        trainer._step, trainer._buffered_inputs = 0, None
        if trainer.use_vllm:
            trainer._last_loaded_step = -1
        self.reward = trainer.reward_funcs[0] = self.new_reward()  # its log, and a seeded reward's stream
        self.reward.policy = (self.model, self.processor)
        self.progress.losses, self.progress.learning_rates, self.progress.step_times = [], [], []
        trainer.skipped_steps = 0

    def run(self, manifest: pd.DataFrame | None = None, image_root: Path | None = None,
            before: WeightSnapshot | None = None, save_dtype: torch.dtype | None = None) -> pd.DataFrame:
        """GRPO on `manifest` (the constructor's on the first run); the log as `adapt` returns it."""
        if self.runs:
            self._start_over(manifest, image_root)
        self.runs += 1
        model, trainer = self.model, self.trainer
        before = before or WeightSnapshot(model)
        # as TRL's constructor does: one seed per process (grpo_trainer.py:1103), so a group split across
        # processes samples different rollouts; every run samples as the first
        set_seed(trainer.args.seed, device_specific=True)
        try:
            trainer.train()
        except torch.OutOfMemoryError as err:
            raise MemoryError(out_of_memory_message(model, self.hp, err)) from err
        model.eval()  # the trainer leaves train mode on; predictions right after adapting need eval mode
        records = pd.DataFrame(self.reward.records)  # one row per generation round
        records.attrs["optimizer_steps"] = trainer.state.global_step
        records.attrs["losses"] = self.progress.losses
        records.attrs["learning_rates"] = self.progress.learning_rates
        records.attrs["step_times"] = self.progress.step_times
        records.attrs["skipped_steps"] = trainer.skipped_steps  # non-finite gradient norms (trainer._get_grad_norm)
        records.attrs["temperature"] = self.hp["temperature"]  # resolved: "family" names none
        records.attrs["verifications"] = self.reward.verifications
        records.attrs["weights_changed"] = before.changed_fraction(model)
        records.attrs["weights_changed_saved"] = before.changed_fraction(model, save_dtype) if save_dtype else None
        log.info("%d optimizer steps changed %.2f%% of the trainable weights", trainer.state.global_step,
                 100 * records.attrs["weights_changed"])
        return records


def adapt(model, processor, manifest: pd.DataFrame, image_root: Path, method: dict, out_dir: Path, seed: int,
          task=None, save_dtype: torch.dtype | None = None, before: WeightSnapshot | None = None,
          save_to: Path | None = None) -> pd.DataFrame:
    """Run GRPO on `manifest`'s prompts with `method`'s reward; returns the per-generation-round log,
    with attrs `optimizer_steps` and the share of trainable weights the adaptation changed
    (`weights_changed`, and `weights_changed_saved` after casting to `save_dtype`), measured against
    `before` (default: a snapshot taken here). With `save_to`, the adapted model is saved there in
    `save_dtype`."""
    adaptation = TestTimeAdaptation(model, processor, manifest, image_root, method, out_dir, seed, task)
    records = adaptation.run(before=before, save_dtype=save_dtype)
    if save_to is not None:
        save_adapted(adaptation.trainer, processor, save_to, save_dtype or model.dtype)
    return records
