"""The processes a job runs as: one, or the N that `accelerate launch` started (one per GPU)."""

from __future__ import annotations

import torch
from accelerate import PartialState


def process_state() -> PartialState:
    """accelerate's shared view of the processes. The first caller fixes it for the whole job, so it
    asks as TRL's trainer will (`use_cpu` where no GPU is visible): several CPU processes then form
    one gloo group instead of running as independent copies."""
    return PartialState(cpu=not torch.cuda.is_available())


def end_processes() -> None:
    """Leave the process group, if this job is in one, before the interpreter exits. A gloo group still
    alive at exit is torn down by static destructors while its threads run: the process then aborts
    ("terminate called without an active exception", SIGABRT) after its work is done, and the job fails
    (issue 52: the per-sample FSDP test under a CPU hog, seed 699389589). Local: no rank waits for another.
    Not `process_state().destroy_process_group()`: a step that failed before asking for the state would then
    create it, and under a launch that joins the other processes. The CLI calls it after the launched steps only
    (cli.LAUNCHED_COMMANDS): vLLM keeps the one-process group it makes in its own state (parallel_state), and a
    second engine in the same process failed on the ended group (.ci/vllm-cpu.sh at 528a3a4)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
