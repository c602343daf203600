"""Results: `ingest` (step 4a, the DuckDB store), `render-tables` (4b), `plot-figures` (4c) and
`import-author-logs` (the TTRV authors' logs the tables compare against)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import _n_adapt, log


def cmd_ingest(args) -> None:
    from ..results.store import ingest

    model_names, dataset_names = _names(args)
    counts = ingest(Path(args.db), [Path(p) for p in args.eval_dirs], [Path(p) for p in args.adapt_dirs],
                    [Path(p) for p in args.data_dirs], Path(args.benchmark_dir) if args.benchmark_dir else None,
                    model_names, dataset_names)
    print(json.dumps(counts))


def cmd_import_author_logs(args) -> None:
    from ..results.author_logs import AUTHOR_RUNS_CSV, import_logs, write_shipped

    runs, steps = import_logs(Path(args.log_dir))
    out = Path(args.out_dir) if args.out_dir else Path(str(AUTHOR_RUNS_CSV)).parent
    write_shipped(runs, steps, out)
    log.info("%d logs, %d rounds -> %s (author_runs.csv, author_steps.csv.gz)", len(runs), len(steps), out)


def _names(args) -> tuple[dict, dict]:
    """Our model / dataset names -> the papers' (config models.<m>.paper_name, tables.dataset_names)."""
    from ..datasets.registry import REGISTRY

    datasets = {name: spec.paper_name for name, spec in REGISTRY.items()} | json.loads(args.dataset_names)
    return json.loads(args.model_names), datasets


def _main_protocol(runs, args):
    """The main grid's runs (other n / sampling belong to TTRV Tables 4, 6, 9)."""
    return runs[(runs["n_adapt"] == str(args.n_adapt)) & (runs["sampling"] == args.sampling)]


def _of_protocol(runs, protocol: str):
    """The runs made under one rerun protocol (a store from before protocols existed holds clean runs)."""
    from ..results.tables import run_protocols

    return runs[run_protocols(runs) == protocol]


def cmd_render_tables(args) -> None:
    import pandas as pd

    from ..datasets.registry import REGISTRY
    from ..results import paper_tables as pt
    from ..results.author_logs import shipped_runs
    from ..results.provenance import flag_counts, provenance
    from ..results.store import RUN_COLUMNS, read_table
    from ..results.tables import (method_table, preparation_table, protocol_table, rescoring_table, run_protocols,
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
                        read_table(db, "benchmarks"), model_names, dataset_names, (str(args.n_adapt), args.sampling),
                        args.metric_definitions)
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
    ran = cells[cells["status"] != "not run"]
    text += (f"\n# TTRV Table 1: published vs ours ({agree} of {len(cells)} cells agree; {len(cells) - len(ran)} not "
             "run; every cell with every column: ttrv_table1_vs_published.csv)\n\n"
             + (to_markdown(ran[pt.READER_COLUMNS], index=False) if len(ran) else ""))
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
    _write_claims(db, out)
    if args.front_page:  # after every table it links; the figures are this rule's inputs (rules/aggregate.smk)
        from ..results.claims_report import claims_section
        from ..results.front_page import config_files_of, front_page

        front = Path(args.front_page)
        headline = method_table(_of_protocol(main_runs, protocols[0]).query("metric == 'accuracy'"), training_sets)
        front.write_text(front_page(all_runs, fidelity, headline, front.parent, config_files_of(front.parent),
                                    claims_section(db, figure=_existing(front.parent, "figures/claims.png"))))
    total = fidelity.iloc[-1]
    log.info("tables written to %s (%d of %d published cells agree with ours)", out, total["agrees"], total["cells"])


def _existing(results: Path, path: str) -> str | None:
    """`path` where it exists under `results` (a front page links only what is there), else None."""
    return path if (results / path).exists() else None


def _write_claims(db: Path, out: Path) -> None:
    """results/tables/claims.md and claims.csv: the papers' claims as ingest tested them (results/claims.py)."""
    from ..results.claims_report import TITLE, claims_markdown
    from ..results.store import read_table

    claims, cells = read_table(db, "claims"), read_table(db, "claim_cells")
    (out / "claims.md").write_text(  # an empty table: a store ingested before the claims were tested there
        claims_markdown(claims, cells) if not claims.empty
        else f"# {TITLE}\n\nThis store has no claims table: run `ttrl-bench ingest` again.\n")
    claims.to_csv(out / "claims.csv", index=False)


def cmd_plot_figures(args) -> None:
    from ..results import figures
    from ..results.author_logs import shipped_runs, shipped_steps
    from ..results.claims import figure_points
    from ..results.paper_tables import published_markers
    from ..results.provenance import log_runs
    from ..results.store import read_table

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
    claims, claim_cells = read_table(db, "claims"), read_table(db, "claim_cells")
    not_run = [] if claims.empty else list(claims.loc[claims["verdict"] == "not run", "claim"])
    figures.claims_forest(figure_points(claims, claim_cells), not_run, out / "claims.png")


def _paper_names() -> argparse.ArgumentParser:
    """The options render-tables and plot-figures share: paper names and the main protocol."""
    names = argparse.ArgumentParser(add_help=False)
    names.add_argument("--model-names", default="{}", help="JSON: our model name -> paper's")
    names.add_argument("--dataset-names", default="{}", help="JSON: our dataset name -> paper's")
    names.add_argument("--n-adapt", type=_n_adapt, default=20, help="the main grid's adaptation samples")
    names.add_argument("--sampling", default="random", help="the main grid's sampling")
    names.add_argument("--protocol", choices=["clean", "authors"], default="clean",
                       help="the config's `protocol`: its runs fill the published cells and the figures")
    return names


def _add_ingest(sub) -> None:
    p = sub.add_parser("ingest", help="step 4a: rebuild results/benchmark.duckdb from job outputs")
    p.add_argument("--db", required=True, help="the DuckDB store to write")
    p.add_argument("--eval-dirs", nargs="*", default=[], help="evaluation job directories (results/eval/...)")
    p.add_argument("--adapt-dirs", nargs="*", default=[], help="adaptation job directories (results/adapt/...)")
    p.add_argument("--data-dirs", nargs="*", default=[], help="prepared dataset directories (results/data/...)")
    p.add_argument("--benchmark-dir", help="Snakemake benchmark files (results/benchmarks), for TTRV Table 10")
    p.add_argument("--model-names", default="{}", help="JSON: our model name -> paper's (the claims' published cells)")
    p.add_argument("--dataset-names", default="{}", help="JSON: our dataset name -> paper's")
    p.set_defaults(func=cmd_ingest)


def _add_import_author_logs(sub) -> None:
    p = sub.add_parser("import-author-logs", help="parse the TTRV authors' verl logs (a clone's verl/logs) into "
                                                  "author_runs.csv / author_steps.csv.gz")
    p.add_argument("log_dir", help="a directory searched for *.log (Akshit21112002/TTRV's verl/logs)")
    p.add_argument("--out-dir", help="where to write the two files (default: the package's shipped copies)")
    p.set_defaults(func=cmd_import_author_logs)


def _add_render_tables(sub) -> None:
    p = sub.add_parser("render-tables", parents=[_paper_names()], help="step 4b: every published table beside ours")
    p.add_argument("--db", required=True, help="the DuckDB store (results/benchmark.duckdb)")
    p.add_argument("--out-dir", required=True, help="directory of the Markdown, LaTeX and CSV tables")
    p.add_argument("--metric-definitions", choices=["code", "appendix_a"], default="code",
                   help="config tables.metric_definitions: VR-TTRL's cIoU and bbox_AP cells by VisionReasoner's "
                        "code or by Appendix A's definitions (evaluation/box_metrics.py)")
    p.add_argument("--front-page", default=None, help="where to write the results' front page (results/README.md)")
    p.set_defaults(func=cmd_render_tables)


def _add_plot_figures(sub) -> None:
    p = sub.add_parser("plot-figures", parents=[_paper_names()], help="step 4c: figures (PNG + PDF)")
    p.add_argument("--db", required=True, help="the DuckDB store (results/benchmark.duckdb)")
    p.add_argument("--out-dir", required=True, help="directory of the PNG and PDF figures")
    p.set_defaults(func=cmd_plot_figures)


PARSERS = {"ingest": _add_ingest, "import-author-logs": _add_import_author_logs, "render-tables": _add_render_tables,
           "plot-figures": _add_plot_figures}
