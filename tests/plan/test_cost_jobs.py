"""plan/cost.py, the functions around the decision (test_cost.py has the decision and calibration): a job's
compute minutes, JobSettings.shape and point_shape, calibration_points, gpu_peak_gb's parts,
authors_throughput_flops, job_settings and job_decision, each pinned by hand-worked values.

job_settings / job_decision run on a stand-in plan (`_plan`): a real Plan resolves every method's hyperparameters
with `rollout_backend` already set (plan/names.py resolved_methods) and its schema fills resources.gpu_memory_gb,
so the layers below them are reachable only with a plan that leaves a key out. Traces are stubbed where a
function's arithmetic is under test (memory.Trace values chosen by hand); no network, no GPU, no tracing."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from ttrl_bench.plan import Job, cost, memory
from ttrl_bench.plan.memory import StepShape, Trace

from tests.support.plan import demo_plan


def test_compute_minutes_of_a_training_job_without_reference_and_of_a_vote_only_job(monkeypatch):
    """runtime_minutes with the traces and the authors' throughput stood in for: 1e10 FLOP/s per GPU, x the fitted
    FLOP_RATE_FACTOR 3.09 = 3.09e10, a model of 1e9 parameters (8.5e8 trainable), a traced training step of 5e11 FLOPs
    per sequence (1e12 at micro-batch 2), a traced prefill of 1e11 per sequence.
    Training, no KL reference (kl_beta 0): 2 prompts x (4 trained x 5e11 + 8 rollouts x 5e11 / 3 x 1 old-policy
    forward + 8 x 10 new tokens x 2 x 1e9) = 2 x 3.49333e12 = 6.98667e12 a round, x 3 rounds = 2.096e13 FLOPs; on 2 GPUs
    2.096e13 / (3.09e10 x 2) / 60 = 339.1586 s / 60 = 5.65264 min. (With a reference: two forwards, 2.896e13.)
    Traffic: 2 prompts x 4 trained / 2 GPUs / micro-batch 2 = 2 micro-batches a GPU a round, x 3 rounds = 6, each
    8.5e8 trainable x 12 B / 10.2 GB/s = 1.0 s: 0.1 min. Total 5.75264 min.
    Vote-only (updates: False): 1 prompt x 8 rollouts x (8e11 / 8 + 10 x 2 x 1e9) = 9.6e11 a round, x 5 rounds =
    4.8e12 FLOPs; 4.8e12 / 3.09e10 / 60 = 155.3398 s / 60 = 2.58900 min on 1 GPU; no step, no traffic."""
    from ttrl_bench.plan import cost, memory
    from ttrl_bench.plan.memory import Trace

    per_sequence = {"train": 5e11, "prefill": 1e11}
    monkeypatch.setattr(memory, "cached_trace",
                        lambda config, shape: Trace(0.0, int(1e9), int(8.5e8), per_sequence[shape.kind] * shape.sequences,
                                                    0.0, {}))
    monkeypatch.setattr(cost, "authors_throughput_flops", lambda: 1e10)
    training = cost.JobSettings(rollouts=8, trained=4, prompts_per_step=2, new_tokens=10, rounds=3, reference=False)
    time = cost.runtime_minutes(None, training, 2, 2)
    # rel 1e-12: the same divisions in another order
    assert time == pytest.approx({"flops": 2.096e13, "flops_per_gpu_second": 3.09e10, "flop_min": 2.096e13 / 6.18e10 / 60,
                                  "traffic_min": 0.1, "compute_min": 2.096e13 / 6.18e10 / 60 + 0.1}, rel=1e-12)
    assert round(time["compute_min"], 5) == 5.75264
    with_reference = cost.runtime_minutes(None, cost.JobSettings(8, 4, 2, 10, 3), 2, 2)
    assert with_reference["flops"] == pytest.approx(2.896e13, rel=1e-12)
    vote_only = cost.JobSettings(rollouts=8, trained=8, prompts_per_step=1, new_tokens=10, rounds=5, trains=False,
                                 reference=False)
    assert cost.runtime_minutes(None, vote_only, 1, 1) == pytest.approx(
        {"flops": 4.8e12, "flops_per_gpu_second": 3.09e10, "flop_min": 4.8e12 / 3.09e10 / 60, "traffic_min": 0.0,
         "compute_min": 4.8e12 / 3.09e10 / 60}, rel=1e-12)
    assert round(cost.runtime_minutes(None, vote_only, 1, 1)["compute_min"], 5) == 2.58900


def test_a_decision_records_the_parameters_and_trainable_counts_of_the_trace_it_rests_on(monkeypatch):
    """Decision.predicted ("the parts behind the numbers") names the traced model's parameter counts: a training job
    the training trace's (8e9 parameters, 7e9 trainable, as in tests/plan/test_cost.py's synthetic traces), a vote-only
    job the prefill trace's (the whole model, nothing trainable: 0), on the one GPU a vote-only job takes."""
    from ttrl_bench.plan import cost, memory
    from ttrl_bench.plan.memory import Trace

    def trace(config, shape):
        if shape.kind == "train":
            return Trace(116 + 2 + 1.5 * shape.sequences, int(8e9), int(7e9), 1e12 * shape.sequences, 0.0, {})
        return Trace(16 + 0.1 * shape.sequences, int(8e9), 0, 1e11 * shape.sequences, 0.0, {})

    monkeypatch.setattr(memory, "cached_trace", trace)
    monkeypatch.setattr(cost, "calibration", lambda: cost.Calibration(1.0, []))
    monkeypatch.setattr(cost, "authors_throughput_flops", lambda: 1e10)
    d = cost.decide(None, cost.JobSettings(rollouts=32, trained=16, prompts_per_step=1, new_tokens=32, rounds=10))
    assert (d.predicted["parameters"], d.predicted["trainable"]) == (8_000_000_000, 7_000_000_000)
    vote_only = cost.JobSettings(rollouts=8, trained=8, prompts_per_step=1, new_tokens=10, rounds=5, trains=False,
                                 reference=False)
    d = cost.decide(None, vote_only)
    # one GPU and one sequence at a time: nothing shards or batches a vote-only job
    assert (d.gpus, d.micro_batch, d.predicted["parameters"], d.predicted["trainable"]) == (1, 1, 8_000_000_000, 0)


def test_a_training_steps_peak_defaults_to_no_offload_on_an_80_gb_gpu(monkeypatch):
    """gpu_peak_gb's defaults (offload False, 80 GB: the schema's GPU memory), with tests/plan/test_cost.py's synthetic
    trace (8e9 parameters, 7e9 trainable, peak 118 + 1.5 GB per sequence) and calibration 1: fp32 state
    8e9 x 4 + 7e9 x 12 bytes = 116 GB; at micro-batch 8 on 2 GPUs: held 116 / 2 = 58 + activations 118 + 12 - 116
    = 14, + the bf16 reference 2 x 8e9 / 2 = 8 GB, + vLLM's 0.3 x 80 = 24 GB: 104 GB per GPU. A vote-only job has
    only its generation's peak, every other part 0."""
    from ttrl_bench.plan import cost, memory
    from ttrl_bench.plan.memory import Trace

    monkeypatch.setattr(memory, "cached_trace", lambda config, shape: Trace(
        118 + 1.5 * shape.sequences, int(8e9), int(7e9), 1e12 * shape.sequences, 0.0, {}))
    monkeypatch.setattr(cost, "calibration", lambda: cost.Calibration(1.0, [], prefill=1.0))
    settings = cost.JobSettings(rollouts=32, trained=16, prompts_per_step=1, new_tokens=32, rounds=10, vllm_share=0.3)
    peaks = cost.gpu_peak_gb(None, settings, 8, 2)
    assert (peaks["state_gb"], peaks["activations_gb"], peaks["reference_gb"], peaks["vllm_gb"]) == pytest.approx(
        (116.0, 14.0, 8.0, 24.0), rel=1e-12)
    assert peaks["train_gb"] == pytest.approx(104.0, rel=1e-12) and peaks["generation_gb"] == 0.0
    # bf16 weights (fp32_master False): 2 bytes each, state 8e9 x 2 + 7e9 x 6 = 58 GB
    bf16 = cost.gpu_peak_gb(None, cost.JobSettings(32, 16, 1, 32, 10, fp32_master=False), 8, 2)
    assert bf16["state_gb"] == pytest.approx(58.0, rel=1e-12)
    # no KL reference, no vLLM: 0 GB of reference; HF generate's prefill of this process's ceil(32 / 2) = 16
    # rollouts, traced on the job's model config: 118 + 1.5 x 16 = 142 GB (prefill factor 1)
    monkeypatch.setattr(memory, "cached_trace", lambda config, shape: Trace(
        118 + 1.5 * shape.sequences + (0 if config == "the model" else 1000), int(8e9), int(7e9), 0.0, 0.0, {}))
    plain = cost.gpu_peak_gb("the model", cost.JobSettings(32, 16, 1, 32, 10, reference=False), 8, 2)
    assert (plain["reference_gb"], plain["generation_gb"]) == (0.0, 142.0)
    # vote-only: no training step; each process generates all 8 rollouts with the whole model: 118 + 1.5 x 8 = 130 GB
    vote_only = cost.JobSettings(rollouts=8, trained=8, prompts_per_step=1, new_tokens=10, rounds=5, trains=False)
    assert cost.gpu_peak_gb("the model", vote_only, 1, 1) == {
        "train_gb": 0.0, "generation_gb": 130.0, "state_gb": 0.0, "activations_gb": 0.0, "reference_gb": 0.0,
        "vllm_gb": 0.0, "factor": 1.0, "prefill_factor": 1.0}


def test_the_jobs_of_a_small_grid_name_every_field_of_each_run():
    """The demo config cut to zero-shot, ttrv and vr-ttrl on demo-digits, seed 3. vr-ttrl adapts on boxes, not
    on letters: not on this dataset. One adaptation (ttrv on the 20 random samples, n20_random) and two
    evaluations in Run order (method "ttrv" before "zero-shot"): zero-shot's train "none", its protocol the same
    n20_random (the adaptation samples are excluded from its items too)."""
    plan = demo_plan("methods: [zero-shot, ttrv, vr-ttrl]\ndatasets: [demo-digits]\nseeds: [3]\n")
    assert plan.jobs() == [
        Job("adapt", "demo", "ttrv", "demo-digits", None, "n20_random", 3),
        Job("evaluate", "demo", "ttrv", "demo-digits", "demo-digits", "n20_random", 3),
        Job("evaluate", "demo", "zero-shot", "none", "demo-digits", "n20_random", 3),
    ]
    assert (plan.fits("zero-shot", "demo-digits"), plan.fits("ttrv", "demo-digits"), plan.fits("vr-ttrl", "demo-digits")) \
        == (False, True, False)


PEAK_KEYS = ["activations_gb", "factor", "generation_gb", "prefill_factor", "reference_gb", "state_gb", "train_gb",
             "vllm_gb"]

def _job(rule: str = "adapt", protocol: str = "n20_random") -> Job:
    return Job(rule, "m", "ttrv", "reasonseg", None, protocol, 0)

def _plan(tmp_path, hyperparameters: dict, *, backend: str = "auto", utilization: float = 0.45,
          samples="all", resources=None, model: dict | None = None):
    """A stand-in for plan/grid.py's Plan with what job_settings / job_decision read: the config's adaptation
    (rollout_backend, vllm.gpu_memory_utilization), evaluation.grounding.samples, models.m and, where given,
    resources; reasonseg in the grounding section; results under tmp_path; every method's hyperparameters as given
    (no rollout_backend unless given)."""
    config = {"adaptation": {"rollout_backend": backend, "vllm": {"gpu_memory_utilization": utilization}},
              "evaluation": {"grounding": {"samples": samples}},
              "models": {"m": model or {"source": SOURCE}}}
    if resources is not None:
        config["resources"] = resources
    return SimpleNamespace(config=config, section={"reasonseg": "grounding"}, results=str(tmp_path / "results"),
                           method_spec=lambda method, protocol: {"hyperparameters": dict(hyperparameters)})

SOURCE = "OpenGVLab/InternVL3-2B-hf"  # in plan/data/model_configs.json: model_type "internvl"

# --- JobSettings.shape, point_shape, calibration_points ----------------------------------------------------------

def test_a_jobs_shape_carries_its_fp32_master_checkpointing_and_lora_targets():
    """Every JobSettings field a StepShape has reaches it. Set against StepShape's defaults (fp32_master True,
    gradient_checkpointing True, lora_targets "all-linear", memory.py StepShape) so a field not passed shows:
    fp32_master False, gradient_checkpointing False, lora_targets "q_proj,v_proj"; freeze_vision False trains the
    tower (trainable_vision True, no separate adapter); autocast stays StepShape's True."""
    settings = cost.JobSettings(rollouts=4, trained=4, prompts_per_step=1, new_tokens=13, rounds=1, prompt_tokens=7,
                                image_tokens=11, freeze_vision=False, gradient_checkpointing=False, fp32_master=False,
                                lora_rank=8, lora_targets="q_proj,v_proj")
    shape = settings.shape(3, "prefill")
    assert (shape.fp32_master, shape.gradient_checkpointing, shape.lora_targets) == (False, False, "q_proj,v_proj")
    assert shape == StepShape(sequences=3, prompt_tokens=7, image_tokens=11, new_tokens=13, fp32_master=False,
                              trainable_vision=True, gradient_checkpointing=False, kind="prefill", autocast=True,
                              trainable_adapter=False, lora_rank=8, lora_targets="q_proj,v_proj")


def test_a_calibration_rows_gradient_checkpointing_reaches_its_shape():
    """point_shape reads every column of a calibration.csv row (header: data/calibration.csv:1). A row with
    gradient_checkpointing "false" (StepShape's default is True) and "False"/"TRUE" spelt as _bool reads them
    (strip, lower, == "true"): fp32_master False, trainable_vision True, autocast False."""
    row = {"sequences": "6", "prompt_tokens": "48", "image_tokens": "256", "new_tokens": "32", "fp32_master": "False",
           "trainable_vision": " TRUE", "gradient_checkpointing": "false", "kind": "train", "autocast": "false"}
    shape = cost.point_shape(row)
    assert shape.gradient_checkpointing is False
    assert shape == StepShape(sequences=6, prompt_tokens=48, image_tokens=256, new_tokens=32, fp32_master=False,
                              trainable_vision=True, gradient_checkpointing=False, kind="train", autocast=False)
    assert cost.point_shape({**row, "gradient_checkpointing": "true"}).gradient_checkpointing is True


def test_calibration_points_keep_a_quoted_fields_line_break_as_written(tmp_path, monkeypatch):
    """The csv module's rule (its docs: open the file with newline=""): a quoted field's line break is the field's,
    kept as written. A calibration file written with CRLF rows whose `source` holds "first line\\r\\nsecond line"
    reads back that text exactly; opened without newline="" Python's universal newlines would turn the \\r\\n into
    \\n before the csv reader sees it."""
    path = tmp_path / "calibration.csv"
    path.write_bytes(b'point,source\r\np1,"first line\r\nsecond line"\r\np2,plain\r\n')
    monkeypatch.setattr(cost, "CALIBRATION", path)
    assert cost.calibration_points() == [{"point": "p1", "source": "first line\r\nsecond line"},
                                         {"point": "p2", "source": "plain"}]


# --- gpu_peak_gb, authors_throughput_flops ------------------------------------------------------------------------

def test_gpu_peak_gb_names_the_same_parts_whether_the_job_trains_or_only_votes(monkeypatch):
    """Stubbed traces: training 100 GB with 1e9 parameters, 5e8 trainable; prefill 20 GB + 1 GB per sequence;
    calibration factor 0.5, prefill factor 1 (cost.Calibration's default, PREFILL_FACTOR).
    Training, 2 GPUs, no offload, fp32 master (4 bytes), KL reference: state (4 x 1e9 + 3 x 4 x 5e8) / 1e9 = 10 GB;
    activations 100 - 10 = 90; held 10 / 2 = 5; reference 2 x 1e9 / 1e9 / 2 = 1; no engine;
    train 0.5 x (5 + 90) + 1 = 48.5. Generation: 8 rollouts / 2 processes = 4 sequences: 1 x (20 + 4) = 24.
    Vote-only: generation of all 8 rollouts on one process: 1 x (20 + 8) = 28, the rest 0; factor 0.5 and prefill
    factor 1 reported under the same eight names."""
    def fake_trace(config, shape):
        if shape.kind == "train":
            return Trace(100.0, int(1e9), int(5e8), 0.0, 0.0, {})
        return Trace(20.0 + shape.sequences, int(1e9), 0, 0.0, 0.0, {})

    monkeypatch.setattr(memory, "cached_trace", fake_trace)
    monkeypatch.setattr(cost, "calibration", lambda: cost.Calibration(0.5, []))
    settings = cost.JobSettings(rollouts=8, trained=8, prompts_per_step=1, new_tokens=16, rounds=1, freeze_vision=False)
    peaks = cost.gpu_peak_gb(None, settings, micro_batch=4, gpus=2)
    assert sorted(peaks) == PEAK_KEYS
    assert peaks == pytest.approx({"train_gb": 48.5, "generation_gb": 24.0, "state_gb": 10.0, "activations_gb": 90.0,
                                   "reference_gb": 1.0, "vllm_gb": 0.0, "factor": 0.5, "prefill_factor": 1.0})
    vote = cost.gpu_peak_gb(None, cost.replace(settings, trains=False, reference=False), micro_batch=1, gpus=1)
    assert sorted(vote) == PEAK_KEYS
    assert vote == {"train_gb": 0.0, "generation_gb": 28.0, "state_gb": 0.0, "activations_gb": 0.0,
                    "reference_gb": 0.0, "vllm_gb": 0.0, "factor": 0.5, "prefill_factor": 1.0}


def test_the_authors_throughput_rests_on_the_first_calibration_point(tmp_path, monkeypatch):
    """authors_throughput_flops: FLOPs per token of the first calibration row's trace x the authors' 64 sequences x
    1,495.4 tokens / (9.4 s x 4 GPUs) (AUTHORS_UPDATE). A two-row file whose rows differ (stubbed FLOPs): first
    2 sequences x (10 + 20 + 10) tokens = 80 tokens, 2e12 FLOPs: 2.5e10 per token; second 4 x (10 + 80 + 10) = 400,
    4e12: 1e10. Throughput 2.5e10 x 64 x 1,495.4 / 37.6 = 6.3634e13 FLOP/s per GPU (the second row's: 2.5454e13).
    (The shipped rows 0 and 1, probe-bf16 and probe-fp32, share shape and traced FLOPs 8.5637e14, so there either
    row gives the same number.)"""
    header = ("point,model,sequences,prompt_tokens,image_tokens,new_tokens,fp32_master,trainable_vision,"
              "gradient_checkpointing,kind,autocast\n")
    path = tmp_path / "calibration.csv"
    path.write_text(header + f"first,{SOURCE},2,10,20,10,false,true,true,train,true\n"
                    f"second,{SOURCE},4,10,80,10,true,true,true,train,true\n")
    monkeypatch.setattr(cost, "CALIBRATION", path)
    flops = {2: 2e12, 4: 4e12}
    monkeypatch.setattr(memory, "cached_trace", lambda config, shape: Trace(1.0, 1, 1, flops[shape.sequences], 0.0, {}))
    expected = 2e12 / (2 * (10 + 20 + 10)) * 64 * (1490 + 5.4) / (9.4 * 4)
    assert expected == pytest.approx(6.3634e13, rel=1e-4)
    assert cost.authors_throughput_flops() == pytest.approx(expected, rel=1e-12)


# --- job_settings ------------------------------------------------------------------------------------------------

def test_an_all_protocol_counts_the_prepared_split_of_the_jobs_dataset(tmp_path):
    """Protocol nall_random (grid.py adaptation_samples: None), reasonseg prepared with 37 test samples
    (<results>/data/reasonseg/prep_stats.json, samples.py split_size; reasonseg's manifest split "test",
    datasets/registry.py). 2 prompts per step, 3 epochs: 3 x ceil(37 / 2) = 3 x 19 = 57 rounds."""
    stats = tmp_path / "results" / "data" / "reasonseg" / "prep_stats.json"
    stats.parent.mkdir(parents=True)
    stats.write_text(json.dumps({"splits": {"test": 37}}))
    plan = _plan(tmp_path, {"num_generations": 4, "prompts_per_step": 2, "epochs": 3})
    assert cost.job_settings(plan, _job(protocol="nall_random")).rounds == 3 * math.ceil(37 / 2) == 57


def test_an_unprepared_all_protocol_has_no_rounds(tmp_path):
    """Protocol nall_random on reasonseg, not prepared and not bundled (readers/bundled.py BUNDLED_TEST_SIZES has
    only the demo sets): its size is unknown, counted as 0 samples: 1 epoch x ceil(0 / 1) = 0 rounds (not 1)."""
    plan = _plan(tmp_path, {"num_generations": 4})
    assert cost.job_settings(plan, _job(protocol="nall_random")).rounds == 0


def test_only_a_per_sample_job_counts_the_evaluated_samples(tmp_path):
    """evaluation.grounding.samples 200, protocol n20_random, 4 prompts per step, 2 epochs. A batched adaptation
    (rule adapt) adapts on the protocol's 20: 2 x ceil(20 / 4) = 10 rounds. A per-sample one (adapt_per_sample) on
    each of the 200 evaluated: 200 x 2 = 400 rounds. With samples "all" (not an int) the per-sample job keeps the
    protocol's 20: 20 x 2 = 40."""
    hp = {"num_generations": 4, "prompts_per_step": 4, "epochs": 2}
    plan = _plan(tmp_path, hp, samples=200)
    assert cost.job_settings(plan, _job("adapt")).rounds == 10
    assert cost.job_settings(plan, _job("adapt_per_sample")).rounds == 400
    assert cost.job_settings(_plan(tmp_path, hp, samples="all"), _job("adapt_per_sample")).rounds == 40


@pytest.mark.parametrize("hyperparameter, adaptation, share", [
    (None, "vllm", 0.45),  # the method leaves it out: the adaptation config's vllm
    (None, "auto", 0.0),  # auto rolls out through HF generate (adaptation/config.py AUTO_ROLLOUTS): no engine
    (None, "hf", 0.0),  # HF generate: no engine
    ("vllm", "hf", 0.45),  # the method's hyperparameter over the adaptation config
    ("auto", "hf", 0.0),
    ("vllm", "auto", 0.45),
    ("hf", "vllm", 0.0),
    ("hf", "auto", 0.0),
])
def test_the_rollout_backend_is_the_methods_over_the_adaptation_configs(tmp_path, hyperparameter, adaptation, share):
    """vllm_share is adaptation.vllm.gpu_memory_utilization (0.45 here, not the schema's 0.3) when the job runs vLLM
    rollouts ("vllm"; "auto" runs HF generate), else 0.0; the backend is the method's `rollout_backend` hyperparameter where it has one, else
    adaptation.rollout_backend."""
    hp = {"num_generations": 4} | ({"rollout_backend": hyperparameter} if hyperparameter else {})
    assert cost.job_settings(_plan(tmp_path, hp, backend=adaptation), _job()).vllm_share == share


def test_a_vote_only_job_reserves_no_engine_share(tmp_path):
    """updates False (vote-only, adaptation/single_sample.py): HF generate, no engine, whatever the backend."""
    plan = _plan(tmp_path, {"num_generations": 4, "updates": False, "rollout_backend": "vllm"}, backend="vllm")
    assert cost.job_settings(plan, _job()).vllm_share == 0.0


@pytest.mark.parametrize("lora, rank, targets, reference", [
    (None, 0, "all-linear", True),  # no adapter: JobSettings' defaults, the KL reference of kl_beta 0.04
    ({"rank": 8, "alpha": 16, "datasets": ["geoqa"]}, 0, "all-linear", True),  # an adapter for another dataset
    ({"rank": 8, "alpha": 16, "datasets": ["reasonseg"]}, 8, "all-linear", False),  # target_modules left out
    ({"rank": 4, "alpha": 8, "datasets": ["reasonseg"], "target_modules": "q_proj"}, 4, "q_proj", False),
    ({"rank": 4, "alpha": 8, "datasets": ["reasonseg"], "target_modules": ["q_proj", "v_proj"]}, 4, "q_proj,v_proj",
     False),
])
def test_a_lora_adapters_rank_and_targets_reach_the_settings(tmp_path, lora, rank, targets, reference):
    """Hyperparameter `lora` (adaptation/hyperparameters.py lora_for_dataset) for the job's dataset: its rank, its
    target_modules ("all-linear" when left out, peft's default in adaptation/config.py lora_config; a list joined
    by commas, StepShape.lora_targets' form) and no second reference model (TRL: the peft model with the adapter
    off). Not for this dataset: full fine-tuning, the reference of kl_beta."""
    hp = {"num_generations": 4, "kl_beta": 0.04} | ({"lora": lora} if lora else {})
    settings = cost.job_settings(_plan(tmp_path, hp), _job())
    assert (settings.lora_rank, settings.lora_targets, settings.reference) == (rank, targets, reference)


# --- job_decision ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("resources, argument, gpu_memory_gb", [
    ({"gpu_memory_gb": 40}, None, 40),  # the config's resources.gpu_memory_gb
    ({}, None, 80),  # resources without the key: 80
    (None, None, 80),  # no resources section: 80
    ({"gpu_memory_gb": 40}, 24, 24),  # the argument (plan_table's / fewer_gpus') over the config
])
def test_a_jobs_decision_is_for_the_argument_or_the_configs_gpu_memory_else_80(tmp_path, monkeypatch, resources,
                                                                                argument, gpu_memory_gb):
    """job_decision hands decide the GPU memory: its argument, else the config's resources.gpu_memory_gb, else 80
    (an H100's, the schema's default); decide is stood in for, recording what it is given."""
    seen = []
    monkeypatch.setattr(cost, "decide", lambda config, settings, memory_gb, **kw: seen.append(memory_gb) or "decided")
    plan = _plan(tmp_path, {"num_generations": 4}, resources=resources)
    assert cost.job_decision(plan, _job(), argument) == "decided"
    assert seen == [gpu_memory_gb]
