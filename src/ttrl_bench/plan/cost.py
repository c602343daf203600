"""What an adaptation job costs before it runs: GPUs, offload, micro-batch, GPU peak, host memory,
minutes and GPU-hours, decided from traced memory (memory.py) rather than a rule of thumb.

- GPU peak: the traced step (memory.py) times the calibration factor of its kind (data/calibration.csv, H100 runs).
  Training: the mean ratio of measured to traced peak over the two measured training points (0.78 with the shipped
  traces). The training trace holds more than the GPU did, and not because of autocast: the bf16-weight point traces
  45.88 GB with autocast on or off, and CPU autocast keeps fewer fp32 outputs than CUDA's (layer_norm, softmax, pow
  stay bf16). What it holds beyond a GPU is in the backward: at its peak (the vision tower's layer 0) the 28 language
  layers' and 24 vision layers' checkpointed inputs and as many gradient temporaries are still alive in the trace,
  where a GPU run has freed each layer's saved input once that layer's backward ran. Generation prefill (a forward
  under no_grad, no backward): factor 1 (`PREFILL_FACTOR`); see there for the measured point it rests on. Each peak is
  traced at the job's own micro-batch and generation share (cached), every image at the most tokens a kept rollout's
  can take (job_settings; memory.image_trace reads a count between traced ones off a line). A colocated vLLM engine's
  share is reserved only where the job runs one (adaptation/config.py rollout_backend: `auto` is HF generate for now).
- Several GPUs: FSDP2 full sharding divides weights, gradients and AdamW state by the GPU count; activations stay per
  process. (The traced alternative, torch's FSDPMemTracker on a fake process group, is not wired yet: each GPU count
  is predicted by dividing the state.)
- Host memory counts every copy (issue 23 finding 5): the checkpoint loaded by every process, the pinned fp32
  WeightSnapshot of the trainable weights (adaptation/weights.py, one per process), the offloaded fp32 weights +
  gradients + AdamW state, the bf16 reference model loaded by every process, the dataloader and the Python process.
- Minutes: traced FLOPs at a rate, plus the weights' traffic of every micro-batch, both fitted on the TTRV authors'
  logs (FLOP_RATE_FACTOR, TRAFFIC_GB_S), at a fixed 1,280 image tokens (FLOP_RATE_FACTOR's comment says why).

Layer 4 of the plan (cost: what each job needs, decided): imports memory.py and the grid layer
(docs/DESIGN.md "The plan's layers"). `python -m ttrl_bench.plan.cost` traces the calibration points and
ships the local trace cache (memory.py `ship_cache`).
"""

from __future__ import annotations

import csv
import logging
import math
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from ..adaptation.hyperparameters import lora_for_dataset
from ..generation.vllm_settings import prompt_budget
from . import cards, memory
from .cards import AUTHORS_CARD, Card, card as card_of, speed
from .grid import adaptation_samples, rerun_protocol
from .memory import StepShape
from .samples import layout_samples, split_size

CALIBRATION = Path(__file__).parent / "data" / "calibration.csv"
GPU_COUNTS = (1, 2, 4, 8)
MICRO_BATCHES = (64, 32, 16, 8, 4, 2, 1)
# The TTRV authors' update phase (docs/ttrv-authors-logs.md, verl/logs/ai2d InternVL3-2B 20 samples "2e"):
# 4 prompts x 16 trained rollouts of ~1,490 prompt + 5.4 completion tokens, forward + backward with
# gradient checkpointing, in 9.4 s on 4 GPUs (their machine: 4 A100 + 4 A6000, TTRV paper Appendix).
AUTHORS_UPDATE = {"sequences": 64, "tokens": 1490 + 5.4, "seconds": 9.4, "gpus": 4, "card": AUTHORS_CARD}
# Start-up of an adaptation job (Ray, model loads, the vLLM engine, before the first round), read from the 71
# readable authors' logs (benchmarks/plan_vs_logs.py: the launch time in the file name to the last timestamp
# before the first validation prompt): median 129 s, slowest 375 s (imagenet_r_20 Qwen2.5-VL-7B, 8 GPUs).
STARTUP_MIN = 129 / 60
STARTUP_SLOWEST_MIN = 375 / 60
# The one margin of every SLURM limit: limit = MARGIN x the slowest plausible case (evaluation_cost.py; for adaptation
# both terms at no gain from a faster card plus the slowest start-up). 2: the adaptation replay's worst measured /
# predicted is 1.73 (2.07 held out, still covered: limit / measured >= 1.32; benchmarks/results/plan_vs_logs.md).
MARGIN = 2.0
# A forward under no_grad holds exactly the tensors its Python frames reference, with the same dtypes on
# the CPU as on a GPU where no autocast changes them, so its trace is what the GPU allocates (the CUDA
# context and the allocator's fragmentation only add). Checked, not fitted, on the one such point
# measured (calibration.csv oom-hf-generate, tests/plan/test_cost.py): the H100 failed asking 20 GiB with
# 55 GiB allocated; the trace's peak is that allocation, 54.83 GiB held + 20.02 GiB asked (InternViT's
# GELU output over 1,280 tiles in fp32). Not yet measured: a prefill under bf16 autocast, where CUDA
# keeps layer_norm outputs in fp32 and the CPU trace does not (this factor may be low there).
PREFILL_FACTOR = 1.0
# The minutes: two terms fitted together on the TTRV authors' 71 logs (benchmarks/plan_vs_logs.py fit(): least squares of
# log(predicted / measured), start-up included; their cards: 68 A6000 + 3 A100 logs). Their step time barely follows the
# FLOPs and grows with the weights (InternVL3-2B, 4 GPUs: 16 s a round at 332 prompt tokens, 33 s at 3,212 where the FLOPs
# grow 2.6x; Qwen2.5-VL-3B 50 s at 337: 3x for 2x the trainable weights). (1) FLOPs at FLOP_RATE_FACTOR x AUTHORS_UPDATE's
# rate (whose 9.4 s held the update's traffic too). (2) Each micro-batch a GPU runs (old log-prob, reference, update; 2
# sequences in every log) moves the FSDP-sharded trainable weights: bf16 all-gathers in 3 forwards and the update's
# backward, the fp32 gradients' reduce-scatter, 12 B a weight, at an effective TRAFFIC_GB_S on the authors' PCIe 4.0 cards
# (a third of 32 GB/s a direction; cards.py link_gb_s scales it, the A100s' taken as the A6000s'). Fitted: 3.09, 10.2 GB/s
# (1.18 s per billion weights a micro-batch); replay median 1.009, p10-p90 0.769-1.268 (FLOPs alone 1.016, 0.809-1.353).
# That is in sample; refitted without the predicted logs: one model out 1.048, 0.769-1.299; one log out 1.009, 0.762-1.275.
# One GPU runs no collective; the term stays (logs of 4-8 GPUs cannot tell). At each set's typical image (plan/samples.py)
# the replay is alike (1.022, 0.779-1.212): the minutes keep IMAGE_TOKENS_FOR_MINUTES, inside the logs' range.
FLOP_RATE_FACTOR, TRAFFIC_BYTES_PER_PARAMETER, TRAFFIC_GB_S = 3.09, 2 * 4 + 4, 10.2
IMAGE_TOKENS_FOR_MINUTES = 1280
HOST_OVERHEAD_GB = 8.0  # per process: Python, CUDA host context, dataloader workers, images


@dataclass(frozen=True)
class JobSettings:
    """One adaptation job's shape, from its resolved method preset (adaptation/presets.py)."""

    rollouts: int  # sequences generated per prompt (TTRV: the 32 votes)
    trained: int  # of which trained on (TTRV: 16)
    prompts_per_step: int
    new_tokens: int  # max completion tokens (memory is sized for the longest)
    rounds: int  # generation rounds of the whole job
    micro_batch: int | None = None  # sequences per training forward; None: the largest that fits
    prompt_tokens: int = 64  # text tokens besides the image
    # the minutes: at a fixed image (FLOP_RATE_FACTOR's comment says why not the test set's)
    image_tokens: int = IMAGE_TOKENS_FOR_MINUTES  # the authors' AI2D prompts: ~1,490 tokens with InternVL3-2B
    # the memory: the most a rollout's image can take (job_settings: the protocol's bound within the prompt budget)
    most_image_tokens: int | None = None  # None: image_tokens
    freeze_vision: bool | str = True  # models/families.py freezes_vision_encoder: True, False or "authors"
    gradient_checkpointing: bool = True
    reference: bool = True  # a KL reference model (kl_beta > 0)
    fp32_master: bool = True
    generation_batch: int | None = None  # sequences HF generate decodes at once (None: one prompt's group)
    per_sample: bool = False  # VR-TTRL: the weights restored before every sample (WeightSnapshot)
    vllm_share: float = 0.0  # GPU share of a colocated vLLM engine (adaptation.vllm.gpu_memory_utilization)
    lora_rank: int = 0  # a LoRA adapter trains instead of the weights (hyperparameter `lora`, resolved per job)
    lora_targets: str = "all-linear"
    # False: the vote-only baseline (hyperparameter `updates: False`, adaptation/per_sample.py): one round of
    # rollouts per sample through HF generate and a vote; no step, no optimizer, no reference, no engine
    trains: bool = True

    @classmethod
    def from_preset(cls, hyperparameters: dict, n_samples: int, per_sample: bool = False, **extra) -> "JobSettings":
        h = hyperparameters
        prompts = h.get("prompts_per_step", 1)
        trains = h.get("updates", True)
        epochs = h.get("epochs", 1) if trains else 1
        rounds = n_samples * epochs if per_sample else epochs * math.ceil(n_samples / prompts)
        trained = h.get("num_generations", 1)  # the objective baselines (Appendix C): one pseudo-answer
        return cls(rollouts=h.get("n_votes") or trained, trained=trained,
                   prompts_per_step=prompts, new_tokens=h.get("max_completion_length", 1024), rounds=rounds,
                   micro_batch=h.get("micro_batch_size"),
                   # unset: nothing frozen, as the trainer reads it (adaptation/grpo.py freeze_vision_tower)
                   freeze_vision=h.get("freeze_vision", False),
                   gradient_checkpointing=h.get("gradient_checkpointing", True),
                   reference=trains and bool(h.get("kl_beta", 0)), generation_batch=h.get("generation_batch_size"),
                   per_sample=per_sample, trains=trains, **extra)

    def prefill_shape(self, processes: int = 1, most: bool = True) -> StepShape:
        """The prefill of HF generate in one process: its share of the sequences the job decodes at once (the
        generation batch, else the rollouts), split across `processes` when it trains."""
        return self.shape(math.ceil((self.generation_batch or self.rollouts) / processes), "prefill", most)

    def shape(self, sequences: int, kind: str = "train", most: bool = False) -> StepShape:
        """`most`: every image at the most tokens it can take (the memory's case), else the typical (the minutes')."""
        if self.freeze_vision == "authors":
            raise ValueError("JobSettings.freeze_vision 'authors' is resolved per model (job_settings) before shapes")
        image_tokens = (self.most_image_tokens or self.image_tokens) if most else self.image_tokens
        return StepShape(sequences=sequences, prompt_tokens=self.prompt_tokens, image_tokens=image_tokens,
                         new_tokens=self.new_tokens, fp32_master=self.fp32_master,
                         trainable_vision=not self.freeze_vision, trainable_adapter=bool(self.freeze_vision),
                         gradient_checkpointing=self.gradient_checkpointing, kind=kind,
                         lora_rank=self.lora_rank, lora_targets=self.lora_targets)


@dataclass(frozen=True)
class Decision:
    gpus: int
    offload: bool
    micro_batch: int
    gpu_peak_gb: float  # per GPU, calibrated: training step (+ reference shard), or generation if larger
    host_gb: float
    mem_mb: int  # SLURM host memory request
    runtime_min: int  # SLURM time limit
    gpu_hours: float
    predicted: dict = field(default_factory=dict)  # the parts behind the numbers


@dataclass(frozen=True)
class Calibration:
    factor: float  # training step: measured / traced, fitted on the measured training points
    points: list  # rows of calibration.csv with the traced peak beside the measured one
    prefill: float = PREFILL_FACTOR  # generation prefill (forward under no_grad)

    def of(self, shape: StepShape) -> float:
        return self.factor if shape.kind == "train" else self.prefill


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


def calibration_points() -> list[dict]:
    with open(CALIBRATION, newline="") as handle:
        return list(csv.DictReader(handle))


def point_shape(row: dict) -> StepShape:
    return StepShape(sequences=int(row["sequences"]), prompt_tokens=int(row["prompt_tokens"]),
                     image_tokens=int(row["image_tokens"]), new_tokens=int(row["new_tokens"]),
                     fp32_master=_bool(row["fp32_master"]), trainable_vision=_bool(row["trainable_vision"]),
                     gradient_checkpointing=_bool(row["gradient_checkpointing"]), kind=row["kind"],
                     autocast=_bool(row["autocast"]))


@lru_cache(maxsize=1)
def calibration() -> Calibration:
    """The training factor: measured over traced peak, averaged over the training points that fitted."""
    points = []
    for row in calibration_points():
        trace = memory.cached_trace(memory.model_config(row["model"]), point_shape(row))
        points.append({**row, "traced_gb": trace.peak_gb})
    ratios = [float(p["measured_gb"]) / p["traced_gb"] for p in points if p["outcome"] == "fit" and p["kind"] == "train"]
    return Calibration(factor=sum(ratios) / len(ratios), points=points)


def gpu_peak_gb(config, settings: JobSettings, micro_batch: int, gpus: int, offload: bool = False,
                gpu_memory_gb: float = 80) -> dict:
    """Calibrated per-GPU peaks of a training step (traced at this micro-batch) and of a generation
    prefill (traced at this process's share of the generation batch), and their parts."""
    calib = calibration()
    if not settings.trains:  # vote-only: each process generates every rollout with the whole model
        prefill = settings.prefill_shape()
        return {"train_gb": 0.0, "generation_gb": calib.of(prefill) * memory.image_trace(config, prefill).peak_gb,
                "state_gb": 0.0, "activations_gb": 0.0, "reference_gb": 0.0, "vllm_gb": 0.0,
                "factor": calib.factor, "prefill_factor": calib.prefill}
    train_shape = settings.shape(micro_batch, most=True)
    factor = calib.of(train_shape)
    train_trace = memory.image_trace(config, train_shape)
    bytes_per = 4 if settings.fp32_master else 2
    # weights + gradients + AdamW's two moments of the trainable part: what FSDP2 shards
    state = (train_trace.parameters * bytes_per + train_trace.trainable * 3 * bytes_per) / memory.GB
    activations = train_trace.peak_gb - state
    held = 0.0 if offload else state / gpus  # offloaded: on the host, streamed in a layer at a time
    reference = 2 * train_trace.parameters / memory.GB / gpus if settings.reference else 0.0  # bf16, sharded
    engine = settings.vllm_share * gpu_memory_gb  # the colocated engine reserves its share for good
    train = factor * (held + activations) + reference + engine
    if engine:  # vLLM generates: HF's generate never runs
        generation = 0.0
    else:
        prefill = settings.prefill_shape(gpus)  # each process its share
        generation = calib.of(prefill) * memory.image_trace(config, prefill).peak_gb
    return {"train_gb": train, "generation_gb": generation, "state_gb": state, "activations_gb": activations,
            "reference_gb": reference, "vllm_gb": engine, "factor": factor,
            "prefill_factor": calib.prefill}


def host_gb(parameters: int, trainable: int, gpus: int, offload: bool, reference: bool, per_sample: bool) -> dict:
    """Host memory of the whole job, every copy counted (issue 23 finding 5)."""
    parts = {
        "checkpoint_loads": gpus * 4 * parameters / memory.GB,  # each process loads fp32 weights
        "snapshots": gpus * 4 * trainable / memory.GB if per_sample else 0.0,  # pinned WeightSnapshot per process
        "offloaded_state": 16 * trainable / memory.GB + 4 * (parameters - trainable) / memory.GB if offload else 0.0,
        "reference_loads": gpus * 2 * parameters / memory.GB if reference else 0.0,
        "processes": gpus * HOST_OVERHEAD_GB,
    }
    return {**parts, "total_gb": sum(parts.values())}


def authors_throughput_flops() -> float:
    """FLOP/s per GPU the TTRV authors' update phase shows: its FLOPs (InternVL3-2B's traced FLOPs per token, the first
    calibration point's trace) over their logged time, traffic included (the minutes use it x FLOP_RATE_FACTOR)."""
    a, row = AUTHORS_UPDATE, calibration_points()[0]
    trace = memory.cached_trace(memory.model_config(row["model"]), point_shape(row))
    per_token = trace.flops / (int(row["sequences"]) * (int(row["prompt_tokens"]) + int(row["image_tokens"])
                                                         + int(row["new_tokens"])))
    return per_token * a["sequences"] * a["tokens"] / (a["seconds"] * a["gpus"])


def runtime_minutes(config, settings: JobSettings, micro_batch: int, gpus: int) -> dict:
    """Minutes of the job on the authors' card: FLOPs at the fitted rate plus the weights' traffic (FLOP_RATE_FACTOR's
    comment). FLOPs: training forwards + backwards on the trained rollouts, old / reference forwards on all rollouts
    (a third of forward + backward each), decoding at 2 FLOPs per parameter per new token (prefill is in the forwards)."""
    rate = authors_throughput_flops() * FLOP_RATE_FACTOR
    if not settings.trains:  # vote-only: the prefill forward (its trace's FLOPs) and the decoding; no step, no traffic
        prefill = settings.prefill_shape(most=False)
        trace = memory.image_trace(config, prefill)
        per_round = settings.prompts_per_step * settings.rollouts * (
            trace.flops / prefill.sequences + settings.new_tokens * 2 * trace.parameters)
        flops = per_round * settings.rounds
        minutes = flops / (rate * gpus) / 60
        return {"flops": flops, "flops_per_gpu_second": rate, "flop_min": minutes, "traffic_min": 0.0, "compute_min": minutes}
    trace = memory.image_trace(config, settings.shape(micro_batch))
    per_sequence = trace.flops / micro_batch  # FLOPs are linear in the sequences of a forward
    per_round = settings.prompts_per_step * (
        settings.trained * per_sequence
        + settings.rollouts * per_sequence / 3 * (2 if settings.reference else 1)
        + settings.rollouts * settings.new_tokens * 2 * trace.parameters)
    flops = per_round * settings.rounds
    # each GPU's micro-batches: its share of a round's trained rollouts (FLOP_RATE_FACTOR's comment)
    micro_batches = math.ceil(settings.prompts_per_step * settings.trained / gpus / micro_batch) * settings.rounds
    traffic = micro_batches * trace.trainable * TRAFFIC_BYTES_PER_PARAMETER / (TRAFFIC_GB_S * 1e9) / 60
    minutes = flops / (rate * gpus) / 60
    return {"flops": flops, "flops_per_gpu_second": rate, "flop_min": minutes, "traffic_min": traffic,
            "compute_min": minutes + traffic}


def decide(config, settings: JobSettings, gpu_memory_gb: float = 80, gpus: int | None = None,
           micro_batch: int | None = None, offload: bool | None = None, layout=None,
           job: str = "adaptation job", keys: str = "models.<name>.gpus", card: Card | None = None) -> Decision:
    """GPUs, offload and micro-batch for one job: the fewest GPUs (powers of two up to 8) on which the
    largest micro-batch that fits does, offload only where no GPU count fits without it.
    `gpus` / `micro_batch` / `offload` (config `models.<name>.gpus`, `.micro_batch_size`, `.offload`, the
    method's `micro_batch_size`) override. `layout(gpus, micro_batch)`: the micro-batch the job's batch
    layout runs with those GPUs (adaptation/layout.py may shrink it), raising ValueError for a layout it
    refuses; such (gpus, micro-batch) pairs are not tried, and where none is left its error is raised.
    `card`: the GPU the minutes are for (cards.py; None: the card the throughput was measured on, the authors').
    Raises ValueError naming the job, the predicted peak, the GPU's memory and the keys to change."""
    micro_batch = micro_batch or settings.micro_batch
    counts = [gpus] if gpus else list(GPU_COUNTS)
    batches = [micro_batch] if micro_batch else [b for b in MICRO_BATCHES if b <= settings.trained]
    offloads = [offload] if offload is not None else [False, True]
    if not settings.trains:  # vote-only: nothing shards the work (more processes repeat it), batches or offloads
        counts, batches, offloads, layout = [gpus or 1], [1], [False], None
    best, refused = None, None
    for offloaded in offloads:
        for count in counts:
            for batch in batches:
                try:
                    batch = layout(count, batch) if layout else batch
                except ValueError as err:
                    refused = err
                    continue
                peaks = gpu_peak_gb(config, settings, batch, count, offloaded, gpu_memory_gb)
                peak = max(peaks["train_gb"], peaks["generation_gb"])
                best = min(best or (peak, count, batch, offloaded, peaks), (peak, count, batch, offloaded, peaks),
                           key=lambda t: t[0])
                if peak <= gpu_memory_gb:
                    return _decision(config, settings, count, batch, offloaded, peaks, card)
    if best is None:
        raise refused
    peak, count, batch, offloaded, peaks = best
    raise ValueError(
        f"{job}: predicted GPU peak {peak:.1f} GB per GPU (training {peaks['train_gb']:.1f}, generation "
        f"{peaks['generation_gb']:.1f}; {count} GPU(s), micro-batch {batch}, offload {offloaded}) exceeds the "
        f"GPU's {gpu_memory_gb:g} GB (resources.gpu_model's card, or resources.gpu_memory_gb). Change {keys}, the "
        "method's micro_batch_size / generation_batch_size, or resources.gpu_model / resources.gpu_memory_gb")


def _decision(config, settings, gpus, micro_batch, offload, peaks, card=None) -> Decision:
    # vote-only: the generation's trace holds the whole model and trains nothing (no snapshot either)
    one = memory.image_trace(config, settings.shape(micro_batch) if settings.trains else settings.prefill_shape())
    host = host_gb(one.parameters, one.trainable, gpus, offload, settings.reference, settings.per_sample)
    time = runtime_minutes(config, settings, micro_batch, gpus)
    card = card or card_of(AUTHORS_CARD)

    compute, slowest = ((time["flop_min"] / speed(card, AUTHORS_CARD, worst) + time["traffic_min"] / speed(
        card, AUTHORS_CARD, worst, link=True)) * (3 if offload else 1) for worst in (False, True))  # offload: PCIe-bound
    slowest += STARTUP_SLOWEST_MIN
    minutes = compute + STARTUP_MIN
    return Decision(gpus=gpus, offload=offload, micro_batch=micro_batch,
                    gpu_peak_gb=round(max(peaks["train_gb"], peaks["generation_gb"]), 1),
                    host_gb=round(host["total_gb"], 1), mem_mb=int(1000 * math.ceil(host["total_gb"] * 1.1)),
                    runtime_min=int(math.ceil(MARGIN * slowest)),
                    gpu_hours=round(gpus * minutes / 60, 2),
                    predicted={**peaks, **host, **time, "parameters": one.parameters, "trainable": one.trainable,
                               "adaptation_min": compute, "startup_min": STARTUP_MIN})


def predict_for_benchmark(model_source: str, sequences: int, new_tokens: int, image_tokens: int,
                          fp32_master: bool, trainable_vision: bool = True, prompt_tokens: int = 48,
                          gradient_checkpointing: bool = True) -> float:
    """Calibrated peak GB of one training forward + backward on one GPU (benchmarks/gpu.py writes it
    beside the measured peak, so each GPU run is a new calibration point)."""
    shape = StepShape(sequences, prompt_tokens, image_tokens, new_tokens, fp32_master=fp32_master,
                      trainable_vision=trainable_vision, gradient_checkpointing=gradient_checkpointing)
    return calibration().of(shape) * memory.cached_trace(memory.model_config(model_source), shape).peak_gb


__all__ = ["JobSettings", "Decision", "decide", "calibration", "host_gb", "predict_for_benchmark", "replace"]


def model_source(plan, model: str) -> str:
    """Where a model's config.json is read: its source, or for an InternVL original converted by the
    workflow (models.<name>.convert_from) the original's id (the converted copy may not exist yet)."""
    entry = plan.config["models"][model]
    return entry.get("source") or entry["convert_from"]


def job_settings(plan, job) -> JobSettings:
    """An adaptation job's shape from its resolved preset and its sample count: the protocol's, or for
    a per-sample method (VR-TTRL) the evaluated samples (`evaluation.<task>.samples`), each adapted on."""
    # "all": the prepared split's size, unknown before the data is prepared (then no rounds)
    n_samples = adaptation_samples(job.protocol) or split_size(plan, job.dataset) or 0
    evaluated = plan.config["evaluation"][plan.section[job.dataset]].get("samples")
    if job.rule == "adapt_per_sample" and isinstance(evaluated, int):
        n_samples = evaluated
    spec = plan.method_spec(job.method, job.protocol)
    adaptation = plan.config["adaptation"]
    # imported here, not at the top: both import torch, which the workflow's parse (it imports this module) does not need
    from ..adaptation.config import AUTO_ROLLOUTS
    from ..models.families import freezes_vision_encoder, image_tokens

    # the engine the job will run ("auto" is adaptation/config.py AUTO_ROLLOUTS; the plan does not check that vLLM is
    # installed here, the job's machine may have it); vote-only builds no engine: HF generate (adaptation/single_sample.py)
    backend = spec["hyperparameters"].get("rollout_backend", adaptation["rollout_backend"])
    backend = AUTO_ROLLOUTS if backend == "auto" else backend
    trains = spec["hyperparameters"].get("updates", True)
    share = adaptation["vllm"]["gpu_memory_utilization"] if trains and backend == "vllm" else 0.0
    settings = JobSettings.from_preset(spec["hyperparameters"], n_samples, per_sample=job.rule == "adapt_per_sample",
                                       vllm_share=share)
    # "authors" freezes by family (models/families.py), known from the model's config
    config = memory.model_config(model_source(plan, job.model))
    settings = replace(settings, freeze_vision=freezes_vision_encoder(config.model_type, settings.freeze_vision))
    # the memory: every rollout's image at the most tokens a kept one can take, the protocol's bound within the prompt
    # budget that drops longer prompts (adaptation/prompt_budget.py); the minutes: IMAGE_TOKENS_FOR_MINUTES
    most = image_tokens(config, rerun_protocol(job.protocol))[1]
    settings = replace(settings, most_image_tokens=min(most, prompt_budget(adaptation["vllm"]) - settings.prompt_tokens))
    lora = lora_for_dataset(spec["hyperparameters"].get("lora"), job.dataset)
    if lora is None:
        return settings
    # a peft model's KL reference is itself with the adapter off (TRL): no second model
    targets = lora.get("target_modules", "all-linear")
    return replace(settings, lora_rank=lora["rank"], reference=False,
                   lora_targets=targets if isinstance(targets, str) else ",".join(targets))


@contextmanager
def _quiet(logger: str):
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def quiet_layout(hp: dict, gpus: int, n_samples: int) -> dict:
    """adaptation/layout.py's plan_batch_layout without its warnings (the job's to print, once)."""
    from ..adaptation.layout import plan_batch_layout

    with _quiet("ttrl_bench.adaptation.layout"):
        return plan_batch_layout(hp, gpus, n_samples)


def job_layout(plan, job):
    """`decide`'s layout for one job: (GPUs, micro-batch) -> the micro-batch its GRPO batch layout runs
    (adaptation/layout.py, as the job and the dry-run check will), raising for a layout it refuses;
    None for the objective baselines (Appendix C) and vote-only, which have no GRPO batch."""
    hp = plan.method_spec(job.method, job.protocol)["hyperparameters"]
    if "num_generations" not in hp or not hp.get("updates", True):
        return None
    n_samples = layout_samples(plan, job) or 10**6  # "all" before preparation: many

    def layout(gpus: int, micro_batch: int) -> int:
        return quiet_layout({**hp, "micro_batch_size": micro_batch}, gpus, n_samples)["per_device_train_batch_size"]
    return layout


def job_decision(plan, job, gpu_memory_gb: float | None = None, gpus: int | None = None) -> Decision:
    """`decide` for one adaptation job of a Plan (plan/grid.py), the config's overrides applied (`gpus`: as if
    the config set models.<name>.gpus to it)."""
    model = plan.config["models"][job.model]
    gpu_memory_gb = gpu_memory_gb or cards.gpu_memory_gb(plan.config)
    name = f"{job.rule} {job.model}/{job.method}/{job.dataset}/{job.protocol}/seed{job.seed}"
    return decide(memory.model_config(model_source(plan, job.model)), job_settings(plan, job), gpu_memory_gb,
                  gpus=gpus or model.get("gpus"), micro_batch=model.get("micro_batch_size"), offload=model.get("offload"),
                  layout=job_layout(plan, job), job=name,
                  keys=f"models.{job.model}.gpus / .offload / .micro_batch_size", card=cards.config_card(plan.config))


if __name__ == "__main__":
    calib = calibration()
    print(f"calibration factor {calib.factor:.3f} (training), {calib.prefill:g} (prefill); "
          f"{memory.ship_cache()} traces in {memory.SHIPPED_TRACES}")
