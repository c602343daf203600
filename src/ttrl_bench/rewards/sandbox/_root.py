"""Where the caller is root (issue 54): the sandboxed code never runs as host root, which owns the
host's device nodes (a second review changed the host's /dev/null from inside). The child that execs
bubblewrap joins the cgroup, enters a mount namespace made once per process (`namespace`), then drops
to uid/gid UNPRIVILEGED; bubblewrap then runs unprivileged, as it does for any other caller.

That mount namespace (private: nothing in it propagates to the host) holds
- the host's device nodes bound read-only at their own paths, without nodev (bubblewrap's --ro-bind
  and --remount-ro add nodev, which makes a device unopenable): bubblewrap's --dev-bind copies these
  mounts, the read-only flag locked in its user namespace, so chmod, chown, utime and xattrs on them
  get EROFS while reads and writes work;
- a tmpfs over STAGE (an empty folder of root's on the host) with each file and folder of the
  interpreter's view bound at STAGE/N: UNPRIVILEGED may not search where the interpreter lives
  (/root/.pyenv), bubblewrap binds them from there. (bubblewrap's --ro-bind-fd resolves the
  descriptor back to its path, which does not help.)
It is made once, not per run, because tearing a mount namespace down waits for the kernel (RCU): a
second namespace per call cost about 10 ms on a loaded machine (benchmarks/results/sandbox.md).
"""

from __future__ import annotations

import functools
import os

UNPRIVILEGED = 65534  # `nobody`: owns nothing of the host's
DEVICES = ("null", "zero", "urandom")
STAGE = "/tmp/ttrl-sandbox-stage"
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = \
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18


def drops() -> bool:
    """Whether the sandbox drops to UNPRIVILEGED: where the caller is root."""
    return os.geteuid() == 0


@functools.cache
def _libc():
    """The C library's mount, unshare and setns, loaded in the parent (once) so children only call them."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _check(result: int, step: str) -> None:
    if result != 0:
        import ctypes

        raise OSError(ctypes.get_errno(), f"{step} (the sandbox's mount namespace)")


def _private_mounts(staged: tuple[tuple[str, bool], ...]) -> None:
    """In a child of its own: unshare the mount namespace and lay it out (the module docstring)."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "private /")
    for dev in DEVICES:
        path = f"/dev/{dev}".encode()
        _check(libc.mount(path, path, None, MS_BIND, None), f"bind {path}")
        _check(libc.mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, None),
               f"read-only {path}")
    _check(libc.mount(b"tmpfs", STAGE.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=64k"), "stage")
    for i, (source, is_dir) in enumerate(staged):
        target = f"{STAGE}/{i}"
        os.mkdir(target) if is_dir else os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o444))
        _check(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source}")


@functools.cache
def prepare(view: tuple[str, ...]) -> tuple[tuple[str, ...], int]:
    """(the interpreter's view with each --ro-bind source at STAGE/N, a descriptor of the mount
    namespace), once per process. The namespace is made by a child that waits until this process
    holds the descriptor (which keeps the namespace alive), then exits. OSError when any step fails."""
    args, staged, items = [], [], iter(view)
    for arg in items:
        args.append(arg)
        if arg == "--ro-bind":
            source = next(items)
            staged.append((source, os.path.isdir(source)))
            args.append(f"{STAGE}/{len(staged) - 1}")
    os.makedirs(STAGE, mode=0o755, exist_ok=True)
    if os.path.islink(STAGE) or not os.path.isdir(STAGE) or os.lstat(STAGE).st_uid != 0:
        raise OSError(f"{STAGE} is not a folder of root's; remove it (the sandbox mounts over it)")
    _libc()
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: lay the namespace out, report, wait for the parent's descriptor
        status = b"ok"
        try:
            os.close(ready_r)
            os.close(hold_w)  # else its own copy would keep the read below waiting forever
            _private_mounts(tuple(staged))
        except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
            status = (str(err) or type(err).__name__).encode()[:400]
        os.write(ready_w, status)
        os.read(hold_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(hold_r)
    try:
        status = os.read(ready_r, 500)
        if status != b"ok":
            raise OSError(status.decode(errors="replace"))
        namespace = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(hold_w)
        os.close(ready_r)
        os.waitpid(pid, 0)
    return tuple(args), namespace


def enter(namespace: int) -> None:
    """In the child that execs bubblewrap, after it joined the cgroup: the mount namespace, then
    never host root again (supplementary groups, gid, uid)."""
    _check(_libc().setns(namespace, CLONE_NEWNS), "setns")
    os.setgroups([])
    os.setgid(UNPRIVILEGED)
    os.setuid(UNPRIVILEGED)
