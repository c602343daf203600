"""datasets/readers/rows.py: the per-row readers.

Each test calls one reader directly with a hand-built row in the layout of the benchmark named in its docstring
(registry `evidence=` strings; the git mirrors of lmms-eval, MathVista, LogicVista, VisionReasoner) and the field
map the registry gives it; every expected value is worked out by hand in the docstring or a comment.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from ttrl_bench.datasets.readers import rows
from ttrl_bench.datasets.registry import REGISTRY


def _area(rle: dict) -> int:
    return int(mask_utils.area({"size": rle["size"], "counts": rle["counts"].encode()}))


# --- read_classification, read_choice_columns ------------------------------------------------------------------

def test_classification_label_given_as_a_class_name_is_kept():
    """A local copy whose label column holds the class name (a CSV / JSON copy, not a ClassLabel): the label is
    str(label) = "goldfish", never looked up in `classes`; an int label 0 is classes[0] = "tench"."""
    classes = ("tench", "goldfish")
    f = REGISTRY["food101"].fields  # {"image": "image", "label": "label"}
    assert rows.read_classification({"label": "goldfish"}, f, classes) == {"label": "goldfish", "classes": classes}
    assert rows.read_classification({"label": 0}, f, classes) == {"label": "tench", "classes": classes}


def test_choice_columns_without_a_keep_filter_reads_every_row():
    """SEED-Bench's columns (lmms-eval seedbench utils.py: question, choice_a..d, answer a letter) with a field map
    that has no `keep`: nothing is filtered; options are the four choice columns in order, answer "B" stays "B"."""
    f = {k: v for k, v in REGISTRY["seed-bench"].fields.items() if k != "keep"}
    row = {"question": "How many towels are in the image?", "choice_a": "One", "choice_b": "Two",
           "choice_c": "Three", "choice_d": "Four", "answer": "B", "data_type": "video"}
    assert rows.read_choice_columns(row, f, None) == {
        "question": "How many towels are in the image?", "options": ["One", "Two", "Three", "Four"], "answer": "B"}


# --- _options_in_question ------------------------------------------------------------------------------------

def test_letter_range_is_off_by_default():
    """LogicVista v1_9 (Yijia-Xiao/LogicVista data/dataset.json): "... Select answers from A-E". Called with the
    default (no letter range) there are no option lines nor inline "(A) x" options, so []; with letter_range
    the span A-E gives the five letters A, B, C, D, E."""
    question = "Which of the boxes comes next in the sequence? Select answers from A-E"
    assert rows._options_in_question(question) == []
    assert rows._options_in_question(question, True) == ["A", "B", "C", "D", "E"]


def test_two_option_lines_are_options():
    """RealWorldQA's layout (lmms-eval realworldqa utils.py: the question carries its option lines and the
    instruction): two lines "A. Yes" / "B. No" are 2 >= 2 options in order A, B -> ["Yes", "No"]."""
    question = ("Is the traffic light ahead green?\nA. Yes\nB. No\n"
                "Please answer directly with only the letter of the correct option and nothing else.")
    assert rows._options_in_question(question) == ["Yes", "No"]


def test_a_trailing_comma_is_stripped_from_each_option():
    """Option lines ending in a comma (hand-built in MathVerse's "A:x" layout): "Point W," -> "Point W" (the comma
    only, from the right; the X of "Point X" stays); the last line has no comma."""
    question = "Which point is the centre of the circle?\nChoices:\nA:Point W,\nB:Point X,\nC:Point Y"
    assert rows._options_in_question(question) == ["Point W", "Point X", "Point Y"]


def test_named_letters_must_start_at_a():
    """Letters named "B, C, or D" (a LogicVista-style list) are not options A.. in order: B != A, so []."""
    question = "Which of the figures B, C, or D is a rotation of figure A?"
    assert rows._options_in_question(question, True) == []


def test_a_span_of_two_letters_is_two_options():
    """LogicVista's span form ("Select from A-E", v1_8) with two letters: "A-B" -> ["A", "B"] (2 >= 2)."""
    assert rows._options_in_question("Which of the two figures is a reflection? Select from A-B", True) == ["A", "B"]


# --- read_options_in_text --------------------------------------------------------------------------------------

def test_a_blank_question_names_its_column():
    """MathVerse (field question -> column question_for_eval): a question of spaces only is empty ->
    ValueError "field 'question' (column 'question_for_eval') is empty"."""
    f = REGISTRY["mathverse"].fields
    with pytest.raises(ValueError, match=re.escape("field 'question' (column 'question_for_eval') is empty")):
        rows.read_options_in_text({"question_for_eval": "   ", "answer": "A"}, f, None)


def test_a_missing_answer_names_its_column():
    """CRPE (field answer -> column correct_option): correct_option None is empty -> ValueError
    "field 'answer' (column 'correct_option') is empty", not the text "None" read as an answer."""
    f = REGISTRY["crpe"].fields
    text = "What is the man doing with the horse?\nA. riding\nB. feeding\nC. washing\nD. leading"
    with pytest.raises(ValueError, match=re.escape("field 'answer' (column 'correct_option') is empty")):
        rows.read_options_in_text({"text": text, "correct_option": None}, f, None)


def test_without_letter_range_named_letters_are_not_options():
    """MathVerse's field map has no letter_range: a free-form question that names points "A to D" (hand-built)
    has no options -> free-form, the answer as written "40°"."""
    f = REGISTRY["mathverse"].fields
    question = "As shown in the figure, the points A to D lie on circle O. Find the angle ABC."
    assert rows.read_options_in_text({"question_for_eval": question, "answer": "40°"}, f, None) == {
        "question": question, "options": [], "answer": "40°"}


# --- read_yes_no, counting readers ------------------------------------------------------------------------------

def test_a_yes_no_answer_that_is_neither_is_quoted():
    """MME (lmms-eval mme utils.py: answer Yes/No): "Yes." lower-cased is "yes.", neither -> ValueError
    "MME answer must be yes or no, got 'Yes.'" (the raw value, repr'd)."""
    f = REGISTRY["mme"].fields
    with pytest.raises(ValueError, match=re.escape("MME answer must be yes or no, got 'Yes.'")):
        rows.read_yes_no({"question": "Is there a dog?", "answer": "Yes.", "category": "existence"}, f, None)


def test_countbench_question_answer_and_noun():
    """CountBenchQA (lmms-eval countbenchqa utils.py: question, number): "How many dogs are in the image?" with
    number 2 -> question as given, answer 2, query the noun between "how many " and " are": "dogs"."""
    f = REGISTRY["countbench"].fields
    row = {"question": "How many dogs are in the image?", "number": 2}
    assert rows.read_count_question(row, f, None) == {"question": "How many dogs are in the image?", "answer": 2,
                                                      "query": "dogs"}


def test_countbench_question_without_how_many_is_its_own_query():
    """A question that does not start "how many" (hand-built): no noun found, so the query is the question."""
    f = REGISTRY["countbench"].fields
    assert rows.read_count_question({"question": "Count the apples.", "number": 5}, f, None) == {
        "question": "Count the apples.", "answer": 5, "query": "Count the apples."}


def test_visionreasoner_count_row():
    """VisionReasoner's counting copies (evaluation/evaluation_count.py:56-64: image, text, image_id, ann_id,
    img_height, img_width, count): query = text "dogs", answer = count 3."""
    f = REGISTRY["vr-countbench"].fields
    row = {"text": "dogs", "count": 3, "image_id": "1", "ann_id": "1", "img_height": 48, "img_width": 64}
    assert rows.read_count_text(row, f, None) == {"query": "dogs", "answer": 3}


def test_pixmo_points_with_unequal_x_and_y_are_refused():
    """PixMo-Count's points (card: `sequence: {x, y}`, a dict of lists): x has 2 values, y 1 -> no point can be
    paired for the second x, so a ValueError (zip strict), not one point silently."""
    f = REGISTRY["pixmo-count"].fields
    with pytest.raises(ValueError):
        rows.read_count_points({"label": "dog", "count": 2, "points": {"x": [10.0, 20.0], "y": [5.0]}}, f, None)


# --- math readers: _math_gold, _math_question, read_math_options_in_text ----------------------------------------

def test_a_missing_math_answer_is_empty_not_the_text_none():
    """Geometry3k (EasyR1 layout: problem, answer): answer None -> ValueError "field 'answer' (column 'answer')
    is empty"."""
    f = REGISTRY["geometry3k"].fields
    with pytest.raises(ValueError, match=re.escape("field 'answer' (column 'answer') is empty")):
        rows.read_math({"problem": "<image>Find x.", "answer": None}, f, None)


def test_a_letter_format_answer_that_is_no_letter_is_refused():
    """MathVision (options a list, answer a letter; no answer_format): options "1".."5" and answer "3": not a
    letter, and option text is only accepted for answer_format "text" -> ValueError, exactly
    "field 'answer' (column 'answer'): '3' is no option letter (A-E)" (5 options: A-E, no "nor" clause)."""
    f = REGISTRY["mathvision-math"].fields
    row = {"question": "Which number is missing?", "options": ["1", "2", "3", "4", "5"], "answer": "3"}
    with pytest.raises(ValueError) as err:
        rows.read_math(row, f, None)
    assert str(err.value) == "field 'answer' (column 'answer'): '3' is no option letter (A-E)"


def test_a_text_format_answer_outside_the_choices_is_refused():
    """MathVista testmini pid 3 (lupantech/MathVista data/testmini.json: choices 135°, 140°, 145°, 150°; answer
    the option text) with the answer changed to "155°", no choice: ValueError, exactly
    "field 'answer' (column 'answer'): '155°' is no option letter (A-D) nor one of the options"."""
    f = REGISTRY["mathvista-math"].fields
    row = {"question": "△ABC的两内角平分线OB、OC相交于点O，若∠A＝110°，则∠BOC＝（）",
           "choices": ["135°", "140°", "145°", "150°"], "answer": "155°"}
    with pytest.raises(ValueError) as err:
        rows.read_math(row, f, None)
    assert str(err.value) == "field 'answer' (column 'answer'): '155°' is no option letter (A-D) nor one of the options"


def test_a_math_question_that_is_no_text_names_its_type():
    """Geometry3k (field question -> column problem) with a list where the text should be: ValueError
    "field 'question' (column 'problem') is list, not text"."""
    f = REGISTRY["geometry3k"].fields
    with pytest.raises(ValueError, match=re.escape("field 'question' (column 'problem') is list, not text")):
        rows.read_math({"problem": ["Find x."], "answer": "3"}, f, None)


def test_a_math_question_of_an_image_tag_only_is_empty():
    """MathVerse-math: question_for_eval "<image>" is the tag alone; dropping it leaves "" -> ValueError
    "field 'question' (column 'question_for_eval') is empty"."""
    f = REGISTRY["mathverse-math"].fields
    with pytest.raises(ValueError, match=re.escape("field 'question' (column 'question_for_eval') is empty")):
        rows.read_math_options_in_text({"question_for_eval": "<image>", "answer": "A"}, f, None)


def test_math_without_letter_range_named_letters_are_not_options():
    """MathVerse-math's field map has no letter_range: "the points A to D lie on circle O" names letters but the
    question is free-form -> options [], answer "40°" as written, list_options False."""
    f = REGISTRY["mathverse-math"].fields
    question = "As shown in the figure, the points A to D lie on circle O. Find the angle ABC."
    assert rows.read_math_options_in_text({"question_for_eval": question, "answer": "40°"}, f, None) == {
        "question": question, "options": [], "answer": "40°", "list_options": False}


# --- read_refer ----------------------------------------------------------------------------------------------

def test_refer_reads_several_polygons_and_a_single_expression():
    """RefCOCO's COCO segmentation as a list of polygons (COCO's own form; lmms-lab's card has one flat polygon):
    rectangles (0,0)-(4,2) and (10,10)-(14,12) on a 16x16 image cover pixels x 0..3, y 0..1 and x 10..13,
    y 10..11 (pycocotools: a rectangle with integer corners covers [x0, x1) x [y0, y1)), 4*2 + 4*2 = 16 pixels.
    The expression column as one string "two boxes" is one expression (one sample), not one per character.
    bbox [0, 0, 14, 12] (COCO x, y, w, h) -> box [0, 0, 14, 12], point [7, 6]."""
    f = REGISTRY["refcoco"].fields
    row = {"answer": "two boxes", "bbox": [0, 0, 14, 12],
           "segmentation": [[0, 0, 4, 0, 4, 2, 0, 2], [10, 10, 14, 10, 14, 12, 10, 12]]}
    (sample,) = rows.read_refer(row, f, None, (16, 16))
    assert (sample["query"], sample["boxes"], sample["points"]) == ("two boxes", [[0, 0, 14, 12]], [[7, 6]])
    assert _area(sample["mask"]) == 16 and sample["mask"]["size"] == [16, 16]


# --- read_mask -----------------------------------------------------------------------------------------------

def test_every_nonzero_mask_value_is_foreground():
    """A mask given as numbers rather than bools (a resampled soft mask): the reader reads it as bool, so the
    0.5 pixels at rows 1..2, columns 2..4 of a 4x6 mask are foreground: box [2, 1, 5, 3], and the RLE mask has
    the same 2*3 = 6 pixels."""
    mask = np.zeros((4, 6))
    mask[1:3, 2:5] = 0.5
    (sample,) = rows.read_mask({"text": "the cup", "mask": mask.tolist()}, REGISTRY["reasonseg"].fields, None, (6, 4))
    assert sample["boxes"] == [[2, 1, 5, 3]]
    assert _area(sample["mask"]) == 6


def test_a_mask_of_another_size_names_both_shapes():
    """Seg-Zero's ReasonSeg (mask a HxW bool list): a 48x63 mask on a 64x48 image -> ValueError
    "mask shape (48, 63) does not match the image (48, 64)" (image size is (width, height))."""
    row = {"text": "the chair", "mask": np.zeros((48, 63), dtype=bool).tolist()}
    with pytest.raises(ValueError, match=re.escape("mask shape (48, 63) does not match the image (48, 64)")):
        rows.read_mask(row, REGISTRY["reasonseg"].fields, None, (64, 48))


def test_visionreasoner_bbox_is_the_box_and_gives_the_point():
    """VisionReasoner's RefCOCO copies (evaluation_segmentation.py:92-101; bbox [x1, y1, x2, y2] by compute_bbox_iou):
    the row's bbox [2, 4, 14, 16] is the box, not the mask's extent [3, 5, 13, 15]; the point is its centre
    ((2 + 14) / 2, (4 + 16) / 2) = (8, 10); the mask keeps its 10*10 = 100 pixels."""
    mask = np.zeros((48, 64), dtype=bool)
    mask[5:15, 3:13] = True
    f = REGISTRY["vr-refcoco-testA"].fields
    row = {"text": "the left man", "mask": mask.tolist(), "bbox": [2, 4, 14, 16], "ann_id": "10"}
    (sample,) = rows.read_mask(row, f, None, (64, 48))
    assert sample["query"] == "the left man"
    assert sample["boxes"] == [[2.0, 4.0, 14.0, 16.0]]
    assert sample["points"] == [[8.0, 10.0]]
    assert _area(sample["mask"]) == 100


def test_a_bbox_of_two_numbers_names_its_column():
    """A VisionReasoner row whose bbox has 2 numbers -> ValueError "field 'bbox' (column 'bbox') has 2 numbers,
    not 4"."""
    row = {"text": "cup", "mask": np.ones((2, 2), dtype=bool).tolist(), "bbox": [1, 1]}
    with pytest.raises(ValueError, match=re.escape("field 'bbox' (column 'bbox') has 2 numbers, not 4")):
        rows.read_mask(row, REGISTRY["vr-refcoco-testA"].fields, None, (2, 2))


# LogicVista (Yijia-Xiao/LogicVista data/dataset.json @e5795f1): questions whose options are in the text but were
# read as free-form with a letter gold before (found by the helper reading these survivors; 9 of 448 rows).
LOGICVISTA_V1_378 = "Which of the 4 figures presented (A, B, C, D) is a rotation of the first?"
LOGICVISTA_V1_422 = ("A series of beans are connected as shown with string. They are all supported at the centre point. "
                     "How far do you need to move A in order to raise B by 12 cm? Select from (A), (B), (C), (D), (E). "
                     "(A) 4cm, (B) 6cm, (C) 8cm, (D) 9cm, (E) 12cm.")


def test_logicvista_letters_listed_without_or_are_the_options():
    """v1_378 (gold B) and six rows like it name "(A, B, C, D)" with no "or"/"and": four letter options A-D,
    the gold B. Two letters "A, B" alone stay no list (three at least)."""
    f = REGISTRY["logicvista"].fields
    assert rows.read_options_in_text({"question": LOGICVISTA_V1_378, "answer": "B"}, f, None) == {
        "question": LOGICVISTA_V1_378, "options": ["A", "B", "C", "D"], "answer": "B"}
    assert rows._options_in_question("Compare A, B with the rest.", letter_range=True) == []


def test_logicvista_options_after_a_list_of_their_letters_are_the_last_run_from_a():
    """v1_422 (gold E) first lists "(A), (B), (C), (D), (E)", then the options "(A) 4cm, ... (E) 12cm.": the
    options are the run that starts at the last (A): 4cm, 6cm, 8cm, 9cm, 12cm. (the question's final period
    stays on the last one); gold E."""
    f = REGISTRY["logicvista"].fields
    sample = rows.read_options_in_text({"question": LOGICVISTA_V1_422, "answer": "E"}, f, None)
    assert (sample["options"], sample["answer"]) == (["4cm", "6cm", "8cm", "9cm", "12cm."], "E")


def test_a_text_format_answer_that_looks_like_a_letter_is_read_as_option_text():
    """answer_format "text" (MathVista) with options ["C", "A"] and answer "A": the answer is the text of option
    2, so the gold letter is B, not the letter A that the answer happens to spell."""
    assert rows._letter_answer("A", ["C", "A"], "text") == "B"


def test_an_index_answer_must_be_below_the_number_of_options():
    """answer_format "index" (AI2D: 0-based): with 4 options, "3" is D and "4" names no option."""
    assert rows._letter_answer("3", ["w", "x", "y", "z"], "index") == "D"
    with pytest.raises(ValueError, match=re.escape("answer '4' is not a valid index for 4 options")):
        rows._letter_answer("4", ["w", "x", "y", "z"], "index")


def test_a_mathverse_answer_given_as_option_text_is_that_options_letter():
    """Issue 53 item 7. MathVerse testmini's option-text golds, as the TTRV authors' mathverse_20/test.json keeps
    34 of them ("False" under "A. True / B. False", "053 ^\\circ T" under "A. 053 ^\\circ T ..."): the one option
    whose text the answer is gives its letter (B, A), in the MCQ and the math reader; a letter stays a letter even
    where an option's text is a letter; an answer two options share, or none, stays a bad row."""
    f, fm = REGISTRY["mathverse"].fields, REGISTRY["mathverse-math"].fields
    true_false = "True or false: the distance is the opposite side.\nChoice:\nA. True\nB. False"
    bearing = "Find the true bearing.\nChoice:\nA. 053 ^\\circ T\nB. 082 ^\\circ T\nC. 045 ^\\circ T\nD. 037 ^\\circ T"
    for question, answer, letter in [(true_false, "False", "B"), (bearing, "053 ^\\circ T", "A")]:
        row = {"question_for_eval": question, "answer": answer}
        assert rows.read_options_in_text(row, f, None)["answer"] == letter
        assert rows.read_math_options_in_text(row, fm, None)["answer"] == letter
    letters_as_text = {"question_for_eval": "Which?\nA. B\nB. A", "answer": "A"}
    assert rows.read_options_in_text(letters_as_text, f, None)["answer"] == "A"
    for answer in ("7", "x"):  # "x" two options' text, "7" none
        with pytest.raises(ValueError, match=f"answer '{answer}' is no option letter nor the text of exactly one of the 3"):
            rows.read_options_in_text({"question_for_eval": "Which?\nA. x\nB. x\nC. y", "answer": answer}, f, None)
