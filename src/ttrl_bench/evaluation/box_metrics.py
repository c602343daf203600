"""VR-TTRL Appendix A's definitions of two grounding metrics, beside the ones VisionReasoner's evaluation code
computes (which fill the published cells unless `evaluation.grounding.metric_definitions: appendix_a`):

- cIoU, "Complete Intersection over Union ... incorporating ... center point distance and aspect ratio": the
  box CIoU of Zheng et al. 2020 (torchvision.ops.complete_box_iou), per row the mean over one-to-one matched
  boxes (Hungarian, the most CIoU) with max(predicted, gold) in the denominator, so a missing or extra box
  counts 0; an unparsable answer, and a degenerate box, score 0. VisionReasoner's code computes a cumulative mask IoU instead
  (sum of intersections / sum of unions, metrics.giou_ciou_from_counts).
- bbox_AP, "average precision ... across IoU thresholds from 0.5 to 0.95 in increments of 0.05": COCO's AP
  (pycocotools COCOeval, iouType "bbox", stats[0]) over the split, every predicted box scored 1.0 since
  the answers carry no confidence. VisionReasoner's code prints a per-row hit rate (IoU > 0.5) under that
  name (tasks.bbox_hit).
"""

from __future__ import annotations

import contextlib
import io

import torch
from scipy.optimize import linear_sum_assignment
from torchvision.ops import complete_box_iou

from ..rewards import grounding


def complete_iou(parsed: list | None, gold: list[dict]) -> float:
    """The row's matched mean box CIoU (module docstring), boxes as [x1, y1, x2, y2] in one pixel frame."""
    boxes = [o["bbox_2d"] for o in grounding.scored_objects(parsed)]
    targets = [o["bbox_2d"] for o in gold]
    if not boxes or not targets:
        return 0.0
    matrix = complete_box_iou(torch.tensor(boxes, dtype=torch.float64), torch.tensor(targets, dtype=torch.float64))
    # a degenerate box (zero width and height: its aspect-ratio term is 0 / 0) scores 0, as a missing one
    matrix = torch.nan_to_num(matrix, nan=0.0, posinf=0.0, neginf=0.0)
    rows, cols = linear_sum_assignment(matrix.numpy(), maximize=True)
    return float(matrix.numpy()[rows, cols].sum()) / max(len(boxes), len(targets))


def coco_bbox_ap(parsed: list[list | None], golds: list[list[dict]]) -> float:
    """COCO AP@[0.5:0.95] of every row's predicted boxes (score 1.0) against its gold boxes, in [0, 1]; 0.0
    when no row predicts a box."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    def xywh(box):
        return [box[0], box[1], box[2] - box[0], box[3] - box[1]]

    gold_boxes = [(i, xywh(o["bbox_2d"])) for i, gold in enumerate(golds) for o in gold]
    annotations = [{"id": n + 1, "image_id": i, "category_id": 1, "bbox": box, "iscrowd": 0,
                    "area": float(box[2] * box[3])} for n, (i, box) in enumerate(gold_boxes)]
    detections = [{"image_id": i, "category_id": 1, "bbox": xywh(o["bbox_2d"]), "score": 1.0}
                  for i, p in enumerate(parsed) for o in grounding.scored_objects(p)]
    if not detections or not annotations:
        return 0.0
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress and summary
        truth = COCO()
        truth.dataset = {"images": [{"id": i} for i in range(len(golds))], "annotations": annotations,
                         "categories": [{"id": 1}]}
        truth.createIndex()
        evaluation = COCOeval(truth, truth.loadRes(detections), iouType="bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return max(float(evaluation.stats[0]), 0.0)  # -1: no gold box in any row
