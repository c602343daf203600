"""One published cell, one config: the jobs of a paper table's cell (a model on a dataset) with the settings of
the paper config that reruns it, and nothing else, so that its dry run, pre-flight and plan consider only them
(`ttrl-bench cell ttrv-1 InternVL3-2B ImageNet-A`).

Layer 7 of the plan (top): imports no other plan module; the CLI validates and plans its config
(docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

import copy
from pathlib import Path

from ..datasets.registry import REGISTRY

REPO = Path(__file__).resolve().parents[3]
# the paper config that reruns each paper's tables
PAPER_CONFIGS = {"ttrv": "config/ttrv.yaml", "vr-ttrl": "config/vr-ttrl.yaml", "echo": "config/echo.yaml"}


def split_table(table: str) -> tuple[str, int]:
    """"ttrv-1" -> ("ttrv", 1), as experiments' `table` keys name them."""
    paper, _, number = table.rpartition("-")
    if paper not in PAPER_CONFIGS or not number.isdigit():
        raise ValueError(f"table {table!r}: give a paper and a table number, e.g. ttrv-1 (papers: "
                         f"{', '.join(PAPER_CONFIGS)})")
    return paper, int(number)


def _model_name(config: dict, model: str) -> str:
    """Our name of a model given by ours or by its paper name (`models.<name>.paper_name`)."""
    names = [name for name, entry in config["models"].items() if model in (name, entry.get("paper_name"))]
    if not names:
        known = ", ".join(f"{e.get('paper_name', n)} ({n})" for n, e in config["models"].items())
        raise ValueError(f"model {model!r} is not a model of the config; known: {known}")
    return names[0]


def _dataset_name(config: dict, dataset: str) -> list[str]:
    """Our names of a dataset given by ours, its registry paper name or the config's `tables.dataset_names`."""
    renamed = config.get("tables", {}).get("dataset_names", {})
    return [name for name, spec in REGISTRY.items() if dataset in (name, spec.paper_name, renamed.get(name))]


def cell_config(config: dict, table: str, model: str, dataset: str) -> dict:
    """`config` (a paper config as read, before validation) cut to one cell: the model, the dataset (or the
    cross pairs evaluated on it), the main grid's methods (the table's zero-shot row) and the enabled
    experiments of that table (`experiments.<e>.table`) that run the model on the dataset, each keeping its
    own settings. ValueError naming what the config has where nothing matches."""
    paper, number = split_table(table)
    ours = _model_name(config, model)
    datasets = _dataset_name(config, dataset)
    if not datasets:
        raise ValueError(f"dataset {dataset!r}: no registry entry has this name or paper name")
    out = copy.deepcopy(config)
    out["models"] = {ours: out["models"][ours]}
    main = [d for d in config["datasets"] if d in datasets]
    experiments = {}
    for name, block in config.get("experiments", {}).items():
        if not block.get("enabled") or block.get("table") != f"{paper}-{number}":
            continue
        if ours not in block.get("models", list(config["models"])):
            continue
        kept = {**block, "models": [ours], "datasets": [d for d in block.get("datasets", []) if d in datasets],
                "cross": [pair for pair in block.get("cross", []) if pair[1] in datasets]}
        if kept["datasets"] or kept["cross"]:
            experiments[name] = kept
    if not experiments:
        tables = sorted({b["table"] for b in config.get("experiments", {}).values() if b.get("enabled") and "table" in b})
        raise ValueError(f"no enabled experiment of {paper} Table {number} runs {model} on {dataset} in this config "
                         f"(its tables: {', '.join(tables)}); an experiment's `table` key names its table")
    out["datasets"] = main or sorted({d for b in experiments.values() for d in b["datasets"]}
                                     | {pair[1] for b in experiments.values() for pair in b["cross"]})
    out["experiments"] = experiments
    return out


def cell_file_name(table: str, model: str, dataset: str) -> str:
    """cells/ttrv-1_InternVL3-2B_ImageNet-A.yaml: the config file the cell command writes."""
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in f"{table}_{model}_{dataset}")
    return f"cells/{safe}.yaml"


def run_commands(config_file: Path, card_name: str, gpu_memory_gb: float) -> list[str]:
    """How to run a cell's config, in a directory of its own, from the repository's root: here, and on SLURM
    (profiles/slurm, the workflow profile whose requests come from the plan), and the card the plan's memory and
    minutes assumed."""
    common = f"--directory runs/{config_file.stem} --configfile {config_file.resolve()} --replace-workflow-config"
    return [
        f"run it here: snakemake --cores all {common}",
        "run it on SLURM (export TTRL_SLURM_PARTITION=... TTRL_SLURM_ACCOUNT=... first): snakemake --workflow-profile "
        f"profiles/slurm {common}",
        f"the plan assumed {card_name} GPUs with {gpu_memory_gb:g} GB each (resources.gpu_model / gpu_memory_gb, or "
        "--gpu-model / --gpu-memory-gb): on another card, plan again with its key, and pin it on SLURM with "
        "resources.gpu_model",
        "then results/tables/ in that directory show ours beside the published cell, with the interval",
    ]
