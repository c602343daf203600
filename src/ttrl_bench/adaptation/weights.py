"""The trainable weights before adaptation, kept in host memory (pinned where CUDA is present) by the
main process only: one fp32 copy per job, not one per GPU (7B on 4 GPUs: 30 GB instead of 4 x 30;
issue 23 finding 5).

Taken before the trainer shards the model (FSDP2 turns parameters into DTensors in place), so it
holds whole tensors; comparing and restoring gather or scatter them per parameter, from the main
process (every process takes part in those collectives).

Two uses: VR-TTRL restores the base model from it after every sample (never from disk), and every
adaptation measures with it how much of the model it changed. An update that rounds to nothing
is a silent bug (a bf16 checkpoint trained in bf16 at lr 5e-7 changed 0.26% of its weights on the
first GPU run, docs/gpu-runs.md), so the fraction is logged: in the training precision, and after
casting to the dtype the adapted checkpoint is saved in.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from accelerate.utils import broadcast_object_list
from torch.distributed.tensor import DTensor, distribute_tensor

from ..runs.processes import process_state


def full_tensor(param: torch.Tensor) -> torch.Tensor:
    """A parameter sharded by FSDP2 is a DTensor: gathered whole (a collective every process runs)."""
    return param.full_tensor() if isinstance(param, DTensor) else param


class WeightSnapshot:
    def __init__(self, model, trainable_only: bool = True):
        state = process_state()
        self.several = state.num_processes > 1
        self.holder = state.is_main_process  # the one process that keeps the copy
        pin = torch.cuda.is_available()
        self.values: dict[str, torch.Tensor] = {}
        self.names = []
        for name, param in model.named_parameters():
            if not (param.requires_grad or not trainable_only):
                continue
            self.names.append(name)
            whole = full_tensor(param.detach())  # collective: every process gathers
            if self.holder:
                copy = whole.to("cpu", copy=True)
                self.values[name] = copy.pin_memory() if pin else copy

    def changed_fraction(self, model, dtype: torch.dtype | None = None) -> float:
        """Share of the elements of the snapshot's now-trainable parameters that differ now; with
        `dtype`, compared after casting both to it (what a checkpoint saved in that dtype keeps).
        Counted on the main process, the same number returned on every one."""
        changed = total = 0
        params = dict(model.named_parameters())
        for name in self.names:
            if not params[name].requires_grad:
                continue
            now = full_tensor(params[name].detach())
            if not self.holder:
                continue
            before = self.values[name].to(now.device, non_blocking=True)
            if dtype is not None:
                now, before = now.to(dtype), before.to(dtype)
            changed += int((now != before).sum())
            total += before.numel()
        fraction = [changed / total if total else 0.0]
        return broadcast_object_list(fraction)[0] if self.several else fraction[0]

    @torch.no_grad()
    def restore(self, model) -> None:
        """Every process's parameters back to the snapshot: a DTensor's shards scattered from the main
        process, a replicated parameter broadcast from it."""
        params = dict(model.named_parameters())
        for name in self.names:
            param = params[name]
            before = self.values[name] if self.holder else None
            if isinstance(param, DTensor):
                source = before.to(param.device) if self.holder else torch.empty(param.shape, dtype=param.dtype,
                                                                               device=param.device)
                param.copy_(distribute_tensor(source, param.device_mesh, param.placements, src_data_rank=0))
                continue
            if self.holder:
                param.copy_(before, non_blocking=True)
            if self.several:
                dist.broadcast(param.data, src=0)
