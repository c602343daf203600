"""The benchmark scripts run (quick mode) and print their tables, so they cannot rot."""

import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.workflow
def test_benchmarks_quick_mode_prints_every_table():
    result = subprocess.run([sys.executable, "benchmarks/run.py", "--quick"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("preprocessing", "restore", "generation", "store", "evaluation_memory", "workflow"):
        assert f"## {name}" in result.stdout
    assert "ratio decode / header" in result.stdout
    assert "ratio_disk_over_memory" in result.stdout
