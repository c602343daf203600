"""Evaluation of one model on one prepared dataset: predictions.parquet + metrics.json. Greedy by
default (TTRV, VR-TTRL Appendix A); k sampled completions per question where the paper scores
pass@k at a validation temperature (ECHO, config evaluation.math)."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from ..datasets.preprocessing import decode_image
from ..generation.budget import within_budget
from ..generation.hf import chat_prompt, generate_greedy, generate_sampled
from ..runs.kill_points import kill_point

log = logging.getLogger(__name__)


def predictions_frame(raw: list, samples: pd.DataFrame, task, errors: list[str | None] | None = None) -> pd.DataFrame:
    """One row per sample: raw output, parse failure, the task's parsed / gold / score columns, and
    `error` (why a sample got no output, e.g. an image that does not decode; None otherwise).
    Sampled evaluation: `raw[i]` is the list of sample i's completions (the task scores all of them,
    `raw_outputs`; `raw_output` is the first, `parse_failure` when none parses)."""
    rows = samples.to_dict("records")
    sampled = bool(raw) and isinstance(raw[0], list)
    if sampled:
        parsed = [[task.parse(text, row) for text in texts] for texts, row in zip(raw, rows)]
        first, failures = [texts[0] for texts in raw], [all(p is None for p in ps) for ps in parsed]
    else:
        parsed = [task.parse(text, row) for text, row in zip(raw, rows)]
        first, failures = raw, [p is None for p in parsed]
    return pd.DataFrame(
        {
            "id": samples["id"].to_numpy(),
            # the source's own id (a local copy's `qid`, a Hub row's key) beside ours, where the reader kept one
            **({"source_id": samples["source_id"].to_numpy()} if "source_id" in samples else {}),
            "raw_output": first,
            **({"raw_outputs": raw} if sampled else {}),
            "parse_failure": failures,
            **task.prediction_columns(parsed, samples),
            "error": errors or [None] * len(raw),
        }
    )


# Samples decoded at a time for vLLM, whose engine schedules its own batches: large enough to keep
# it busy, small enough to bound host memory (about 0.75 GB of decoded 500x500 RGB images).
VLLM_CHUNK = 1024


def evaluate_model(model, processor, samples: pd.DataFrame, image_root: Path, task, max_new_tokens: int,
                   batch_size: int, vllm_settings: dict | None = None, sampling: dict | None = None,
                   max_prompt_tokens: int | None = None) -> pd.DataFrame:
    """Greedy predictions for `samples`, or with `sampling` ({n, temperature, top_p, seed}) n
    sampled completions each; `model` is a loaded transformers model, or the path of
    one as a string to run through vLLM (config `evaluation.backend`, engine `evaluation.vllm`).

    Images are decoded one batch at a time, so host memory is bounded whatever the test set's
    size (TTRV scores all 50,000 ImageNet validation images). A sample whose image does not
    decode, or whose prompt exceeds `max_prompt_tokens` (both backends: evaluation.vllm's budget), gets an
    error row (empty output, scored as wrong) and the job goes on."""
    chunk = VLLM_CHUNK if isinstance(model, str) else batch_size
    if isinstance(model, str):  # one engine for every chunk
        from ..generation.vllm_offline import VllmGreedy

        model = VllmGreedy(model, vllm_settings, max_new_tokens, sampling=sampling)
    raw: list[str] = []
    errors: list[str | None] = []
    empty = "" if sampling is None else [""] * int(sampling["n"])  # a sample without output
    for start in tqdm(range(0, len(samples), chunk), desc="sampled eval" if sampling else "greedy eval", unit="batch"):
        batch = samples.iloc[start : start + chunk].to_dict("records")
        decoded = [within_budget(processor, sample, decode_image(image_root, sample), max_prompt_tokens,
                                 "evaluation.vllm") for sample in batch]
        ok = [i for i, (_, error) in enumerate(decoded) if error is None]
        for _, error in decoded:
            if error:
                log.warning("%s", error)
        prompts = [batch[i]["prompt"] for i in ok]
        images = [decoded[i][0] for i in ok]
        systems = [batch[i].get("system") for i in ok] if "system" in samples else None
        outputs = iter(_generate(model, processor, prompts, images, max_new_tokens, batch_size, systems, sampling)
                       if ok else [])
        raw.extend(next(outputs) if error is None else empty for _, error in decoded)
        errors.extend(error for _, error in decoded)
    return with_prompts(predictions_frame(raw, samples, task, errors), processor, samples)


def with_prompts(frame: pd.DataFrame, processor, samples: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the text each item was given (`prompt_text`, where the task's columns have none) and that
    text through the chat template (`chat_prompt`, one placeholder per image: `ttrl-bench prompt` shows the
    processor's expansion): every evaluation's predictions, the per-sample ones included."""
    if "prompt_text" not in frame:
        frame["prompt_text"] = list(samples["prompt"])
    if hasattr(processor, "apply_chat_template"):
        systems = samples["system"] if "system" in samples else [None] * len(samples)
        frame["chat_prompt"] = [chat_prompt(processor, p, s) for p, s in zip(samples["prompt"], systems)]
    return frame


def _generate(model, processor, prompts, images, max_new_tokens, batch_size, systems, sampling=None) -> list:
    if not hasattr(model, "generate"):  # the vLLM engine
        return model(processor, prompts, images, systems)
    if sampling is not None:
        return generate_sampled(model, processor, prompts, images, max_new_tokens, batch_size, sampling, systems)
    return generate_greedy(model, processor, prompts, images, max_new_tokens, batch_size, systems, progress=False)


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
        "n_errors": int(predictions["error"].notna().sum()) if "error" in predictions else 0,
        "eval_seconds": seconds,
        **extra,
    }
    predictions.to_parquet(out_dir / "predictions.parquet", index=False)
    kill_point("evaluate")  # tests/workflow/test_resume.py: a kill with one of the two outputs written
    (out_dir / "metrics.json").write_text(json.dumps(summary, indent=2, default=str))
    log.info("%s %.2f on %d samples (%d unparsable)", primary, summary["value"], summary["n"], summary["n_unparsable"])
    return summary


def timed_evaluation(model, processor, samples, image_root, task, out_dir, extra, max_new_tokens, batch_size,
                     vllm_settings: dict | None = None, sampling: dict | None = None,
                     max_prompt_tokens: int | None = None) -> dict:
    start = time.perf_counter()
    predictions = evaluate_model(model, processor, samples, image_root, task, max_new_tokens, batch_size, vllm_settings,
                                 sampling, max_prompt_tokens)
    return write_evaluation(predictions, task, out_dir, extra, time.perf_counter() - start)


def rendered_prompt(processor, config, text: str, image, chat_template: str = "model", system: str | None = None) -> str:
    """The exact prompt an item is given, as the model's tokens decode (special tokens kept), each run of
    an image placeholder token written once with its count ("<IMG_CONTEXT>x3328"): what a log's
    `[prompt]` line shows, for `ttrl-bench prompt`."""
    from ..generation.hf import chat_prompt
    from ..models.families import placeholder_token_ids, use_chat_template

    use_chat_template(processor, config, chat_template)
    ids = processor(text=[chat_prompt(processor, text, system)], images=[image], return_tensors="pt")["input_ids"][0]
    decoded = processor.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    for token in processor.tokenizer.convert_ids_to_tokens(placeholder_token_ids(config)):
        decoded = re.sub(f"(?:{re.escape(token)})+", lambda m, t=token: f"{t}x{len(m.group(0)) // len(t)}", decoded)
    return decoded


def rescore(eval_dir: Path, manifest: pd.DataFrame | None = None) -> dict:
    """A stored MCQ evaluation scored again under both parsers and the authors' metric (tasks.rescored_metrics),
    from its predictions.parquet, without generating; its metrics.json gains those metrics. Predictions written
    before they kept their prompt text and options take them from the prepared `manifest` by sample id."""
    from .tasks import rescored_metrics

    predictions = pd.read_parquet(eval_dir / "predictions.parquet")
    if "prompt_text" not in predictions and manifest is not None:
        known = manifest.set_index("id")
        missing = sorted(set(predictions["id"]) - set(known.index))
        if missing:
            raise ValueError(f"{eval_dir}: {len(missing)} predicted sample(s) are not in the manifest, e.g. {missing[:3]}")
        predictions = predictions.assign(prompt_text=list(known.loc[predictions["id"], "prompt"]),
                                         options=[list(o) for o in known.loc[predictions["id"], "options"]])
    rescored = rescored_metrics(predictions)
    if not rescored:
        raise ValueError(f"{eval_dir}: predictions without prompt text and options (an MCQ evaluation's; "
                         "give the prepared dataset with --data)")
    summary = json.loads((eval_dir / "metrics.json").read_text())
    summary["metrics"] = {**summary["metrics"], **rescored}
    (eval_dir / "metrics.json").write_text(json.dumps(summary, indent=2, default=str))
    return rescored
