"""Masks from predicted boxes and points through SAM2 (VR-TTRL / VisionReasoner evaluation: the
policy answers boxes + points, SAM2 turns them into the masks gIoU and cIoU are computed on).

Used when config `evaluation.grounding.sam2` names a local SAM2 checkpoint in transformers'
format (e.g. a copy of facebook/sam2.1-hiera-large); without one, predicted masks are the boxes
themselves and the metrics say so (box_giou / box_ciou).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ..rewards import grounding


class Sam2Masker:
    """One SAM2 mask per predicted object (its box and its point as a positive click), their union."""

    def __init__(self, checkpoint: str | Path, image_root: Path, device: str | None = None):
        from transformers import Sam2Model, Sam2Processor

        checkpoint = Path(checkpoint)
        if not checkpoint.is_dir():
            raise FileNotFoundError(f"config `evaluation.grounding.sam2`: SAM2 checkpoint {checkpoint} is not a "
                                    f"directory (a transformers Sam2Model save, e.g. facebook/sam2.1-hiera-large)")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = Sam2Model.from_pretrained(checkpoint).to(self.device).eval()
        self.processor = Sam2Processor.from_pretrained(checkpoint)
        self.image_root = Path(image_root)

    @torch.no_grad()
    def __call__(self, row: dict, objects: list[dict] | None) -> np.ndarray:
        objects = grounding.valid_objects(objects)
        mask = np.zeros((row["height"], row["width"]), dtype=bool)
        if not objects:
            return mask
        image = Image.open(self.image_root / row["image"]).convert("RGB")
        inputs = self.processor(
            images=image,
            input_boxes=[[[float(v) for v in o["bbox_2d"]] for o in objects]],
            input_points=[[[[float(v) for v in o["point_2d"]]] for o in objects]],
            input_labels=[[[1] for _ in objects]],
            return_tensors="pt",
        ).to(self.device)
        outputs = self.model(**inputs, multimask_output=False)
        masks = self.processor.post_process_masks(outputs.pred_masks.cpu(), inputs["original_sizes"].cpu())[0]
        return masks.bool().any(dim=0).reshape(masks.shape[-2:]).numpy() | mask
