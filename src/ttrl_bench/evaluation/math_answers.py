"""Math answers (ECHO: Entropy-Confidence Hybrid Optimization for Test-Time Reinforcement Learning, arXiv
2602.02150, Section 4 and Appendix A.3): where the final answer is in a completion, one normal form per
answer so that the majority vote pools equal answers and pass@k compares them with the gold, and the
authors' own evaluation grader beside ours.

What the authors' code does (user683/ECHO @6f7b311):
  - evaluation extraction, standalone_inference.py:55-77 `extract_answer`: the content of the last
    \\boxed{...} (braces balanced, verl/utils/reward_score/ttrl_math/math_utils.py:891-925
    `last_boxed_only_string` / `remove_boxed`); else an output that starts with yes / no; else an output
    that is one option letter A-D; else the last number (-?\\d+\\.?\\d*) in the output; else "".
  - normalisation, ttrl_math/math_normalize.py `normalize_answer` (Hendrycks' MATH `_strip_string`):
    \\text{} unwrapped, \\left / \\right, degrees, \\$ and \\% dropped, units after "\\text{ " dropped,
    "k = 5" -> "5", \\sqrt3 -> \\sqrt{3}, spaces dropped, \\frac12 -> \\frac{1}{2}, tfrac / dfrac ->
    frac, "a/b" -> \\frac{a}{b}, "0.5" -> \\frac{1}{2}.
  - evaluation correctness, standalone_inference.py:86-122 `check_correctness`: LENIENT, not exact. In
    order: equal normal forms (also ignoring case); a predicted letter A-D equal to the gold's FIRST
    CHARACTER (so gold "B. 30" and gold "Bob" both accept "B"); the predicted normal form equal to the
    normal form of ANY number in the gold string (so gold "2\\sqrt{3}" accepts "2" and "3", gold "A.8"
    accepts "8"); then mathd / sympy equivalence (math_utils.py `grade_answer_mathd`,
    `grade_answer_sympy`). `lenient_correct` below is that order, config evaluation.math.grader
    "lenient" (the `authors` protocol).
  - the vote (verl/trainer/ppo/ttrl_utils.py:106-119 `_majority_vote`, ttrl_math/__init__.py:27-30
    `extract_answer`): only completions with a whole \\boxed{...} vote (their sympy-simplified content
    counted as strings); the reward (ttrl_math/__init__.py:64-75 `compute_score`) gives an unboxed
    completion 0. `boxed_answer` below; hyper-parameter answer_parser "boxed" (the `authors` protocol).

Ours (the `clean` protocol, grader "exact"; no sympy in the hot path): the same extraction, plus an
"answer is X" / "Answer: X" statement before the last number, in the votes too (a completion cut off
before its box still votes with its last stated answer); the same normalisation, then every plain number
in any notation ("0.5", "1/2", "\\frac{1}{2}", "\\dfrac12", "1,000") becomes one canonical number string,
which stands in for the authors' sympy simplification; a number followed by a unit word ("12 cm") is the
number. An answer is right when its normal form equals the gold's or both are numbers within a relative
tolerance of 1e-4 (math_utils.py `numeric_equal`'s tolerance); no number inside the gold counts on its
own, and a letter is compared with the gold letter, not with a gold text's first character. Plain-text
answers (no LaTeX) compare case-insensitively, as `check_correctness` does.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from ..datasets.preprocessing import OPTION_LETTERS


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}), braces balanced; "\\boxed 5" -> "5"."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    rest = text[start:]
    if rest.startswith("\\boxed ") and "{" not in rest.split(" ", 1)[1][:1]:
        return rest.split(" ", 1)[1].split("$")[0].strip() or None
    open_at = rest.find("{")
    content = _braced(rest, open_at) if open_at >= 0 else None
    return None if content is None else content.strip()


def _braced(text: str, open_at: int) -> str | None:
    """The content of the brace group opening at text[open_at], nested braces balanced; None where it is never
    closed (cut off by the token limit)."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    return None


_ANSWER_STATEMENT = re.compile(r"(?i:the\s+(?:final\s+)?answer\s+is|final\s+answer\s*:|answer\s*:)\s*(.+)")
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?|-?\.\d+")


def answer_text(text: str | None) -> str | None:
    """The final answer's text: the last \\boxed{}, else the last "the answer is X" / "Answer: X"
    (its first line), else the last number; None when there is none."""
    if not text or not text.strip():
        return None
    if (boxed := last_boxed(text)) is not None:
        return boxed
    if stated := _ANSWER_STATEMENT.findall(text):
        return stated[-1].splitlines()[0].strip().rstrip(".").strip() or None
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def _fix_fracs(string: str) -> str:
    """\\frac12 -> \\frac{1}{2}, \\frac1{72} -> \\frac{1}{72} (Hendrycks' MATH `_fix_fracs`)."""
    parts = string.split("\\frac")
    out = parts[0]
    for part in parts[1:]:
        out += "\\frac"
        if not part or part[0] == "{":
            out += part
            continue
        if len(part) < 2:
            return string
        a, b, tail = part[0], part[1], part[2:]
        out += "{" + a + "}" + (b + tail if b == "{" else "{" + b + "}" + tail)
    return out


def _fix_sqrt(string: str) -> str:
    """\\sqrt3 -> \\sqrt{3}."""
    return re.sub(r"\\sqrt(\w)", r"\\sqrt{\1}", string)


# Unit words after a number ("12 cm", "30 degrees"): geometry and chart answers (Geometry3k, GeoQA,
# MathVista's `unit` column) state them, the golds do not.
_UNITS = (r"(?:square\s+|sq\.?\s*|cubic\s+)?(?:units?|cm|mm|km|m|in|inch(?:es)?|ft|feet|foot|yards?|yd|meters?|"
          r"centimeters?|degrees?|deg|radians?|seconds?|minutes?|hours?|days?|years?|dollars?|cents?)"
          r"(?:\^\{?[23]\}?|²|³)?")
_NUMBER_THEN_UNIT = re.compile(rf"^(-?[\d.,]+)\s*(?:\\text\{{\s*)?{_UNITS}\}}?\.?$", re.IGNORECASE)
_PLAIN_NUMBER = re.compile(r"^-?(?:\d+(?:,\d{3})+|\d+)?(?:\.\d+)?$")
_FRACTION = re.compile(r"^(-?)\\frac\{(-?[\d.]+)\}\{(-?[\d.]+)\}$")
_SLASH = re.compile(r"^(-?[\d.]+)/(-?[\d.]+)$")


def _number_value(string: str) -> Fraction | None:
    """The exact value of a plain number, "a/b" or \\frac{a}{b}; None for anything else."""
    try:
        if _PLAIN_NUMBER.match(string) and any(c.isdigit() for c in string):
            return Fraction(string.replace(",", ""))
        if match := _FRACTION.match(string):
            sign, a, b = match.groups()
            value = Fraction(a) / Fraction(b)
            return -value if sign else value
        if match := _SLASH.match(string):
            return Fraction(match.group(1)) / Fraction(match.group(2))
    except (ValueError, ZeroDivisionError):
        return None
    return None


def canonical_number(value: Fraction) -> str:
    """One string per value: integers as such, others to 10 significant digits ("1/2" -> "0.5")."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.10g}"


def normalize_math_answer(answer: str | None) -> str | None:
    """The normal form of an answer (module docstring); None for None or an empty answer."""
    if answer is None:
        return None
    s = str(answer).strip()
    if s.startswith("$") and s.endswith("$"):
        s = s.strip("$").strip()
    if match := re.fullmatch(r"\\text(?:bf|rm)?\{(.+?)\}", s):  # enclosing \text{}
        s = match.group(1).strip()
    s = s.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac").replace("\\left", "").replace("\\right", "")
    for degree in ("^{\\circ}", "^\\circ", "°", "\\circ", "\\degree"):
        s = s.replace(degree, "")
    s = s.replace("\\$", "").replace("\\%", "").replace("%", "").replace("\\,", "").replace("\\;", "")
    if "\\text{ " in s:  # "5 \text{ cm}": a unit (Hendrycks' `_remove_right_units`)
        s = s.split("\\text{ ")[0]
    s = s.strip()
    if match := _NUMBER_THEN_UNIT.match(s):
        s = match.group(1)
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if s.startswith("."):
        s = "0" + s
    sides = s.split("=")
    # "k = 5" -> "5": Hendrycks counts the left side with its blanks, so "AB=5" -> "5", "AB = 5" is kept
    if len(sides) == 2 and len(sides[0]) <= 2:
        s = sides[1]
    s = _fix_fracs(_fix_sqrt(s)).replace(" ", "").rstrip(".")
    if not s:
        return None
    value = _number_value(s)
    if value is not None:
        try:
            return canonical_number(value)
        except OverflowError:  # a fraction beyond float64 ("9...9.5", 400 digits): compared as text
            pass
    return s if "\\" in s else s.lower()  # plain text compares case-insensitively


def numbers_close(a: str, b: str, rel_tol: float = 1e-4) -> bool:
    """Two normal forms that are numbers, equal within `rel_tol` (math_utils.py `numeric_equal`)."""
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return math.isclose(x, y, rel_tol=rel_tol)


_LETTER = re.compile(r"^[\(\[]?([A-J])[\)\]]?(?:[.:)]\s*.*|\s+.*)?$", re.DOTALL)
_LETTER_LIST = re.compile(r"^[\(\[]?[A-J][\)\]]?(?:\s*(?:,|and|&)\s*[\(\[]?[A-J][\)\]]?)+$")


def letters_of(answer: str | None, options: list[str]) -> str | None:
    """The option letter(s) an answer names: "B", "(B)", "B. 30", "\\text{B}", or the text of one
    option ("30" when B is "30"); several letters ("A, C": LogicVista) sorted and comma-joined.
    None when the answer names no valid option."""
    if answer is None:
        return None
    valid = OPTION_LETTERS[: len(options)]
    s = re.sub(r"\\text(?:bf|rm)?\{([^{}]*)\}", r"\1", str(answer)).strip().strip("*_`$ ").strip()
    if _LETTER_LIST.match(s):
        letters = sorted(set(re.findall(r"[A-J]", s)))
        return ",".join(letters) if all(letter in valid for letter in letters) else None
    if match := _LETTER.match(s):
        return match.group(1) if match.group(1) in valid else None
    wanted = normalize_math_answer(s)
    named = [letter for letter, option in zip(valid, options) if normalize_math_answer(option) == wanted]
    return named[0] if len(named) == 1 else None


# ---- the authors' evaluation (standalone_inference.py) and vote (ttrl_utils.py), the `authors` protocol ----

# standalone_inference.py:190, verbatim (its double space included): the system turn of their evaluation,
# whose user turn is the test item's text alone (their data/save_as_json.py `prompt`: the question and
# "\n\nChoices:\n..."), with none of training's "Please reason step by step" suffix
AUTHORS_EVAL_SYSTEM = ("Please directly answer the question and provide the correct option letter and  put your "
                       "answer within \\boxed{}.")
_AUTHORS_LETTER = re.compile(r"^\s*([A-D])[\.\)]?\s*$", re.IGNORECASE)
_AUTHORS_NUMBER = re.compile(r"-?\d+\.?\d*")


def boxed_answer(text: str | None) -> str | None:
    """The content of the last whole \\boxed{...}, as the authors' vote reads it (ttrl_math `extract_answer`:
    "\\boxed" must be followed by "{" and its brace closed); None otherwise: no box, a box cut off by the
    token limit, "\\boxed 5", or an \\fbox after which no \\boxed comes."""
    if not isinstance(text, str):
        return None
    start = text.rfind("\\boxed")
    if start < 0 or not text.startswith("\\boxed{", start):
        return None
    return _braced(text, start + len("\\boxed"))


def authors_answer_text(text: str | None) -> str:
    """The authors' evaluation extraction (standalone_inference.py `extract_answer`): the last box's
    content, else "Yes" / "No" for an output starting so, else a lone option letter, else the last
    number, else ""."""
    if not isinstance(text, str) or not text.strip():
        return ""
    text = text.strip()
    boxed = boxed_answer(text)
    if boxed is not None:
        return boxed.strip()
    lowered = text.lower()
    if lowered.startswith("yes"):
        return "Yes"
    if lowered.startswith("no"):
        return "No"
    if match := _AUTHORS_LETTER.match(text):
        return match.group(1).upper()
    numbers = _AUTHORS_NUMBER.findall(text)
    return numbers[-1] if numbers else ""


def lenient_correct(pred: str | None, gold) -> bool:
    """The authors' evaluation grading (standalone_inference.py `check_correctness`, module docstring), the
    normal forms ours: equal normal forms; a predicted letter A-D equal to the gold's first character; the
    prediction's normal form equal to that of any number in the gold; else ours (equal, or numbers within
    1e-4) standing in for their mathd / sympy equivalence. An empty prediction is wrong."""
    if pred is None or gold is None:
        return False
    pred, gold = str(pred), str(gold)
    pred_norm, gold_norm = normalize_math_answer(pred), normalize_math_answer(gold)
    if pred_norm is None:
        return False
    if pred_norm == gold_norm or (gold_norm is not None and pred_norm.lower() == gold_norm.lower()):
        return True
    letter = pred.strip().upper()
    if letter in {"A", "B", "C", "D"} and gold.strip()[:1].upper() == letter:
        return True
    if any(pred_norm == normalize_math_answer(number) for number in _AUTHORS_NUMBER.findall(gold.strip())):
        return True
    return gold_norm is not None and numbers_close(pred_norm, gold_norm)
