"""Preparing the pipeline's inputs: `fetch` (downloads), `prepare-data` (step 1), and the models
built or converted before adaptation (`build-demo-model`, `convert-model`)."""

from __future__ import annotations

import json
from pathlib import Path

from .common import log


def cmd_fetch(args) -> None:
    from ..plan import Plan, load_config
    from ..plan.preflight import fetch, fetch_command

    plan = Plan(load_config(*args.configfiles))  # the models and datasets of its runs, as the dry run checks them
    fetched = fetch(plan.config, plan.run_models, plan.datasets, Path(args.results))
    log.info("fetched %d model(s) and dataset(s) into the Hugging Face cache; `snakemake -n` with HF_HUB_OFFLINE=1 "
             "now finds them (%s)", len(fetched), fetch_command(args.configfiles))


def cmd_prepare_data(args) -> None:
    from ..datasets.prepare import prepare_dataset

    stats = prepare_dataset(args.dataset, Path(args.out), args.seed, args.resolution_rule, json.loads(args.source_json),
                            args.items)
    log.info("prepared %s: %s", args.dataset, stats)


def cmd_build_demo_model(args) -> None:
    from PIL import Image

    from ..datasets.prepare import load_manifest
    from ..models import tiny
    from ..models.demo_cache import CACHE_ENV, build_once, recipe_key

    rows = [
        {**row, "data_dir": Path(data_dir)}
        for data_dir in args.data
        for row in load_manifest(Path(data_dir), "train").to_dict("records")
    ]
    key = recipe_key(rows, lambda r: r["data_dir"] / r["image"], args.steps, args.seed, args.family)
    reused = build_once(Path(args.out), key, lambda out: log.info("built demo model: %s", tiny.build_demo_model(
        out, rows, lambda r: Image.open(r["data_dir"] / r["image"]).convert("RGB"), args.steps, seed=args.seed,
        family=args.family)))
    if reused is not None:
        log.info("demo model of recipe %s reused from %s (built once per recipe; %s=off builds it anew)", key, reused,
                 CACHE_ENV)


def cmd_convert_model(args) -> None:
    from ..models.convert_internvl import convert_internvl

    log.info("converted model: %s", convert_internvl(args.source, Path(args.out)))


def _add_fetch(sub) -> None:
    p = sub.add_parser("fetch", help="download the models and datasets a config needs into the Hugging Face "
                       "cache (on a machine with internet, before jobs run offline)")
    p.add_argument("configfiles", nargs="+", metavar="CONFIG",
                   help="config file(s), merged in order as `snakemake --configfile ... --replace-workflow-config` reads them")
    p.add_argument("--results", default="results",
                   help="the workflow's results directory: datasets prepared and models converted there are skipped")
    p.set_defaults(func=cmd_fetch, rerun=False)


def _add_prepare_data(sub) -> None:
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


def _add_build_demo_model(sub) -> None:
    p = sub.add_parser("build-demo-model", help="the embedded default's tiny VLM (Qwen2.5-VL or InternVL), built offline")
    p.add_argument("--data", required=True, nargs="+", help="prepared demo dataset directories (train splits)")
    p.add_argument("--out", required=True, help="directory the model is saved to")
    p.add_argument("--steps", type=int, default=150, help="supervised warm-start steps per task")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights and the warm start")
    p.add_argument("--family", default="qwen2_5_vl", choices=["qwen2_5_vl", "internvl", "qwen3_vl"],
                   help="architecture of the tiny model (config models.<name>.build)")
    p.set_defaults(func=cmd_build_demo_model)


def _add_convert_model(sub) -> None:
    p = sub.add_parser("convert-model", help="original-format InternVL checkpoint -> transformers-native directory")
    p.add_argument("--source", required=True, help="local original-format directory or Hub id")
    p.add_argument("--out", required=True, help="directory the converted model is saved to")
    p.set_defaults(func=cmd_convert_model)


PARSERS = {"fetch": _add_fetch, "prepare-data": _add_prepare_data, "build-demo-model": _add_build_demo_model,
           "convert-model": _add_convert_model}
