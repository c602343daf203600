"""Answer extraction from free-form model output (SPEC.md "Letter extraction must be robust").

`extract_choice` accepts, in this order of precedence:
  1. the whole output is a letter, optionally wrapped in markup: "B", "**B**", "(B)", "B.", "B)"
  2. an explicit statement: "answer is B", "Answer: B", "answer: (B)", "option B"
  3. a leading option: "B. text" / "B) text" / "(B) text"
  4. exactly one option's text appears in the output (case-insensitive, whole words)
A letter that is not among the options, several different letters, or nothing above -> None
(counted as a parse failure and scored wrong).
"""

from __future__ import annotations

import re

from ..datasets.preprocessing import LETTERS

_MARKUP = re.compile(r"[*_`\s]+")
_ALONE = re.compile(r"^[\(\[]?([A-Z])[\)\]\.:]?$")
# Keyword case-insensitive, letter upper-case only: "the answer is a dog" names no option.
_STATED = re.compile(r"(?i:answer|option|choice)\s*(?i:is)?\s*[:\-]?\s*[\(\[]?\**([A-Z])\b")
_LEADING = re.compile(r"^[\(\[]?([A-Z])[\)\]\.:]\s")


def extract_choice(text: str | None, options: list[str]) -> str | None:
    """Option letter chosen in `text`, or None when it cannot be read unambiguously."""
    if not text:
        return None
    valid = LETTERS[: len(options)]
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
