"""The sandbox's seccomp filter, generated here as a classic BPF program (the format bubblewrap's
`--seccomp FD` reads: an array of `struct sock_filter`, as libseccomp's `seccomp_export_bpf`
writes), so that no library beyond the standard one is needed.

An allowlist whose floor is Docker's default profile (issue 54; _syscalls.py says which version):
a call is allowed only where Docker's profile allows it to a container without added capabilities,
and not in PROJECT_DENIED. For the one architecture the interpreter runs on (x86_64 or aarch64):
  1. another architecture's system-call convention (i386 through `int 0x80`, x32): process killed
     (Docker allows x32 and i386 as sub-architectures; the verifier needs neither);
  2. `socket`/`socketpair`: AF_UNIX only, else EAFNOSUPPORT (Docker allows every family but 12, 34,
     37, 38, 40 and above; the verifier needs no network, and on cgroup v1 the memory of UDP
     buffers is charged to no cgroup, TCP's only with memory.kmem.tcp.limit_in_bytes);
  3. `clone` with any namespace flag: EPERM (Docker: the same mask, 0x7E020000); `clone3` (its
     flags live in memory that a filter cannot read): ENOSYS, as Docker, so that the C library falls
     back to `clone`;
  4. `personality`: only Docker's values (PERSONALITIES), else EPERM;
  5. Docker's unconditional allowlist (plus `arch_prctl` on x86_64, Docker's rule for amd64) less
     PROJECT_DENIED: allowed;
  6. anything else, calls newer than the table included: EPERM (Docker's defaultErrnoRet 1).
"""

from __future__ import annotations

import errno
import platform
import struct

from ._syscalls import DOCKER_ALLOWED, NUMBERS

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
NR, ARCH, ARG0 = 0, 4, 16  # ARG0: the low 32 bits of args[0] on a little-endian machine
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
LD_W_ABS, JEQ, JGT, JGE, JSET, RET = 0x20, 0x15, 0x25, 0x35, 0x45, 0x06

AF_UNIX = 1
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
# Docker's personality rule: PER_LINUX, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32, and the query
# 0xffffffff. The kernel reads the argument as an unsigned int: its low 32 bits are what it sees.
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
CONDITIONAL = ("socket", "socketpair", "clone", "clone3", "personality")  # rules 2-4

# Calls Docker allows that the arithmetic verifier never needs, each with the reason it is denied here.
PROJECT_DENIED = {
    **dict.fromkeys(("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
                     "utimes", "futimesat", "utimensat"),
                    "issue 54: the host's device nodes' mode, owner, times (defence in depth: read-only, not owned)"),
    **dict.fromkeys(("setxattr", "lsetxattr", "fsetxattr", "setxattrat", "removexattr", "lremovexattr",
                     "fremovexattr", "removexattrat"), "issue 54: extended attributes of bound host files"),
    "fallocate": "issue 37: reserving disk past the pipes' and /tmp's caps",
    "memfd_secret": "issue 54: memory hidden from the kernel's own accounting views",
    **dict.fromkeys(("inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch"),
                    "issue 54: watching the host's opens of bound files (ld.so.cache, /dev/null)"),
    "modify_ldt": "issue 54: 16-bit segments, a long history of kernel bugs (Docker allows it on amd64)",
    "name_to_handle_at": "issue 37: file handles, the first half of open_by_handle_at",
}
# Calls Docker's profile denies (no rule allows them without a capability) that the suite tries.
DOCKER_DENIED = ("fanotify_init", "unshare", "setns", "mount", "bpf", "ptrace", "keyctl", "io_uring_setup",
                 "userfaultfd", "perf_event_open")


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def allowed(machine: str) -> list[int]:
    """The numbers rule 5 allows on `machine`, sorted."""
    index = 0 if machine == "x86_64" else 1
    names = set(DOCKER_ALLOWED) | ({"arch_prctl"} if machine == "x86_64" else set())
    names -= set(PROJECT_DENIED) | set(CONDITIONAL)
    return sorted(NUMBERS[name][index] for name in names if NUMBERS[name][index] is not None)


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for n in numbers:
        if ranges and ranges[-1][1] == n - 1:
            ranges[-1] = (ranges[-1][0], n)
        else:
            ranges.append((n, n))
    return ranges


def program(machine: str | None = None) -> bytes:
    """The filter for `machine` (platform.machine() by default); ValueError for another."""
    machine = machine or platform.machine()
    if machine not in AUDIT_ARCH:
        raise ValueError(f"no seccomp filter for the {machine} architecture (x86_64 and aarch64 only)")
    nr = {name: NUMBERS[name][0 if machine == "x86_64" else 1] for name in CONDITIONAL}
    deny, allow = _op(RET, RET_ERRNO | errno.EPERM), _op(RET, RET_ALLOW)
    ops = [_op(LD_W_ABS, ARCH), _op(JEQ, AUDIT_ARCH[machine], jt=1), _op(RET, RET_KILL_PROCESS), _op(LD_W_ABS, NR)]
    if machine == "x86_64":
        ops += [_op(JGE, X32_SYSCALL_BIT, jf=1), _op(RET, RET_KILL_PROCESS)]
    for name in ("socket", "socketpair"):  # the 4 instructions after the match all end in a return
        ops += [_op(JEQ, nr[name], jf=4), _op(LD_W_ABS, ARG0), _op(JEQ, AF_UNIX, jf=1), allow,
                _op(RET, RET_ERRNO | errno.EAFNOSUPPORT)]
    ops += [_op(JEQ, nr["clone"], jf=4), _op(LD_W_ABS, ARG0), _op(JSET, CLONE_NAMESPACES, jf=1), deny, allow]
    ops += [_op(JEQ, nr["clone3"], jf=1), _op(RET, RET_ERRNO | errno.ENOSYS)]
    n = len(PERSONALITIES)
    ops += [_op(JEQ, nr["personality"], jf=n + 3), _op(LD_W_ABS, ARG0)]
    ops += [_op(JEQ, value, jt=n - i) for i, value in enumerate(PERSONALITIES)] + [deny, allow]
    ops.append(_op(LD_W_ABS, NR))  # rule 5: A is the call's number again; ranges ascending
    for low, high in _ranges(allowed(machine)):  # above high: the next range; in [low, high]: allowed
        ops += [_op(JGT, high, jt=2), _op(JGE, low, jf=1), allow]
    ops.append(deny)
    return b"".join(ops)
