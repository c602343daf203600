"""What an evaluation job costs before it runs, from its work: items x (prompt + output tokens) / throughput
of the backend on the card. Two cases: the expected one (the plan's minutes and GPU-hours) and the slowest
plausible one (every image at its processor's largest size, every answer at `max_new_tokens`, HF generate
where `auto` might fall back to it), which times the margin (cost.py `MARGIN`) is the SLURM limit.

- Items: the prepared split's size, else the TTRV authors' item list's (`AUTHORS_TEST_ITEMS`), else unknown
  (the estimate is then "?" and the limit assumes `LARGEST_TEST_SET`).
- Prompt tokens: the image tokens of one image under the model's pixel bound for the protocol
  (models/families.py `image_tokens`: the test set's typical image, plan/samples.py TYPICAL_IMAGE_SIZES, and the
  bound's most), plus `TEXT_TOKENS`.
- Output tokens: what the task's answers take (`TYPICAL_ANSWER_TOKENS`), at most `max_new_tokens`.
- Throughput: measured on one H100 80 GB (docs/gpu-runs.md, InternVL3-2B size, 1.86 B
  parameters, 597 images at 896 px = 1,280 image tokens + about 60 text, 6 new tokens, greedy): HF generate
  21 items/s (batch 64), vLLM 36.2 items/s; scaled by parameters (FLOPs per token) and the card (cards.py).
- The TTRV authors' validation was host-bound: about 4 items/s per job whatever the model or GPU count
  (verl's single-process reward and batching; their logs' `timing_s/testing`). `authors_log_minutes` models
  their logs that way (benchmarks/plan_vs_logs.py); our own evaluation loop is costed by throughput.

Layer 4 of the plan (cost): imports cards.py (docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

import math

from .cards import EVALUATION_CARD, Card, speed

PROBE_BILLIONS = 1.86
PROBE_TOKENS = 1280 + 60 + 6  # image + text + new tokens of one probe item
PROBE_ITEMS_PER_S = {"hf": 21.0, "vllm": 36.2}
TEXT_TOKENS = 100  # question, options and chat template: the authors' AI2D prompts are ~1,490 with 1,280 image
# Typical answer lengths: MCQ from the authors' logs (response_length/mean 2.8-5.4 tokens, their greedy letters);
# grounding (a short reasoning and a JSON box) and math (reasoning to \boxed{}) are assumptions, not measured.
TYPICAL_ANSWER_TOKENS = {"mcq": 6, "grounding": 256, "math": 1024}
# The TTRV authors' test item lists (docs/ttrv-authors-logs.md; their logs' n_test where logged), by our names.
AUTHORS_TEST_ITEMS = {
    "ai2d": 2704, "dtd": 5640, "imagenet": 49032, "imagenet-a": 7467, "imagenet-r": 28506, "imagenet-sketch": 35250,
    "imagenet-v2": 9772, "mathverse": 1699, "mathvista": 490, "mme": 1576, "realworldqa": 765, "resisc45": 4500,
    "seed-bench": 3881,
    "food101": 25250,  # not shipped by the authors: Food-101's official test split (Bossard et al. 2014)
}
LARGEST_TEST_SET = 50000  # ImageNet's validation set: the limit of a set whose size only preparation tells
# The authors' evaluation pace, fitted on the 71 readable logs' `timing_s/testing` (benchmarks/plan_vs_logs.py
# prints the fit): items per second per job, the median and the slowest log.
AUTHORS_ITEMS_PER_S = 4.38
AUTHORS_SLOWEST_ITEMS_PER_S = 2.39  # mathvista_20 InternVL3-8B 2e: 490 items in 205.4 s


def tokens_per_second(backend: str, billions: float, card: Card, slowest: bool = False) -> float:
    """Prompt + output tokens one GPU of `card` decodes per second greedily for a model of `billions`
    (`slowest`: no gain from a card faster than the H100 it was measured on, cards.speed)."""
    per_s = PROBE_ITEMS_PER_S[backend] * PROBE_TOKENS
    return per_s * PROBE_BILLIONS / max(billions, 0.1) * speed(card, EVALUATION_CARD, slowest)


def evaluation_minutes(items: int, image_tokens: int, output_tokens: int, backend: str, billions: float,
                       card: Card, completions: int = 1, slowest: bool = False) -> float:
    """Minutes of one pass: items x completions x (image + text + output tokens) / throughput."""
    tokens = items * completions * (image_tokens + TEXT_TOKENS + output_tokens)
    return tokens / tokens_per_second(backend, billions, card, slowest) / 60


def evaluation_estimate(items: int | None, image_tokens: tuple[int, int], task: str, max_new_tokens: int,
                        backend: str, billions: float, card: Card, completions: int = 1) -> dict:
    """The expected and the slowest plausible minutes of an evaluation job (expected None: items unknown), from
    the (typical, most) image tokens of one image (models/families.py `image_tokens`)."""
    typical, most = image_tokens
    answer = min(max_new_tokens, TYPICAL_ANSWER_TOKENS.get(task, max_new_tokens))
    expected_backend = "vllm" if backend in ("auto", "vllm") else "hf"
    expected = (evaluation_minutes(items, typical, answer, expected_backend, billions, card, completions)
                if items else None)
    slowest = evaluation_minutes(items or LARGEST_TEST_SET, most, max_new_tokens, "hf", billions, card, completions,
                                 slowest=True)
    return {"items": items, "expected_min": expected, "slowest_min": slowest, "image_tokens": typical,
            "answer_tokens": answer, "backend": expected_backend}


def authors_log_minutes(items: int, passes: int = 1) -> dict:
    """The TTRV authors' validation time of a log: host-bound, items / their pace, per pass."""
    return {"expected_min": passes * items / AUTHORS_ITEMS_PER_S / 60,
            "slowest_min": passes * items / AUTHORS_SLOWEST_ITEMS_PER_S / 60}


def limit_minutes(slowest_min: float, margin: float, floor: int = 10) -> int:
    """A SLURM limit: the slowest case times the margin, start-up included by the caller, at least `floor`."""
    return max(floor, int(math.ceil(slowest_min * margin)))
