"""T3RL (papers/t3rl-abstract.txt, Figure 2): verification-weighted vote, the verifiers, the sandbox."""

import os
import time

import pytest

from ttrl_bench.rewards.registry import get_reward
from ttrl_bench.rewards.sandbox import run_untrusted
from ttrl_bench.rewards.t3rl import ArithmeticVerifier, NullVerifier, answer_value, t3rl, weighted_vote


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
    start = time.monotonic()
    outcome = run_untrusted(code, timeout_s=1.0)
    assert not outcome.ok and outcome.reason.startswith(reason), outcome
    assert time.monotonic() - start < 3.0  # killed at its limit, not later
    assert ArithmeticVerifier(timeout_s=1.0)(f"```python\n{code}\n```", "1").verified is False
