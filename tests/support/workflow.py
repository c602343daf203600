"""Builders shared by the tests that run Snakemake on a copy of the checkout (tests/workflow/ and the plan's
dry runs)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

WORKFLOW_FILES = ["Snakefile", "rules", "config", "workflow", "profiles", "envs", "src"]


def copy_workflow(dest: Path) -> Path:
    for name in WORKFLOW_FILES:
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    return dest


def workflow_env() -> dict:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def run_snakemake(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = workflow_env()
    result = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def job_counts(stdout: str) -> dict[str, int]:
    table = stdout.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}
