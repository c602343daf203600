"""One precision for every forward of an adaptation run (issue 23 finding 9).

Adaptation keeps fp32 master weights and computes in bf16 autocast (TRL / transformers `bf16=True`)
on GPUs. The first `accelerator.prepare` wraps the model's `forward` in that autocast for good
(accelerate accelerator.py:1824-1835), so generation before it (vote-only rollouts, the first
Appendix C pseudo-label) would run in fp32 and generation after it in bf16. The project's own
generation enters the same autocast explicitly, so every one runs in the training precision.

`TTRL_BENCH_AUTOCAST=bf16` turns bf16 autocast on where there is no GPU: CPU autocast takes the same
code path as the GPU's (the real-width rehearsal runs this way); `none` turns it off everywhere.
"""

from __future__ import annotations

import contextlib
import os

import torch

AUTOCAST_ENV = "TTRL_BENCH_AUTOCAST"


def bf16_autocast() -> bool:
    """Whether adaptation computes in bf16 autocast: on a GPU, unless TTRL_BENCH_AUTOCAST says otherwise."""
    choice = os.environ.get(AUTOCAST_ENV, "auto")
    if choice not in ("auto", "bf16", "none"):
        raise ValueError(f"{AUTOCAST_ENV}={choice!r}: expected auto, bf16 or none")
    return choice == "bf16" or (choice == "auto" and torch.cuda.is_available())


def compute_device(model) -> torch.device:
    """Where a model's forwards compute and its inputs go: this process's accelerator where it has one, else the
    model's device. Under FSDP2 with CPU offload (benchmarks/gpu.py's recipe for 7-8B on one GPU) `model.device`
    is the CPU, where the weights rest between layers, while every layer runs on the GPU."""
    from ..runs.processes import process_state

    device = process_state().device
    return device if device.type != "cpu" else model.device


def generation_precision(model):
    """The autocast the trainer's forward runs under, for a model holding fp32 master weights; a
    no-op for a model stored in bf16 (evaluation) or without bf16 autocast."""
    if not bf16_autocast() or next(model.parameters()).dtype != torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(compute_device(model).type, dtype=torch.bfloat16)


def adaptation_precision(model) -> dict:
    """{"master": dtype of the trained weights, "compute": dtype of the forwards} for run.json, so a run
    says whether it trained as the papers' GPUs do (fp32 master weights, bf16 autocast)."""
    master = str(next(model.parameters()).dtype).removeprefix("torch.")
    return {"master": master, "compute": "bfloat16" if bf16_autocast() and master == "float32" else master}
