"""Greedy evaluation of one model on one prepared dataset: predictions.parquet + metrics.json."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pandas as pd
from PIL import Image

from ..generation.hf import generate_greedy

log = logging.getLogger(__name__)


def predictions_frame(raw: list[str], samples: pd.DataFrame, task) -> pd.DataFrame:
    """One row per sample: raw output, parse failure, and the task's parsed / gold / score columns."""
    parsed = [task.parse(text, row) for text, row in zip(raw, samples.to_dict("records"))]
    return pd.DataFrame(
        {
            "id": samples["id"].to_numpy(),
            "raw_output": raw,
            "parse_failure": [p is None for p in parsed],
            **task.prediction_columns(parsed, samples),
        }
    )


def evaluate_model(model, processor, samples: pd.DataFrame, image_root: Path, task, max_new_tokens: int,
                   batch_size: int, vllm_settings: dict | None = None) -> pd.DataFrame:
    """Greedy predictions for `samples`; `model` is a loaded transformers model, or the path of
    one as a string to run through vLLM (config `evaluation.backend`, engine `evaluation.vllm`)."""
    images = [Image.open(image_root / path).convert("RGB") for path in samples["image"]]
    systems = list(samples["system"]) if "system" in samples else None
    prompts = list(samples["prompt"])
    if isinstance(model, str):
        from ..generation.vllm_offline import generate_greedy_vllm

        raw = generate_greedy_vllm(model, processor, prompts, images, max_new_tokens, systems, vllm_settings)
    else:
        raw = generate_greedy(model, processor, prompts, images, max_new_tokens, batch_size, systems)
    return predictions_frame(raw, samples, task)


def write_evaluation(predictions: pd.DataFrame, task, out_dir: Path, extra: dict, seconds: float) -> dict:
    """predictions.parquet + metrics.json (primary metric in `metric`/`value`, all in `metrics`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = task.metrics(predictions)
    primary = task.primary
    summary = {
        "metric": primary,
        "value": metrics[primary],
        "metrics": {**metrics, "unparsable_rate": 100 * float(predictions["parse_failure"].mean())},
        "n": len(predictions),
        "n_unparsable": int(predictions["parse_failure"].sum()),
        "eval_seconds": seconds,
        **extra,
    }
    predictions.to_parquet(out_dir / "predictions.parquet", index=False)
    (out_dir / "metrics.json").write_text(json.dumps(summary, indent=2, default=str))
    log.info("%s %.2f on %d samples (%d unparsable)", primary, summary["value"], summary["n"], summary["n_unparsable"])
    return summary


def timed_evaluation(model, processor, samples, image_root, task, out_dir, extra, max_new_tokens, batch_size,
                     vllm_settings: dict | None = None) -> dict:
    start = time.perf_counter()
    predictions = evaluate_model(model, processor, samples, image_root, task, max_new_tokens, batch_size, vllm_settings)
    return write_evaluation(predictions, task, out_dir, extra, time.perf_counter() - start)
