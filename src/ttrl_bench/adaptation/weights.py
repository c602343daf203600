"""The trainable weights before adaptation, kept in host memory (pinned where CUDA is present).

Taken before the trainer shards the model (FSDP2 turns parameters into DTensors in place), so it
holds whole tensors; comparing and restoring gather or scatter them per parameter.

Two uses: VR-TTRL restores the base model from it after every sample (never from disk), and every
adaptation measures with it how much of the model it changed. An update that rounds to nothing
is a silent bug (a bf16 checkpoint trained in bf16 at lr 5e-7 changed 0.26% of its weights on the
first GPU run, gpu-probe.md), so the fraction is logged: in the training precision, and after
casting to the dtype the adapted checkpoint is saved in.
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import DTensor, distribute_tensor


def full_tensor(param: torch.Tensor) -> torch.Tensor:
    """A parameter sharded by FSDP2 is a DTensor: gathered whole (a collective every process runs)."""
    return param.full_tensor() if isinstance(param, DTensor) else param


class WeightSnapshot:
    def __init__(self, model, trainable_only: bool = True):
        pin = torch.cuda.is_available()
        self.values = {
            name: full_tensor(param.detach()).to("cpu", copy=True).pin_memory() if pin
            else full_tensor(param.detach()).to("cpu", copy=True)
            for name, param in model.named_parameters()
            if param.requires_grad or not trainable_only
        }

    def changed_fraction(self, model, dtype: torch.dtype | None = None) -> float:
        """Share of the elements of the snapshot's now-trainable parameters that differ now; with
        `dtype`, compared after casting both to it (what a checkpoint saved in that dtype keeps)."""
        changed = total = 0
        params = dict(model.named_parameters())
        for name, before in self.values.items():
            if not params[name].requires_grad:
                continue
            now = full_tensor(params[name].detach())
            before = before.to(now.device, non_blocking=True)
            if dtype is not None:
                now, before = now.to(dtype), before.to(dtype)
            changed += int((now != before).sum())
            total += before.numel()
        return changed / total if total else 0.0

    @torch.no_grad()
    def restore(self, model) -> None:
        params = dict(model.named_parameters())
        for name, before in self.values.items():
            param = params[name]
            if isinstance(param, DTensor):
                before = distribute_tensor(before.to(param.device), param.device_mesh, param.placements)
            param.copy_(before, non_blocking=True)
