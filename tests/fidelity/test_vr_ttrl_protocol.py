"""VR-TTRL's `authors` protocol (issue 35): VisionReasoner's evaluation (dvlab-research/VisionReasoner @a455092).

Every expected number below is worked out by hand from VisionReasoner's code (file:line in each test), never
read back from ours: the 840 x 840 view and `int(v * W / 840 + 0.5)`, SAM2's best-scored candidate of three,
the query's lower-casing and stripping, its per-row box hit ("bbox_AP"), no resolution filter on its sets, and
config/vr-ttrl.yaml planning all of it with mask metrics in the published cells."""

import io
import json
import math

import datasets
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from ttrl_bench.datasets.prepare import prepare_dataset
from ttrl_bench.datasets.preprocessing import (
    model_view,
    to_model_view,
    to_original,
    visionreasoner_query,
)
from ttrl_bench.evaluation.evaluate import decode_image, predictions_frame
from ttrl_bench.evaluation.masks import Sam2Masker, best_scored
from ttrl_bench.evaluation.tasks import GroundingTask, bbox_hit


# --- the 840 x 840 view and the rescaling back (vision_reasoner_model.py:46, 222-225, 110-119) -----------------

def test_box_rescale_from_840_by_hand():
    """A 640 x 480 image; the model answers in 840 x 840 pixels. x_factor = 640 / 840 = 0.76190..., y_factor =
    480 / 840 = 0.57142...; int(v * factor + 0.5):
    bbox 100 -> 76.19 + 0.5 -> 76; 200 -> 114.29 + 0.5 -> 114; 500 -> 380.95 + 0.5 -> 381; 700 -> 400.0 + 0.5 -> 400;
    point 300 -> 228.57 + 0.5 -> 229; 450 -> 257.14 + 0.5 -> 257."""
    answer = [{"bbox_2d": [100, 200, 500, 700], "point_2d": [300, 450]}]
    assert to_original(answer, 640, 480, 840) == [{"bbox_2d": [76, 114, 381, 400], "point_2d": [229, 257]}]


def test_rescale_rounds_as_int_does():
    """1680 wide: factor 2 (x); 420 high: factor 0.5 (y). int() truncates toward zero after + 0.5:
    x 10.2 -> 20.4 + 0.5 = 20.9 -> 20; x 10.3 -> 21.1 -> 21; y -2 -> -1 + 0.5 = -0.5 -> 0 (floor would give -1);
    y -3 -> -1.5 + 0.5 = -1.0 -> -1; point (0, 1) -> (0.5 -> 0, 1.0 -> 1)."""
    answer = [{"bbox_2d": [10.2, -2, 10.3, -3], "point_2d": [0, 1]}]
    assert to_original(answer, 1680, 420, 840) == [{"bbox_2d": [20, 0, 21, -1], "point_2d": [0, 1]}]


def test_rescale_leaves_degenerate_answers_unusable_and_never_raises():
    invalid = {"bbox_2d": "10,20", "point_2d": [1, 2]}
    huge = {"bbox_2d": [1e308, 0, 1e308, 5], "point_2d": [1, 1]}  # x 1e308 * 2 overflows: their bare except
    assert to_original(None, 640, 480, 840) is None
    assert to_original([invalid], 640, 480, 840) == [invalid]
    scaled = to_original([huge], 1680, 840, 840)
    assert scaled[0]["bbox_2d"] is None  # invalid now: scored as no answer
    assert to_original([{"bbox_2d": [1, 2, 3, 4], "point_2d": [1, 2]}], 640, 480, None) == [
        {"bbox_2d": [1, 2, 3, 4], "point_2d": [1, 2]}]  # no input_size: as answered


def test_gold_in_the_model_view_by_hand():
    """Gold [76, 114, 381, 400] of a 640 x 480 image in 840 px: x * 840 / 640 = x * 1.3125, y * 1.75:
    76 -> 99.75, 114 -> 199.5, 381 -> 500.0625, 400 -> 700; point (229, 257) -> (300.5625, 449.75)."""
    gold = to_model_view([{"bbox_2d": [76, 114, 381, 400], "point_2d": [229, 257]}], 640, 480, 840)
    assert gold[0]["bbox_2d"] == pytest.approx([99.75, 199.5, 500.0625, 700.0])
    assert gold[0]["point_2d"] == pytest.approx([300.5625, 449.75])


def test_model_view_is_an_840_square_resize():
    image = Image.new("RGB", (640, 480), "red")
    assert model_view(image, 840).size == (840, 840)
    assert model_view(image, None) is image


def test_visionreasoner_query_by_hand():
    """evaluation_segmentation.py:93: text.lower().strip('.\\"?!'): '"The Dog On The LEFT?!"' lower-cased is
    '"the dog on the left?!"', then '"', '?', '!' go from both ends; inner punctuation stays."""
    assert visionreasoner_query('"The Dog On The LEFT?!"') == "the dog on the left"
    assert visionreasoner_query("Mr. Smith's hat.") == "mr. smith's hat"


ROW = {"id": "a", "image": "scene.png", "width": 640, "height": 480, "boxes": [[76, 114, 381, 400]],
       "points": [[229, 257]], "query": "The Man On The Left.", "prompt": "x"}


def test_evaluation_scores_the_rescaled_answer_against_original_pixels(tmp_path):
    """The model's 840 px answer [100, 200, 500, 700] is the gold box [76, 114, 381, 400] once scaled back
    (test_box_rescale_from_840_by_hand): box gIoU and cIoU 100, one predicted object, a box hit."""
    Image.new("RGB", (640, 480), "white").save(tmp_path / "scene.png")
    task = GroundingTask(input_size=840, query="visionreasoner")
    samples = task.view(pd.DataFrame([ROW]))
    assert samples.loc[0, "input_size"] == 840
    assert samples.loc[0, "prompt"].startswith('Please find "the man on the left" with bboxs and points.')
    image, error = decode_image(tmp_path, samples.to_dict("records")[0])
    assert error is None and image.size == (840, 840)  # what the model is shown
    text = '<think>x</think><answer>[{"bbox_2d": [100, 200, 500, 700], "point_2d": [300, 450]}]</answer>'
    frame = predictions_frame([text], samples, task)
    assert json.loads(frame.loc[0, "parsed"]) == [{"bbox_2d": [76, 114, 381, 400], "point_2d": [229, 257]}]
    assert (frame.loc[0, "intersection"], frame.loc[0, "union"]) == (305 * 286, 305 * 286)
    # Appendix A's definitions agree on a perfect box: Complete IoU 1, COCO AP 1 at every threshold
    assert task.metrics(frame) == {"box_giou": 100.0, "box_ciou": 100.0, "count_accuracy": 100.0, "bbox_ap": 100.0,
                                   "box_complete_iou": 100.0, "bbox_ap_coco": pytest.approx(100.0)}


def test_bbox_hit_by_hand():
    """evaluation_segmentation.py:123-130 with compute_bbox_iou (:38-59, continuous areas): pred [0, 0, 10, 10]
    vs gold [5, 0, 15, 10]: I = 5 x 10 = 50, U = 100 + 100 - 50 = 150, IoU 1/3: no hit; vs gold [2, 0, 12, 10]:
    I = 80, U = 120, IoU 2/3 > 0.5: a hit. Any of several predicted boxes may hit."""
    pred = [{"bbox_2d": [0, 0, 10, 10], "point_2d": [5, 5]}]
    assert bbox_hit(pred, [{"bbox_2d": [5, 0, 15, 10], "point_2d": [0, 0]}]) is False
    assert bbox_hit(pred, [{"bbox_2d": [2, 0, 12, 10], "point_2d": [0, 0]}]) is True
    assert bbox_hit(pred + [{"bbox_2d": [5, 0, 15, 10], "point_2d": [9, 5]}],
                    [{"bbox_2d": [5, 0, 15, 10], "point_2d": [0, 0]}]) is True
    assert bbox_hit(None, [{"bbox_2d": [5, 0, 15, 10], "point_2d": [0, 0]}]) is False
    # an answer with one invalid object has no boxes in their parse (vision_reasoner_model.py:110-121 raises)
    assert bbox_hit(pred + [{"bbox_2d": [5, 0, 15]}], [{"bbox_2d": [2, 0, 12, 10], "point_2d": [0, 0]}]) is False
    assert bbox_hit(pred, []) is None  # counting rows: no gold box


# --- SAM2: three candidates, the best-scored kept (vision_reasoner_model.py:177-186) ---------------------------

class ThreeCandidates:
    """A stand-in SAM2 predictor: per object, three masks (candidate k fills row k) with given scores."""

    def __init__(self, scores):
        self.scores, self.calls = scores, []

    def __call__(self, image, boxes, points, multimask):
        self.calls.append((boxes, points, multimask))
        n = 3 if multimask else 1
        masks = np.zeros((len(boxes), n, 4, 6), dtype=bool)
        for k in range(n):
            masks[:, k, k, :] = True
        return masks, np.array(self.scores[: len(boxes)])[:, :n]


def _masker(tmp_path, scores, multimask="best_score"):
    Image.new("RGB", (6, 4), "white").save(tmp_path / "s.png")
    return Sam2Masker(None, tmp_path, multimask=multimask, predictor=ThreeCandidates(scores))


def test_best_scored_candidate_by_hand():
    """np.argsort(scores)[::-1][0]: [0.2, 0.9, 0.5] -> argsort [0, 2, 1] -> reversed [1, 2, 0] -> 1;
    a tie [0.7, 0.7, 0.1] -> argsort [2, 0, 1] -> reversed [1, 0, 2] -> 1 (the later of the tied, not argmax's 0)."""
    assert best_scored([0.2, 0.9, 0.5]) == 1
    assert best_scored([0.7, 0.7, 0.1]) == 1
    assert best_scored([0.9]) == 0


def test_sam2_multimask_keeps_the_best_scored_mask_per_object(tmp_path):
    row = {"image": "s.png", "width": 6, "height": 4}
    a = {"bbox_2d": [0, 0, 2, 2], "point_2d": [1, 1]}
    b = {"bbox_2d": [3, 0, 5, 2], "point_2d": [4, 1]}
    masker = _masker(tmp_path, [[0.2, 0.9, 0.5], [0.6, 0.1, 0.8]])
    mask = masker(row, [a, b])
    # object a keeps candidate 1 (row 1), object b candidate 2 (row 2): their union
    assert mask[:, 0].tolist() == [False, True, True, False] and mask.all(axis=1).tolist() == [False, True, True, False]
    boxes, points, multimask = masker.predictor.calls[-1]
    assert (boxes, points, multimask) == ([a["bbox_2d"], b["bbox_2d"]], [a["point_2d"], b["point_2d"]], True)
    single = _masker(tmp_path, [[0.2], [0.6]], multimask="single")
    assert single(row, [a]).any(axis=1).tolist() == [True, False, False, False] and single.predictor.calls[-1][2] is False
    # nothing usable: no SAM2 call, an empty mask
    assert not masker(row, None).any() and not masker(row, [{"bbox_2d": "x"}]).any()


def test_degenerate_outputs_with_sam2_and_840_never_raise(tmp_path):
    masker = _masker(tmp_path, [[0.2, 0.9, 0.5]] * 3)
    task = GroundingTask(masker=masker, input_size=840)
    row = {"id": "a", "image": "s.png", "width": 6, "height": 4, "boxes": [[0, 0, 6, 4]], "points": [[3, 2]]}
    texts = ["", "<answer>{}</answer>", "<answer>[1, 2]</answer>", "<answer>[[[[</answer>",
             '<answer>[{"bbox_2d": [1e308, 0, 1e308, 5], "point_2d": [1, 1]}]</answer>',
             '<answer>[{"bbox_2d": [-5, -5, -1, -1], "point_2d": [-3, -3]}]</answer>', None]
    samples = task.view(pd.DataFrame([row] * len(texts)).assign(id=[str(i) for i in range(len(texts))]))
    frame = predictions_frame(texts, samples, task)
    # nothing scored in the first four: union = the gold's 24 pixels (the huge box is finite once scaled by 6/840)
    assert frame["intersection"].tolist()[:4] == [0] * 4 and frame["union"].tolist()[:4] == [24] * 4
    assert frame["parse_failure"].tolist() == [True, True, False, True, False, False, True]
    metrics = task.metrics(frame)
    assert set(metrics) == {"giou", "ciou", "count_accuracy", "bbox_ap", "box_complete_iou", "bbox_ap_coco"}
    assert all(math.isfinite(v) for v in metrics.values())


# --- no resolution filter on VR-TTRL's sets; VisionReasoner's rows in their layout ----------------------------

def _png(width, height) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def _save(tmp_path, columns, features):
    columns = {**columns, "image": [{"bytes": b, "path": None} for b in columns["image"]]}
    path = tmp_path / "source"
    datasets.Dataset.from_dict(columns, features=datasets.Features(features)).save_to_disk(str(path))
    return {"path": str(path)}


SEG_FEATURES = {"image": datasets.Image(), "text": datasets.Value("string"),
                "mask": datasets.List(datasets.List(datasets.Value("bool"))), "image_id": datasets.Value("string"),
                "ann_id": datasets.Value("string"), "img_height": datasets.Value("int64"),
                "img_width": datasets.Value("int64"), "bbox": datasets.List(datasets.Value("int64"))}


@pytest.mark.parametrize("name", ["vr-refcoco-testA", "vr-refcoco+-testA", "vr-refcocog"])
def test_visionreasoner_segmentation_rows_one_per_object_no_size_filter(tmp_path, name):
    """VisionReasoner's columns (evaluation_segmentation.py:92-101); a 1296 x 968 image (a ScanNet frame's size,
    over TTRV's 1,000 px) is kept: VR-TTRL's sets have no resolution filter."""
    small = np.zeros((48, 64), dtype=bool)
    small[5:15, 3:13] = True
    large = np.zeros((968, 1296), dtype=bool)
    large[100:200, 300:500] = True
    source = _save(tmp_path, {"image": [_png(64, 48), _png(1296, 968)], "text": ["The Left Man.", "cup"],
                              "mask": [small.tolist(), large.tolist()], "image_id": ["1", "2"], "ann_id": ["10", "20"],
                              "img_height": [48, 968], "img_width": [64, 1296], "bbox": [[3, 5, 13, 15], [300, 100, 500, 200]]},
                   SEG_FEATURES)
    stats = prepare_dataset(name, tmp_path / "prepared", 0, source=source)
    manifest = pd.read_parquet(tmp_path / "prepared" / "manifest.parquet")
    assert (stats["original"], stats["kept"], stats["dropped"]) == (2, 2, {})
    assert list(manifest["source_id"]) == ["10", "20"]  # ann_id: one row per object
    assert [list(b) for b in manifest.loc[1, "boxes"]] == [[300, 100, 500, 200]]  # their bbox, [x1, y1, x2, y2]
    assert (manifest.loc[1, "width"], manifest.loc[1, "height"]) == (1296, 968)
    assert manifest.loc[0, "query"] == "The Left Man."  # as given; the protocol's query_form lower-cases it


@pytest.mark.parametrize("name", ["vr-pixmo-count", "vr-pixmo-count-test", "vr-countbench"])
def test_visionreasoner_counting_rows(tmp_path, name):
    """evaluation_count.py:56-64: image, text, image_id, ann_id, img_height, img_width, count."""
    source = _save(tmp_path, {"image": [_png(64, 48), _png(1200, 900)], "text": ["dogs", "cups"],
                              "image_id": ["1", "2"], "ann_id": ["1", "2"], "img_height": [48, 900],
                              "img_width": [64, 1200], "count": [3, 7]},
                   {"image": datasets.Image(), "text": datasets.Value("string"), "image_id": datasets.Value("string"),
                    "ann_id": datasets.Value("string"), "img_height": datasets.Value("int64"),
                    "img_width": datasets.Value("int64"), "count": datasets.Value("int64")})
    stats = prepare_dataset(name, tmp_path / "prepared", 0, source=source)
    manifest = pd.read_parquet(tmp_path / "prepared" / "manifest.parquet")
    assert stats["kept"] == 2  # the 1200 x 900 image too
    assert list(manifest["query"]) == ["dogs", "cups"] and list(manifest["count"]) == [3, 7]


def test_the_demo_digit_scenes_and_mcq_sets_keep_their_rules():
    from ttrl_bench.datasets.registry import REGISTRY

    assert REGISTRY["imagenet-a"].filter_resolution and REGISTRY["realworldqa"].resize == 1000
    assert not any(s.filter_resolution for s in REGISTRY.values() if s.task in ("grounding", "counting")
                   and not s.source.startswith("bundled:"))


# --- rollouts see the same view -------------------------------------------------------------------------------

def test_adaptation_rollouts_decode_the_840_view(tmp_path):
    from ttrl_bench.adaptation.grpo import adaptation_dataset

    Image.new("RGB", (640, 480), "white").save(tmp_path / "scene.png")
    manifest = GroundingTask(input_size=840).view(pd.DataFrame([{**ROW, "split": "test"}]))
    row = adaptation_dataset(manifest, tmp_path)[0]
    assert row["image"].size == (840, 840) and row["input_size"] == 840
    plain = adaptation_dataset(pd.DataFrame([{**ROW, "split": "test"}]), tmp_path)[0]
    assert plain["image"].size == (640, 480)


# --- config/vr-ttrl.yaml plans the authors protocol, mask metrics in the published cells -----------------------

def test_vr_ttrl_config_plans_visionreasoners_evaluation():
    from ttrl_bench.plan import Plan, load_config

    plan = Plan(load_config("config/vr-ttrl.yaml"))
    assert plan.config["protocol"] == "authors"
    grounding = plan.config["evaluation"]["grounding"]
    assert (grounding["sam2"], grounding["input_size"], grounding["query_form"], grounding["max_new_tokens"]) == (
        "facebook/sam2-hiera-large-hf", 840, "visionreasoner", 2048)
    assert grounding["sam2_multimask"] is None  # the CLI's default: best_score, VisionReasoner's choice
    job = next(j for j in plan.jobs() if j.rule == "adapt_per_sample")
    flags = plan.eval_flags(job.dataset, job.protocol)
    for flag in ("--sam2 facebook/sam2-hiera-large-hf", "--input-size 840",
                 "--query-form visionreasoner", "--max-new-tokens 2048", "--protocol authors"):
        assert flag in flags
    assert {"vr-refcoco-testA", "vr-refcocog", "vr-countbench"} <= set(plan.datasets)


def test_vr_ttrl_trains_with_seg_zeros_rollout_length_its_token_mean_and_no_entropy_bonus(tmp_path):
    """Issue 53 item 5, VR-TTRL's trainer settings where the paper is silent, from the Seg-Zero trainer
    VisionReasoner-7B was trained with (dvlab-research/Seg-Zero @42a3345):
    - rollout length: visionreasoner_7b.yaml:6 max_response_length 2000 under `authors` (Appendix A states
      none); `clean` keeps TTRV's 1,024;
    - loss: dp_actor.py:188-199 masked_mean over a micro-batch of up to 16 rows per device
      (run_visionreasoner_7b.sh micro_batch_size_per_device_for_update=16), which holds a step's 8 rollouts on
      one device: the token mean over the step, TRL's `dapo` (its default, no loss_type set) on one process;
    - entropy bonus: Seg-Zero's default entropy_coeff 1e-3 (actor/config.py:72) is a trainer default; VR-TTRL's
      Appendix A lists the update's terms (clip, KL 1e-2, lr, weight decay, grad clip) and none: no preset has one."""
    from ttrl_bench.plan import Plan, load_config

    authors = Plan(load_config("config/vr-ttrl.yaml")).method_specs["vr-ttrl"]["hyperparameters"]
    clean_file = tmp_path / "clean.yaml"
    clean_file.write_text("protocol: clean\n")
    clean = Plan(load_config("config/vr-ttrl.yaml", clean_file)).method_specs["vr-ttrl"]["hyperparameters"]
    assert (authors["max_completion_length"], clean["max_completion_length"]) == (2000, 1024)
    assert "loss_type" not in authors and "loss_type" not in clean
    assert not any("entropy" in key for key in authors)


def test_published_mask_cells_read_mask_metrics_only():
    from ttrl_bench.results import paper_tables as pt

    assert pt.METRICS["giou"] == ["giou"] and pt.METRICS["ciou"] == ["ciou"]
    assert pt.METRICS["bbox_ap"] == ["bbox_ap"]


def test_clean_keeps_the_image_and_the_query_as_given():
    from ttrl_bench.plan.config import schema_default

    assert schema_default(("evaluation", "grounding", "input_size")) is None
    assert schema_default(("evaluation", "grounding", "query_form")) is None  # as given
    assert schema_default(("evaluation", "grounding", "max_new_tokens")) == 1024
    task = GroundingTask()
    samples = pd.DataFrame([ROW])
    assert task.view(samples).equals(samples)


def test_count_is_all_or_nothing_as_visionreasoner_parses():
    """vision_reasoner_model.py:110-121: one object without a 4-number bbox_2d makes the list comprehension
    raise, the answer has no boxes, and count_objects_batch counts len(bboxes) = 0 (:671)."""
    row = {"id": "a", "boxes": [[]], "points": [[]], "count": [2], "width": [56], "height": [56]}
    two_and_a_bad_one = ('<answer>[{"bbox_2d": [0, 0, 9, 9], "point_2d": [4, 4]}, {"bbox_2d": [20, 20, 29, 29], '
                         '"point_2d": [24, 24]}, {"bbox_2d": [1, 2]}]</answer>')
    frame = predictions_frame([two_and_a_bad_one], pd.DataFrame(row), GroundingTask(primary="count_accuracy"))
    assert frame["n_pred"].tolist() == [0] and frame["correct"].tolist() == [False]


def test_count_is_the_readable_boxes_whatever_the_points():
    """Issue 53 item 4. vision_reasoner_model.py:110-115 builds pred_bboxes from every object's bbox_2d before
    :116-119 reads point_2d, so two objects with boxes and no point_2d leave pred_bboxes of 2 when the points'
    comprehension raises (KeyError, caught at :120): count_objects_batch counts len(bboxes) = 2 (:671), right
    for a gold of 2; a fifth box entry is never read, True is a number there; a box of strings, a null, a
    missing box or a non-list answer count 0. The masks of such an answer stay empty (:171-186 ORs no mask
    without points), as ours (scored_objects: none)."""
    row = {"id": "a", "boxes": [[]], "points": [[]], "count": [2], "width": [56], "height": [56]}
    no_points = '<answer>[{"bbox_2d": [0, 0, 9, 9]}, {"bbox_2d": [20, 20, 29, 29, 5], "point_2d": [24, 24]}]</answer>'
    frame = predictions_frame([no_points], pd.DataFrame(row), GroundingTask(primary="count_accuracy"))
    assert frame["n_pred"].tolist() == [2] and frame["correct"].tolist() == [True]
    assert frame["intersection"].tolist() == [0]  # no mask drawn
    from ttrl_bench.rewards.grounding import visionreasoner_count

    assert visionreasoner_count([{"bbox_2d": [True, 0, 1, 1]}]) == 1
    for bad in ([{"bbox_2d": ["0", 0, 1, 1]}], [{"bbox_2d": [0, None, 1, 1]}], [{"point_2d": [1, 1]}],
                [{"bbox_2d": [0, 0, 1, 1]}, [0, 0, 1, 1]], [{"bbox_2d": [0, 0, float("nan"), 1]}],
                [{"bbox_2d": "0011"}], [{"bbox_2d": [0, 0, 10 ** 400, 1]}], [], None):
        assert visionreasoner_count(bad) == 0, bad


def test_unscorable_consensus_groups_predict_the_first_completion(monkeypatch):
    """Issue 35's group: the first answer holds an invalid object (its second has a bbox_2d and no point_2d),
    the second is unparsable; strict thresholds, anti mode. Under invalid_object zero_answer no answer has scored
    objects, every total is 0 and the paper's reading takes the first of the tied answers as the label; every
    reward is 0 against it. The vote-only prediction and the SFT-majority pseudo-label take that first
    completion, under both protocols."""
    from ttrl_bench.adaptation import single_sample
    from ttrl_bench.rewards import grounding

    first = ('<answer>[{"bbox_2d": [381, 310, 460, 336], "point_2d": [425, 275]}, {"bbox_2d": [381, 310, 460, 336]}, '
             '{"bbox_2d": [58, 366, 104, 487], "point_2d": [34, 515]}]</answer>')
    texts = [first, "no answer"]
    answers = [grounding.parse_objects(t) for t in texts]
    assert grounding.consensus(answers, grounding.THRESHOLDS["strict"], anti=True) == (0, [0.0, 0.0])
    monkeypatch.setattr(single_sample, "generate_samples", lambda *a, **k: texts)
    hp = {"num_generations": 2, "temperature": 0.6, "max_completion_length": 8}
    reward_params = {"thresholds": "strict", "anti": True}
    assert single_sample.consensus_vote(None, None, {"prompt": "p"}, None, hp, reward_params, 0) == first


def test_counting_sets_get_no_sam2(tmp_path):
    """VisionReasoner counts without SAM2 (count_objects_batch, vision_reasoner_model.py:643-679): a counting
    set's task under `authors` builds no masker (no checkpoint is loaded), a segmentation set's does."""
    from ttrl_bench.evaluation.tasks import task_for

    counting = task_for("vr-countbench", sam2=str(tmp_path / "absent"), image_root=tmp_path, input_size=840,
                        query="visionreasoner")
    assert counting.masker is None and counting.primary == "count_accuracy" and counting.input_size == 840
    with pytest.raises(FileNotFoundError, match=r"evaluation\.grounding\.sam2"):
        task_for("vr-refcocog", sam2=str(tmp_path / "absent"), image_root=tmp_path)


def test_vr_ttrl_tables_name_visionreasoners_protocol():
    from ttrl_bench.results import paper_tables as pt

    cells = pd.DataFrame({"paper": ["vr-ttrl"], "table": [2], "dataset": ["RefCOCOg-test"], "status": ["agrees"],
                          "items": ["ours"], "protocol": ["authors"]})
    notes = pt.provenance_notes(cells)
    assert any(n.startswith("protocol: authors (VisionReasoner's evaluation @a455092") and n.endswith("RefCOCOg-test")
               for n in notes)
    assert any("TTRV authors'" in n for n in pt.provenance_notes(cells.assign(paper="ttrv")))
    # ECHO's tables name the ECHO authors' code, not the TTRV authors' template
    echo = pt.provenance_notes(cells.assign(paper="echo", dataset="MathVista"))
    assert any(n.startswith("protocol: authors (the ECHO authors' code @6f7b311") for n in echo)
    assert not any("TTRV" in n for n in echo if n.startswith("protocol:"))


def _obj(box):
    return {"bbox_2d": box, "point_2d": [(box[0] + box[2]) // 2, (box[1] + box[3]) // 2]}


def test_appendix_a_complete_iou_by_hand():
    """VR-TTRL Appendix A's cIoU, the box Complete IoU (Zheng et al. 2020): IoU - rho^2 / c^2 - alpha v. Gold
    [0, 0, 10, 10] against [5, 5, 15, 15]: IoU 25 / 175, centres 5 sqrt(2) apart (rho^2 50), enclosing box
    15 x 15 (c^2 450), equal aspect ratios (v 0): 1/7 - 1/9 = 2/63. Against [20, 20, 30, 30]: IoU 0, rho^2 800,
    c^2 1800: -4/9. One gold and two predicted boxes: the matched pair over max(2, 1)."""
    from ttrl_bench.evaluation.box_metrics import complete_iou

    gold = [_obj([0, 0, 10, 10])]
    assert complete_iou([_obj([5, 5, 15, 15])], gold) == pytest.approx(2 / 63)
    assert complete_iou([_obj([20, 20, 30, 30])], gold) == pytest.approx(-4 / 9)
    assert complete_iou([_obj([20, 20, 30, 30]), _obj([0, 0, 10, 10])], gold) == pytest.approx(1 / 2)
    assert complete_iou(None, gold) == 0.0 and complete_iou([{"bbox_2d": "x"}], gold) == 0.0


def test_appendix_a_bbox_ap_is_cocos_over_iou_thresholds():
    """Appendix A's bbox_AP, COCO's AP over IoU 0.5:0.95 (pycocotools), every box scored 1. One box of IoU
    0.8 (a 10 x 8 box inside the 10 x 10 gold): a hit at the 7 thresholds 0.50 ... 0.80, a miss at 0.85 ...
    0.95: AP 7 / 10. Two rows, one hit and one miss: precision 1 up to recall 1/2, 51 of COCO's 101 recall
    points: 51 / 101 at every threshold. VisionReasoner's bbox_ap counts the first as a full hit."""
    from ttrl_bench.evaluation.box_metrics import coco_bbox_ap

    gold = [_obj([0, 0, 10, 10])]
    assert coco_bbox_ap([[_obj([0, 0, 10, 8])]], [gold]) == pytest.approx(7 / 10)
    assert coco_bbox_ap([[_obj([0, 0, 10, 10])], [_obj([50, 50, 60, 60])]], [gold, gold]) == pytest.approx(51 / 101)
    assert coco_bbox_ap([None], [gold]) == 0.0


def test_appendix_a_definitions_fill_the_cells_when_asked():
    """tables.metric_definitions: VisionReasoner's code fills the cIoU and bbox_AP cells by default, Appendix
    A's definitions when asked; the cell's our_metric names which."""
    from ttrl_bench.results.paper_tables import METRIC_DEFINITIONS

    assert METRIC_DEFINITIONS["code"]["ciou"] == ["ciou"] and METRIC_DEFINITIONS["code"]["bbox_ap"] == ["bbox_ap"]
    assert METRIC_DEFINITIONS["appendix_a"]["ciou"] == ["box_complete_iou"]
    assert METRIC_DEFINITIONS["appendix_a"]["bbox_ap"] == ["bbox_ap_coco"]
    assert METRIC_DEFINITIONS["appendix_a"]["giou"] == ["giou"]  # Appendix A's gIoU is VisionReasoner's
