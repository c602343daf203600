"""What each job asks its executor for (GPUs, host memory, minutes, threads) and how it starts,
through one function (`job_request`): an adaptation job's GPUs, offload, micro-batch, host memory and
time are the cost model's decision (cost.py: traced memory, calibrated), the config's
`models.<name>.gpus` / `offload` / `micro_batch_size` overriding."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from functools import lru_cache

from ..runs.launch import launcher
from . import memory
from .cost import job_decision, model_source
from .grid import Job, Plan

GPU_RULES = ("adapt", "adapt_per_sample", "evaluate")
ADAPT_RULES = ("adapt", "adapt_per_sample")
# a model this workflow builds (models.<name>.build: the demo's tiny models) has no config before it
# is built, and needs little: one GPU (or models.<name>.gpus), 8 GB, 40 minutes, without tracing
BUILT_MEM_MB, BUILT_RUNTIME = 8000, 40


@dataclass(frozen=True)
class Request:
    gpus: int
    mem_mb: int
    runtime: int  # minutes
    threads: int = 1
    offload: bool = False  # FSDP2 parameters and optimizer state on the host
    micro_batch: int | None = None  # sequences per training forward, as decided (None: the method's own)


@lru_cache(maxsize=None)  # the rules ask per resource and parameter; a decision reads traces
def job_request(plan: Plan, job: Job) -> Request:
    """The resources of one job of the GPU rules or of convert_model."""
    model = plan.models[job.model]
    if "build" in model:
        return Request(model.get("gpus", 1) if job.rule in ADAPT_RULES else 1, BUILT_MEM_MB, BUILT_RUNTIME)
    if job.rule in ADAPT_RULES:
        d = job_decision(plan, job)
        return Request(d.gpus, d.mem_mb, d.runtime_min, offload=d.offload, micro_batch=d.micro_batch)
    # evaluation, and conversion: the bf16 weights are loaded on the host first (2 bytes per
    # parameter, doubled for safety), plus 8 GB of head room
    billions = memory.parameter_count(model_source(plan, job.model)) / 1e9
    mem_mb = math.ceil(8000 + 4 * 1000 * billions)
    if job.rule == "evaluate":
        # a simple formula, not traced: greedy decoding of a whole test set, about 5 min per billion
        return Request(1, mem_mb, math.ceil(30 + 5 * max(1.0, billions)))
    if job.rule == "convert_model":
        return Request(0, mem_mb, 60)
    raise ValueError(f"no resource request for rule {job.rule!r}")


def job_method_settings(plan: Plan, job: Job) -> dict:
    """An adaptation job's --method-json: the resolved preset with the decided micro-batch (the one
    the GPU peak was predicted for)."""
    settings = plan.method_settings(job.method)
    micro_batch = job_request(plan, job).micro_batch
    if micro_batch is None:
        return settings
    return {**settings, "hyperparameters": {**settings["hyperparameters"], "micro_batch_size": micro_batch}}


def launch_command(plan: Plan, job: Job) -> str:
    """The command prefix of an adaptation job (runs/launch.py) with its decided GPUs and offload; the
    rendezvous port derived from the job so that jobs sharing a node do not collide."""
    request = job_request(plan, job)
    port = 29500 + zlib.crc32(repr(job).encode()) % 2000
    return launcher(request.gpus, request.offload, port)


def largest_gpu_request(plan: Plan) -> int:
    """The most GPUs one job of the plan asks for."""
    return max((job_request(plan, job).gpus for job in plan.jobs()), default=0)
