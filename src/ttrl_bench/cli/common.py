"""Helpers the command groups share: the package's logger, the `--n-adapt` type and what
`adapt`, `evaluate` and `adapt-per-sample` all take (their run options, the run's identity,
its method spec and its adaptation samples)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger("ttrl_bench")


def _n_adapt(value: str) -> int | str:
    """A sample count, or "all". The name shows in argparse's errors ("invalid _n_adapt value")."""
    return value if value == "all" else int(value)


def add_run_args(p, dataset_flag: str) -> None:
    """The options of a job that adapts or evaluates one model with one method on one dataset."""
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


def adaptation_samples(data_dir: Path, n_adapt, seed: int, sampling: str, split: str = "test"):
    """The samples a method adapts on: of the test split (test-time RL), or of a training set's
    rows (registry split "train": ECHO's Geometry3k and GeoQA, where MM-UPT and ECHO train; VR-TTRL
    Table 11's reasonseg-train and refcocog-train, where its offline variant trains)."""
    from ..datasets import authors_items
    from ..datasets.prepare import load_manifest
    from ..datasets.sampling import select_adaptation_samples

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


def run_identity(args, train_dataset: str, target_dataset: str) -> dict:
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


def add_method_json(p) -> None:
    """`--method-json`, of the jobs that adapt (read by `method_spec`)."""
    p.add_argument("--method-json", help="resolved method preset as JSON (the workflow passes the config's "
                   "overrides this way); default: the preset named by --method as shipped")


def method_spec(args) -> dict:
    """`--method-json` (what the workflow passes: the preset with the config's overrides), else the
    preset named by `--method` as shipped (adaptation/presets.py)."""
    from ..adaptation.presets import resolve_method

    if args.method_json:
        return json.loads(args.method_json)
    spec = resolve_method(args.method)
    if spec is None:
        raise ValueError(f"--method {args.method}: this method does not adapt; run `ttrl-bench evaluate` instead")
    return spec
