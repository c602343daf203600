"""Dry-run checks: what the jobs would discover after hours, the plan reports before any job,
each as a ValueError naming the config key."""

from __future__ import annotations

import difflib
import json
import logging
from contextlib import contextmanager
from pathlib import Path

from ..adaptation.presets import (METHOD_NAMES, OPTIONAL_HYPERPARAMETERS, PRESETS, hyperparameter_sections,
                                  method_task, resolve_method, task_hyperparameters)
from ..datasets.registry import REGISTRY
from ..datasets.sources import BUNDLED_TEST_SIZES, hub_usable
from ..models.source import resolve_model_source
from ..rewards.registry import get_reward, reward_parameters
from .grid import adaptation_samples  # (plan/__init__ imports this module first, then the grid)
from .preflight import check_cache

# profiles/slurm asks SLURM for the partition and account these variables name ($VARS expand at start-up)
SLURM_VARIABLES = {
    "TTRL_SLURM_PARTITION": "the partition of every job",
    "TTRL_SLURM_ACCOUNT": "the account jobs are charged to (empty, with --slurm-no-account, where there is none)",
}


# where each kind of name is listed, for a message that would otherwise print dozens
LISTED_BY = {"datasets": "ttrl-bench datasets list", "methods": "ttrl-bench methods list"}


def did_you_mean(name, known) -> str:
    """" (did you mean a or b?)" with the known names closest to `name` (difflib), or "" where none is close."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def check_known(key: str, names, known) -> None:
    """Every name is one of `known`; else a ValueError naming the key, each unknown name with its closest known
    ones ("did you mean"), and the known names (or the command that lists them, where there are many)."""
    unknown = [n for n in names if n not in known]
    if not unknown:
        return
    hints = [f"{name!r}{did_you_mean(name, known)}" for name in unknown]
    kind = key.rsplit(".", 1)[-1]
    listed = (f"`{LISTED_BY[kind]}` lists the {len(known)} known" if len(known) > 12 and kind in LISTED_BY
              else f"known: {', '.join(sorted(map(str, known)))}")
    raise ValueError(f"config key `{key}`: unknown name(s) {', '.join(hints)}; {listed}")


def check_names(config: dict, models: dict) -> None:
    """Every dataset, method and model a config names exists."""
    check_known("datasets", config["datasets"], REGISTRY)
    check_known("data.sources", config["data"]["sources"], REGISTRY)
    check_known("methods", config["methods"], METHOD_NAMES)
    check_known("adaptation.method_overrides", config["adaptation"]["method_overrides"], METHOD_NAMES)
    for name, block in config["experiments"].items():
        if not block["enabled"]:
            continue
        check_known(f"experiments.{name}.models", block.get("models", []), models)
        check_known(f"experiments.{name}.methods", block.get("methods", []), METHOD_NAMES)
        pairs = [d for pair in block.get("cross", []) for d in pair]
        check_known(f"experiments.{name}.datasets", block.get("datasets", []) + pairs, REGISTRY)


def check_demo_model_alone(models: dict, datasets: list[str], configfiles=(), replaced: bool | None = None) -> None:
    """A model the workflow builds (models.<name>.build: 2 layers trained on the demo digits) runs on the bundled
    demo sets and on local datasets (registry source local:...), not on the papers' Hub datasets. Where a
    --configfile was merged into config/config.yaml (`replaced` False), that merge is the likely cause."""
    built = [name for name, m in models.items() if "build" in m]
    remote = [d for d in datasets if not REGISTRY[d].source.startswith(("bundled:", "local:"))]
    if not built or not remote:
        return
    message = (f"config: the built demo model {built[0]!r} (models.{built[0]}.build) runs on the bundled demo sets and "
               f"local datasets (docs/extending.md), not on {', '.join(remote)} (Hub or paper datasets): give those "
               "a model with a `source`")
    if configfiles and replaced is False:
        message += (f". {', '.join(map(str, configfiles))} was merged into config/config.yaml, whose demo model came "
                    "along; add --replace-workflow-config to run it alone")
    raise ValueError(message)


def check_hyperparameter_keys(config: dict) -> None:
    """Hyper-parameter keys that no preset of their task (or the method they override) knows,
    named by their config path, not by the first method using the section."""
    adaptation = config["adaptation"]
    for task, layer in adaptation["hyperparameters"].items():
        known = task_hyperparameters(task)
        for key in sorted(set(layer) - known):
            raise ValueError(f"config key `adaptation.hyperparameters.{task}.{key}`: unknown hyper-parameter; "
                             f"known for {task} methods: {', '.join(sorted(known))}")
    for method, overrides in adaptation["method_overrides"].items():
        own = (overrides or {}).get("hyperparameters", {})
        known = set((PRESETS[method] or {}).get("hyperparameters", {})) | OPTIONAL_HYPERPARAMETERS
        for key in sorted(set(own) - known):
            raise ValueError(f"config key `adaptation.method_overrides.{method}.hyperparameters.{key}`: unknown "
                             f"hyper-parameter of {method}; known: {', '.join(sorted(known))}")


def check_reward(method: str, spec: dict, overrides: dict | None) -> None:
    """The method's reward accepts its `reward_params` (built once now: a typo fails here, not after
    the queue, in the job's first reward call)."""
    if "reward" not in spec:
        return
    # `uncertainty` is the GRPO reward wrapper's own (adaptation/grpo.py GroupReward: DARE's normalisation)
    params = {k: v for k, v in spec["reward_params"].items() if k != "uncertainty"}
    try:
        get_reward(spec["reward"], **params)
    except (KeyError, TypeError) as err:
        key = (f"adaptation.method_overrides.{method}.reward_params" if "reward_params" in (overrides or {})
               else f"methods (preset {method})")
        raise ValueError(f"config key `{key}`: {err.args[0]}; reward {spec['reward']!r} takes "
                         f"{', '.join(reward_parameters(spec['reward'])) or 'no parameters'}") from None


def resolved_methods(config: dict, methods: list[str]) -> dict[str, dict]:
    """Each adapting method's preset with the config's per-task hyper-parameters and per-method
    overrides applied, its reward built once."""
    check_hyperparameter_keys(config)
    adaptation = config["adaptation"]
    specs = {}
    for method in methods:
        layer = {"rollout_backend": adaptation["rollout_backend"]}
        for section in hyperparameter_sections(method):  # ECHO's methods: the math layer over the mcq one
            layer.update(adaptation["hyperparameters"].get(section, {}))
        overrides = adaptation["method_overrides"].get(method)
        try:
            specs[method] = resolve_method(method, layer, overrides)
        except KeyError as err:
            raise ValueError(f"config key `adaptation.method_overrides.{method}`: {err.args[0]}") from None
        check_reward(method, specs[method], overrides)
    return specs


def warn_mixed_unparsable(plan) -> list[str]:
    """A warning per block whose methods, compared in one table, count unparsable answers differently (a
    preset's `unparsable: answer` beside an override's `no_reward`, a 22-point difference on the demo): a new
    method takes its preset's convention silently. Returned and logged."""
    overridden = plan.config["adaptation"]["method_overrides"]
    warnings = []
    for key, block in plan.blocks:
        conventions = {}  # method -> (its convention, where it is set)
        for method in block["methods"]:
            params = (plan.method_specs.get(method) or {}).get("reward_params", {})
            if "unparsable" in params:
                source = "adaptation.method_overrides" if "reward_params" in overridden.get(method, {}) else "preset"
                conventions[method] = (params["unparsable"], source)
        if len({value for value, _ in conventions.values()}) > 1:
            warnings.append(f"config `{key or 'methods'}`: these methods count unparsable answers differently: "
                            + ", ".join(f"{m} {value} ({source})" for m, (value, source) in conventions.items())
                            + "; set adaptation.method_overrides.<method>.reward_params.unparsable to compare like "
                            "with like (rewards/voting.py)")
    for warning in warnings:
        logging.getLogger(__name__).warning("%s", warning)
    return warnings


def check_methods_fit(plan) -> None:
    """A method that fits none of its block's adaptation datasets would be dropped without a word
    (VR-TTRL in a block of MCQ datasets)."""
    for key, block in plan.blocks:
        trains = block.get("datasets", []) + [pair[0] for pair in block.get("cross", [])]
        for method in block["methods"]:
            if method != "zero-shot" and trains and not any(plan.fits(method, d) for d in trains):
                raise ValueError(
                    f"config key `{key + '.' if key else ''}methods`: {method} adapts on {method_task(method)} "
                    f"datasets and none of {', '.join(sorted(set(trains)))} is one, so it would run nowhere; "
                    "remove it or add a dataset of its task"
                )


def check_slurm(environ, gpu_limit: int | None, most: int) -> None:
    """A SLURM run (profiles/slurm) asks for what the plan says: its variables are set, and no global
    `gpu` limit caps a job's GPUs or holds the cluster to one GPU job at a time. profiles/default sets
    gpu=1 for local runs; Snakemake applies it beside a profile given with --profile. `most`: the
    GPUs of the config's largest job (resources.largest_gpu_request)."""
    for name, what in SLURM_VARIABLES.items():
        if name not in environ:
            raise ValueError(f"environment variable {name} is unset: profiles/slurm submits {what} as ${name}; "
                             f"export {name}=... before snakemake (README, Running on SLURM)")
    if gpu_limit is None:
        return
    if gpu_limit == 1 or gpu_limit < most:
        raise ValueError(
            f"a global resource limit gpu={gpu_limit} on SLURM would cap each job at {gpu_limit} GPU(s) (this config's "
            f"largest job asks for {most}) and run {gpu_limit} GPU(s) of jobs at a time. profiles/default's local "
            "limit is gpu=1, and Snakemake applies it when the SLURM profile is given with --profile: use "
            "`--workflow-profile profiles/slurm` (it replaces profiles/default); to cap a cluster run on purpose, "
            f"`--resources gpu=N` with N >= {max(most, 2)}"
        )


def split_size(plan, dataset: str) -> int | None:
    """Test samples of a dataset (a training set's rows for ECHO's geometry3k / geoqa): its
    prep_stats.json once prepared, the bundled sets' known size before; None where only
    preparation can tell (the resolution filter drops some)."""
    stats = Path(f"{plan.results}/data/{dataset}/prep_stats.json")
    if stats.exists():
        return json.loads(stats.read_text())["splits"].get(REGISTRY[dataset].manifest_split, 0)
    return BUNDLED_TEST_SIZES.get(dataset)


def local_rows(plan, dataset: str) -> tuple[int, str] | None:
    """Before preparation, the rows of a local JSON-lines copy (config `data.sources.<name>.path`): an upper bound
    of its samples (the resolution filter may drop some), and the copy's path; None for other sources."""
    source = plan.config["data"]["sources"].get(dataset) or {}
    path = Path(source["path"]) if source.get("path") else None
    if path is None or not path.is_dir() or source.get("format") not in (None, "json"):
        return None
    files = sorted(path.glob(source.get("files") or REGISTRY[dataset].local.get("files") or "**/*.jsonl"))
    if not files or any(f.suffix != ".jsonl" for f in files):
        return None
    return sum(1 for f in files for line in f.read_text().splitlines() if line.strip()), str(path)


def check_sample_counts(plan) -> None:
    """Adaptation and evaluation sample counts within each dataset's test split (before preparation: within a
    local JSON-lines copy's rows)."""
    for key, block in plan.blocks:
        n = block.get("n_samples", plan.n_adapt)
        key = f"{key}.n_samples" if key and "n_samples" in block else "adaptation.n_samples"
        trains = block.get("datasets", []) + [pair[0] for pair in block.get("cross", [])]
        for dataset in trains:
            size = split_size(plan, dataset)
            adapted = any(plan.fits(m, dataset) for m in plan.grpo_methods if m in block["methods"])
            if n != "all" and size is not None and n > size and adapted:
                raise ValueError(f"config key `{key}`: {n} adaptation samples, but {dataset}'s "
                                 f"{REGISTRY[dataset].manifest_split} split has {size}")
            rows = local_rows(plan, dataset) if size is None else None
            if n != "all" and rows is not None and n > rows[0] and adapted:
                raise ValueError(f"config key `{key}`: {n} adaptation samples, but the local copy of {dataset} "
                                 f"({rows[1]}) has {rows[0]} rows")
    exclude = plan.config["evaluation"]["exclude_adaptation_samples"]
    for run in plan.runs:
        section = plan.section[run.target]
        wanted, size = plan.config["evaluation"][section]["samples"], split_size(plan, run.target)
        if wanted == "all" or size is None:
            continue
        n_adapt = adaptation_samples(run.protocol)
        held = n_adapt if exclude and plan.task[run.target] == "mcq" and n_adapt is not None else 0
        if wanted > size - held:
            raise ValueError(
                f"config key `evaluation.{section}.samples`: {wanted} evaluation samples, but {run.target}'s test "
                f"split has {size}" + (f", {held} of them held out for adaptation" if held else "")
            )


def check_sources(plan) -> None:
    """Local model directories and dataset copies exist; Hub model ids are reachable (a TCP probe
    of 3 s at most, as preparation does for datasets: loading waits minutes before failing)
    unless HF_HUB_OFFLINE=1 says to use the Hugging Face cache."""
    hub = []
    for name in sorted({run.model for run in plan.runs}):
        model = plan.models[name]
        key = "convert_from" if "convert_from" in model else "source"
        if "build" in model or Path(model[key]).exists():
            continue
        try:
            resolve_model_source(model[key], f"models.{name}.{key}")
        except FileNotFoundError as err:
            raise ValueError(str(err)) from None
        hub.append((name, key))
    for dataset in plan.datasets:
        for field in ("path", "class_names"):
            value = (plan.config["data"]["sources"].get(dataset) or {}).get(field)
            if value and not Path(value).exists():
                raise ValueError(f"config key `data.sources.{dataset}.{field}`: {value} does not exist")
    if hub and not hub_usable():
        name, key = hub[0]
        raise ValueError(
            f"config key `models.{name}.{key}`: the Hugging Face Hub is unreachable, so {plan.models[name][key]} "
            "cannot be downloaded; point the key at a local copy, or set HF_HUB_OFFLINE=1 to load models "
            "already in the Hugging Face cache"
        )


@contextmanager
def _quiet(logger: str):
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def layout_samples(plan, job) -> int | None:
    """The adaptation samples a job's batch layout is planned for: one for a per-sample job (each adapt
    call sees one sample), else the protocol's; for "all" the prepared split's (None before)."""
    if job.rule == "adapt_per_sample":
        return 1
    return adaptation_samples(job.protocol) or split_size(plan, job.dataset)


def quiet_layout(hp: dict, gpus: int, n_samples: int) -> dict:
    """adaptation/layout.py's plan_batch_layout without its warnings (the job's to print, once)."""
    from ..adaptation.layout import plan_batch_layout

    with _quiet("ttrl_bench.adaptation.layout"):
        return plan_batch_layout(hp, gpus, n_samples)


def check_requests(plan) -> None:
    """Every job's request decided now (plan/resources.py): a job predicted not to fit its GPU stops the
    dry run naming the job, its predicted peak, the GPU's memory and the keys (cost.decide); so does a
    GRPO batch layout (vote/train split, micro-batch) that cannot run on the job's GPUs, with the
    settings the job will be given (its decided micro-batch included)."""
    from .resources import job_method_settings, job_request  # resources imports the grid, which imports this module

    for job in plan.jobs():
        request = job_request(plan, job)
        if job.rule not in ("adapt", "adapt_per_sample"):
            continue
        hp = job_method_settings(plan, job).get("hyperparameters", {})
        n_samples = layout_samples(plan, job)
        if "num_generations" in hp and n_samples:  # objective presets (Appendix C baselines) have no GRPO batch
            quiet_layout(hp, request.gpus, n_samples)


def run_all(plan, configfiles=(), replaced: bool | None = None) -> None:
    """The checks the plan's constructor did not run (those of the grid, the file system, the network).
    The pre-flight comes before the sources check: it names every missing model and dataset at once.
    `replaced`: whether Snakemake ran with --replace-workflow-config (None: not known here)."""
    check_demo_model_alone(plan.models, plan.datasets, configfiles, replaced)
    check_methods_fit(plan)
    warn_mixed_unparsable(plan)
    check_sample_counts(plan)
    check_cache(plan.config, plan.run_models, plan.datasets, list(configfiles), Path(plan.results))
    check_sources(plan)
    check_requests(plan)  # last: it reads the models' configs, which the checks above find
