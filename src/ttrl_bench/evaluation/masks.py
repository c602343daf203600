"""Masks from predicted boxes and points through SAM2 (VR-TTRL / VisionReasoner evaluation: the
policy answers boxes + points, SAM2 turns them into the masks gIoU and cIoU are computed on).

Used when config `evaluation.grounding.sam2` names a SAM2 checkpoint in transformers' format (a local
directory, or a Hub id already in the Hugging Face cache: jobs run offline; `ttrl-bench fetch` downloads it and
the dry run's pre-flight names it); without one, predicted masks are the boxes themselves and the metrics say so
(box_giou / box_ciou), never in a published mask cell.

Which repository: `facebook/sam2-hiera-large` (what VisionReasoner names) holds the original release
(sam2_hiera_large.pt + sam2_hiera_l.yaml), which transformers' Sam2Model cannot read, and transformers' wheel has
no converter. `facebook/sam2-hiera-large-hf` is the same SAM 2 hiera-large weights (not 2.1) converted to
transformers' format (config.json, model.safetensors), without a preprocessor_config.json; where a checkpoint has
none, the processor is built here with SAM2's own input transform (`SAM2_PROCESSOR`).

VisionReasoner (dvlab-research/VisionReasoner @a455092) loads `facebook/sam2-hiera-large` (SAM2, not
SAM2.1: vision_reasoner/models/vision_reasoner_model.py:35 and evaluation/evaluation_segmentation.py:21)
and, per object, asks `SAM2ImagePredictor.predict(point_coords=[point], point_labels=[1], box=bbox)`
with the predictor's default `multimask_output=True`: three candidate masks, sorted by their predicted
IoU score, the first kept (vision_reasoner_model.py:177-186, `generate_masks`); the objects' masks are
OR-ed. `evaluation.grounding.sam2_multimask: best_score` is that choice, `single` the decoder's one
mask (`multimask_output=False`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ..rewards import grounding

SAM2_MULTIMASK = ("best_score", "single")
SAM2_REPOSITORY = "facebook/sam2-hiera-large-hf"
# SAM2's image transform (facebookresearch/sam2 sam2/utils/transforms.py SAM2Transforms: ToTensor, Resize((1024,
# 1024)), Normalize(ImageNet mean / std); resolution = sam2_hiera_l.yaml image_size 1024) and its 256 px low-res
# masks (image_size / 4), binarized at SAM2ImagePredictor's mask_threshold 0.0 (post_process_masks' default).
SAM2_PROCESSOR = {"size": {"height": 1024, "width": 1024}, "mask_size": {"height": 256, "width": 256},
                  "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225], "do_rescale": True,
                  "rescale_factor": 1 / 255, "do_normalize": True, "do_resize": True}


def sam2_processor(checkpoint: str | Path):
    """The checkpoint's Sam2Processor where it ships its settings (preprocessor_config.json, or transformers 5's
    processor_config.json), else one with SAM2_PROCESSOR (facebook/sam2-hiera-large-hf ships neither)."""
    from transformers import Sam2ImageProcessor, Sam2Processor

    if any(_has_file(checkpoint, name) for name in ("preprocessor_config.json", "processor_config.json")):
        return Sam2Processor.from_pretrained(checkpoint)
    return Sam2Processor(image_processor=Sam2ImageProcessor(**SAM2_PROCESSOR), target_size=1024)


def _has_file(checkpoint: str | Path, name: str) -> bool:
    if Path(checkpoint).is_dir():
        return (Path(checkpoint) / name).exists()
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(str(checkpoint), name), str)


def best_scored(scores) -> int:
    """The candidate VisionReasoner keeps: `np.argsort(scores)[::-1]`'s first index
    (vision_reasoner_model.py:183-185). The highest score; among equal highest scores the last one
    (a 3-element argsort keeps equal scores in index order, and the reversal puts the last first)."""
    return int(np.argsort(np.asarray(scores, dtype=float))[::-1][0])


class TransformersSam2:
    """transformers' Sam2Model as a predictor: `(image, boxes, points, multimask)` -> (masks
    (objects, candidates, H, W) bool in the image's pixels, scores (objects, candidates)). One box
    and one positive click per object, as VisionReasoner prompts it."""

    def __init__(self, checkpoint: str | Path, device: str | None = None):
        from transformers import Sam2Model

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = Sam2Model.from_pretrained(checkpoint).to(self.device).eval()
        self.processor = sam2_processor(checkpoint)

    @torch.no_grad()
    def __call__(self, image, boxes: list, points: list, multimask: bool):
        inputs = self.processor(
            images=image,
            input_boxes=[[[float(v) for v in b] for b in boxes]],
            input_points=[[[[float(v) for v in p]] for p in points]],
            input_labels=[[[1] for _ in points]],
            return_tensors="pt",
        ).to(self.device)
        outputs = self.model(**inputs, multimask_output=multimask)
        masks = self.processor.post_process_masks(outputs.pred_masks.cpu(), inputs["original_sizes"].cpu())[0]
        scores = outputs.iou_scores[0].float().cpu().numpy()  # (objects, candidates)
        return masks.bool().numpy().reshape(len(boxes), -1, *masks.shape[-2:]), scores.reshape(len(boxes), -1)


def _sam2_source(checkpoint: str | Path) -> str | Path:
    """A local directory, or a Hub id ("facebook/sam2-hiera-large-hf") read from the local cache; an
    absent path is refused naming the config key."""
    path = Path(checkpoint)
    if path.is_dir():
        return path
    text = str(checkpoint)
    hub_id = text.count("/") == 1 and not text.startswith((".", "/", "~")) and not path.exists()
    if hub_id and not Path(text.split("/")[0]).exists():
        return text
    raise FileNotFoundError(f"config `evaluation.grounding.sam2`: SAM2 checkpoint {checkpoint} is not a directory "
                            f"(a transformers Sam2Model save) nor a Hub id (e.g. {SAM2_REPOSITORY})")


class Sam2Masker:
    """One SAM2 mask per predicted object (its box and its point as a positive click), their union.
    `multimask` (config evaluation.grounding.sam2_multimask): "best_score" = VisionReasoner's three
    candidates and the best-scored one; "single" = one mask per object. `predictor`: a stand-in for
    the transformers model (tests), called as TransformersSam2 is."""

    def __init__(self, checkpoint: str | Path | None, image_root: Path, device: str | None = None,
                 multimask: str = "best_score", predictor=None):
        if multimask not in SAM2_MULTIMASK:
            raise ValueError(f"evaluation.grounding.sam2_multimask must be one of {', '.join(SAM2_MULTIMASK)}, "
                             f"got {multimask!r}")
        self.multimask = multimask
        self.image_root = Path(image_root)
        if predictor is None:
            predictor = TransformersSam2(_sam2_source(checkpoint), device)
        self.predictor = predictor
        self.device = getattr(predictor, "device", device)
        self.model = getattr(predictor, "model", None)

    def __call__(self, row: dict, objects: list[dict] | None) -> np.ndarray:
        objects = grounding.valid_objects(objects)
        mask = np.zeros((row["height"], row["width"]), dtype=bool)
        if not objects:
            return mask
        image = Image.open(self.image_root / row["image"]).convert("RGB")
        masks, scores = self.predictor(image, [o["bbox_2d"] for o in objects], [o["point_2d"] for o in objects],
                                       self.multimask == "best_score")
        for candidates, candidate_scores in zip(masks, scores):
            mask |= np.asarray(candidates[best_scored(candidate_scores)], dtype=bool).reshape(mask.shape)
        return mask
