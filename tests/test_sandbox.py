"""The T3RL verifier's sandbox (rewards/sandbox.py) against what a rollout could try (issue 25):
the audit hook disabled through gc.get_objects(), then the network, a file outside, the home
directory; and the limits: fork bomb, 10 GB, 10^9 iterations, 1 GB of output."""

import os
import socket
import time

import pytest

from ttrl_bench.rewards import sandbox
from ttrl_bench.rewards.registry import get_reward
from ttrl_bench.rewards.sandbox import SandboxUnavailable, check_sandbox, probe_escapes, run_untrusted

def test_escapes_with_the_audit_hook_disabled_fail_inside(tmp_path):
    """ESCAPE_PROBE disables the hook (and proves it: a write the hook refuses succeeds), then tries
    a port listening on this host, a file of this host holding "gold answers", the home directory."""
    secret = tmp_path / "gold_answers.json"
    secret.write_text('{"q1": "B"}')
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))  # a port the OS picks
        listener.listen()
        tried = probe_escapes("127.0.0.1", listener.getsockname()[1], str(secret))
    assert tried["network"] == (True, "failed: ConnectionRefusedError")  # another network namespace
    assert tried["file outside"] == (True, "failed: FileNotFoundError")  # not mounted inside
    blocked, listing = tried["home directory"]
    # no home inside, or only the path to the interpreter (pyenv's /root/.pyenv here)
    assert blocked and (listing.startswith("failed") or len(eval(listing)) <= 1), listing


@pytest.mark.parametrize("code, reason", [
    ("import os\nwhile True:\n    os.fork()", "refused"),  # the audit hook; the PID namespace dies with it
    ("x = bytearray(10 * 2**30)", "error: MemoryError"),
    ("n = 0\nfor i in range(10**9):\n    n += i\nprint(n)", "timeout"),
    ("print('x' * 2**30)", "error: MemoryError"),  # a 1-GB print in one string
    ("while True:\n    print('x' * 4096)", "output limit"),  # ... or in pieces: stdout is capped at 1 MiB
])
def test_limits_stop_what_runs_away(code, reason):
    start = time.monotonic()
    outcome = run_untrusted(code, timeout_s=1.0)
    assert not outcome.ok and outcome.reason.startswith(reason), outcome
    assert time.monotonic() - start < 3.0


def test_arithmetic_returns_its_answer_and_nothing_outlives_the_sandbox():
    assert run_untrusted("from fractions import Fraction\nprint(Fraction(1, 3) + Fraction(1, 6))") == \
        sandbox.Outcome(True, "1/2\n", "")
    # a child forked after the hook is off, sleeping past the limit: killed with the PID namespace
    outcome = run_untrusted(sandbox.HOOK_OFF + "if os.fork() == 0:\n    import time\n    time.sleep(60)\n"
                            "else:\n    while True:\n        pass", timeout_s=1.0)
    assert outcome.reason == "timeout"
    assert _sandboxes_left(deadline=time.monotonic() + 2.0) == []


def _sandboxes_left(deadline: float) -> list[str]:
    """Processes of this test process's sandboxes still alive at `deadline` (the PID namespace's
    teardown after its first process is killed takes a moment)."""
    while True:
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if f"ttrl-sandbox-{os.getpid()}-" in open(f"/proc/{pid}/cmdline", errors="ignore").read():
                    left.append(pid)
            except OSError:  # exited meanwhile
                pass
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def test_t3rl_stops_at_start_up_where_the_sandbox_cannot_start(monkeypatch):
    """No silent fallback: where bwrap fails (here: a binary that exits 1, as bwrap does without
    user namespaces), building the arithmetic verifier raises, naming the kernel feature and the
    setting that needs no sandbox; the null verifier still builds."""
    monkeypatch.setattr(sandbox, "bwrap_binary", lambda: "/bin/false")
    check_sandbox.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="user namespaces.*verifier: null"):
            get_reward("t3rl", verifier="arithmetic")
        get_reward("t3rl", verifier="null")
    finally:
        check_sandbox.cache_clear()
