"""Preprocessing shared by all datasets: resolution filter, MCQ conversion, prompts, sampling."""

from collections import Counter

import pandas as pd
import pytest
from PIL import Image

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
