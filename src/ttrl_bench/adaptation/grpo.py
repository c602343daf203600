"""Test-time adaptation with TRL's GRPOTrainer: rollouts on unlabeled test prompts, a label-free
group reward, GRPO updates. Methods are presets (presets.py) of this one trainer."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import pandas as pd
import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from ..evaluation.tasks import TASKS
from ..generation.backend import choose_backend
from ..rewards.registry import get_reward
from ..rewards.voting import answer_entropy, majority_answer

log = logging.getLogger(__name__)


class SplitGroupError(RuntimeError):
    """The N completions of one prompt did not arrive together: group rewards would be wrong."""


def completion_text(completion) -> str:
    """TRL passes conversational completions as [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, list):
        return "".join(m["content"] if isinstance(m["content"], str) else "" for m in completion)
    return completion


@torch.no_grad()
def completion_entropies(model, processor, prompt_text: str, image, completion_ids: list[list[int]]) -> list[float]:
    """Mean token entropy (nats) of each completion of one prompt under the current policy: one
    forward pass over prompt + completion (SPEC.md, DARE: "a forward pass of the policy")."""
    from ..generation.hf import chat_prompt

    encoded = processor(text=[chat_prompt(processor, prompt_text)], images=[image], return_tensors="pt")
    prompt_ids = encoded["input_ids"][0]
    n, p, longest = len(completion_ids), len(prompt_ids), max(1, max(map(len, completion_ids)))
    input_ids = torch.full((n, p + longest), processor.tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    for i, ids in enumerate(completion_ids):
        input_ids[i, :p] = prompt_ids
        input_ids[i, p : p + len(ids)] = torch.as_tensor(ids, dtype=torch.long)
        attention[i, : p + len(ids)] = 1
    logits = model(
        input_ids=input_ids.to(model.device),
        attention_mask=attention.to(model.device),
        pixel_values=encoded["pixel_values"].repeat(n, 1).to(model.device),
        image_grid_thw=encoded["image_grid_thw"].repeat(n, 1).to(model.device),
    ).logits[:, p - 1 : p - 1 + longest].float()
    logp = logits.log_softmax(-1)
    entropy = -(logp.exp() * logp).sum(-1)  # (n, longest)
    return [float(entropy[i, : len(ids)].mean()) if len(ids) else 0.0 for i, ids in enumerate(completion_ids)]


def normalise_uncertainty(entropies: list[float], vocab_size: int, how: str) -> list[float]:
    """Entropies (nats) -> [0, 1], as DARE's bonus (1 - u) needs: "vocab" divides by log |V|
    (the maximum entropy of one token), "minmax" rescales within the group."""
    if how == "vocab":
        return [min(1.0, h / math.log(vocab_size)) for h in entropies]
    if how == "minmax":
        lo, hi = min(entropies), max(entropies)
        return [0.0 if hi == lo else (h - lo) / (hi - lo) for h in entropies]
    raise ValueError(f"uncertainty normalisation must be 'vocab' or 'minmax', got {how!r}")


class GroupReward:
    """Adapts a group reward (answers -> rewards) to TRL's reward-function signature.

    TRL calls it with the whole generation batch, prompts repeated `num_generations` times in a
    row. It cuts the batch into groups, refuses a group whose ids differ (a split group), parses
    each completion with the dataset's task, adds the task's format rewards (VR-TTRL), and records
    per-step statistics for the training log. The hidden labels are read only for that log (TTRV
    Figure 1 curves), never for the reward.
    """

    def __init__(self, name: str, params: dict, num_generations: int, task=None):
        params = dict(params)
        self.uncertainty_norm = params.pop("uncertainty", "vocab")
        self.reward = get_reward(name, **params)
        self.needs_uncertainty = getattr(self.reward, "needs_uncertainty", False)
        self.task = task or TASKS["recognition"]
        self.policy = None  # (model, processor), set by `adapt` for rewards that need uncertainty
        self.num_generations = num_generations
        self.records: list[dict] = []
        self._last_time = time.perf_counter()
        self.__name__ = name  # TRL names the logged reward column after the function

    def _uncertainties(self, start: int, rows: list[dict], completion_ids) -> list[float]:
        model, processor = self.policy
        ids = completion_ids[start : start + self.num_generations]
        entropies = completion_entropies(model, processor, rows[start]["question"], rows[start]["image"], ids)
        return normalise_uncertainty(entropies, model.config.get_text_config().vocab_size, self.uncertainty_norm)

    def __call__(self, prompts, completions, completion_ids=None, trainer_state=None, **columns) -> list[float]:
        n = self.num_generations
        if len(completions) % n:
            raise SplitGroupError(f"batch of {len(completions)} completions is not a multiple of N={n}")
        keys = [k for k in columns if k not in ("log_extra", "log_metric")]
        rows = [dict(zip(keys, values)) for values in zip(*(columns[k] for k in keys))]
        texts = [completion_text(c) for c in completions]
        rewards, stats = [], []
        for start in range(0, len(completions), n):
            group_ids = {r["id"] for r in rows[start : start + n]}
            if len(group_ids) != 1:
                raise SplitGroupError(f"completions {start}..{start + n - 1} mix prompts {sorted(group_ids)}")
            row = rows[start]
            parsed = [self.task.parse(t, row) for t in texts[start : start + n]]
            extra = {"uncertainties": self._uncertainties(start, rows, completion_ids)} if self.needs_uncertainty else {}
            group_rewards = [
                r + f for r, f in zip(self.reward(parsed, **extra), self.task.format_rewards(texts[start : start + n]))
            ]
            rewards.extend(group_rewards)
            stats.append(self._group_stats(parsed, group_rewards, self.task.gold(row)))
        now = time.perf_counter()
        record = {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}
        mean = sum(rewards) / len(rewards)
        record["reward_std"] = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
        # VR-TTRL Figure 3 (reasoning length per step): mean completion length in tokens
        record["completion_length"] = sum(map(len, completion_ids)) / len(completion_ids) if completion_ids else float("nan")
        record["step"] = trainer_state.global_step if trainer_state is not None else len(self.records)
        record["seconds"] = now - self._last_time
        self._last_time = now
        self.records.append(record)
        return rewards

    def _group_stats(self, parsed: list, group_rewards: list[float], gold) -> dict:
        n = len(parsed)
        hashable = [json.dumps(p, sort_keys=True) if isinstance(p, list) else p for p in parsed]
        label = majority_answer(hashable)
        return {
            "reward_mean": sum(group_rewards) / n,
            "answer_entropy": answer_entropy(hashable),
            "majority_fraction": sum(a == label for a in hashable) / n if label is not None else 0.0,
            "unparsable_fraction": sum(p is None for p in parsed) / n,
            "rollout_accuracy": sum(self.task.score(p, gold) for p in parsed) / n,
        }


class ProgressLog(TrainerCallback):
    """One line per optimizer step in the job's log (the trainer's own tqdm bar goes to stderr)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs:
            log.info("step %d/%d %s", state.global_step, state.max_steps, {k: round(v, 4) for k, v in logs.items() if isinstance(v, float)})


def adaptation_dataset(manifest: pd.DataFrame, image_root: Path) -> Dataset:
    """Conversational prompts + an `image` column (TRL inserts the image before the user text);
    the manifest's other columns ride along for the reward's parser and training log. Images are
    decoded when TRL reads a batch (`with_transform`), so only a step's images are in memory."""
    from PIL import Image

    def decode(batch: dict) -> dict:
        images = []
        for sample_id, path in zip(batch["id"], batch["image"]):
            try:
                with Image.open(path) as im:
                    images.append(im.convert("RGB"))
            except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
                raise ValueError(f"adaptation sample {sample_id}: image {path} does not decode: {err}") from err
        return {"id": batch["id"], "image": images}

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
    return Dataset.from_dict(columns).with_transform(decode, columns=["id", "image"], output_all_columns=True)


def grpo_config(out_dir: Path, hp: dict, seed: int) -> GRPOConfig:
    """GRPOConfig from a preset's hyper-parameters; one prompt's N rollouts per optimizer step
    unless `prompts_per_step` says otherwise."""
    n = hp["num_generations"]
    backend = rollout_backend(hp.get("rollout_backend", "auto"))
    return GRPOConfig(
        output_dir=str(out_dir / "trainer"),
        per_device_train_batch_size=n * hp.get("prompts_per_step", 1),
        num_generations=n,
        max_completion_length=hp["max_completion_length"],
        temperature=hp["temperature"],
        learning_rate=hp["learning_rate"],
        lr_scheduler_type="cosine",
        weight_decay=hp.get("weight_decay", 0.0),
        max_grad_norm=hp.get("max_grad_norm", 1.0),
        num_train_epochs=hp["epochs"],
        num_iterations=hp.get("updates_per_generation", 1),
        beta=hp.get("kl_beta", 0.0),
        scale_rewards=hp.get("scale_rewards", "group"),
        use_vllm=backend == "vllm",
        vllm_mode="colocate",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        remove_unused_columns=False,
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available(),
        seed=seed,
        disable_tqdm=False,
    )


def rollout_backend(choice: str) -> str:
    """vLLM rollouts (colocated with the trainer) or transformers' generate; see choose_backend."""
    return choose_backend(choice, "adaptation.rollout_backend")


def freeze_vision_tower(model) -> None:
    """VR-TTRL Appendix A: the vision encoder is frozen during adaptation."""
    for param in model.model.visual.parameters():
        param.requires_grad_(False)


def adapt(model, processor, manifest: pd.DataFrame, image_root: Path, method: dict, out_dir: Path, seed: int,
          task=None) -> pd.DataFrame:
    """Run GRPO on `manifest`'s prompts with `method`'s reward; returns the per-step log."""
    hp = method["hyperparameters"]
    if len(manifest) < hp.get("prompts_per_step", 1):
        raise ValueError(
            f"{len(manifest)} adaptation samples cannot fill one step of prompts_per_step="
            f"{hp['prompts_per_step']}: lower adaptation.hyperparameters.<task>.prompts_per_step or raise "
            "adaptation.n_samples"
        )
    if hp.get("freeze_vision"):
        freeze_vision_tower(model)
    reward = GroupReward(method["reward"], method.get("reward_params", {}), hp["num_generations"], task)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=grpo_config(out_dir, hp, seed),
        train_dataset=adaptation_dataset(manifest, image_root),
        processing_class=processor,
        callbacks=[ProgressLog()],
    )
    reward.policy = (model, processor)
    trainer.train()
    model.eval()  # the trainer leaves train mode on; predictions right after adapting need eval mode
    records = pd.DataFrame(reward.records)  # one row per generation round
    records.attrs["optimizer_steps"] = trainer.state.global_step
    return records
