"""A workflow killed mid-way and rerun continues from what finished and ends with the same
results as an uninterrupted run."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_workflow import _copy_workflow, _snakemake
from ttrl_bench.results.store import query

SMALL = """\
datasets: [demo-digits]
methods: [zero-shot, ttrl-majority, ttrv]
adaptation:
  hyperparameters:
    mcq: {num_generations: 4, max_completion_length: 6, learning_rate: 3.0e-5, epochs: 1}
evaluation: {mcq: {samples: 64}}
"""


def _store(work: Path):
    db = work / "results/benchmark.duckdb"
    runs = query(db, "SELECT run_id, value, n, n_unparsable FROM runs ORDER BY run_id")
    predictions = query(db, "SELECT run_id, id, raw_output FROM predictions ORDER BY run_id, id")
    train_log = query(db, "SELECT method, step, reward_mean, rollout_accuracy FROM train_log ORDER BY method, step")
    return runs, predictions, train_log


@pytest.mark.workflow
def test_killed_run_resumes_to_the_same_results(tmp_path, demo_data, scene_data, tiny_model_dir):
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    for work in (killed, clean):
        work.mkdir()
        _copy_workflow(work)
        (work / "small.yaml").write_text(SMALL)
        # prepared data and a demo-shaped model (conftest: the demo's builder, 5 steps): any model will
        # do, resuming the adaptations and evaluations is what is tested (copy2 keeps times: up to date)
        for source, dest in ((demo_data, "results/data/demo-digits"), (scene_data, "results/data/demo-digit-scenes"),
                             (tiny_model_dir, "results/models/demo")):
            shutil.copytree(source, work / dest)
    # the store is what is compared: tables, figures and the reward audit are not built
    # (the target first: --configfile takes every argument after it)
    args = ["results/benchmark.duckdb", "--cores", "2", "--configfile", "small.yaml"]

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    log = tmp_path / "killed.log"
    with log.open("w") as sink:
        process = subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=killed, env=env,
                                   stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 900
        # kill once Snakemake has recorded an evaluation as finished (other jobs run on)
        while not re.search(r"Finished jobid: \d+ \(Rule: evaluate\)", log.read_text()):
            assert process.poll() is None, "the workflow ended before it could be killed:\n" + log.read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGKILL)  # the scheduler and every running job, mid-way
    process.wait()
    text = log.read_text()
    outputs = dict(re.findall(r"rule evaluate:\n(?:\s+input:.*\n)?\s+output: (\S+predictions\.parquet),[^\n]*\n(?:.*\n)*?\s+jobid: (\d+)", text))
    outputs = {jobid: path for path, jobid in outputs.items()}
    finished = [outputs[j] for j in re.findall(r"Finished jobid: (\d+) \(Rule: evaluate\)", text)]
    assert finished and all((killed / path).exists() for path in finished)
    assert not (killed / "results/benchmark.duckdb").exists()

    # a killed Snakemake leaves its lock behind: what a user does next is unlock, then rerun
    _snakemake(killed, "--unlock", "--configfile", "small.yaml")
    rerun = _snakemake(killed, *args)
    # what finished before the kill is not redone
    for path in finished:
        assert f"output: {path}" not in rerun.stdout + rerun.stderr, path

    _snakemake(clean, *args)
    for resumed, uninterrupted in zip(_store(killed), _store(clean)):
        assert resumed.equals(uninterrupted)
