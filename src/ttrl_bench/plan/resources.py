"""What each job asks its executor for (GPUs, host memory, minutes, threads) and how it starts,
through one function (`job_request`): an adaptation job's GPUs, offload, micro-batch, host memory and
time are the cost model's decision (cost.py: traced memory, calibrated), the config's
`models.<name>.gpus` / `offload` / `micro_batch_size` overriding.

Layer 5 of the plan (requests: what SLURM is asked): imports cost.py, memory.py and the grid
(docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from functools import lru_cache

from ..adaptation.hyperparameters import lora_for_dataset, rounds_for_dataset
from ..runs.launch import launcher
from . import memory
from .cards import config_card
from .cost import MARGIN, STARTUP_MIN, calibration, job_decision, job_settings, model_source
from .evaluation_cost import AUTHORS_TEST_ITEMS, evaluation_estimate, limit_minutes
from .grid import Job, Plan, rerun_protocol
from .samples import TYPICAL_IMAGE_SIZES, split_size

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
        estimate = evaluation_job_estimate(plan, job)
        return Request(1, mem_mb, limit_minutes(estimate["slowest_min"] + STARTUP_MIN, MARGIN))
    if job.rule == "convert_model":
        return Request(0, mem_mb, 60)
    raise ValueError(f"no resource request for rule {job.rule!r}")


@lru_cache(maxsize=None)  # job_request's limit and plan_table's minutes read the same estimate
def evaluation_job_estimate(plan: Plan, job: Job) -> dict:
    """An evaluation job's expected and slowest minutes (evaluation_cost.py) from its test set's items (prepared,
    else the authors' list's), its typical image (samples.py) as the model counts it, the model's size, its task's
    max_new_tokens (and completions for math's pass@k), the configured backend and the card."""
    dataset = job.target or job.dataset  # a cross evaluation scores its target
    section = plan.section[dataset]
    protocol = rerun_protocol(job.protocol) if job.protocol else plan.config["protocol"]
    per_task = plan.configs[protocol]["evaluation"][section]
    items = split_size(plan, dataset) or AUTHORS_TEST_ITEMS.get(dataset)
    if isinstance(per_task.get("samples"), int):
        items = min(items or per_task["samples"], per_task["samples"])
    source = model_source(plan, job.model)
    size = TYPICAL_IMAGE_SIZES.get(dataset)
    from ..models.families import image_tokens  # here: families.py imports torch, which the workflow's parse does not need

    return evaluation_estimate(items, image_tokens(memory.model_config(source), protocol, size), section,
                               per_task["max_new_tokens"],
                               plan.config["evaluation"]["backend"], memory.parameter_count(source) / 1e9,
                               config_card(plan.config), per_task.get("n_samples", 1) if section == "math" else 1)


# how the evaluation request is sized, printed with the plan
EVALUATION_MINUTES = (f"items x (image + text + answer tokens) / throughput on the card (plan/evaluation_cost.py); "
                      f"limit {MARGIN:g} x (every image at its processor's largest, answers at max_new_tokens, "
                      "HF generate) + start-up")


def plan_table(plan: Plan, gpu_memory_gb: float | None = None, gpus_per_node: int = 8) -> tuple[list[dict], dict]:
    """One row per job of the run: preparation (CPU, not costed: download time depends on the network),
    conversion (CPU, its request), adaptation (GPUs, GPU peak, host memory, minutes and GPU-hours from the traced
    and calibrated model of plan/cost.py) and evaluation (one GPU for its requested minutes, EVALUATION_MINUTES).
    Totals: GPU-hours per rule, and the hours on one node of `gpus_per_node` GPUs, packing jobs by GPUs (perfect
    packing) but never less than the longest job."""
    rows = [{"rule": "prepare_data", "job": f"prepare_data {d}", "gpus": 0, "offload": False, "micro_batch": None,
             "gpu_peak_gb": None, "host_gb": None, "minutes": None, "gpu_hours": 0.0} for d in plan.datasets]
    for model in sorted({job.model for job in plan.jobs() if "convert_from" in plan.models[job.model]}):
        request = job_request(plan, Job("convert_model", model))
        rows.append({"rule": "convert_model", "job": f"convert_model {model}", "gpus": 0, "offload": False,
                     "micro_batch": None, "gpu_peak_gb": None, "host_gb": request.mem_mb / 1000,
                     "minutes": request.runtime, "gpu_hours": 0.0})
    for job in plan.jobs():
        target = f"->{job.target}" if job.target and job.target != job.dataset else ""
        name = f"{job.rule} {job.model}/{job.method}/{job.dataset}{target}/{job.protocol}/seed{job.seed}"
        if job.rule in ADAPT_RULES and "build" not in plan.models[job.model]:  # a built model: its fixed request
            d = job_decision(plan, job, gpu_memory_gb)
            known = job_settings(plan, job).rounds > 0  # n_samples "all": the sample count is not known yet
            parts = {"adaptation": d.gpus * d.predicted["adaptation_min"] / 60,
                     "startup": d.gpus * d.predicted["startup_min"] / 60} if known else {}
            rows.append({"rule": job.rule, "job": name, "gpus": d.gpus, "offload": d.offload,
                         "micro_batch": d.micro_batch, "gpu_peak_gb": d.gpu_peak_gb, "host_gb": d.host_gb,
                         "minutes": round(d.gpu_hours * 60 / d.gpus) if known else None, "limit": d.runtime_min,
                         "gpu_hours": d.gpu_hours if known else None, "parts": parts, "unknown": not known})
            continue
        request = job_request(plan, job)
        built = "build" in plan.models[job.model]  # the demo's tiny model: a fixed request, no cost model
        minutes, parts = None, {}
        if job.rule == "evaluate" and not built:
            expected = evaluation_job_estimate(plan, job)["expected_min"]
            if expected is not None:
                minutes = round(expected + STARTUP_MIN)
                parts = {"evaluation": expected / 60, "startup": STARTUP_MIN / 60}
        rows.append({"rule": job.rule, "job": name, "gpus": request.gpus, "offload": False, "micro_batch": None,
                     "gpu_peak_gb": None, "host_gb": request.mem_mb / 1000, "minutes": minutes if not built else None,
                     "limit": request.runtime, "parts": parts, "unknown": job.rule == "evaluate" and not built and not parts,
                     "gpu_hours": round(sum(parts.values()), 2) if parts else None})
    by_rule: dict[str, float] = {}
    by_part = {"adaptation": 0.0, "evaluation": 0.0, "startup": 0.0}
    for row in rows:
        by_rule[row["rule"]] = by_rule.get(row["rule"], 0.0) + (row["gpu_hours"] or 0.0)
        for part, hours in row.get("parts", {}).items():
            by_part[part] += hours
    gpu_hours = sum(by_rule.values())
    longest = max([(r["minutes"] or 0) / 60 for r in rows if r["gpus"] and r["gpu_hours"] is not None] or [0.0])
    card = config_card(plan.config)
    unknown = sum(1 for r in rows if r.get("unknown"))
    return rows, {"jobs": len(rows), "gpu_hours": round(gpu_hours, 1),
                  "gpu_hours_by_rule": {k: round(v, 1) for k, v in by_rule.items() if v},
                  "gpu_hours_by_part": {k: round(v, 1) for k, v in by_part.items()}, "unknown": unknown,
                  "card": card, "margin": MARGIN, "startup_min": STARTUP_MIN,
                  "gpus_per_node": gpus_per_node, "node_hours": round(max(gpu_hours / gpus_per_node, longest), 1),
                  "factor": round(calibration().factor, 3), "prefill_factor": calibration().prefill}


def fewer_gpus(plan: Plan, gpu_memory_gb: float | None = None) -> list[str]:
    """For each model whose adaptations ask for more than one GPU, what one GPU per job would take: the key to
    set, and the offload and GPU-hours the plan then decides (or that nothing fits one GPU)."""
    wide: dict[str, list] = {}  # model -> its adaptations on more than one GPU, with their decisions
    for job in plan.jobs():
        if job.rule in ADAPT_RULES and "build" not in plan.models[job.model]:
            decision = job_decision(plan, job, gpu_memory_gb)
            if decision.gpus > 1:
                wide.setdefault(job.model, []).append((job, decision))
    lines = []
    for model, jobs in sorted(wide.items()):
        now = sum(decision.gpu_hours for _, decision in jobs)
        try:
            one = [job_decision(plan, job, gpu_memory_gb, gpus=1) for job, _ in jobs]
        except ValueError as err:
            lines.append(f"models.{model}.gpus: 1 does not fit: {err}")
            continue
        offloaded = sum(d.offload for d in one)
        lines.append(f"models.{model}.gpus: 1 runs its {len(jobs)} multi-GPU adaptation(s) on one GPU each"
                     f"{f', {offloaded} of them with offload' if offloaded else ''}: "
                     f"{sum(d.gpu_hours for d in one):.1f} GPU-hours instead of {now:.1f}")
    return lines


def job_method_settings(plan: Plan, job: Job) -> dict:
    """An adaptation job's --method-json: the resolved preset with the decided micro-batch (the one
    the GPU peak was predicted for)."""
    settings = plan.method_settings(job.method, job.protocol)
    hp = dict(settings["hyperparameters"])
    if hp.get("vision_drop_path") == "checkpoint":  # the original checkpoint's rate, per model (models/families.py)
        from ..models.families import original_vision_drop_path  # here, as image_tokens above

        entry = plan.models[job.model]
        hp["vision_drop_path"] = original_vision_drop_path(entry.get("convert_from") or entry["source"])
    if "lora" in hp:  # the adapter of this job's training set, or none (adaptation/hyperparameters.py)
        hp["lora"] = lora_for_dataset(hp["lora"], job.dataset)
    if "stop_after_rounds" in hp:  # the rounds this job's training set stops after, or none
        hp["stop_after_rounds"] = rounds_for_dataset(hp["stop_after_rounds"], job.dataset)
    micro_batch = job_request(plan, job).micro_batch
    if micro_batch is not None:
        hp["micro_batch_size"] = micro_batch
    return {**settings, "hyperparameters": hp}


def launch_command(plan: Plan, job: Job) -> str:
    """The command prefix of an adaptation job (runs/launch.py) with its decided GPUs and offload; the
    rendezvous port derived from the job so that jobs sharing a node do not collide."""
    request = job_request(plan, job)
    port = 29500 + zlib.crc32(repr(job).encode()) % 2000
    return launcher(request.gpus, request.offload, port)


def largest_gpu_request(plan: Plan) -> int:
    """The most GPUs one job of the plan asks for."""
    return max((job_request(plan, job).gpus for job in plan.jobs()), default=0)
