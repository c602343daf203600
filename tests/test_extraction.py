"""Answer extraction on messy, real-looking model outputs."""

import pytest

from ttrl_bench.evaluation.extraction import answer_region, extract_choice, extract_short_answer

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
        # reasoning-tuned habits: tags, boxes, markup, "Answer:" lines
        ("<answer>C</answer>", "C"),
        ("<answer> (C) </answer>", "C"),
        ("<think>Is it A or B? Not A. Maybe D.</think>\n<answer>C</answer>", "C"),
        ("<think>Option A is a brace, option B a cart.</think> The answer is C.", "C"),
        ("<think>a guillotine or a garbage truck</think>\nguillotine", "C"),
        ("\\boxed{C}", "C"),
        ("So the final answer is $\\boxed{\\text{C}}$.", "C"),
        ("<answer>\\boxed{D}</answer>", "D"),
        ("*(C)*", "C"),
        ("Answer: (C)", "C"),
        ("**Answer:** C", "C"),
        ("Final answer: C. guillotine", "C"),
        ("The correct answer is **(C)** guillotine.", "C"),
        ("Option A is wrong and option B too, so the answer is C.", "C"),
        ("I first thought the answer is A, but the answer is C.", "C"),  # the last statement wins
        ("C: guillotine", "C"),
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
        "<answer>E</answer>",  # not among the options
        "<think>A or B</think><answer>I cannot tell.</answer>",  # the answer region names nothing
        "<think>It is C.</think><answer>no idea</answer>",  # the thinking is not the answer
        "Option A or option B.",  # two letters named
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


def test_answer_region_order():
    assert answer_region("<think>x</think><answer>first</answer> <answer>last</answer>") == "last"
    # an empty answer tag is no answer: the text after </think> is used
    assert answer_region("<think>x</think><answer> </answer> after") == "<answer> </answer> after"
    assert answer_region("<think>x</think> after") == " after"
    assert answer_region("<think>unfinished thought") == "<think>unfinished thought"
    assert answer_region("\\boxed{1} then \\boxed{2}") == "2"


def test_short_answers_in_tags_and_boxes():
    assert extract_short_answer("<think>3 or 4?</think><answer>3.5</answer>") == "3.5"
    assert extract_short_answer("The answer is \\boxed{cube}.") == "cube"
    assert extract_short_answer("<think>hm</think>\nAnswer: 12.") == "12"
    assert extract_short_answer("  ") is None
