"""The processes a job runs as: one, or the N that `accelerate launch` started (one per GPU)."""

from __future__ import annotations

import torch
from accelerate import PartialState


def process_state() -> PartialState:
    """accelerate's shared view of the processes. The first caller fixes it for the whole job, so it
    asks as TRL's trainer will (`use_cpu` where no GPU is visible): several CPU processes then form
    one gloo group instead of running as independent copies."""
    return PartialState(cpu=not torch.cuda.is_available())
