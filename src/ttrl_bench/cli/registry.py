"""The registries: `datasets` and `methods` (list every entry, or show one)."""

from __future__ import annotations

import json


def cmd_datasets_list(args) -> None:
    from ..datasets.registry import REGISTRY

    if args.action == "show":
        _show("dataset", args.name, REGISTRY, lambda spec: vars(spec))
        return
    rows = [("name", "task", "metric", "split", "paper column", "source")]
    rows += [(s.name, s.task, s.metric, s.split, s.paper_name, s.source) for s in REGISTRY.values()]
    _print_columns(rows)


def _show(kind: str, name: str | None, known: dict, fields) -> None:
    """One registry entry or preset, field by field (`datasets show NAME`, `methods show NAME`)."""
    from ..plan.names import did_you_mean

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
    from ..adaptation.presets import PRESETS, method_task
    from ..rewards.registry import reward_parameters

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


def _add_listing(sub, name: str, help: str, listed: str, shown: str, func) -> None:
    parser = sub.add_parser(name, help=help)
    parser.add_argument("action", choices=["list", "show"], help=f"list: {listed}; show NAME: {shown}")
    parser.add_argument("name", nargs="?", help=f"the {name[:-1]} to show")
    parser.set_defaults(func=func, rerun=False)


def _add_datasets(sub) -> None:
    _add_listing(sub, "datasets", "the dataset registry", "every registered dataset and its source",
                 "its fields, reader, answer format, source and evidence", cmd_datasets_list)


def _add_methods(sub) -> None:
    _add_listing(sub, "methods", "the method presets (adaptation/presets.py)",
                 "every preset, its reward, update and source",
                 "the preset, its hyperparameters and the reward_params its reward takes", cmd_methods_list)


PARSERS = {"datasets": _add_datasets, "methods": _add_methods}
