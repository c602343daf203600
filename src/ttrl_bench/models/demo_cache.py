"""The demo model, built once per recipe: a cache shared by every run directory of this machine
(`snakemake --directory runs/<name>` would otherwise rebuild the same model, about a minute and a half
on 2 cores). The key is everything the build reads: the builder's source (tiny.py, tiny_families.py),
the libraries' versions, the family, steps and seed, and each training row with its image's bytes.

`TTRL_BENCH_DEMO_CACHE` names the cache folder (default: $XDG_CACHE_HOME/ttrl-bench/demo-models, or
~/.cache/...); `off` builds every time."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import tokenizers
import torch
import transformers

from . import tiny, tiny_families

CACHE_ENV = "TTRL_BENCH_DEMO_CACHE"


def cache_root() -> Path | None:
    """The cache folder, or None when the cache is off."""
    value = os.environ.get(CACHE_ENV, "")
    if value == "off":
        return None
    if value:
        return Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ttrl-bench" / "demo-models"


def _plain(value):
    """A manifest value as JSON sees it (numpy arrays and scalars as lists and numbers, whole)."""
    return value.tolist() if hasattr(value, "tolist") else str(value)


def recipe_key(rows: list[dict], image_file: Callable[[dict], Path], steps: int, seed: int, family: str) -> str:
    """The recipe's hash: the same key, the same model bytes (the build is deterministic: tests/cli/test_cli.py)."""
    digest = hashlib.sha256()
    for module in (tiny, tiny_families):
        digest.update(Path(module.__file__).read_bytes())
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__}
    digest.update(json.dumps({"steps": steps, "seed": seed, "family": family, **versions}, sort_keys=True).encode())
    for row in rows:
        digest.update(json.dumps({k: v for k, v in row.items() if k != "data_dir"}, sort_keys=True,
                                 default=_plain).encode())
        digest.update(image_file(row).read_bytes())
    return digest.hexdigest()[:20]


def build_once(out_dir: Path, key: str, build: Callable[[Path], dict]) -> Path | None:
    """The cached model of `key` copied to `out_dir` (returns where it came from), else `build(out_dir)` run
    and its result stored under `key` (returns None). A store is a rename, so concurrent builds of one
    recipe in two directories leave one complete entry."""
    root = cache_root()
    entry = root / key if root is not None else None
    if entry is not None and (entry / "build_info.json").exists():
        shutil.copytree(entry, out_dir, dirs_exist_ok=True)
        return entry
    build(out_dir)
    if entry is not None:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{key}-"))
        shutil.copytree(out_dir, staging, dirs_exist_ok=True)
        try:
            os.rename(staging, entry)
        except OSError:  # another run stored it first: the same bytes
            shutil.rmtree(staging, ignore_errors=True)
    return None
