"""Dry-run checks: what the jobs would discover after hours, the plan reports before any job,
each as a ValueError naming the config key. The grid's own name and method checks run when the grid is
built (names.py); `run_all` runs the rest.

Layer 6 of the plan (checks): imports every layer below it (docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

import logging
from pathlib import Path

from ..adaptation.presets import method_task
from ..datasets.registry import REGISTRY
from ..datasets.sources import hub_usable
from ..models.source import resolve_model_source
from .cost import quiet_layout
from .grid import adaptation_samples
from .preflight import check_cache
from .resources import job_method_settings, job_request
from .samples import layout_samples, local_rows, split_size

# profiles/slurm asks SLURM for the partition and account these variables name ($VARS expand at start-up)
SLURM_VARIABLES = {
    "TTRL_SLURM_PARTITION": "the partition of every job",
    "TTRL_SLURM_ACCOUNT": "the account jobs are charged to (empty, with --slurm-no-account, where there is none)",
}


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
                             f"export {name}=... before snakemake (docs/slurm.md, Running on SLURM)")
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


def check_requests(plan) -> None:
    """Every job's request decided now (plan/resources.py): a job predicted not to fit its GPU stops the
    dry run naming the job, its predicted peak, the GPU's memory and the keys (cost.decide); so does a
    GRPO batch layout (vote/train split, micro-batch) that cannot run on the job's GPUs, with the
    settings the job will be given (its decided micro-batch included)."""
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
