"""Planning: `plan` (every job's GPUs, memory and hours), `cell` (one published cell's jobs,
cut from its paper's config) and `targets` (the Snakemake targets of one method's, dataset's or model's jobs)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path


def cmd_plan(args) -> None:
    from ..plan import Plan, load_config

    _print_plan(Plan(with_card(load_config(*args.config), args.gpu_model)), args.gpu_memory_gb, args.gpus_per_node)


def with_card(config: dict, gpu_model: str | None, gpu_memory_gb: float | None = None) -> dict:
    """The config with `--gpu-model` as its resources.gpu_model (the card the plan fits and times jobs for) and
    `--gpu-memory-gb` as its resources.gpu_memory_gb, where given."""
    if gpu_model:
        config.setdefault("resources", {})["gpu_model"] = gpu_model
    if gpu_memory_gb:
        config.setdefault("resources", {})["gpu_memory_gb"] = gpu_memory_gb
    return config


def cmd_targets(args) -> None:
    """The evaluation outputs (metrics.json) of the config's runs that match every filter given: Snakemake builds
    each one's adaptation and data on the way (docs/running-a-paper.md "One method's jobs")."""
    from ..plan import Plan, load_config

    plan = Plan(load_config(*args.config))
    wanted = {"model": args.model, "method": args.method, "dataset": args.dataset, "seed": args.seed}

    def fields(run) -> dict:
        return {"model": [run.model], "method": [run.method], "dataset": [run.train, run.target],
                "seed": [str(run.seed)]}

    runs = [r for r in plan.runs if all(v is None or v in fields(r)[k] for k, v in wanted.items())]
    if not runs:
        given = ", ".join(f"--{k} {v}" for k, v in wanted.items() if v is not None)
        known = {"model": {r.model for r in plan.runs}, "method": {r.method for r in plan.runs},
                 "dataset": {r.target for r in plan.runs}}
        raise ValueError(f"no job of {' + '.join(args.config)} matches {given}; the config runs "
                         + "; ".join(f"{k}s {', '.join(sorted(v))}" for k, v in known.items()))
    for r in runs:
        print(f"{plan.results}/eval/{r.model}/{r.method}/{r.train}/{r.target}/{r.protocol}/seed{r.seed}/metrics.json")


def _print_plan(plan, gpu_memory_gb, gpus_per_node) -> None:
    from collections import Counter

    from ..plan.protocols import describe
    from ..plan.resources import EVALUATION_MINUTES, fewer_gpus, plan_table

    rows, totals = plan_table(plan, gpu_memory_gb, gpus_per_node)

    def shown(value, form):
        return "-" if value is None else form.format(value)

    card = totals["card"]
    print(f"card: {card.name} (resources.gpu_model: {card.key}; {card.memory_gb:g} GB, throughput x{card.relative:.2f} "
          f"of an H100; {card.source})")
    print(f"{'job':<80} {'GPUs':>4} {'offload':>7} {'micro':>5} {'GPU peak GB':>11} {'host GB':>8} {'min':>6} "
          f"{'limit':>6} {'GPU-h':>7}")
    for r in rows:
        minutes = "?" if r["minutes"] is None and r["rule"] in ("adapt", "adapt_per_sample") else shown(r["minutes"], "{}")
        hours = "?" if r["gpu_hours"] is None else f"{r['gpu_hours']:.2f}"  # n_samples: all (count unknown)
        print(f"{r['job']:<80} {r['gpus']:>4} {str(r['offload']):>7} {shown(r['micro_batch'], '{}'):>5} "
              f"{shown(r['gpu_peak_gb'], '{:.1f}'):>11} {shown(r['host_gb'], '{:.1f}'):>8} {minutes:>6} "
              f"{shown(r.get('limit'), '{}'):>6} {hours:>7}")
    counts = Counter(r["rule"] for r in rows)
    print(f"total: {totals['jobs']} jobs ({', '.join(f'{n} {rule}' for rule, n in counts.items())}), "
          f"{totals['gpu_hours']} GPU-hours ({', '.join(f'{rule} {h}' for rule, h in totals['gpu_hours_by_rule'].items())}), "
          f"{totals['node_hours']} h on one {totals['gpus_per_node']}-GPU node (perfect packing, at least the longest job)")
    parts = totals["gpu_hours_by_part"]
    print(f"GPU-hours on {card.name}, expected case: adaptation {parts['adaptation']}, evaluation {parts['evaluation']}, "
          f"start-up {parts['startup']} ({totals['startup_min']:.1f} min per job, the authors' logs' median)"
          + (f"; {totals['unknown']} GPU job(s) not costed (test or adaptation set size known after preparation)"
             if totals["unknown"] else ""))
    print(f"limits (SLURM runtime, column 'limit'): {totals['margin']:g} x the slowest plausible case (plan/cost.py MARGIN)")
    print(f"adaptation: traced and calibrated peaks and times (calibration factor {totals['factor']} training, "
          f"{totals['prefill_factor']:g} generation prefill; plan/data/calibration.csv); evaluation: {EVALUATION_MINUTES}; "
          "preparation: CPU, not costed (downloads depend on the network)")
    for line in fewer_gpus(plan, gpu_memory_gb):
        print(f"fewer GPUs: {line}")
    for name in plan.configs:  # the config's protocol, and any an experiment names (`protocols`)
        paths = "paths without a suffix" if name == "clean" else f"paths *_{name}"
        where = "the config's" if name == plan.config["protocol"] else f"experiments' ({paths})"
        print(f"protocol {name}, {where} (plan/protocols.py; a key the config sets itself wins):")
        for line in describe(name, plan.configs[name], set(plan.section.values())):
            print(f"  {line}")


def cmd_cell(args) -> None:
    """One published cell's jobs, from its paper's config: the config written, the plan, the published value and
    the authors' log behind it, and the command that runs it in a directory of its own."""
    import copy

    import pandas as pd
    import yaml

    from ..datasets.registry import REGISTRY
    from ..plan import Plan, validated
    from ..plan.cells import PAPER_CONFIGS, REPO, cell_config, cell_file_name, run_commands, split_table
    from ..plan.preflight import needs
    from ..results.author_logs import shipped_runs
    from ..results.provenance import provenance
    from ..results.store import PUBLISHED_CSV

    paper, number = split_table(args.table)
    source = Path(args.config or REPO / PAPER_CONFIGS[paper])
    config = with_card(cell_config(yaml.safe_load(source.read_text()), args.table, args.model, args.dataset),
                       args.gpu_model, args.gpu_memory_gb)  # the cell's file keeps the card: its run is fitted to it
    plan = Plan(validated(copy.deepcopy(config)))
    out = Path(args.out or cell_file_name(args.table, args.model, args.dataset))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# {args.table} {args.model} {args.dataset}: cut from {source} by `ttrl-bench cell`\n"
                   + yaml.safe_dump(config, sort_keys=False))
    print(f"cell config: {out}")
    wanted, problems = needs(plan.config, plan.run_models, plan.datasets)
    for need in wanted:  # sizes are the Hub's to tell: `ttrl-bench fetch` downloads them, offline runs read the cache
        print(f"needs: {need.describe()}")
    for problem in problems:
        print(f"needs: {problem}")
    _print_plan(plan, args.gpu_memory_gb, args.gpus_per_node)
    published = pd.read_csv(PUBLISHED_CSV)
    model = next(iter(plan.paper_model_names().values()))
    dataset = next((REGISTRY[d].paper_name for d in plan.datasets if REGISTRY[d].paper_name), args.dataset)
    cells = published[(published["paper"] == paper) & (published["table"] == number) & (published["model"] == model)
                      & (published["dataset"] == dataset)]
    logs = provenance(cells, shipped_runs()) if paper == "ttrv" else cells.assign(log_file=None, log_accuracy=None)
    for _, cell in logs.iterrows():
        log = f"; the authors' log {cell['log_file']}: {cell['log_accuracy']:.2f}" if pd.notna(cell["log_file"]) else ""
        slot = re.search(r"_(\d+)e_", str(cell["log_file"]))  # run.sh:51 writes ${EPISODE}e there: the epochs
        if log and slot and pd.notna(cell["log_epochs"]) and int(slot.group(1)) != int(cell["log_epochs"]):
            log += (f" (its '{slot.group(1)}e' is not epochs: older runs wrote the sample count there; its config "
                    f"trains {int(cell['log_n_adapt'])} samples for {int(cell['log_epochs'])} epochs)")
        print(f"published: {paper} Table {number} {model} {cell['method']} {dataset} {cell['metric']} {cell['value']:.2f}{log}")
    from ..plan.cards import config_card, gpu_memory_gb

    for line in run_commands(out, config_card(plan.config).name, gpu_memory_gb(plan.config)):
        print(line)


def _gpus() -> argparse.ArgumentParser:
    """The options plan and cell share: the GPUs the plan decides for."""
    gpus = argparse.ArgumentParser(add_help=False)
    from ..plan.cards import CARDS

    gpus.add_argument("--gpu-model", choices=sorted(CARDS), default=None,
                      help="the GPU card (default: config resources.gpu_model, else h100: H100 80 GB)")
    gpus.add_argument("--gpu-memory-gb", type=float, default=None,
                      help="overrides the card's memory (default: config resources.gpu_memory_gb, else the card's)")
    gpus.add_argument("--gpus-per-node", type=int, default=8, help="the GPUs of one node, for the node-hours total")
    return gpus


def _add_plan(sub) -> None:
    p = sub.add_parser("plan", parents=[_gpus()],
                       help="each adaptation job's GPUs, predicted GPU peak, host memory, minutes, GPU-hours")
    p.add_argument("config", nargs="+", help="config YAML file(s), merged in order")
    p.set_defaults(func=cmd_plan, rerun=False)  # read by a person, not a job log


def _add_cell(sub) -> None:
    p = sub.add_parser("cell", parents=[_gpus()],
                       help="one published cell's jobs from its paper config: config, plan, published value")
    p.add_argument("table", help="the paper's table, e.g. ttrv-1")
    p.add_argument("model", help="the model, by the paper's name (InternVL3-2B) or ours")
    p.add_argument("dataset", help="the dataset, by the paper's name (ImageNet-A) or ours")
    p.add_argument("--config", default=None, help="the paper config to cut it from (default: the paper's, config/<paper>.yaml)")
    p.add_argument("--out", default=None, help="where to write the cell's config (default: cells/<table>_<model>_<dataset>.yaml)")
    p.set_defaults(func=cmd_cell, rerun=False)


def _add_targets(sub) -> None:
    p = sub.add_parser("targets", help="the Snakemake targets of one method's, dataset's or model's jobs of a config")
    p.add_argument("config", nargs="+", help="config YAML file(s), merged in order (an overlay: config/config.yaml first)")
    p.add_argument("--method", default=None, help="only this method's runs (zero-shot: the unadapted model's)")
    p.add_argument("--dataset", default=None, help="only runs that adapt on or evaluate this dataset")
    p.add_argument("--model", default=None, help="only this model's runs (the config's name)")
    p.add_argument("--seed", default=None, help="only this seed's runs")
    p.set_defaults(func=cmd_targets, rerun=False)  # read by a person or a shell, not a job log


PARSERS = {"plan": _add_plan, "cell": _add_cell, "targets": _add_targets}
