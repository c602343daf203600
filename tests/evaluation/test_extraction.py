"""Answer extraction on messy, real-looking model outputs."""

import pytest

from ttrl_bench.evaluation.extraction import (answer_region, extract_choice, extract_short_answer, short_answers_match,
                                             ttrv_choice)

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


def test_answer_region_after_a_repeated_think_close():
    """A model that closes its thinking twice: the text after the LAST </think> is the region; when
    nothing follows the last one, the whole output (module docstring's order)."""
    assert answer_region("<think>A?</think> wait, B? </think> C") == " C"
    assert answer_region("<think>A?</think> C </think>") == "<think>A?</think> C </think>"


@pytest.mark.parametrize("text, expected", [
    ("**B) because of the stripes**", "B"),  # bold around a leading option: markup is stripped first
    ("X) a guillotine", None),  # a leading option letter that is not among the options: no answer,
    # not a fall-through to the option text (module docstring: "a letter not among the options -> None")
])
def test_leading_option_under_markup_and_beyond_the_options(text, expected):
    assert extract_choice(text, OPTIONS) == expected


def test_short_answers_in_tags_and_boxes():
    assert extract_short_answer("<think>3 or 4?</think><answer>3.5</answer>") == "3.5"
    assert extract_short_answer("The answer is \\boxed{cube}.") == "cube"
    assert extract_short_answer("<think>hm</think>\nAnswer: 12.") == "12"
    assert extract_short_answer("  ") is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("B", "B"),
        ("B.", "B"),
        ("**C**", "C"),
        ("I think a cat. B", "B"),  # the last standalone A-D
        ("it is a dog", "A"),  # upper-cased first: the article is read as option A
        ("The answer is C, not D.", "D"),
        ("guillotine", None),  # no letter: TTRV keeps the text as the answer, never a gold letter
        ("E", None),  # regex covers A-D only; "E" survives as text but is not among 4 options
    ],
)
def test_ttrv_choice_as_choice_answer_clean_gpqa(text, expected):
    """TTRV qwen_math_parser.py `choice_answer_clean_gpqa`: strip, findall(r"\\b(A|B|C|D)\\b",
    pred.upper()), take the last; else the stripped text."""
    from ttrl_bench.evaluation.extraction import ttrv_choice

    assert ttrv_choice(text, OPTIONS) == expected


@pytest.mark.parametrize("text, expected", [
    # choice_answer_clean_gpqa: pred.strip("\\n").rstrip(".").rstrip("/").strip(" ").lstrip(":"); no
    # standalone A-D -> [pred.strip().strip(".")][-1].rstrip(".").rstrip("/"). Worked by hand:
    ("E./.", "E"),  # "E./." -> "E./" -> "E." -> ... -> strip(".") "E"
    ("\t:E", None),  # a tab is neither "\\n" nor " ": ":" stays -> ":E" (not a letter)
    ("E/ ", "E"),  # rstrip("/") sees " " last; strip(" ") -> "E/"; the final rstrip("/") -> "E"
    ("E. ", "E"),  # -> "E."; strip(".") -> "E"
    ("EX", None),  # no standalone letter; "EX" itself is no option letter
    ("XE", None),
])
def test_ttrv_choice_strips_in_the_authors_order(text, expected):
    assert ttrv_choice(text, ["1", "2", "3", "4", "5"]) == expected


def test_ttrv_choice_keeps_a_fifth_letter_given_alone():
    from ttrl_bench.evaluation.extraction import ttrv_choice

    assert ttrv_choice("E.", ["1", "2", "3", "4", "5"]) == "E"


def test_choice_parser_option_of_the_mcq_task():
    from ttrl_bench.evaluation.tasks import MCQTask

    row = {"options": OPTIONS}
    assert MCQTask().parse("it is a guillotine", row) == "C"
    assert MCQTask(choice_parser="ttrv").parse("it is a guillotine", row) == "A"
    with pytest.raises(ValueError, match="evaluation.mcq.choice_parser"):
        MCQTask(choice_parser="llm")


@pytest.mark.parametrize("text", ["E. none of these", "E.", "(E) none", "The answer is E.", "**E**"])
def test_a_letter_beyond_the_options_is_unparsable(text):
    """Four options are A-D: "E" in any form the extraction reads is no answer (scored wrong)."""
    assert extract_choice(text, ["cat", "dog", "fox", "owl"]) is None
    assert extract_choice(text.replace("E", "D"), ["cat", "dog", "fox", "owl"]) == "D"


def test_short_answers_compare_numbers_with_a_relative_tolerance():
    assert short_answers_match("1,000", "1000")
    assert short_answers_match("1000000000001", "1000000000000")  # 1 in 1e12: within 1e-9 relative
    assert not short_answers_match("1.0000000015", "1")  # 1.5e-9 beyond 1e-9 (absolute below 1)
    assert not short_answers_match("3", "three")
    # a difference of exactly the tolerance, 1e-9 * max(1, |0|), is within it (the bound is inclusive)
    assert short_answers_match("0.000000001", "0")
    assert extract_short_answer(None) is None
    assert extract_short_answer("Answer: X.") == "X"
    assert ttrv_choice("\n:E/.\n", ["a", "b", "c", "d", "e"]) == "E"
