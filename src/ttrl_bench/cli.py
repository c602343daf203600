"""`ttrl-bench`: one subcommand per pipeline step. Every Snakemake rule calls one of these, so
any single step can be rerun by hand with the command line printed in its log."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from .runs.progress import readable_progress

log = logging.getLogger("ttrl_bench")


def _n_adapt(value: str) -> int | str:
    return value if value == "all" else int(value)


def cmd_datasets_list(args) -> None:
    from .datasets.registry import REGISTRY

    if args.action == "show":
        _show("dataset", args.name, REGISTRY, lambda spec: vars(spec))
        return
    rows = [("name", "task", "metric", "split", "paper column", "source")]
    rows += [(s.name, s.task, s.metric, s.split, s.paper_name, s.source) for s in REGISTRY.values()]
    _print_columns(rows)


def _show(kind: str, name: str | None, known: dict, fields) -> None:
    """One registry entry or preset, field by field (`datasets show NAME`, `methods show NAME`)."""
    from .plan.checks import did_you_mean

    if name is None:
        raise ValueError(f"`ttrl-bench {kind}s show` needs a name, e.g. `ttrl-bench {kind}s show {next(iter(known))}`")
    if name not in known:
        raise ValueError(f"no {kind} {name!r}{did_you_mean(name, known)}; `ttrl-bench {kind}s list` lists them")
    entry = fields(known[name])
    if entry is None:
        print(f"{name}: no adaptation (the base model, evaluated greedily)")
        return
    for key, value in entry.items():
        if value not in ("", (), {}, None):
            print(f"{key}: {json.dumps(value, default=str) if isinstance(value, (dict, list, tuple)) else value}")


def _print_columns(rows: list[tuple[str, ...]]) -> None:
    """Rows of strings as left-aligned columns, the first row the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def cmd_methods_list(args) -> None:
    from .adaptation.presets import PRESETS, method_task
    from .rewards.registry import reward_parameters

    if args.action == "show":  # the preset, its task and the parameters its reward takes
        _show("method", args.name, PRESETS, lambda p: p and {"task": method_task(args.name), **p,
                                                            "reward accepts": reward_parameters(p["reward"])
                                                            if "reward" in p else []})
        return

    def row(m, p):  # update: TRL's GRPO, ECHO's rule, or a non-GRPO objective (VR-TTRL Appendix C)
        if p is None:
            return (m, "any", "-", "-", "no adaptation")
        update = p.get("objective") or p.get("update", {}).get("rule", "grpo")
        return (m, method_task(m), p.get("reward", "-"), update, p["source"])

    _print_columns([("name", "task", "reward", "update", "source")] + [row(m, p) for m, p in PRESETS.items()])


def cmd_fetch(args) -> None:
    from .plan import Plan, load_config
    from .plan.preflight import fetch, fetch_command

    plan = Plan(load_config(*args.configfiles))  # the models and datasets of its runs, as the dry run checks them
    fetched = fetch(plan.config, plan.run_models, plan.datasets, Path(args.results))
    log.info("fetched %d model(s) and dataset(s) into the Hugging Face cache; `snakemake -n` with HF_HUB_OFFLINE=1 "
             "now finds them (%s)", len(fetched), fetch_command(args.configfiles))


def cmd_prepare_data(args) -> None:
    from .datasets.prepare import prepare_dataset

    stats = prepare_dataset(args.dataset, Path(args.out), args.seed, args.resolution_rule, json.loads(args.source_json),
                            args.items)
    log.info("prepared %s: %s", args.dataset, stats)


def cmd_build_demo_model(args) -> None:
    from PIL import Image

    from .datasets.prepare import load_manifest
    from .models.tiny import build_demo_model

    rows = [
        {**row, "data_dir": Path(data_dir)}
        for data_dir in args.data
        for row in load_manifest(Path(data_dir), "train").to_dict("records")
    ]
    info = build_demo_model(
        Path(args.out), rows, lambda r: Image.open(r["data_dir"] / r["image"]).convert("RGB"), args.steps, seed=args.seed,
        family=args.family,
    )
    log.info("built demo model: %s", info)


def cmd_convert_model(args) -> None:
    from .models.convert_internvl import convert_internvl

    log.info("converted model: %s", convert_internvl(args.source, Path(args.out)))


def _adaptation_samples(data_dir: Path, n_adapt, seed: int, sampling: str, split: str = "test"):
    """The samples a method adapts on: of the test split (test-time RL), or of a training set's
    rows (registry split "train": ECHO's Geometry3k and GeoQA, where MM-UPT and ECHO train; VR-TTRL
    Table 11's reasonseg-train and refcocog-train, where its offline variant trains)."""
    from .datasets import authors_items
    from .datasets.prepare import load_manifest
    from .datasets.sampling import select_adaptation_samples

    try:
        manifest = load_manifest(data_dir)
        if "item_source" in manifest and (manifest["item_source"] == authors_items.ITEM_SOURCE).any():
            dataset = json.loads((data_dir / "prep_stats.json").read_text())["dataset"]
            return authors_items.adaptation_samples(manifest, dataset, n_adapt, sampling, seed)  # their list, as shipped
        pool = manifest[manifest["split"] == split].reset_index(drop=True)
        if pool.empty:
            raise ValueError(f"the prepared dataset has no {split!r} samples")
        return select_adaptation_samples(pool, n_adapt, seed, sampling)
    except ValueError as err:  # the dry run checks this too, once the dataset is prepared
        raise ValueError(f"{data_dir}: {err} (config adaptation.n_samples or experiments.<name>.n_samples)") from err


def _run_identity(args, train_dataset: str, target_dataset: str) -> dict:
    return {
        "run_id": f"{args.model_name}/{args.method}/{train_dataset}/{target_dataset}/n{args.n_adapt}_{args.sampling}/seed{args.seed}",
        "model": args.model_name,
        "method": args.method,
        "train_dataset": train_dataset,
        "target_dataset": target_dataset,
        "n_adapt": args.n_adapt,
        "sampling": args.sampling,
        "seed": args.seed,
    }


def _method_spec(args) -> dict:
    """`--method-json` (what the workflow passes: the preset with the config's overrides), else the
    preset named by `--method` as shipped (adaptation/presets.py)."""
    from .adaptation.presets import resolve_method

    if args.method_json:
        return json.loads(args.method_json)
    spec = resolve_method(args.method)
    if spec is None:
        raise ValueError(f"--method {args.method}: this method does not adapt; run `ttrl-bench evaluate` instead")
    return spec


def cmd_adapt(args) -> None:
    from .adaptation.grpo import adapt
    from .datasets import authors_items
    from .datasets.registry import get_dataset
    from .evaluation.tasks import task_for
    from .generation.precision import adaptation_precision
    from .models.families import use_chat_template
    from .models.loading import checkpoint_dtype, load_model
    from .runs.processes import process_state
    from .runs.provenance import provenance

    method = _method_spec(args)
    hp = method.get("hyperparameters", {})
    out = Path(args.out)
    split = get_dataset(args.dataset).manifest_split
    samples = _adaptation_samples(Path(args.data), args.n_adapt, args.seed, args.sampling, split)
    task = task_for(args.dataset, choice_parser=hp.get("answer_parser", "robust"))  # the votes' parser
    if hp.get("chat_template", "model") == "authors" and task.family == "mcq":
        samples = samples.assign(prompt=authors_items.authors_texts(samples))
    log.info("adapting %s with %s on %d %s samples of %s", args.model_name, args.method, len(samples), split,
             args.dataset)
    stored = checkpoint_dtype(args.model_source)
    model, processor = load_model(args.model_source, dtype="fp32")  # master weights, whatever is stored
    log.info("chat template: %s", use_chat_template(processor, model.config, hp.get("chat_template", "model")))
    start = time.perf_counter()
    train_log = adapt(model, processor, samples, Path(args.data), method, out, args.seed, task=task,
                      save_dtype=stored, save_to=out / "model")
    seconds = time.perf_counter() - start
    if not process_state().is_main_process:
        return  # one process writes the job's files
    train_log.to_parquet(out / "train_log.parquet", index=False)
    if train_log.attrs["verifications"]:  # T3RL: the verifier's decision on every rollout
        import pandas as pd

        pd.DataFrame(train_log.attrs["verifications"]).to_parquet(out / "verifications.parquet", index=False)
    meta = {
        **_run_identity(args, args.dataset, args.dataset),
        "adapt_seconds": seconds,
        "adapt_sample_ids": list(samples["id"]),
        "optimizer_steps": train_log.attrs["optimizer_steps"],
        "losses": train_log.attrs["losses"],
        "learning_rates": train_log.attrs["learning_rates"],  # per optimizer step (verl logs actor/lr per round)
        "rollout_temperature": train_log.attrs["temperature"],
        "processes": process_state().num_processes,
        "weights_changed": train_log.attrs["weights_changed"],
        "weights_changed_saved": train_log.attrs["weights_changed_saved"],
        "saved_dtype": str(stored).removeprefix("torch."),
        "precision": adaptation_precision(model),
        **provenance({"method": method, "model_source": args.model_source, "n_adapt": args.n_adapt,
                      "sampling": args.sampling, "seed": args.seed}),
    }
    (out / "run.json").write_text(json.dumps(meta, indent=2, default=str))
    log.info("adapted in %.1f s", seconds)


def _evaluation_set(data_dir: Path, args):
    """The test samples a table row is scored on, the same for every method of a dataset:
    MCQ: the test split minus the adaptation samples (if excluded); grounding: `--eval-samples`
    seeded test samples (VR-TTRL: 200 per split), which per-sample methods also adapt on."""
    from .datasets import authors_items
    from .datasets.prepare import load_manifest
    from .datasets.sampling import select_adaptation_samples
    from .evaluation.tasks import MathTask, authors_math_prompts, task_for

    task = task_for(args.dataset, args.sam2, data_dir, args.empty_mask_iou, args.choice_parser, args.pass_k,
                    getattr(args, "input_size", None), getattr(args, "query_form", "as_given"),
                    getattr(args, "sam2_multimask", "best_score"), grader=getattr(args, "grader", "exact"))
    test = load_manifest(data_dir, "test")
    if getattr(args, "prompt", "training") == "authors" and isinstance(task, MathTask):
        test = authors_math_prompts(test)  # the ECHO authors' evaluation prompt (config evaluation.math.prompt)
    if getattr(args, "chat_template", "model") == "authors" and task.family == "mcq":
        test = test.assign(prompt=authors_items.authors_texts(test))  # the text their template receives
    if task.family == "mcq" and args.exclude_adaptation_samples:
        # the authors' adaptation items are rows of their own (other options for the same image): held out by image
        column = "source_id" if "item_id" in test else "id"
        held_out = set(_adaptation_samples(data_dir, args.n_adapt, args.seed, args.sampling)[column])
        test = test[~test[column].isin(held_out)].reset_index(drop=True)
    if args.eval_samples != "all" and args.eval_samples > len(test):
        raise ValueError(f"--eval-samples {args.eval_samples} (config evaluation.{task.family}.samples): {args.dataset} "
                         f"has {len(test)} test samples to evaluate")
    if args.eval_samples != "all" and args.eval_samples < len(test):
        test = select_adaptation_samples(test, args.eval_samples, args.seed)
    if task.family == "grounding":  # the query's form and the image size the model is shown (VR-TTRL)
        test = task.view(test)
    return test, task


def _items_of(data_dir: Path) -> str:
    """Whose test items a prepared dataset holds: "ttrv-authors" (their item lists) or "ours"."""
    stats = Path(data_dir) / "prep_stats.json"
    return json.loads(stats.read_text()).get("items", "ours") if stats.exists() else "ours"


def _eval_provenance(args, train_dataset: str, adapt_meta: dict) -> dict:
    """The run's identity and provenance for metrics.json; `items` (whose test items) stays out of the hash."""
    from .runs.provenance import provenance

    extra = _run_identity(args, train_dataset, args.dataset)
    params = {**extra, "adapt_config_hash": adapt_meta.get("config_hash"), "max_new_tokens": args.max_new_tokens,
              "eval_samples": args.eval_samples, "exclude_adaptation_samples": args.exclude_adaptation_samples}
    sampling = _eval_sampling(args)
    if sampling:  # greedy runs keep their hash
        params["sampling"] = sampling
    return {**extra, "adapt_seconds": adapt_meta.get("adapt_seconds"), **({"sampling": sampling} if sampling else {}),
            "items": _items_of(Path(args.data)), "protocol": getattr(args, "protocol", "clean"), **provenance(params)}


def _eval_sampling(args) -> dict | None:
    """Sampled evaluation ({n, temperature, top_p, seed}) for a temperature above 0, else None
    (greedy). ECHO's pass@k (config evaluation.math)."""
    if args.temperature <= 0:
        if args.n_samples != 1 or max(args.pass_k) > 1:
            raise ValueError(f"--n-samples {args.n_samples} / --pass-k {args.pass_k} need a sampling temperature "
                             "(config evaluation.math.temperature > 0): greedy decoding gives one completion")
        return None
    if max(args.pass_k) > args.n_samples:
        raise ValueError(f"--pass-k {max(args.pass_k)} exceeds --n-samples {args.n_samples} (config "
                         "evaluation.math.pass_k / n_samples): pass@k needs k <= n completions")
    top_k = getattr(args, "top_k", None)  # only where set: the other runs keep their hash
    return {"n": args.n_samples, "temperature": args.temperature, "top_p": args.top_p, "seed": args.seed,
            **({"top_k": top_k} if top_k else {})}


def cmd_evaluate(args) -> None:
    from .evaluation.evaluate import timed_evaluation
    from .generation.backend import choose_backend
    from .models.families import use_chat_template
    from .models.loading import checkpoint_dtype, load_model, resolve_model_source

    backend = choose_backend(args.backend, "evaluation.backend")  # before any work
    if args.adapt_run and not Path(args.model_source).exists():
        raise FileNotFoundError(
            f"adapted weights {args.model_source} are gone: Snakemake deletes them once evaluated (temp()). Set config "
            "`adaptation.keep_adapted_weights: true` and rerun snakemake (it adapts again and keeps them) to rerun "
            "this evaluation by hand")
    data_dir = Path(args.data)
    sampling = _eval_sampling(args)  # before any work
    samples, task = _evaluation_set(data_dir, args)
    adapt_meta = json.loads(Path(args.adapt_run).read_text()) if args.adapt_run else {}
    extra = _eval_provenance(args, args.train_dataset, adapt_meta)
    if backend == "vllm":
        from transformers import AutoConfig, AutoProcessor

        model = resolve_model_source(args.model_source)  # vLLM loads the weights itself
        processor, config = AutoProcessor.from_pretrained(model), AutoConfig.from_pretrained(model)
        dtype = checkpoint_dtype(args.model_source)  # vLLM's dtype "auto" reads config.json as HF does
    else:
        model, processor = load_model(args.model_source)
        dtype, config = model.dtype, model.config
    extra["chat_template"] = use_chat_template(processor, config, args.chat_template)
    # the precision the row was computed in: an adapted row and its zero-shot row must agree (issue 23 finding 1)
    extra["model_dtype"] = str(dtype).removeprefix("torch.")
    timed_evaluation(model, processor, samples, data_dir, task, Path(args.out), extra, args.max_new_tokens,
                     args.batch_size, json.loads(args.vllm_settings), sampling)


def cmd_adapt_per_sample(args) -> None:
    """VR-TTRL: adapt on each evaluation sample and predict it, in one job (no weights saved)."""
    from .runs.processes import process_state
    from .adaptation.per_sample import adapt_each_sample
    from .evaluation.evaluate import predictions_frame, write_evaluation
    from .generation.precision import adaptation_precision
    from .models.loading import load_model
    from .runs.provenance import provenance

    method = _method_spec(args)
    data_dir, adapt_out = Path(args.data), Path(args.adapt_out)
    samples, task = _evaluation_set(data_dir, args)
    model, processor = load_model(args.model_source, dtype="fp32")  # master weights, whatever is stored
    log.info("per-sample %s on %d samples of %s", args.method, len(samples), args.dataset)
    outputs, train_log, seconds = adapt_each_sample(model, processor, samples, data_dir, method, adapt_out,
                                                    args.seed, args.max_new_tokens)
    if not process_state().is_main_process:
        return  # one process writes the job's files
    adapt_out.mkdir(parents=True, exist_ok=True)
    train_log.to_parquet(adapt_out / "train_log.parquet", index=False)
    meta = {**_run_identity(args, args.dataset, args.dataset), "adapt_seconds": sum(seconds),
            "seconds_per_sample": sum(seconds) / len(seconds), "precision": adaptation_precision(model),
            **provenance({"method": method, "model_source": args.model_source, "seed": args.seed})}
    (adapt_out / "run.json").write_text(json.dumps(meta, indent=2, default=str))
    extra = {**_eval_provenance(args, args.dataset, meta), "seconds_per_sample": meta["seconds_per_sample"]}
    write_evaluation(predictions_frame(outputs, samples, task), task, Path(args.out), extra, sum(seconds))


def cmd_ingest(args) -> None:
    from .results.store import ingest

    counts = ingest(Path(args.db), [Path(p) for p in args.eval_dirs], [Path(p) for p in args.adapt_dirs],
                    [Path(p) for p in args.data_dirs], Path(args.benchmark_dir) if args.benchmark_dir else None)
    print(json.dumps(counts))


def cmd_import_author_logs(args) -> None:
    from .results.author_logs import AUTHOR_RUNS_CSV, import_logs, write_shipped

    runs, steps = import_logs(Path(args.log_dir))
    out = Path(args.out_dir) if args.out_dir else Path(str(AUTHOR_RUNS_CSV)).parent
    write_shipped(runs, steps, out)
    log.info("%d logs, %d rounds -> %s (author_runs.csv, author_steps.csv.gz)", len(runs), len(steps), out)


def _names(args) -> tuple[dict, dict]:
    """Our model / dataset names -> the papers' (config models.<m>.paper_name, tables.dataset_names)."""
    from .datasets.registry import REGISTRY

    datasets = {name: spec.paper_name for name, spec in REGISTRY.items()} | json.loads(args.dataset_names)
    return json.loads(args.model_names), datasets


def _main_protocol(runs, args):
    """The main grid's runs (other n / sampling belong to TTRV Tables 4, 6, 9)."""
    return runs[(runs["n_adapt"] == str(args.n_adapt)) & (runs["sampling"] == args.sampling)]


def _of_protocol(runs, protocol: str):
    """The runs made under one rerun protocol (a store from before protocols existed holds clean runs)."""
    from .results.tables import run_protocols

    return runs[run_protocols(runs) == protocol]


def cmd_render_tables(args) -> None:
    import pandas as pd

    from .datasets.registry import REGISTRY
    from .results import paper_tables as pt
    from .results.author_logs import shipped_runs
    from .results.provenance import flag_counts, provenance
    from .results.store import RUN_COLUMNS, read_table
    from .results.tables import (method_table, preparation_table, protocol_table, rescoring_table, run_protocols,
                                 to_markdown)

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    db = Path(args.db)
    model_names, dataset_names = _names(args)
    all_runs, published = read_table(db, "runs"), read_table(db, "published")
    if all_runs.empty:  # nothing evaluated yet: every published cell "not run"
        all_runs = pd.DataFrame(columns=RUN_COLUMNS)
    prep_stats = read_table(db, "prep_stats")
    # the published cells are filled by the config's protocol's runs; the others are shown beside them
    ours = pt.our_cells(published, _of_protocol(all_runs, args.protocol), read_table(db, "metrics"), prep_stats,
                        read_table(db, "benchmarks"), model_names, dataset_names, (str(args.n_adapt), args.sampling))
    author_runs = read_table(db, "author_runs")
    cell_logs = provenance(published, shipped_runs() if author_runs.empty else author_runs)
    comparison = pt.compare(published, ours, cell_logs)
    for (paper, table), spec in pt.TABLES.items():
        cells = comparison[(comparison["paper"] == paper) & (comparison["table"] == table)]
        stem = out / f"{paper}_table{table}"
        wide = pt.layout(cells)
        notes = "".join(f"- {note}\n" for note in pt.metric_notes(cells) + pt.provenance_notes(cells))
        logs = pt.provenance_layout(cells)
        logs = ("" if logs.empty else "\n## Paper | the authors' log that gave the cell (results/provenance.py) | ours\n\n"
                + to_markdown(logs, index=False))
        stem.with_suffix(".md").write_text(f"# {spec.title}\n\n{pt.summary_line(cells)}\n\n{to_markdown(wide)}\n{notes}{logs}")
        stem.with_suffix(".tex").write_text(pt.to_latex(wide, spec.title))
        cells.to_csv(stem.with_suffix(".csv"), index=False)
    preparation = preparation_table(prep_stats, published, dataset_names)
    preparation.to_csv(out / "data_preparation.csv", index=False)
    (out / "data_preparation.md").write_text(
        "# Data preparation in TTRV Table 8's layout: samples before and after the resolution filter\n\n"
        + to_markdown(preparation, index=False, digits=0))
    fidelity = pt.fidelity_summary(comparison)
    fidelity.to_csv(out / "fidelity.csv", index=False)
    cell_logs.to_csv(out / "ttrv_provenance.csv", index=False)
    (out / "fidelity.md").write_text(
        "# Fidelity: published cells against ours (agrees: the paper's value inside our 95% interval)\n\n"
        + to_markdown(fidelity, index=False)
        + "\n# Where TTRV's published cells come from: the authors' public verl logs\n\n"
        + to_markdown(flag_counts(cell_logs), index=False, digits=0))

    # Our runs in TTRV Table 1's layout: the main adaptation set, a table per protocol (the config's first)
    main_runs = _main_protocol(all_runs, args)
    present = sorted(set(run_protocols(main_runs)))
    protocols = sorted(present, key=lambda p: p != args.protocol) or [args.protocol]
    training_sets = frozenset(name for name, spec in REGISTRY.items() if spec.manifest_split == "train")
    text = ""
    for protocol in protocols:
        runs = _of_protocol(main_runs, protocol)
        table1 = method_table(runs[runs["metric"] == "accuracy"], training_sets)
        named = "" if len(protocols) == 1 else f", protocol {protocol}"
        if protocol == protocols[0]:
            table1.to_csv(out / "ttrv_table1_layout.csv")
        text += f"# Our runs in the layout of TTRV Table 1 (top-1 accuracy, %{named})\n\n" + to_markdown(table1)
    runs = _of_protocol(main_runs, args.protocol)
    cells = comparison[(comparison["paper"] == "ttrv") & (comparison["table"] == 1)]
    cells.to_csv(out / "ttrv_table1_vs_published.csv", index=False)
    agree = int((cells["status"] == "agrees").sum())
    text += (f"\n# TTRV Table 1: published vs ours ({agree} of {len(cells)} cells agree)\n\n"
             + to_markdown(cells, index=False))
    both = protocol_table(main_runs)
    both.to_csv(out / "protocols.csv", index=False)
    if not both.empty:
        text += ("\n# Both protocols from the same items: accuracy under each, and authors - clean (the authors' "
                 "template, parser, budget and update)\n\n" + to_markdown(both, index=False))
    text = f"Protocol: {', '.join(pt.PROTOCOLS.get(p, p) for p in protocols)}\n\n" + text
    rescored = rescoring_table(all_runs, read_table(db, "metrics"))
    rescored.to_csv(out / "rescoring.csv", index=False)
    if not rescored.empty:
        text += ("\n# The same generations scored both ways: our parser and the TTRV authors' (parser, then verl's "
                 "mean@n over prompt-text groups)\n\n" + to_markdown(rescored, index=False))
    grounding = runs[runs["metric"].isin(["box_giou", "giou"])]
    if not grounding.empty:
        # VR-TTRL Table 2 reports gIoU per split; box masks unless evaluation.grounding.sam2 is set
        metric = "/".join(sorted(grounding["metric"].unique()))
        text += (f"\n# Our grounding runs in the layout of VR-TTRL Table 2 ({metric}, %)\n\n"
                 + to_markdown(method_table(grounding, training_sets)))
    (out / "ttrv_table1_layout.md").write_text(text)
    total = fidelity.iloc[-1]
    log.info("tables written to %s (%d of %d published cells agree with ours)", out, total["agrees"], total["cells"])


def cmd_prompt(args) -> None:
    """The exact prompt one item of a prepared dataset is given under a config's protocol."""
    from PIL import Image
    from transformers import AutoConfig, AutoProcessor

    from .datasets import authors_items
    from .datasets.prepare import load_manifest
    from .evaluation.evaluate import rendered_prompt
    from .plan import load_config
    from .plan.grid import Plan

    config = load_config(*args.configfiles)
    plan = Plan(config, args.results)
    if args.model not in plan.models:
        raise ValueError(f"--model {args.model}: not a model of the config; known: {', '.join(plan.models)}")
    data_dir = Path(args.results) / "data" / args.dataset
    manifest = load_manifest(data_dir, "test")
    match = manifest[(manifest["id"] == args.item) | (manifest.get("item_id", manifest["id"]).astype(str) == args.item)]
    if match.empty:
        raise ValueError(f"--item {args.item}: no test item of {data_dir / 'manifest.parquet'} has this id or item_id")
    row = match.iloc[[0]]
    if args.protocol and args.protocol != config["protocol"]:  # the other protocol's template (plan/protocols.py)
        from .plan.protocols import variant

        config = variant(config, args.protocol)
    template = config["evaluation"]["mcq"]["chat_template"]
    text = authors_items.authors_texts(row)[0] if template == "authors" else row.iloc[0]["prompt"]
    source = plan.models[args.model]["source"]
    with Image.open(data_dir / row.iloc[0]["image"]) as image:
        print(rendered_prompt(AutoProcessor.from_pretrained(source), AutoConfig.from_pretrained(source), text,
                              image.convert("RGB"), template, row.iloc[0].get("system")))


def cmd_rescore(args) -> None:
    from .datasets.prepare import load_manifest
    from .evaluation.evaluate import rescore

    manifest = load_manifest(Path(args.data)) if args.data else None
    for eval_dir in args.eval_dirs:
        scores = rescore(Path(eval_dir), manifest)
        print(f"{eval_dir}: " + ", ".join(f"{k} {v:.2f}" for k, v in scores.items()))


def cmd_plot_figures(args) -> None:
    from .results import figures
    from .results.author_logs import shipped_runs, shipped_steps
    from .results.paper_tables import published_markers
    from .results.provenance import log_runs
    from .results.store import read_table

    out, db = Path(args.out_dir), Path(args.db)
    model_names, dataset_names = _names(args)
    runs = read_table(db, "runs")
    if not runs.empty:
        runs = _of_protocol(_main_protocol(runs, args), args.protocol)
    figures.accuracy_bars(runs, out / "accuracy.png", published_markers(read_table(db, "published"), model_names, dataset_names))
    train_log = read_table(db, "train_log")
    author_runs, author_steps = read_table(db, "author_runs"), read_table(db, "author_steps")
    if author_runs.empty:  # a store ingested before the authors' tables existed
        author_runs, author_steps = shipped_runs(), shipped_steps()
    ours = set() if train_log.empty else {(model_names.get(m, m), dataset_names.get(d, d))
                                          for m, d in zip(train_log["model"], train_log["train_dataset"])}
    logs = log_runs(author_runs)
    highlight = set(logs.loc[[pair in ours for pair in zip(logs["paper_model"], logs["paper_dataset"])], "file"])
    figures.training_curves(train_log, out / "training_curves.png", author_runs, author_steps, highlight)
    figures.cross_dataset_heatmap(runs, out / "cross_dataset.png")
    figures.step_costs(train_log, out / "step_costs.png")


def cmd_check_sandbox(args) -> None:
    """Start the sandbox, then run its escape suite from inside (audit hook disabled first; the same
    as T3RL's start-up check): a file and a listening port of this host, the home directory, vsock
    and netlink sockets, fallocate, writes past /tmp, forks and memory past the cgroup's limits.
    Prints each probe; fails (exit status 1, the reason logged) where the sandbox cannot start or
    an attempt succeeds."""
    from .rewards.sandbox import sandbox_report

    report = sandbox_report()  # SandboxUnavailable names the missing kernel feature
    print(f"sandbox: {report.bwrap}, start-up and 6 * 7: {1000 * report.startup_s:.0f} ms")
    for probe in report.probes:
        print(f"  {probe.name:<22} {'blocked' if probe.blocked else 'REACHED'}  ({probe.result[:90]})")
    if report.reached:
        raise RuntimeError("the sandbox let an escape through (above): do not run T3RL's arithmetic verifier here")


def cmd_plan(args) -> None:
    from .plan import Plan, load_config

    _print_plan(Plan(load_config(*args.config)), args.gpu_memory_gb, args.gpus_per_node)


def _print_plan(plan, gpu_memory_gb, gpus_per_node) -> None:
    from collections import Counter

    from .plan.protocols import describe
    from .plan.resources import EVALUATION_MINUTES, fewer_gpus, plan_table

    rows, totals = plan_table(plan, gpu_memory_gb, gpus_per_node)

    def shown(value, form):
        return "-" if value is None else form.format(value)

    print(f"{'job':<80} {'GPUs':>4} {'offload':>7} {'micro':>5} {'GPU peak GB':>11} {'host GB':>8} {'min':>6} {'GPU-h':>7}")
    for r in rows:
        minutes = "?" if r["minutes"] is None and r["rule"] in ("adapt", "adapt_per_sample") else shown(r["minutes"], "{}")
        hours = "?" if r["gpu_hours"] is None else f"{r['gpu_hours']:.2f}"  # n_samples: all (count unknown)
        print(f"{r['job']:<80} {r['gpus']:>4} {str(r['offload']):>7} {shown(r['micro_batch'], '{}'):>5} "
              f"{shown(r['gpu_peak_gb'], '{:.1f}'):>11} {shown(r['host_gb'], '{:.1f}'):>8} {minutes:>6} {hours:>7}")
    counts = Counter(r["rule"] for r in rows)
    print(f"total: {totals['jobs']} jobs ({', '.join(f'{n} {rule}' for rule, n in counts.items())}), "
          f"{totals['gpu_hours']} GPU-hours ({', '.join(f'{rule} {h}' for rule, h in totals['gpu_hours_by_rule'].items())}), "
          f"{totals['node_hours']} h on one {totals['gpus_per_node']}-GPU node (perfect packing, at least the longest job)")
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

    from .datasets.registry import REGISTRY
    from .plan import Plan, validated
    from .plan.cells import PAPER_CONFIGS, REPO, cell_config, cell_file_name, split_table
    from .plan.preflight import needs
    from .results.author_logs import shipped_runs
    from .results.provenance import provenance
    from .results.store import PUBLISHED_CSV

    paper, number = split_table(args.table)
    source = Path(args.config or REPO / PAPER_CONFIGS[paper])
    config = cell_config(yaml.safe_load(source.read_text()), args.table, args.model, args.dataset)
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
        print(f"published: {paper} Table {number} {model} {cell['method']} {dataset} {cell['metric']} {cell['value']:.2f}{log}")
    print(f"run it: snakemake --cores all --directory runs/{out.stem} --configfile {out.resolve()} "
          "--replace-workflow-config (then results/tables/ in that directory show ours beside these, with the interval)")


def cmd_audit_reward(args) -> None:
    import pandas as pd

    from .adaptation.presets import PRESETS, method_task
    from .results.figures import advantage_audit
    from .results.tables import to_markdown
    from .rewards.audit import audit, rewards_by_method, sample_groups, sample_object_groups

    groups = sample_groups(args.groups, args.num_generations, args.seed)
    # the MCQ methods on letter groups; grounding methods on object groups of VR-TTRL's 8 rollouts
    # label-free rewards only: the supervised baseline's ("gold", ECHO Table 12) needs the gold answer
    methods = {m: {"reward": p["reward"], "params": p["reward_params"]} for m, p in PRESETS.items()
               if method_task(m) == "mcq" and p["reward"] != "gold"}
    grounding = {}
    for m, p in PRESETS.items():  # one row per distinct reward: many presets differ in schedule only
        # Appendix C's Tent, MEMO and greedy SFT have no reward
        spec = {"reward": p["reward"], "params": p["reward_params"]} if method_task(m) == "grounding" and p.get("reward") else None
        if spec and spec not in grounding.values():
            grounding[m] = spec
    table = pd.concat([audit(groups, methods), audit(sample_object_groups(args.groups, 8, args.seed), grounding)])
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "reward_audit.csv", index=False)
    print(to_markdown(table, index=False, digits=4))
    flat = rewards_by_method(groups, {k: methods[k] for k in ("ttrv", "ttrv-no-diversity")})
    advantage_audit(flat["ttrv-no-diversity"], flat["ttrv"], args.num_generations, out / "reward_audit.png")
    log.info("reward audit written to %s", out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ttrl-bench", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    datasets = sub.add_parser("datasets", help="the dataset registry")
    datasets.add_argument("action", choices=["list", "show"], help="list: every registered dataset and its source; "
                          "show NAME: its fields, reader, answer format, source and evidence")
    datasets.add_argument("name", nargs="?", help="the dataset to show")
    datasets.set_defaults(func=cmd_datasets_list, rerun=False)

    methods = sub.add_parser("methods", help="the method presets (adaptation/presets.py)")
    methods.add_argument("action", choices=["list", "show"], help="list: every preset, its reward, update and "
                         "source; show NAME: the preset, its hyperparameters and the reward_params its reward takes")
    methods.add_argument("name", nargs="?", help="the method to show")
    methods.set_defaults(func=cmd_methods_list, rerun=False)

    p = sub.add_parser("fetch", help="download the models and datasets a config needs into the Hugging Face "
                       "cache (on a machine with internet, before jobs run offline)")
    p.add_argument("configfiles", nargs="+", metavar="CONFIG",
                   help="config file(s), merged in order as `snakemake --configfile ... --replace-workflow-config` reads them")
    p.add_argument("--results", default="results",
                   help="the workflow's results directory: datasets prepared and models converted there are skipped")
    p.set_defaults(func=cmd_fetch, rerun=False)

    p = sub.add_parser("prepare-data", help="step 1: filter, convert to MCQ, write manifest + prep_stats")
    p.add_argument("--dataset", required=True, help="registry name (`ttrl-bench datasets list`)")
    p.add_argument("--out", required=True, help="output directory: manifest.parquet, prep_stats.json, images/")
    p.add_argument("--seed", type=int, default=0, help="seed of the 4-way options drawn for recognition sets")
    p.add_argument("--resolution-rule", choices=["either_side", "area"], default="either_side",
                   help='how "larger than 1000x1000" is read (config data.resolution_rule, TTRV Appendix B)')
    p.add_argument("--source-json", default="null",
                   help='config data.sources.<name> as JSON, e.g. {"path": "/data/mme"} (default: the Hub)')
    p.add_argument("--items", choices=["ours", "authors"], default="ours",
                   help="config data.items: the TTRV authors' own items where they ship them, or our own conversion")
    p.set_defaults(func=cmd_prepare_data)

    p = sub.add_parser("build-demo-model", help="the embedded default's tiny VLM (Qwen2.5-VL or InternVL), built offline")
    p.add_argument("--data", required=True, nargs="+", help="prepared demo dataset directories (train splits)")
    p.add_argument("--out", required=True, help="directory the model is saved to")
    p.add_argument("--steps", type=int, default=150, help="supervised warm-start steps per task")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights and the warm start")
    p.add_argument("--family", default="qwen2_5_vl", choices=["qwen2_5_vl", "internvl", "qwen3_vl"],
                   help="architecture of the tiny model (config models.<name>.build)")
    p.set_defaults(func=cmd_build_demo_model)

    p = sub.add_parser("convert-model", help="original-format InternVL checkpoint -> transformers-native directory")
    p.add_argument("--source", required=True, help="local original-format directory or Hub id")
    p.add_argument("--out", required=True, help="directory the converted model is saved to")
    p.set_defaults(func=cmd_convert_model)

    def run_args(p, dataset_flag: str) -> None:
        p.add_argument("--model-source", required=True, help="Hub id or local directory")
        p.add_argument("--model-name", required=True, help="the model's name in config and tables")
        p.add_argument("--method", required=True, help="method preset name (`ttrl-bench methods list`)")
        p.add_argument(dataset_flag, dest="dataset", required=True, help="registry name of the prepared dataset")
        p.add_argument("--data", required=True, help="prepared dataset directory")
        p.add_argument("--n-adapt", type=_n_adapt, default=20,
                       help='adaptation samples, or "all" (config adaptation.n_samples)')
        p.add_argument("--sampling", default="random",
                       help='how they are drawn: "random" or "biased-<classes>" (config adaptation.sampling)')
        p.add_argument("--seed", type=int, default=0, help="seed of sample selection, rollouts and training")
        p.add_argument("--out", required=True, help="output directory of the step")

    p = sub.add_parser("adapt", help="step 2: test-time RL with GRPO on a dataset's test prompts")
    run_args(p, "--dataset")
    p.add_argument("--method-json", help="resolved method preset as JSON (the workflow passes the config's "
                   "overrides this way); default: the preset named by --method as shipped")
    p.set_defaults(func=cmd_adapt)

    def eval_args(p) -> None:
        p.add_argument("--exclude-adaptation-samples", action="store_true",
                       help="score MCQ sets without their adaptation samples (config evaluation.exclude_adaptation_samples)")
        p.add_argument("--eval-samples", type=_n_adapt, default="all", help="test samples scored (seeded)")
        p.add_argument("--max-new-tokens", type=int, default=6,
                       help="longest answer generated (config evaluation.<task>.max_new_tokens)")
        p.add_argument("--sam2", help="SAM2 checkpoint directory: grounding masks from the predicted boxes and points")
        p.add_argument("--empty-mask-iou", choices=["zero", "one", "skip"], default="zero",
                       help="gIoU of a both-empty sample (config evaluation.grounding.empty_mask_iou)")
        p.add_argument("--sam2-multimask", choices=["best_score", "single"], default="best_score",
                       help="SAM2's three candidates and the best-scored one, or one mask (evaluation.grounding.sam2_multimask)")
        p.add_argument("--input-size", type=int, help="grounding: the square side the image is resized to, answers "
                       "scaled back (config evaluation.grounding.input_size; VisionReasoner's 840)")
        p.add_argument("--query-form", choices=["as_given", "visionreasoner"], default="as_given",
                       help="grounding: the query as given or lower-cased and stripped (evaluation.grounding.query_form)")
        p.add_argument("--choice-parser", choices=["robust", "ttrv", "authors"], default="robust",
                       help="how option letters are read (config evaluation.mcq.choice_parser)")
        p.add_argument("--chat-template", choices=["model", "authors"], default="model",
                       help="the checkpoint's chat template or the TTRV authors' (config evaluation.mcq.chat_template)")
        p.add_argument("--protocol", choices=["clean", "authors"], default="clean",
                       help="the config's protocol, recorded with the scores for the tables (config protocol)")
        p.add_argument("--temperature", type=float, default=0.0,
                       help="sampling temperature; 0 = greedy (config evaluation.math.temperature)")
        p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (config evaluation.math.top_p)")
        p.add_argument("--n-samples", type=int, default=1, help="completions per question (config evaluation.math.n_samples)")
        p.add_argument("--pass-k", type=lambda v: tuple(int(k) for k in v.split(",")), default=(1,),
                       help="comma-separated k of pass@k (config evaluation.math.pass_k)")
        p.add_argument("--top-k", type=int, default=None,
                       help="top-k sampling; unset = none (config evaluation.math.top_k)")
        p.add_argument("--prompt", choices=["training", "authors"], default="training",
                       help="math items: the training prompt or the ECHO authors' evaluation prompt (config "
                            "evaluation.math.prompt)")
        p.add_argument("--grader", choices=["exact", "lenient"], default="exact",
                       help="math answers: our exact normal forms or the ECHO authors' lenient grading (config "
                            "evaluation.math.grader)")

    p = sub.add_parser("evaluate", help="step 3: greedy evaluation on a dataset's test split")
    run_args(p, "--dataset")
    eval_args(p)
    p.add_argument("--train-dataset", default="none", help="dataset the model was adapted on")
    p.add_argument("--adapt-run", help="run.json of the adaptation job, for its timing and hash")
    p.add_argument("--batch-size", type=int, default=64, help="prompts per generation batch (config evaluation.batch_size)")
    p.add_argument("--backend", choices=["auto", "hf", "vllm"], default="auto",
                   help="greedy decoding through vLLM or transformers (config evaluation.backend)")
    p.add_argument("--vllm-settings", default="{}", help="vLLM engine settings as JSON (config evaluation.vllm)")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("adapt-per-sample", help="steps 2+3 for VR-TTRL: adapt on each sample, predict it, restore")
    run_args(p, "--dataset")
    eval_args(p)
    p.add_argument("--method-json", help="resolved method preset as JSON (the workflow passes the config's "
                   "overrides this way); default: the preset named by --method as shipped")
    p.add_argument("--adapt-out", required=True, help="where the training log and run.json go")
    p.set_defaults(func=cmd_adapt_per_sample)

    p = sub.add_parser("ingest", help="step 4a: rebuild results/benchmark.duckdb from job outputs")
    p.add_argument("--db", required=True, help="the DuckDB store to write")
    p.add_argument("--eval-dirs", nargs="*", default=[], help="evaluation job directories (results/eval/...)")
    p.add_argument("--adapt-dirs", nargs="*", default=[], help="adaptation job directories (results/adapt/...)")
    p.add_argument("--data-dirs", nargs="*", default=[], help="prepared dataset directories (results/data/...)")
    p.add_argument("--benchmark-dir", help="Snakemake benchmark files (results/benchmarks), for TTRV Table 10")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("import-author-logs", help="parse the TTRV authors' verl logs (a clone's verl/logs) into "
                                                  "author_runs.csv / author_steps.csv.gz")
    p.add_argument("log_dir", help="a directory searched for *.log (Akshit21112002/TTRV's verl/logs)")
    p.add_argument("--out-dir", help="where to write the two files (default: the package's shipped copies)")
    p.set_defaults(func=cmd_import_author_logs)

    # shared by render-tables and plot-figures: paper names and the main protocol
    names = argparse.ArgumentParser(add_help=False)
    names.add_argument("--model-names", default="{}", help="JSON: our model name -> paper's")
    names.add_argument("--dataset-names", default="{}", help="JSON: our dataset name -> paper's")
    names.add_argument("--n-adapt", type=_n_adapt, default=20, help="the main grid's adaptation samples")
    names.add_argument("--sampling", default="random", help="the main grid's sampling")
    names.add_argument("--protocol", choices=["clean", "authors"], default="clean",
                       help="the config's `protocol`: its runs fill the published cells and the figures")
    p = sub.add_parser("render-tables", parents=[names], help="step 4b: every published table beside ours")
    p.add_argument("--db", required=True, help="the DuckDB store (results/benchmark.duckdb)")
    p.add_argument("--out-dir", required=True, help="directory of the Markdown, LaTeX and CSV tables")
    p.set_defaults(func=cmd_render_tables)

    # shared by plan and cell: the GPUs the plan decides for
    gpus = argparse.ArgumentParser(add_help=False)
    gpus.add_argument("--gpu-memory-gb", type=float, default=None, help="default: config resources.gpu_memory_gb (80)")
    gpus.add_argument("--gpus-per-node", type=int, default=8, help="the GPUs of one node, for the node-hours total")
    p = sub.add_parser("plan", parents=[gpus],
                       help="each adaptation job's GPUs, predicted GPU peak, host memory, minutes, GPU-hours")
    p.add_argument("config", nargs="+", help="config YAML file(s), merged in order")
    p.set_defaults(func=cmd_plan, rerun=False)  # read by a person, not a job log

    p = sub.add_parser("cell", parents=[gpus],
                       help="one published cell's jobs from its paper config: config, plan, published value")
    p.add_argument("table", help="the paper's table, e.g. ttrv-1")
    p.add_argument("model", help="the model, by the paper's name (InternVL3-2B) or ours")
    p.add_argument("dataset", help="the dataset, by the paper's name (ImageNet-A) or ours")
    p.add_argument("--config", default=None, help="the paper config to cut it from (default: the paper's, config/<paper>.yaml)")
    p.add_argument("--out", default=None, help="where to write the cell's config (default: cells/<table>_<model>_<dataset>.yaml)")
    p.set_defaults(func=cmd_cell, rerun=False)

    p = sub.add_parser("audit-reward", help="advantages each method's reward gives GRPO (TTRV diversity term)")
    p.add_argument("--groups", type=int, default=256, help="sampled prompts")
    p.add_argument("--num-generations", type=int, default=32, help="completions per prompt (TTRV: 32)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled answer groups")
    p.add_argument("--out-dir", default="results/audit", help="directory of reward_audit.csv and .png")
    p.set_defaults(func=cmd_audit_reward)

    p = sub.add_parser("check-sandbox", help="does the T3RL verifier's sandbox (bubblewrap) work on this node?")
    p.set_defaults(func=cmd_check_sandbox, rerun=False)  # read by a person

    p = sub.add_parser("prompt", help="the exact prompt (chat template, image tokens counted) an item is given")
    p.add_argument("configfiles", nargs="+", help="the config file(s), merged in order as snakemake merges them")
    p.add_argument("--dataset", required=True, help="a prepared dataset (results/data/<dataset>)")
    p.add_argument("--item", required=True, help="the item's id, or the authors' item id")
    p.add_argument("--model", required=True, help="a model name of the config")
    p.add_argument("--results", default="results", help="the results tree the dataset was prepared in")
    p.add_argument("--protocol", choices=["clean", "authors"], default=None,
                   help="the protocol whose template renders it (default: the config's `protocol`)")
    p.set_defaults(func=cmd_prompt, rerun=False)

    p = sub.add_parser("rescore", help="score stored MCQ predictions again under both parsers and verl's mean@n")
    p.add_argument("eval_dirs", nargs="+", help="evaluation directories (predictions.parquet + metrics.json)")
    p.add_argument("--data", help="the prepared dataset, for predictions stored without their prompt text")
    p.set_defaults(func=cmd_rescore, rerun=False)

    p = sub.add_parser("plot-figures", parents=[names], help="step 4c: figures (PNG + PDF)")
    p.add_argument("--db", required=True, help="the DuckDB store (results/benchmark.duckdb)")
    p.add_argument("--out-dir", required=True, help="directory of the PNG and PDF figures")
    p.set_defaults(func=cmd_plot_figures)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ttrl-bench")
    except PackageNotFoundError:  # a checkout run through PYTHONPATH without an install
        return "unknown (not installed)"


# Environment that changes what a step does or where it runs, carried into its rerun command
RERUN_ENV = ("OMP_NUM_THREADS", "TTRL_BENCH_THREADS", "CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HOME")


def rerun_command(argv: list[str]) -> str:
    """A shell command that reruns this step as is, pasted anywhere: the same directory,
    interpreter, package (PYTHONPATH) and settings, every word shell-quoted."""
    import os
    import shlex

    env = {name: os.environ[name] for name in RERUN_ENV if name in os.environ}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    words = ["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "ttrl_bench.cli", *argv]
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join(words)}"


# Subcommands that compute with torch: their numbers must not depend on the machine.
TORCH_COMMANDS = {"build-demo-model", "convert-model", "adapt", "evaluate", "adapt-per-sample", "audit-reward"}


def pin_numerics() -> None:
    """The same numbers from 1 or 2 cores, and on other x86-64 machines (issue 16). torch runs on
    TTRL_BENCH_THREADS threads (default 1), whatever OMP_NUM_THREADS says: a reduction split over
    another number of threads rounds differently, and a tiny model's warm start amplifies that.
    MKL, oneDNN and ATen take the AVX2 code paths every x86-64 CPU since 2013 has, not the widest
    one the CPU offers; without a GPU only deterministic algorithms run. Called before torch loads."""
    import os
    import platform

    if platform.machine().lower() in ("x86_64", "amd64"):
        for name, value in (("MKL_CBWR", "AVX2"), ("ONEDNN_MAX_CPU_ISA", "AVX2"), ("ATEN_CPU_CAPABILITY", "avx2")):
            os.environ.setdefault(name, value)
    import torch

    if torch.cuda.is_available():  # GPU jobs: the host threads only feed the GPU
        if "TTRL_BENCH_THREADS" in os.environ:
            torch.set_num_threads(int(os.environ["TTRL_BENCH_THREADS"]))
        return
    torch.set_num_threads(int(os.environ.get("TTRL_BENCH_THREADS", "1")))
    torch.use_deterministic_algorithms(True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if getattr(args, "rerun", True):  # pipeline steps; listings and fetch are not rerun from a log
        print(rerun_command(argv), file=sys.stderr, flush=True)  # the first line of every job's log
    stderr = readable_progress()
    try:
        return _run(args, argv)
    finally:
        sys.stderr = stderr


def _run(args, argv: list[str]) -> int:
    if args.command in TORCH_COMMANDS:
        pin_numerics()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        args.func(args)
        sys.stdout.flush()  # a reader that closed the pipe shows here, not in the interpreter's exit
    except BrokenPipeError:  # `ttrl-bench plan ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (FileNotFoundError, KeyError, ValueError, OSError, NotImplementedError, RuntimeError) as err:
        log.error("%s", err)
        if getattr(err, "transient", False):  # e.g. a store locked by another process
            log.error("then retry: %s", rerun_command(argv))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
