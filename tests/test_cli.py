"""The command line: every log starts with a command that reruns the step, and its errors say
what to do (missing adapted weights, a store locked by another process)."""

import os
import subprocess
import sys

from ttrl_bench.results.store import ingest


def _cli(*args, cwd, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ttrl_bench.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **env})


def test_the_first_log_line_reruns_the_step_when_pasted(tmp_path):
    work = tmp_path / "a work dir"
    work.mkdir()
    result = _cli("audit-reward", "--groups", "8", "--num-generations", "4", "--out-dir", "out dir", cwd=work)
    assert result.returncode == 0, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"cd '{work}' && env OMP_NUM_THREADS=1 PYTHONPATH=")
    written = work / "out dir" / "reward_audit.csv"
    expected = written.read_bytes()
    written.unlink()
    # pasted into a shell somewhere else: the same step, the same output
    subprocess.run(["bash", "-c", first], cwd=tmp_path, check=True, capture_output=True, env={"PATH": os.environ["PATH"]})
    assert written.read_bytes() == expected


def test_evaluating_deleted_adapted_weights_says_how_to_keep_them(tmp_path):
    (tmp_path / "run.json").write_text("{}")
    result = _cli("evaluate", "--model-source", "results/adapt/demo/ttrv/demo-digits/n20_random/seed0/model",
                  "--adapt-run", "run.json", "--model-name", "demo", "--method", "ttrv", "--dataset", "demo-digits",
                  "--data", "results/data/demo-digits", "--out", "out", "--backend", "hf", cwd=tmp_path)
    assert result.returncode == 1
    assert "adapted weights results/adapt/demo/ttrv/demo-digits/n20_random/seed0/model are gone" in result.stderr
    assert "`adaptation.keep_adapted_weights: true`" in result.stderr
    assert "models.<name>.source" not in result.stderr


def test_a_store_locked_by_another_process_names_it_and_the_retry_command(tmp_path):
    db = tmp_path / "benchmark.duckdb"
    ingest(db, [], [], [])
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(db)!r}); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        result = _cli("render-tables", "--db", str(db), "--out-dir", "tables", cwd=tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert f"{db} is held read-write by another process (PID {holder.pid}: {sys.executable} -c import duckdb" in errors[0]
    assert errors[1].endswith("then retry: " + result.stderr.splitlines()[0])
    assert "Traceback" not in result.stderr
    # once released, the same command works
    assert _cli("render-tables", "--db", str(db), "--out-dir", "tables", cwd=tmp_path).returncode == 0
