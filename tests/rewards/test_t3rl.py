"""T3RL (papers/t3rl-abstract.txt, Figure 2): verification-weighted vote, the verifiers, the sandbox."""

import time

import pytest

from ttrl_bench.rewards.registry import get_reward
from ttrl_bench.rewards.sandbox import run_untrusted
from ttrl_bench.rewards import t3rl as t3rl_module
from ttrl_bench.rewards.t3rl import (
    ArithmeticVerifier, Decision, NullVerifier, T3RLReward, answer_value, as_number, claims, same_value, t3rl,
    weighted_vote,
)


def test_verified_rollouts_outweigh_a_spurious_majority():
    """A A A B B, only the first B verified, omega 5: A has mass 3, B 5 + 1 = 6, so B is the label
    (TTRL's plain vote: A). Weight is 1 + (omega - 1) * v."""
    answers, verified = ["A", "A", "A", "B", "B"], [False, False, False, True, False]
    assert weighted_vote(answers, verified, omega=5) == "B"
    assert t3rl(answers, verified, omega=5) == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert t3rl(answers, [False] * 5, omega=5) == [1.0, 1.0, 1.0, 0.0, 0.0]  # = majority vote
    # omega 2: B has 2 + 1 = 3, a tie with A's 3: the answer seen first (A) wins
    assert weighted_vote(answers, verified, omega=2) == "A"
    assert t3rl([None, None], [True, True]) == [0.0, 0.0]


def test_the_arithmetic_verifier_executes_what_the_rollout_claims():
    verify = ArithmeticVerifier()
    good = verify("12 * 7 = 84, then 84 + 6 = 90. The answer is 90.", "90")
    assert good.verified and good.computed == "90.0"
    wrong_step = verify("12 * 7 = 85, then 85 + 5 = 90.", "90")
    assert not wrong_step.verified and "12 * 7" in wrong_step.reason
    assert not verify("12 * 7 = 84", "85").verified  # the computation does not reproduce the answer
    assert verify("```python\nprint(sum(range(5)))\n```\nSo the answer is 10.", "10").verified
    assert verify("no computation here", "10").reason == "no computation claimed"
    assert not NullVerifier()("2 + 2 = 4", "4").verified
    # an option letter is checked against its option's text
    assert answer_value("B", ["7", "12", "3", "9"]) == "12" and answer_value("12", None) == "12"
    reward = get_reward("t3rl", omega=5.0, verifier="arithmetic")
    rewards = reward(["A", "A", "B"], texts=["A", "A", "3 * 4 = 12 so B"], options=["7", "12", "3", "9"])
    # B's rollout claims 3 * 4 = 12 and B is "12": verified, mass 5 > A's 2
    assert rewards == [0.0, 0.0, 1.0] and [d.verified for d in reward.decisions] == [False, False, True]


@pytest.mark.parametrize("code, reason", [
    ("open('/etc/hostname').read()", "refused"),
    ("open('out.txt', 'w').write('x')", "refused"),
    ("import socket\nsocket.socket().connect(('127.0.0.1', 9))", "refused"),
    ("import os\nos.system('true')", "refused"),
    ("import subprocess\nsubprocess.run(['true'])", "refused"),
    ("while True:\n    pass", "timeout"),
])
def test_the_sandbox_refuses_files_sockets_processes_and_endless_loops(code, reason):
    # "timeout" comes only from the wall-clock deadline (the CPU rlimit behind it would give an exit status);
    # no bound from above (issue 52: it measures the load); a refusal gets a limit no start-up under load reaches
    start = time.monotonic()
    outcome = run_untrusted(code, timeout_s=1.0 if reason == "timeout" else 30.0)
    assert not outcome.ok and outcome.reason.startswith(reason), outcome
    assert time.monotonic() - start >= (1.0 if reason == "timeout" else 0.0)  # killed at its limit, not before
    assert ArithmeticVerifier(timeout_s=1.0)(f"```python\n{code}\n```", "1").verified is False


# Hand-worked cases for the mutants of t3rl.py that survived (benchmarks/results/mutation.md, 2026-11-26).

def test_default_omega_is_the_papers_5():
    """A x5 unverified, B x1 verified: with omega 5 (SPEC.md) A has mass 5 and B 5, a tie the answer
    seen first (A) wins; omega 6 would give B. An unverified rollout weighs 1: A A A + verified B is
    3 against 5, B wins (weight 2 would give A 6)."""
    answers, verified = ["A"] * 5 + ["B"], [False] * 5 + [True]
    assert weighted_vote(answers, verified) == "A"
    assert t3rl(answers, verified) == [1.0] * 5 + [0.0]
    assert weighted_vote(["A", "A", "A", "B"], [False, False, False, True]) == "B"
    # omega passed through t3rl: omega 2, A A A B B with the first B verified: 3 against 3, A first
    assert t3rl(["A", "A", "A", "B", "B"], [False, False, False, True, False], omega=2) == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_answer_value_maps_only_an_in_range_option_letter():
    """Options A-D: "A" is option 0, "E" is beyond the options and stays "E"; no options, a number, a
    longer text or None (unparsable) stay as they are."""
    options = ["7", "12", "3", "9"]
    assert answer_value("A", options) == "7" and answer_value("D", options) == "9"
    assert answer_value("E", options) == "E"
    assert answer_value("B", None) == "B"
    assert answer_value("12", options) == "12"
    assert answer_value(7, options) == 7 and answer_value(None, options) is None


def test_as_number_and_same_value():
    """as_number drops a sentence's trailing "." and thousands commas; same_value compares numbers
    within 1e-6 relative or 1e-9 absolute, else texts case- and blank-insensitively; None is no value."""
    assert as_number("3.5.") == 3.5 and as_number(".5") == 0.5
    assert as_number("1,234") == 1234.0
    assert as_number("12X") is None
    # 1,000,000 vs 1,000,000.5: relative difference 5e-7 <= 1e-6 (an absolute 0.5 > 1e-9)
    assert same_value("1000000", "1000000.5") and not same_value("1000000", "1000002")
    # 0 vs 5e-10: no relative tolerance helps at 0; |difference| 5e-10 <= 1e-9
    assert same_value(0, 5e-10) and not same_value(0, 2e-9)
    assert same_value("12", "twelve") is False and same_value("twelve", "12") is False
    assert same_value(" Twelve ", "twelve") is True and same_value("twelve", "TWELVE") is True
    assert same_value("twelve", "eleven") is False
    assert same_value(None, "None") is False and same_value(None, None) is False


def test_claims_start_where_no_letter_digit_underscore_or_dot_precedes():
    """"x12 * 7 = 84": the expression would start at "12", but a letter precedes it; from "2" or " " on
    there is no digit before the operator: no claim. The same after "_", after "a" at position 0/1,
    and after a capital X. A blank before the number starts a claim."""
    assert claims("x12 * 7 = 84") == []
    assert claims("a1 * 7 = 7") == []
    assert claims("X12 * 7 = 84") == []
    assert claims("v_1 + 2 = 3") == [] and claims("_1 + 2 = 3") == []
    assert claims("so 12 * 7 = 84") == [("12 * 7", "84")]
    # after the expression's last digit only ")" and blanks: "1 + 2 + =" claims nothing
    assert claims("1 + 2 + = 3") == [] and claims("(1 + 2) = 3") == [("(1 + 2)", "3")]


def test_null_verifier_decision():
    decision = NullVerifier()("2 + 2 = 4", "4")
    assert decision == Decision(False, "null verifier") and decision.verified is False


def test_t3rl_reward_construction(monkeypatch):
    """Defaults: omega 5, the arithmetic verifier with a 2 s limit (signature); the sandbox is checked
    at start-up for the arithmetic verifier only; an unknown verifier names the choices."""
    checked = []
    monkeypatch.setattr(t3rl_module, "check_sandbox", lambda: checked.append(True))
    reward = T3RLReward()
    assert reward.omega == 5.0 and isinstance(reward.verify, ArithmeticVerifier) and reward.verify.timeout_s == 2.0
    assert checked == [True] and reward.decisions == []
    assert T3RLReward(timeout_s=1.0).verify.timeout_s == 1.0
    null = T3RLReward(verifier="null")
    assert isinstance(null.verify, NullVerifier) and checked == [True, True]  # no third check
    with pytest.raises(TypeError, match=r"verifier must be one of \['arithmetic', 'null'\], got 'llm'"):
        T3RLReward(verifier="llm")


def test_t3rl_reward_decisions_and_stats_by_hand():
    """Without texts nothing is verified: every decision is "no text to verify", the reward is the
    plain majority vote, no reward changes."""
    reward = T3RLReward(verifier="null")
    assert reward(["A", "B", "B"]) == [0.0, 1.0, 1.0]
    assert reward.decisions == [Decision(False, "no text to verify")] * 3
    assert reward.last_stats == {"convention_verified": 0.0, "changed_by_verification": 0.0}
    # A A A B B, only the first B verified (3 * 4 = 12 is option B's "12"), omega 2 (passed through):
    # A 3, B 2 + 1 = 3, a tie, A first: the same as the plain vote; omega 5: B 6 > 3, all 5 rewards change
    texts = ["A", "A", "A", "3 * 4 = 12 so B", "B"]
    options = ["7", "12", "3", "9"]
    two = T3RLReward(omega=2.0)
    assert two(["A", "A", "A", "B", "B"], texts=texts, options=options) == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert two.last_stats == {"convention_verified": 1 / 5, "changed_by_verification": 0.0}
    five = T3RLReward(omega=5.0)
    assert five(["A", "A", "A", "B", "B"], texts=texts, options=options) == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert five.last_stats == {"convention_verified": 1 / 5, "changed_by_verification": 5 / 5}
    # a group of one verified rollout: shares over 1 completion
    one = T3RLReward()
    assert one(["B"], texts=["3 * 4 = 12 so B"], options=options) == [1.0]
    assert one.last_stats == {"convention_verified": 1.0, "changed_by_verification": 0.0}
    # omega 0 (a verified rollout counts nothing): unverified A B B is still the plain vote B B; the
    # comparison vote is TTRL's plain vote whatever omega is
    zero = T3RLReward(omega=0.0, verifier="null")
    assert zero(["A", "B", "B"]) == [0.0, 1.0, 1.0] and zero.last_stats["changed_by_verification"] == 0.0


def test_arithmetic_verifier_decisions_by_hand():
    """Each way a rollout can end, with the decision the training log records."""
    verify = ArithmeticVerifier()
    assert (verify.timeout_s, verify.memory_mb) == (2.0, 256)  # the signature's limits
    assert verify("12 * 7 = 84", None) == Decision(False, "no answer")
    # the code path: the last non-blank printed line is the computed value
    assert verify("```python\nprint(3)\nprint(4)\n\n```", "4") == Decision(True, "code", "4")
    assert verify("```python\nprint(11)\n```", "10") == Decision(False, "code", "11")
    assert verify("```python\nx = 1\n```", "1") == Decision(False, "code", None)  # prints nothing
    failed = verify("```python\nraise ValueError('x')\n```", "1")
    assert failed.verified is False and failed.reason == "error: ValueError: x" and failed.computed is None
    # the claims path: 12 * 7 = 84 and 84 + 6 = 90 hold, the last value 90.0 is the answer
    assert verify("12 * 7 = 84, then 84 + 6 = 90.", "90") == Decision(True, "claims", "90.0")
    # 2 + 2 = 5 fails first; computed is the last claim's value, 4 + 4 = 8.0 (not 3 + 3's 6.0)
    assert verify("2 + 2 = 5, 3 + 3 = 6, 4 + 4 = 8", "8") == Decision(False, "claim does not hold: 2 + 2", "8.0")
    broken = verify("1 / 0 = 5", "5")
    assert broken.verified is False and broken.reason == "error: ZeroDivisionError: division by zero"


def test_arithmetic_verifier_passes_its_memory_limit_to_the_sandbox():
    """8 MB of address space cannot map the interpreter's shared libraries: nothing runs, on either path
    (with the default 256 MB both hold: 12 * 7 = 84)."""
    tight = ArithmeticVerifier(memory_mb=8)
    for text in ("12 * 7 = 84", "```python\nprint(84)\n```"):
        decision = tight(text, "84")
        assert not decision.verified and decision.reason.startswith("error"), decision
