"""The GPU card (plan/cards.py) and the evaluation's cost from its work (plan/evaluation_cost.py), worked by hand,
and a plan at the TTRV authors' card covering their logged run (issue 51)."""

from __future__ import annotations

import math

import pytest
import yaml

from ttrl_bench.plan import Job, Plan, job_request, validated
from ttrl_bench.plan.cards import AUTHORS_CARD, CARDS, card, config_card, gpu_memory_gb, slurm_gpu_model, speed
from ttrl_bench.plan.cost import STARTUP_MIN, STARTUP_SLOWEST_MIN, job_decision
from types import SimpleNamespace

from ttrl_bench.models.families import image_tokens
from ttrl_bench.plan.evaluation_cost import authors_log_minutes, evaluation_estimate, limit_minutes

TWO_B = "OpenGVLab/InternVL3-2B-hf"  # 1,855,986,176 parameters (its config on the meta device)


def test_each_card_has_its_memory_and_its_dense_bf16_throughput_relative_to_the_h100():
    """Datasheet figures (plan/cards.py names each): H100 / H200 989 TFLOPS dense bf16, A100 312, RTX A6000 154.8,
    L40S 362; memory 80, 141, 80, 40, 48, 48 GB. The authors' card is the A6000 (47.4-47.5 GB in 68 of their 71
    logs); an unknown key is refused naming the config key; the config's memory override wins over the card's."""
    assert {k: (c.memory_gb, round(c.relative * 989, 1)) for k, c in CARDS.items()} == {
        "h100": (80, 989.0), "h200": (141, 989.0), "a100_80": (80, 312.0), "a100_40": (40, 312.0),
        "a6000": (48, 154.8), "l40s": (48, 362.0)}
    assert all(c.source for c in CARDS.values()) and AUTHORS_CARD == "a6000"
    assert card(None) is CARDS["h100"] and config_card({}) is CARDS["h100"]
    with pytest.raises(ValueError, match="resources.gpu_model.*'v100'"):
        card("v100")
    assert gpu_memory_gb({"resources": {"gpu_model": "a6000"}}) == 48
    assert gpu_memory_gb({"resources": {"gpu_model": "a6000", "gpu_memory_gb": 44}}) == 44
    assert (slurm_gpu_model({}), slurm_gpu_model({"resources": {"gpu_model": "l40s"}})) == ("", "l40s")
    # H100 over A6000: 989 / 154.8 = 6.389; the slowest case never counts on a faster card, a slower one in full
    assert speed(CARDS["h100"], "a6000") == pytest.approx(989 / 154.8)
    assert speed(CARDS["h100"], "a6000", slowest=True) == 1.0
    assert speed(CARDS["a6000"], "h100", slowest=True) == pytest.approx(154.8 / 989)
    # the link (cost.py's weights' traffic): NVLink 900 GB/s on the SXM H100 / H200, PCIe 4.0 x16 64 elsewhere (the A100s
    # taken as PCIe cards); H100 over A6000 900 / 64 = 14.06, never counted on in the slowest case
    assert {k: c.link_gb_s for k, c in CARDS.items()} == {
        "h100": 900, "h200": 900, "a100_80": 64, "a100_40": 64, "a6000": 64, "l40s": 64}
    assert (speed(CARDS["h100"], "a6000", link=True), speed(CARDS["h100"], "a6000", True, link=True)) == (900 / 64, 1.0)


def test_an_evaluation_estimate_worked_by_hand_on_an_a6000():
    """MathVista's 490 items (the authors' list), InternVL (1.86 B parameters: the probe's size), MCQ under the
    authors' 1,024 new tokens, HF generate, on an RTX A6000. Throughput: the probe's 21 items/s x (1,280 + 60 + 6)
    = 28,266 tokens/s on an H100, x 154.8 / 989 = 4,424.3 tokens/s. Expected: 5 tiles x 256 = 1,280 image tokens +
    100 text + a 6-token letter = 1,386 per item: 679,140 tokens / 4,424.3 = 153.50 s = 2.558 min. Slowest: 12 tiles
    + a thumbnail + <img> </img> = 3,330 image tokens + 100 + 1,024 = 4,454: 2,182,460 tokens = 493.30 s = 8.222 min;
    the limit 2 x (8.222 + 2.15 start-up) = 20.74 -> 21 minutes."""
    internvl = SimpleNamespace(model_type="internvl", vision_config=None)
    assert image_tokens(internvl, "authors") == image_tokens(internvl, "clean") == (1280, 3330)
    est = evaluation_estimate(490, (1280, 3330), "mcq", 1024, "hf", 1.86, CARDS["a6000"])
    assert (est["items"], est["image_tokens"], est["answer_tokens"], est["backend"]) == (490, 1280, 6, "hf")
    assert est["expected_min"] == pytest.approx(153.50 / 60, abs=1e-4)
    assert est["slowest_min"] == pytest.approx(493.30 / 60, abs=1e-4)
    assert limit_minutes(est["slowest_min"] + STARTUP_MIN, 2.0) == 21
    # unknown items: no estimate, the limit sized for ImageNet's 50,000
    unknown = evaluation_estimate(None, (1280, 3330), "mcq", 1024, "hf", 1.86, CARDS["a6000"])
    assert unknown["expected_min"] is None and unknown["slowest_min"] == pytest.approx(50000 / 490 * 493.30 / 60, rel=1e-4)
    # Qwen2.5-VL (14 px patches merged 2 x 2: 28 px a token): a 840 px image is 30 x 30 = 900 tokens; at most
    # max_pixels 12,845,056 / 28^2 = 16,384 under `authors`, 3,072 under `clean` (models/families.py)
    qwen = SimpleNamespace(model_type="qwen2_5_vl", vision_config=SimpleNamespace(patch_size=14, spatial_merge_size=2))
    assert (image_tokens(qwen, "authors"), image_tokens(qwen, "clean")) == ((900, 16384), (900, 3072))


def test_a_test_sets_typical_image_is_counted_as_each_processor_counts_it():
    """plan/samples.py TYPICAL_IMAGE_SIZES through models/families.py image_tokens_of. Qwen2.5-VL rounds each side to
    28 px: ImageNet's 500x375 -> 504 x 364 = 18 x 13 = 234 tokens; RESISC45's 256x256 -> 252 x 252 = 81; AI2D's
    900x600 -> 896 x 588 = 32 x 21 = 672. InternVL
    takes the 448 px tile grid of at most 12 closest to the aspect ratio, + a thumbnail when more than one, 256 tokens
    a tile + <img> </img>: 4:3 -> 4 x 3 + 1 = 13 tiles = 3,330; AI2D's 900x600 (3:2) -> 3 x 2 + 1 = 7 -> 1,794;
    256x256 -> one tile, no thumbnail, 258 (the authors' RESISC45 prompts: 330 tokens with their text)."""
    from ttrl_bench.plan.samples import TYPICAL_IMAGE_SIZES

    qwen = SimpleNamespace(model_type="qwen2_5_vl", vision_config=SimpleNamespace(patch_size=14, spatial_merge_size=2))
    internvl = SimpleNamespace(model_type="internvl", vision_config=None)
    sizes = [TYPICAL_IMAGE_SIZES[name] for name in ("imagenet", "resisc45", "ai2d")]
    assert [image_tokens(qwen, "authors", size)[0] for size in sizes] == [234, 81, 672]
    assert [image_tokens(internvl, "clean", size) for size in sizes] == [(3330, 3330), (258, 3330), (1794, 3330)]
    assert image_tokens(internvl, "clean", None) == (1280, 3330)  # a set with no documented size: the benchmark image's


def test_a_peak_between_the_traced_image_tokens_is_read_off_their_line(monkeypatch):
    """memory.image_trace: a shape whose image tokens are not shipped is on the line through its traces at 256 and
    1,280 image tokens. Peaks 10 and 20 GB, FLOPs 1e12 and 3e12: at 3,330 tokens, (3,330 - 256) / 1,024 = 3.00195 of
    the way: 10 + 30.0195 = 40.0195 GB and 1e12 + 6.0039e12 FLOPs; at 768 tokens, half-way: 15 GB, 2e12."""
    from dataclasses import replace

    from ttrl_bench.plan import memory

    traced = {256: (10.0, 1e12), 1280: (20.0, 3e12)}
    asked = []

    def fake(config, shape):
        asked.append(shape.image_tokens)
        peak, flops = traced[shape.image_tokens]
        return memory.Trace(peak, 7, 5, flops, 0.0, {"ACT": peak})

    monkeypatch.setattr(memory, "cached_trace", fake)
    monkeypatch.setattr(memory, "trace_key", lambda config, shape: "not shipped")
    shape = memory.StepShape(sequences=2, prompt_tokens=64, image_tokens=3330, new_tokens=8)
    far = memory.image_trace(None, shape)
    assert (far.peak_gb, far.flops, far.breakdown_gb["ACT"]) == (pytest.approx(40.0195, abs=1e-4),  # 4 decimals worked
                                                                pytest.approx(7.0039e12, rel=1e-4), pytest.approx(40.0195, abs=1e-4))
    half = memory.image_trace(None, replace(shape, image_tokens=768))
    assert (half.peak_gb, half.flops, half.parameters, half.trainable) == (15.0, 2e12, 7, 5)  # exact in binary
    assert memory.image_trace(None, replace(shape, image_tokens=1280)).peak_gb == 20.0 and asked[-1] == 1280


A6000_2B = """\
datasets: [ai2d]
methods: [ttrv]
protocol: authors
resources: {gpu_model: a6000}
models:
  internvl3-2b: {source: OpenGVLab/InternVL3-2B-hf}
"""


def test_an_a6000_config_plans_internvl3_2b_ttrv_on_the_gpus_its_memory_needs(tmp_path, monkeypatch):
    """The authors' card, 48 GB. InternVL3-2B TTRV (authors: micro-batch 2, vision frozen, a bf16 reference; rollouts
    through HF generate, `auto`'s engine, 64 sequences a prefill: generation_batch_size), every image at InternVL's
    most, 13 tiles of 256 + 2 = 3,330 tokens (within the 4,096 - 64 prompt budget). Each peak on the line through its
    shipped traces at 256 and 1,280 image tokens, (3,330 - 256) / 1,024 = 3.00195 of the way:
    prefill of 64: 10.3609 + 3.00195 x (20.2860 - 10.3609) = 40.156 GB (factor 1); training: 31.9119 + 3.00195 x
    (32.6315 - 31.9119) = 34.072, of which 26.048 fp32 weights, gradients and AdamW state, 0.784 x 34.072 + 3.71
    (reference) = 30.42. Peak 40.2 <= 48: one GPU, no engine share. On an A100 40 GB the same job needs two: on one,
    40.16 > 40; on two, each prefills 32: 8.8926 + 3.00195 x (13.8550 - 8.8926) = 23.79 (training 0.784 x (26.05 /
    2 + 8.02) + 3.71 / 2 = 18.35)."""
    monkeypatch.chdir(tmp_path)
    plan = Plan(validated(yaml.safe_load(A6000_2B)))
    job = Job("adapt", "internvl3-2b", "ttrv", "ai2d", None, "n20_random_authors", 0)
    assert job in plan.jobs()
    d = job_decision(plan, job)
    assert (d.gpus, d.offload, d.gpu_peak_gb) == (1, False, 40.2) and d.predicted["vllm_gb"] == 0.0
    # 30.42 and 40.156 above, to the arithmetic's four-figure traces
    assert (d.predicted["train_gb"], d.predicted["generation_gb"]) == (pytest.approx(30.42, abs=0.01),
                                                                       pytest.approx(40.156, abs=0.001))
    small = Plan(validated(yaml.safe_load(A6000_2B.replace("a6000", "a100_40"))))
    d40 = job_decision(small, job)
    assert (d40.gpus, d40.gpu_peak_gb) == (2, 23.8)


def test_the_plans_limit_at_the_authors_card_covers_their_logged_run(tmp_path, monkeypatch):
    """The authors' log ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226 (author_runs.csv: 4 GPUs, 10 rounds,
    timing_s/step summing to 894.923 s of which the final validation, timing_s/testing, 616.798 s; start-up 110 s
    from its file name's 23:52:26 to its last timestamp before validation, results/author_timing.py): adaptation
    (894.923 - 616.798 + 110) / 60 = 6.47 min; evaluation 616.798 s = 10.28 min over 2,704 items.
    The plan on their card: the adaptation's limit is 2 x (compute + 6.25 slowest start-up), at least 2 x 6.25 =
    12.5 > 6.47 whatever the compute; the authors' host-bound evaluation, 2 x 2,704 / 2.39 items/s = 37.7 min >
    10.28. Our own evaluation job's limit on that card (HF generate, 1.856 B, 1,024 new tokens): 2 x (2,704 x 4,452
    / (28,266 x 1.86 / 1.856 x 0.1565) / 60 + 2.15) -> 95 minutes, also above."""
    monkeypatch.chdir(tmp_path)
    plan = Plan(validated(yaml.safe_load(A6000_2B)))
    adapt = Job("adapt", "internvl3-2b", "ttrv", "ai2d", None, "n20_random_authors", 0)
    measured_adaptation = (894.923 - 616.798 + 110) / 60
    request = job_request(plan, adapt)
    compute = job_decision(plan, adapt).predicted["adaptation_min"]
    assert request.runtime == math.ceil(2 * (compute + STARTUP_SLOWEST_MIN)) >= 2 * 6.25 > measured_adaptation
    evaluation_limit = 2 * authors_log_minutes(2704)["slowest_min"]
    assert evaluation_limit == pytest.approx(2 * 2704 / 2.39 / 60) and evaluation_limit > 616.798 / 60
    evaluate = Job("evaluate", "internvl3-2b", "ttrv", "ai2d", "ai2d", "n20_random_authors", 0)
    throughput = 21 * 1346 * 1.86 / 1.855986176 * 154.8 / 989
    assert job_request(plan, evaluate).runtime == math.ceil(2 * (2704 * 4452 / throughput / 60 + 129 / 60)) == 95


def test_experiments_enabled_all_switches_on_every_block(tmp_path, monkeypatch):
    """`experiments_enabled: all` (Snakemake validates the config through the same function): every block of
    config/ttrv.yaml runs, the nine `enabled: false` ones included; `as_set` (the default) leaves them off."""
    from ttrl_bench.plan import load_config

    monkeypatch.chdir(tmp_path)
    repo = __import__("pathlib").Path(__file__).resolve().parents[2]
    as_set = load_config(repo / "config/ttrv.yaml")
    off = sorted(name for name, block in as_set["experiments"].items() if not block["enabled"])
    assert len(off) == 9
    (tmp_path / "all.yaml").write_text("experiments_enabled: all\n")
    everything = load_config(repo / "config/ttrv.yaml", tmp_path / "all.yaml")
    assert all(block["enabled"] for block in everything["experiments"].values())
    assert set(Plan(everything).experiments) == set(as_set["experiments"])


def test_a_cells_config_keeps_the_card_and_the_memory_its_plan_was_fitted_to(tmp_path, monkeypatch, capsys):
    """`cell --gpu-model a6000 --gpu-memory-gb 40`: the plan it prints is fitted to 40 GB A6000s, so the cell's file
    (what Snakemake and SLURM then run) says both, and the run line names them."""
    from ttrl_bench.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    out = tmp_path / "cell.yaml"
    assert main(["cell", "ttrv-1", "InternVL3-2B", "ImageNet-A", "--gpu-model", "a6000", "--gpu-memory-gb", "40",
                 "--out", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["resources"] == {"gpu_model": "a6000", "gpu_memory_gb": 40}
    assert "the plan assumed RTX A6000 48GB GPUs with 40 GB each" in capsys.readouterr().out
