"""T3RL: test-time RL with tool verification (T3RL, arXiv 2603.02203, Figure 2; SPEC.md).

A verifier checks each rollout with executed evidence; verified rollouts weigh `omega` in the
majority vote and the others 1 (weight 1 + (omega - 1) * v_i, omega = 5), and every rollout gets
the binary reward 1[a_i == weighted pseudo-label]. The paper's verifier is an LLM that compiles the
rollout's claimed computations into Python for a code interpreter; ours is deterministic and
pluggable (`VERIFIERS`): `arithmetic` executes what the rollout itself claims (its ```python block,
else its `expression = number` statements) in the sandbox, `null` verifies nothing (T3RL reduces to
TTRL's majority vote).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .sandbox import check_sandbox, run_untrusted

CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)
_CLAIMED_VALUE = re.compile(r"=\s*(-?\d+(?:\.\d+)?)")
_OPERATORS = "+-*/"


def _expression_char(c: str) -> bool:
    return c.isdecimal() or c.isspace() or c in "+-*/()."


def claims(text: str) -> list[tuple[str, str]]:
    """The `expression = number` statements of a text: "12 * 7 = 84", "(3 + 4) / 2 = 3.5". The
    expression is the run of digits, operators, brackets, dots and blanks before "=", starting
    where no letter, digit or dot precedes it, with a digit, later an operator, later a digit, and
    after its last digit only ")" and blanks. Read in linear time: the regex this replaces,
    (?<![\\w.])([-+*/().\\d\\s]*\\d[-+*/().\\d\\s]*[-+*/][-+*/().\\d\\s]*\\d[)\\s]*)=..., took 28 s on
    "1 + 2 " repeated 100 times."""
    found, consumed = [], 0
    for match in _CLAIMED_VALUE.finditer(text):
        equals = match.start()
        if equals < consumed:
            continue
        start = equals
        while start > consumed and _expression_char(text[start - 1]):
            start -= 1
        # the leftmost start that no letter, digit, "_" or "." precedes
        while start < equals and start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
            start += 1
        expression = text[start:equals]
        last_digit = max((i for i, c in enumerate(expression) if c.isdecimal()), default=-1)
        last_operator = max((i for i, c in enumerate(expression[:last_digit]) if c in _OPERATORS), default=-1)
        first_digit = next((i for i, c in enumerate(expression) if c.isdecimal()), len(expression))
        if last_digit < 0 or any(c not in ")" and not c.isspace() for c in expression[last_digit + 1:]):
            continue
        if first_digit < last_operator:
            found.append((expression.strip(), match.group(1)))
            consumed = match.end()
    return found


@dataclass(frozen=True)
class Decision:
    verified: bool
    reason: str
    computed: str | None = None


def as_number(value) -> float | None:
    try:
        return float(str(value).strip().rstrip(".").replace(",", ""))
    except (TypeError, ValueError):
        return None


def same_value(a, b) -> bool:
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)
    return a is not None and str(a).strip().lower() == str(b).strip().lower()


class NullVerifier:
    """Verifies nothing: T3RL's weighted vote is then TTRL's plain majority vote."""

    def __call__(self, text: str, answer) -> Decision:
        return Decision(False, "null verifier")


class ArithmeticVerifier:
    """Executes the computation a rollout claims, in the sandbox (time and memory limits, no files,
    no network). Verified when the execution succeeds, every claimed `expression = number` holds,
    and the last computed value equals the rollout's answer."""

    def __init__(self, timeout_s: float = 2.0, memory_mb: int = 256):
        self.timeout_s, self.memory_mb = timeout_s, memory_mb

    def __call__(self, text: str, answer) -> Decision:
        if answer is None:
            return Decision(False, "no answer")
        block = CODE_BLOCK.search(text)
        if block:
            outcome = run_untrusted(block.group(1), self.timeout_s, self.memory_mb)
            if not outcome.ok:
                return Decision(False, outcome.reason)
            lines = [line for line in outcome.stdout.splitlines() if line.strip()]
            computed = lines[-1].strip() if lines else None
            return Decision(computed is not None and same_value(computed, answer), "code", computed)
        claimed = claims(text)
        if not claimed:
            return Decision(False, "no computation claimed")
        # the expressions hold only digits, operators, brackets and spaces (CLAIM); still executed in the
        # sandbox, since "9**9**9" is arithmetic too
        program = "import json\nprint(json.dumps([" + ", ".join(f"float({' '.join(e.split())})" for e, _ in claimed) + "]))"
        outcome = run_untrusted(program, self.timeout_s, self.memory_mb)
        if not outcome.ok:
            return Decision(False, outcome.reason)
        results = json.loads(outcome.stdout)
        wrong = [e for (e, v), r in zip(claimed, results) if not same_value(r, v)]
        if wrong:
            return Decision(False, f"claim does not hold: {wrong[0]}", str(results[-1]))
        return Decision(same_value(results[-1], answer), "claims", str(results[-1]))


VERIFIERS = {"arithmetic": ArithmeticVerifier, "null": NullVerifier}


def weighted_vote(answers: Sequence, verified: Sequence[bool], omega: float = 5.0):
    """The answer with the most vote mass, a verified rollout weighing `omega` and others 1; ties go
    to the answer seen first. None (unparsable) never wins."""
    mass: Counter = Counter()
    for answer, v in zip(answers, verified):
        if answer is not None:
            mass[answer] += omega if v else 1.0
    if not mass:
        return None
    best = max(mass.values())
    return next(a for a in answers if a is not None and mass[a] == best)


def t3rl(answers: Sequence, verified: Sequence[bool], omega: float = 5.0) -> list[float]:
    label = weighted_vote(answers, verified, omega)
    return [1.0 if label is not None and a == label else 0.0 for a in answers]


def answer_value(answer, options: Sequence[str] | None):
    """What a rollout's computation must reproduce: for an option letter, that option's text."""
    if options is not None and isinstance(answer, str) and len(answer) == 1 and "A" <= answer < chr(65 + len(options)):
        return options[ord(answer) - 65]
    return answer


class T3RLReward:
    """The group reward: verify each rollout (decisions kept in `decisions` for the training log),
    then the verification-weighted vote."""

    needs_texts = True
    needs_uncertainty = False
    format_params: dict = {}
    # weighted_vote never elects an unreadable answer: the training log's pseudo-label (reward_bridge) follows
    unparsable = "no_reward"

    def __init__(self, omega: float = 5.0, verifier: str = "arithmetic", timeout_s: float = 2.0):
        if verifier not in VERIFIERS:
            raise TypeError(f"verifier must be one of {sorted(VERIFIERS)}, got {verifier!r}")
        if verifier == "arithmetic":
            check_sandbox()  # at start-up: SandboxUnavailable names the missing kernel feature, no fallback
        self.omega = omega
        self.verify = VERIFIERS[verifier]() if verifier == "null" else VERIFIERS[verifier](timeout_s)
        self.decisions: list[Decision] = []

    def __call__(self, answers: Sequence, texts: Sequence[str] | None = None,
                 options: Sequence[str] | None = None) -> list[float]:
        """Without the rollouts' texts (the reward audit samples answers only) nothing is verified."""
        if texts is None:
            self.decisions = [Decision(False, "no text to verify")] * len(answers)
        else:
            self.decisions = [self.verify(t, answer_value(a, options)) for t, a in zip(texts, answers)]
        verified = [d.verified for d in self.decisions]
        rewards = t3rl(answers, verified, self.omega)
        unweighted = t3rl(answers, [False] * len(answers), self.omega)  # TTRL's plain majority vote
        n = max(len(answers), 1)
        self.last_stats = {"convention_verified": sum(verified) / n,
                           "changed_by_verification": sum(a != b for a, b in zip(rewards, unweighted)) / n}
        return rewards
