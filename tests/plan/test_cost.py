"""The cost model (plan/memory.py, plan/cost.py): traced memory, calibration against the H100 runs,
host memory, and the GPU / offload / micro-batch decision."""

import logging
from types import SimpleNamespace

import pytest
import torch

from tests.support.plan import tiny_internvl_config
from ttrl_bench.plan import cost, memory
from ttrl_bench.plan.memory import StepShape, Trace


@pytest.mark.parametrize("source, billions", [
    ("OpenGVLab/InternVL3-2B-hf", 1.856),  # gpu-probe.md: 1.856 B (the H100 probe's model)
    ("Qwen/Qwen2.5-VL-7B-Instruct", 8.292),  # issue 23 finding 5: 8.29 B, not the 7 once typed by hand in the configs
])
def test_shipped_configs_build_the_published_sizes(source, billions):
    model, _ = memory.build_fake(memory.model_config(source), torch.bfloat16)
    assert round(sum(p.numel() for p in model.parameters()) / 1e9, 3) == billions


def test_unknown_model_names_the_source_and_the_table():
    with pytest.raises(ValueError, match="no-such/model.*model_configs.json"):
        memory.model_config("no-such/model")


def test_traced_step_holds_fp32_weights_adamw_moments_and_activations():
    shape = StepShape(sequences=2, prompt_tokens=16, image_tokens=256, new_tokens=8, fp32_master=True)
    trace = memory.trace_step(tiny_internvl_config(), shape)
    parts = trace.breakdown_gb
    assert trace.trainable == trace.parameters  # vision trainable: every parameter
    # fp32 weights: 4 bytes per parameter; AdamW: two fp32 moments, 8 bytes per parameter
    assert parts["_MemRefType.PARAM"] == pytest.approx(4 * trace.parameters / 1e9, abs=1e-3)
    assert parts["_MemRefType.OPT"] == pytest.approx(8 * trace.parameters / 1e9, abs=1e-3)
    assert trace.peak_gb > (12 + 4) * trace.parameters / 1e9  # + gradients + activations
    assert trace.flops > 0


def _calibration_point(name):
    return next(p for p in cost.calibration().points if p["point"] == name)


@pytest.mark.parametrize("name", ["probe-bf16", "probe-fp32"])
def test_calibration_reproduces_the_h100_peaks(name):
    """data/calibration.csv: the two peaks measured on the H100 (gpu-probe.md) within 10% with one
    factor (shipped traces, data/traces.json)."""
    calib = cost.calibration()
    ratios = [float(p["measured_gb"]) / p["traced_gb"] for p in calib.points
              if p["outcome"] == "fit" and p["kind"] == "train"]
    assert len(ratios) == 2 and max(ratios) / min(ratios) < 1.1  # one factor explains bf16 and fp32 alike
    point = _calibration_point(name)
    assert calib.factor * point["traced_gb"] == pytest.approx(float(point["measured_gb"]), rel=0.10)


@pytest.mark.parametrize("name", ["oom-ttrv-preset", "oom-vr-ttrl-7b", "oom-hf-generate"])
def test_calibration_predicts_the_h100_out_of_memory_runs(name):
    """Training factor (37.6 / 45.88 + 66.6 / 89.03) / 2 = (0.820 + 0.748) / 2 = 0.784 on the shipped
    training traces: TTRV preset 0.784 x 263.2 = 206 GB, VR-TTRL 7B 0.784 x 147.9 = 116 GB. Prefill
    factor 1: HF generate 80.37 GB (worked out in the next test). All three over 80 GB."""
    point = _calibration_point(name)
    assert cost.calibration().of(cost.point_shape(point)) * point["traced_gb"] > 80


def test_the_prefill_trace_is_the_allocation_the_h100_failed_on():
    """oom-hf-generate: InternVL3-2B in fp32 without autocast, the vision tower over 256 x 5 = 1,280
    tiles of 32 x 32 + 1 = 1,025 tokens at once. In vision layer >= 1 (InternVLVisionLayer.forward),
    when GELU allocates its output (the size of fc1's, 4,096 wide), alive: the fp32 weights, the
    pixels, fc1's output, and 5 hidden states of 1,024: the embedding output (held by
    InternVLVisionModel.forward), the layer's input (the encoder loop), the scaled attention output,
    the residual sum and layernorm_after's output (the layer's frame)."""
    asked = 1280 * 1025 * 4096 * 4  # 21.496 GB = 20.02 GiB
    held = (1_855_986_176 * 4  # weights: 7.424 GB
            + 1280 * 3 * 448 * 448 * 4  # pixels: 3.083 GB
            + 5 * 1280 * 1025 * 1024 * 4  # 5 x 5.374 GB
            + asked)  # fc1's output; in all 58.872 GB = 54.83 GiB
    assert _calibration_point("oom-hf-generate")["traced_gb"] == pytest.approx((held + asked) / 1e9, abs=1e-3)
    # gpu-probe.md: "CUDA out of memory (20 GiB asked, 55 GiB allocated)"
    assert (round(asked / 2**30), round(held / 2**30)) == (20, 55)
    assert cost.calibration().prefill == 1.0  # so the prediction is the 80.37 GB the GPU asked for


def test_host_memory_counts_every_copy():
    # 8e9 parameters, 7e9 trainable, 4 processes, per-sample with a reference, no offload:
    # 4 x 4 x 8 = 128 GB of fp32 loads, 4 x 4 x 7 = 112 GB of pinned snapshots, 4 x 2 x 8 = 64 GB of
    # bf16 reference loads, 4 x 8 GB per process = 32 GB
    host = cost.host_gb(8e9, 7e9, gpus=4, offload=False, reference=True, per_sample=True)
    assert host["total_gb"] == pytest.approx(128 + 112 + 64 + 32)
    # offloaded on 1 GPU: fp32 weights + gradients + 2 moments of the trainable part (16 x 7), fp32
    # frozen weights (4 x 1), one load (32), no snapshot, one process (8)
    host = cost.host_gb(8e9, 7e9, gpus=1, offload=True, reference=False, per_sample=False)
    assert host["total_gb"] == pytest.approx(112 + 4 + 32 + 8)


@pytest.fixture
def synthetic(monkeypatch):
    """Traces worked out by hand: 8e9 parameters (7e9 trainable, fp32 + AdamW: 116 GB of state),
    2 GB of other activations + 1.5 GB per training sequence; prefill 16 GB + 0.1 GB per sequence;
    calibration factor 1."""
    def fake_trace(config, shape):
        if shape.kind == "train":
            return Trace(116 + 2 + 1.5 * shape.sequences, int(8e9), int(7e9), 1e12 * shape.sequences, 0, {})
        return Trace(16 + 0.1 * shape.sequences, int(8e9), 0, 1e11 * shape.sequences, 0, {})
    real_calibration = cost.calibration
    monkeypatch.setattr(memory, "cached_trace", fake_trace)
    monkeypatch.setattr(cost, "calibration", lambda: cost.Calibration(1.0, []))
    yield cost.JobSettings(rollouts=32, trained=16, prompts_per_step=1, new_tokens=32, rounds=10)
    # plan/resources.py holds its own reference to the real (lru-cached) calibration(): called under the fake
    # traces (plan_table's totals) it would cache a calibration of them for every later test of the process
    real_calibration.cache_clear()


def test_decide_takes_the_fewest_gpus_and_the_largest_micro_batch_that_fit(synthetic):
    # 1 GPU: 116 + 16 (bf16 reference) > 80. 2 GPUs: 58 + 8 + 2 + 1.5 m <= 80 -> m = 8 (16 gives 92)
    d = cost.decide(None, synthetic, gpu_memory_gb=80)
    assert (d.gpus, d.micro_batch, d.offload) == (2, 8, False)
    assert d.gpu_peak_gb == pytest.approx(80.0)


def test_decide_offloads_when_the_gpu_count_is_fixed(synthetic):
    # models.<name>.gpus = 1: only offload fits: 2 + 1.5 x 16 + 16 = 42 GB
    d = cost.decide(None, synthetic, gpu_memory_gb=80, gpus=1)
    assert (d.gpus, d.micro_batch, d.offload, d.gpu_peak_gb) == (1, 16, True, 42.0)


def test_decide_names_the_job_peak_memory_and_keys_when_nothing_fits(synthetic):
    # 1 GPU, offload, micro-batch 1: 2 + 1.5 + 16 = 19.5 GB against 10 GB
    with pytest.raises(ValueError, match=r"adapt m/ttrv.*19\.5 GB.*GPU's 10 GB.*models\.m\.gpus"):
        cost.decide(None, synthetic, gpu_memory_gb=10, gpus=1, job="adapt m/ttrv", keys="models.m.gpus")



def test_plan_table_has_a_row_per_job_of_the_ttrv_config(synthetic):
    """Every job: 16 preparations, InternVL2.5-4B's conversion, 128 adaptations and 224 evaluations
    (test_paper_configs.py counts them). InternVL3-8B (7.944 B) evaluated on AI2D's 2,704 items (the authors' list),
    on the default H100 80 GB, expected case: AI2D's typical 900x600 image (plan/samples.py) is InternVL's 3:2 grid,
    6 tiles + a thumbnail = 7 x 256 + 2 = 1,794 image tokens, + 100 text + a 6-token letter through vLLM
    (evaluation.backend auto) at 36.2 items/s x 1,346 tokens x 1.86 / 7.944 = 11,407.9 tokens/s: 2,704 x 1,900 =
    5,137,600 tokens in 450.4 s = 7.506 min, + 2.15 start-up -> 10 minutes, 0.16 GPU-hours. Its limits: the slowest
    case (12 tiles + a thumbnail = 3,330 image tokens, HF generate's 6,617.9 tokens/s, max_new_tokens) x 2 +
    start-up: clean (6 new tokens) 2 x (2,704 x 3,436 / 6,617.9 / 60 = 23.399 + 2.15) -> 52; authors (1,024)
    2 x (30.331 + 2.15) -> 65. The conversion runs on the CPU for its 60 minutes. The node hours pack the GPU-hours, but are never
    less than the longest costed job: on a one-GPU node they are the GPU-hours."""
    from ttrl_bench.plan import Plan, load_config
    from ttrl_bench.plan.resources import plan_table

    plan = Plan(load_config("config/ttrv.yaml"))
    rows, totals = plan_table(plan)
    counts = {}
    for row in rows:
        counts[row["rule"]] = counts.get(row["rule"], 0) + 1
    assert counts == {"prepare_data": 16, "convert_model": 1, "adapt": 128, "evaluate": 224} and totals["jobs"] == 369
    evaluations = {r["job"]: r for r in rows if r["rule"] == "evaluate" and r["job"].startswith("evaluate internvl3-8b/")}
    clean, authors = (evaluations[f"evaluate internvl3-8b/ttrv/ai2d/n20_random{p}/seed0"] for p in ("", "_authors"))
    assert (clean["gpus"], clean["minutes"], clean["gpu_hours"], clean["limit"]) == (1, 10, 0.16, 52)
    assert (authors["gpus"], authors["minutes"], authors["gpu_hours"], authors["limit"]) == (1, 10, 0.16, 65)
    assert authors["parts"]["evaluation"] == pytest.approx(2704 * 1900 / (36.2 * 1346 * 1.86 / 7.94437376) / 3600)
    assert [(r["minutes"], r["gpu_hours"]) for r in rows if r["rule"] == "convert_model"] == [(60, 0.0)]
    adapt = [r for r in rows if r["rule"] == "adapt"]
    assert all(r["gpus"] >= 1 and r["gpu_peak_gb"] <= 80 for r in adapt)
    assert totals["gpu_hours_by_rule"]["adapt"] == pytest.approx(sum(r["gpu_hours"] for r in adapt), abs=0.1)
    assert totals["gpu_hours"] == pytest.approx(sum(totals["gpu_hours_by_rule"].values()), abs=0.1)
    longest = max(r["minutes"] for r in rows if r["gpus"] and r["gpu_hours"] is not None) / 60
    assert totals["node_hours"] == pytest.approx(max(totals["gpu_hours"] / 8, longest), abs=0.1)
    assert plan_table(plan, gpus_per_node=1)[1]["node_hours"] == pytest.approx(totals["gpu_hours"], abs=0.1)


def test_the_plan_tells_a_user_of_smaller_gpus_which_key_to_change():
    """On the default 80 GB the multi-GPU models' adaptations fit no single GPU, and the plan says so per model. On
    40 GB GPUs the 8-prompt InternVL3-8B variant fits no GPU count: HF generate's prefill of its generation batch,
    every image at InternVL's 3,330 tokens, needs over 40 GB a process even on 8; the plan names the job, the part
    and the keys to change (the method's generation_batch_size among them)."""
    from ttrl_bench.plan import Plan, load_config
    from ttrl_bench.plan.resources import fewer_gpus

    plan = Plan(load_config("config/ttrv.yaml"))
    lines = fewer_gpus(plan)
    assert [line.split(" does not fit: ")[0] for line in lines] == ["models.internvl2.5-4b.gpus: 1",
                                                                    "models.internvl3-8b.gpus: 1"]
    with pytest.raises(ValueError, match=r"internvl3-8b/ttrv-2-epochs-8-prompts/.*generation [0-9.]+; 8 GPU.*"
                                         r"exceeds the GPU's 40 GB.*generation_batch_size"):
        fewer_gpus(plan, gpu_memory_gb=40)


def test_decide_counts_a_colocated_vllm_engine(synthetic):
    # 0.3 x 80 = 24 GB per GPU for vLLM. 2 GPUs: 58 + 8 + 2 + 24 > 80 at any micro-batch;
    # 4 GPUs: 29 + 4 + 2 + 24 + 1.5 m <= 80 -> m = 8 (16 gives 83)
    from dataclasses import replace

    d = cost.decide(None, replace(synthetic, vllm_share=0.3), gpu_memory_gb=80)
    assert (d.gpus, d.micro_batch, d.offload) == (4, 8, False)
    assert d.predicted["vllm_gb"] == pytest.approx(24.0)


def test_decide_tries_only_the_layouts_the_batch_layout_runs(synthetic):
    def no_two_gpus(gpus, micro_batch):
        if gpus == 2:
            raise ValueError("no layout on 2 GPUs")
        return micro_batch
    # 2 GPUs refused: 4 GPUs, 29 + 4 + 2 + 1.5 x 16 = 59 GB, the whole group of 16 in one micro-batch
    d = cost.decide(None, synthetic, layout=no_two_gpus)
    assert (d.gpus, d.micro_batch, d.gpu_peak_gb) == (4, 16, 59.0)
    # a layout that shrinks the micro-batch to 4 (few rollouts per process): 2 GPUs, 58 + 8 + 2 + 6 = 74 GB
    d = cost.decide(None, synthetic, layout=lambda gpus, micro_batch: min(micro_batch, 4))
    assert (d.gpus, d.micro_batch, d.gpu_peak_gb) == (2, 4, 74.0)
    with pytest.raises(ValueError, match="no layout on 2 GPUs"):  # nothing runs: the layout's own error
        cost.decide(None, synthetic, gpus=2, layout=no_two_gpus)


def test_the_trace_of_a_trainable_adapter_holds_qwens_merger_and_keeps_earlier_keys():
    """freeze_vision true trains Qwen2.5-VL's patch merger (VR-TTRL Appendix C.1's subset). Its parameters,
    worked from Qwen2.5-VL-7B's vision config (hidden 1280, 2 x 2 spatial merge -> 5120, out 3584): RMSNorm
    1280 + Linear(5120, 5120) 26,219,520 + Linear(5120, 3584) 18,353,664 = 44,574,464. The shipped traces
    (no tracing here) differ by exactly that in trainable parameters; an InternVL shape's key ignores the
    flag (its projector sits outside the tower and trains either way)."""
    qwen = memory.model_config("Qwen/Qwen2.5-VL-7B-Instruct")
    frozen = StepShape(sequences=4, prompt_tokens=64, image_tokens=1280, new_tokens=1024, trainable_vision=False)
    adapter = cost.replace(frozen, trainable_adapter=True)
    assert memory.trace_key(qwen, frozen) != memory.trace_key(qwen, adapter)
    shipped = memory.cached_trace(qwen, adapter, trace_fn=lambda *a: pytest.fail("not shipped")).trainable
    assert shipped - memory.cached_trace(qwen, frozen, trace_fn=lambda *a: pytest.fail("not shipped")).trainable \
        == 1280 + 5120 * 5120 + 5120 + 5120 * 3584 + 3584 == 44_574_464
    internvl = memory.model_config("OpenGVLab/InternVL3-2B-hf")
    assert memory.trace_key(internvl, frozen) == memory.trace_key(internvl, cost.replace(frozen, trainable_adapter=True))
    # a trainable tower has no separate adapter: the flag leaves the key alone
    whole = cost.replace(frozen, trainable_vision=True)
    assert memory.trace_key(qwen, whole) == memory.trace_key(qwen, cost.replace(whole, trainable_adapter=True))


def test_a_lora_step_traces_the_adapter_alone_as_trainable():
    """ECHO's GeoQA adapter (hyperparameter `lora`): the trace injects peft's LoRA layers and trains them alone.
    Qwen2.5-VL-7B cut to 2 language and 2 vision layers, rank 8 on every linear layer but the head: r x (in +
    out) per layer. Vision block: qkv 1280->3840, proj 1280->1280, gate/up 1280->3420, down 3420->1280:
    8 x (5120 + 2560 + 3 x 4700) = 174,240; merger 5120->5120, 5120->3584: 8 x (10240 + 8704) = 151,552; language
    layer: q, o 3584->3584, k, v 3584->512, gate/up 3584->18944, down 18944->3584: 8 x (2 x 7168 + 2 x 4096 + 3 x
    22528) = 720,896. Total 2 x 174,240 + 151,552 + 2 x 720,896 = 1,941,824; no AdamW state but theirs."""
    from ttrl_bench.models.configs import model_config, with_layers

    config = with_layers(model_config("Qwen/Qwen2.5-VL-7B-Instruct"), 2, 2)
    shape = StepShape(sequences=2, prompt_tokens=16, image_tokens=64, new_tokens=16, lora_rank=8)
    full = memory.trace_step(config, cost.replace(shape, lora_rank=0))
    lora = memory.trace_step(config, shape)
    assert lora.trainable == 2 * 174_240 + 151_552 + 2 * 720_896 == 1_941_824
    assert lora.parameters == full.parameters + lora.trainable
    # AdamW's two fp32 moments of the adapter alone (full: of all 1.64e9 weights)
    assert lora.breakdown_gb["_MemRefType.OPT"] == pytest.approx(2 * 4 * 1_941_824 / memory.GB, abs=1e-3)
    assert memory.trace_key(config, shape) != memory.trace_key(config, cost.replace(shape, lora_rank=0))


# --- GPU-hours of multi-GPU jobs, worked by hand (issue 39) ----------------------------------------------------

def test_gpu_hours_are_gpus_times_predicted_minutes_and_the_limit_twice_the_minutes(synthetic, monkeypatch):
    """With 50 compute minutes (runtime_minutes stubbed: 30 of FLOPs, 20 of traffic), no card named (the authors'
    A6000, where both were fitted): minutes = 50 + 2.15 start-up (the logs' median, 129 s) = 52.15; on 4 GPUs 4 x 52.15 / 60 = 3.48
    GPU-hours and a SLURM limit of ceil(2 x (50 + 6.25 slowest start-up)) = 113 minutes. Offloaded on one GPU the
    steps are PCIe-bound: 3 x 50 + 2.15 = 152.15 minutes, 2.54 GPU-hours, limit ceil(2 x 156.25) = 313. On an
    A100 80 GB (312 / 154.8 = 2.016 times the A6000's dense bf16, the same PCIe 4.0 link): 30 / 2.016 + 20 + 2.15 =
    14.885 + 22.15 = 37.03 minutes, 2.47 GPU-hours on 4 GPUs; its limit assumes no gain from the faster card: 113
    again."""
    monkeypatch.setattr(cost, "runtime_minutes", lambda config, settings, micro_batch, gpus: {
        "flop_min": 30.0, "traffic_min": 20.0, "compute_min": 50.0})
    d = cost.decide(None, synthetic, gpus=4, micro_batch=8, offload=False)
    assert (d.gpus, d.offload, d.gpu_hours, d.runtime_min) == (4, False, 3.48, 113)
    d = cost.decide(None, synthetic, gpus=1, micro_batch=8, offload=True)
    assert (d.gpus, d.offload, d.gpu_hours, d.runtime_min) == (1, True, 2.54, 313)
    from ttrl_bench.plan.cards import CARDS
    d = cost.decide(None, synthetic, gpus=4, micro_batch=8, offload=False, card=CARDS["a100_80"])
    assert (d.gpu_hours, d.runtime_min) == (round(4 * (30 / (312 / 154.8) + 20 + 2.15) / 60, 2), 113) == (2.47, 113)


def test_the_plan_reports_a_4_gpu_adaptations_gpu_hours_from_its_predicted_minutes(tmp_path):
    """VR-TTRL per sample on Qwen2.5-VL-7B (tests/plan/test_jobs.py works it by hand: 56.398 FLOP + 150.200 traffic
    minutes on the authors' A6000s, 21.66 minutes on the default H100 with the start-up, limit 426). The plan's row:
    minutes round(1.44 x 60 / 4) = 22, GPU-hours 4 x 21.66 / 60 = 1.44, the limit beside them. (The SLURM limit's
    4 x 426 / 60 = 28.4 GPU-hours is far above: the plan counts the expected case, not the limit.)"""
    from ttrl_bench.plan import Plan, load_config
    from ttrl_bench.plan.resources import plan_table

    overlay = tmp_path / "rollouts.yaml"  # the 1,024-token rollouts of test_plan.py's job (authors: 2,000)
    overlay.write_text("adaptation: {hyperparameters: {grounding: {max_completion_length: 1024}}}\n")
    plan = Plan(load_config("config/vr-ttrl.yaml", overlay))
    job = next(j for j in plan.jobs() if j.method == "vr-ttrl" and j.model == "qwen2.5-vl-7b")
    plan.jobs = lambda: [job]  # the one job's row (the full table decides 48 jobs)
    rows, totals = plan_table(plan)
    row = next(r for r in rows if r["rule"] == "adapt_per_sample")
    assert (row["gpus"], row["micro_batch"], row["minutes"], row["gpu_hours"], row["limit"]) == (4, 2, 22, 1.44, 426)
    assert totals["gpu_hours_by_rule"] == {"adapt_per_sample": 1.4}
    # 4 x 19.508 / 60 = 1.3006, 4 x 2.15 / 60 = 0.1433
    assert totals["gpu_hours_by_part"] == {"adaptation": 1.3, "evaluation": 0.0, "startup": 0.1}
    # one 4-GPU job on an 8-GPU node: max(1.44 / 8, 22 / 60 = 0.37 hours of the longest job) = 0.4
    assert totals["node_hours"] == 0.4


def test_decides_defaults_are_an_80_gb_gpu_an_adaptation_job_and_the_models_gpus_key(synthetic):
    """Left out, the GPU memory is the default card's 80 GB (H100) and the refusal names an adaptation job, the
    models.<name>.gpus key and the card's keys: 1 GPU, micro-batch 16, no offload: 116 + 16 (bf16 reference) + 2 +
    1.5 x 16 = 158 GB."""
    with pytest.raises(ValueError, match=r"^adaptation job: predicted GPU peak 158\.0 GB per GPU \(training 158\.0, .*"
                                         r"exceeds the GPU's 80 GB \(resources\.gpu_model's card, or "
                                         r"resources\.gpu_memory_gb\)\. Change models\.<name>\.gpus, the method's "
                                         r"micro_batch_size / generation_batch_size, or resources\.gpu_model / "
                                         r"resources\.gpu_memory_gb$"):
        cost.decide(None, synthetic, gpus=1, micro_batch=16, offload=False)


def test_a_layout_refusing_a_micro_batch_leaves_the_smaller_ones_on_the_same_gpus_to_try(synthetic):
    """A layout that runs at most micro-batch 8: on 2 GPUs 16 is refused and 8 still tried, 58 + 8 + 2 + 1.5 x 8
    = 80 GB, which fits (without the refusal 2 GPUs and 8 are chosen as well)."""
    def at_most_8(gpus, micro_batch):
        if micro_batch > 8:
            raise ValueError("micro-batch above 8")
        return micro_batch

    d = cost.decide(None, synthetic, gpu_memory_gb=80, layout=at_most_8)
    assert (d.gpus, d.micro_batch, d.offload) == (2, 8, False)


def test_a_refusal_names_the_first_tried_of_the_lowest_peaks(synthetic):
    """8 GPUs, offload: training 2 + 1.5 m + 16 / 8 = 4 + 1.5 m GB is below the generation prefill's 16.4 GB
    for m = 1..8, so micro-batches 8, 4, 2, 1 tie at a 16.4 GB peak (16 gives 28). On a 10 GB GPU the refusal
    names the first of them tried, the largest."""
    with pytest.raises(ValueError, match=r"predicted GPU peak 16\.4 GB per GPU \(training 16\.0, generation 16\.4; "
                                         r"8 GPU\(s\), micro-batch 8, offload True\)"):
        cost.decide(None, synthetic, gpu_memory_gb=10, gpus=8, offload=True)


def test_a_presets_gradient_checkpointing_defaults_to_on_and_a_missing_kl_beta_to_no_reference():
    assert cost.JobSettings.from_preset({}, 4).gradient_checkpointing is True  # the trainer's default
    assert cost.JobSettings.from_preset({"gradient_checkpointing": False}, 4).gradient_checkpointing is False
    assert cost.JobSettings.from_preset({}, 4).reference is False
    assert cost.JobSettings.from_preset({"kl_beta": 0.04}, 4).reference is True


def test_a_vote_only_or_objective_job_has_no_layout_and_all_samples_lay_out_as_a_million(monkeypatch):
    def plan_of(hp):
        return SimpleNamespace(method_spec=lambda method, protocol: {"hyperparameters": hp})

    job = SimpleNamespace(method="m", protocol="p")
    assert cost.job_layout(plan_of({"num_generations": 4, "updates": False}), job) is None  # vote-only
    assert cost.job_layout(plan_of({"epochs": 5}), job) is None  # an objective baseline: no GRPO batch
    seen = []
    monkeypatch.setattr(cost, "layout_samples", lambda plan, job: None)  # "all" before preparation
    monkeypatch.setattr(cost, "quiet_layout", lambda hp, gpus, n: seen.append((hp, gpus, n)) or
                        {"per_device_train_batch_size": 2})
    layout = cost.job_layout(plan_of({"num_generations": 4}), job)
    assert layout(2, 8) == 2 and seen == [({"num_generations": 4, "micro_batch_size": 8}, 2, 10**6)]


def test_a_predicted_peak_equal_to_the_gpus_memory_fits_and_just_over_does_not(synthetic):
    """2 GPUs, micro-batch 8, no offload: 116 / 2 + 16 / 2 (bf16 reference) + 2 + 1.5 x 8 = 80 GB per GPU. It fits
    an 80 GB GPU and an 80.01 GB one; on 79.99 GB nothing else may be tried (all three fixed), so the dry run stops
    naming the 80.0 GB peak. The generation prefill, 16 + 0.1 x 16 = 17.6 GB, is not the larger."""
    for memory_gb in (80, 80.01):
        d = cost.decide(None, synthetic, gpu_memory_gb=memory_gb, gpus=2, micro_batch=8, offload=False)
        assert (d.gpus, d.micro_batch, d.gpu_peak_gb) == (2, 8, 80.0)
    with pytest.raises(ValueError, match=r"predicted GPU peak 80\.0 GB per GPU .*exceeds the GPU's 79\.99 GB"):
        cost.decide(None, synthetic, gpu_memory_gb=79.99, gpus=2, micro_batch=8, offload=False)
    # left free, the 79.99 GB GPU takes the next micro-batch down: 58 + 8 + 2 + 1.5 x 4 = 74 GB
    d = cost.decide(None, synthetic, gpu_memory_gb=79.99)
    assert (d.gpus, d.micro_batch, d.gpu_peak_gb) == (2, 4, 74.0)


def test_the_planners_layout_is_adaptation_layouts_without_its_warnings_which_the_job_prints(caplog):
    from ttrl_bench.adaptation.layout import plan_batch_layout

    hp = {"num_generations": 2, "prompts_per_step": 4, "micro_batch_size": 2}  # 1 sample < 4 prompts per step
    logger = logging.getLogger("ttrl_bench.adaptation.layout")
    with caplog.at_level(logging.INFO, logger="ttrl_bench.adaptation.layout"):  # a level of its own, as a user may set
        planned = cost.quiet_layout(hp, 1, 1)
        assert caplog.records == [] and logger.level == logging.INFO  # that logger silenced, then as it was
        assert plan_batch_layout(hp, 1, 1) == planned  # the job itself warns once
    assert [r.getMessage() for r in caplog.records] == ["1 adaptation samples < prompts_per_step 4: 1 prompt(s) per step"]
