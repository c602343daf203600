"""The plan of a config as functions (src/ttrl_bench/plan): the job grid, each job's settings and
request, and the dry-run checks, without Snakemake (tests/workflow/test_workflow.py checks that the rules
use them)."""

import json
from pathlib import Path

import pytest
import yaml

from ttrl_bench.plan import Job, Plan, Request, checks, job_request, load_config, validated
from ttrl_bench.plan.config import merge
from ttrl_bench.plan.resources import job_method_settings, largest_gpu_request
from ttrl_bench.plan.results_tree import check_results_tree, claim_results_tree, config_files

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_tree(tmp_path, monkeypatch):
    """Plans read `results/data/<dataset>/prep_stats.json` relative to the working directory:
    a fresh one, as before a first run."""
    monkeypatch.chdir(tmp_path)


def demo_with(extra: str = "") -> dict:
    """config/config.yaml with `extra` merged in, as `snakemake --configfile extra.yaml` does."""
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())
    return validated(merge(base, yaml.safe_load(extra) or {}))


def paper(name: str) -> Plan:
    return Plan(load_config(REPO / "config" / name))


def test_demo_grid_has_every_run_counted_by_hand():
    """config/config.yaml: 5 MCQ methods adapt on demo-digits (TRL's GRPO), VR-TTRL on the scenes
    (per sample, predicting as it goes); zero-shot on both: 7 evaluations, 8 runs in the store."""
    plan = Plan(demo_with())
    assert plan.datasets == ["demo-digit-scenes", "demo-digits"]
    assert [(r.method, r.train, r.target) for r in plan.runs] == [
        ("dare", "demo-digits", "demo-digits"),
        ("random-reward", "demo-digits", "demo-digits"),
        ("ttrl-majority", "demo-digits", "demo-digits"),
        ("ttrv", "demo-digits", "demo-digits"),
        ("ttrv-no-frequency", "demo-digits", "demo-digits"),
        ("vr-ttrl", "demo-digit-scenes", "demo-digit-scenes"),
        ("zero-shot", "none", "demo-digit-scenes"),
        ("zero-shot", "none", "demo-digits"),
    ]
    assert {r.protocol for r in plan.runs} == {"n20_random"} and {r.seed for r in plan.runs} == {0}
    assert plan.per_sample == ["vr-ttrl"]
    assert plan.job_counts() == {"prepare_data": 2, "build_demo_model": 1, "adapt": 5, "adapt_per_sample": 1,
                                 "evaluate": 7, "ingest_results": 1, "render_tables": 1, "plot_figures": 1,
                                 "audit_rewards": 1, "all": 1}
    assert plan.adapt_dirs()[0] == "results/adapt/demo/dare/demo-digits/n20_random/seed0"


def test_each_job_carries_its_resolved_settings():
    plan = Plan(demo_with())
    # MCQ evaluation: config evaluation.mcq (6 new tokens, every sample, the schema's default parser and
    # template), the 20 adaptation samples held out; the protocol recorded with the scores
    assert plan.eval_flags("demo-digits", "n20_random") == (
        "--max-new-tokens 6 --eval-samples all --exclude-adaptation-samples --choice-parser robust "
        "--chat-template model --protocol clean")
    assert plan.eval_flags("demo-digit-scenes", "n20_random") == (
        "--max-new-tokens 64 --eval-samples 8 --exclude-adaptation-samples --empty-mask-iou zero --protocol clean")
    ttrv = plan.method_settings("ttrv", "n20_random")
    # the per-task layer (adaptation.hyperparameters.mcq) and the method's own override
    assert ttrv["hyperparameters"]["num_generations"] == 16 and ttrv["hyperparameters"]["learning_rate"] == 2.0e-4
    assert ttrv["reward_params"]["unparsable"] == "no_reward" and "vllm" in ttrv
    assert plan.method_settings("vr-ttrl", "n20_random")["hyperparameters"]["num_generations"] == 8


def test_cross_pairs_adapt_once_and_evaluate_on_the_target():
    """TTRV Table 12: adapt on one dataset, evaluate on another; no zero-shot of the train set."""
    plan = paper("ttrv.yaml")
    cross = Plan(validated(merge(plan.config, {"experiments": {"table12_cross_dataset": {"enabled": True}}})))
    extra = sorted(set(cross.runs) - set(plan.runs))
    assert len(extra) == 6 and all(r.train != r.target and r.method == "ttrv" for r in extra)
    assert not set(cross.adaptations()) - set(plan.adaptations())  # the train sets' own adaptations


@pytest.mark.parametrize("config, counts", [
    # Tables 1-2: 16 datasets x 3 models, 48 zero-shot evaluations; each cell adapted with its log's run
    #   configuration (48) and at Appendix A's 2 epochs (48, of which 16 are the logged runs already): 80
    #   adaptations, 48 + 80 evaluations, under the authors protocol; the 2-epoch block again under clean:
    #   48 adaptations, 48 zero-shot + 48 adapted evaluations; InternVL2.5-4B is converted from its original
    #   format once
    ("ttrv.yaml", {"prepare_data": 16, "convert_model": 1, "adapt": 128, "evaluate": 224}),
    # Table 2: 8 splits x 2 models; vote-only and VR-TTRL per sample (32 jobs), zero-shot 16
    ("vr-ttrl.yaml", {"prepare_data": 8, "adapt_per_sample": 32, "evaluate": 16}),
])
def test_paper_grids(config, counts):
    aggregate = {"ingest_results": 1, "render_tables": 1, "plot_figures": 1, "audit_rewards": 1, "all": 1}
    assert paper(config).job_counts() == {**counts, **aggregate}


# --- requests: the cost model's decisions (plan/cost.py), read from the shipped traces ----------------

EIGHT_B_TTRV = Job("adapt", "internvl3-8b", "ttrv", "ai2d", None, "n20_random", 0)


def test_adaptation_requests_are_the_cost_models_decision(tmp_path):
    """InternVL3-8B (7,944,373,760 parameters, 7,640,361,472 trained: vision tower frozen), TTRV with a
    KL reference, rolling out through HF generate (`auto`: no vLLM share), every image at 3,330 tokens. On one GPU
    129.4 GB (test_a_job_predicted_not_to_fit_stops_the_dry_run_naming_the_key); on 2 GPUs half the fp32 weights +
    gradients + AdamW state (123.46 GB / 2) plus 21.38 GB of activations, x 0.784 calibration, + a bf16 reference
    shard (7.94) = 73.1 GB <= 80: 2 GPUs. Host: 2 processes x (4 + 2 bytes) x 7.944e9 (fp32 load, bf16 reference)
    + 2 x 8 GB = 111.3 GB, x 1.1 -> 123000 MB. Limit: the margin 2 x (the two terms on the authors' A6000s, no
    faster on the H100 in the slowest case, + 6.25 slowest start-up): FLOPs 35.80 minutes on 2 GPUs at the update
    phase's rate / 3.09 (cost.py FLOP_RATE_FACTOR) = 11.586; traffic 2 epochs x 20 samples = 40 rounds of one prompt's
    16 trained rollouts, 16 / 2 GPUs / micro-batch 2 = 4 micro-batches a GPU each, 160 x 7.640e9 trained x 12 B /
    10.2 GB/s = 1438.2 s = 23.970; 2 x (11.586 + 23.970 + 6.25) = 83.61 -> 84.
    InternVL3-2B: one GPU, 1 x 6 bytes x 1.856e9 + 8 GB = 19.1 GB, x 1.1 -> 22000 MB; FLOPs 16.22 / 3.09 = 5.249,
    traffic 40 x 8 micro-batches x 1.552e9 trained (1,551,973,888: the shipped traces) x 12 B / 10.2 GB/s = 9.738;
    2 x (5.249 + 9.738 + 6.25) = 42.47 -> 43."""
    plan = paper("ttrv.yaml")
    assert job_request(plan, EIGHT_B_TTRV) == Request(2, 123000, 84, micro_batch=2)
    two_b = Job("adapt", "internvl3-2b", "ttrv", "ai2d", None, "n20_random", 0)
    assert job_request(plan, two_b) == Request(1, 22000, 43, micro_batch=2)
    # VR-TTRL per sample, Qwen2.5-VL-7B (8.29e9 parameters): 4 GPUs; its 8 rollouts x 1 prompt per step
    # leave each of 4 processes 2, so the preset's micro-batch of 4 runs as 2 (adaptation/layout.py). Its
    # patch merger trains (Appendix C.1's subset): the traced step's FLOPs 2.938e14 against 2.673e14 with
    # the merger frozen (the backward now reaches into the vision tower's merger); limit 2 x (56.398 FLOP + 150.200
    # traffic minutes + 6.25) -> 426 (tests/plan/test_jobs.py)
    # with 1,024-token rollouts (the `authors` protocol's are Seg-Zero's 2,000: a key the config sets wins)
    overlay = tmp_path / "rollouts.yaml"
    overlay.write_text("adaptation: {hyperparameters: {grounding: {max_completion_length: 1024}}}\n")
    vr = Plan(load_config(REPO / "config" / "vr-ttrl.yaml", overlay))
    job = next(j for j in vr.jobs() if j.method == "vr-ttrl" and j.model == "qwen2.5-vl-7b")
    assert job_request(vr, job) == Request(4, 389000, 426, micro_batch=2)
    assert job_method_settings(vr, job)["hyperparameters"]["micro_batch_size"] == 2


def test_echo_authors_trains_a_lora_adapter_on_geoqa_only():
    """ECHO under `authors`: GeoQA's checkpoint is a LoRA adapter (standalone_inference.py:22), rank and alpha 128
    (geometry3k.sh:108-109, commented out), verl's all-linear targets; Geometry3k trains fully. The GeoQA job's
    method carries the resolved adapter and its memory plan has no second (reference) model. Both jobs' GPUs are
    set by HF generate's prefill (`auto`) of the 256-sequence generation batch, shared among the processes, not by
    the update: the adapter's job, whose prefill runs LoRA's layers too, asks for more GPUs than the full update."""
    from ttrl_bench.plan.cost import job_decision, job_settings

    echo = paper("echo.yaml")
    jobs = {(j.model, j.dataset): j for j in echo.jobs() if j.rule == "adapt" and j.method == "echo"}
    geoqa, geometry = jobs["qwen2.5-vl-7b", "geoqa"], jobs["qwen2.5-vl-7b", "geometry3k"]
    assert job_method_settings(echo, geoqa)["hyperparameters"]["lora"] == {"rank": 128, "alpha": 128,
                                                                           "target_modules": "all-linear"}
    assert job_method_settings(echo, geometry)["hyperparameters"]["lora"] is None
    assert (job_settings(echo, geoqa).lora_rank, job_settings(echo, geoqa).reference) == (128, False)
    assert (job_settings(echo, geometry).lora_rank, job_settings(echo, geometry).reference) == (0, True)
    assert (job_request(echo, geoqa).gpus, job_request(echo, geometry).gpus) == (4, 2)
    lora = job_decision(echo, geoqa).predicted
    assert lora["generation_gb"] > lora["train_gb"] and lora["reference_gb"] == 0.0
    # issue 53 item 6: their GeoQA cells evaluate the checkpoint of round 654 (standalone_inference.py:22)
    assert job_method_settings(echo, geoqa)["hyperparameters"]["stop_after_rounds"] == 654
    assert job_method_settings(echo, geometry)["hyperparameters"]["stop_after_rounds"] is None


def test_evaluation_and_conversion_ask_for_the_weights_on_the_host():
    """8 GB + 4 bytes per parameter (the parameter count from the model's config on the meta device):
    InternVL3-8B 8000 + 4 x 7944.37 = 39778 MB; InternVL2.5-4B 8000 + 4 x 3712.64 = 22851 MB.
    Evaluation limit (plan/evaluation_cost.py), AI2D under ttrv.yaml's `authors` protocol (1,024 new tokens): the
    slowest case is 2,704 items x (3,328 image tokens: 12 tiles + a thumbnail + 100 text + 1,024) = 12,038,208
    tokens through HF generate at 21 items/s x 1,346 tokens x 1.86 / 7.944 B = 6,617.9 tokens/s on the H100:
    1,819.0 s = 30.32 min; 2 x (30.32 + 2.15 start-up) = 64.9 -> 65."""
    plan = paper("ttrv.yaml")
    assert job_request(plan, Job("evaluate", "internvl3-8b", "ttrv", "ai2d", "ai2d")) == Request(1, 39778, 65)
    assert job_request(plan, Job("convert_model", "internvl2.5-4b")) == Request(0, 22851, 60)


def test_built_models_ask_a_fixed_small_request_without_tracing():
    """The demo's tiny model has no config before it is built: models.demo.gpus (2 here) for its
    adaptations, one GPU for its evaluations, 8000 MB, 40 minutes; the method's settings unchanged."""
    plan = Plan(demo_with("models: {demo: {gpus: 2}}"))
    adapt = Job("adapt", "demo", "ttrv", "demo-digits", None, "n20_random", 0)
    assert job_request(plan, adapt) == Request(2, 8000, 40)
    evaluation = Job("evaluate", "demo", "zero-shot", "none", "demo-digits", "n20_random", 0)
    assert job_request(plan, evaluation) == Request(1, 8000, 40)
    assert job_method_settings(plan, adapt) == plan.method_settings("ttrv", "n20_random")


def test_one_gpu_for_an_8b_model_fits_not_even_offloaded():
    """models.<name>.gpus = 1: the 8B training state (123.5 GB) fits only on the host, offloaded training then
    0.784 x 21.38 (activations, below) + 15.9 (bf16 reference) = 32.6 GB; but its rollouts come from HF generate
    (`auto`), whose prefill of the 64-sequence generation batch, every image at InternVL's 3,330 tokens, is on the
    line through its shipped traces at 256 and 1,280 image tokens: 37.988 + 3.00195 x (58.232 - 37.988) = 98.76 GB
    (prefill factor 1) > 80 on one GPU whatever is offloaded."""
    plan = Plan(validated(merge(paper("ttrv.yaml").config, {"models": {"internvl3-8b": {"gpus": 1}}})))
    with pytest.raises(ValueError, match=r"generation 98\.8; 1 GPU\(s\), micro-batch 2, offload True"):
        job_request(plan, EIGHT_B_TTRV)


def test_a_job_predicted_not_to_fit_stops_the_dry_run_naming_the_key():
    """InternVL3-8B on one GPU without offload, every image at InternVL's 3,330 tokens (13 tiles + 2): its training
    step's peak on the line through its shipped traces at 256 and 1,280 image tokens, 139.750 + 3.00195 x (141.447 -
    139.750) = 144.844 GB (123.462 of it fp32 weights, gradients and AdamW state); 0.78381 x 144.844 + 15.889 (bf16
    reference) = 129.42 GB against 80 (no vLLM share: `auto` rolls out through HF generate)."""
    config = merge(paper("ttrv.yaml").config, {"models": {"internvl3-8b": {"gpus": 1, "offload": False}}})
    with pytest.raises(ValueError) as err:
        checks.check_requests(Plan(validated(config)))
    message = str(err.value)
    assert message.startswith("adapt internvl3-8b/")
    assert "predicted GPU peak 129.4 GB" in message and "GPU's 80 GB" in message
    assert "models.internvl3-8b.gpus" in message


def test_a_micro_batch_no_layout_runs_is_refused_before_any_trace():
    """models.<name>.micro_batch_size 3 on one GPU: TTRV's 16 trained rollouts of a step are no whole
    number of micro-batches of 3, so decide has no layout to try and raises the layout's error."""
    config = merge(paper("ttrv.yaml").config, {"models": {"internvl3-2b": {"gpus": 1, "micro_batch_size": 3}}})
    with pytest.raises(ValueError, match="micro_batch_size 3"):
        job_request(Plan(validated(config)), Job("adapt", "internvl3-2b", "ttrv", "ai2d", None, "n20_random", 0))


def test_job_of_snakemake_wildcards():
    class Wildcards:  # Snakemake's wildcards: attributes, strings
        model, method, train, target, protocol, seed = "m", "ttrv", "a", "b", "n20_random", "3"
    assert Job.of("evaluate", Wildcards()) == Job("evaluate", "m", "ttrv", "a", "b", "n20_random", 3)


# --- dry-run checks: every config mistake stops the plan naming the key -------------------------


@pytest.mark.parametrize(
    "bad_config, named",
    [
        # one line, the key first (not after the 500-line schema Snakemake prints)
        ("learning_rat: 1", "config key `learning_rat`: unknown key (every key is in workflow/schemas/config.schema.yaml)"),
        ("adaptation: {n_samples: twenty}", "config key `adaptation.n_samples`: 'twenty'"),
        # the closest known names first (difflib), and where there are many, the command that lists them
        ("methods: [zero-shot, ttrvv]", "config key `methods`: unknown name(s) 'ttrvv' (did you mean ttrv?); "
                                        "`ttrl-bench methods list` lists the"),
        ("datasets: [imagenet-9k]", "config key `datasets`: unknown name(s) 'imagenet-9k' (did you mean imagenet-r or "
                                    "imagenet-a or imagenet?); `ttrl-bench datasets list` lists the"),
        ("experiments: {x: {enabled: true, methods: [ttrv], models: [nobody]}}",
         "config key `experiments.x.models`: unknown name(s) 'nobody'; known: demo"),
        ("adaptation: {n_samples: 598}", "config key `adaptation.n_samples`: 598 adaptation samples, but demo-digits's test split has 597"),
        ("evaluation: {grounding: {samples: 121}}", "config key `evaluation.grounding.samples`: 121 evaluation samples, but demo-digit-scenes's test split has 120"),
        # 597 test digits, 20 held out for adaptation
        ("evaluation: {mcq: {samples: 578}}", "config key `evaluation.mcq.samples`: 578 evaluation samples, but demo-digits's test split has 597, 20 of them held out for adaptation"),
        ("models: {other: {source: /no/such/model}}", "model '/no/such/model': no such local directory, and not a Hub id (org/name); check the config key models.other.source"),
        ("data: {sources: {demo-digits: {path: /no/such/copy}}}", "config key `data.sources.demo-digits.path`: /no/such/copy does not exist"),
        # the pre-flight (plan/preflight.py) names every missing model before the sources check names the first
        ("models: {hub: {source: org/model}}", "config key `models.hub.source`: model org/model"),
    ],
)
def test_config_errors_name_the_key(monkeypatch, bad_config, named):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: an unreachable Hub
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(ValueError) as err:
        checks.run_all(Plan(demo_with(bad_config)))
    assert named in str(err.value)


def test_sample_counts_use_the_prepared_split(tmp_path):
    """Once prepared, a dataset's prep_stats.json gives its size (the resolution filter drops some)."""
    stats = tmp_path / "results/data/demo-digits/prep_stats.json"
    stats.parent.mkdir(parents=True)
    stats.write_text('{"splits": {"test": 19}}')
    with pytest.raises(ValueError, match="20 adaptation samples, but demo-digits's test split has 19"):
        checks.run_all(Plan(demo_with()))


def test_paper_config_merged_into_the_demo_is_refused():
    """Merged (no --replace-workflow-config): the message names the merge and the flag; with the flag given
    (the user's own config combines them), it names what the demo model runs on, never the flag."""
    ttrv = yaml.safe_load((REPO / "config/ttrv.yaml").read_text())
    plan = Plan(demo_with(yaml.safe_dump(ttrv)))
    with pytest.raises(ValueError) as merged:
        checks.run_all(plan, ["config/ttrv.yaml"], replaced=False)
    assert "config/ttrv.yaml was merged into config/config.yaml" in str(merged.value)
    assert str(merged.value).endswith("add --replace-workflow-config to run it alone")
    with pytest.raises(ValueError) as replaced:
        checks.run_all(plan, ["mine.yaml"], replaced=True)
    assert str(replaced.value).startswith("config: the built demo model 'demo' (models.demo.build) runs on the bundled "
                                          "demo sets and local datasets (docs/extending.md), not on ai2d, capture,")
    assert "--replace-workflow-config" not in str(replaced.value)


# --- mistakes that used to pass the dry run (issue 26 point 4) ------------------------------------


@pytest.mark.parametrize(
    "bad_config, named",
    [
        # VR-TTRL answers with boxes: with MCQ datasets only it was dropped without a word ("total 4")
        ("methods: [zero-shot, vr-ttrl]\ndatasets: [demo-digits]",
         "config key `methods`: vr-ttrl adapts on grounding datasets and none of demo-digits is one"),
        ("experiments: {x: {enabled: true, methods: [ttrv], datasets: [demo-digit-scenes]}}",
         "config key `experiments.x.methods`: ttrv adapts on mcq datasets and none of demo-digit-scenes is one"),
        # a typo in reward_params: before, a TypeError in the job's first reward call
        ("adaptation: {method_overrides: {ttrv: {reward_params: {unparseable: answer}}}}",
         "config key `adaptation.method_overrides.ttrv.reward_params`: reward 'ttrv': bad reward_params"),
        ("adaptation: {method_overrides: {ttrv: {reward_params: {unparsable: maybe}}}}",
         "reward 'ttrv' takes alpha, entropy, unparsable"),
        # named by the config path, not "method 'dare': unknown hyper-parameter(s)" (the first user of the section)
        ("adaptation: {hyperparameters: {mcq: {learning_rte: 1.0e-6}}}",
         "config key `adaptation.hyperparameters.mcq.learning_rte`: unknown hyper-parameter"),
        ("adaptation: {method_overrides: {dare: {hyperparameters: {n_vote: 8}}}}",
         "config key `adaptation.method_overrides.dare.hyperparameters.n_vote`: unknown hyper-parameter of dare"),
    ],
)
def test_silent_drops_and_late_failures_stop_the_plan(bad_config, named):
    with pytest.raises(ValueError) as err:
        checks.run_all(Plan(demo_with(bad_config)))
    assert named in str(err.value)


def test_a_hyperparameter_of_another_task_is_a_typo_in_its_section():
    """`updates_per_generation` is known to MCQ presets (ECHO), `epochs` to all: both pass; a grounding
    method's key in the MCQ section is still unknown there."""
    Plan(demo_with("adaptation: {hyperparameters: {mcq: {epochs: 2}, grounding: {epochs: 3}}}"))
    with pytest.raises(ValueError, match=r"`adaptation.hyperparameters.grounding.nonsense`"):
        Plan(demo_with("adaptation: {hyperparameters: {grounding: {nonsense: 1}}}"))


SLURM_ENV = {"TTRL_SLURM_PARTITION": "gpu", "TTRL_SLURM_ACCOUNT": ""}  # empty: a cluster without accounts


@pytest.mark.parametrize("environ, gpu_limit, most, named", [
    ({"TTRL_SLURM_ACCOUNT": "x"}, None, 1, "environment variable TTRL_SLURM_PARTITION is unset"),
    ({"TTRL_SLURM_PARTITION": "gpu"}, None, 1, "environment variable TTRL_SLURM_ACCOUNT is unset"),
    # profiles/default's gpu=1 beside `--profile profiles/slurm`: an 8B job (4 GPUs) would ask for 1
    (SLURM_ENV, 1, 4, "use `--workflow-profile profiles/slurm`"),
    # ... and even where every job asks for one GPU, one job at a time on a whole cluster
    (SLURM_ENV, 1, 1, "use `--workflow-profile profiles/slurm`"),
    (SLURM_ENV, 2, 4, "`--resources gpu=N` with N >= 4"),
])
def test_slurm_runs_that_would_ask_wrongly_stop(environ, gpu_limit, most, named):
    with pytest.raises(ValueError) as err:
        checks.check_slurm(environ, gpu_limit, most)
    assert named in str(err.value)


def test_slurm_runs_that_ask_what_is_planned_pass():
    checks.check_slurm(SLURM_ENV, None, 4)  # --workflow-profile profiles/slurm: no global limit
    checks.check_slurm(SLURM_ENV, 8, 4)  # a deliberate cap of 8 GPUs at a time
    assert largest_gpu_request(paper("ttrv.yaml")) == 4  # InternVL3-8B


# --- one results tree per config (issue 26 point 5) ------------------------------------------------


def test_results_of_another_config_are_never_overwritten(tmp_path):
    """The demo ran here; a dry run of config/ttrv.yaml in the same directory would have replaced
    its store, tables and figures ("params have changed" of ingest_results): it stops, naming both
    configs and the command that runs the paper config in its own directory."""
    demo = config_files([], replaced=False)
    ttrv = config_files([tmp_path / "config/ttrv.yaml", "extra.yaml"], replaced=True)
    assert demo == ["config/config.yaml"] and ttrv == ["config/ttrv.yaml", "extra.yaml"]  # relative to the workdir
    check_results_tree("results", ttrv)  # a fresh tree belongs to no config yet
    claim_results_tree("results", demo)
    claim_results_tree("results", ttrv)  # the first run's claim stays
    check_results_tree("results", demo)  # the same config again: resumed, rerun
    check_results_tree("results", config_files(["./config/../config/config.yaml"], replaced=True))  # the same file
    with pytest.raises(ValueError) as err:
        check_results_tree("results", ttrv)
    assert str(err.value).startswith("results/ holds the results of config config/config.yaml (results/config_files.json)")
    assert ("snakemake --directory runs/<name> --configfile config/ttrv.yaml --configfile extra.yaml "
            "--replace-workflow-config") in str(err.value)


def test_methods_counting_unparsable_answers_differently_are_named():
    """The demo overrides TTRV's convention (no_reward) but not TTRV w/o diversity's (the preset's `answer`): one
    warning names both and the key that aligns them; the demo's own methods agree, so it warns nothing."""
    plan = Plan(demo_with("methods: [zero-shot, ttrv, ttrv-no-diversity]"))
    assert checks.warn_mixed_unparsable(plan) == [
        "config `methods`: these methods count unparsable answers differently: ttrv no_reward "
        "(adaptation.method_overrides), ttrv-no-diversity answer (preset); set "
        "adaptation.method_overrides.<method>.reward_params.unparsable to compare like with like (rewards/voting.py)"]
    assert checks.warn_mixed_unparsable(Plan(demo_with())) == []


# --- one published cell (issue 38) --------------------------------------------------------------


def test_one_cell_plans_exactly_its_jobs_with_the_paper_configs_settings(tmp_path, monkeypatch, capsys):
    """TTRV Table 1, InternVL3-2B on ImageNet-A, cut from config/ttrv.yaml: the main grid's zero-shot row and the
    logged block of Table 1 (ttrv, its log's settings), under the authors protocol; no other model, dataset or
    experiment (the 2-epoch block has no `table`). Jobs: 1 preparation, 1 adaptation, 2 evaluations. Its
    Snakemake dry run, offline, with only InternVL3-2B-hf cached and a local ImageNet-A copy, passes."""
    from tests.support.workflow import job_counts
    from tests.support.plan import cache_model
    from tests.support.workflow import copy_workflow, run_snakemake
    from ttrl_bench.cli import main
    from ttrl_bench.plan.cells import cell_config

    ttrv = yaml.safe_load((REPO / "config/ttrv.yaml").read_text())
    cell = cell_config(ttrv, "ttrv-1", "InternVL3-2B", "ImageNet-A")
    assert list(cell["models"]) == ["internvl3-2b"] and cell["datasets"] == ["imagenet-a"]
    assert cell["protocol"] == "authors" and cell["data"]["items"] == "authors"
    assert {name: (b["models"], b["datasets"], b["methods"]) for name, b in cell["experiments"].items()} == {
        "logged_internvl3_2b": (["internvl3-2b"], ["imagenet-a"], ["ttrv"])}
    plan = Plan(validated(cell))
    assert {k: v for k, v in plan.job_counts().items() if k in ("prepare_data", "adapt", "evaluate")} == {
        "prepare_data": 1, "adapt": 1, "evaluate": 2}
    with pytest.raises(ValueError, match=r"no enabled experiment of ttrv Table 3 runs InternVL3-2B on ImageNet-A"):
        cell_config(ttrv, "ttrv-3", "InternVL3-2B", "ImageNet-A")
    with pytest.raises(ValueError, match=r"model 'InternVL9' is not a model of the config; known: InternVL3-2B"):
        cell_config(ttrv, "ttrv-1", "InternVL9", "ImageNet-A")

    work = tmp_path / "work"
    work.mkdir()
    copy_workflow(work)
    monkeypatch.chdir(work)
    assert main(["cell", "ttrv-1", "InternVL3-2B", "ImageNet-A"]) == 0
    printed = capsys.readouterr().out
    # what it needs, every job with its time, and the published cell beside the authors' log that gave it
    # (TTRV Table 1: 96.31; imagenet_a_20_..._InternVL3-2B log: 96.32 over the full test set)
    assert "needs: model OpenGVLab/InternVL3-2B-hf" in printed
    assert "total: 4 jobs (1 prepare_data, 1 adapt, 2 evaluate)" in printed
    # and what the log's name means: run.sh:51 writes ${EPISODE}e, but this run's '20e' is its 20 samples (its
    # config's trainer.total_epochs: 2; docs/ttrv-authors-logs.md)
    assert ("published: ttrv Table 1 InternVL3-2B ttrv ImageNet-A top1_acc 96.31; the authors' log "
            "imagenet_a_20_OpenGVLab_InternVL3-2B_20e_0824_220320.log: 96.32 (its '20e' is not epochs: older runs "
            "wrote the sample count there; its config trains 20 samples for 2 epochs)") in printed
    # the command here and its SLURM form (the workflow profile the plan's requests are for), and the card assumed
    cell_file = work / "cells" / "ttrv-1_InternVL3-2B_ImageNet-A.yaml"
    common = f"--directory runs/{cell_file.stem} --configfile {cell_file} --replace-workflow-config"
    assert f"run it here: snakemake --cores all {common}" in printed
    assert f"snakemake --workflow-profile profiles/slurm {common}" in printed
    assert "the plan assumed H100 80GB GPUs with 80 GB each (resources.gpu_model / gpu_memory_gb" in printed
    (work / "copy").mkdir()
    (work / "local.yaml").write_text("data: {sources: {imagenet-a: {path: copy}}}\n")
    from ttrl_bench.datasets import authors_items

    for key in authors_items.missing_file_images("imagenet-a", work / "copy")[1]:  # the images the items need
        (work / "copy" / key).parent.mkdir(parents=True, exist_ok=True)
        (work / "copy" / key).touch()
    home = tmp_path / "hf"
    cache_model(home / "hub", "OpenGVLab/InternVL3-2B-hf")
    for key, value in {"HF_HUB_OFFLINE": "1", "HF_HOME": str(home), "TTRL_BENCH_CACHE": str(tmp_path / "empty")}.items():
        monkeypatch.setenv(key, value)
    dry = run_snakemake(work, "-n", "--configfile", "cells/ttrv-1_InternVL3-2B_ImageNet-A.yaml", "local.yaml",
                     "--replace-workflow-config")
    counts = job_counts(dry.stdout)
    assert {k: counts.get(k) for k in ("prepare_data", "adapt", "evaluate")} == {"prepare_data": 1, "adapt": 1, "evaluate": 2}


def test_adaptation_samples_beyond_a_local_copys_rows_stop_the_dry_run(tmp_path, monkeypatch):
    """Before preparation, a local JSON-lines copy's rows bound its samples: 3 rows, 4 asked -> stopped, naming
    the key and the copy; 3 asked passes (issue 38: it used to pass the dry run and fail at job time)."""
    from ttrl_bench.datasets.registry import REGISTRY, DatasetSpec

    spec = DatasetSpec("my-quiz-3", "vqa", "local:json", "accuracy", "Quiz", reader="options_list",
                       fields={"image": "image", "question": "question", "options": "choices", "answer": "answer"},
                       evidence="a test's three rows")
    monkeypatch.setitem(REGISTRY, spec.name, spec)
    (tmp_path / "quiz").mkdir()
    (tmp_path / "quiz" / "test.jsonl").write_text("".join(
        json.dumps({"image": f"{i}.png", "question": "q", "choices": ["a", "b"], "answer": "A"}) + "\n" for i in range(3)))
    monkeypatch.chdir(tmp_path)
    overlay = "datasets: [my-quiz-3]\nmethods: [zero-shot, ttrv]\ndata: {sources: {my-quiz-3: {path: quiz}}}\n"
    plan = Plan(demo_with(overlay + "adaptation: {n_samples: 4}\n"))
    with pytest.raises(ValueError, match=r"config key `adaptation.n_samples`: 4 adaptation samples, but the local "
                                         r"copy of my-quiz-3 \(quiz\) has 3 rows"):
        checks.check_sample_counts(plan)
    checks.check_sample_counts(Plan(demo_with(overlay + "adaptation: {n_samples: 3}\n")))


# --- dry-run checks at, just under and just over their limits (issue 39) ---------------------------------------

@pytest.mark.parametrize("gpu_limit, most, passes", [
    (4, 4, True),    # a cap equal to the largest job's GPUs: that job still runs
    (3, 4, False),   # one under: the 4-GPU job would be capped
    (5, 4, True),
    (2, 2, True),    # 2 is the least cap that is not profiles/default's one-GPU-at-a-time
    (2, 1, True),
    (1, 1, False),   # gpu=1: one GPU job at a time on the whole cluster, whatever the jobs ask
])
def test_a_slurm_gpu_cap_passes_from_the_largest_jobs_gpus_up(gpu_limit, most, passes):
    if passes:
        checks.check_slurm(SLURM_ENV, gpu_limit, most)
    else:
        with pytest.raises(ValueError, match=rf"gpu={gpu_limit} on SLURM"):
            checks.check_slurm(SLURM_ENV, gpu_limit, most)


def _prepared(tmp_path, dataset: str, rows: int) -> None:
    stats = tmp_path / f"results/data/{dataset}/prep_stats.json"
    stats.parent.mkdir(parents=True, exist_ok=True)
    stats.write_text(json.dumps({"splits": {"test": rows}}))


def test_adaptation_samples_pass_at_the_split_size_and_stop_one_over(tmp_path):
    """20 adaptation samples (config/config.yaml) of a prepared split of 20: all of them, passes; of 19: stopped."""
    _prepared(tmp_path, "demo-digits", 20)
    checks.check_sample_counts(Plan(demo_with()))
    _prepared(tmp_path, "demo-digits", 19)
    with pytest.raises(ValueError, match="`adaptation.n_samples`: 20 adaptation samples, but demo-digits's test split has 19"):
        checks.check_sample_counts(Plan(demo_with()))


def test_evaluation_samples_pass_at_the_split_less_the_held_out_and_stop_one_over(tmp_path):
    """A split of 100 with 20 held out for adaptation (exclude_adaptation_samples): 80 evaluation samples pass,
    81 stop; without holding out, 100 pass and 101 stop."""
    _prepared(tmp_path, "demo-digits", 100)
    checks.check_sample_counts(Plan(demo_with("evaluation: {mcq: {samples: 80}}")))
    with pytest.raises(ValueError, match=r"`evaluation.mcq.samples`: 81 evaluation samples, but demo-digits's test "
                                         r"split has 100, 20 of them held out for adaptation"):
        checks.check_sample_counts(Plan(demo_with("evaluation: {mcq: {samples: 81}}")))
    keep = "evaluation: {exclude_adaptation_samples: false, mcq: {samples: %d}}"
    checks.check_sample_counts(Plan(demo_with(keep % 100)))
    with pytest.raises(ValueError, match="101 evaluation samples, but demo-digits's test split has 100$"):
        checks.check_sample_counts(Plan(demo_with(keep % 101)))


# --- defaults by name, and which config layer wins (issue 39) ------------------------------------------------

def test_schema_defaults_by_name():
    """A config naming only its models, datasets and methods gets: protocol clean, seed 0; 20 random adaptation
    samples (TTRV Appendix A); MCQ evaluation with the checkpoint's template and our robust parser, 6 new tokens,
    every sample, the adaptation samples held out; VR-TTRL's 200 grounding samples per split at the rollouts' 1024
    tokens; ECHO Table 5's validation temperature 0.6 and 3,072 tokens, top_p 0.95 (geometry3k.sh:75), pass@1 of one
    sample; TTRV Appendix B's either-side resolution rule; the H100 80 GB card; vLLM at 0.3 of a GPU beside training and at
    its own 0.9 for evaluation."""
    config = validated({"models": {"demo": {"source": "results/models/demo", "build": "tiny-qwen2.5-vl"}},
                        "datasets": ["demo-digits"], "methods": ["zero-shot"]})
    assert (config["protocol"], config["seeds"]) == ("clean", [0])
    adaptation, evaluation = config["adaptation"], config["evaluation"]
    assert (adaptation["n_samples"], adaptation["sampling"], adaptation["rollout_backend"]) == (20, "random", "auto")
    assert adaptation["hyperparameters"] == {"mcq": {}, "grounding": {}, "math": {}}  # the presets' values apply
    assert adaptation["method_overrides"] == {} and adaptation["keep_adapted_weights"] is False
    assert adaptation["vllm"]["gpu_memory_utilization"] == 0.3 and evaluation["vllm"]["gpu_memory_utilization"] == 0.9
    assert evaluation["mcq"] == {"max_new_tokens": 6, "samples": "all", "chat_template": "model", "choice_parser": "robust"}
    assert evaluation["exclude_adaptation_samples"] is True and evaluation["batch_size"] == 64
    grounding = evaluation["grounding"]
    assert (grounding["samples"], grounding["max_new_tokens"], grounding["empty_mask_iou"]) == (200, 1024, "zero")
    assert grounding["sam2"] is None and grounding["input_size"] is None and grounding["query_form"] is None
    math = evaluation["math"]
    assert (math["temperature"], math["top_p"], math["top_k"], math["max_new_tokens"]) == (0.6, 0.95, None, 3072)
    assert (math["n_samples"], math["pass_k"], math["prompt"], math["grader"]) == (1, [1], "training", "exact")
    assert (config["data"]["resolution_rule"], config["data"]["items"]) == ("either_side", "ours")
    # no card set: the H100 80 GB (plan/cards.py), unpinned; its memory where gpu_memory_gb does not override it
    assert config["resources"] == {} and config["experiments_enabled"] == "as_set"
    from ttrl_bench.plan.cards import config_card, gpu_memory_gb
    assert (config_card(config).key, gpu_memory_gb(config)) == ("h100", 80)


def test_the_clean_protocols_stated_values_are_the_schemas_defaults():
    """plan/protocols.py SETTINGS names our `clean` value of each evaluation key the authors' protocol sets; a
    config under clean must get exactly it (None: the key absent or null)."""
    from ttrl_bench.plan.protocols import SETTINGS

    config = validated({"models": {"demo": {"source": "results/models/demo", "build": "tiny-qwen2.5-vl"}},
                        "datasets": ["demo-digits"], "methods": ["zero-shot"]})
    checked = 0
    for path, _, _, ours, _ in SETTINGS:
        if path[0] != "evaluation" or path == ("evaluation", "mcq", "max_new_tokens"):  # the config's own budget
            continue
        node = config
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if path == ("evaluation", "grounding", "query_form") and node is None:
            node = "as_given"  # unset: no --query-form flag, the CLI's default (cli/evaluation.py) applies
        assert node == ours, path
        checked += 1
    assert checked == 13  # mcq: chat_template, choice_parser; grounding: sam2, input_size, query_form,
    # max_new_tokens; math: prompt, temperature, top_p, top_k, max_new_tokens, min_image_side, grader


def test_config_layers_win_in_order_preset_task_math_method():
    """A hyper-parameter's value: the preset's, under `adaptation.hyperparameters.<task>` (mcq), under `.math` for
    ECHO's methods, under `adaptation.method_overrides.<method>`; the protocol fills only what the config left unset.
    TTRV's preset: lr 5e-7, kl_beta 1e-3, dual_clip 3.0; ECHO's: lr 5e-7, temperature 0.8, n_votes 64."""
    from ttrl_bench.plan.names import resolved_methods

    layers = {"adaptation": {"hyperparameters": {"mcq": {"learning_rate": 1e-5, "kl_beta": 0.01},
                                                 "math": {"learning_rate": 3e-6}},
                             "method_overrides": {"ttrv": {"hyperparameters": {"learning_rate": 7e-6}}}}}
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())
    del base["adaptation"]["hyperparameters"], base["adaptation"]["method_overrides"]  # only the layers above
    specs = resolved_methods(validated(merge(base, layers)), ["ttrv", "ttrl-majority", "echo"])
    ttrv, ttrl, echo = (specs[m]["hyperparameters"] for m in ("ttrv", "ttrl-majority", "echo"))
    assert (ttrv["learning_rate"], ttrv["kl_beta"], ttrv["dual_clip"]) == (7e-6, 0.01, 3.0)  # override > mcq > preset
    assert (ttrl["learning_rate"], ttrl["kl_beta"]) == (1e-5, 0.01)  # the mcq layer, no override
    assert (echo["learning_rate"], echo["kl_beta"], echo["temperature"], echo["n_votes"]) == (3e-6, 0.01, 0.8, 64)
    assert "advantages" not in ttrv  # clean: TRL's (the trainer's default), no protocol value
    # authors: the protocol's values where the config set none (verl's advantages, ECHO's 32 votes), the config's
    # own where it did
    authors = merge(base, merge(layers, {"protocol": "authors", "adaptation": {"hyperparameters": {
        "mcq": {"kl_clamp": 5.0}, "math": {"n_votes": 48}}}}))
    specs = resolved_methods(validated(authors), ["ttrv", "echo"])
    ttrv, echo = specs["ttrv"]["hyperparameters"], specs["echo"]["hyperparameters"]
    assert (ttrv["advantages"], ttrv["kl_clamp"], ttrv["learning_rate"]) == ("verl", 5.0, 7e-6)
    assert (echo["n_votes"], echo["advantages"], echo["learning_rate"]) == (48, "verl", 3e-6)
