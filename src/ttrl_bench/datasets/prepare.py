"""Prepare one dataset: read its source, filter by resolution, build prompts (MCQ, VQA,
counting, grounding), write `manifest.parquet` and `prep_stats.json` (original / kept /
dropped by reason: too_large, unreadable, no_image, bad_row, not_applicable)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from .authors_items import has_authors_items, prepare_authors_items
from .preprocessing import (
    GROUNDING_SYSTEM,
    capture_prompt,
    decode_verdict,
    grounding_prompt,
    image_size,
    math_prompt,
    mcq_options,
    recognition_prompt,
    resize_square,
    resolution_verdict,
    sample_rng,
    vqa_prompt,
)
from .registry import get_dataset
from .sources import read_source

log = logging.getLogger(__name__)


def _task_fields(spec, sample: dict, seed: int) -> dict:
    """The manifest columns a task needs, from one sample of its reader."""
    if spec.task == "recognition":
        classes = sample.get("classes") or spec.classes
        options, answer = mcq_options(sample["label"], classes, sample_rng(seed, spec.name, sample["id"]))
        return {"label": sample["label"], "prompt": recognition_prompt(options, spec.prompt), "options": options,
                "answer": answer}
    if spec.task == "vqa":
        extra = {"category": sample["category"]} if "category" in sample else {}  # MME's subtasks
        return {"prompt": vqa_prompt(sample["question"], sample["options"], spec.prompt), "options": sample["options"],
                "answer": sample["answer"], **extra}
    if spec.task == "math":  # ECHO: options as letters (may be none), gold letter(s) or the answer as written
        return {"prompt": math_prompt(sample["question"], sample["options"], sample["list_options"]),
                "options": sample["options"], "answer": sample["answer"]}
    if spec.task == "counting-freeform":
        return {"prompt": capture_prompt(sample["question"]), "options": [], "answer": str(sample["answer"])}
    # grounding and counting (VR-TTRL): VisionReasoner prompt; geometry in original pixels
    width, height = image_size(sample["image_path"])
    return {"prompt": grounding_prompt(sample["query"]), "system": GROUNDING_SYSTEM, "query": sample["query"],
            "label": sample.get("label", sample["query"]), "boxes": sample.get("boxes", []),
            "points": sample.get("points", []), "count": int(sample.get("answer", len(sample.get("boxes", [])))),
            "mask": json.dumps(sample["mask"]) if "mask" in sample else None, "width": width, "height": height}


def prepare_dataset(name: str, out_dir: Path, seed: int, resolution_rule: str = "either_side",
                    source: dict | None = None, items: str = "ours") -> dict:
    """`source`: config `data.sources.<name>` (a local copy's path, format, fields, class names).
    `items` (config `data.items`): "authors" prepares the TTRV authors' own items where they ship them
    (authors_items.py), "ours" (and every set they do not ship) converts the source with our own draws."""
    if items not in ("ours", "authors"):
        raise ValueError(f"config data.items must be 'ours' or 'authors', got {items!r}")
    spec = get_dataset(name)
    out_dir.mkdir(parents=True, exist_ok=True)
    if items == "authors" and has_authors_items(name):
        return prepare_authors_items(spec, out_dir, {**spec.local, **source} if (source or {}).get("path") else source)
    rows, verdicts = [], Counter()
    for sample in tqdm(read_source(spec, out_dir / "images", source), desc=f"prepare {name}", unit="sample"):
        path = sample["image_path"]
        verdict = sample.get("skip")
        if verdict is None:  # RealWorldQA is resized, ECHO's sets kept whole: no size limit
            unlimited = spec.resize or not spec.filter_resolution
            verdict = resolution_verdict(path, resolution_rule, **({"max_side": 10**9} if unlimited else {}))
        if verdict == "kept":  # only images within the limit are decoded, so no bomb ever is
            verdict = decode_verdict(path)
        if verdict == "kept" and spec.resize:
            resize_square(path, spec.resize)
        row = {"id": sample["id"], "split": sample["split"], "image": str(Path(path).relative_to(out_dir))}
        if "source_id" in sample:
            row["source_id"] = sample["source_id"]
        if verdict == "kept":
            try:
                row.update(_task_fields(spec, sample, seed))
            except (ValueError, KeyError, TypeError, OSError) as err:
                log.warning("%s: %s (%s): %s", name, sample["id"], path, err)
                verdict = "bad_row"
        verdicts[verdict] += 1
        if verdict != "kept":
            log.warning("%s: dropped %s, %s (%s)", name, sample["id"], path, verdict)
            continue
        rows.append(row)
    if not rows:
        raise ValueError(f"dataset {name!r}: no sample kept out of {sum(verdicts.values())} ({dict(verdicts)})")
    manifest = pd.DataFrame(rows)
    manifest.to_parquet(out_dir / "manifest.parquet", index=False)
    stats = {
        "dataset": name,
        "items": "ours",
        "original": sum(verdicts.values()),
        "kept": verdicts["kept"],
        "dropped": {reason: n for reason, n in sorted(verdicts.items()) if reason != "kept"},
        "resolution_rule": resolution_rule,
        "splits": {k: int(v) for k, v in manifest["split"].value_counts().sort_index().items()},
    }
    (out_dir / "prep_stats.json").write_text(json.dumps(stats, indent=2))
    return stats


def prepare_test_subset(name: str, out_dir: Path, keep: int, px: int | None = None, seed: int = 0) -> Path:
    """`name` prepared into `out_dir` and cut to its first `keep` test samples, their images resized to
    px x px (benchmarks/gpu.py and the real-width rehearsal: the papers' image sizes on the demo sets);
    None keeps the dataset's own sizes."""
    from PIL import Image

    prepare_dataset(name, out_dir, seed=seed)
    manifest = pd.read_parquet(out_dir / "manifest.parquet")
    manifest = manifest[manifest["split"] == "test"].head(keep)
    manifest.to_parquet(out_dir / "manifest.parquet", index=False)
    for path in manifest["image"] if px else []:
        Image.open(out_dir / path).convert("RGB").resize((px, px)).save(out_dir / path)
    return out_dir


def load_manifest(data_dir: Path, split: str | None = None) -> pd.DataFrame:
    path = Path(data_dir) / "manifest.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path}: prepared dataset not found; run `ttrl-bench prepare-data` first")
    manifest = pd.read_parquet(path)
    return manifest if split is None else manifest[manifest["split"] == split].reset_index(drop=True)
