"""Answer extraction from free-form model output (SPEC.md "Letter extraction must be robust").

Reasoning-tuned VLMs wrap their answer: `answer_region` first narrows the output to the part that
holds the final answer, in this order:
  - the content of the last <answer>...</answer> ("<think>B or C?</think><answer>C</answer>" -> "C")
  - else the text after the last </think> ("<think>not A.</think> The answer is C." -> "The answer is C.")
  - else the whole output
and inside it the last \\boxed{...} ("so \\boxed{C}." and "\\boxed{\\text{C}}" -> "C") when there is one.

`extract_choice` then accepts, in this order of precedence:
  1. the region is a letter, optionally wrapped in markup: "B", "**B**", "(B)", "B.", "B)", "*(B)*"
  2. an explicit statement: (a) an answer statement, the last one wins: "The answer is C.",
     "Answer: (C)", "**Answer:** C", "Final answer: C", "the correct answer is **(C)** guillotine";
     else (b) one letter named as an option or choice: "I pick option B", "the correct option is **A**"
  3. a leading option: "B. text" / "B) text" / "(B) text" / "B: text"
  4. exactly one option's text appears (case-insensitive, whole words): "It looks like a guillotine."
A letter that is not among the options, several different letters at one level, or nothing above
-> None (counted as a parse failure and scored wrong).

TTRV's own parser, `authors_answer` (config evaluation.mcq.choice_parser: authors, the `authors` protocol),
reads the article in "a dog" as option A and keeps an unreadable output's text as its answer, so it is not
the default: TTRV's prompts ask for the letter alone, and on such outputs the two agree. `ttrv_choice`
(choice_parser: ttrv) is the same reading with unreadable outputs as parse failures.

`extract_short_answer` reads free-form answers (questions without options): in the answer region, a
\\boxed{...} value, else what follows "answer is" / "Answer:", else the whole region.
"""

from __future__ import annotations

import re

from ..datasets.preprocessing import OPTION_LETTERS
from ..rewards.tags import tag_spans

_MARKUP = re.compile(r"[*_`\s]+")
_ALONE = re.compile(r"^[\(\[]?([A-Z])[\)\]\.:]?$")
# Keywords case-insensitive, letter upper-case only: "the answer is a dog" names no option.
_ANSWER_STATED = re.compile(r"(?i:answer)(?:\s+(?i:is))?[\s*_:\-]*[\(\[]?[*_]*([A-Z])\b")
_OPTION_STATED = re.compile(r"(?i:option|choice)(?:\s+(?i:is))?[\s*_:\-]*[\(\[]?[*_]*([A-Z])\b")
_LEADING = re.compile(r"^[\(\[]?([A-Z])[\)\]\.:]\s")
_TEXT_MACRO = re.compile(r"\\text(?:bf)?\{([^{}]*)\}")
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def answer_region(text: str) -> str:
    """The part of `text` that holds the final answer (see the module docstring)."""
    tagged = [t for t in (text[a:b] for a, b in tag_spans(text)) if t.strip()]
    if tagged:
        region = tagged[-1]
    elif "</think>" in text and text.rsplit("</think>", 1)[1].strip():
        region = text.rsplit("</think>", 1)[1]
    else:
        region = text
    boxed = BOXED.findall(_TEXT_MACRO.sub(r"\1", region))
    return boxed[-1] if boxed else region


def extract_choice(text: str | None, options: list[str]) -> str | None:
    """Option letter chosen in `text`, or None when it cannot be read unambiguously."""
    if not text or not text.strip():
        return None
    valid = OPTION_LETTERS[: len(options)]
    region = answer_region(text).strip()

    def checked(letter: str) -> str | None:
        return letter if letter in valid else None

    if match := _ALONE.match(_MARKUP.sub("", region)):
        return checked(match.group(1))
    if stated := _ANSWER_STATED.findall(region):
        return checked(stated[-1])
    if len(named := set(_OPTION_STATED.findall(region))) == 1:
        return checked(named.pop())
    if match := _LEADING.match(region.lstrip("*_` ")):
        return checked(match.group(1))
    lowered = region.lower()
    found = [
        letter
        for letter, option in zip(valid, options)
        if re.search(rf"(?<!\w){re.escape(option.lower())}(?!\w)", lowered)
    ]
    return found[0] if len(found) == 1 else None


_TTRV_LETTER = re.compile(r"\b(A|B|C|D)\b")


def authors_answer(text: str | None) -> str:
    """The TTRV authors' answer to an MCQ output, as their votes and their evaluation read it
    (Akshit21112002/TTRV verl/utils/reward_score/ttrl/qwen/qwen_math_parser.py `choice_answer_clean_gpqa`,
    reached through auto_extract's task "gpqa"; auto_extract turns None into ""): the output stripped of
    newlines, a final "." and "/", blanks and a leading ":"; then the last standalone A-D of its upper-cased
    text, else the stripped text itself (so "it is a dog" -> "A", "." -> "", an unreadable output -> its text:
    two different such outputs are two different answers)."""
    cleaned = (text or "").strip("\n").rstrip(".").rstrip("/").strip(" ").lstrip(":")
    letters = _TTRV_LETTER.findall(cleaned.upper())
    answer = letters[-1] if letters else cleaned.strip().strip(".")
    return answer.rstrip(".").rstrip("/")


def authors_correct(answer: str | None, gold: str) -> bool:
    """The authors' grading of an extracted answer (qwen_eval.py `qwen_reward_fn_gpqa`: extract again, then
    grader.py `grade_answer`): a letter equals a letter; an option-text gold (MathVerse's 34) compares by
    normal form (math_answers.normalize_math_answer, our Hendrycks-style reading of grade_answer)."""
    from .math_answers import normalize_math_answer

    again = authors_answer(answer)
    return again == str(gold).strip() or (bool(again) and normalize_math_answer(again) == normalize_math_answer(str(gold)))


def ttrv_choice(text: str | None, options: list[str]) -> str | None:
    """`authors_answer` where it is a valid option letter, else None (an unparsable output: config
    evaluation.mcq.choice_parser ttrv counts it as a parse failure where the authors keep its text)."""
    if not text:
        return None
    answer = authors_answer(text)
    return answer if answer and answer in OPTION_LETTERS[: len(options)] else None


_ANSWER_IS = re.compile(r"(?i:answer)\s*(?i:is)?\s*[:\-]?\s*(.+)")


def extract_short_answer(text: str | None) -> str | None:
    """The short free-form answer in `text` (stripped of markup and a final period), or None."""
    if not text or not text.strip():
        return None
    region = answer_region(text)
    if match := _ANSWER_IS.search(region):
        region = match.group(1).splitlines()[0]
    answer = region.strip().strip("*_`$ ").rstrip(".").strip()
    return answer or None


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def short_answers_match(predicted: str | None, gold: str) -> bool:
    """Numbers compare as numbers ("3.50" == "3.5"), anything else case-insensitively."""
    if predicted is None:
        return False
    p, g = _number(predicted), _number(str(gold))
    if p is not None and g is not None:
        return abs(p - g) <= 1e-9 * max(1.0, abs(g))
    return predicted.strip().lower() == str(gold).strip().lower()
