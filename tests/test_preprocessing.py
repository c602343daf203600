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
