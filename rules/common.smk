import json
import re
import shlex
import sys
import zlib
from pathlib import Path

import jsonschema
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

# The package of this checkout, in this process as in every job (below: TTRL_BENCH)
SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, SRC)

from ttrl_bench.adaptation.presets import METHOD_NAMES, is_per_sample, method_task, resolve_method
from ttrl_bench.datasets.registry import REGISTRY
from ttrl_bench.datasets.sources import BUNDLED_TEST_SIZES, hub_usable
from ttrl_bench.evaluation.tasks import task_for
from ttrl_bench.models.source import resolve_model_source
from ttrl_bench.plan.preflight import check_cache
from ttrl_bench.results.paper_tables import PAPER_TABLES
from ttrl_bench.runs.launch import default_gpus, launcher, machine_has_gpu, needs_offload

min_version("9.0")


configfile: "config/config.yaml"


SCHEMA = "../workflow/schemas/config.schema.yaml"


def schema_error(config, schema_path):
    """The schema's most relevant error in one line, the offending key first (Snakemake's own
    message prints it after the whole schema)."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    error = jsonschema.exceptions.best_match(jsonschema.validators.validator_for(schema)(schema).iter_errors(config))
    path = [str(part) for part in error.absolute_path]
    if error.validator == "additionalProperties":  # the unknown key itself, not its parent
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"config key `{'.'.join(path + unknown[:1])}`: unknown key (every key is in workflow/schemas/config.schema.yaml)"
    return f"config key `{'.'.join(path) or '(top level)'}`: {error.message}"


try:
    validate(config, SCHEMA)  # also fills in the schema's defaults
except WorkflowError:
    raise ValueError(schema_error(config, Path(workflow.current_basedir) / SCHEMA)) from None


def check_names(key, names, known):
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"config key `{key}`: unknown name(s) {unknown}; known: {', '.join(sorted(known))}"
        )


MODELS = config["models"]
BUILD_FAMILY = {"tiny-qwen2.5-vl": "qwen2_5_vl", "tiny-internvl": "internvl"}  # models.<name>.build
for _name, _model in MODELS.items():  # rule convert_model writes a converted model's source
    if "convert_from" in _model:
        _model["source"] = f"results/models/converted/{_name}"
SEEDS = config["seeds"]
N_ADAPT = config["adaptation"]["n_samples"]
SAMPLING = config["adaptation"]["sampling"]
DEMO_DATASETS = ["demo-digits", "demo-digit-scenes"]  # what build_demo_model trains on

# The main grid (models x methods x datasets x seeds) plus every enabled experiment: a named
# block of the papers' ablations and protocols (config `experiments`), e.g. TTRV Table 3.
EXPERIMENTS = {name: e for name, e in config["experiments"].items() if e["enabled"]}
MAIN_MODELS = [name for name, m in MODELS.items() if m.get("main_grid", True)]
BLOCKS = [{"models": MAIN_MODELS, "methods": config["methods"], "datasets": config["datasets"]}]
BLOCKS += list(EXPERIMENTS.values())

check_names("datasets", config["datasets"], REGISTRY)
check_names("data.sources", config["data"]["sources"], REGISTRY)
check_names("methods", config["methods"], METHOD_NAMES)
check_names("adaptation.method_overrides", config["adaptation"]["method_overrides"], METHOD_NAMES)
for name, block in EXPERIMENTS.items():
    check_names(f"experiments.{name}.models", block.get("models", []), MODELS)
    check_names(f"experiments.{name}.methods", block.get("methods", []), METHOD_NAMES)
    pairs = [d for pair in block.get("cross", []) for d in pair]
    check_names(f"experiments.{name}.datasets", block.get("datasets", []) + pairs, REGISTRY)

DATASETS = sorted({d for b in BLOCKS for d in b.get("datasets", []) + [x for p in b.get("cross", []) for x in p]})
ADAPTING = sorted({m for b in BLOCKS for m in b["methods"] if m != "zero-shot"})
TASK = {d: task_for(d).family for d in DATASETS}
# The config section of a dataset's evaluation options: its task family's, or `evaluation.math` for
# the math task (ECHO), which votes like MCQ but is scored by sampled pass@k
SECTION = {d: "math" if REGISTRY[d].task == "math" else TASK[d] for d in DATASETS}

if any("build" in m for m in MODELS.values()) and any(not REGISTRY[d].source.startswith("bundled:") for d in DATASETS):
    raise ValueError(
        "config: the built demo model is configured together with paper datasets. A --configfile is "
        "merged into config/config.yaml; add --replace-workflow-config to use the paper config alone."
    )


def fits(method, dataset):
    """A method's answers fit the dataset's task (MCQ rewards vote on letters, VR-TTRL on boxes)."""
    return method != "zero-shot" and method_task(method) == TASK[dataset]


def protocol(block):
    """The adaptation-set protocol as a path level: n<samples>_<sampling>, e.g. n20_random."""
    return f"n{block.get('n_samples', N_ADAPT)}_{block.get('sampling', SAMPLING)}"


MAIN_PROTOCOL = protocol({})


def zero_shot_protocol(proto):
    """A zero-shot row depends on the protocol only through the excluded adaptation samples:
    without exclusion every protocol shares the main grid's zero-shot evaluation."""
    return proto if config["evaluation"]["exclude_adaptation_samples"] else MAIN_PROTOCOL


def run_grid():
    """Every evaluation as (model, method, train, target, protocol, seed): zero-shot rows have
    train "none"; `cross` pairs adapt on train and evaluate on target (TTRV Table 12)."""
    runs = set()
    for block in BLOCKS:
        seeds, proto = block.get("seeds", SEEDS), protocol(block)
        pairs = [(d, d) for d in block.get("datasets", [])] + [tuple(p) for p in block.get("cross", [])]
        for model in block.get("models", list(MODELS)):
            for seed in seeds:
                for train, target in pairs:
                    if "zero-shot" in block["methods"]:
                        runs.add((model, "zero-shot", "none", target, zero_shot_protocol(proto), seed))
                    runs.update((model, m, train, target, proto, seed) for m in block["methods"] if fits(m, train))
    return sorted(runs)


RUNS = run_grid()


def one_of(names):
    """A wildcard regex matching exactly these names ("refcoco+-testA" holds a regex character)."""
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    model=one_of(MODELS),
    dataset=one_of(REGISTRY),
    target=one_of(DATASETS),
    train=one_of(DATASETS + ["none"]),
    protocol=r"n(\d+|all)_(random|biased-\d+)",
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
    return [f"results/eval/{m}/{method}/{train}/{target}/{p}/seed{seed}" for m, method, train, target, p, seed in RUNS]


def adapt_dirs():
    """One adaptation per (model, method, train dataset, protocol, seed), whatever it is evaluated on."""
    adapted = {(m, method, train, p, seed) for m, method, train, _, p, seed in RUNS if method != "zero-shot"}
    return [f"results/adapt/{m}/{method}/{train}/{p}/seed{seed}" for m, method, train, p, seed in sorted(adapted)]


def data_dirs():
    return [f"results/data/{d}" for d in DATASETS]


def get_final_output():
    return [
        "results/benchmark.duckdb",
        "results/tables/ttrv_table1_layout.md",
        "results/tables/fidelity.md",
        "results/figures/accuracy.png",
        "results/figures/training_curves.png",
        "results/figures/cross_dataset.png",
        "results/figures/step_costs.png",
        "results/audit/reward_audit.png",
    ]


def get_model_source(wildcards):
    return MODELS[wildcards.model]["source"]


def get_base_model_input(wildcards):
    """A model built or converted by this workflow is an input file; a Hub id is not."""
    if "build" in MODELS[wildcards.model] or "convert_from" in MODELS[wildcards.model]:
        return MODELS[wildcards.model]["source"]
    return []


def get_eval_model_input(wildcards):
    if wildcards.method == "zero-shot":
        return {"model": get_base_model_input(wildcards)}
    run = f"results/adapt/{wildcards.model}/{wildcards.method}/{wildcards.train}/{wildcards.protocol}/seed{wildcards.seed}"
    return {"model": f"{run}/model", "run": f"{run}/run.json"}


def get_eval_model_source(wildcards):
    if wildcards.method == "zero-shot":
        return MODELS[wildcards.model]["source"]
    return f"results/adapt/{wildcards.model}/{wildcards.method}/{wildcards.train}/{wildcards.protocol}/seed{wildcards.seed}/model"


def get_adapt_run_flag(wildcards, input):
    return f"--adapt-run {input.run}" if wildcards.method != "zero-shot" else ""


def get_method_json(wildcards):
    """The resolved preset, plus the colocated vLLM engine's settings (config `adaptation.vllm`)."""
    return json.dumps({**METHOD_SPECS[wildcards.method], "vllm": config["adaptation"]["vllm"]})


def get_eval_vllm_settings(wildcards):
    """vLLM engine settings of greedy evaluation (config `evaluation.vllm`), as one JSON argument."""
    return json.dumps(config["evaluation"]["vllm"])


def get_protocol_flags(wildcards):
    n_samples, sampling = wildcards.protocol[1:].split("_", 1)
    return f"--n-adapt {n_samples} --sampling {sampling}"


def get_eval_flags(wildcards):
    """Evaluation options of the target dataset's task (config `evaluation.<task>`)."""
    dataset = wildcards.target if hasattr(wildcards, "target") else wildcards.dataset
    per_task = config["evaluation"][SECTION[dataset]]
    exclude = "--exclude-adaptation-samples" if config["evaluation"]["exclude_adaptation_samples"] else ""
    sam2 = f"--sam2 {per_task['sam2']}" if per_task.get("sam2") else ""
    empty = f"--empty-mask-iou {per_task['empty_mask_iou']}" if per_task.get("empty_mask_iou") else ""
    parser = f"--choice-parser {per_task['choice_parser']}" if per_task.get("choice_parser") else ""
    sampled = ""
    if SECTION[dataset] == "math":  # ECHO: pass@k of sampled completions at the validation temperature
        sampled = (f"--temperature {per_task['temperature']} --top-p {per_task['top_p']} "
                   f"--n-samples {per_task['n_samples']} --pass-k {','.join(map(str, per_task['pass_k']))}")
    return (f"--max-new-tokens {per_task['max_new_tokens']} --eval-samples {per_task['samples']} {exclude} {sam2} "
            f"{empty} {parser} {sampled}")


def get_params_b(wildcards):
    """Model size in billions of parameters (config `models.<name>.params_b`; the demo ~0)."""
    return MODELS[wildcards.model].get("params_b", 0.0)


def get_gpus(wildcards):
    """GPUs of an adaptation job: `models.<name>.gpus`, else enough for the training state of a model
    of `params_b` (src/ttrl_bench/runs/launch.py: 1 for 2B, 2 for 4B, 4 for 7-8B)."""
    model = MODELS[wildcards.model]
    return model.get("gpus") or default_gpus(get_params_b(wildcards))


def gpu_jobs_on_cpu():
    """A local run on a machine without a GPU runs the GPU rules on its cores: their `gpu` resource
    would hold them to one at a time (profiles/default: gpu=1) for a GPU that is not there, so it is 0
    and jobs share the cores (each pins its own threads: cli.pin_numerics). Cluster jobs always ask.
    Asked per job, not at parse time: Snakemake knows its executor only once it runs the workflow."""
    return workflow.local_exec and not machine_has_gpu()


def get_gpu_slots(wildcards):
    """The `gpu` resource of an adaptation job: its GPUs (get_gpus), 0 where jobs run on the CPU."""
    return 0 if gpu_jobs_on_cpu() else get_gpus(wildcards)


def get_eval_gpu_slots(wildcards):
    """The `gpu` resource of an evaluation job: one GPU, 0 where jobs run on the CPU."""
    return 0 if gpu_jobs_on_cpu() else 1


def get_gpu_mem_mb(wildcards):
    """Host memory of an evaluation job: the weights are loaded on the host first (2 bytes per bf16
    parameter, doubled for safety), plus 8 GB of head room."""
    return int(8000 + 4 * 1000 * get_params_b(wildcards))


def get_adapt_mem_mb(wildcards):
    """Host memory of an adaptation job: every process loads the weights on the host in fp32 (4 bytes
    per parameter), an offloaded job keeps its training state there (18), plus 8 GB of head room."""
    params_b, gpus = get_params_b(wildcards), get_gpus(wildcards)
    return int(8000 + 1000 * params_b * (4 * gpus + (18 if needs_offload(params_b, gpus) else 0)))


def get_launcher(wildcards):
    """`ttrl-bench` as one process, or under `accelerate launch` with FSDP2 over the job's GPUs; the
    rendezvous port is derived from the job so that jobs sharing a node do not collide."""
    port = 29500 + zlib.crc32("/".join(wildcards).encode()) % 2000
    return launcher(get_gpus(wildcards), get_params_b(wildcards), port)


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
# The checkout reaches the jobs through a shell prefix (cluster jobs parse this file again), never
# through a rule's command or params: a workdir that is moved, copied or has a space in its path
# plans the same jobs.
# (braces doubled: Snakemake formats the prefix like a rule's command)
QUOTED_SRC = shlex.quote(SRC).replace("{", "{{").replace("}", "}}")
shell.prefix(f"export PYTHONPATH={QUOTED_SRC}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; ")
TTRL_BENCH = "python -m ttrl_bench.cli"


def adapted_weights(path):
    """An adaptation's weights: deleted once evaluated (temp()) unless config
    `adaptation.keep_adapted_weights` keeps them for reruns by hand."""
    return directory(path) if config["adaptation"]["keep_adapted_weights"] else temp(directory(path))


# --- fail fast: what the jobs would discover after hours, the dry run reports, naming the key ----


def test_samples_of(dataset):
    """Test samples of a dataset (a training set's rows for ECHO's geometry3k / geoqa): its
    prep_stats.json once prepared, the bundled sets' known size before; None where only
    preparation can tell (the resolution filter drops some)."""
    stats = Path(f"results/data/{dataset}/prep_stats.json")
    if stats.exists():
        return json.loads(stats.read_text())["splits"].get(REGISTRY[dataset].manifest_split, 0)
    return BUNDLED_TEST_SIZES.get(dataset)


def check_sample_counts():
    """Adaptation and evaluation sample counts within each dataset's test split."""
    for key, block in [("adaptation", BLOCKS[0])] + [(f"experiments.{n}", e) for n, e in EXPERIMENTS.items()]:
        n = block.get("n_samples", N_ADAPT)
        key = f"{key}.n_samples" if key == "adaptation" or "n_samples" in block else "adaptation.n_samples"
        trains = block.get("datasets", []) + [pair[0] for pair in block.get("cross", [])]
        for dataset in trains:
            size = test_samples_of(dataset)
            if n != "all" and size is not None and n > size and any(fits(m, dataset) for m in GRPO_METHODS if m in block["methods"]):
                raise ValueError(f"config key `{key}`: {n} adaptation samples, but {dataset}'s "
                                 f"{REGISTRY[dataset].manifest_split} split has {size}")
    exclude = config["evaluation"]["exclude_adaptation_samples"]
    for model, method, train, target, proto, seed in RUNS:
        wanted, size = config["evaluation"][SECTION[target]]["samples"], test_samples_of(target)
        if wanted == "all" or size is None:
            continue
        n_adapt = proto[1:].split("_")[0]
        held = int(n_adapt) if exclude and TASK[target] == "mcq" and n_adapt != "all" else 0
        if wanted > size - held:
            raise ValueError(
                f"config key `evaluation.{SECTION[target]}.samples`: {wanted} evaluation samples, but {target}'s test "
                f"split has {size}" + (f", {held} of them held out for adaptation" if held else "")
            )


def check_sources():
    """Local model directories and dataset copies exist; Hub model ids are reachable (a TCP probe
    of 3 s at most, as preparation does for datasets: loading waits minutes before failing)
    unless HF_HUB_OFFLINE=1 says to use the Hugging Face cache."""
    hub = []
    for name in sorted({run[0] for run in RUNS}):
        source = MODELS[name].get("convert_from", MODELS[name]["source"])
        if "build" in MODELS[name] or Path(source).exists():
            continue
        key = "convert_from" if "convert_from" in MODELS[name] else "source"
        try:
            resolve_model_source(source, f"models.{name}.{key}")
        except FileNotFoundError as err:
            raise ValueError(str(err)) from None
        hub.append(name)
    for dataset in DATASETS:
        for field in ("path", "class_names"):
            value = (config["data"]["sources"].get(dataset) or {}).get(field)
            if value and not Path(value).exists():
                raise ValueError(f"config key `data.sources.{dataset}.{field}`: {value} does not exist")
    if hub and not hub_usable():
        raise ValueError(
            f"config key `models.{hub[0]}.{'convert_from' if 'convert_from' in MODELS[hub[0]] else 'source'}`: the "
            f"Hugging Face Hub is unreachable, so {MODELS[hub[0]].get('convert_from', MODELS[hub[0]]['source'])} cannot be downloaded; point the key at a local copy, or set "
            "HF_HUB_OFFLINE=1 to load models already in the Hugging Face cache"
        )


check_sample_counts()
# every model and dataset missing from the HF cache or its local path, with the fetch command
check_cache(config, sorted({run[0] for run in RUNS}), DATASETS, workflow.overwrite_configfiles)
check_sources()


def get_build_family(wildcards):
    return BUILD_FAMILY[MODELS[wildcards.model]["build"]]


def get_convert_from(wildcards):
    return MODELS[wildcards.model]["convert_from"]
