"""Run untrusted Python (code a rollout claims) in a separate interpreter, bounded in time, memory,
files and network; the T3RL verifier's "code interpreter" (papers/t3rl-abstract.txt, Figure 2).

The child is `python -I -S` (no site packages, no environment, no user paths) in an empty temporary
directory, under resource limits (CPU seconds, address space, file size 0, few descriptors) and a
wall-clock timeout after which its whole process group is killed. Before the code runs, an audit
hook (PEP 578) refuses what a computation never needs: writing files, reading any outside the
temporary directory and the standard library, sockets, subprocesses, `os.system`, forks and exec. The code's stdout is the
result; anything refused is reported, never raised into the trainer.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

# Runs in the child before the untrusted code; the code is passed as a JSON string on stdin.
PRELUDE = r"""
import sys, json, math, fractions, decimal
code = json.loads(sys.stdin.read())
READABLE = tuple([sys.argv[1]] + [p for p in sys.path if p])  # the temp dir, and the stdlib for imports
def guard(event, args):
    if event == "open":
        path, mode = args[0], (args[1] if len(args) > 1 else "r") or "r"
        if isinstance(path, int) or any(c in mode for c in "wax+") or not str(path).startswith(READABLE):
            raise PermissionError(f"sandbox: open {path!r} ({mode}) refused")
    elif event.startswith(("socket.", "subprocess.", "os.system", "os.exec", "os.fork", "os.posix_spawn",
                           "os.spawn", "os.kill", "shutil.", "os.remove", "os.rename", "os.mkdir", "ctypes.")):
        raise PermissionError(f"sandbox: {event} refused")
sys.addaudithook(guard)
exec(compile(code, "<rollout>", "exec"), {"__name__": "__rollout__"})
"""


@dataclass(frozen=True)
class Outcome:
    ok: bool
    stdout: str
    reason: str  # "", "timeout", "refused: ...", "error: ..."


def _limits(cpu_s: int, memory_mb: int):
    def apply():
        os.setsid()  # its own process group: killed whole on timeout
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    return apply


def run_untrusted(code: str, timeout_s: float = 2.0, memory_mb: int = 256) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="ttrl-sandbox-") as workdir:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", PRELUDE, workdir], cwd=workdir, env={}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=_limits(max(1, int(timeout_s) + 1), memory_mb),
        )
        try:
            stdout, stderr = process.communicate(json.dumps(code), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return Outcome(False, "", "timeout")
    if process.returncode != 0:
        last = (stderr.strip().splitlines() or ["killed"])[-1]
        kind = "refused" if "sandbox:" in last else "error"
        return Outcome(False, stdout, f"{kind}: {last[-200:]}")
    return Outcome(True, stdout, "")
