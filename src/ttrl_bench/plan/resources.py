"""What each job asks its executor for: GPUs, host memory, minutes and threads, through one
function (`job_request`). Today's sizes are a rule of thumb from `models.<name>.params_b`
(runs/launch.py: 18 bytes per parameter against 60 GB usable of an 80 GB GPU)."""

from __future__ import annotations

from dataclasses import dataclass

from ..runs.launch import default_gpus, needs_offload
from .grid import Job, Plan

GPU_RULES = ("adapt", "adapt_per_sample", "evaluate")


@dataclass(frozen=True)
class Request:
    gpus: int
    mem_mb: int
    runtime: int  # minutes
    threads: int = 1
    offload: bool = False  # FSDP2 parameters and optimizer state on the host


def _params_b(plan: Plan, model: str) -> float:
    """Model size in billions of parameters (config `models.<name>.params_b`; the demo ~0)."""
    return plan.models[model].get("params_b", 0.0)


def adapt_gpus(plan: Plan, model: str) -> int:
    """GPUs of an adaptation job: `models.<name>.gpus`, else enough for the training state of a model
    of `params_b` (runs/launch.py: 1 for 2B, 2 for 4B, 4 for 7-8B)."""
    return plan.models[model].get("gpus") or default_gpus(_params_b(plan, model))


def job_request(plan: Plan, job: Job) -> Request:
    """The resources of one job of the GPU rules or of convert_model."""
    params_b = _params_b(plan, job.model)
    if job.rule in ("adapt", "adapt_per_sample"):
        gpus = adapt_gpus(plan, job.model)
        offload = needs_offload(params_b, gpus)
        # every process loads the weights on the host in fp32 (4 bytes per parameter), an offloaded
        # job keeps its training state there (18), plus 8 GB of head room
        mem_mb = int(8000 + 1000 * params_b * (4 * gpus + (18 if offload else 0)))
        if job.rule == "adapt_per_sample":  # VR-TTRL: ~21 s per update of a 7B model, 5 per sample, 200 samples
            runtime = int(30 + 200 * 5 * 21 / 60 * max(1.0, params_b / 7))
        else:  # TTRV Table 10: 3.77 min for a 20-sample adaptation of a 2B-8B model
            runtime = int(30 + 10 * max(1.0, params_b))
        return Request(gpus, mem_mb, runtime, offload=offload)
    # evaluation, and conversion: the bf16 weights are loaded on the host first (2 bytes per
    # parameter, doubled for safety), plus 8 GB of head room
    mem_mb = int(8000 + 4 * 1000 * params_b)
    if job.rule == "evaluate":
        return Request(1, mem_mb, int(30 + 5 * max(1.0, params_b)))
    if job.rule == "convert_model":
        return Request(0, mem_mb, 60)
    raise ValueError(f"no resource request for rule {job.rule!r}")


def largest_gpu_request(plan: Plan) -> int:
    """The most GPUs one job of the plan asks for."""
    return max((job_request(plan, job).gpus for job in plan.jobs()), default=0)
