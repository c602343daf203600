"""The sandbox's seccomp filter (rewards/sandbox/_seccomp.py), loaded outside bubblewrap in a child
interpreter of its own (ctypes: prctl then raw system calls), so each denied call is tried
directly, including those the sandboxed interpreter has no function for (unshare, clone with
namespace flags, io_uring, keyctl, ptrace). AF_VSOCK is tried only inside the sandbox
(tests/test_sandbox.py), and only created there, never connected; here the same rule is tried
with AF_NETLINK and AF_PACKET."""

import ctypes
import ctypes.util
import json
import platform
import signal
import subprocess
import sys

import pytest

from ttrl_bench.rewards.sandbox import _seccomp

pytestmark = pytest.mark.skipif(platform.machine() not in _seccomp.AUDIT_ARCH, reason="x86_64 and aarch64 only")

LOAD = """
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
    result = libc.syscall(NR[name], *[ctypes.c_long(a) for a in args])
    if result == 0 and name == "clone":  # the filter let a namespace through: leave this child at once
        os._exit(0)
    return errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else "ok"
"""
TRIES = LOAD + """
tmp = tempfile.TemporaryFile()
tried = {
    "netlink": call("socket", 16, 3, 0),     # AF_NETLINK, SOCK_RAW
    "packet": call("socket", 17, 3, 0),      # AF_PACKET
    "inet": call("socket", 2, 1, 0), "inet6": call("socket", 10, 2, 0), "unix": call("socket", 1, 1, 0),
    "unshare user": call("unshare", 0x10000000), "unshare net": call("unshare", 0x40000000),
    "clone new user": call("clone", 0x10000000 | 17, 0, 0, 0, 0),
    "clone new net": call("clone", 0x40000000 | 17, 0, 0, 0, 0),
    "clone3": call("clone3", 0, 0),
    "setns": call("setns", -1, 0),
    "io_uring_setup": call("io_uring_setup", 1, 0),
    "keyctl": call("keyctl", 0, 0, 0, 0, 0),
    "ptrace": call("ptrace", 0x7fff, 0, 0, 0),
    "fallocate": call("fallocate", tmp.fileno(), 1, 0, 2**20),  # FALLOC_FL_KEEP_SIZE
    "bpf": call("bpf", 0, 0, 0),
    "mount": call("mount", 0, 0, 0, 0, 0),
}
pid = os.fork()  # clone without namespace flags: allowed
if pid == 0:
    os._exit(7)
tried["fork"] = "ok" if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7 else "failed"
print(json.dumps(tried))
"""


def _load_and_run(script: str) -> subprocess.CompletedProcess:
    index = 0 if platform.machine() == "x86_64" else 1
    numbers = {name: nrs[index] for name, nrs in _seccomp.SYSCALLS.items()}
    return subprocess.run([sys.executable, "-c", script, _seccomp.program().hex(), json.dumps(numbers)],
                          capture_output=True, text=True, timeout=30)


def test_the_filter_denies_namespaces_socket_families_io_uring_keyctl_fallocate_ptrace_and_allows_the_rest():
    ran = _load_and_run(TRIES)
    assert ran.returncode == 0, ran.stderr
    tried = json.loads(ran.stdout)
    assert tried["netlink"] == tried["packet"] == "EAFNOSUPPORT"  # AF_VSOCK: tried inside the sandbox only
    assert tried["inet"] == tried["inet6"] == tried["unix"] == tried["fork"] == "ok"
    assert tried["clone3"] == "ENOSYS"  # the C library falls back to clone, whose flags the filter reads
    denied = ["unshare user", "unshare net", "clone new user", "clone new net", "setns", "io_uring_setup", "keyctl",
              "ptrace", "fallocate", "bpf", "mount"]
    assert {name: tried[name] for name in denied} == dict.fromkeys(denied, "EPERM")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x32 convention is x86_64's")
def test_another_system_call_convention_kills_the_process():
    ran = _load_and_run(LOAD + "libc.syscall(0x40000000 | 39)\nprint('still alive')")  # x32's getpid
    assert ran.returncode == -signal.SIGSYS and "still alive" not in ran.stdout


def test_the_system_call_numbers_are_libseccomps():
    """Checked against libseccomp's own tables where the library is installed (Debian: libseccomp2)."""
    name = ctypes.util.find_library("seccomp")
    if name is None:
        pytest.skip("libseccomp is not installed")
    lib = ctypes.CDLL(name)
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    for syscall, numbers in _seccomp.SYSCALLS.items():
        for arch, number in zip(("x86_64", "aarch64"), numbers):
            assert lib.seccomp_syscall_resolve_name_arch(_seccomp.AUDIT_ARCH[arch], syscall.encode()) == number, syscall


def test_the_program_is_whole_instructions_and_refuses_other_architectures():
    for machine in ("x86_64", "aarch64"):
        program = _seccomp.program(machine)
        assert len(program) % 8 == 0 and len(program) // 8 < 4096
    with pytest.raises(ValueError, match="riscv64"):
        _seccomp.program("riscv64")
