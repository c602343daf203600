"""A real one-node SLURM cluster for the tests: slurm.conf written here, munged, slurmctld and
slurmd started and stopped here (Debian's slurm-wlm and munge; root). Two fake GPUs are declared
(gres backed by character devices like /dev/null) so that `--gpus=1` and `--gpus=2` jobs are
scheduled as on a GPU node."""

from __future__ import annotations

import os
import stat
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from tests.support import free_ports

DAEMONS = ("munged", "slurmctld", "slurmd")
# The configuration goes where every SLURM client looks by default: the slurm jobstep executor
# strips SLURM_* variables (SLURM_CONF too) before its nested `srun`, so a config elsewhere is
# not found inside jobs. We only ever replace a file we wrote ourselves.
CONF_DIR = Path("/etc/slurm")
MARKER = "# written by ttrl-bench tests/support/slurm_cluster.py"


def slurm_available() -> str | None:
    """None when a cluster can be started here, else why not."""
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "the one-node cluster runs its daemons as root"
    conf = CONF_DIR / "slurm.conf"
    if conf.exists() and MARKER not in conf.read_text():
        return f"{conf} belongs to a real SLURM installation; not overwriting it"
    return None


def _write_conf(root: Path) -> Path:
    host = socket.gethostname()
    ctld_port, slurmd_port = free_ports(2)
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    conf = CONF_DIR / "slurm.conf"
    conf.write_text(
        f"""{MARKER}
ClusterName=ttrlbenchtest
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
# Declare a GPU-node-sized machine (16 CPUs, 64 GB) whatever this host has, so the profile's
# requests (8 CPUs per GPU) schedule unchanged; config_overrides makes slurmd accept it.
SlurmdParameters=config_overrides
NodeName={host} CPUs=16 RealMemory=64000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
    )
    # two fake GPUs: character devices with /dev/null's numbers (slurm wants one device file per GPU)
    devices = root / "dev"
    devices.mkdir(parents=True, exist_ok=True)
    for i in range(2):
        if not (devices / f"gpu{i}").exists():
            os.mknod(devices / f"gpu{i}", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    (CONF_DIR / "gres.conf").write_text(f"{MARKER}\nNodeName={host} Name=gpu Count=2 File={devices}/gpu[0-1]\n")
    return conf


def _kill(pid_file: Path) -> None:
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text().strip()), 15)
        except (ProcessLookupError, ValueError):
            pass


@contextmanager
def one_node_cluster(root: Path, timeout: float = 300.0):
    """Yields the environment (SLURM_CONF) under which sbatch / squeue reach the cluster. The wait for an idle
    node ends as soon as it is: its limit only stops a node that never comes up, with room for a loaded machine."""
    conf = _write_conf(root)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    subprocess.run(["munged", "--force"], check=False, capture_output=True)
    subprocess.run(["slurmctld"], env=env, check=True)
    subprocess.run(["slurmd"], env=env, check=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout.strip()
            if state == "idle":
                break
            if time.monotonic() > deadline:
                log = (root / "log" / "slurmctld.log").read_text()[-2000:]
                raise RuntimeError(f"SLURM node not idle after {timeout} s (state {state!r}):\n{log}")
            time.sleep(1)
        yield env
    finally:
        subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True)
        _kill(root / "slurmd.pid")
        _kill(root / "slurmctld.pid")
        for name in ("slurm.conf", "gres.conf"):
            (CONF_DIR / name).unlink(missing_ok=True)
