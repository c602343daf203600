"""The command line: every log starts with a command that reruns the step, and its errors say
what to do (missing adapted weights, a store locked by another process)."""

import os
import re
import subprocess
import sys
from pathlib import Path

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



def test_evaluating_half_deleted_adapted_weights_names_the_directory_and_the_fix(tmp_path):
    """What a kill during Snakemake's removal of the weights left (issue 52: generation_config.json alone)."""
    model = tmp_path / "results/adapt/demo/ttrv/demo-digits/n20_random/seed0/model"
    model.mkdir(parents=True)
    (model / "generation_config.json").write_text("{}")
    (tmp_path / "run.json").write_text("{}")
    result = _cli("evaluate", "--model-source", str(model.relative_to(tmp_path)), "--adapt-run", "run.json",
                  "--model-name", "demo", "--method", "ttrv", "--dataset", "demo-digits", "--data",
                  "results/data/demo-digits", "--out", "out", "--backend", "hf", cwd=tmp_path)
    assert result.returncode == 1
    assert (f"adapted weights {model.relative_to(tmp_path)} are incomplete (missing ttrl_bench_saved.json)"
            in result.stderr)
    assert f"(rm -r {model.relative_to(tmp_path)}) and rerun snakemake: it adapts again" in result.stderr
    assert "Traceback" not in result.stderr

def test_a_store_locked_by_another_process_names_it_and_the_retry_command(tmp_path):
    db = tmp_path / "benchmark.duckdb"
    ingest(db, [], [], [])
    holder = subprocess.Popen(
        # held until killed below, not for a fixed time: a render-tables slowed past it by load found it free
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(db)!r}); print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
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


# --- issue 26 point 7: help, version, presets by name, listings, progress in logs --------------


def test_every_option_of_every_subcommand_has_help():
    import argparse

    from ttrl_bench.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    undocumented = [f"{name} {action.option_strings or action.dest}"
                    for name, sub in [("", parser), *commands.items()] for action in sub._actions
                    if not isinstance(action, argparse._SubParsersAction) and not action.help]
    assert len(commands) >= 13 and undocumented == []


def test_version_is_the_package_version(capsys):
    import tomllib

    import pytest

    from ttrl_bench.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    version = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out == f"ttrl-bench {version}\n"


def test_listings_print_no_rerun_line(capsys):
    from ttrl_bench.cli import main

    for listing in (["methods", "list"], ["datasets", "list"]):
        assert main(listing) == 0
        out, err = capsys.readouterr()
        assert out.split()[0] == "name" and err == ""


def test_a_preset_is_usable_by_name_without_its_json(tmp_path):
    import pytest

    from ttrl_bench.adaptation.presets import resolve_method
    from ttrl_bench.cli import build_parser
    from ttrl_bench.cli.common import method_spec as _method_spec

    common = ["--model-source", "m", "--model-name", "m", "--dataset", "mme", "--data", "d", "--out", "o"]
    args = build_parser().parse_args(["adapt", "--method", "ttrv", *common])
    assert _method_spec(args) == resolve_method("ttrv") and _method_spec(args)["reward"] == "ttrv"
    args = build_parser().parse_args(["adapt-per-sample", "--method", "vr-ttrl", "--adapt-out", "a", *common])
    assert _method_spec(args)["hyperparameters"] == resolve_method("vr-ttrl")["hyperparameters"]
    args = build_parser().parse_args(["adapt", "--method", "ttrv", "--method-json", '{"reward": "x"}', *common])
    assert _method_spec(args) == {"reward": "x"}  # the workflow's resolved preset wins
    with pytest.raises(ValueError, match="does not adapt; run `ttrl-bench evaluate`"):
        _method_spec(build_parser().parse_args(["adapt", "--method", "zero-shot", *common]))
    with pytest.raises(KeyError, match="unknown method 'ttrvv'"):
        _method_spec(build_parser().parse_args(["adapt", "--method", "ttrvv", *common]))


def test_progress_redraws_become_lines_without_padding():
    import io

    from tqdm import tqdm

    from ttrl_bench.runs.progress import CarriageReturnsAsLines

    log = io.StringIO()
    stream = CarriageReturnsAsLines(log)
    stream.write("first log line\n")
    for step in tqdm(range(3), desc="eval", file=stream, mininterval=0, miniters=1, bar_format="{desc} {n}/{total}"):
        if step == 1:
            stream.write("a warning\n")  # printed while the bar is open
    stream.write("\r" + " " * 20 + "\r")  # a bar cleared (leave=False) leaves no blank line
    stream.write("next\n")
    assert log.getvalue() == "first log line\neval 0/3\neval 1/3\na warning\neval 2/3\neval 3/3\nnext\n"


def test_a_job_log_holds_one_progress_line_per_interval(tmp_path):
    """stderr into a file (a job's log): 10,000 fast steps give the first and the last line only
    (TQDM_MININTERVAL = 30 s), not 10,000 carriage-return redraws on one line."""
    script = ("import sys; from ttrl_bench.runs.progress import readable_progress; readable_progress()\n"
              "from tqdm import tqdm\n"
              "for _ in tqdm(range(10000), desc='steps', bar_format='{desc} {n}/{total}'): pass\n")
    with open(tmp_path / "job.log", "w") as log:
        env = {k: v for k, v in os.environ.items() if k != "TQDM_MININTERVAL"}
        subprocess.run([sys.executable, "-c", script], stderr=log, check=True, env=env)
    assert (tmp_path / "job.log").read_text() == "steps 0/10000\nsteps 10000/10000\n"


def test_the_demo_models_warm_start_is_the_same_under_any_thread_count(demo_data, scene_data, tmp_path):
    """Issue 16: a job's OMP_NUM_THREADS is whatever Snakemake's `threads` or the user's shell says (1 or 2 here);
    the job pins torch's own thread count (cli.pin_numerics), so the weights are the same bytes either way.
    Without the pin they are not: TTRL_BENCH_THREADS=1 and =2 (which set torch's threads) give other bytes
    after these 10 steps already (checked by hand, 2026-11-24)."""
    weights = {}
    for threads in ("1", "2"):
        out = tmp_path / f"threads{threads}"
        result = _cli("build-demo-model", "--data", str(demo_data), str(scene_data), "--out", str(out), "--steps", "10",
                      cwd=tmp_path, OMP_NUM_THREADS=threads, TTRL_BENCH_DEMO_CACHE="off")
        assert result.returncode == 0, result.stderr[-3000:]
        weights[threads] = (out / "model.safetensors").read_bytes()
    assert weights["1"] == weights["2"]


def test_pinned_numerics_are_deterministic_without_importing_inductor():
    """A CPU job's pin (cli.pin_numerics): torch's deterministic algorithms on, without their NaN fill of new tensors,
    one thread, and torch._inductor not imported for it (issue 57: `torch.use_deterministic_algorithms` imports
    inductor and dynamo, seconds per job); the CLI itself loads no torch before the pin (its parser once loaded the
    plan, torch and torchvision: 5-15 s per job)."""
    script = ("import sys\nfrom ttrl_bench.cli import build_parser, pin_numerics\nbuild_parser()\n"
              "print('torch' in sys.modules)\npin_numerics()\nimport torch\n"
              "print(torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory, "
              "torch.get_num_threads(), 'torch._inductor' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "TTRL_BENCH_THREADS"}
    out = subprocess.run([sys.executable, "-c", script], env={**env, "CUDA_VISIBLE_DEVICES": ""}, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["False", "True", "False", "1", "False"]


def test_the_demo_model_is_built_once_per_recipe_and_reused_across_run_directories(demo_data, scene_data, tmp_path,
                                                                                   monkeypatch):
    """Issue 57: two run directories (`snakemake --directory runs/<name>`) of one recipe, one build: the second
    copies the first's files from the shared cache, the same bytes; another recipe (3 warm-start steps, not 2)
    builds again, a second cache entry."""
    from ttrl_bench.cli import main
    from ttrl_bench.models import tiny

    builds, real = [], tiny.build_demo_model
    monkeypatch.setattr(tiny, "build_demo_model", lambda out, *a, **k: builds.append(out) or real(out, *a, **k))
    monkeypatch.setenv("TTRL_BENCH_DEMO_CACHE", str(tmp_path / "cache"))

    def build(run: str, steps: int) -> Path:
        out = tmp_path / run / "results/models/demo"
        main(["build-demo-model", "--data", str(demo_data), str(scene_data), "--out", str(out), "--steps", str(steps)])
        return out

    first, second = build("runs/a", 2), build("runs/b", 2)
    assert builds == [first]
    assert sorted(p.name for p in second.iterdir()) == sorted(p.name for p in first.iterdir())
    for name in ("model.safetensors", "tokenizer.json", "build_info.json"):
        assert (second / name).read_bytes() == (first / name).read_bytes()
    build("runs/c", 3)
    assert len(builds) == 2 and len(list((tmp_path / "cache").iterdir())) == 2


def test_targets_name_the_metrics_of_the_runs_that_match_every_filter(tmp_path):
    """`ttrl-bench targets` on config/ttrv.yaml (3 models, 2 protocols in Table 1's block): TTRV on ImageNet-A
    is one metrics.json per model and protocol the config runs it under; adding --model keeps that model's two.
    No match names what the config runs."""
    repo = Path(__file__).resolve().parents[2]
    out = _cli("targets", "config/ttrv.yaml", "--method", "ttrv", "--dataset", "imagenet-a", "--model", "internvl3-2b",
               cwd=repo).stdout.split()
    assert out == [f"results/eval/internvl3-2b/ttrv/imagenet-a/imagenet-a/{p}/seed0/metrics.json"
                   for p in ("n20_random", "n20_random_authors")]
    missing = _cli("targets", "config/config.yaml", "--method", "tttv", cwd=repo)
    assert missing.returncode == 1 and "no job of config/config.yaml matches --method tttv" in missing.stderr
    assert "methods dare, random-reward, ttrl-majority, ttrv," in missing.stderr


def test_a_listing_read_through_head_ends_quietly():
    """`ttrl-bench plan config/ttrv.yaml | head -1`: the reader closes the pipe after one line; the command exits 0
    without a Broken pipe error, and prints no rerun line (a person reads it, no job log keeps it)."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    plan = subprocess.Popen([sys.executable, "-m", "ttrl_bench.cli", "plan", "config/ttrv.yaml"], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert plan.stdout.readline().startswith(b"card: H100 80GB (resources.gpu_model: h100")  # the default card first
    plan.stdout.close()  # about 20 KB are still to come: the next write meets a closed pipe
    stderr = plan.stderr.read().decode()
    assert plan.wait() == 0 and stderr == ""


def test_no_reference_points_outside_the_clone():
    """Papers are cited by title, arXiv id and section; the notes a user needs live in docs/ (issue 38): nothing
    under README.md, docs, config, src, rules or benchmarks names the paper text files or notes no user has."""
    repo = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"papers/[a-z0-9-]+\.txt|authors-runs\.md|gpu-probe\.md|\.\./shared")
    found = [f"{path.relative_to(repo)}:{number}" for base in ("README.md", "docs", "config", "src", "rules", "benchmarks")
             for path in ([repo / base] if (repo / base).is_file() else (repo / base).rglob("*"))
             if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".xz", ".png")
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if pattern.search(line)]
    assert found == []


# Every command of a README or docs/ code block, and the test that runs it: here on the CPU, or, for what needs a
# network, a cluster or a GPU, its dry run or a stand-in (issue 38). A new command fails the test below until it
# is given its test; a renamed test fails it too.
DOCUMENTED_COMMANDS = {
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && snakemake --cores all':
        "tests/workflow/test_workflow.py::test_the_readme_command_uses_the_default_profile",
    ". .venv/bin/activate && pytest -ra": ".ci/run",
    "snakemake --cores all --configfile config/ttrv.yaml --replace-workflow-config -n":
        "tests/plan/test_paper_configs.py::test_snakemake_runs_the_planned_jobs",
    "ttrl-bench cell ttrv-1 InternVL3-2B ImageNet-A":
        "tests/plan/test_plan.py::test_one_cell_plans_exactly_its_jobs_with_the_paper_configs_settings",
    "snakemake --cores all --directory runs/cpu-methods --configfile config/cpu-methods.yaml --replace-workflow-config":
        "tests/workflow/test_workflow.py::test_every_other_method_runs_end_to_end_on_the_cpu",
    "ttrl-bench fetch config/ttrv.yaml":  # a stand-in Hub
        "tests/plan/test_preflight.py::test_fetch_command_reads_the_config_as_snakemake_does_and_refuses_before_downloading",
    "HF_HUB_OFFLINE=1 snakemake -n --configfile config/ttrv.yaml --replace-workflow-config":
        "tests/plan/test_preflight.py::test_offline_ttrv_dry_run_with_an_empty_cache_stops_before_any_job",
    # SLURM: a one-node cluster in CI (test_demo_runs_through_the_slurm_profile), and stand-in sbatch / squeue
    "snakemake --directory ~/runs/ttrv -s Snakefile --configfile $PWD/config/ttrv.yaml --replace-workflow-config "
    "--workflow-profile profiles/slurm": "tests/workflow/test_slurm.py::test_the_slurm_dry_run_shows_what_each_job_will_ask",
    "export TTRL_SLURM_PARTITION=gpu TTRL_SLURM_ACCOUNT=my-project":
        "tests/workflow/test_slurm.py::test_an_8b_job_asks_slurm_for_its_gpus",
    "snakemake --workflow-profile profiles/slurm --configfile config/ttrv.yaml --replace-workflow-config":
        "tests/workflow/test_slurm.py::test_demo_runs_through_the_slurm_profile",
    "snakemake --cores all $(ttrl-bench targets config/config.yaml --method ttrv)":
        "tests/workflow/test_workflow.py::test_one_methods_jobs_run_by_the_documented_command",
    "ttrl-bench check-sandbox": "tests/rewards/sandbox/test_sandbox.py::test_the_check_sandbox_command_prints_each_probe",
    "snakemake --cores all --configfile extending.yaml -n":
        "tests/workflow/test_extending.py::test_the_extending_guide_adds_a_method_and_a_local_dataset_that_dry_run_with_the_demo",
}


def documented_commands(repo: Path) -> set[str]:
    """Command lines of the shell code blocks of README.md and docs/*.md (continuations joined, comments cut)."""
    commands = set()
    for path in [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]:
        for language, block in re.findall(r"```(\w*)\n(.*?)```", path.read_text(), re.S):
            if language in ("python", "json", "yaml"):
                continue
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line).strip()
                line = re.sub(r"\s+", " ", line)
                if re.match(r"(snakemake|ttrl-bench|python3? |pip |\. \.venv|export |HF_HUB_OFFLINE)", line):
                    commands.add(line)
    return commands


def test_every_documented_command_is_run_by_a_test():
    repo = Path(__file__).resolve().parents[2]
    assert documented_commands(repo) == set(DOCUMENTED_COMMANDS)
    for where in set(DOCUMENTED_COMMANDS.values()):
        path, _, name = where.partition("::")
        text = (repo / path).read_text()
        assert not name or re.search(rf"^def {name}\(", text, re.M), where


def test_launched_steps_leave_their_process_group_and_the_others_keep_it(join_one_process_group, tmp_path, caplog):
    """`adapt` and `adapt-per-sample` run under `accelerate launch`: they leave the launch's group before exit, even
    when they fail (a gloo group alive at exit aborted a finished 2-process script, issue 52). `evaluate` keeps it:
    in-process vLLM owns its one-process group and a later engine needs it (.ci/vllm-cpu.sh at 528a3a4)."""
    import torch.distributed as dist

    from ttrl_bench.cli import main

    missing = tmp_path / "not-prepared"
    step = ["--model-source", str(tmp_path / "model"), "--model-name", "m", "--dataset", "demo-digits",
            "--data", str(missing), "--out", str(tmp_path / "out")]
    join_one_process_group()
    assert main(["evaluate", *step, "--method", "ttrl-majority"]) == 1 and str(missing) in caplog.text  # its input
    assert dist.is_initialized()
    for launched in (["adapt", "--method", "ttrl-majority"],
                     ["adapt-per-sample", "--method", "vr-ttrl", "--adapt-out", str(tmp_path / "adapted")]):
        caplog.clear()
        assert main([*launched, *step]) == 1 and str(missing) in caplog.text
        assert not dist.is_initialized()
        join_one_process_group()
