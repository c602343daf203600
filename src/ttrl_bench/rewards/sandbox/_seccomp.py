"""The sandbox's seccomp filter, generated here as a classic BPF program (the format bubblewrap's
`--seccomp FD` reads: an array of `struct sock_filter`, as libseccomp's `seccomp_export_bpf`
writes), so that no library beyond the standard one is needed.

The program, for the one architecture the interpreter runs on (x86_64 or aarch64):
  1. another architecture's system-call convention (i386 through `int 0x80`, x32): process killed;
  2. `socket`/`socketpair`: allowed for AF_UNIX, AF_INET, AF_INET6 only, else EAFNOSUPPORT
     (AF_VSOCK, AF_NETLINK, AF_PACKET, AF_BLUETOOTH, ...: the network namespace does not cover
     vsock, netlink reaches the kernel's netfilter and routing);
  3. `clone` with any namespace flag: EPERM; `clone3` (its flags live in memory that a filter
     cannot read): ENOSYS, so that the C library falls back to `clone`;
  4. every call in DENIED: EPERM;
  5. anything else: allowed.
The numbers were checked against libseccomp's tables (tests/test_sandbox_seccomp.py does it again
where libseccomp is installed).
"""

from __future__ import annotations

import errno
import platform
import struct

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
NR, ARCH, ARG0 = 0, 4, 16  # ARG0: the low 32 bits of args[0] on a little-endian machine
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06

AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

SYSCALLS = {  # name: (x86_64, aarch64)
    "socket": (41, 198), "socketpair": (53, 199), "clone": (56, 220), "clone3": (435, 435),
    "unshare": (272, 97), "setns": (308, 268),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "fallocate": (285, 47),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431),
    "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "acct": (163, 89), "quotactl": (179, 60),
}
DENIED = tuple(name for name in SYSCALLS if name not in ("socket", "socketpair", "clone", "clone3"))


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The filter for `machine` (platform.machine() by default); ValueError for another."""
    machine = machine or platform.machine()
    if machine not in AUDIT_ARCH:
        raise ValueError(f"no seccomp filter for the {machine} architecture (x86_64 and aarch64 only)")
    nr = {name: numbers[0 if machine == "x86_64" else 1] for name, numbers in SYSCALLS.items()}
    deny = _op(RET, RET_ERRNO | errno.EPERM)
    ops = [_op(LD_W_ABS, ARCH), _op(JEQ, AUDIT_ARCH[machine], jt=1), _op(RET, RET_KILL_PROCESS), _op(LD_W_ABS, NR)]
    if machine == "x86_64":
        ops += [_op(JGE, X32_SYSCALL_BIT, jf=1), _op(RET, RET_KILL_PROCESS)]
    for name in ("socket", "socketpair"):  # the 6 instructions after the match all end in a return
        ops += [_op(JEQ, nr[name], jf=6), _op(LD_W_ABS, ARG0), _op(JEQ, AF_UNIX, jt=3), _op(JEQ, AF_INET, jt=2),
                _op(JEQ, AF_INET6, jt=1), _op(RET, RET_ERRNO | errno.EAFNOSUPPORT), _op(RET, RET_ALLOW)]
    ops += [_op(JEQ, nr["clone"], jf=4), _op(LD_W_ABS, ARG0), _op(JSET, CLONE_NAMESPACES, jf=1), deny,
            _op(RET, RET_ALLOW)]
    ops += [_op(JEQ, nr["clone3"], jf=1), _op(RET, RET_ERRNO | errno.ENOSYS)]
    for name in DENIED:
        ops += [_op(JEQ, nr[name], jf=1), deny]
    ops.append(_op(RET, RET_ALLOW))
    return b"".join(ops)
