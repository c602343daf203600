"""Row readers: one row of a Hugging Face dataset (Hub or local copy) -> the fields preprocessing
needs for its task (question, options, gold answer, query, boxes, mask, ...), selected by the
registry entry's `reader` (`ROW_READERS`; `GEOMETRY_READERS` also take the image size).
"""

from __future__ import annotations

import re

import numpy as np

from ..preprocessing import CAPTURE_QUESTION, OPTION_LETTERS


# Row readers: one source row -> the fields preprocessing needs (task-specific), or None to skip
# (skipped rows are counted under their reason). `f` is the entry's field mapping; its keys in
# NON_COLUMN_FIELDS are settings, not columns.
NON_COLUMN_FIELDS = ("answer_format", "letter_range")
_OPTION_LINE = re.compile(r"^\s*\(?([A-J])\)?\s*[.:)]\s*(.+?)\s*$", re.MULTILINE)


def _letter_answer(answer, options: list[str], answer_format: str = "letter") -> str:
    """Gold as a letter, from the source's answer format (registry field `answer_format`; a digit
    is ambiguous between an index and an option's text, so it is never guessed): "letter" ("B",
    "(B)"), "index" ("1": AI2D) or "text" (the option itself: MathVista)."""
    text = str(answer).strip()
    if answer_format == "letter" and re.fullmatch(r"\(?[A-J]\)?\.?", text) and text.strip("().") in OPTION_LETTERS[: len(options)]:
        return text.strip("().")
    if answer_format == "index" and text.isdigit() and int(text) < len(options):
        return OPTION_LETTERS[int(text)]
    if answer_format == "text" and text in options:
        return OPTION_LETTERS[options.index(text)]
    raise ValueError(f"answer {answer!r} is not a valid {answer_format} for {len(options)} options")


def _option_text_letter(answer: str, options: list[str]) -> str | None:
    """The letter of the one option whose text is `answer` (MathVerse's 34 option-text golds: "False" of
    "A. True / B. False" -> "B", as the TTRV authors' items keep and grade them), None when no option or
    several match. Only for options read from the question text, which never carries an index."""
    matches = [i for i, option in enumerate(options) if option.strip() == answer]
    return OPTION_LETTERS[matches[0]] if len(matches) == 1 else None


def read_classification(row, f, classes):
    label = row[f["label"]]
    return {"label": classes[label] if isinstance(label, int) else str(label), "classes": classes}


def read_options_list(row, f, classes):
    options = [str(o) for o in (row[f["options"]] or [])]
    if not options:  # free-form question (MathVista "free_form", MathVision without choices)
        return {"question": row[f["question"]], "options": [], "answer": str(row[f["answer"]]).strip()}
    return {"question": row[f["question"]], "options": options,
            "answer": _letter_answer(row[f["answer"]], options, f.get("answer_format", "letter"))}


def read_choice_columns(row, f, classes):
    column, wanted = f.get("keep", (None, None))
    if column and row[column] != wanted:
        return None
    options = [str(row[c]) for c in f["choices"]]
    return {"question": row[f["question"]], "options": options, "answer": _letter_answer(row[f["answer"]], options)}


_INLINE_OPTION = re.compile(r"\(([A-J])\)\s*(.+?)\s*(?=,?\s*\([A-J]\)|$)", re.DOTALL)
# the letters a question names when its options are drawn in the image (LogicVista): "(A, B, C,
# or D)", "A, B, C and D", "(A, B, C, D)" (v1_378), "(A-D)", "from A-E", "A to E"
_LETTER_LIST = re.compile(r"\b([A-J])((?:\s*,\s*[A-J]\b)+)\s*,?\s*(?:(?:or|and)\s+)?([A-J])\b")
_LETTER_SPAN = re.compile(r"\b([A-J])\s*(?:-|–|to)\s*([A-J])\b")


def _options_in_question(question: str, letter_range: bool = False) -> list[str]:
    """The options a question text carries: lines "A. x" / "A: x" / "(A) x" (MathVerse,
    RealWorldQA, CRPE), else inline "(A) x (B) y" (LogicVista); with `letter_range` (LogicVista,
    whose options are mostly in the image) else the letters it names, as the options themselves.
    [] when none (free-form)."""
    for found in (_OPTION_LINE.findall(question), _INLINE_OPTION.findall(question)):
        # the options are the last run from (A): "Select from (A), (B), (C). ... (A) 4cm, (B) 6cm" (LogicVista v1_422)
        found = found[max((i for i, (letter, _) in enumerate(found) if letter == "A"), default=0):]
        letters = [letter for letter, _ in found]
        if len(found) >= 2 and letters == list(OPTION_LETTERS[: len(letters)]):
            return [text.strip().rstrip(",").strip() for _, text in found]
    if letter_range:
        if match := _LETTER_LIST.search(question):
            letters = [match.group(1), *re.findall(r"[A-J]", match.group(2)), match.group(3)]
        elif match := _LETTER_SPAN.search(question):
            letters = [chr(c) for c in range(ord(match.group(1)), ord(match.group(2)) + 1)]
        else:
            letters = []
        if len(letters) >= 2 and letters == list(OPTION_LETTERS[: len(letters)]):
            return letters
    return []


def read_options_in_text(row, f, classes):
    """MathVerse, RealWorldQA, LogicVista: the question carries its options (see _options_in_question)."""
    question = row[f["question"]]
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"field 'question' (column {f['question']!r}) is empty")
    options = _options_in_question(question, f.get("letter_range", False))
    answer = "" if row[f["answer"]] is None else str(row[f["answer"]]).strip()
    if not answer:
        raise ValueError(f"field 'answer' (column {f['answer']!r}) is empty")
    if re.fullmatch(r"[A-J](\s*,\s*[A-J])+", answer):
        return None  # several correct letters (LogicVista): a one-letter answer cannot score it
    if not options:
        return {"question": question, "options": [], "answer": answer}  # free-form
    try:
        letter = _letter_answer(answer, options)
    except ValueError:  # a letter first; else the one option it names (MathVerse), else a bad row
        letter = _option_text_letter(answer, options)
        if letter is None:
            raise ValueError(f"answer {answer!r} is no option letter nor the text of exactly one of the "
                             f"{len(options)} options") from None
    return {"question": question, "options": options, "answer": letter}


def read_yes_no(row, f, classes):
    """MME (TTRV Appendix A): yes/no -> "A. No / B. Yes"."""
    answer = str(row[f["answer"]]).strip().lower()
    if answer not in ("yes", "no"):
        raise ValueError(f"MME answer must be yes or no, got {row[f['answer']]!r}")
    return {"question": row[f["question"]], "options": ["No", "Yes"], "answer": "A" if answer == "no" else "B",
            "category": row[f["category"]]}  # for MME's official score (evaluation.metrics.mme_score)


def read_capture(row, f, classes):
    """CAPTURe (real split): the count is `ground_truth`, the question TTRV's template."""
    return {"question": CAPTURE_QUESTION.format(object=row[f["object"]]), "answer": int(row[f["answer"]])}


def read_count_question(row, f, classes):
    """CountBench: a question ("How many dogs are in the image?") and a number; the query is the noun."""
    question = row[f["question"]]
    noun = re.search(r"how many (.+?)(?: are| is| can| do|\?|$)", question, re.IGNORECASE)
    return {"question": question, "answer": int(row[f["answer"]]), "query": noun.group(1) if noun else question}


def read_count_text(row, f, classes):
    """VisionReasoner's counting copies: the query as its `text` column gives it and the `count`
    (evaluation/evaluation_count.py:56-64); no points."""
    return {"query": row[f["query"]], "answer": int(row[f["count"]])}


def read_count_points(row, f, classes):
    """PixMo-Count: an object label, a count and one point per object (none in the eval splits' rows)."""
    points = row[f["points"]] or []
    if isinstance(points, dict):  # the card's `sequence: [x, y]`: `datasets` loads a dict of lists
        points = [{"x": x, "y": y} for x, y in zip(points.get("x") or [], points.get("y") or [], strict=True)]
    points = [[float(p["x"]), float(p["y"])] for p in points]
    return {"query": row[f["query"]], "answer": int(row[f["count"]]), "points": points}


_IMAGE_TAG = re.compile(r"<image\d*>")
_ANSWER_TAGS = re.compile(r"^\s*<answer>(.*?)</answer>\s*$", re.DOTALL)
_LETTERS_ANSWER = re.compile(r"^\(?([A-J])\)?\.?$|^[A-J](?:\s*,\s*[A-J])+$")


def _math_gold(row, f, options: list[str], text_options: bool = False) -> str:
    """The gold of a math row: the answer as written (free-form), or its option letter(s), sorted
    and comma-joined when several are correct (LogicVista "A, C" -> "A,C"); with `text_options` (options read
    from the question) the letter of the one option whose text the answer is (`_option_text_letter`)."""
    value = row[f["answer"]]
    answer = "" if value is None else str(value).strip()
    if match := _ANSWER_TAGS.match(answer):  # R1-V's GeoQA: "<answer> 145° </answer>"
        answer = match.group(1).strip()
    if not answer:
        raise ValueError(f"field 'answer' (column {f['answer']!r}) is empty")
    if not options:
        return answer
    if _LETTERS_ANSWER.match(answer):
        letters = sorted(set(re.findall(r"[A-J]", answer)))
        if all(letter in OPTION_LETTERS[: len(options)] for letter in letters):
            return ",".join(letters)
    if f.get("answer_format") == "text" and answer in options:
        return OPTION_LETTERS[options.index(answer)]
    if text_options and (letter := _option_text_letter(answer, options)):
        return letter
    raise ValueError(f"field 'answer' (column {f['answer']!r}): {answer!r} is no option letter "
                     f"(A-{OPTION_LETTERS[len(options) - 1]})" + (" nor one of the options" if f.get("answer_format") == "text" else ""))


def _math_question(row, f) -> str:
    question = row[f["question"]]
    if not isinstance(question, str):
        raise ValueError(f"field 'question' (column {f['question']!r}) is {type(question).__name__}, not text")
    # ECHO's save_as_json.py drops "<image1>" tags; EasyR1's "<image>" is the image itself, which
    # the chat template places before the text
    return _IMAGE_TAG.sub("", question).strip()


def read_math(row, f, classes):
    """ECHO's sets with the options in a list column (MathVision `options`, MathVista `choices`) or
    none (Geometry3k, GeoQA, free-form questions): the prompt lists the choices."""
    options = [str(o) for o in (row[f["options"]] or [])] if "options" in f else []
    return {"question": _math_question(row, f), "options": options, "answer": _math_gold(row, f, options),
            "list_options": True}


def read_math_options_in_text(row, f, classes):
    """ECHO's sets whose question already carries the options (MathVerse `question_for_eval`,
    LogicVista; see _options_in_question); without them the question is free-form."""
    question = _math_question(row, f)
    if not question:
        raise ValueError(f"field 'question' (column {f['question']!r}) is empty")
    options = _options_in_question(question, f.get("letter_range", False))
    return {"question": question, "options": options, "answer": _math_gold(row, f, options, text_options=True),
            "list_options": False}


def _rle(mask):
    from pycocotools import mask as mask_utils

    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode()}


def _box_of(mask) -> list[int]:
    ys, xs = np.nonzero(mask)
    return [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]


def read_refer(row, f, classes, size):
    """RefCOCO(+/g) in lmms-lab's layout: COCO box [x, y, w, h] and polygon(s); one sample per
    referring expression. Masks are COCO RLE (pycocotools), in original pixels."""
    from pycocotools import mask as mask_utils

    width, height = size
    x, y, w, h = (float(v) for v in row[f["bbox"]])
    polygons = row[f["segmentation"]]
    polygons = [polygons] if polygons and not isinstance(polygons[0], list) else polygons
    mask = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects([list(map(float, p)) for p in polygons],
                                                                     height, width)))
    expressions = row[f["expressions"]]
    expressions = [expressions] if isinstance(expressions, str) else list(expressions)
    box = [x, y, x + w, y + h]
    return [{"query": e, "boxes": [box], "points": [[x + w / 2, y + h / 2]], "mask": _rle(mask)} for e in expressions]


def read_mask(row, f, classes, size):
    """ReasonSeg (Seg-Zero's layout): a query and a binary mask; the box is the mask's extent, or the
    row's `bbox` where the entry maps one (VisionReasoner's RefCOCO copies: [x1, y1, x2, y2], as its
    evaluation_segmentation.py `compute_bbox_iou` reads it)."""
    mask = np.asarray(row[f["mask"]], dtype=bool)
    if mask.shape != (size[1], size[0]):
        raise ValueError(f"mask shape {mask.shape} does not match the image ({size[1]}, {size[0]})")
    box = [float(v) for v in row[f["bbox"]]] if "bbox" in f else _box_of(mask)
    if len(box) != 4:
        raise ValueError(f"field 'bbox' (column {f['bbox']!r}) has {len(box)} numbers, not 4")
    return [{"query": row[f["query"]], "boxes": [box], "points": [[(box[0] + box[2]) / 2, (box[1] + box[3]) / 2]],
             "mask": _rle(mask)}]


ROW_READERS = {
    "classification": read_classification,
    "options_list": read_options_list,
    "choice_columns": read_choice_columns,
    "options_in_text": read_options_in_text,
    "yes_no": read_yes_no,
    "count_question": read_count_question,
    "capture": read_capture,
    "count_points": read_count_points,
    "count_text": read_count_text,
    "math": read_math,
    "math_options_in_text": read_math_options_in_text,
}
GEOMETRY_READERS = {"refer": read_refer, "mask": read_mask}  # these need the image size
