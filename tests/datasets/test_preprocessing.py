"""Preprocessing shared by all datasets: resolution filter, MCQ conversion, prompts, sampling."""

import hashlib
import math
import random
from collections import Counter

import pandas as pd
import pytest
from PIL import Image

from ttrl_bench.datasets import preprocessing as pp
from ttrl_bench.datasets.preprocessing import (
    mcq_options,
    recognition_prompt,
    vqa_prompt,
    resolution_verdict,
    sample_rng,
)
from ttrl_bench.datasets.sampling import select_adaptation_samples

CLASSES = [f"class{i}" for i in range(10)]


@pytest.fixture
def images(tmp_path):
    sizes = {"small": (640, 480), "square": (1000, 1000), "wide": (1200, 500), "big": (1100, 1100)}
    paths = {}
    for name, size in sizes.items():
        paths[name] = tmp_path / f"{name}.png"
        Image.new("RGB", size).save(paths[name])
    paths["corrupt"] = tmp_path / "corrupt.jpg"
    paths["corrupt"].write_bytes(b"\xff\xd8 this is not a jpeg")
    return paths


def test_either_side_rule_drops_any_side_over_1000(images):
    verdicts = {name: resolution_verdict(path) for name, path in images.items()}
    assert verdicts == {
        "small": "kept",
        "square": "kept",  # exactly 1000x1000 is not larger
        "wide": "too_large",
        "big": "too_large",
        "corrupt": "unreadable",
    }


def test_area_rule_keeps_wide_images_under_a_megapixel(images):
    # 1200 x 500 = 600,000 px <= 1,000,000; 1100 x 1100 = 1,210,000 px > 1,000,000
    assert resolution_verdict(images["wide"], "area") == "kept"
    assert resolution_verdict(images["big"], "area") == "too_large"


def test_resolution_filter_reads_the_header_only(tmp_path):
    # A PNG whose pixel data is cut off still has a valid header: the filter must not decode it.
    full = tmp_path / "full.png"
    Image.new("RGB", (1500, 20), "white").save(full)
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(full.read_bytes()[:60])
    assert resolution_verdict(truncated) == "too_large"


def test_unknown_resolution_rule_is_an_error(images):
    with pytest.raises(ValueError, match="either_side"):
        resolution_verdict(images["small"], "diagonal")


def test_mcq_options_are_deterministic_per_sample():
    first = mcq_options("class3", CLASSES, sample_rng(0, "demo", "s17"))
    again = mcq_options("class3", CLASSES, sample_rng(0, "demo", "s17"))
    other = mcq_options("class3", CLASSES, sample_rng(1, "demo", "s17"))
    assert first == again
    assert first != other
    options, letter = first
    assert len(set(options)) == 4 and "class3" in options
    assert options["ABCD".index(letter)] == "class3"


def test_correct_letter_is_near_uniform():
    letters = Counter(mcq_options(CLASSES[i % 10], CLASSES, sample_rng(0, "demo", str(i)))[1] for i in range(4000))
    # 1000 expected per letter; 4 sigma of a binomial(4000, 1/4) is about 110
    assert all(abs(n - 1000) < 110 for n in letters.values()), letters


def test_mcq_needs_four_classes():
    with pytest.raises(ValueError, match="at least 4"):
        mcq_options("a", ["a", "b", "c"], sample_rng(0, "x", "y"))


def test_recognition_prompt_follows_ttrv_appendix_c():
    prompt = recognition_prompt(["neck brace", "shopping cart", "guillotine", "garbage truck"])
    assert prompt == (
        "Look at the given image and identify what it shows. Choose the correct answer from the "
        "options below and respond with only the corresponding option letter (A, B, C, or D). "
        "Do not include any explanation or extra text.\n"
        "Options:\nA. neck brace\nB. shopping cart\nC. guillotine\nD. garbage truck."
    )


@pytest.fixture
def test_split():
    return pd.DataFrame({"id": [f"s{i:03d}" for i in range(100)], "label": [CLASSES[i % 10] for i in range(100)]})


def test_random_sampling_is_seeded(test_split):
    a = select_adaptation_samples(test_split, 20, seed=0)
    assert len(a) == 20 and a["id"].is_unique
    assert a.equals(select_adaptation_samples(test_split, 20, seed=0))
    assert not a.equals(select_adaptation_samples(test_split, 20, seed=1))
    assert len(select_adaptation_samples(test_split, "all", seed=0)) == 100


def test_biased_sampling_uses_k_classes(test_split):
    picked = select_adaptation_samples(test_split, 15, seed=0, strategy="biased-2")
    assert picked["label"].nunique() == 2


def test_sampling_errors_name_the_problem(test_split):
    with pytest.raises(ValueError, match="has 100"):
        select_adaptation_samples(test_split, 500, seed=0)
    with pytest.raises(ValueError, match="fewer than n=15"):
        select_adaptation_samples(test_split, 15, seed=0, strategy="biased-1")
    with pytest.raises(ValueError, match="biased-<k>"):
        select_adaptation_samples(test_split, 5, seed=0, strategy="stratified")


def test_vqa_prompt_letter_phrases_follow_the_option_count():
    two = vqa_prompt("Is it red?", ["No", "Yes"], "options")
    assert "option letter (A or B)." in two
    five = vqa_prompt("Which?", list("vwxyz"), "options")
    assert "option letter (A, B, C, D, or E)." in five and five.endswith("\nOptions:\nA. v\nB. w\nC. x\nD. y\nE. z")
    assert vqa_prompt("What is x?", [], "options") == (
        "What is x?\nAnswer the question with a single word or number. Do not include any explanation or extra text.")


# --- the distractors are a seeded draw, not the first classes of the sorted list (issue 39) ------------------

IMAGENET_LIKE = [f"n{i:04d}" for i in range(1000)]  # 1000 classes; sorted, "n0000" .. "n0002" come first


def _distractors(true_class, classes, seed, sample_id, dataset="demo"):
    options, _ = mcq_options(true_class, classes, sample_rng(seed, dataset, sample_id))
    return frozenset(options) - {true_class}


def test_distractors_are_drawn_from_every_other_class_not_the_first_three_sorted():
    """Each of the 9 other classes of a 10-class list is a distractor with probability 3/9 = 1/3 (3 drawn
    uniformly without replacement). Over 900 samples of true class "class3": 300 expected per class, sd
    sqrt(900 x 1/3 x 2/3) = 14.1, so every class lands in 300 +- 60 (4.2 sd). Taking the first three sorted
    others would make class0, class1, class2 the distractors of all 900 and the other 6 classes never."""
    counts = Counter()
    for i in range(900):
        counts.update(_distractors("class3", CLASSES, 0, f"s{i}"))
    assert set(counts) == set(CLASSES) - {"class3"}
    assert all(abs(n - 300) < 60 for n in counts.values()), counts
    # distinct distractor sets: C(9, 3) = 84 possible, 900 draws hit nearly all (expected 84 x (1 - (83/84)^900) = 84.0)
    sets = {_distractors("class3", CLASSES, 0, f"s{i}") for i in range(900)}
    assert len(sets) >= 80


def test_imagenet_like_distractors_are_not_the_alphabetically_first_classes():
    """1000 classes: three distractors uniform over the 999 others. The chance that a sample's three are
    exactly n0000-n0002 (or contain any of them) is 3 / 999 per class: over 50 samples the first three sorted
    classes appear about 50 x 3 x 3/999 = 0.45 times, and the 150 distractors cover
    999 x (1 - (998/999)^150) = 139.3 distinct classes on average (about 11 repeats, Poisson sd ~3.3);
    the first three sorted would cover 3."""
    first_three = {"n0000", "n0001", "n0002"}
    draws = [_distractors("n0500", IMAGENET_LIKE, 0, f"img{i}") for i in range(50)]
    assert all(d != first_three for d in draws)
    assert sum(len(d & first_three) for d in draws) <= 5  # expected 0.45; 5 is a tail of p < 1e-4
    assert len(set().union(*draws)) >= 125  # 139.3 - 4 sd


def test_same_seed_repeats_the_distractors_and_another_seed_or_sample_changes_them():
    """sample_rng(seed, dataset, sample id) alone fixes the draw. Two draws of 3 of 999 classes coincide with
    probability 1 / C(999, 3) = 6e-9, so a changed seed, sample id or dataset must give another set."""
    base = _distractors("n0500", IMAGENET_LIKE, 0, "s17")
    assert _distractors("n0500", IMAGENET_LIKE, 0, "s17") == base  # the same seed: the same three, every time
    assert mcq_options("n0500", IMAGENET_LIKE, sample_rng(0, "demo", "s17")) == \
        mcq_options("n0500", IMAGENET_LIKE, sample_rng(0, "demo", "s17"))  # and the same order and letter
    assert _distractors("n0500", IMAGENET_LIKE, 1, "s17") != base  # seed changed
    assert _distractors("n0500", IMAGENET_LIKE, 0, "s18") != base  # sample id changed
    assert _distractors("n0500", IMAGENET_LIKE, 0, "s17", dataset="other") != base  # dataset changed
    # the class list's order does not matter: it is sorted before the draw
    assert _distractors("n0500", list(reversed(IMAGENET_LIKE)), 0, "s17") == base


def test_adaptation_samples_change_with_the_seed_and_repeat_with_it():
    """select_adaptation_samples draws 20 of 100 ids with pandas' seeded sample: the same seed gives the same
    20 ids; seeds 0, 1, 2 give three different sets (two 20-of-100 draws coincide with probability
    1 / C(100, 20) ~ 2e-21). Biased sampling: the seed also picks which k classes."""
    split = pd.DataFrame({"id": [f"s{i:03d}" for i in range(100)], "label": [CLASSES[i % 10] for i in range(100)]})
    ids = {seed: tuple(select_adaptation_samples(split, 20, seed=seed)["id"]) for seed in (0, 1, 2)}
    assert len(set(ids.values())) == 3
    assert all(tuple(select_adaptation_samples(split, 20, seed=s)["id"]) == ids[s] for s in ids)
    assert all(len(set(v)) == 20 and list(v) == sorted(v) for v in ids.values())  # distinct, sorted by id
    classes = {seed: frozenset(select_adaptation_samples(split, 10, seed=seed, strategy="biased-2")["label"])
               for seed in range(6)}
    assert all(len(c) == 2 for c in classes.values())
    # 6 seeds choosing 2 of 10 classes (45 pairs): all equal with probability 45^-5 ~ 5e-9
    assert len(set(classes.values())) > 1
    assert frozenset(select_adaptation_samples(split, 10, seed=3, strategy="biased-2")["label"]) == classes[3]


def test_sampling_n_at_and_just_over_the_split_size():
    """n == rows passes (all of them), n == rows + 1 is refused; biased-1 over 10 rows per class: 10 pass, 11 not."""
    split = pd.DataFrame({"id": [f"s{i:03d}" for i in range(100)], "label": [CLASSES[i % 10] for i in range(100)]})
    assert len(select_adaptation_samples(split, 100, seed=0)) == 100
    with pytest.raises(ValueError, match="asked for 101 adaptation samples but the test split has 100"):
        select_adaptation_samples(split, 101, seed=0)
    assert len(select_adaptation_samples(split, 10, seed=0, strategy="biased-1")) == 10
    with pytest.raises(ValueError, match="1 classes hold 10 samples, fewer than n=11"):
        select_adaptation_samples(split, 11, seed=0, strategy="biased-1")


# --- preprocessing.py's and sampling.py's edges (issue 39): every value worked out by hand -----------------------

def test_decode_verdict_decodes_every_pixel(tmp_path):
    """A whole PNG decodes ("kept"); the same PNG cut to its first 60 bytes keeps a valid header (the resolution
    filter reads 1500 x 20 from it) but its pixels do not decode; bytes that are no image and a missing file are
    "unreadable" too."""
    full = tmp_path / "full.png"
    Image.new("RGB", (1500, 20), "white").save(full)
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(full.read_bytes()[:60])
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"\xff\xd8 this is not a jpeg")
    assert pp.decode_verdict(full) == "kept"
    assert pp.decode_verdict(truncated) == "unreadable"
    assert pp.decode_verdict(junk) == "unreadable"
    assert pp.decode_verdict(tmp_path / "missing.png") == "unreadable"
    assert pp.image_size(full) == (1500, 20)  # (width, height)


def test_resolution_edges_height_area_and_max_side(images, tmp_path, monkeypatch):
    """either_side: a 500 x 1200 image is too large by its height alone. area: 1000 x 1000 = 10^6 is not larger than
    10^6 (kept), 1000 x 1001 is. max_side 640: 640 x 480 kept under either_side (640 is not > 640); under area
    640 x 480 = 307,200 <= 409,600 kept. A file PIL refuses as a decompression bomb (over
    2 x MAX_IMAGE_PIXELS; set to 100 here, so 640 x 480 is one) is too large, not unreadable."""
    tall = tmp_path / "tall.png"
    Image.new("RGB", (500, 1200)).save(tall)
    just_over = tmp_path / "just_over.png"
    Image.new("RGB", (1000, 1001)).save(just_over)
    assert resolution_verdict(tall) == "too_large"
    assert resolution_verdict(images["square"], "area") == "kept"
    assert resolution_verdict(just_over, "area") == "too_large"
    assert resolution_verdict(images["small"], max_side=640) == "kept"
    assert resolution_verdict(images["small"], max_side=639) == "too_large"
    assert resolution_verdict(images["small"], "area", max_side=640) == "kept"
    # 640 x 480 = 307,200 against 555^2 = 308,025 (kept) and 554^2 = 306,916 (too large)
    assert resolution_verdict(images["small"], rule="area", max_side=555) == "kept"
    assert resolution_verdict(images["small"], rule="area", max_side=554) == "too_large"
    with pytest.raises(ValueError, match="resolution rule must be 'either_side' or 'area', got 'diagonal'"):
        resolution_verdict(tall, "diagonal")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
    assert resolution_verdict(images["small"]) == "too_large"
    assert pp.decode_verdict(images["small"]) == "unreadable"


def test_sample_rng_is_seeded_by_the_sha256_of_seed_dataset_and_id():
    """The stated formula: the first 8 bytes, big-endian, of sha256("0|demo|s17") seed Python's Random. Pinning it
    keeps every prepared manifest's options across versions."""
    seed = int.from_bytes(hashlib.sha256(b"0|demo|s17").digest()[:8], "big")
    assert seed == 6854388856385841763
    assert pp.sample_rng(0, "demo", "s17").random() == random.Random(6854388856385841763).random()


def test_mcq_options_with_exactly_four_classes_and_duplicates():
    """Four distinct classes are enough (three others); a class list with repeats counts each class once, so the
    options stay distinct; three distinct classes are refused, naming the count 3."""
    options, letter = mcq_options("a", ["a", "b", "c", "d", "b", "c", "d", "d"], sample_rng(0, "demo", "s17"))
    assert sorted(options) == ["a", "b", "c", "d"] and options["ABCD".index(letter)] == "a"
    with pytest.raises(ValueError, match="4-way MCQ needs at least 4 distinct classes, got 3"):
        mcq_options("a", ["a", "b", "c", "b", "c"], sample_rng(0, "x", "y"))
    # the draw for sample_rng(0, "demo", "s17") on 4 classes: shuffled to d, a, c, b, so "a" is B
    assert mcq_options("a", list("abcd"), sample_rng(0, "demo", "s17")) == (["d", "a", "c", "b"], "B")


def test_recognition_prompt_texture_wording():
    prompt = recognition_prompt(["banded", "dotted", "woven", "zigzagged"], style="texture")
    assert prompt == (
        "Look at the given image and identify what texture it shows. Choose the correct answer from the "
        "options below and respond with only the corresponding option letter (A, B, C, or D). "
        "Do not include any explanation or extra text.\n"
        "Options:\nA. banded\nB. dotted\nC. woven\nD. zigzagged.")


def test_vqa_prompts_of_every_style_in_full():
    """TTRV Appendix C's wordings, each with its letters phrase: 2 options "A or B", 3 "A, B, or C"."""
    assert vqa_prompt("Is it red?", ["No", "Yes"], "mme") == (
        "Is it red? Please respond with only the corresponding option letter (A or B). Do not include any "
        "explanation or extra text. \nOptions:\nA. No\nB. Yes.")
    assert vqa_prompt("Which?", ["x", "y", "z"], "options") == (
        "Which?\nChoose the correct answer from the options below and respond with only the corresponding option "
        "letter (A, B, or C). Do not include any explanation or extra text.\nOptions:\nA. x\nB. y\nC. z")
    assert vqa_prompt("Which? A. x B. y C. z", ["x", "y", "z"], "in_question") == (
        "Which? A. x B. y C. z\nChoose the correct answer from the options below and respond with only the "
        "corresponding option letter (A, B, or C). Do not include any explanation or extra text.")
    assert vqa_prompt("What is x? ", ["1", "2", "3"], "mathvista") == (
        "Hint: Please answer the question and provide the correct option letter, e.g., A, B, C, D, at the end.\n"
        "Do not include any explanation or extra text.\nQuestion: What is x? \nChoices:\n(A) 1\n(B) 2\n(C) 3")
    assert vqa_prompt("Find x.", ["1", "2"], "mathverse") == (
        "Please directly answer the question and provide the correct option letter, e.g., A, B, C, D.\n"
        "Do not include any explanation or extra text.\nQuestion: Find x.")
    # CRPE: the trailing blank and "." of its own text go before TTRV's clause
    assert vqa_prompt("Q? A. x B. y Answer with the option's letter from the given choices directly. ",
                      ["x", "y"], "crpe") == ("Q? A. x B. y Answer with the option's letter from the given choices "
                                              "directly and do not include any explanation or extra text.")
    # only blanks and "." go: a stem ending in a capital X keeps it
    assert vqa_prompt("Which brand is it? A. ROLEX B. OMEGA Answer: ROLEX.", ["x", "y"], "crpe") == (
        "Which brand is it? A. ROLEX B. OMEGA Answer: ROLEX and do not include any explanation or extra text.")
    assert vqa_prompt("As asked. A. x", ["x"], "verbatim") == "As asked. A. x"
    assert vqa_prompt("Open?", [], "verbatim") == "Open?"
    assert pp._letters_phrase(4) == "A, B, C, or D"


def test_math_capture_and_grounding_prompts_in_full():
    """ECHO's suffix and "Choices:" block (letters joined to the option by "." with no blank), MathVerse without
    the block; Capture's boxed-answer instruction; VisionReasoner's grounding template with its example."""
    suffix = "\nPlease reason step by step, and put your final answer within \\boxed{}."
    assert pp.math_prompt("Find x.", ["3", "4"]) == "Find x.\n\nChoices:\nA.3\nB.4" + suffix
    assert pp.math_prompt("Find x. A:3 B:4", ["3", "4"], list_options=False) == "Find x. A:3 B:4" + suffix
    assert pp.math_prompt("Find AB.", []) == "Find AB." + suffix
    question = pp.CAPTURE_QUESTION.format(object="apples")
    assert question == ("Count the exact number of apples in the image. Assume the pattern of apples continues "
                        "behind any black box. Provide the total number of apples as if the black box were not there.")
    assert pp.capture_prompt(question) == question + suffix
    assert pp.grounding_prompt("the red cup") == (
        'Please find "the red cup" with bboxs and points.'
        "Compare the difference between object(s) and find the most closely matched object(s)."
        "Output the thinking process in <think> </think> and final answer in <answer> </answer> tags."
        "Output the bbox(es) and point(s) inside the interested object(s) in JSON format."
        'i.e., <think> thinking process here </think><answer>[{"bbox_2d": [10,100,200,210], "point_2d": [30,110]}, '
        '{"bbox_2d": [225,296,706,786], "point_2d": [302,410]}]</answer>')


def test_resize_square_writes_an_rgb_png_of_the_side(tmp_path):
    """A 30 x 20 RGBA image in a file named .jpg becomes a 16 x 16 RGB PNG, written in place (PNG whatever the
    name). A flat colour stays flat under bicubic resizing and alpha is dropped, so the file must be exactly PIL's
    unoptimized PNG of a 16 x 16 (200, 100, 50) image (optimize=True writes 83 bytes, not 82): the same bytes on
    every re-preparation."""
    import io

    src = Image.new("RGBA", (30, 20), (200, 100, 50, 128))
    for name in ("a.jpg", "b.png"):
        src.save(tmp_path / name, format="PNG")
        pp.resize_square(tmp_path / name, 16)
    with Image.open(tmp_path / "a.jpg") as im:
        assert (im.format, im.mode, im.size) == ("PNG", "RGB", (16, 16))
        assert im.getpixel((8, 8)) == (200, 100, 50)
    expected = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 100, 50)).save(expected, format="PNG", optimize=False)
    assert (tmp_path / "a.jpg").read_bytes() == expected.getvalue() == (tmp_path / "b.png").read_bytes()


def test_model_view_and_to_model_view_edges():
    """input_size 0 or None: the image and the objects as they are. A 2 x 1 image of black | white shown at 4 x 4
    with the bilinear filter: output pixel centres 0.5 .. 3.5 fall on source x = -0.25, 0.25, 0.75, 1.25, so
    0, 0.25 x 255 = 63.75 -> 64, 0.75 x 255 = 191.25 -> 191, 255 (PIL's default, bicubic, gives 0, 53, 202, 255)."""
    image = Image.new("L", (2, 1))
    image.putpixel((1, 0), 255)
    assert pp.model_view(image, 0) is image
    view = pp.model_view(image, "4")  # int() of the configured size
    assert view.size == (4, 4)
    assert [view.getpixel((x, 0)) for x in range(4)] == [0, 64, 191, 255]
    objects = [{"bbox_2d": [1, 2, 3, 4], "point_2d": [1, 2], "label": "cup"}]
    assert pp.to_model_view(objects, 640, 480, None) is objects
    assert pp.to_model_view(objects, 2, 4, 8) == [{"bbox_2d": [4, 4, 12, 8], "point_2d": [4, 4], "label": "cup"}]
    assert pp.to_original(objects, 16, 8, 8) == [{"bbox_2d": [2, 2, 6, 4], "point_2d": [2, 2], "label": "cup"}]
    assert pp.to_original(objects, 16, 8, 0) is objects



def test_a_manifest_mixing_rows_with_and_without_input_size_resizes_only_those_with_one():
    """pandas fills a missing `input_size` with NaN where other rows have one (840.0). Such a row is shown as it is
    and its answer stays in original pixels; the 840 row is resized and its answer scaled by 1680 / 840 = 2 and
    420 / 840 = .5: box (10, 20, 30, 40) -> int(10 x 2 + .5) = 20, int(20 x .5 + .5) = 10, 60, 20; point (5, 8) -> 10, 4."""
    rows = pd.DataFrame([{"id": "a", "input_size": 840}, {"id": "b"}]).to_dict("records")
    assert rows[0]["input_size"] == 840.0 and math.isnan(rows[1]["input_size"])
    image = Image.new("RGB", (1680, 420))
    assert pp.model_view(image, rows[0]["input_size"]).size == (840, 840)
    assert pp.model_view(image, rows[1]["input_size"]) is image
    objects = [{"bbox_2d": [10, 20, 30, 40], "point_2d": [5, 8]}]
    assert pp.to_original(objects, 1680, 420, rows[0]["input_size"]) == [{"bbox_2d": [20, 10, 60, 20], "point_2d": [10, 4]}]
    assert pp.to_original(objects, 1680, 420, rows[1]["input_size"]) is objects
    assert pp.to_model_view(objects, 1680, 420, rows[1]["input_size"]) is objects
    assert [pp.view_side(v) for v in (None, 0, float("nan"), 840.0, "840")] == [None, None, None, 840, 840]

def test_adaptation_samples_index_and_columns(test_split):
    """The selection is a fresh 0..n-1 index with the split's columns only, also for "all" of a split whose index
    is not 0..n-1 (here 100..199, reversed): rows kept in the split's order."""
    shuffled = test_split.iloc[::-1].set_index(pd.RangeIndex(199, 99, -1))
    every = select_adaptation_samples(shuffled, "all", seed=0)
    assert list(every.index) == list(range(100)) and list(every.columns) == ["id", "label"]
    assert every["id"].tolist() == shuffled["id"].tolist()
    some = select_adaptation_samples(shuffled, 7, seed=0, strategy="biased-10")
    assert list(some.index) == list(range(7)) and list(some.columns) == ["id", "label"]
    assert some["id"].tolist() == sorted(some["id"])
    assert select_adaptation_samples(shuffled, "7", seed=0)["id"].tolist() == \
        select_adaptation_samples(shuffled, 7, seed=0)["id"].tolist()


def test_an_invalid_object_does_not_stop_the_rescaling_of_the_next():
    """[invalid, valid] from an 8 x 8 view of a 16 x 8 image: the invalid one is kept as it is and the next one still
    scaled (x factor 2, y factor 1; int(v * f + 0.5))."""
    invalid = {"bbox_2d": [1, 2], "point_2d": [1, 2]}
    valid = {"bbox_2d": [1, 2, 3, 4], "point_2d": [1, 2]}
    assert pp.to_original([invalid, valid], 16, 8, 8) == [invalid, {"bbox_2d": [2, 2, 6, 4], "point_2d": [2, 2]}]


def test_a_biased_strategy_with_more_than_one_number_is_refused(test_split):
    """"biased-<k>" takes one number: "biased-2-3" is neither k = 2 nor k = 3 but an error."""
    with pytest.raises(ValueError):
        select_adaptation_samples(test_split, 5, seed=0, strategy="biased-2-3")


def test_open_model_view_decodes_grey_palette_and_rgba_files_to_rgb_and_resizes(tmp_path):
    """Every loader (evaluation, GRPO's dataset, per-sample, the Appendix C baselines) shows the model
    open_model_view's image. A grey 'L' pixel 77 becomes RGB (77, 77, 77); a palette file's index 1,
    coloured (10, 20, 30), becomes that colour; RGBA drops alpha. With input_size 4 the 6x2 grey file is
    shown as 4x4 (a constant image stays 77 under bilinear resampling); with None it keeps its 6x2."""
    Image.new("L", (6, 2), 77).save(tmp_path / "grey.png")
    palette = Image.new("P", (3, 3), 1)
    palette.putpalette([0, 0, 0, 10, 20, 30] + [0] * 762)
    palette.save(tmp_path / "palette.png")
    Image.new("RGBA", (2, 2), (1, 2, 3, 0)).save(tmp_path / "alpha.png")
    grey = pp.open_model_view(tmp_path / "grey.png", None)
    assert (grey.mode, grey.size, grey.getpixel((5, 1))) == ("RGB", (6, 2), (77, 77, 77))
    resized = pp.open_model_view(tmp_path / "grey.png", 4)
    assert (resized.mode, resized.size, resized.getpixel((3, 3))) == ("RGB", (4, 4), (77, 77, 77))
    assert pp.open_model_view(tmp_path / "palette.png", None).getpixel((2, 2)) == (10, 20, 30)
    assert pp.open_model_view(tmp_path / "alpha.png", None).getpixel((0, 0)) == (1, 2, 3)


def test_a_file_that_does_not_decode_raises_one_of_decode_errors(tmp_path):
    """The callers name the sample when open_model_view raises one of DECODE_ERRORS: a text file is not an
    image (UnidentifiedImageError, an OSError); a PNG cut after its first 40 bytes keeps its header but
    its pixels do not decode (OSError or SyntaxError, by PIL version)."""
    (tmp_path / "text.png").write_text("not an image")
    Image.new("RGB", (32, 32), (5, 6, 7)).save(tmp_path / "full.png")
    (tmp_path / "cut.png").write_bytes((tmp_path / "full.png").read_bytes()[:40])
    for name in ("text.png", "cut.png"):
        with pytest.raises(pp.DECODE_ERRORS):
            pp.open_model_view(tmp_path / name, None)
