"""plan/checks.py: the dry run's checks, each at, just under and just over its limit (sources, SLURM
variables and caps, methods that fit their datasets, sample counts, every job's request and GRPO layout), and
`run_all`'s order. Expected values are worked by hand in each docstring or read from the config files named there."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ttrl_bench.plan import checks

from tests.support.plan import demo_plan


def _sources_plan(models: dict, sources: dict | None = None, datasets=("demo-digits",)):
    """What check_sources reads of a Plan: the runs' models, the models' entries, the datasets, data.sources."""
    return SimpleNamespace(runs=[SimpleNamespace(model=name) for name in models if name != "unused"], models=models,
                           datasets=list(datasets), config={"data": {"sources": sources or {}}})


def test_check_sources_probes_the_hub_only_for_models_neither_built_nor_local(tmp_path, monkeypatch):
    """Sorted by name: `built` (built by the workflow) and `local` (an existing directory) need nothing; `conv` is
    converted from the Hub id in `convert_from` (its `source`, the converted copy, does not exist yet), `hub` loads
    its Hub id: with the Hub unreachable the first of these two (conv) is named by its key. `unused` is in no run:
    never checked. A source neither a directory nor org/name is named by its key whatever the Hub."""
    models = {"built": {"build": "tiny-qwen2.5-vl", "source": "results/models/demo"},
              "conv": {"convert_from": "org/conv", "source": str(tmp_path / "converted")},
              "hub": {"source": "org/model"}, "local": {"source": str(tmp_path)}, "unused": {"source": "nowhere"}}
    monkeypatch.setattr(checks, "hub_usable", lambda: True)
    checks.check_sources(_sources_plan(models))
    monkeypatch.setattr(checks, "hub_usable", lambda: False)
    checks.check_sources(_sources_plan({k: models[k] for k in ("built", "local")}))  # no Hub model: no probe
    with pytest.raises(ValueError) as err:
        checks.check_sources(_sources_plan(models))
    assert str(err.value) == (
        "config key `models.conv.convert_from`: the Hugging Face Hub is unreachable, so org/conv cannot be downloaded; "
        "point the key at a local copy, or set HF_HUB_OFFLINE=1 to load models already in the Hugging Face cache")
    with pytest.raises(ValueError) as err:
        checks.check_sources(_sources_plan({**models, "bad": {"source": "no-org-name"}}))
    assert str(err.value) == ("model 'no-org-name': no such local directory, and not a Hub id (org/name); check the "
                              "config key models.bad.source")


def test_check_sources_names_a_missing_dataset_copy_or_class_list(tmp_path, monkeypatch):
    """data.sources.<d>.path and .class_names must exist where set (empty: unset); datasets outside the plan are not
    checked."""
    monkeypatch.setattr(checks, "hub_usable", lambda: False)
    local = {"local": {"source": str(tmp_path)}}
    (tmp_path / "classes.json").write_text("[]")
    present = {"demo-digits": {"path": str(tmp_path), "class_names": str(tmp_path / "classes.json")},
               "imagenet": {"path": "/no/such/copy"}}
    checks.check_sources(_sources_plan(local, present))
    checks.check_sources(_sources_plan(local, {"demo-digits": {"path": "", "class_names": None}}))
    for field, value in (("path", "/no/such/copy"), ("class_names", str(tmp_path / "none.json"))):
        with pytest.raises(ValueError) as err:
            checks.check_sources(_sources_plan(local, {"demo-digits": {**present["demo-digits"], field: value}}))
        assert str(err.value) == f"config key `data.sources.demo-digits.{field}`: {value} does not exist"

def test_the_slurm_checks_messages_name_the_variable_and_the_least_cap():
    """Each unset variable by name and what profiles/slurm submits with it; a cap of 4 GPUs passes a largest job of 4,
    a cap under it (2) stops and suggests N >= 4, the one-GPU cap of profiles/default with one-GPU jobs N >= 2 (never 1)."""
    slurm = {"TTRL_SLURM_PARTITION": "gpu", "TTRL_SLURM_ACCOUNT": ""}
    with pytest.raises(ValueError) as err:
        checks.check_slurm({"TTRL_SLURM_PARTITION": "gpu"}, None, 1)
    assert str(err.value) == (
        "environment variable TTRL_SLURM_ACCOUNT is unset: profiles/slurm submits the account jobs are charged to "
        "(empty, with --slurm-no-account, where there is none) as $TTRL_SLURM_ACCOUNT; export TTRL_SLURM_ACCOUNT=... "
        "before snakemake (docs/slurm.md, Running on SLURM)")
    checks.check_slurm(slurm, 4, 4)  # at the limit: the largest job keeps its 4 GPUs
    with pytest.raises(ValueError) as err:
        checks.check_slurm(slurm, 2, 4)
    assert str(err.value) == (
        "a global resource limit gpu=2 on SLURM would cap each job at 2 GPU(s) (this config's largest job asks for 4) "
        "and run 2 GPU(s) of jobs at a time. profiles/default's local limit is gpu=1, and Snakemake applies it when "
        "the SLURM profile is given with --profile: use `--workflow-profile profiles/slurm` (it replaces "
        "profiles/default); to cap a cluster run on purpose, `--resources gpu=N` with N >= 4")
    with pytest.raises(ValueError) as err:
        checks.check_slurm(slurm, 1, 1)
    assert str(err.value).endswith("`--resources gpu=N` with N >= 2")


# the tasks of the fake plans' datasets (datasets/registry.py) and their `fits` (grid.py Plan.fits: a method adapts
# on the datasets of its task)
TASKS = {"demo-digits": "mcq", "ai2d": "mcq", "crpe": "mcq", "demo-digit-scenes": "grounding"}


def _fits(method: str, dataset: str) -> bool:
    from ttrl_bench.adaptation.presets import method_task

    return method_task(method) == TASKS[dataset]


def test_a_method_that_fits_none_of_its_blocks_datasets_is_named_with_its_task():
    """VR-TTRL (grounding) among two MCQ sets of the main grid: named, the sets sorted; TTRV (mcq) in an experiment
    whose only adaptation set is a cross pair's training side (the scenes): named under the experiment's key. A
    method fitting one of two sets passes, zero-shot and a block without adaptation sets are never checked."""
    def plan(*blocks):
        return SimpleNamespace(blocks=list(blocks), fits=_fits)

    checks.check_methods_fit(plan(("", {"methods": ["zero-shot", "ttrv", "vr-ttrl"], "datasets": ["demo-digits",
                                                                                                   "demo-digit-scenes"]}),
                                  ("experiments.y", {"methods": ["vr-ttrl"]})))
    with pytest.raises(ValueError) as err:
        checks.check_methods_fit(plan(("", {"methods": ["zero-shot", "ttrv", "vr-ttrl"], "datasets": ["demo-digits", "ai2d"]})))
    assert str(err.value) == ("config key `methods`: vr-ttrl adapts on grounding datasets and none of ai2d, demo-digits "
                              "is one, so it would run nowhere; remove it or add a dataset of its task")
    with pytest.raises(ValueError) as err:
        checks.check_methods_fit(plan(("", {"methods": ["ttrv"], "datasets": ["ai2d"]}),
                                      ("experiments.x", {"methods": ["ttrv"], "cross": [["demo-digit-scenes", "ai2d"]]})))
    assert str(err.value) == ("config key `experiments.x.methods`: ttrv adapts on mcq datasets and none of "
                              "demo-digit-scenes is one, so it would run nowhere; remove it or add a dataset of its task")


def test_methods_counting_unparsable_answers_differently_in_one_block_are_warned(caplog):
    """Main grid: TTRL's `no_reward` set by an override, TTRV's preset `answer`: one warning naming both and where each
    is set; TTRV w/o frequency has no such parameter and zero-shot no spec: left out. An experiment whose methods
    agree: no warning. Logged once, as a warning of this module's logger."""
    specs = {"ttrl-majority": {"reward_params": {"unparsable": "no_reward"}},
             "ttrv": {"reward_params": {"alpha": 0.75, "unparsable": "answer"}},
             "ttrv-no-frequency": {"reward_params": {"alpha": 0.75}}, "dare": {"reward_params": {"unparsable": "answer"}}}
    plan = SimpleNamespace(config={"adaptation": {"method_overrides": {"ttrl-majority": {"reward_params": {}},
                                                                       "ttrv": {"hyperparameters": {}}}}},
                           method_specs=specs,
                           blocks=[("", {"methods": ["zero-shot", "ttrl-majority", "ttrv", "ttrv-no-frequency"]}),
                                   ("experiments.x", {"methods": ["ttrv", "dare", "ttrv-no-frequency"]})])
    warning = ("config `methods`: these methods count unparsable answers differently: ttrl-majority no_reward "
               "(adaptation.method_overrides), ttrv answer (preset); set adaptation.method_overrides.<method>."
               "reward_params.unparsable to compare like with like (rewards/voting.py)")
    with caplog.at_level("WARNING"):
        assert checks.warn_mixed_unparsable(plan) == [warning]
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [("ttrl_bench.plan.checks", "WARNING",
                                                                                warning)]
    plan.blocks = [("experiments.x", {"methods": ["ttrl-majority", "dare"]})]
    assert checks.warn_mixed_unparsable(plan)[0].startswith("config `experiments.x`: these methods count")


def test_adaptation_samples_per_block_pass_at_the_split_size_and_stop_one_over_naming_the_blocks_key(tmp_path):
    """demo-digits' bundled test split holds 1,797 - 1,200 = 597 digits; a local CRPE copy (no size known before
    preparation) 3 rows. A block's own n_samples is named by its key, else adaptation.n_samples (the plan's 598 here);
    a cross pair adapts on its first dataset (demo-digits; its target ai2d has no known size); "all" always fits.
    Only blocks with a GRPO method that fits the dataset count (zero-shot alone: nothing adapts)."""
    copy = tmp_path / "crpe"
    copy.mkdir()
    (copy / "crpe_relation.jsonl").write_text('{"a": 1}\n{"a": 2}\n{"a": 3}\n')

    def plan(n_adapt, *blocks):
        return SimpleNamespace(blocks=list(blocks), n_adapt=n_adapt, grpo_methods=["ttrv"], fits=_fits, runs=[],
                               results=str(tmp_path / "results"),
                               config={"data": {"sources": {"crpe": {"path": str(copy)}}},
                                       "evaluation": {"exclude_adaptation_samples": True}})

    ttrv = {"methods": ["zero-shot", "ttrv"]}
    checks.check_sample_counts(plan(597, ("", {**ttrv, "datasets": ["demo-digits"]}),
                                    ("experiments.x", {**ttrv, "n_samples": 3, "datasets": ["crpe"]}),
                                    ("experiments.y", {**ttrv, "n_samples": "all", "datasets": ["demo-digits", "crpe"]}),
                                    ("experiments.z", {"methods": ["zero-shot"], "n_samples": 598,
                                                       "datasets": ["demo-digits"]})))
    over = [
        (plan(20, ("experiments.x", {**ttrv, "n_samples": 598, "datasets": ["demo-digits"]})),
         "config key `experiments.x.n_samples`: 598 adaptation samples, but demo-digits's test split has 597"),
        (plan(598, ("experiments.y", {**ttrv, "datasets": ["demo-digits"]})),
         "config key `adaptation.n_samples`: 598 adaptation samples, but demo-digits's test split has 597"),
        (plan(20, ("experiments.c", {**ttrv, "n_samples": 598, "cross": [["demo-digits", "ai2d"]]})),
         "config key `experiments.c.n_samples`: 598 adaptation samples, but demo-digits's test split has 597"),
        (plan(20, ("experiments.x", {**ttrv, "n_samples": 4, "datasets": ["crpe"]})),
         f"config key `experiments.x.n_samples`: 4 adaptation samples, but the local copy of crpe ({copy}) has 3 rows"),
    ]
    for bad, message in over:
        with pytest.raises(ValueError) as err:
            checks.check_sample_counts(bad)
        assert str(err.value) == message


def test_run_all_runs_each_check_in_order_with_the_plans_settings(monkeypatch):
    """The plan's models, datasets and results directory reach the checks, the config files as given; the pre-flight
    (check_cache) before the sources check, the requests last."""
    calls = []
    for name in ("check_demo_model_alone", "check_methods_fit", "warn_mixed_unparsable", "check_sample_counts",
                 "check_cache", "check_sources", "check_requests"):
        monkeypatch.setattr(checks, name, lambda *args, name=name: calls.append((name, args)))
    plan = SimpleNamespace(models={"m": {}}, datasets=["ai2d"], config={"c": 1}, run_models=["m"], results="out")
    checks.run_all(plan, ("a.yaml",), replaced=False)
    assert calls == [("check_demo_model_alone", ({"m": {}}, ["ai2d"], ("a.yaml",), False)),
                     ("check_methods_fit", (plan,)), ("warn_mixed_unparsable", (plan,)), ("check_sample_counts", (plan,)),
                     ("check_cache", ({"c": 1}, ["m"], ["ai2d"], ["a.yaml"], Path("out"))),
                     ("check_sources", (plan,)), ("check_requests", (plan,))]


def test_evaluation_samples_per_run_pass_at_the_split_less_the_held_out_and_stop_one_over(tmp_path):
    """597 bundled digits, 20 of them held out for adaptation (n20_random, exclude_adaptation_samples, an MCQ set):
    577 pass, 578 stop; without holding out 597 pass, 598 stop; nall_random holds out nothing known before
    preparation (597 pass). The 120 scenes are a grounding set: never held out (120 pass, 121 stop). "all" and a set
    of unknown size (ai2d, not prepared) are not checked."""
    def plan(exclude, mcq, grounding, protocol="n20_random"):
        runs = [SimpleNamespace(target=target, protocol=protocol) for target in ("ai2d", "demo-digits", "demo-digit-scenes")]
        return SimpleNamespace(blocks=[], runs=runs, results=str(tmp_path / "results"),
                               section={"ai2d": "mcq", "demo-digits": "mcq", "demo-digit-scenes": "grounding"},
                               task={"ai2d": "mcq", "demo-digits": "mcq", "demo-digit-scenes": "grounding"},
                               config={"evaluation": {"exclude_adaptation_samples": exclude, "mcq": {"samples": mcq},
                                                      "grounding": {"samples": grounding}}})

    for passing in (plan(True, 577, 120), plan(False, 597, "all"), plan(True, 597, 120, "nall_random"),
                    plan(True, "all", "all")):
        checks.check_sample_counts(passing)
    over = [
        (plan(True, 578, 120), "config key `evaluation.mcq.samples`: 578 evaluation samples, but demo-digits's test "
                               "split has 597, 20 of them held out for adaptation"),
        (plan(False, 598, 120), "config key `evaluation.mcq.samples`: 598 evaluation samples, but demo-digits's test "
                                "split has 597"),
        (plan(True, 577, 121), "config key `evaluation.grounding.samples`: 121 evaluation samples, but "
                               "demo-digit-scenes's test split has 120"),
    ]
    for bad, message in over:
        with pytest.raises(ValueError) as err:
            checks.check_sample_counts(bad)
        assert str(err.value) == message



def test_check_requests_decides_every_jobs_request_and_lays_out_each_grpo_adaptation(tmp_path, monkeypatch):
    """config/config.yaml's demo with models.demo.gpus 3. The MCQ adaptations (num_generations 16, prompts_per_step 1,
    micro_batch_size 16; config.yaml:35-42) on 3 processes: micro-batch min(16, 16 // 3 = 5) = 5, and 16 is no
    multiple of 5 x 3 = 15: refused. With VR-TTRL alone (grounding: 8 rollouts, micro-batch 8; config.yaml:46-52):
    min(8, 8 // 3 = 2) = 2, 8 is no multiple of 2 x 3 = 6: refused. On 1 GPU, Tent (an objective baseline, no
    num_generations) is not laid out and passes beside VR-TTRL; every job's request, evaluations included, is
    decided (in plan.jobs() order)."""
    from ttrl_bench.plan import checks

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as error:
        checks.check_requests(demo_plan("models: {demo: {gpus: 3}}"))
    assert str(error.value) == ("adaptation.hyperparameters.<task>: prompts_per_step x num_generations = 16 completions "
                                "per step is not a multiple of micro_batch_size 5 x 3 process(es)")
    with pytest.raises(ValueError) as error:
        checks.check_requests(demo_plan("models: {demo: {gpus: 3}}\nmethods: [zero-shot, vr-ttrl]"))
    assert str(error.value) == ("adaptation.hyperparameters.<task>: prompts_per_step x num_generations = 8 completions "
                                "per step is not a multiple of micro_batch_size 2 x 3 process(es)")
    # n_samples "all": the layout is planned for the split's samples, read through the plan (the bundled size
    # before preparation; samples.py layout_samples); 16 rollouts in micro-batches of 16 on 1 GPU run
    assert checks.check_requests(demo_plan("adaptation: {n_samples: all}\nmethods: [zero-shot, ttrv]")) is None
    plan = demo_plan("methods: [zero-shot, tent, vr-ttrl]")
    asked = []
    real = checks.job_request
    monkeypatch.setattr(checks, "job_request", lambda plan, job: asked.append(job) or real(plan, job))
    checks.check_requests(plan)
    assert asked == plan.jobs() and {j.rule for j in asked} == {"adapt_per_sample", "evaluate"}
