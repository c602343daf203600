"""Greedy evaluation of one model on one prepared dataset: predictions.parquet + metrics.json."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pandas as pd
from PIL import Image

from ..generation.hf import generate_greedy
from .extraction import extract_choice
from .metrics import accuracy

log = logging.getLogger(__name__)


def evaluate_model(model, processor, samples: pd.DataFrame, image_root: Path, max_new_tokens: int, batch_size: int) -> pd.DataFrame:
    """One row per sample: raw output, parsed letter, gold letter, correct, parse failure."""
    images = [Image.open(image_root / path).convert("RGB") for path in samples["image"]]
    raw = generate_greedy(model, processor, list(samples["prompt"]), images, max_new_tokens, batch_size)
    parsed = [extract_choice(text, list(options)) for text, options in zip(raw, samples["options"])]
    return pd.DataFrame(
        {
            "id": samples["id"].to_numpy(),
            "raw_output": raw,
            "parsed": parsed,
            "gold": samples["answer"].to_numpy(),
            "correct": [p is not None and p == g for p, g in zip(parsed, samples["answer"])],
            "parse_failure": [p is None for p in parsed],
        }
    )


def summarise(predictions: pd.DataFrame) -> dict:
    return {
        "metric": "accuracy",
        "value": accuracy(list(predictions["parsed"]), list(predictions["gold"])),
        "n": len(predictions),
        "n_correct": int(predictions["correct"].sum()),
        "n_unparsable": int(predictions["parse_failure"].sum()),
    }


def write_evaluation(predictions: pd.DataFrame, out_dir: Path, extra: dict, seconds: float) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = {**summarise(predictions), "eval_seconds": seconds, **extra}
    predictions.to_parquet(out_dir / "predictions.parquet", index=False)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, default=str))
    log.info("accuracy %.2f%% on %d samples (%d unparsable)", metrics["value"], metrics["n"], metrics["n_unparsable"])
    return metrics


def timed_evaluation(model, processor, samples, image_root, out_dir, extra, max_new_tokens, batch_size) -> dict:
    start = time.perf_counter()
    predictions = evaluate_model(model, processor, samples, image_root, max_new_tokens, batch_size)
    return write_evaluation(predictions, out_dir, extra, time.perf_counter() - start)
