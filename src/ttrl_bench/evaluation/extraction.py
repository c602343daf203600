"""Answer extraction from free-form model output (SPEC.md "Letter extraction must be robust").

`extract_choice` accepts, in this order of precedence:
  1. the whole output is a letter, optionally wrapped in markup: "B", "**B**", "(B)", "B.", "B)"
  2. an explicit statement: "answer is B", "Answer: B", "answer: (B)", "option B"
  3. a leading option: "B. text" / "B) text" / "(B) text"
  4. exactly one option's text appears in the output (case-insensitive, whole words)
A letter that is not among the options, several different letters, or nothing above -> None
(counted as a parse failure and scored wrong).

`extract_short_answer` reads free-form answers (questions without options, Capture's count):
a \\boxed{...} value, else what follows "answer is" / "Answer:", else the whole output.
"""

from __future__ import annotations

import re

from ..datasets.preprocessing import OPTION_LETTERS

_MARKUP = re.compile(r"[*_`\s]+")
_ALONE = re.compile(r"^[\(\[]?([A-Z])[\)\]\.:]?$")
# Keyword case-insensitive, letter upper-case only: "the answer is a dog" names no option.
_STATED = re.compile(r"(?i:answer|option|choice)\s*(?i:is)?\s*[:\-]?\s*[\(\[]?\**([A-Z])\b")
_LEADING = re.compile(r"^[\(\[]?([A-Z])[\)\]\.:]\s")


def extract_choice(text: str | None, options: list[str]) -> str | None:
    """Option letter chosen in `text`, or None when it cannot be read unambiguously."""
    if not text:
        return None
    valid = OPTION_LETTERS[: len(options)]
    stripped = text.strip()
    bare = _MARKUP.sub("", stripped)
    if match := _ALONE.match(bare):
        return match.group(1) if match.group(1) in valid else None
    stated = {m.upper() for m in _STATED.findall(stripped)}
    if len(stated) == 1:
        letter = stated.pop()
        return letter if letter in valid else None
    if match := _LEADING.match(stripped.lstrip("*_` ")):
        return match.group(1) if match.group(1) in valid else None
    lowered = stripped.lower()
    found = [
        letter
        for letter, option in zip(valid, options)
        if re.search(rf"(?<!\w){re.escape(option.lower())}(?!\w)", lowered)
    ]
    return found[0] if len(found) == 1 else None


BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_ANSWER_IS = re.compile(r"(?i:answer)\s*(?i:is)?\s*[:\-]?\s*(.+)")


def extract_short_answer(text: str | None) -> str | None:
    """The short free-form answer in `text` (stripped of markup and a final period), or None."""
    if not text or not text.strip():
        return None
    boxed = BOXED.findall(text)
    if boxed:
        answer = boxed[-1]
    elif match := _ANSWER_IS.search(text):
        answer = match.group(1).splitlines()[0]
    else:
        answer = text
    answer = answer.strip().strip("*_`$ ").rstrip(".").strip()
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
