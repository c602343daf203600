"""Metrics on parsed predictions (SPEC.md "Evaluation protocol")."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd


def accuracy(preds: Sequence, golds: Sequence) -> float:
    """Fraction correct in percent; an unparsable prediction (None) is wrong."""
    if len(preds) != len(golds):
        raise ValueError(f"accuracy: {len(preds)} predictions but {len(golds)} gold answers")
    if not golds:
        raise ValueError("accuracy of an empty set is undefined")
    return 100.0 * sum(p is not None and p == g for p, g in zip(preds, golds)) / len(golds)


def verl_mean_at(prompts: Sequence[str], values: Sequence[float]) -> dict[int, float]:
    """verl's validation means as the TTRV authors' logs report them (their fork's trainer/ppo/metric_utils.py
    `process_validation_metrics`): items grouped by prompt text, each group's mean, then for every group
    size n the mean over the groups of that size, `mean@n`. Their trainer logs the largest n as val-core
    (ray_trainer.py `_validate`) and the others as val-aux; a published cell may be either (TTRV's MathVerse
    cells are mean@1: the 975 prompts asked once of 1,699). Values in percent, as `values` are 0/1 or scores x 100."""
    if len(prompts) != len(values) or not prompts:
        raise ValueError(f"verl_mean_at: {len(prompts)} prompts for {len(values)} values")
    groups: dict[str, list[float]] = {}
    for prompt, value in zip(prompts, values):
        groups.setdefault(prompt, []).append(float(value))
    by_size: dict[int, list[float]] = {}
    for group in groups.values():
        by_size.setdefault(len(group), []).append(sum(group) / len(group))
    return {n: sum(means) / len(means) for n, means in sorted(by_size.items())}


def smape_score(preds: Sequence[float | None], golds: Sequence[float]) -> float:
    """1 - sMAPE in [0, 1] (Capture, TTRV Appendix A), sMAPE as CAPTURe's compute_smape.py
    (atinpothiraj/CAPTURe, `compute_mape`, now eval.py): the mean over samples of
    |p - g| / (|p| + |g|), where an unparsable answer (the extractor's -1) counts 1 (100 %) and
    stays in the mean. Zero counts: p = 0 with g > 0 gives |0 - g| / g = 1, as there; p = g = 0
    counts 0 (a perfect count; the authors' division raises ZeroDivisionError there, and Capture's
    gold counts are never 0). A negative prediction p < 0 <= g gives (|p| + g) / (|p| + g) = 1,
    the same as the -1 marker."""
    if len(preds) != len(golds) or not golds:
        raise ValueError(f"smape_score: {len(preds)} predictions for {len(golds)} gold answers")
    errors = []
    for p, g in zip(preds, golds):
        if p is None:
            errors.append(1.0)
        elif p == g:
            errors.append(0.0)
        else:
            errors.append(abs(p - g) / (abs(p) + abs(g)))
    return 1.0 - sum(errors) / len(errors)


EMPTY_MASK_IOU = ("zero", "one", "skip")


def giou_ciou_from_counts(intersections: Sequence[int], unions: Sequence[int],
                          empty: str = "zero") -> tuple[float, float]:
    """gIoU = mean of per-sample IoU, cIoU = sum of intersections / sum of unions, 0 when the
    unions sum to 0. An empty prediction against a non-empty target is IoU 0 everywhere (an
    unparsable answer too: intersection 0, union = the gold mask). A sample whose prediction and
    target are both empty (union 0) is, by `empty`:
      "zero" (default) - IoU 0: VisionReasoner (JIA-Lab-research/VisionReasoner)
               evaluation/evaluation_segmentation.py `compute_iou` returns (0, 0) and
               calculate_iou_with_bbox.py `calculate_metrics` takes `I / U if U > 0 else 0`;
               Seg-Zero evaluation_scripts/calculate_iou.py does the same, VR-TTRL reports these
      "one"  - IoU 1: LISA's validate (`acc_iou[union == 0] += 1.0`, a no-object target found)
      "skip" - left out of gIoU: Seg-Zero evaluation_scripts/evaluation.py, whose `compute_iou`
               returns a bare 0 that fails to unpack, so the sample is never written
    cIoU is the same in all three: the sample adds 0 to both sums."""
    if empty not in EMPTY_MASK_IOU:
        raise ValueError(f"evaluation.grounding.empty_mask_iou must be one of {EMPTY_MASK_IOU}, got {empty!r}")
    if len(intersections) != len(unions) or not unions:
        raise ValueError(f"giou_ciou: {len(intersections)} intersections for {len(unions)} unions")
    ious = [i / u if u else {"zero": 0.0, "one": 1.0, "skip": None}[empty] for i, u in zip(intersections, unions)]
    ious = [iou for iou in ious if iou is not None]
    if not ious:
        raise ValueError("giou_ciou: every sample has an empty prediction and target, and empty='skip' drops them all")
    total_union = sum(unions)
    return sum(ious) / len(ious), (sum(intersections) / total_union if total_union else 0.0)


def giou_ciou(pred_masks, gt_masks, empty: str = "zero") -> tuple[float, float]:
    """(gIoU, cIoU) of boolean masks, one pair per sample."""
    inter = [int((p & g).sum()) for p, g in zip(pred_masks, gt_masks)]
    union = [int((p | g).sum()) for p, g in zip(pred_masks, gt_masks)]
    return giou_ciou_from_counts(inter, union, empty)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with c correct among n samples (Chen et al. 2021, Eq. 1):
    1 - C(n - c, k) / C(n, k). With greedy decoding (n = k = 1) it is plain accuracy, which is
    how ECHO's pass@1 cells are filled."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


# MME (Fu et al. 2023): 10 perception and 4 cognition subtasks, each scored acc + acc+ (acc+:
# both questions of an image right), so a subtask scores at most 200 and perception 2000.
MME_PERCEPTION = ("existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark",
                  "artwork", "OCR")
MME_COGNITION = ("commonsense_reasoning", "numerical_calculation", "text_translation", "code_reasoning")


def mme_score(category: Sequence[str], image: Sequence[str], correct: Sequence[bool]) -> dict[str, float]:
    """MME's official score from per-question correctness: per subtask acc (% of questions) +
    acc+ (% of images with every question right), summed into perception, cognition and total."""
    frame = pd.DataFrame({"category": category, "image": image, "correct": correct})
    unknown = set(frame["category"]) - set(MME_PERCEPTION) - set(MME_COGNITION)
    if unknown:
        raise ValueError(f"mme_score: unknown MME subtask(s) {sorted(unknown)}")
    per_image = frame.groupby(["category", "image"])["correct"].all().groupby("category").mean()
    subtask = 100 * frame.groupby("category")["correct"].mean() + 100 * per_image
    perception = float(subtask.reindex(MME_PERCEPTION).fillna(0).sum())
    cognition = float(subtask.reindex(MME_COGNITION).fillna(0).sum())
    return {"mme_perception": perception, "mme_cognition": cognition, "mme_total": perception + cognition}
