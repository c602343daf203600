"""A workflow killed at any moment and rerun continues from what finished and ends with the same
results as an uninterrupted run. Each moment is reached deterministically: a job kills its whole
process group (Snakemake with it) at a named point (TTRL_BENCH_TEST_KILL_AT, runs/kill_points.py), and
Snakemake itself is killed half-way through deleting the adapted weights (temp()) by a wrapper of the
shutil.rmtree it deletes directories with (snakemake/io/__init__.py `remove`)."""

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.workflow import copy_workflow, workflow_env, run_snakemake
from ttrl_bench.models.saved import RECORD, missing_files
from ttrl_bench.results.store import query
from ttrl_bench.runs.kill_points import ENV, MOMENTS

# one GRPO method: every moment below happens in its jobs; the zero-shot row shares the store
SMALL = """\
datasets: [demo-digits]
methods: [zero-shot, ttrl-majority]
adaptation:
  n_samples: 4  # the adaptation runs three times in the killed workdir, four in all: 4 samples keep that short
  hyperparameters:  # every rollout votes and is trained (the demo's 16 votes: 4 times the generation)
    mcq: {num_generations: 4, n_votes: 4, micro_batch_size: 4, max_completion_length: 6, learning_rate: 3.0e-5,
          epochs: 1}
evaluation: {mcq: {samples: 16}}
"""
ADAPTED = "results/adapt/demo/ttrl-majority/demo-digits/n4_random/seed0"
ADAPTED_EVAL = "results/eval/demo/ttrl-majority/demo-digits/demo-digits/n4_random/seed0"

# Snakemake killed while it removes the adapted weights (temp()), after their evaluation finished: the
# files unlinked but generation_config.json, the state the issue 52 run was left in. (Snakemake also
# removes the outputs of a job it reruns, the weights of an adaptation a kill left incomplete among them:
# before their evaluation's metrics exist, that is not the moment.)
KILLED_IN_TEMP_REMOVAL = """
import os, runpy, shutil, signal, sys
from pathlib import Path

rmtree = shutil.rmtree

def killed_half_way(path, *args, **kwargs):
    path = Path(path)
    if path.name == "model" and "adapt" in path.parts and Path("%s/metrics.json").exists():
        for f in path.rglob("*"):
            if f.is_file() and f.name != "generation_config.json":
                f.unlink()
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return rmtree(path, *args, **kwargs)

shutil.rmtree = killed_half_way
sys.argv = ["snakemake", *sys.argv[1:]]
runpy.run_module("snakemake", run_name="__main__")
""" % ADAPTED_EVAL


def _store(work: Path):
    db = work / "results/benchmark.duckdb"
    runs = query(db, "SELECT run_id, value, n, n_unparsable FROM runs ORDER BY run_id")
    predictions = query(db, "SELECT run_id, id, raw_output FROM predictions ORDER BY run_id, id")
    train_log = query(db, "SELECT method, step, reward_mean, rollout_accuracy FROM train_log ORDER BY method, step")
    return runs, predictions, train_log


def _killed(work: Path, args: list[str], moment: str) -> str:
    """Run Snakemake until it is killed at `moment`; its log. A killed Snakemake leaves its lock behind:
    what a user does next is unlock, then rerun."""
    env = workflow_env()
    if moment == "temp-removal":
        command = [sys.executable, "-c", KILLED_IN_TEMP_REMOVAL, *args]
    else:
        command, env[ENV] = [sys.executable, "-m", "snakemake", *args], moment
    # its own process group: what the kill takes down is this Snakemake and its jobs, never pytest
    run = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, start_new_session=True)
    assert run.returncode == -signal.SIGKILL, f"not killed at {moment}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    run_snakemake(work, "--unlock", "--configfile", "small.yaml")
    return run.stdout + run.stderr


@pytest.mark.workflow
def test_killed_run_resumes_to_the_same_results(tmp_path, demo_data, scene_data, tiny_model_dir):
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    for work in (killed, clean):
        work.mkdir()
        copy_workflow(work)
        (work / "small.yaml").write_text(SMALL)
        # prepared data and a demo-shaped model (conftest: the demo's builder, 5 steps): any model will
        # do, resuming the adaptations and evaluations is what is tested (copy2 keeps times: up to date)
        for source, dest in ((demo_data, "results/data/demo-digits"), (scene_data, "results/data/demo-digit-scenes"),
                             (tiny_model_dir, "results/models/demo")):
            shutil.copytree(source, work / dest)
    # the store is what is compared: tables, figures and the reward audit are not built
    # (the target first: --configfile takes every argument after it)
    args = ["results/benchmark.duckdb", "--cores", "2", "--configfile", "small.yaml"]
    model, adapted_eval = killed / ADAPTED / "model", killed / ADAPTED_EVAL

    # each kill lands in the rerun of the one before: the killed job is rerun (rerun-incomplete,
    # profiles/default) and reaches the next moment
    _killed(killed, args, "adapt-save")  # half the checkpoint written
    assert (model / "config.json").exists() and missing_files(model) == [RECORD]
    _killed(killed, args, "adapt-outputs")  # the weights and train log written, run.json not
    assert not missing_files(model) and (killed / ADAPTED / "train_log.parquet").exists()
    assert not (killed / ADAPTED / "run.json").exists()
    _killed(killed, args, "evaluate")  # predictions written, metrics not (the zero-shot or the adapted row's)
    assert any(not (p.parent / "metrics.json").exists() for p in (killed / "results/eval").rglob("predictions.parquet"))
    _killed(killed, args, "temp-removal")  # the evaluation finished, its weights half-deleted
    assert (adapted_eval / "metrics.json").exists()
    assert sorted(p.name for p in model.iterdir()) == ["generation_config.json"]
    _killed(killed, args, "ingest")  # the store's first table written to its temporary file
    assert (killed / "results/benchmark.duckdb.tmp").exists() and not (killed / "results/benchmark.duckdb").exists()

    rerun = run_snakemake(killed, *args)
    # the evaluation that finished is not redone (its half-deleted weights would be loaded), nor the adaptation
    assert f"output: {ADAPTED_EVAL}" not in rerun.stdout + rerun.stderr
    assert f"output: {ADAPTED}" not in rerun.stdout + rerun.stderr

    run_snakemake(clean, *args)
    for resumed, uninterrupted in zip(_store(killed), _store(clean)):
        assert resumed.equals(uninterrupted)


def test_every_named_moment_is_reached_by_the_resume_test():
    """The moments the library can kill at are exactly those test_killed_run_resumes_to_the_same_results
    kills at (plus Snakemake's own temp removal): a new kill point is tested, a removed one is not asked for."""
    text = Path(__file__).read_text()
    asked = {m for m in MOMENTS if f'_killed(killed, args, "{m}")' in text}
    assert asked == set(MOMENTS)
    source = Path(__file__).resolve().parents[2] / "src/ttrl_bench"
    called = {line.split('kill_point("')[1].split('"')[0] for p in source.rglob("*.py")
              for line in p.read_text().splitlines() if 'kill_point("' in line}
    assert called == set(MOMENTS)
