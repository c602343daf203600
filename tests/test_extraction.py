"""Answer extraction on messy, real-looking model outputs."""

import pytest

from ttrl_bench.evaluation.extraction import extract_choice

OPTIONS = ["neck brace", "shopping cart", "guillotine", "garbage truck"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("B", "B"),
        (" C\n", "C"),
        ("**D**", "D"),
        ("(A)", "A"),
        ("B.", "B"),
        ("C)", "C"),
        ("The answer is C.", "C"),
        ("Answer: D", "D"),
        ("answer: (B)", "B"),
        ("I think the correct option is **A** because of the strap.", "A"),
        ("B. shopping cart", "B"),
        ("(D) garbage truck", "D"),
        ("It looks like a guillotine.", "C"),
        ("garbage truck", "D"),
        ("Shopping Cart", "B"),
    ],
)
def test_extracts_the_chosen_letter(text, expected):
    assert extract_choice(text, OPTIONS) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        None,
        "E",  # not among the options
        "The answer is E.",
        "either a shopping cart or a garbage truck",  # two option texts
        "I am not sure.",
        "the answer is a dog",  # lower-case 'a' is an article, not option A
        "thre",
    ],
)
def test_unreadable_outputs_are_none(text):
    assert extract_choice(text, OPTIONS) is None


def test_option_text_must_match_whole_words():
    # "cart" inside "cartography" is not the option "cart"
    assert extract_choice("cartography", ["cart", "dog", "cat", "fish"]) is None
    assert extract_choice("a cat", ["cart", "dog", "cat", "fish"]) == "C"


def test_two_options_only_accept_a_and_b():
    assert extract_choice("B", ["No", "Yes"]) == "B"
    assert extract_choice("C", ["No", "Yes"]) is None
