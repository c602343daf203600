"""Issue 39: the plan's jobs worked by hand. One multi-GPU adaptation of config/vr-ttrl.yaml from its traces to
its GPUs, per-GPU peak, host memory, SLURM time limit and GPU-hours; the cost model's defaults by name; and
the grid's pure helpers that only the workflow's (slow) Snakemake runs reach: Job.of, the evaluation's
inputs, the paper names, the final outputs, the launcher's rendezvous port (the trace cache's folder and
shipping: tests/plan/test_memory.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from ttrl_bench.plan import Job, Plan, Request, job_request, load_config, validated
from ttrl_bench.plan import cost, memory, resources
from ttrl_bench.plan.cards import CARDS, DEFAULT_CARD
from ttrl_bench.plan.config import merge
from ttrl_bench.plan.memory import StepShape

REPO = Path(__file__).resolve().parents[2]

# --- one 4-GPU adaptation of the VR-TTRL config, from its traces ---------------------------------------------

# The shipped traces (plan/data/traces.json) this job's numbers rest on. Qwen2.5-VL-7B: 8,292,166,656 parameters,
# 7,660,190,976 trained (the vision tower frozen but its patch merger: hyperparameters.py VR_TTRL freeze_vision
# True). fp32 weights + gradients + 2 AdamW moments of the trained part: 4 P + 12 T bytes = 125.090958336 GB.
P, T = 8_292_166_656, 7_660_190_976
PEAK = {2: 145.798038536, 4: 152.253278216}  # traced training step at micro-batch 2 and 4 (GB), 1,280 image tokens
PEAK_256 = {2: 142.02802996, 4: 144.713261064}  # the same at 256 image tokens (memory.ANCHOR_IMAGE_TOKENS)
# Images at the most a kept rollout's can take under `authors`: Qwen2.5-VL's 16,384 within the 4,096-token prompt
# budget less 64 of text, 4,032: 3.6875 of the way from the 256-token trace to the 1,280 one (memory.image_trace).
ALONG = (4032 - 256) / 1024
PREFILL_2 = {256: 34.362055328, 1280: 34.699958944}  # shipped prefill traces, 2 sequences, fp32 weights
FLOPS_MB2 = 293_846_727_000_064.0  # FLOPs of the traced step at micro-batch 2
# the two measured training points (calibration.csv probe-bf16 / probe-fp32, InternVL3-2B on one H100)
PROBE_TRACED = {"bf16": 45.879989688, "fp32": 89.027074744}
PROBE_FLOPS = 856_365_187_006_464.0  # probe-bf16's traced FLOPs, 32 sequences x (48 + 1280 + 32) tokens


def _vr_ttrl_plan(tmp_path) -> Plan:
    """config/vr-ttrl.yaml with 1,024-token rollouts, the length these hand-worked numbers (and their shipped
    traces) were made at; the `authors` protocol's own is Seg-Zero's 2,000 (issue 53; a key the config sets wins)."""
    overlay = tmp_path / "rollouts-1024.yaml"
    overlay.write_text("adaptation: {hyperparameters: {grounding: {max_completion_length: 1024}}}\n")
    return Plan(load_config(REPO / "config/vr-ttrl.yaml", overlay))


def _vr_ttrl_job(plan: Plan) -> Job:
    return Job("adapt_per_sample", "qwen2.5-vl-7b", "vr-ttrl", "reasonseg", None, "n20_random_authors", 0)


def test_a_4_gpu_vr_ttrl_adaptation_worked_by_hand_from_its_traces(tmp_path, monkeypatch):
    """VR-TTRL on Qwen2.5-VL-7B, ReasonSeg (config/vr-ttrl.yaml). Its settings (hyperparameters.py
    VR_TTRL_HYPERPARAMETERS): 8 rollouts, all trained, 1 prompt per step, 1024 completion tokens, micro-batch 4,
    KL reference (kl_beta 0.01), 5 epochs on each of the 200 evaluated samples (vr-ttrl.yaml grounding.samples
    200): 1000 rounds; the rollouts from HF generate (rollout_backend auto: adaptation/config.py AUTO_ROLLOUTS), no
    engine share; every image at 4,032 tokens (ALONG above).

    Calibration: (37.6 / 45.880 + 66.6 / 89.027) / 2 = (0.81953 + 0.74809) / 2 = 0.78381.
    State 4 P + 12 T = 33.169 + 91.922 = 125.091 GB; activations: the peak at 4,032 image tokens minus it:
    micro-batch 4: 144.713 + 3.6875 x (152.253 - 144.713) = 172.517 -> 47.426; micro-batch 2: 142.028 + 3.6875 x
    (145.798 - 142.028) = 155.930 -> 30.839.
    1 GPU: 0.784 x (125.09 + 47.43) + 2 P / 1e9 (bf16 reference 16.58) = 151.8 GB > 80.
    2 GPUs (4 rollouts a process, micro-batch 4): 0.784 x (62.55 + 47.43) + 8.29 = 94.5 GB > 80.
    4 GPUs: 8 rollouts / 4 processes leave 2 a process, so the micro-batch 4 runs as 2 (adaptation/layout.py):
    0.784 x (31.27 + 30.84) + 4.15 = 52.83 GB <= 80, and HF's prefill of each process's 2 rollouts 34.362 + 3.6875 x
    (34.700 - 34.362) = 35.61: 4 GPUs, no offload.
    Host: 4 processes x 4 P (fp32 loads, 132.67) + 4 x 4 T (pinned snapshots, per sample: 122.56) + 4 x 2 P
    (bf16 references, 66.34) + 4 x 8 GB = 353.575 GB; request ceil(1.1 x 353.575 = 388.93) GB = 389000 MB.
    Throughput: probe-bf16's FLOPs per token 8.5637e14 / 43,520 = 1.9678e10, x 64 sequences x 1,495.4 tokens /
    (9.4 s x 4 GPUs) = 5.0086e13 FLOP/s per GPU. FLOPs per sequence 2.9385e14 / 2 = 1.4692e14; per round
    8 x 1.4692e14 (trained) + 8 x 1.4692e14 / 3 x 2 (old + reference forwards) + 8 x 1024 x 2 x P (decoding)
    = 2.0948e15; x 1000 rounds = 2.0948e18. FLOPs: 2.0948e18 / (5.0086e13 x 3.09 fitted x 4) / 60 = 174.27 / 3.09 =
    56.398 minutes at the authors' A6000 rate. Traffic (cost.py FLOP_RATE_FACTOR's comment): 8 trained / 4 GPUs /
    micro-batch 2 = 1 micro-batch a GPU a round, x 1000 rounds, each T x 12 B / 10.2 GB/s = 9.0120 s: 150.200 minutes.
    On the default H100: FLOPs / 6.389 (989 / 154.8) = 8.827, traffic / 14.06 (NVLink 900 / PCIe 64 GB/s) = 10.681,
    + the logs' median start-up 2.15 = 21.66 minutes, GPU-hours 4 x 21.66 / 60 = 1.44; SLURM limit
    ceil(2 x (56.398 + 150.200, no gain from the faster card, + 6.25 slowest start-up)) = ceil(425.69) = 426."""
    monkeypatch.chdir(tmp_path)  # a fresh results tree
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(tmp_path / "traces"))  # only the shipped traces count
    monkeypatch.setattr(memory, "trace_step", lambda *a: pytest.fail("a trace that is not shipped"))
    plan = _vr_ttrl_plan(tmp_path)
    job = _vr_ttrl_job(plan)
    assert job in plan.jobs()
    settings = cost.job_settings(plan, job)
    assert (settings.rollouts, settings.trained, settings.prompts_per_step, settings.new_tokens, settings.rounds,
            settings.micro_batch, settings.reference, settings.per_sample, settings.vllm_share) == (
        8, 8, 1, 1024, 200 * 5, 4, True, True, 0.0)
    assert (settings.image_tokens, settings.most_image_tokens) == (1280, 4032)  # the minutes', the memory's
    # the literals above are the shipped traces
    config = memory.model_config("Qwen/Qwen2.5-VL-7B-Instruct")
    for micro_batch, peak in PEAK.items():
        trace = memory.cached_trace(config, settings.shape(micro_batch))
        assert (trace.peak_gb, trace.parameters, trace.trainable) == (peak, P, T)
        assert memory.cached_trace(config, replace(settings.shape(micro_batch), image_tokens=256)).peak_gb == PEAK_256[micro_batch]
    assert [memory.cached_trace(config, replace(settings.prefill_shape(4), image_tokens=n)).peak_gb
            for n in (256, 1280)] == [PREFILL_2[256], PREFILL_2[1280]]
    assert memory.cached_trace(config, settings.shape(2)).flops == FLOPS_MB2

    factor = (37.6 / PROBE_TRACED["bf16"] + 66.6 / PROBE_TRACED["fp32"]) / 2
    assert cost.calibration().factor == pytest.approx(factor, rel=1e-12)
    state = (4 * P + 12 * T) / 1e9
    assert state == pytest.approx(125.090958336)

    def activations(micro_batch):
        return PEAK_256[micro_batch] + ALONG * (PEAK[micro_batch] - PEAK_256[micro_batch]) - state

    def peak_gb(gpus, micro_batch):
        return factor * (state / gpus + activations(micro_batch)) + 2 * P / 1e9 / gpus

    assert (round(peak_gb(1, 4), 1), round(peak_gb(2, 4), 1), round(peak_gb(4, 2), 2)) == (151.8, 94.5, 52.83)
    prefill = PREFILL_2[256] + ALONG * (PREFILL_2[1280] - PREFILL_2[256])
    assert round(prefill, 2) == 35.61
    host = 4 * 4 * P / 1e9 + 4 * 4 * T / 1e9 + 4 * 2 * P / 1e9 + 4 * 8
    assert round(host, 3) == 353.575
    rate = PROBE_FLOPS / (32 * (48 + 1280 + 32)) * 64 * (1490 + 5.4) / (9.4 * 4) * 3.09  # x FLOP_RATE_FACTOR
    flops = 1000 * (8 * FLOPS_MB2 / 2 + 8 * FLOPS_MB2 / 2 / 3 * 2 + 8 * 1024 * 2 * P)
    flop_min = flops / (rate * 4) / 60  # at the fitted rate, on the authors' A6000s
    traffic = 1000 * 1 * T * 12 / 10.2e9 / 60  # 1000 rounds x 1 micro-batch a GPU, 12 B a trainable weight
    compute = flop_min + traffic
    assert (round(flop_min, 3), round(traffic, 3)) == (56.398, 150.2)
    # the default card, the H100 80 GB: 989 / 154.8 = 6.389 times the A6000's dense bf16, its NVLink 900 / 64 GB/s
    # PCIe (plan/cards.py); the start-up the authors' logs' median, 129 s; the limit 2 x (both terms at no gain from
    # the faster card + the slowest start-up, 375 s) = 2 x 212.85 -> 426
    minutes = flop_min / (989 / 154.8) + traffic / (900 / 64) + 129 / 60
    assert (round(minutes, 2), math.ceil(2 * (compute + 375 / 60))) == (21.66, 426)

    d = cost.job_decision(plan, job)
    assert (d.gpus, d.offload, d.micro_batch) == (4, False, 2)
    assert d.gpu_peak_gb == round(peak_gb(4, 2), 1) == 52.8
    assert d.predicted["train_gb"] == pytest.approx(peak_gb(4, 2), rel=1e-9)
    assert d.predicted["generation_gb"] == pytest.approx(prefill, rel=1e-12)  # HF generate's prefill, factor 1
    assert (d.predicted["state_gb"], d.predicted["reference_gb"], d.predicted["vllm_gb"]) == pytest.approx(
        (state, 2 * P / 1e9 / 4, 0.0), rel=1e-12)
    assert d.predicted["activations_gb"] == pytest.approx(activations(2), rel=1e-12)
    # the calibration factors the peak rests on, kept with the other parts behind it (Decision.predicted)
    assert (d.predicted["factor"], d.predicted["prefill_factor"]) == (pytest.approx(factor, rel=1e-12), 1.0)
    assert (d.predicted["checkpoint_loads"], d.predicted["snapshots"], d.predicted["offloaded_state"],
            d.predicted["reference_loads"], d.predicted["processes"]) == pytest.approx(
        (16 * P / 1e9, 16 * T / 1e9, 0.0, 8 * P / 1e9, 32.0), rel=1e-12)
    assert (d.host_gb, d.mem_mb) == (353.6, 389000) and math.ceil(1.1 * host) == 389
    assert d.predicted["flops_per_gpu_second"] == pytest.approx(rate, rel=1e-12)
    assert d.predicted["flops"] == pytest.approx(flops, rel=1e-12)
    assert d.predicted["compute_min"] == pytest.approx(compute, rel=1e-12)
    assert (d.predicted["flop_min"], d.predicted["traffic_min"]) == pytest.approx((flop_min, traffic), rel=1e-12)
    assert (d.runtime_min, d.gpu_hours) == (426, round(4 * minutes / 60, 2)) == (426, 1.44)
    # what SLURM is asked, and the --main_process_port of its launcher
    assert job_request(plan, job) == Request(4, 389000, 426, threads=1, offload=False, micro_batch=2)
    # the plan's row: the predicted minutes, round(1.44 x 60 / 4) = 22, beside the limit
    plan.jobs = lambda: [job]
    rows, totals = resources.plan_table(plan)
    row = next(r for r in rows if r["rule"] == "adapt_per_sample")
    assert row == {"rule": "adapt_per_sample", "job": "adapt_per_sample qwen2.5-vl-7b/vr-ttrl/reasonseg/"
                   "n20_random_authors/seed0", "gpus": 4, "offload": False, "micro_batch": 2, "gpu_peak_gb": 52.8,
                   "host_gb": 353.6, "minutes": 22, "limit": 426, "gpu_hours": 1.44, "unknown": False,
                   "parts": {"adaptation": pytest.approx(4 * (minutes - 129 / 60) / 60, rel=1e-12),
                             "startup": pytest.approx(4 * 129 / 60 / 60, rel=1e-12)}}
    assert (totals["gpu_hours"], totals["gpu_hours_by_rule"], totals["node_hours"]) == (
        1.4, {"adapt_per_sample": 1.4}, round(22 / 60, 1))


def test_the_same_job_on_one_gpu_offloads_and_costs_three_times_the_compute(tmp_path, monkeypatch):
    """models.qwen2.5-vl-7b.gpus: 1 (what `ttrl-bench plan` proposes, resources.fewer_gpus). One process: all 8
    rollouts, micro-batch 4. Without offload 151.8 GB (previous test): offload, the state on the host:
    0.784 x 47.426 (activations at 4,032 image tokens, previous test) + 16.584 (bf16 reference) = 53.76 GB, above HF
    generate's prefill of the 8 rollouts, 34.672 + 3.6875 x (36.487 - 34.672) = 41.37. Host: one fp32 load 4 P
    (33.169) + one snapshot 4 T (30.641) + the offloaded 16 T + 4 (P - T) (122.563 + 2.528) + 2 P (16.584) + 8
    = 213.48 GB -> ceil(234.83) = 235000 MB. FLOPs per sequence are the same at micro-batch 4 (linear), so the
    FLOP term is 4 x 56.398 = 225.59 minutes at the fitted rate on the authors' A6000s; the traffic 8 trained / 1 GPU /
    micro-batch 4 = 2 micro-batches a round, x 1000 x T x 12 B / 10.2 GB/s = 300.40 minutes; PCIe-bound x 3 both. On
    the default H100: 3 x (225.59 / 6.389 + 300.40 / 14.06) = 3 x (35.308 + 21.362) = 170.01 + 2.15 start-up = 172.16
    minutes: 2.87 GPU-hours (against 1.44 on 4 GPUs); limit 2 x (3 x 526.0, no gain from the faster card, + 6.25
    slowest start-up) = 3168.4 -> 3169."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(tmp_path / "traces"))
    monkeypatch.setattr(memory, "trace_step", lambda *a: pytest.fail("a trace that is not shipped"))
    plan = _vr_ttrl_plan(tmp_path)
    job = _vr_ttrl_job(plan)
    factor = (37.6 / PROBE_TRACED["bf16"] + 66.6 / PROBE_TRACED["fp32"]) / 2
    state = (4 * P + 12 * T) / 1e9
    peak = factor * (PEAK_256[4] + ALONG * (PEAK[4] - PEAK_256[4]) - state) + 2 * P / 1e9
    host = 4 * P / 1e9 + 4 * T / 1e9 + (16 * T + 4 * (P - T)) / 1e9 + 2 * P / 1e9 + 8
    rate = PROBE_FLOPS / (32 * (48 + 1280 + 32)) * 64 * (1490 + 5.4) / (9.4 * 4) * 3.09  # x FLOP_RATE_FACTOR
    flop_min = 1000 * (8 * FLOPS_MB2 / 2 * (1 + 2 / 3) + 8 * 1024 * 2 * P) / rate / 60
    traffic = 1000 * 2 * T * 12 / 10.2e9 / 60  # 2 micro-batches of 4 a round
    compute = flop_min + traffic
    minutes = 3 * (flop_min / (989 / 154.8) + traffic / (900 / 64)) + 129 / 60
    assert (round(peak, 2), round(host, 2), round(flop_min, 2), round(traffic, 2), round(minutes, 2)) == (
        53.76, 213.48, 225.59, 300.40, 172.16)
    d = cost.job_decision(plan, job, gpus=1)
    assert (d.gpus, d.offload, d.micro_batch, d.gpu_peak_gb, d.host_gb, d.mem_mb) == (1, True, 4, 53.8, 213.5, 235000)
    assert d.predicted["offloaded_state"] == pytest.approx((16 * T + 4 * (P - T)) / 1e9, rel=1e-12)
    assert (d.runtime_min, d.gpu_hours) == (math.ceil(2 * (3 * compute + 375 / 60)), round(minutes / 60, 2)) == (3169, 2.87)
    plan.jobs = lambda: [job]
    assert resources.fewer_gpus(plan) == [
        "models.qwen2.5-vl-7b.gpus: 1 runs its 1 multi-GPU adaptation(s) on one GPU each, 1 of them with offload: "
        "2.9 GPU-hours instead of 1.4"]


PREFILL_8 = {"peak_gb": 36.487232672, "flops": 193_629_266_116_608.0}  # shipped prefill trace, 8 sequences, fp32 weights
PREFILL_8_256 = 34.672235168  # its peak at 256 image tokens


def test_a_vote_only_job_is_planned_as_rollouts_and_a_vote_not_as_training(tmp_path, monkeypatch):
    """VR-TTRL's vote-only baseline (presets.py `updates: False`; adaptation/per_sample.py runs consensus_vote, never a
    step) on the same model and split. Until issue 39 the plan sized it as the VR-TTRL job above: 4 GPUs, 389000 MB,
    12.28 GPU-hours, 16 such jobs 196.5 of vr-ttrl.yaml's 412.2 GPU-hours. What it runs: the fp32 checkpoint on one
    process (more would each repeat the whole job: nothing shards it), one round of 8 rollouts per sample (not 5
    epochs: 200 rounds) through HF generate (no vLLM engine), no reference, no optimizer, no snapshot.
    GPU: the prefill of 8 sequences, every image at 4,032 tokens, on the line through its traces at 256 and 1,280
    image tokens: 34.672 + 3.6875 x (36.487 - 34.672) = 41.37 GB x 1.0 (33.17 of it the fp32 weights, 4 P); its
    minutes at 1,280 (the trace's FLOPs). Host: one fp32 load
    4 P = 33.169 + 8 = 41.169 GB -> ceil(1.1 x 41.169 = 45.29) = 46000 MB. FLOPs per round: 8 x (1.9363e14 / 8
    + 1024 x 2 x P) = 1.9363e14 + 1.3585e14 = 3.2949e14; x 200 = 6.5898e16; / (5.0086e13 x 3.09 fitted = 1.5477e14
    FLOP/s) / 60 = 7.096 min on the authors' A6000 (no step: no traffic); on the default H100 (x 6.389) 1.111 + 2.15
    start-up = 3.26 min, 0.05 GPU-hours; limit 2 x (7.096 + 6.25) = 26.69 -> 27 min."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(tmp_path / "traces"))
    monkeypatch.setattr(memory, "trace_step", lambda *a: pytest.fail("a trace that is not shipped"))
    plan = _vr_ttrl_plan(tmp_path)
    job = Job("adapt_per_sample", "qwen2.5-vl-7b", "vote-only", "reasonseg", None, "n20_random_authors", 0)
    assert job in plan.jobs()
    settings = cost.job_settings(plan, job)
    assert (settings.trains, settings.rollouts, settings.rounds, settings.reference, settings.vllm_share) == (
        False, 8, 200, False, 0.0)
    trace = memory.cached_trace(memory.model_config("Qwen/Qwen2.5-VL-7B-Instruct"), settings.shape(8, "prefill"))
    assert (trace.peak_gb, trace.flops, trace.parameters, trace.trainable) == (
        PREFILL_8["peak_gb"], PREFILL_8["flops"], P, 0)
    rate = PROBE_FLOPS / (32 * (48 + 1280 + 32)) * 64 * (1490 + 5.4) / (9.4 * 4) * 3.09  # x FLOP_RATE_FACTOR
    flops = 200 * 8 * (PREFILL_8["flops"] / 8 + 1024 * 2 * P)
    minutes = flops / rate / 60 / (989 / 154.8) + 129 / 60
    host = 4 * P / 1e9 + 8
    assert (round(minutes, 2), round(host, 3)) == (3.26, 41.169)
    d = cost.job_decision(plan, job)
    prefill = PREFILL_8_256 + ALONG * (PREFILL_8["peak_gb"] - PREFILL_8_256)
    assert round(prefill, 2) == 41.37
    assert (d.gpus, d.offload, d.gpu_peak_gb, d.host_gb, d.mem_mb) == (1, False, 41.4, 41.2, 46000)
    assert (d.predicted["train_gb"], d.predicted["generation_gb"], d.predicted["snapshots"],
            d.predicted["reference_loads"], d.predicted["vllm_gb"]) == (0.0, pytest.approx(prefill), 0.0, 0.0, 0.0)
    assert d.predicted["flops"] == pytest.approx(flops, rel=1e-12)
    assert (d.runtime_min, d.gpu_hours) == (math.ceil(2 * (flops / rate / 60 + 375 / 60)), round(minutes / 60, 2)) == (27, 0.05)
    # a config that gives the model 4 GPUs gets them (each process repeats the job); nothing else changes
    forced = cost.job_decision(plan, job, gpus=4)
    assert (forced.gpus, forced.gpu_peak_gb, forced.gpu_hours) == (
        4, 41.4, round(4 * (flops / rate / 4 / 60 / (989 / 154.8) + 129 / 60) / 60, 2))
    # VR-TTRL itself is unchanged (the test above): a vote-only preset with kl_beta still loads no reference
    assert cost.JobSettings.from_preset({"updates": False, "kl_beta": 0.01, "epochs": 5}, 3, per_sample=True).reference is False
    assert cost.JobSettings.from_preset({"updates": False, "epochs": 5}, 3, per_sample=True).rounds == 3
    assert cost.JobSettings.from_preset({"updates": True, "epochs": 5}, 3, per_sample=True).rounds == 15


# --- the defaults, by name -------------------------------------------------------------------------------------

def test_the_cost_models_defaults_by_name():
    """Each default the requests rest on, with its reason: GPU counts powers of two up to a node's 8; micro-batches
    halving from 64; 8 GB of host memory per process; the prefill factor 1 (the oom-hf-generate point); the TTRV
    authors' update (docs/ttrv-authors-logs.md: 4 prompts x 16 trained rollouts of ~1,490 + 5.4 tokens in 9.4 s on
    4 GPUs); a built demo model's 8000 MB and 40 minutes; InternVL's 5 tiles x 256 = 1,280 image tokens and 64
    text tokens per prompt; the H100 80 GB card and a vLLM share of 0.3 (the config schema's defaults)."""
    assert cost.GPU_COUNTS == (1, 2, 4, 8)
    assert cost.MICRO_BATCHES == (64, 32, 16, 8, 4, 2, 1)
    assert cost.HOST_OVERHEAD_GB == 8.0
    assert cost.PREFILL_FACTOR == 1.0 and cost.Calibration(0.5, []).prefill == 1.0
    assert cost.AUTHORS_UPDATE == {"sequences": 4 * 16, "tokens": 1490 + 5.4, "seconds": 9.4, "gpus": 4, "card": "a6000"}
    # start-up: the median and the slowest of the 71 readable authors' logs (129 s, 375 s); one margin, 2
    assert (cost.STARTUP_MIN, cost.STARTUP_SLOWEST_MIN, cost.MARGIN) == (129 / 60, 375 / 60, 2.0)
    assert (resources.BUILT_MEM_MB, resources.BUILT_RUNTIME) == (8000, 40)
    assert resources.ADAPT_RULES == ("adapt", "adapt_per_sample")
    assert resources.GPU_RULES == ("adapt", "adapt_per_sample", "evaluate")
    s = cost.JobSettings(rollouts=32, trained=16, prompts_per_step=1, new_tokens=1024, rounds=1)
    assert (s.micro_batch, s.prompt_tokens, s.image_tokens, s.freeze_vision, s.gradient_checkpointing, s.reference,
            s.fp32_master, s.generation_batch, s.per_sample, s.vllm_share, s.lora_rank, s.lora_targets, s.trains) == (
        None, 64, 5 * 256, True, True, True, True, None, False, 0.0, 0, "all-linear", True)
    shape = StepShape(sequences=1, prompt_tokens=1, image_tokens=1, new_tokens=1)
    assert (shape.fp32_master, shape.trainable_vision, shape.gradient_checkpointing, shape.kind, shape.autocast,
            shape.trainable_adapter, shape.lora_rank, shape.lora_targets) == (
        True, True, True, "train", True, False, 0, "all-linear")
    # the schema's defaults as a validated config holds them (config/config.yaml sets neither)
    config = validated(yaml.safe_load((REPO / "config/config.yaml").read_text()))
    assert config["resources"] == {}  # no card set: the H100 80 GB (plan/cards.py), its memory
    assert CARDS[DEFAULT_CARD].memory_gb == 80 and DEFAULT_CARD == "h100"
    assert config["adaptation"]["vllm"]["gpu_memory_utilization"] == 0.3
    # a preset without the keys: one generation, nothing frozen (the trainer's default), checkpointing on,
    # no reference without kl_beta, 1024 completion tokens, the micro-batch left to the decision
    s = cost.JobSettings.from_preset({}, n_samples=20)
    assert (s.rollouts, s.trained, s.prompts_per_step, s.new_tokens, s.rounds, s.micro_batch, s.freeze_vision,
            s.gradient_checkpointing, s.reference, s.generation_batch, s.per_sample, s.trains) == (
        1, 1, 1, 1024, 20, None, False, True, False, None, False, True)


def test_a_benchmark_point_is_predicted_with_the_calibration_points_defaults(tmp_path, monkeypatch):
    """benchmarks/gpu.py writes predict_for_benchmark beside each measured peak. Its defaults are the shape
    the probes ran (calibration.csv probe-bf16 / probe-fp32): 48 text tokens, a trainable vision tower, gradient
    checkpointing. So the probes' own numbers, 32 sequences x 32 new tokens x 1,280 image tokens, find their
    shipped traces: 0.78381 x 45.880 = 35.96 GB (bf16 weights, measured 37.6) and 0.78381 x 89.027 = 69.78 GB
    (fp32 master, measured 66.6)."""
    cost.calibration()  # the real calibration, before any trace is stubbed
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(tmp_path / "traces"))
    monkeypatch.setattr(memory, "trace_step", lambda *a: pytest.fail("a shape the probes did not run"))
    factor = (37.6 / PROBE_TRACED["bf16"] + 66.6 / PROBE_TRACED["fp32"]) / 2
    bf16 = cost.predict_for_benchmark("OpenGVLab/InternVL3-2B-hf", 32, 32, 1280, fp32_master=False)
    fp32 = cost.predict_for_benchmark("OpenGVLab/InternVL3-2B-hf", 32, 32, 1280, fp32_master=True)
    assert (bf16, fp32) == pytest.approx((factor * PROBE_TRACED["bf16"], factor * PROBE_TRACED["fp32"]), rel=1e-12)
    assert (round(bf16, 2), round(fp32, 2)) == (35.96, 69.78)
    # the arguments go where they are named: 48 given explicitly is the same point
    assert cost.predict_for_benchmark("OpenGVLab/InternVL3-2B-hf", sequences=32, new_tokens=32, image_tokens=1280,
                                      fp32_master=False, trainable_vision=True, prompt_tokens=48,
                                      gradient_checkpointing=True) == bf16
    # the other arguments reach the shape: oom-vr-ttrl-7b (Qwen2.5-VL-7B, 8 x 256 new tokens, 64 text and 900 image
    # tokens, fp32, the tower frozen) is 0.78381 x 147.868 = 115.90 GB, over the H100's 80
    vr = cost.predict_for_benchmark("Qwen/Qwen2.5-VL-7B-Instruct", 8, 256, 900, fp32_master=True,
                                    trainable_vision=False, prompt_tokens=64)
    assert round(vr, 2) == round(factor * 147.867965812, 2) == 115.90
    # and without gradient checkpointing (no such point measured: the trace stubbed, 10 GB)
    shapes = []
    monkeypatch.setattr(memory, "cached_trace", lambda config, shape: shapes.append(shape) or memory.Trace(
        10.0, 1, 1, 1.0, 0.0, {}))
    assert cost.predict_for_benchmark("OpenGVLab/InternVL3-2B-hf", 4, 16, 256, fp32_master=True,
                                      gradient_checkpointing=False) == pytest.approx(factor * 10.0, rel=1e-12)
    assert shapes == [StepShape(4, 48, 256, 16, fp32_master=True, trainable_vision=True, gradient_checkpointing=False)]


# --- the grid's helpers the Snakefile calls --------------------------------------------------------------------

def test_a_job_is_named_by_its_rules_wildcards():
    """Snakemake's wildcards: an adaptation names its train set `dataset`, an evaluation `train` and `target`;
    the seed comes as text; conversion has only a model (no seed: None, not int(None))."""
    adapt = SimpleNamespace(model="m", method="ttrv", dataset="ai2d", protocol="n20_random", seed="0")
    assert Job.of("adapt", adapt) == Job("adapt", "m", "ttrv", "ai2d", None, "n20_random", 0)
    evaluate = SimpleNamespace(model="m", method="ttrv", train="ai2d", target="mme", protocol="n20_random", seed="3")
    assert Job.of("evaluate", evaluate) == Job("evaluate", "m", "ttrv", "ai2d", "mme", "n20_random", 3)
    assert Job.of("convert_model", SimpleNamespace(model="m")) == Job("convert_model", "m")


def _three_models(results: str = "results") -> Plan:
    """The demo config with a built model, a converted one and a Hub one (the last with its paper name)."""
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())
    extra = {"models": {"hub": {"source": "OpenGVLab/InternVL3-2B-hf", "paper_name": "InternVL3-2B"},
                        "cv": {"convert_from": "OpenGVLab/InternVL2_5-4B"}}}
    return Plan(validated(merge(base, extra)), results=results)


def test_an_evaluation_reads_the_base_model_or_the_adapted_weights():
    """Zero-shot: the model's source, an input file only where this workflow makes it (built: results/models/demo;
    converted: <results>/models/converted/cv); a Hub id is no file ([]). Adapted: the adaptation's model folder
    and its run.json under <results>/adapt/<model>/<method>/<train>/<protocol>/seed<seed>."""
    plan = _three_models("out")
    zero = dict(method="zero-shot", dataset="none", target="demo-digits", protocol="n20_random", seed=0)
    assert plan.eval_model(Job("evaluate", "hub", **zero)) == ("OpenGVLab/InternVL3-2B-hf", {"model": []})
    assert plan.eval_model(Job("evaluate", "demo", **zero)) == ("results/models/demo", {"model": "results/models/demo"})
    assert plan.eval_model(Job("evaluate", "cv", **zero)) == ("out/models/converted/cv",
                                                              {"model": "out/models/converted/cv"})
    adapted = "out/adapt/demo/ttrv/demo-digits/n20_random/seed1"
    assert plan.eval_model(Job("evaluate", "demo", "ttrv", "demo-digits", "demo-digits", "n20_random", 1)) == (
        f"{adapted}/model", {"model": f"{adapted}/model", "run": f"{adapted}/run.json"})
    assert plan.paper_model_names() == {"demo": "demo", "hub": "InternVL3-2B", "cv": "cv"}


def test_the_default_target_builds_the_store_tables_figures_and_audit():
    plan = _three_models("out")
    assert plan.final_outputs() == [
        "out/benchmark.duckdb", "out/tables/ttrv_table1_layout.md", "out/tables/fidelity.md",
        "out/figures/accuracy.png", "out/figures/training_curves.png", "out/figures/cross_dataset.png",
        "out/figures/step_costs.png", "out/audit/reward_audit.png"]


def test_a_multi_gpu_job_launches_on_its_own_rendezvous_port():
    """A built model's adaptation asks models.demo.gpus (2) without tracing, so its launcher is accelerate with 2
    processes and the port 29500 + crc32(repr(job)) % 2000: crc32 of "Job(rule='adapt', model='demo',
    method='ttrv', dataset='demo-digits', target=None, protocol='n20_random', seed=0)" is 2,631,181,188 = 0x9cd4a384,
    % 2000 = 1188: port 30688; seed 1's is 2,244,973,253 % 2000 = 1253: 30753 (jobs sharing a node differ).
    An evaluation: one GPU, plain Python, no port."""
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())
    plan = Plan(validated(merge(base, {"models": {"demo": {"gpus": 2}}})))
    adapt = Job("adapt", "demo", "ttrv", "demo-digits", None, "n20_random", 0)
    assert job_request(plan, adapt) == Request(2, resources.BUILT_MEM_MB, resources.BUILT_RUNTIME)
    prefix = ("accelerate launch --num_processes 2 --num_machines 1 --use_fsdp --fsdp_version 2 --fsdp_auto_wrap_policy "
              "TRANSFORMER_BASED_WRAP --fsdp_state_dict_type FULL_STATE_DICT --fsdp_offload_params false "
              "--main_process_port {} -m ttrl_bench.cli")
    assert resources.launch_command(plan, adapt) == prefix.format(30688)
    assert resources.launch_command(plan, Job("adapt", "demo", "ttrv", "demo-digits", None, "n20_random", 1)) == \
        prefix.format(30753)
    evaluation = Job("evaluate", "demo", "zero-shot", "none", "demo-digits", "n20_random", 0)
    assert resources.launch_command(plan, evaluation) == "python -m ttrl_bench.cli"
    assert resources.largest_gpu_request(plan) == 2


# --- the layout the decision tries -------------------------------------------------------------------------------

def test_the_decisions_layout_is_the_jobs_batch_layout_without_its_warnings(tmp_path, monkeypatch):
    """job_layout: (GPUs, micro-batch) -> the micro-batch adaptation/layout.py runs. VR-TTRL per sample: 8 rollouts of
    1 prompt (hyperparameters.py), spread over the processes: 8 / 1 = 8, 8 / 2 = 4 and 8 / 4 = 2 a process, so the
    preset's micro-batch 4 runs as 4, 4 and 2. The layout's warnings are the job's to print: the planner's call
    silences the layout logger to ERROR and gives it back its own level afterwards, also when the layout raises."""
    import logging

    monkeypatch.chdir(tmp_path)
    plan = Plan(load_config(REPO / "config/vr-ttrl.yaml"))
    layout = cost.job_layout(plan, _vr_ttrl_job(plan))
    assert [layout(gpus, 4) for gpus in (1, 2, 4)] == [4, 4, 2]
    logger = logging.getLogger("ttrl_bench.adaptation.layout")
    monkeypatch.setattr(logger, "level", logging.INFO)
    seen = []
    with cost._quiet("ttrl_bench.adaptation.layout"):
        seen.append(logger.level)
    assert (seen, logger.level) == ([logging.ERROR], logging.INFO)
    with pytest.raises(RuntimeError), cost._quiet("ttrl_bench.adaptation.layout"):
        raise RuntimeError("a refused layout")
    assert logger.level == logging.INFO


def test_a_freeze_vision_of_authors_must_be_resolved_before_a_shape():
    """"authors" freezes by model family (models/families.py), which job_settings resolves from the model's config;
    a shape asked before that is refused, naming the setting and where it is resolved."""
    settings = cost.JobSettings(rollouts=8, trained=8, prompts_per_step=1, new_tokens=16, rounds=1,
                                freeze_vision="authors")
    with pytest.raises(ValueError) as error:
        settings.shape(2)
    assert str(error.value) == ("JobSettings.freeze_vision 'authors' is resolved per model (job_settings) before "
                                "shapes")
    # resolved: True trains the adapter only, False the whole tower
    assert (cost.replace(settings, freeze_vision=True).shape(2).trainable_vision,
            cost.replace(settings, freeze_vision=True).shape(2).trainable_adapter) == (False, True)
    assert (cost.replace(settings, freeze_vision=False).shape(2, "prefill").trainable_vision,
            cost.replace(settings, freeze_vision=False).shape(2, "prefill").kind) == (True, "prefill")
