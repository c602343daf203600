"""VR-TTRL Appendix C's single-sample baselines (VR-TTRL, Single-Sample Test-Time RL for VLMs, anonymous submission, C.1): Tent-style entropy
minimisation, MEMO-style consistency over augmentations, SFT on the greedy pseudo-label, SFT on the
consensus pseudo-label. Each adapts one test sample from the base weights; per_sample.py restores
them afterwards, as for VR-TTRL.

Per sample: the pseudo-answer comes first, from the model as it is (C.1: "generate an answer with
the current model", "first produces a single greedy answer", "sample multiple rollouts ... majority
voting ... the same consensus mechanism as in VR-TTRL"); then K optimizer steps on the method's loss
(losses.py), teacher-forced on that answer. transformers' Trainer runs the steps: AdamW, gradient
clipping, the lr schedule, bf16 autocast over fp32 weights on GPU, and FSDP when the job is launched
over several GPUs, as TRL's GRPOTrainer does for VR-TTRL.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from datasets import Dataset
from PIL import Image
from transformers import Trainer, TrainingArguments

from ..datasets.preprocessing import open_model_view
from ..models.families import completion_logits, vision_tower
from ..runs.processes import process_state
from . import losses
from .config import optimizer_arguments
from .grpo import freeze_vision_tower
from .single_sample import consensus_vote, predict_greedy
from .utils import ProgressLog
from .weights import WeightSnapshot

log = logging.getLogger(__name__)

OBJECTIVES = ("tent", "memo", "sft")


@dataclass
class PseudoAnswer:
    """A completion as the baseline trains on it: token ids (the text re-tokenised, then the end of
    turn), what each token's loss counts (`mask`), and the images it is scored under."""

    text: str
    ids: list[int]
    mask: list[int]
    images: list


def augmented_copies(image: Image.Image, k: int, seed: int) -> list[Image.Image]:
    """K seeded augmentations of the image (C.1: "random crop/flip/color jitter"; strengths are not
    given: ours, below). Every copy keeps the original size, so all K have the same image tokens and
    go through one forward. The global RNG is left as it was."""
    from torchvision.transforms import v2

    h, w = image.height, image.width
    augment = v2.Compose([
        v2.RandomResizedCrop((h, w), scale=(0.5, 1.0), antialias=True),
        v2.RandomHorizontalFlip(p=0.5),
        v2.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4),
    ])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [augment(image) for _ in range(k)]


def tokenised(processor, text: str, eos_id: int, answer_only: bool) -> tuple[list[int], list[int]]:
    """The completion's ids plus the end-of-turn token, and the loss mask: the answer's tokens
    (Tent, MEMO: C.1's T_ans) or every token (SFT: the whole pseudo-label, its end included)."""
    encoded = processor.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"]) + [eos_id]
    if not answer_only:
        return ids, [1] * len(ids)
    # the end of turn spans no character: outside any answer; part of a reply without one
    return ids, losses.answer_token_mask(text, [*map(tuple, encoded["offset_mapping"]), (len(text), len(text))])


def end_of_turn_id(model) -> int:
    """The token generation stops at (the first of the generation config's, as generate does)."""
    eos = model.generation_config.eos_token_id
    return eos[0] if isinstance(eos, list) else eos


def pseudo_answer(model, processor, row: dict, image, method: dict, seed: int, max_new_tokens: int) -> PseudoAnswer:
    """The answer the baseline trains on: the greedy one, or VR-TTRL's consensus of N rollouts."""
    hp = method["hyperparameters"]
    model.eval()
    if method.get("pseudo_label") == "consensus":
        text = consensus_vote(model, processor, row, image, hp, method["reward_params"], seed)
    else:
        text = predict_greedy(model, processor, row, image, max_new_tokens)
    objective = method["objective"]
    ids, mask = tokenised(processor, text, end_of_turn_id(model), answer_only=objective != "sft")
    images = augmented_copies(image, hp["augmentations"], seed) if objective == "memo" else [image]
    return PseudoAnswer(text, ids, mask, images)


def objective_loss(model, processor, row: dict, answer: PseudoAnswer, method: dict) -> torch.Tensor:
    """The method's loss on the pseudo-answer under the current weights (one forward of all copies)."""
    copies = len(answer.images)
    logits = completion_logits(model, processor, row["prompt"], answer.images, [answer.ids] * copies,
                               system=row.get("system"))
    mask = torch.tensor(answer.mask, dtype=torch.float32, device=logits.device)
    objective = method["objective"]
    if objective == "tent":
        return losses.tent_loss(logits[0], mask)
    if objective == "memo":
        return losses.memo_loss(logits, mask, method["hyperparameters"].get("memo_form", "kl_to_mean"))
    targets = torch.tensor(answer.ids, device=logits.device)
    return losses.sft_loss(logits[0], targets, mask)


class ObjectiveTrainer(Trainer):
    """transformers' Trainer whose loss is `loss_fn(model)`: every step is the same sample, so the
    batch it hands over carries nothing but the step."""

    def __init__(self, *args, loss_fn, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_fn = loss_fn

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = self.loss_fn(model)
        return (loss, None) if return_outputs else loss


def training_arguments(out_dir: Path, hp: dict, seed: int) -> TrainingArguments:
    """K = `epochs` optimizer steps on the one sample, with the optimizer settings GRPO uses."""
    return TrainingArguments(output_dir=str(out_dir / "trainer"), per_device_train_batch_size=1, max_steps=hp["epochs"],
                             **optimizer_arguments(hp, seed), disable_tqdm=True)


def select_trainable(model, hp: dict) -> None:
    """C.1: "the same parameter subset as in VR-TTRL (language-side and adapter parameters, with the
    vision encoder frozen)" (trainable "language"); Tent's own choice, the normalisation layers'
    affine parameters outside the vision encoder, is trainable "norm"."""
    freeze_vision_tower(model, hp.get("freeze_vision", False))
    if hp.get("trainable", "language") == "language":
        return
    if hp["trainable"] != "norm":
        raise ValueError(f"trainable must be 'language' or 'norm', got {hp['trainable']!r}")
    tower = set(map(id, vision_tower(model).modules()))
    model.requires_grad_(False)
    for module in model.modules():  # LayerNorm, RMSNorm, whatever the family calls its norms
        if id(module) not in tower and type(module).__name__.lower().endswith("norm"):
            module.requires_grad_(True)


def adapt_baseline(model, processor, manifest: pd.DataFrame, image_root: Path, method: dict, out_dir: Path,
                   seed: int, task=None, before: WeightSnapshot | None = None) -> pd.DataFrame:
    """Adapt on the one sample of `manifest` with an Appendix C baseline; returns one log row per
    optimizer step (its loss), with attrs as grpo.adapt's: `optimizer_steps`, `losses`,
    `weights_changed` (against `before`, default a snapshot taken here)."""
    if len(manifest) != 1:
        raise ValueError(f"Appendix C baselines adapt on one sample at a time, got {len(manifest)}")
    hp = method["hyperparameters"]
    row = manifest.iloc[0].to_dict()
    image = open_model_view(Path(image_root) / row["image"], row.get("input_size"))  # GroundingTask.view's size
    start = time.perf_counter()
    # the pseudo-answer is as long as VR-TTRL's rollouts may be
    answer = pseudo_answer(model, processor, row, image, method, seed, hp["max_completion_length"])
    select_trainable(model, hp)
    before = before or WeightSnapshot(model)
    progress = ProgressLog()
    # one row per step on every process: under FSDP each runs the same sample, as one GRPO group split
    steps = Dataset.from_dict({"step": list(range(hp["epochs"] * process_state().num_processes))})
    trainer = ObjectiveTrainer(
        model=model, args=training_arguments(out_dir, hp, seed), train_dataset=steps, callbacks=[progress],
        loss_fn=lambda m: objective_loss(m, processor, row, answer, method),
    )
    trainer.train()
    model.eval()
    records = pd.DataFrame({"step": range(len(progress.losses)), "loss": progress.losses,
                            "pseudo_label_tokens": len(answer.ids), "loss_tokens": sum(answer.mask),
                            "seconds": (time.perf_counter() - start) / max(1, len(progress.losses))})
    records.attrs.update(optimizer_steps=trainer.state.global_step, losses=progress.losses, verifications=[],
                         weights_changed=before.changed_fraction(model), weights_changed_saved=None)
    log.info("%s: %d steps changed %.2f%% of the trainable weights", method["objective"], trainer.state.global_step,
             100 * records.attrs["weights_changed"])
    return records
