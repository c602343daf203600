"""plan/resources.py: the plan's table (rows and totals from each job's request or decision), the one-GPU
proposal and the largest request. Every expected value is worked out by hand in the test's docstring."""

from __future__ import annotations

from ttrl_bench.plan import Job


def test_plan_table_rows_and_totals_assembled_from_each_jobs_request_or_decision(monkeypatch):
    """plan_table's own arithmetic, with the cost model's answers stood in for (plan/cost.py and
    plan/evaluation_cost.py have their own tests): a plan of datasets a, b; model m converted from an original
    checkpoint, model demo built by the workflow; no card set: the H100 80 GB.
    Requests: conversion 16,500 MB, 60 min; an evaluation 24,500 MB, limit 50 min on 1 GPU; the built model's
    adaptation 1 GPU, 8,000 MB, 40 min. Decisions (for the --gpu-memory given, 40 GB): m on a (1 round: known)
    2 GPUs, offload, micro-batch 4, 70.5 GB, 300.2 GB host, limit 40, 0.5 GPU-hours (12.85 min of adaptation + the
    2.15 min start-up, on 2 GPUs) -> minutes round(0.5 x 60 / 2) = 15, parts adaptation 2 x 12.85 / 60 = 0.42833,
    start-up 2 x 2.15 / 60 = 0.07167; m on b (0 rounds: n_samples all, not known yet) minutes and GPU-hours None.
    Evaluations: a's expected 40.0 min -> minutes round(40 + 2.15) = 42, GPU-hours round(40 / 60 + 2.15 / 60, 2)
    = 0.70; the cross one's test set unknown (expected None): minutes and GPU-hours None, limit still 50.
    Rows: host_gb = MB / 1000 (16.5, 24.5, 8.0); a built model's GPU-hours None (not counted unknown: its request
    is fixed); conversion and preparation 0.0 on no GPU; "->b" only where the target is not the train set.
    Totals: 8 jobs; adapt 0.5, evaluate 0.70 -> 1.2 GPU-hours; parts adaptation 0.4, evaluation 0.7, start-up
    0.07167 + 0.03583 = 0.1075 -> 0.1; 2 jobs not costed (adapt b, the cross evaluation); the longest job counted is
    the evaluation's 42 min -> node hours round(max(1.2 / 8, 42 / 60), 1) = 0.7; the calibration factor 0.78381 at 3
    decimals, 0.784, the prefill 1.25. No job at all: the preparations only, node hours 0.0."""
    from types import SimpleNamespace

    from ttrl_bench.plan import Job, Request, resources
    from ttrl_bench.plan.cards import CARDS
    from ttrl_bench.plan.cost import Calibration, Decision

    adapt_a, adapt_b = Job("adapt", "m", "ttrv", "a", None, "p", 0), Job("adapt", "m", "ttrv", "b", None, "p", 0)
    cross, same = Job("evaluate", "m", "ttrv", "a", "b", "p", 0), Job("evaluate", "m", "ttrv", "a", "a", "p", 0)
    built = Job("adapt", "demo", "ttrv", "a", None, "p", 0)
    plan = SimpleNamespace(datasets=["a", "b"], models={"m": {"convert_from": "Org/M"}, "demo": {"build": "tiny"}},
                           jobs=lambda: [adapt_a, adapt_b, cross, same, built], config={})
    requests = {Job("convert_model", "m"): Request(0, 16500, 60), cross: Request(1, 24500, 50),
                same: Request(1, 24500, 50), built: Request(1, 8000, 40)}
    parts = {"adaptation_min": 12.85, "startup_min": 2.15}
    decisions = {adapt_a: Decision(2, True, 4, 70.5, 300.2, 331000, 40, 0.5, parts),
                 adapt_b: Decision(1, False, 8, 40.0, 100.0, 110000, 30, 9.99, parts)}
    memory_asked = []
    monkeypatch.setattr(resources, "job_request", lambda plan, job: requests[job])
    monkeypatch.setattr(resources, "job_decision", lambda plan, job, gb: memory_asked.append(gb) or decisions[job])
    monkeypatch.setattr(resources, "job_settings", lambda plan, job: SimpleNamespace(rounds={adapt_a: 1, adapt_b: 0}[job]))
    monkeypatch.setattr(resources, "evaluation_job_estimate",
                        lambda plan, job: {"expected_min": {cross: None, same: 40.0}[job]})
    monkeypatch.setattr(resources, "STARTUP_MIN", 2.15)
    monkeypatch.setattr(resources, "calibration", lambda: Calibration(0.78381, [], prefill=1.25))

    def row(rule, job, gpus=0, offload=False, micro_batch=None, peak=None, host=None, minutes=None, hours=0.0, **extra):
        return {"rule": rule, "job": job, "gpus": gpus, "offload": offload, "micro_batch": micro_batch,
                "gpu_peak_gb": peak, "host_gb": host, "minutes": minutes, "gpu_hours": hours, **extra}

    rows, totals = resources.plan_table(plan, 40)
    assert rows == [
        row("prepare_data", "prepare_data a"), row("prepare_data", "prepare_data b"),
        row("convert_model", "convert_model m", host=16.5, minutes=60),
        row("adapt", "adapt m/ttrv/a/p/seed0", 2, True, 4, 70.5, 300.2, 15, 0.5, limit=40, unknown=False,
            parts={"adaptation": 2 * 12.85 / 60, "startup": 2 * 2.15 / 60}),
        row("adapt", "adapt m/ttrv/b/p/seed0", 1, False, 8, 40.0, 100.0, None, None, limit=30, unknown=True, parts={}),
        row("evaluate", "evaluate m/ttrv/a->b/p/seed0", 1, host=24.5, minutes=None, hours=None, limit=50, parts={},
            unknown=True),
        row("evaluate", "evaluate m/ttrv/a/p/seed0", 1, host=24.5, minutes=42, hours=0.70, limit=50, unknown=False,
            parts={"evaluation": 40 / 60, "startup": 2.15 / 60}),
        row("adapt", "adapt demo/ttrv/a/p/seed0", 1, host=8.0, minutes=None, hours=None, limit=40, parts={},
            unknown=False)]
    assert memory_asked == [40, 40]
    assert totals == {"jobs": 8, "gpu_hours": 1.2, "gpu_hours_by_rule": {"adapt": 0.5, "evaluate": 0.7},
                      "gpu_hours_by_part": {"adaptation": 0.4, "evaluation": 0.7, "startup": 0.1}, "unknown": 2,
                      "card": CARDS["h100"], "margin": 2.0, "startup_min": 2.15,
                      "gpus_per_node": 8, "node_hours": 0.7, "factor": 0.784, "prefill_factor": 1.25}
    plan.jobs = lambda: []
    empty = resources.plan_table(plan)[1]
    assert (empty["jobs"], empty["gpu_hours"], empty["gpu_hours_by_rule"], empty["node_hours"]) == (2, 0.0, {}, 0.0)


def test_fewer_gpus_names_each_multi_gpu_model_with_its_one_gpu_cost_or_why_nothing_fits(monkeypatch):
    """fewer_gpus, with the decisions stood in for (for the --gpu-memory given, 40 GB). Models in sorted order:
    a-wide (4 GPUs; on one GPU nothing fits: the decision's error), b-two (two 2-GPU adaptations, 3.0 + 1.5 = 4.5
    GPU-hours; on one GPU 7.2 with offload + 2.5 without = 9.7: "1 of them with offload"), c-plain (4 GPUs, 2.0;
    one GPU without offload 6.0: no offload clause), d-one (already one GPU: not named) and demo (built by the
    workflow: never decided, its request is fixed)."""
    from types import SimpleNamespace

    from ttrl_bench.plan import Job, resources
    from ttrl_bench.plan.cost import Decision

    def adapt(model, dataset="x"):
        return Job("adapt", model, "ttrv", dataset, None, "p", 0)

    jobs = [adapt("d-one"), adapt("c-plain"), adapt("b-two", "x"), adapt("b-two", "y"), adapt("a-wide"), adapt("demo"),
            Job("evaluate", "b-two", "ttrv", "x", "x", "p", 0)]
    plan = SimpleNamespace(models={m: {"source": f"o/{m}"} for m in ("a-wide", "b-two", "c-plain", "d-one")}
                           | {"demo": {"build": "tiny"}}, jobs=lambda: jobs)

    def decision(gpus, hours, offload=False):
        return Decision(gpus, offload, 1, 50.0, 100.0, 110000, 60, hours)

    decided = {(adapt("d-one"), None): decision(1, 1.0), (adapt("c-plain"), None): decision(4, 2.0),
               (adapt("c-plain"), 1): decision(1, 6.0), (adapt("b-two", "x"), None): decision(2, 3.0),
               (adapt("b-two", "y"), None): decision(2, 1.5), (adapt("b-two", "x"), 1): decision(1, 7.2, True),
               (adapt("b-two", "y"), 1): decision(1, 2.5), (adapt("a-wide"), None): decision(4, 8.0)}

    def job_decision(plan, job, gpu_memory_gb, gpus=None):
        assert gpu_memory_gb == 40
        if job == adapt("a-wide") and gpus == 1:
            raise ValueError("adapt a-wide/ttrv/x: predicted GPU peak 90.0 GB per GPU exceeds the GPU's 40 GB")
        return decided[job, gpus]

    monkeypatch.setattr(resources, "job_decision", job_decision)
    assert resources.fewer_gpus(plan, 40) == [
        "models.a-wide.gpus: 1 does not fit: adapt a-wide/ttrv/x: predicted GPU peak 90.0 GB per GPU exceeds the "
        "GPU's 40 GB",
        "models.b-two.gpus: 1 runs its 2 multi-GPU adaptation(s) on one GPU each, 1 of them with offload: "
        "9.7 GPU-hours instead of 4.5",
        "models.c-plain.gpus: 1 runs its 1 multi-GPU adaptation(s) on one GPU each: 6.0 GPU-hours instead of 2.0"]


def test_a_converted_models_drop_path_is_its_original_checkpoints_and_the_micro_batch_the_decided_one(monkeypatch):
    """job_method_settings with vision_drop_path "checkpoint" (the authors' protocol, protocols.py): the rate of the
    checkpoint the authors trained, named by its Hub id (models/families.py:243 ORIGINAL_VISION_DROP_PATH: InternVL3-
    0.1). A model converted from OpenGVLab/InternVL3-2B is read from results/models/converted/<name> (the plan's
    `source` of a converted model), a path that names no family: its rate comes from `convert_from`, 0.1, not the
    path's 0.0. A Hub model's from its source; a Qwen's 0.0. The decided micro-batch (4) replaces the preset's."""
    from types import SimpleNamespace

    from ttrl_bench.plan import Job, Request, resources

    plan = SimpleNamespace(
        models={"ivl3-orig": {"convert_from": "OpenGVLab/InternVL3-2B", "source": "results/models/converted/ivl3-orig"},
                "ivl3-hf": {"source": "OpenGVLab/InternVL3-2B-hf"}, "qwen": {"source": "Qwen/Qwen2.5-VL-7B-Instruct"}},
        method_settings=lambda method, protocol: {
            "hyperparameters": {"vision_drop_path": "checkpoint", "micro_batch_size": 2}, "reward": "r"})
    monkeypatch.setattr(resources, "job_request", lambda plan, job: Request(2, 1000, 10, micro_batch=4))
    for model, rate in (("ivl3-orig", 0.1), ("ivl3-hf", 0.1), ("qwen", 0.0)):
        job = Job("adapt", model, "ttrv", "ai2d", None, "n20_random_authors", 0)
        assert resources.job_method_settings(plan, job) == {
            "hyperparameters": {"vision_drop_path": rate, "micro_batch_size": 4}, "reward": "r"}


def test_the_largest_gpu_request_is_the_widest_jobs_and_zero_without_jobs(monkeypatch):
    """largest_gpu_request: max over the jobs' requests (1, 4, 2 -> 4); a plan of no job asks for 0 GPUs (max's
    default), not 1 and not an error."""
    from types import SimpleNamespace

    from ttrl_bench.plan import Job, Request, resources

    jobs = [Job("evaluate", "m", "zero-shot", "none", "a", "p", 0), Job("adapt", "m", "ttrv", "a", None, "p", 0),
            Job("adapt", "m", "ttrv", "b", None, "p", 0)]
    gpus = dict(zip(jobs, (1, 4, 2)))
    monkeypatch.setattr(resources, "job_request", lambda plan, job: Request(gpus[job], 1000, 10))
    assert resources.largest_gpu_request(SimpleNamespace(jobs=lambda: jobs)) == 4
    assert resources.largest_gpu_request(SimpleNamespace(jobs=lambda: [])) == 0
