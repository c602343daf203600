"""The grounding and counting entries of datasets/registry.py (VR-TTRL: RefCOCO family, ReasonSeg, PixMo-Count,
CountBench). Every registry entry through its real loader: a tiny fixture with the source's columns and
types (a save_to_disk dataset, webdataset shards, an image folder, or JSON lines + files) is
prepared with `prepare_dataset` and checked against counts and prompts worked out by hand.

Fixture rows follow one pattern unless a test says otherwise: a good 64x48 image, a 1200x900
image (too large for TTRV's 1000x1000 limit) and bytes that are no image (unreadable)."""

from __future__ import annotations

import json

import datasets
import numpy as np
import pytest
from pycocotools import mask as mask_utils

from tests.support.datasets import GOOD, THREE_IMAGES, counts, prepare, save


GROUNDING_DROPS = {"original": 3, "kept": 2, "dropped": {"unreadable": 1}}  # VR-TTRL sets: no size filter
REFCOCO_ENTRIES = ["refcoco", "refcoco-testA", "refcoco+", "refcoco+-testA", "refcocog", "refcocog-train"]


@pytest.mark.parametrize("name", REFCOCO_ENTRIES)
def test_refcoco_boxes_and_masks_in_original_pixels(tmp_path, name):
    polygon = [10.0, 20.0, 40.0, 20.0, 40.0, 60.0, 10.0, 60.0]
    source = save(tmp_path, {
        "question_id": ["1", "2", "3"], "image": THREE_IMAGES,
        "question": ["Please carefully observe the area circled in the image and come up with a caption."] * 3,
        "answer": [["man on the left", "guy in red"], ["dog"], ["cat"]], "segmentation": [polygon] * 3,
        "bbox": [[10.0, 20.0, 30.0, 40.0]] * 3, "iscrowd": [0] * 3, "file_name": ["a.jpg"] * 3},
        {"question_id": datasets.Value("string"), "image": datasets.Image(), "question": datasets.Value("string"),
         "answer": datasets.List(datasets.Value("string")), "segmentation": datasets.List(datasets.Value("float32")),
         "bbox": datasets.List(datasets.Value("float32")), "iscrowd": datasets.Value("int8"),
         "file_name": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, name, source)
    # one sample per referring expression: 2 + 1 + 1; the 1200 x 900 image kept (no size filter for VR-TTRL's sets)
    assert counts(stats) == {"original": 4, "kept": 3, "dropped": {"unreadable": 1}}
    assert list(manifest["query"]) == ["man on the left", "guy in red", "dog"]
    row = manifest.iloc[0]
    assert [list(b) for b in row["boxes"]] == [[10, 20, 40, 60]]  # COCO [x, y, w, h] -> [x1, y1, x2, y2]
    assert [list(p) for p in row["points"]] == [[25, 40]]
    assert (row["width"], row["height"]) == (64, 48)
    rle = json.loads(row["mask"])
    assert rle["size"] == [48, 64]
    mask = mask_utils.decode({"size": rle["size"], "counts": rle["counts"].encode()})
    ys, xs = np.nonzero(mask)
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (10, 39, 20, 47)  # clipped at the 48 px edge
    assert row["prompt"].startswith('Please find "man on the left" with bboxs and points.')
    # a training split's rows are adapted on (VR-TTRL Table 11), never evaluated
    assert set(manifest["split"]) == {"train" if name.endswith("-train") else "test"}


@pytest.mark.parametrize("name", ["reasonseg", "reasonseg-test", "reasonseg-train"])
def test_reasonseg_mask_gives_the_box(tmp_path, name):
    mask = np.zeros((48, 64), dtype=bool)
    mask[5:15, 3:13] = True
    source = save(tmp_path, {"image": THREE_IMAGES, "text": ["the thing you sit on"] * 3,
                             "mask": [mask.tolist(), np.pad(mask, ((0, 852), (0, 1136))).tolist(), mask.tolist()],
                             "image_id": ["a", "b", "c"], "ann_id": ["1", "2", "3"],
                             "img_height": [48, 900, 48], "img_width": [64, 1200, 64]},
                  {"image": datasets.Image(), "text": datasets.Value("string"),
                   "mask": datasets.List(datasets.List(datasets.Value("bool"))),
                   "image_id": datasets.Value("string"), "ann_id": datasets.Value("string"),
                   "img_height": datasets.Value("int64"), "img_width": datasets.Value("int64")})
    stats, manifest = prepare(tmp_path, name, source)
    assert counts(stats) == GROUNDING_DROPS
    row = manifest.iloc[0]
    assert [list(b) for b in row["boxes"]] == [[3, 5, 13, 15]]
    rle = json.loads(row["mask"])
    assert mask_utils.area({"size": rle["size"], "counts": rle["counts"].encode()}) == 100
    assert set(manifest["split"]) == {"train" if name == "reasonseg-train" else "test"}


@pytest.mark.parametrize("name", ["pixmo-count", "pixmo-count-test"])
def test_pixmo_count_points_and_count(tmp_path, name):
    # allenai/pixmo-count's card: points is `sequence: {x, y}`, which datasets loads as a dict of
    # lists; a local copy adds the downloaded `image`; the eval splits' rows may carry no points
    source = save(tmp_path, {"image_url": ["http://x/1.jpg"] * 4, "image_sha256": ["a", "b", "c", "d"],
                             "count": [3, 1, 2, 4],
                             "points": [{"x": [10.0, 20.0, 30.0], "y": [5.0, 5.0, 5.0]}, {"x": [1.0], "y": [1.0]},
                                        {"x": [1.0, 2.0], "y": [1.0, 2.0]}, None],
                             "label": ["dog", "cat", "cow", "hen"], "image": THREE_IMAGES + [GOOD]},
                  {"image_url": datasets.Value("string"), "image_sha256": datasets.Value("string"),
                   "count": datasets.Value("int32"),
                   "points": datasets.Sequence({"x": datasets.Value("float32"), "y": datasets.Value("float32")}),
                   "label": datasets.Value("string"), "image": datasets.Image()})
    assert datasets.load_from_disk(source["path"])[0]["points"] == {"x": [10.0, 20.0, 30.0], "y": [5.0, 5.0, 5.0]}
    stats, manifest = prepare(tmp_path, name, source)
    assert counts(stats) == {"original": 4, "kept": 3, "dropped": {"unreadable": 1}}  # no size filter
    assert (manifest.iloc[0]["query"], manifest.iloc[0]["count"]) == ("dog", 3)
    assert [list(p) for p in manifest.iloc[0]["points"]] == [[10, 5], [20, 5], [30, 5]]  # pixels, as given
    assert (manifest.iloc[2]["query"], manifest.iloc[2]["count"], list(manifest.iloc[2]["points"])) == ("hen", 4, [])


def test_countbench_query_is_the_counted_noun(tmp_path):
    source = save(tmp_path, {"image": THREE_IMAGES, "text": ["Two dogs on a sofa"] * 3,
                             "question": ["How many dogs are in the image?"] * 3, "number": [2, 3, 4]},
                  {"image": datasets.Image(), "text": datasets.Value("string"), "question": datasets.Value("string"),
                   "number": datasets.Value("int64")})
    stats, manifest = prepare(tmp_path, "countbench", source)
    assert counts(stats) == GROUNDING_DROPS
    assert (manifest.iloc[0]["query"], manifest.iloc[0]["count"]) == ("dogs", 2)
