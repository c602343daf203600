"""A cgroup of each sandbox's own, holding the memory and the number of processes of the whole
sandbox (every process bubblewrap starts inherits it), in whichever hierarchy the node offers:

- cgroup v2, where the memory and pids controllers reach this process's cgroup: a child of it when
  its `cgroup.subtree_control` already enables them (a namespace's root cgroup), else a sibling
  (the parent's children have them; a sibling stays under every ancestor's limit, a SLURM job's
  included); nothing here enables a controller;
  `memory.max`, `memory.swap.max` 0, `pids.max`;
- cgroup v1's `memory` and `pids` hierarchies otherwise (a child of this process's cgroup in each):
  `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`), `pids.max`, and
  `memory.kmem.tcp.limit_in_bytes` (v1 charges TCP buffers to the cgroup only once it is written,
  UDP's never: the seccomp filter allows no IP socket, this is the second layer; issue 54).

The process that execs bubblewrap joins it before the exec (`join`, from subprocess's preexec_fn),
so nothing of the sandbox ever runs outside it. `CgroupUnavailable` names what is missing.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "ttrl-sandbox-"
STALE_S = 600  # a sandbox's cgroup older than this is left over (runs last seconds), whichever its PID


class CgroupUnavailable(RuntimeError):
    """No cgroup with memory and pids limits can be made for the sandbox here."""


@dataclass(frozen=True)
class _Mount:
    point: str
    root: str
    version: int
    controllers: frozenset


def _mounts(mountinfo: str) -> list[_Mount]:
    mounts = []
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, (fstype, _, options) = left.split(), (right.split() + ["", "", ""])[:3]
        if fstype in ("cgroup", "cgroup2"):
            point = fields[4].replace("\\040", " ")
            controllers = frozenset(options.split(",")) if fstype == "cgroup" else frozenset()
            mounts.append(_Mount(point, fields[3], 2 if fstype == "cgroup2" else 1, controllers))
    return mounts


def _own_paths(cgroups: str) -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    paths = {}
    for line in cgroups.splitlines():
        _id, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _under(mount: _Mount, path: str) -> Path:
    relative = os.path.relpath(path, mount.root) if path.startswith(mount.root) else path.lstrip("/")
    return Path(mount.point) / ("" if relative == "." else relative)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@functools.cache
def parents() -> tuple[int, tuple[Path, ...]] | str:
    """Where this process can make the sandboxes' cgroups: (version, the parent folder per
    hierarchy; v1: memory's then pids'); else a sentence naming what is missing."""
    return find(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())


def find(mountinfo: str, cgroups: str) -> tuple[int, tuple[Path, ...]] | str:
    """`parents` from the text of /proc/self/mountinfo and /proc/self/cgroup."""
    mounts, own = _mounts(mountinfo), _own_paths(cgroups)
    missing = []
    for mount in (m for m in mounts if m.version == 2):
        if "" not in own:
            break
        here = _under(mount, own[""])
        enabled = set(_read(here / "cgroup.subtree_control").split())
        if {"memory", "pids"} <= enabled and os.access(here, os.W_OK):
            return 2, (here,)
        available = set(_read(here / "cgroup.controllers").split())
        if {"memory", "pids"} <= available and here != Path(mount.point) and os.access(here.parent, os.W_OK):
            return 2, (here.parent,)
        missing.append(f"cgroup v2 at {mount.point}: this process's cgroup {own['']} has the controllers "
                       f"{sorted(available) or 'none'}, not memory and pids delegated to it")
    v1 = {}
    for controller in ("memory", "pids"):
        mount = next((m for m in mounts if m.version == 1 and controller in m.controllers), None)
        if mount is None or controller not in own:
            missing.append(f"no cgroup v1 {controller} hierarchy")
            continue
        here = _under(mount, own[controller])
        if not os.access(here, os.W_OK):
            missing.append(f"cgroup v1 {controller} at {here} is not writable by this user")
            continue
        v1[controller] = here
    if len(v1) == 2:
        return 1, (v1["memory"], v1["pids"])
    return "; ".join(missing) or "no cgroup filesystem mounted"


@dataclass
class Cgroup:
    """One sandbox's cgroup (v2: one folder; v1: one in memory's hierarchy, one in pids')."""
    version: int
    folders: tuple[Path, ...]
    memory_bytes: int
    pids_max: int
    _fds: list[int] = field(default_factory=list)

    @classmethod
    def create(cls, name: str, memory_bytes: int, pids_max: int) -> "Cgroup":
        found = parents()
        if isinstance(found, str):
            raise CgroupUnavailable(found)
        version, where = found
        _remove_stale(where)  # once per process
        group = cls(version, tuple(parent / f"{PREFIX}{name}" for parent in where), memory_bytes, pids_max)
        try:
            for folder in group.folders:
                folder.mkdir()
            if version == 2:
                (group.folders[0] / "memory.max").write_text(str(memory_bytes))
                if (group.folders[0] / "memory.swap.max").exists():
                    (group.folders[0] / "memory.swap.max").write_text("0")
                (group.folders[0] / "pids.max").write_text(str(pids_max))
            else:
                (group.folders[0] / "memory.limit_in_bytes").write_text(str(memory_bytes))
                if (group.folders[0] / "memory.memsw.limit_in_bytes").exists():
                    (group.folders[0] / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
                if (group.folders[0] / "memory.kmem.tcp.limit_in_bytes").exists():
                    (group.folders[0] / "memory.kmem.tcp.limit_in_bytes").write_text(str(memory_bytes))
                (group.folders[1] / "pids.max").write_text(str(pids_max))
            group._fds = [os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for folder in group.folders]
        except OSError as err:
            group.remove()
            raise CgroupUnavailable(f"cannot set up the sandbox's cgroup under {where[0]}: {err}") from err
        return group

    def join(self) -> None:
        """Move the calling process into the cgroup (async-signal-safe enough for a preexec_fn)."""
        for fd in self._fds:
            os.write(fd, b"0")

    def events(self) -> dict[str, int]:
        """How often each limit stopped something: {"memory": out-of-memory kills (v1 without that
        count: failed charges), "processes": refused forks}."""
        def count(path: Path, key: str) -> int:
            for line in _read(path).splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
            return 0
        if self.version == 2:
            return {"memory": count(self.folders[0] / "memory.events", "oom_kill"),
                    "processes": count(self.folders[0] / "pids.events", "max")}
        oom = _read(self.folders[0] / "memory.oom_control")
        memory = count(self.folders[0] / "memory.oom_control", "oom_kill") if "oom_kill " in oom else \
            int(_read(self.folders[0] / "memory.failcnt") or 0)
        return {"memory": memory, "processes": count(self.folders[1] / "pids.events", "max")}

    def kill(self) -> None:
        """SIGKILL to every process in it (only the sandbox's processes are)."""
        if self.version == 2 and (self.folders[0] / "cgroup.kill").exists():
            try:
                (self.folders[0] / "cgroup.kill").write_text("1")
                return
            except OSError:
                pass
        for folder in self.folders:
            for pid in _read(folder / "cgroup.procs").split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def remove(self, wait_s: float = 2.0) -> None:
        """Kill what is left, then remove the folders (a dying process leaves its cgroup a moment later)."""
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        deadline = time.monotonic() + wait_s
        for folder in self.folders:
            while folder.exists():
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    break
                except OSError as err:
                    if err.errno != errno.EBUSY or time.monotonic() > deadline:
                        break
                    self.kill()
                    time.sleep(0.002)


@functools.cache
def _remove_stale(parents_: tuple[Path, ...]) -> None:
    """Empty cgroups of sandboxes that were never removed (their process was killed): those whose
    process is gone, and, whatever the PID in their name (it may have been reused), those older
    than STALE_S. A cgroup with a process in it is never removed (rmdir refuses it)."""
    now = time.time()
    for parent in parents_:
        try:
            entries = list(parent.glob(f"{PREFIX}*"))
        except OSError:
            continue
        for folder in entries:
            pid = folder.name[len(PREFIX):].split("-")[0]
            try:
                old = now - folder.stat().st_mtime > STALE_S
            except OSError:
                continue
            if old or (pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists()):
                try:
                    folder.rmdir()
                except OSError:
                    pass
