"""What each job asks its executor for: GPUs, offload, host memory and minutes, through one function
(`job_request`). An adaptation job's request is the cost model's decision (plan/cost.py: traced
peak per GPU, host memory counting every copy, minutes from traced FLOPs), so the dry run and the
SLURM job ask for what the plan predicts."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from . import cost, memory
from .grid import Job, Plan

GPU_RULES = ("adapt", "adapt_per_sample", "evaluate")
HOST_HEADROOM_MB = 8000  # Python, the CUDA host context, images
BUILT_MODEL = {"mem_mb": 8000, "runtime": 40}  # the demo's tiny models: no trace, minutes on a CPU


@dataclass(frozen=True)
class Request:
    gpus: int
    mem_mb: int
    runtime: int  # minutes
    threads: int = 1
    offload: bool = False  # FSDP2 parameters and optimizer state on the host


def _built(plan: Plan, model: str) -> bool:
    """A model this workflow builds (the demo's tiny models): nothing to trace, tiny on any device."""
    return "build" in plan.models[model]


@lru_cache(maxsize=None)
def _parameters(source: str) -> int:
    return memory.parameter_count(memory.model_config(source))


def job_request(plan: Plan, job: Job) -> Request:
    """The resources of one job of the GPU rules or of convert_model."""
    entry = plan.models[job.model]
    trains = plan.method_specs.get(job.method, {}).get("hyperparameters", {}).get("updates", True)
    if job.rule in ("adapt", "adapt_per_sample") and _built(plan, job.model):
        return Request(entry.get("gpus") or 1, BUILT_MODEL["mem_mb"], BUILT_MODEL["runtime"])
    if job.rule in ("adapt", "adapt_per_sample") and trains:
        d = cost.job_decision(plan, job)
        return Request(d.gpus, d.mem_mb, d.runtime_min, offload=d.offload)
    # evaluation, conversion and voting without updates (VR-TTRL's vote-only baseline) load the bf16
    # weights on the host first: 2 bytes per parameter, doubled for the copy the loader makes, plus head room
    billions = 0.0 if _built(plan, job.model) else _parameters(cost.model_source(plan, job.model)) / 1e9
    mem_mb = int(HOST_HEADROOM_MB + 4 * 1000 * billions)
    if job.rule == "adapt_per_sample":  # votes of every sample, no training: one GPU, generation only;
        # the per-sample loop still loads fp32 weights and pins their snapshot (every parameter counted)
        host = cost.host_gb(billions * 1e9, billions * 1e9, gpus=1, offload=False, reference=False, per_sample=True)
        return Request(1, int(1000 * host["total_gb"]), 2 * int(30 + 5 * max(1.0, billions)))
    if job.rule == "evaluate":
        # a margin, not a prediction: greedy decoding of a split is minutes on one GPU (vLLM 36 samples/s
        # on the lent H100 for the 2B size, gpu-probe.md); the FLOPs-based estimate covers adaptation only
        return Request(1, mem_mb, int(30 + 5 * max(1.0, billions)))
    if job.rule == "convert_model":
        return Request(0, mem_mb, 60)
    raise ValueError(f"no resource request for rule {job.rule!r}")


def largest_gpu_request(plan: Plan) -> int:
    """The most GPUs one job of the plan asks for."""
    return max((job_request(plan, job).gpus for job in plan.jobs()), default=0)
