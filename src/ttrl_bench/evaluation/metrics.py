"""Metrics on parsed predictions (SPEC.md "Evaluation protocol")."""

from __future__ import annotations

from collections.abc import Sequence


def accuracy(preds: Sequence, golds: Sequence) -> float:
    """Fraction correct in percent; an unparsable prediction (None) is wrong."""
    if len(preds) != len(golds):
        raise ValueError(f"accuracy: {len(preds)} predictions but {len(golds)} gold answers")
    if not golds:
        raise ValueError("accuracy of an empty set is undefined")
    return 100.0 * sum(p is not None and p == g for p, g in zip(preds, golds)) / len(golds)


def smape_score(preds: Sequence[float | None], golds: Sequence[float]) -> float:
    """1 - sMAPE in [0, 1] (Capture, TTRV Appendix A), sMAPE as in the CAPTURe authors'
    compute_smape.py: mean over samples of |p - g| / (|p| + |g|); an unparsable answer counts 1
    and p = g = 0 counts 0."""
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


def giou_ciou_from_counts(intersections: Sequence[int], unions: Sequence[int]) -> tuple[float, float]:
    """gIoU = mean of per-sample IoU; cIoU = sum of intersections / sum of unions (ReasonSeg /
    LISA convention: a sample whose prediction and target are both empty has IoU 1)."""
    if len(intersections) != len(unions) or not unions:
        raise ValueError(f"giou_ciou: {len(intersections)} intersections for {len(unions)} unions")
    ious = [i / u if u else 1.0 for i, u in zip(intersections, unions)]
    total_union = sum(unions)
    return sum(ious) / len(ious), (sum(intersections) / total_union if total_union else 1.0)


def giou_ciou(pred_masks, gt_masks) -> tuple[float, float]:
    """(gIoU, cIoU) of boolean masks, one pair per sample."""
    inter = [int((p & g).sum()) for p, g in zip(pred_masks, gt_masks)]
    union = [int((p | g).sum()) for p, g in zip(pred_masks, gt_masks)]
    return giou_ciou_from_counts(inter, union)
