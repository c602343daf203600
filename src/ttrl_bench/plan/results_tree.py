"""One results tree per config: a run records the config files it was given in
`results/config_files.json`, and a run of other config files in the same directory stops before
any job (its store, tables and figures would replace the first config's). Another config runs in
its own directory: `snakemake --directory runs/<name> --configfile ...` (issue 26 point 5).

Layer 6 of the plan (checks): imports no other plan module (docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

import json
import os
from pathlib import Path

RECORD = "config_files.json"
DEFAULT_CONFIG = "config/config.yaml"


def config_files(given, replaced: bool) -> list[str]:
    """The config of a run, named by its files: the embedded default unless replaced
    (--replace-workflow-config), then each --configfile in order, relative to the working directory."""
    files = [] if replaced else [DEFAULT_CONFIG]
    for path in given:
        absolute = os.path.abspath(path)
        inside = not os.path.relpath(absolute).startswith("..")
        files.append(os.path.relpath(absolute) if inside else absolute)
    return files


def check_results_tree(results: str | Path, files: list[str]) -> None:
    """Stop when `results` holds another config's results."""
    record = Path(results) / RECORD
    if not record.exists():
        return
    owner = json.loads(record.read_text())["config_files"]
    if owner != files:
        raise ValueError(
            f"{results}/ holds the results of config {' + '.join(owner)} ({record}); a run of "
            f"{' + '.join(files) or 'no config file'} here would replace its store, tables and figures. Run it in a "
            f"directory of its own: snakemake --directory runs/<name> {' '.join('--configfile ' + f for f in files if f != DEFAULT_CONFIG)}"
            f"{'' if DEFAULT_CONFIG in files else ' --replace-workflow-config'} (or move {results}/ away; targets go "
            f"before --configfile, which takes every file name after it as a config file)"
        )


def claim_results_tree(results: str | Path, files: list[str]) -> None:
    """Record the config of the first run that writes into `results`."""
    record = Path(results) / RECORD
    if not record.exists():
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"config_files": files}, indent=1) + "\n")
