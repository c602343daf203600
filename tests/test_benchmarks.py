"""The benchmark scripts run (quick mode) and print their tables, so they cannot rot."""

import os
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.workflow
def test_benchmarks_quick_mode_prints_every_table(tmp_path):
    result = subprocess.run([sys.executable, "benchmarks/run.py", "--quick"], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "TTRL_BENCH_BENCHMARK_OUT": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("preprocessing", "restore", "generation", "store", "evaluation_memory", "workflow"):
        assert f"## {name}" in result.stdout
    assert "ratio decode / header" in result.stdout
    assert "ratio_disk_over_memory" in result.stdout


@pytest.mark.workflow
def test_gpu_benchmark_runs_its_code_paths_on_tiny_models(tmp_path):
    """benchmarks/gpu.py --tiny: the GPU benchmark's adaptation, per-sample and evaluation paths on
    the CPU. TTRV: 20 samples at 2 prompts per step, 1 epoch -> 10 optimizer steps; VR-TTRL: one
    sample, one round of one update."""
    import pandas as pd

    for model, method in (("tiny-internvl", "ttrv"), ("tiny-qwen2.5-vl", "vr-ttrl")):
        result = subprocess.run([sys.executable, "benchmarks/gpu.py", "--tiny", "--models", model, "--methods", method],
                                cwd=REPO, capture_output=True, text=True,
                                env={**os.environ, "TTRL_BENCH_BENCHMARK_OUT": str(tmp_path)})
        assert result.returncode == 0, result.stderr[-3000:]
        table = pd.read_csv(tmp_path / "gpu-cpu-tiny.csv").set_index("method")
        assert table.loc[method, "optimizer_steps"] == {"ttrv": 10, "vr-ttrl": 1}[method]
        assert table.loc["greedy-eval", "eval_samples"] == 16 and table.loc["greedy-eval", "eval_samples_per_s"] > 0
        assert 0.0 <= table.loc[method, "weights_changed"] <= 1.0
