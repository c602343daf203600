"""Load a VLM by Hub id or local path, the same way for the demo model and the papers' models
(InternVL3-2B/8B, InternVL2.5-4B in TTRV; Qwen2.5-VL-7B / VisionReasoner-7B in VR-TTRL)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

from ..runs.processes import process_state
from .source import resolve_model_source


def checkpoint_dtype(source: str) -> torch.dtype:
    """The dtype the checkpoint's weights are stored in (config.json), float32 when unstated."""
    dtype = AutoConfig.from_pretrained(resolve_model_source(source)).dtype
    return getattr(torch, dtype) if isinstance(dtype, str) else (dtype or torch.float32)


def load_model(source: str, device: str | None = None, dtype: str = "auto"):
    """(model, processor) through AutoProcessor / AutoModelForImageTextToText. `dtype="fp32"` is the
    adaptation's choice whatever the checkpoint stores: trainable weights and AdamW state in fp32
    (master weights), compute in bf16 autocast on GPUs (TRL's `bf16=True`); a bf16 update at the
    papers' lr 5e-7 rounds to nothing (docs/gpu-runs.md: 0.26% of the weights changed)."""
    path = resolve_model_source(source)
    device = device or process_state().device  # this process's GPU under `accelerate launch`, or the CPU
    torch_dtype = {"auto": "auto", "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    try:
        processor = AutoProcessor.from_pretrained(path)
        model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch_dtype)
    except OSError as err:
        raise OSError(
            f"could not load model {source!r}: {err}\n"
            "Without network access, point the config key `models.<name>.source` at a local copy."
        ) from err
    processor.tokenizer.padding_side = "left"  # decoder-only batched generation pads on the left
    return model.to(device).eval(), processor
