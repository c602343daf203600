"""The demo through the SLURM profile on a real (one-node) SLURM cluster."""

import json
import os

import pytest

from slurm_cluster import one_node_cluster, slurm_available
from test_workflow import _copy_workflow, _snakemake
from ttrl_bench.results.store import query

# CI installs SLURM and sets this: there, a missing SLURM is a failure, not a skip.
REQUIRED = os.environ.get("TTRL_BENCH_REQUIRE_SLURM") == "1"
WHY_NOT = slurm_available()

# The demo model as a 2-GPU model: its adaptation job asks SLURM for 2 GPUs and runs as 2 processes
# (accelerate launch, FSDP2; on this CPU-only node over gloo), each holding one prompt's group.
SMALL_DEMO = """\
datasets: [demo-digits]
methods: [zero-shot, ttrv]
models:
  demo: {gpus: 2}
adaptation:
  hyperparameters:
    mcq: {num_generations: 4, n_votes: 4, micro_batch_size: 2, prompts_per_step: 2, max_completion_length: 6,
          learning_rate: 3.0e-5, epochs: 1}
evaluation: {mcq: {samples: 64}}
demo_model: {warm_start_steps: 20}   # any model will do: the scheduling is what is tested
"""


@pytest.mark.workflow
def test_demo_runs_through_the_slurm_profile(tmp_path):
    if WHY_NOT:
        if REQUIRED:
            pytest.fail(f"SLURM is required here but {WHY_NOT}")
        pytest.skip(f"no SLURM: {WHY_NOT}")
    (tmp_path / "work").mkdir()
    work = _copy_workflow(tmp_path / "work")
    (work / "small.yaml").write_text(SMALL_DEMO)
    with one_node_cluster(tmp_path / "cluster") as env:
        os.environ.update(SLURM_CONF=env["SLURM_CONF"], TTRL_SLURM_PARTITION="debug", TTRL_SLURM_ACCOUNT="")
        try:
            result = _snakemake(
                work, "--workflow-profile", "profiles/slurm", "--configfile", "small.yaml", "--verbose",
                "--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "2",
                "--slurm-no-account",
            )
        finally:
            for key in ("SLURM_CONF", "TTRL_SLURM_PARTITION", "TTRL_SLURM_ACCOUNT"):
                os.environ.pop(key, None)
    output = result.stdout + result.stderr
    sbatch = [line for line in output.splitlines() if "sbatch call" in line]
    (tmp_path / "sbatch_calls.txt").write_text("\n".join(sbatch))
    print("\n".join(sbatch))
    # every non-local job went through sbatch; the GPU rules asked for their GPUs and memory: adaptation
    # 2 GPUs (models.demo.gpus) with 8 CPUs each, evaluation one
    adapt = [line for line in sbatch if "rule_adapt" in line]
    assert adapt and all(f in adapt[0] for f in ("--gpus=2", "--cpus-per-gpu=8", "--mem 8000", "-t 40")), adapt
    assert any("rule_evaluate" in line and "--gpus=1" in line for line in sbatch), sbatch
    run = json.loads((work / "results/adapt/demo/ttrv/demo-digits/n20_random/seed0/run.json").read_text())
    assert run["processes"] == 2 and run["optimizer_steps"] == 10  # 20 samples, 2 prompts a step
    assert not any("rule_ingest_results" in line for line in sbatch)  # a localrule
    runs = query(work / "results/benchmark.duckdb", "SELECT method, n FROM runs ORDER BY method")
    assert runs.values.tolist() == [["ttrv", 64], ["zero-shot", 64]]
