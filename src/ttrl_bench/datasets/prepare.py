"""Prepare one dataset: read its source, filter by resolution, build MCQ prompts, write
`manifest.parquet` and `prep_stats.json` (original / kept / dropped by reason)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from .preprocessing import (
    GROUNDING_SYSTEM,
    grounding_prompt,
    image_size,
    mcq_options,
    recognition_prompt,
    resolution_verdict,
    sample_rng,
)
from .registry import get_dataset
from .sources import read_source

log = logging.getLogger(__name__)


def prepare_dataset(name: str, out_dir: Path, seed: int, resolution_rule: str = "either_side") -> dict:
    spec = get_dataset(name)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, verdicts = [], Counter()
    for sample in tqdm(read_source(spec, out_dir / "images"), desc=f"prepare {name}", unit="img"):
        verdict = resolution_verdict(sample["image_path"], resolution_rule)
        verdicts[verdict] += 1
        if verdict != "kept":
            log.warning("%s: dropped %s (%s)", name, sample["image_path"], verdict)
            continue
        row = {
            "id": sample["id"],
            "split": sample["split"],
            "image": str(Path(sample["image_path"]).relative_to(out_dir)),
            "label": sample["label"],
        }
        if spec.task == "recognition":
            options, answer = mcq_options(sample["label"], list(spec.classes), sample_rng(seed, name, sample["id"]))
            row.update(prompt=recognition_prompt(options), options=options, answer=answer)
        elif spec.task == "grounding":
            width, height = image_size(sample["image_path"])
            row.update(prompt=grounding_prompt(sample["query"]), system=GROUNDING_SYSTEM, query=sample["query"],
                       boxes=sample["boxes"], points=sample["points"], width=width, height=height)
        else:
            raise NotImplementedError(f"dataset {name!r}: task {spec.task!r} has no preprocessing yet")
        rows.append(row)
    manifest = pd.DataFrame(rows)
    manifest.to_parquet(out_dir / "manifest.parquet", index=False)
    stats = {
        "dataset": name,
        "original": sum(verdicts.values()),
        "kept": verdicts["kept"],
        "dropped": {reason: n for reason, n in sorted(verdicts.items()) if reason != "kept"},
        "resolution_rule": resolution_rule,
        "splits": {k: int(v) for k, v in manifest["split"].value_counts().sort_index().items()},
    }
    (out_dir / "prep_stats.json").write_text(json.dumps(stats, indent=2))
    return stats


def load_manifest(data_dir: Path, split: str | None = None) -> pd.DataFrame:
    path = Path(data_dir) / "manifest.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path}: prepared dataset not found; run `ttrl-bench prepare-data` first")
    manifest = pd.read_parquet(path)
    return manifest if split is None else manifest[manifest["split"] == split].reset_index(drop=True)
