"""The T3RL verifier's sandbox (rewards/sandbox.py) against what a rollout could try (issue 25):
the audit hook disabled through gc.get_objects(), then the network, a file outside, the home
directory; and the limits: fork bomb, 10 GB, 10^9 iterations, 1 GB of output."""

import json
import os
import socket
import time
from pathlib import Path

import pytest

from ttrl_bench.rewards import sandbox
from ttrl_bench.rewards.registry import get_reward
from ttrl_bench.rewards.sandbox import SandboxUnavailable, check_sandbox, run_untrusted

# Replaces the audit hook's code by a no-op, then proves it is off: the hook refuses writes, /tmp allows them.
DISABLE_HOOK = """
import gc, json, os
for thing in gc.get_objects():
    if callable(thing) and getattr(thing, "__name__", "") == "guard":
        thing.__code__ = (lambda event, args: None).__code__
open("/tmp/proof", "w").write("hook off")
tried = {}
def attempt(name, action):
    try:
        tried[name] = repr(action())
    except OSError as err:
        tried[name] = "failed: " + type(err).__name__
"""


def test_escapes_with_the_audit_hook_disabled_fail_inside(tmp_path):
    secret = tmp_path / "gold_answers.json"
    secret.write_text('{"q1": "B"}')
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))  # a port the OS picks, listening on the host
    listener.listen()
    port = listener.getsockname()[1]
    try:
        code = DISABLE_HOOK + f"""
import socket
attempt("host port", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=0.5))
attempt("internet", lambda: socket.create_connection(("192.0.2.1", 80), timeout=0.5))
attempt("file outside", lambda: open({str(secret)!r}).read())
attempt("home", lambda: os.listdir({str(Path.home())!r}))
print(json.dumps(tried))
"""
        outcome = run_untrusted(code, timeout_s=5.0)
    finally:
        listener.close()
    assert outcome.ok, outcome
    tried = json.loads(outcome.stdout)
    assert tried["host port"].startswith("failed") and tried["internet"].startswith("failed")
    assert tried["file outside"] == "failed: FileNotFoundError"
    # the home directory, where there is one inside, holds only the path to the interpreter
    visible = {Path(p).relative_to(Path.home()).parts[0] for p in sandbox._interpreter_view()
               if p.startswith(f"{Path.home()}/")}
    if not tried["home"].startswith("failed"):
        assert set(eval(tried["home"])) <= visible


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
    outcome = run_untrusted(DISABLE_HOOK + "if os.fork() == 0:\n    import time\n    time.sleep(60)\n"
                            "else:\n    time_out = [0 for _ in iter(int, 1)]", timeout_s=1.0)
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
