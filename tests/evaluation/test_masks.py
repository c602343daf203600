"""Grounding masks: SAM2 (transformers Sam2Model) from predicted boxes and points, or the boxes.

No SAM2 weights can be downloaded here: a tiny random-weight Sam2Model built offline checks the
plumbing (prompts in, one mask per object, union, original size), not mask quality."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from ttrl_bench.evaluation.evaluate import predictions_frame
from ttrl_bench.evaluation.masks import Sam2Masker
from ttrl_bench.evaluation.tasks import GroundingTask


def tiny_sam2_model(width: int, image_size: int):
    """A random-weight Sam2Model (seed 0): one Hiera block a stage, `width` channels doubling per stage, its
    feature maps at 1/4, 1/8 and 1/16 of `image_size` (SAM2's strides)."""
    from transformers import Sam2Config, Sam2Model
    from transformers.models.sam2.configuration_sam2 import Sam2HieraDetConfig, Sam2VisionConfig

    torch.manual_seed(0)
    widths = [width, 2 * width, 4 * width, 8 * width]
    backbone = Sam2HieraDetConfig(hidden_size=width, blocks_per_stage=[1, 1, 1, 1], embed_dim_per_stage=widths,
                                  num_attention_heads_per_stage=[1, 1, 1, 1], global_attention_blocks=[],
                                  image_size=[image_size, image_size])
    vision = Sam2VisionConfig(backbone_config=backbone, backbone_channel_list=widths[::-1], fpn_hidden_size=32,
                              backbone_feature_sizes=[[image_size // s] * 2 for s in (4, 8, 16)])
    return Sam2Model(Sam2Config(vision_config=vision.to_dict(), mask_decoder_config={"hidden_size": 32},
                                prompt_encoder_config={"hidden_size": 32, "image_size": image_size}))


@pytest.fixture(scope="module")
def tiny_sam2(tmp_path_factory):
    from transformers import Sam2ImageProcessor, Sam2Processor

    path = tmp_path_factory.mktemp("sam2")
    tiny_sam2_model(16, 256).save_pretrained(path)
    Sam2Processor(image_processor=Sam2ImageProcessor(size={"height": 256, "width": 256})).save_pretrained(path)
    Image.new("RGB", (120, 80), "white").save(path / "scene.png")
    return path


A = {"bbox_2d": [10, 10, 50, 40], "point_2d": [30, 25]}
B = {"bbox_2d": [60, 10, 100, 70], "point_2d": [80, 40]}
ROW = {"image": "scene.png", "width": 120, "height": 80}


def test_sam2_masks_are_the_union_of_one_mask_per_object(tiny_sam2):
    masker = Sam2Masker(tiny_sam2, tiny_sam2, device="cpu")
    both, only_a, only_b = masker(ROW, [A, B]), masker(ROW, [A]), masker(ROW, [B])
    assert both.shape == (80, 120) and both.dtype == bool  # original pixels, not SAM2's 256 px
    assert np.array_equal(both, only_a | only_b)
    assert np.array_equal(both, masker(ROW, [A, B]))  # deterministic
    assert not masker(ROW, None).any() and not masker(ROW, [{"bbox_2d": "bad"}]).any()


def test_with_a_masker_the_metrics_are_mask_giou_and_ciou():
    # a stand-in masker with a known 10 x 10 square: against the 40 x 30 gold box, I = 100, U = 1200
    square = np.zeros((80, 120), dtype=bool)
    square[10:20, 10:20] = True
    task = GroundingTask(masker=lambda row, objects: square)
    samples = pd.DataFrame({"id": ["a"], "boxes": [[A["bbox_2d"]]], "points": [[A["point_2d"]]], "width": [120],
                            "height": [80], "image": ["scene.png"]})
    frame = predictions_frame([f"<answer>{json.dumps([A])}</answer>"], samples, task)
    assert (frame["intersection"][0], frame["union"][0]) == (100, 1200)
    assert task.primary == "giou"
    # bbox_ap: the predicted box is the gold box (IoU 1 > 0.5), VisionReasoner's per-row hit
    # (Appendix A's box metrics read the answer's box, the gold box here: 100 both)
    assert task.metrics(frame) == {"giou": pytest.approx(100 / 12), "ciou": pytest.approx(100 / 12),
                                   "count_accuracy": 100.0, "bbox_ap": 100.0, "box_complete_iou": 100.0,
                                   "bbox_ap_coco": pytest.approx(100.0)}


def test_a_missing_sam2_checkpoint_names_the_config_key(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"evaluation\.grounding\.sam2"):
        Sam2Masker(tmp_path / "absent", tmp_path)


def test_task_for_builds_a_sam2_masker_from_the_config(tiny_sam2):
    from ttrl_bench.evaluation.tasks import task_for

    task = task_for("demo-digit-scenes", sam2=str(tiny_sam2), image_root=tiny_sam2 / "images")
    assert task.masker.image_root == tiny_sam2 / "images" and task.primary == "giou"
    with pytest.raises(FileNotFoundError, match=r"evaluation\.grounding\.sam2"):
        task_for("demo-digit-scenes", sam2=str(tiny_sam2 / "absent"), image_root=tiny_sam2)


def test_sam2_masker_device_default(monkeypatch, tmp_path):
    """device=None means CUDA where torch sees it, else the CPU; a named device is kept; the model is
    moved to that device. Stand-ins for Sam2Model/Sam2Processor record the call (no model is built)."""
    import transformers

    moved = []

    class FakeModel:
        @classmethod
        def from_pretrained(cls, checkpoint):
            return cls()

        def to(self, device):
            moved.append(device)
            return self

        def eval(self):
            return self

    class FakeProcessor:
        @classmethod
        def from_pretrained(cls, checkpoint):
            return cls()

    (tmp_path / "preprocessor_config.json").write_text("{}")  # the checkpoint's own processor: from_pretrained
    monkeypatch.setattr(transformers, "Sam2Model", FakeModel, raising=False)
    monkeypatch.setattr(transformers, "Sam2Processor", FakeProcessor, raising=False)
    for cuda, device, expected in ((False, None, "cpu"), (True, None, "cuda"), (True, "cpu", "cpu")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        masker = Sam2Masker(tmp_path, tmp_path, device=device)
        assert masker.device == expected and moved[-1] == expected


def test_sam2_loads_from_a_hub_layout_cache_of_the_hf_repository(tmp_path, monkeypatch):
    """facebook/sam2-hiera-large-hf as the Hub serves it (config.json + model.safetensors, no
    preprocessor_config.json), in huggingface_hub's cache layout (models--org--name/refs/main ->
    snapshots/<commit>/), offline: a random-weight Sam2Model at SAM2's 1024 px input loads through Sam2Masker by its
    Hub id, with SAM2's own transform (sam2/utils/transforms.py: 1024 x 1024, ImageNet mean / std), and masks.
    Before: Sam2Processor.from_pretrained raised OSError for the missing processor config."""
    import huggingface_hub

    from ttrl_bench.evaluation.masks import SAM2_REPOSITORY

    commit = "a" * 40
    root = tmp_path / "hub" / f"models--{SAM2_REPOSITORY.replace('/', '--')}"
    tiny_sam2_model(8, 1024).save_pretrained(root / "snapshots" / commit)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    assert sorted(p.name for p in (root / "snapshots" / commit).iterdir()) == ["config.json", "model.safetensors"]
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    Image.new("RGB", (120, 80), "white").save(tmp_path / "scene.png")

    masker = Sam2Masker(SAM2_REPOSITORY, tmp_path, device="cpu")
    processor = masker.predictor.processor.image_processor
    assert (processor.size["height"], processor.size["width"], processor.mask_size["height"]) == (1024, 1024, 256)
    assert (list(processor.image_mean), list(processor.image_std)) == ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    both = masker(ROW, [A, B])
    assert both.shape == (80, 120) and np.array_equal(both, masker(ROW, [A]) | masker(ROW, [B]))
