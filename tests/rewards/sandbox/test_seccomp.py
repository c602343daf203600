"""The sandbox's seccomp filter (rewards/sandbox/_seccomp.py), loaded outside bubblewrap in a child
interpreter of its own (ctypes: prctl then raw system calls), so each denied call is tried
directly, including those the sandboxed interpreter has no function for (unshare, clone with
namespace flags, io_uring, keyctl, ptrace). AF_VSOCK is tried only inside the sandbox
(tests/rewards/sandbox/test_sandbox.py), and only created there, never connected; here the same rule is tried
with AF_NETLINK and AF_PACKET."""

import ctypes
import ctypes.util
import json
import platform
import signal
import subprocess
import sys

import pytest

from ttrl_bench.rewards.sandbox import _probes, _seccomp, _syscalls

pytestmark = pytest.mark.skipif(platform.machine() not in _seccomp.AUDIT_ARCH, reason="x86_64 and aarch64 only")

LOAD = _probes.FILTER_LOAD
TRIES = LOAD + """
tmp = tempfile.TemporaryFile()
tried = {
    "netlink": call("socket", 16, 3, 0),     # AF_NETLINK, SOCK_RAW
    "packet": call("socket", 17, 3, 0),      # AF_PACKET
    "inet": call("socket", 2, 1, 0), "inet6": call("socket", 10, 2, 0), "unix": call("socket", 1, 1, 0),
    "unix pair": call("socketpair", 1, 1, 0, 0), "inet pair": call("socketpair", 2, 1, 0, 0),
    "personality query": call("personality", 0xffffffff), "personality linux": call("personality", 0),
    "personality read implies exec": call("personality", 0x0400000),
    "getpid": call("getpid"), "io_uring_enter": call("io_uring_enter", 0, 0, 0, 0, 0, 0),
    "beyond the table": call("beyond the table"),
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
    numbers = {name: nrs[index] for name, nrs in _syscalls.NUMBERS.items()}
    numbers["beyond the table"] = 1000  # no call has this number yet: refused as Docker's would
    return subprocess.run([sys.executable, "-c", script, _seccomp.program().hex(), json.dumps(numbers)],
                          capture_output=True, text=True, timeout=30)


def test_the_filter_denies_namespaces_socket_families_io_uring_keyctl_fallocate_ptrace_and_allows_the_rest():
    ran = _load_and_run(TRIES)
    assert ran.returncode == 0, ran.stderr
    tried = json.loads(ran.stdout)
    # issue 54: AF_UNIX only (AF_VSOCK: tried inside the sandbox only)
    refused = ("netlink", "packet", "inet", "inet6", "inet pair")
    assert {name: tried[name] for name in refused} == dict.fromkeys(refused, "EAFNOSUPPORT")
    assert tried["unix"] == tried["fork"] == tried["getpid"] == "ok"
    assert tried["unix pair"] == "EFAULT"  # past the filter: the kernel found no array for the two descriptors
    # Docker's personality values (moby/profiles seccomp/default.json): 0xffffffff and 0 allowed, 0x0400000 not
    assert tried["personality query"] == tried["personality linux"] == "ok"
    assert tried["personality read implies exec"] == tried["io_uring_enter"] == tried["beyond the table"] == "EPERM"
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
    checked = 0
    for syscall, numbers in _syscalls.NUMBERS.items():
        for arch, number in zip(("x86_64", "aarch64"), numbers):
            found = lib.seccomp_syscall_resolve_name_arch(_seccomp.AUDIT_ARCH[arch], syscall.encode())
            if found == -1 and (syscall in NEWER_THAN_LIBSECCOMP_2_5 or (number or 0) >= 435):
                continue  # unknown to this libseccomp (releases lag the kernel's calls from 5.3 on): the kernel's table
            if number is None:  # not on this architecture: libseccomp's negative pseudo-number
                assert found < 0, (syscall, arch, found)
            else:
                assert found == number, (syscall, arch, found)
            checked += 1
    assert checked > 600  # both architectures' numbers, the calls after Linux 6.5 aside


# Added to the kernel after libseccomp 2.5's tables (Linux 6.5 on): numbers from the kernel's tables.
NEWER_THAN_LIBSECCOMP_2_5 = {"cachestat", "map_shadow_stack", "futex_wake", "futex_wait", "futex_requeue", "statmount",
                             "listmount", "mseal", "setxattrat", "getxattrat", "listxattrat", "removexattrat",
                             "uretprobe"}


def test_the_allowlist_is_dockers_less_what_the_project_denies():
    """The floor (issue 54): no call is allowed that Docker's default profile refuses a capability-less
    container; issue 54's and 37's denials are absent; the calls the sandbox needs are present."""
    index = {"x86_64": 0, "aarch64": 1}
    for machine in ("x86_64", "aarch64"):
        allowed = set(_seccomp.allowed(machine))
        number = {name: nrs[index[machine]] for name, nrs in _syscalls.NUMBERS.items()}
        docker = {number[name] for name in _syscalls.DOCKER_ALLOWED if number[name] is not None}
        assert allowed <= docker | ({158} if machine == "x86_64" else set())  # arch_prctl: Docker's amd64 rule
        for name in [*_seccomp.PROJECT_DENIED, *_seccomp.DOCKER_DENIED]:
            assert number[name] not in allowed, (machine, name)
        for name in ("read", "write", "openat", "mmap", "execve", "exit_group", "wait4", "rt_sigaction", "getrandom"):
            assert number[name] in allowed, (machine, name)


def test_the_program_is_whole_instructions_and_refuses_other_architectures():
    for machine in ("x86_64", "aarch64"):
        program = _seccomp.program(machine)
        assert len(program) % 8 == 0 and len(program) // 8 < 4096
    with pytest.raises(ValueError, match="riscv64"):
        _seccomp.program("riscv64")
