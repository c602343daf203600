import json

from snakemake.utils import min_version, validate

from ttrl_bench.adaptation.presets import METHOD_NAMES, is_per_sample, method_task, resolve_method
from ttrl_bench.datasets.registry import REGISTRY
from ttrl_bench.evaluation.tasks import task_for

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "../workflow/schemas/config.schema.yaml")


def check_names(key, names, known):
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"config key `{key}`: unknown name(s) {unknown}; known: {', '.join(sorted(known))}"
        )


check_names("datasets", config["datasets"], REGISTRY)
check_names("methods", config["methods"], METHOD_NAMES)
check_names(
    "adaptation.method_overrides",
    config["adaptation"]["method_overrides"],
    METHOD_NAMES,
)

MODELS = config["models"]
DATASETS = config["datasets"]
SEEDS = config["seeds"]
ADAPTING = [m for m in config["methods"] if m != "zero-shot"]
N_ADAPT = config["adaptation"]["n_samples"]
SAMPLING = config["adaptation"]["sampling"]
TASK = {d: task_for(d).name for d in DATASETS}
DEMO_DATASETS = ["demo-digits", "demo-digit-scenes"]  # what build_demo_model trains on


def methods_for(dataset):
    """Methods whose answers fit the dataset's task (MCQ rewards vote on letters, VR-TTRL on boxes)."""
    return [m for m in ADAPTING if method_task(m) == TASK[dataset]]


wildcard_constraints:
    model="|".join(MODELS),
    dataset="|".join(REGISTRY),
    target="|".join(DATASETS),
    train="|".join(DATASETS + ["none"]),
    seed=r"\d+",


def method_spec(method):
    """The resolved preset: the rollout backend and per-task hyper-parameters of the config,
    then per-method overrides."""
    return resolve_method(
        method,
        {
            "rollout_backend": config["adaptation"]["rollout_backend"],
            **config["adaptation"]["hyperparameters"].get(method_task(method), {}),
        },
        config["adaptation"]["method_overrides"].get(method),
    )


# Resolve every method once now so a wrong hyper-parameter stops the run before any job.
METHOD_SPECS = {m: method_spec(m) for m in ADAPTING}
PER_SAMPLE = [m for m in ADAPTING if is_per_sample(m)]
GRPO_METHODS = [m for m in ADAPTING if not is_per_sample(m)]


def eval_dirs():
    """In-domain evaluations: zero-shot on every dataset, each fitting method adapted and evaluated on it."""
    dirs = []
    for model in MODELS:
        for dataset in DATASETS:
            for seed in SEEDS:
                dirs.append(f"results/eval/{model}/zero-shot/none/{dataset}/seed{seed}")
                for method in methods_for(dataset):
                    dirs.append(f"results/eval/{model}/{method}/{dataset}/{dataset}/seed{seed}")
    return dirs


def adapt_dirs():
    return [
        f"results/adapt/{model}/{method}/{dataset}/seed{seed}"
        for model in MODELS
        for dataset in DATASETS
        for method in methods_for(dataset)
        for seed in SEEDS
    ]


def get_final_output():
    return [
        "results/benchmark.duckdb",
        "results/tables/ttrv_table1_layout.md",
        "results/figures/accuracy.png",
        "results/figures/training_curves.png",
        "results/audit/reward_audit.png",
    ]


def get_model_source(wildcards):
    return MODELS[wildcards.model]["source"]


def get_base_model_input(wildcards):
    """A model built by this workflow is an input file; a Hub id is not."""
    if "build" in MODELS[wildcards.model]:
        return MODELS[wildcards.model]["source"]
    return []


def get_eval_model_input(wildcards):
    if wildcards.method == "zero-shot":
        return {"model": get_base_model_input(wildcards)}
    run = f"results/adapt/{wildcards.model}/{wildcards.method}/{wildcards.train}/seed{wildcards.seed}"
    return {"model": f"{run}/model", "run": f"{run}/run.json"}


def get_eval_model_source(wildcards):
    if wildcards.method == "zero-shot":
        return MODELS[wildcards.model]["source"]
    return f"results/adapt/{wildcards.model}/{wildcards.method}/{wildcards.train}/seed{wildcards.seed}/model"


def get_adapt_run_flag(wildcards, input):
    return f"--adapt-run {input.run}" if wildcards.method != "zero-shot" else ""


def get_method_json(wildcards):
    return json.dumps(METHOD_SPECS[wildcards.method])


def get_eval_flags(wildcards):
    """Evaluation options of the target dataset's task (config `evaluation.<task>`)."""
    dataset = wildcards.target if hasattr(wildcards, "target") else wildcards.dataset
    per_task = config["evaluation"][TASK[dataset]]
    exclude = "--exclude-adaptation-samples" if config["evaluation"]["exclude_adaptation_samples"] else ""
    return f"--max-new-tokens {per_task['max_new_tokens']} --eval-samples {per_task['samples']} {exclude}"


def get_params_b(wildcards):
    """Model size in billions of parameters (config `models.<name>.params_b`; the demo ~0)."""
    return MODELS[wildcards.model].get("params_b", 0.0)


def get_gpu_mem_mb(wildcards):
    """Host memory of a GPU job: weights are loaded on the host first (2 bytes per bf16 parameter,
    twice for the reference model of KL-regularised GRPO), plus 8 GB of head room."""
    return int(8000 + 4 * 1000 * get_params_b(wildcards))


def get_adapt_runtime(wildcards):
    """Minutes: TTRV Table 10 reports 3.77 min for a 20-sample adaptation of a 2B-8B model;
    VR-TTRL about 21 s per update of a 7B model, 5 per sample, 200 samples per split."""
    if wildcards.method in PER_SAMPLE:
        return int(30 + 200 * 5 * 21 / 60 * max(1.0, get_params_b(wildcards) / 7))
    return int(30 + 10 * max(1.0, get_params_b(wildcards)))


def get_eval_runtime(wildcards):
    return int(30 + 5 * max(1.0, get_params_b(wildcards)))


def get_paper_model_names():
    return json.dumps({name: m.get("paper_name", name) for name, m in MODELS.items()})


# Every rule runs the package from this checkout, so the same command works in the venv of the
# README and in `--sdm conda` environments (envs/*.yaml), which install the dependencies only.
TTRL_BENCH = f"PYTHONPATH={workflow.basedir}/src${{PYTHONPATH:+:$PYTHONPATH}} python -m ttrl_bench.cli"
