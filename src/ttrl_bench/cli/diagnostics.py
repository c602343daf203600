"""Diagnostics beside the pipeline's steps: `audit-reward` (the advantages each method's reward
gives GRPO), `check-sandbox` (T3RL's verifier sandbox on this node), `prompt` (an item's exact
prompt) and `rescore` (stored predictions scored again)."""

from __future__ import annotations

from pathlib import Path

from .common import log


def cmd_audit_reward(args) -> None:
    import pandas as pd

    from ..adaptation.presets import PRESETS, method_task
    from ..results.figures import advantage_audit
    from ..results.tables import to_markdown
    from ..rewards.audit import audit, rewards_by_method, sample_groups, sample_object_groups

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


def cmd_check_sandbox(args) -> None:
    """Start the sandbox, then run its escape suite from inside (audit hook disabled first; the same
    as T3RL's start-up check): a file and a listening port of this host, the home directory, vsock
    and netlink sockets, fallocate, writes past /tmp, forks and memory past the cgroup's limits.
    Prints each probe; fails (exit status 1, the reason logged) where the sandbox cannot start or
    an attempt succeeds."""
    from ..rewards.sandbox import sandbox_report

    report = sandbox_report()  # SandboxUnavailable names the missing kernel feature
    print(f"sandbox: {report.bwrap}, start-up and 6 * 7: {1000 * report.startup_s:.0f} ms")
    for probe in report.probes:
        print(f"  {probe.name:<22} {'blocked' if probe.blocked else 'REACHED'}  ({probe.result[:90]})")
    if report.reached:
        raise RuntimeError("the sandbox let an escape through (above): do not run T3RL's arithmetic verifier here")


def cmd_prompt(args) -> None:
    """The exact prompt one item of a prepared dataset is given under a config's protocol."""
    from PIL import Image
    from transformers import AutoConfig, AutoProcessor

    from ..datasets import authors_items
    from ..datasets.prepare import load_manifest
    from ..evaluation.evaluate import rendered_prompt
    from ..plan import load_config
    from ..plan.grid import Plan

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
        from ..plan.config import variant

        config = variant(config, args.protocol)
    template = config["evaluation"]["mcq"]["chat_template"]
    text = authors_items.authors_texts(row)[0] if template == "authors" else row.iloc[0]["prompt"]
    source = plan.models[args.model]["source"]
    with Image.open(data_dir / row.iloc[0]["image"]) as image:
        print(rendered_prompt(AutoProcessor.from_pretrained(source), AutoConfig.from_pretrained(source), text,
                              image.convert("RGB"), template, row.iloc[0].get("system")))


def cmd_rescore(args) -> None:
    from ..datasets.prepare import load_manifest
    from ..evaluation.evaluate import rescore

    manifest = load_manifest(Path(args.data)) if args.data else None
    for eval_dir in args.eval_dirs:
        scores = rescore(Path(eval_dir), manifest)
        print(f"{eval_dir}: " + ", ".join(f"{k} {v:.2f}" for k, v in scores.items()))


def _add_audit_reward(sub) -> None:
    p = sub.add_parser("audit-reward", help="advantages each method's reward gives GRPO (TTRV diversity term)")
    p.add_argument("--groups", type=int, default=256, help="sampled prompts")
    p.add_argument("--num-generations", type=int, default=32, help="completions per prompt (TTRV: 32)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled answer groups")
    p.add_argument("--out-dir", default="results/audit", help="directory of reward_audit.csv and .png")
    p.set_defaults(func=cmd_audit_reward)


def _add_check_sandbox(sub) -> None:
    p = sub.add_parser("check-sandbox", help="does the T3RL verifier's sandbox (bubblewrap) work on this node?")
    p.set_defaults(func=cmd_check_sandbox, rerun=False)  # read by a person


def _add_prompt(sub) -> None:
    p = sub.add_parser("prompt", help="the exact prompt (chat template, image tokens counted) an item is given")
    p.add_argument("configfiles", nargs="+", help="the config file(s), merged in order as snakemake merges them")
    p.add_argument("--dataset", required=True, help="a prepared dataset (results/data/<dataset>)")
    p.add_argument("--item", required=True, help="the item's id, or the authors' item id")
    p.add_argument("--model", required=True, help="a model name of the config")
    p.add_argument("--results", default="results", help="the results tree the dataset was prepared in")
    p.add_argument("--protocol", choices=["clean", "authors"], default=None,
                   help="the protocol whose template renders it (default: the config's `protocol`)")
    p.set_defaults(func=cmd_prompt, rerun=False)


def _add_rescore(sub) -> None:
    p = sub.add_parser("rescore", help="score stored MCQ predictions again under both parsers and verl's mean@n")
    p.add_argument("eval_dirs", nargs="+", help="evaluation directories (predictions.parquet + metrics.json)")
    p.add_argument("--data", help="the prepared dataset, for predictions stored without their prompt text")
    p.set_defaults(func=cmd_rescore, rerun=False)


PARSERS = {"audit-reward": _add_audit_reward, "check-sandbox": _add_check_sandbox, "prompt": _add_prompt,
           "rescore": _add_rescore}
