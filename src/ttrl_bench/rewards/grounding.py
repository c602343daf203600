"""VR-TTRL rewards for structured (grounding / counting) answers, after the VisionReasoner
reward of the Seg-Zero code (verl/utils/reward_score/vision_reasoner.py) and VR-TTRL Section 3.

An answer is a list of objects {"bbox_2d": [x1, y1, x2, y2], "point_2d": [x, y]} in pixels of
the original image. Pure functions: no torch, no trainer.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

_THINK_ANSWER = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL)
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


@dataclass(frozen=True)
class Thresholds:
    """A pair of objects matches on a test when IoU > iou, box L1 < l1 px, point distance < point px.
    VR-TTRL Table 9: loose 0.3/20/50, base 0.5/10/30 (default), strict 0.7/5/15."""

    iou: float = 0.5
    l1: float = 10.0
    point: float = 30.0


THRESHOLDS = {"loose": Thresholds(0.3, 20, 50), "base": Thresholds(), "strict": Thresholds(0.7, 5, 15)}


def _numbers(value, length: int) -> bool:
    return (
        isinstance(value, list)
        and len(value) == length
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    )


def parse_objects(text: str | None) -> list[dict] | None:
    """The JSON list inside <answer></answer>, or None when absent or not a list of objects."""
    match = _ANSWER.search(text or "")
    if not match:
        return None
    try:
        data = json.loads(match.group(1))
    except json.JSONDecodeError:
        return None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        return None
    return data


def valid_objects(objects: list[dict] | None) -> list[dict]:
    """Objects with both a valid box (4 numbers) and a valid point (2 numbers): the ones that
    can be compared and scored."""
    return [o for o in objects or [] if _numbers(o.get("bbox_2d"), 4) and _numbers(o.get("point_2d"), 2)]


def thinking_format_reward(text: str) -> float:
    """1 when the whole output is <think>...</think> <answer>...</answer>, else 0."""
    return 1.0 if _THINK_ANSWER.fullmatch(text.strip()) else 0.0


def answer_format_reward(objects: list[dict] | None) -> float:
    """Per object +1 for a valid bbox_2d, +1 for a valid point_2d, averaged over objects (max 2)."""
    if not objects:
        return 0.0
    return sum(_numbers(o.get("bbox_2d"), 4) + _numbers(o.get("point_2d"), 2) for o in objects) / len(objects)


def non_repeat_reward(text: str) -> float:
    """0 when a sentence of the thinking appears twice (split on '.'), else 1."""
    match = _THINK.search(text)
    sentences = [s.strip() for s in (match.group(1) if match else text).split(".") if s.strip()]
    return 0.0 if len(sentences) != len(set(sentences)) else 1.0


def box_iou(a, b) -> float:
    inter_w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    inter_h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = inter_w * inter_h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def pairwise_accuracy(p: list[dict], q: list[dict], thresholds: Thresholds = Thresholds()) -> float:
    """Agreement of two answers in [0, 3]: per matched object pair, the number of tests passed
    (IoU, box L1, point distance); Hungarian matching on cost 3 - passed; divided by max(M, K)."""
    p, q = valid_objects(p), valid_objects(q)
    if not p or not q:
        return 0.0
    passed = np.zeros((len(p), len(q)))
    for i, a in enumerate(p):
        for j, b in enumerate(q):
            iou = box_iou(a["bbox_2d"], b["bbox_2d"])
            l1 = sum(abs(x - y) for x, y in zip(a["bbox_2d"], b["bbox_2d"])) / 4
            dist = math.dist(a["point_2d"], b["point_2d"])
            passed[i, j] = (iou > thresholds.iou) + (l1 < thresholds.l1) + (dist < thresholds.point)
    rows, cols = linear_sum_assignment(3 - passed)
    return float(passed[rows, cols].sum()) / max(len(p), len(q))


def consensus(
    answers: list[list[dict] | None], thresholds: Thresholds = Thresholds(), anti: bool = False
) -> tuple[int | None, list[float]]:
    """VR-TTRL geometric consensus: the pseudo-label is the answer with the highest total pairwise
    accuracy against all others (lowest with anti=True, the anti-consensus ablation; ties: first);
    each answer's reward is its pairwise accuracy against the pseudo-label. Answers with no valid
    object cannot be the pseudo-label and score 0; (None, zeros) when no answer is valid."""
    candidates = [i for i, a in enumerate(answers) if valid_objects(a)]
    if not candidates:
        return None, [0.0] * len(answers)
    totals = {
        i: sum(pairwise_accuracy(answers[i], answers[j], thresholds) for j in range(len(answers)) if j != i)
        for i in candidates
    }
    pick = min if anti else max
    best = pick(totals.values())
    label = next(i for i in candidates if totals[i] == best)
    return label, [pairwise_accuracy(a, answers[label], thresholds) for a in answers]
