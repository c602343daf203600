"""The whole pipeline through Snakemake, on a copy of the repository in a temp dir."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ttrl_bench.results.paper_tables import PAPER_TABLES
from ttrl_bench.results.store import query
from ttrl_bench.runs.launch import machine_has_gpu

from tests.support import REPO
from tests.support.workflow import WORKFLOW_FILES, copy_workflow, job_counts, run_snakemake, workflow_env

# the tests sharing the README command's run (demo_run) are one xdist group: one pytest-xdist worker takes them
# all (a worker of their own each would run the demo each where the checkout has no run); the others, seconds of
# Snakemake each, go to whichever worker is free. (pytest-xdist 3.8 under pytest 9 ignores xdist_group: it renames
# item._nodeid, which pytest 9 no longer reads. Each worker with a demo test then copies the checkout's run, seconds.)
SHARES_THE_DEMO_RUN = pytest.mark.xdist_group("readme-command")

GPU_RULES = ("adapt", "adapt_per_sample", "evaluate")


def readme_command() -> str:
    """The main job's command exactly as the README's first bash block writes it, after the install."""
    block = re.search(r"```bash\n(.+?)\n```", (REPO / "README.md").read_text(), re.S).group(1)
    return block.split("&&")[-1].strip()


def most_gpu_jobs_at_once(output: str) -> int:
    """The most jobs of the GPU rules running at the same time, from Snakemake's job log."""
    running, most = set(), 0
    for event in re.finditer(r"^(?:local)?rule (\w+):\n(?:\s+.*\n)*?\s+jobid: (\d+)|Finished jobid: (\d+)", output, re.M):
        rule, started, finished = event.groups()
        if started and rule in GPU_RULES:
            running.add(started)
        running.discard(finished)
        most = max(most, len(running))
    return most


def _files(path: Path):
    """Every file of a workflow path (a file or a tree), without what Python and pip write into it."""
    paths = [path] if path.is_file() else path.rglob("*")
    return [p for p in paths if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p)]


def _output_times(results: Path) -> list[float]:
    """Modification times of a run's outputs as Snakemake reads them: a directory() output's is its
    .snakemake_timestamp marker, not its files' (the demo model reused from its cache, models/demo_cache.py,
    keeps the times of its first build: the run looked stale, and every worker ran the demo again, issue 52)."""
    marked = {marker.parent for marker in results.rglob(".snakemake_timestamp")}
    return [p.stat().st_mtime for p in _files(results)
            if p.name == ".snakemake_timestamp" or not marked.intersection(p.parents)]


def checkout_demo_log() -> str | None:
    """Snakemake's log of the README's main job run in this checkout, if that run is complete and newer
    than every workflow file (CI runs the README's first command, then the tests: the same job need not
    run twice). None when there is no such run: the fixture then runs the command itself.
    TTRL_BENCH_FRESH_DEMO=1 always runs it."""
    if os.environ.get("TTRL_BENCH_FRESH_DEMO") == "1" or not (REPO / "results/benchmark.duckdb").exists():
        return None
    record = REPO / "results/config_files.json"
    if not record.exists() or json.loads(record.read_text()) != {"config_files": ["config/config.yaml"]}:
        return None
    newest_source = max(p.stat().st_mtime for name in WORKFLOW_FILES for p in _files(REPO / name))
    if min(_output_times(REPO / "results")) <= newest_source:
        return None  # a workflow file changed after the run: its results may be stale
    runs = [log.read_text() for log in sorted((REPO / ".snakemake/log").glob("*.snakemake.log"))]
    runs = [text for text in runs if "rule build_demo_model:" in text and "steps (100%) done" in text]
    return runs[-1] if runs else None


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> tuple[Path, str]:
    """The README's main job, its command as written, and what it printed. A copy of this checkout's
    own run where it is current (`checkout_demo_log`), else run here in a workdir whose path has a space."""
    work = copy_workflow(tmp_path_factory.mktemp("work dir"))
    log = checkout_demo_log()
    if log is not None:  # copy2 keeps modification times: Snakemake sees the copy as up to date
        for name in ("results", "logs", ".snakemake"):
            shutil.copytree(REPO / name, work / name, ignore=shutil.ignore_patterns("locks", "incomplete"))
        # the command as written, dry: it says which profile it takes and that nothing is left to do
        dry = subprocess.run(readme_command() + " -n", shell=True, cwd=work, env=workflow_env(), capture_output=True, text=True)
        assert dry.returncode == 0 and "Nothing to be done" in dry.stdout, dry.stdout[-4000:] + dry.stderr[-4000:]
        return work, dry.stderr + log
    assert " " in str(work)
    result = subprocess.run(readme_command(), shell=True, cwd=work, env=workflow_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return work, result.stderr + result.stdout


@pytest.mark.workflow
@SHARES_THE_DEMO_RUN
def test_the_readme_command_uses_the_default_profile(demo_run):
    _, output = demo_run
    assert readme_command() == "snakemake --cores all"
    assert "Using workflow specific profile profiles/default" in output
    # its `resources: gpu=1`: never two GPU jobs at once on a GPU machine, though more cores were
    # free; without a GPU those jobs ask for none and share the cores
    most = most_gpu_jobs_at_once(output)
    assert most == 1 if machine_has_gpu() else most >= min(2, os.cpu_count())


@pytest.mark.workflow
@SHARES_THE_DEMO_RUN
def test_demo_produces_store_tables_and_figures(demo_run):
    demo_run, _ = demo_run
    db = demo_run / "results" / "benchmark.duckdb"
    runs = query(db, "SELECT method, target_dataset, metric, n FROM runs ORDER BY target_dataset, method")
    assert runs.values.tolist() == [
        # 120 test scenes, 8 scored (config evaluation.grounding.samples), the same 8 for both rows
        ["vr-ttrl", "demo-digit-scenes", "box_giou", 8],
        ["zero-shot", "demo-digit-scenes", "box_giou", 8],
        # 597 demo test images minus the 20 adaptation samples, the same set for every row
        ["dare", "demo-digits", "accuracy", 577],
        ["random-reward", "demo-digits", "accuracy", 577],
        ["ttrl-majority", "demo-digits", "accuracy", 577],
        ["ttrv", "demo-digits", "accuracy", 577],
        ["ttrv-no-frequency", "demo-digits", "accuracy", 577],
        ["zero-shot", "demo-digits", "accuracy", 577],
    ]
    assert query(db, "SELECT min(value) >= 0 AND max(value) <= 100 AS ok FROM runs")["ok"][0]
    assert json.loads((demo_run / "results/config_files.json").read_text()) == {"config_files": ["config/config.yaml"]}
    assert query(db, "SELECT count(*) AS n FROM predictions")["n"][0] == 6 * 577 + 2 * 8
    # the five of before, the same MCQ generations scored both ways (evaluation/tasks.py rescored_metrics), and
    # VisionReasoner's bbox_ap for the grounding runs (VR-TTRL Table 7), and Appendix A's two definitions
    # (evaluation/box_metrics.py: box_complete_iou, bbox_ap_coco)
    assert query(db, "SELECT count(DISTINCT metric) AS n FROM metrics")["n"][0] == 5 + 5 + 1 + 2
    assert {"bbox_ap", "box_complete_iou", "bbox_ap_coco"} <= set(query(db, "SELECT DISTINCT metric FROM metrics")["metric"])
    rescored = query(db, "SELECT DISTINCT metric FROM metrics WHERE run_id LIKE '%/demo-digits/%' AND "
                         "(metric LIKE '%parser' OR metric LIKE 'authors_%')")["metric"]
    assert sorted(rescored) == ["accuracy_authors_parser", "accuracy_robust_parser", "authors_max_group",
                                "authors_mean@1", "authors_mean@max"]
    # 5 MCQ methods x 4 epochs x 20 prompts in rounds of 4 (the ttrv preset's generation batch: one log row
    # per round) + VR-TTRL 8 samples x 2 rounds
    assert query(db, "SELECT count(*) AS n FROM train_log")["n"][0] == 5 * 4 * 20 // 4 + 8 * 2
    # issue 16, the papers' finding in miniature: TTRL and TTRV at least 5 points above the base,
    # the random reward (TTRV Table 5) below both, "w/o frequency" (Table 4) exactly the base: its
    # rewards are equal within every group, so GRPO's advantages are 0 and no weight changes
    acc = dict(query(db, "SELECT method, value FROM runs WHERE target_dataset = 'demo-digits'").values.tolist())
    assert acc["ttrl-majority"] >= acc["zero-shot"] + 5 and acc["ttrv"] >= acc["zero-shot"] + 5
    assert acc["random-reward"] < min(acc["ttrl-majority"], acc["ttrv"])
    assert acc["ttrv-no-frequency"] == acc["zero-shot"]
    run = json.loads((demo_run / "results/adapt/demo/ttrv-no-frequency/demo-digits/n20_random/seed0/run.json").read_text())
    assert run["weights_changed"] == 0.0
    prep = query(db, "SELECT dataset, original, kept FROM prep_stats ORDER BY dataset")
    assert prep.values.tolist() == [["demo-digit-scenes", 720, 720], ["demo-digits", 1797, 1797]]
    table = (demo_run / "results/tables/ttrv_table1_layout.md").read_text()
    assert "| w/ TTRV |" in table and "| Δ TTRL |" in table and "| w/ DARE |" in table
    assert "| w/ VR-TTRL |" in table
    assert "0 of 126 cells agree" in table
    # issue 34: the demo's protocol named, and its six MCQ runs' generations scored by both parsers; under
    # `clean` the robust parser's accuracy is the run's own
    assert table.startswith("Protocol: clean (ours") and "# The same generations scored both ways" in table
    both = query(db, "SELECT a.run_id, a.value AS accuracy, r.value AS robust FROM metrics a JOIN metrics r "
                     "ON a.run_id = r.run_id WHERE a.metric = 'accuracy' AND r.metric = 'accuracy_robust_parser'")
    assert len(both) == 6 and ((both["accuracy"] - both["robust"]).abs() < 1e-9).all()
    assert (demo_run / "results/audit/reward_audit.png").stat().st_size > 10_000
    # every published table, in three formats; nothing of the demo counts as a paper cell
    for paper, number in PAPER_TABLES:
        for ext in ("md", "tex", "csv"):
            assert (demo_run / f"results/tables/{paper}_table{number}.{ext}").stat().st_size > 0
    assert "| total |  | 587 | 0 | 0 | 587 |" in (demo_run / "results/tables/fidelity.md").read_text()
    preparation = (demo_run / "results/tables/data_preparation.md").read_text()
    assert "| demo-digits | Digits | 1797 | 1797 | – | – | – |" in preparation
    for figure in ("accuracy", "training_curves", "cross_dataset", "step_costs"):
        assert (demo_run / f"results/figures/{figure}.png").stat().st_size > 10_000
        assert (demo_run / f"results/figures/{figure}.pdf").exists()
    # issue 55: the papers' claims on the demo's runs, each a paired test. "w/o frequency" changes no weight
    # (above), so its answers are the base model's item for item: TTRV's difference and McNemar p against it
    # are those against zero-shot. Measured (2026-11-29): +22.18 points, 177 vs 49 discordant, p 3.4e-18
    claims = query(db, "SELECT claim, difference, p, verdict FROM claims").set_index("claim")
    assert claims.loc["ttrv-vs-no-frequency", ["difference", "p"]].tolist() == claims.loc["ttrv-vs-base", ["difference", "p"]].tolist()
    assert claims.loc["ttrv-vs-base", "verdict"] == "supported"
    assert set(claims.index[claims["verdict"] != "not run"]) == {
        "ttrv-vs-base", "ttrv-vs-ttrl", "ttrv-vs-no-frequency", "ttrv-vs-random", "random-vs-base", "dare-vs-ttrl",
        "vr-ttrl-vs-base", "vr-ttrl-vs-base-counting"}
    assert "One seed on 577 demo-digits and 8 demo-digit-scenes items shows whether" in (
        demo_run / "results/tables/claims.md").read_text()
    assert (demo_run / "results/figures/claims.png").stat().st_size > 10_000
    # adapted weights are temp(): gone once evaluated
    assert not (demo_run / "results/adapt/demo/ttrv/demo-digits/n20_random/seed0/model").exists()
    # issue 57: the front page, within 60 lines of 120 characters, every file it names present, each figure embedded
    front = (demo_run / "results/README.md").read_text()
    assert len(front.splitlines()) <= 60 and max(map(len, front.splitlines())) <= 120
    for target in [part.split(")")[0] for part in front.split("](")[1:]]:
        assert (demo_run / "results" / target).exists(), target
    for figure in ("accuracy", "training_curves", "cross_dataset", "step_costs"):
        assert f"](figures/{figure}.png)" in front
    assert "8 evaluations (2 zero-shot), 6 adaptations." in " ".join(front.splitlines())


@pytest.mark.workflow
@SHARES_THE_DEMO_RUN
def test_every_rule_logs(demo_run):
    demo_run, _ = demo_run
    for rule in ("prepare_data", "build_demo_model", "adapt", "adapt_per_sample", "evaluate"):
        logs = list((demo_run / "logs" / rule).rglob("*.log"))
        assert logs and all(log.stat().st_size > 0 for log in logs), rule
    for rule in ("ingest_results", "render_tables", "plot_figures"):
        assert (demo_run / "logs" / f"{rule}.log").exists()


@pytest.mark.workflow
@SHARES_THE_DEMO_RUN
def test_rerun_has_nothing_to_do_and_report_builds(demo_run):
    demo_run, _ = demo_run
    assert "Nothing to be done" in run_snakemake(demo_run, "--cores", "1", "-n").stdout
    run_snakemake(demo_run, "--report", "results/report.html")
    report = (demo_run / "results/report.html").read_text(errors="replace")
    for item in ("training_curves.png", "cross_dataset.png", "step_costs.png", "fidelity.md", "data_preparation.md"):
        assert item in report, item


def test_the_guards_hint_for_an_overlay_runs_verbatim(tmp_path):
    """Issue 57: an overlay run where the demo's results are refused with a hint; the hint, pasted as it is (its
    `<name>` filled in, `-n` added), dry-runs: the default config is found beside the workflow, not in
    runs/<name>/. The message states the --configfile trap (it takes every name after it)."""
    work = copy_workflow(tmp_path)
    (work / "results").mkdir()
    (work / "results/config_files.json").write_text('{"config_files": ["config/config.yaml"]}')
    (work / "shapes.yaml").write_text("adaptation:\n  n_samples: 2\n")
    refused = run_snakemake(work, "--cores", "all", "--configfile", "shapes.yaml", "-n", check=False)
    assert refused.returncode == 1
    message = refused.stdout + refused.stderr
    assert "targets go before --configfile, which takes every file name after it as a config file" in message
    hint = re.search(r"Run it in a directory of its own: (snakemake [^(]+?) \(", message).group(1)
    assert hint == "snakemake --directory runs/<name> --configfile shapes.yaml"
    dry = subprocess.run(hint.replace("<name>", "shapes") + " -n", shell=True, cwd=work, env=workflow_env(),
                         capture_output=True, text=True)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    assert re.search(r"^adapt\s+5$", dry.stdout, re.M) and (work / "runs/shapes").is_dir()


def test_one_methods_jobs_run_by_the_documented_command(tmp_path):
    """Issue 57: docs/running-a-paper.md's "One method's jobs" command, as written (`-n` added): the demo's TTRV
    alone is its data (both demo sets: the model is warm-started on both), the model, one adaptation and one
    evaluation, and no other method's job or aggregation."""

    guide = (REPO / "docs/running-a-paper.md").read_text().split("## One method's jobs", 1)[1]
    command = re.search(r"```sh\n(.*?)\n```", guide, re.S).group(1)
    assert command == "snakemake --cores all $(ttrl-bench targets config/config.yaml --method ttrv)"
    work = copy_workflow(tmp_path)
    dry = subprocess.run(command + " -n", shell=True, cwd=work, env=workflow_env(), capture_output=True, text=True)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    assert job_counts(dry.stdout) == {"prepare_data": 2, "build_demo_model": 1, "adapt": 1, "evaluate": 1}
    assert "results/adapt/demo/ttrv/demo-digits/n20_random/seed0" in dry.stdout and "/dare/" not in dry.stdout


@pytest.mark.workflow
@SHARES_THE_DEMO_RUN
def test_every_other_method_runs_end_to_end_on_the_cpu(demo_run, tmp_path):
    """config/cpu-methods.yaml (issue 17) after the demo, reusing its model: ECHO, MM-UPT,
    supervised GRPO, T3RL, VR-TTRL's Appendix C baselines and Table 11's offline variant each run
    once, and each has its row in the rendered layout tables."""
    demo_run, _ = demo_run
    # not in the demo's results tree: its store, tables and figures are the demo's (issue 26 point 5)
    refused = run_snakemake(demo_run, "-n", "--configfile", "config/cpu-methods.yaml", "--replace-workflow-config", check=False)
    assert refused.returncode != 0
    assert "results/ holds the results of config config/config.yaml" in refused.stdout + refused.stderr
    # a directory of its own, with the demo's model and prepared data copied (times kept: up to date)
    work = tmp_path / "cpu methods"
    work.mkdir()
    copy_workflow(work)
    for shared in ("results/models", "results/data"):
        shutil.copytree(demo_run / shared, work / shared)
    result = run_snakemake(work, "--cores", "2", "--configfile", "config/cpu-methods.yaml", "--replace-workflow-config",
                        "results/tables/ttrv_table1_layout.md")  # the store, figures, audit and tables (results/README.md)
    assert "rule build_demo_model" not in result.stdout  # the demo's model, not a new one
    db = work / "results" / "benchmark.duckdb"
    runs = query(db, "SELECT method, train_dataset, target_dataset FROM runs ORDER BY method, target_dataset")
    assert runs.values.tolist() == [
        ["echo", "demo-digits", "demo-digits"],
        ["memo", "demo-digit-scenes", "demo-digit-scenes"],
        ["mm-upt", "demo-digits", "demo-digits"],
        ["offline-train-split", "demo-digit-scenes-train", "demo-digit-scenes"],
        ["sft-greedy-pseudo-label", "demo-digit-scenes", "demo-digit-scenes"],
        ["sft-majority-pseudo-label", "demo-digit-scenes", "demo-digit-scenes"],
        ["supervised-grpo", "demo-digits", "demo-digits"],
        ["t3rl", "demo-digits", "demo-digits"],
        ["tent", "demo-digit-scenes", "demo-digit-scenes"],
        ["zero-shot", "none", "demo-digit-scenes"],
        ["zero-shot", "none", "demo-digits"],
    ]
    layout = (work / "results/tables/ttrv_table1_layout.md").read_text()
    for row in ("echo", "mm-upt", "supervised-grpo", "t3rl", "tent", "memo", "sft-greedy-pseudo-label",
                "sft-majority-pseudo-label", "offline-train-split@demo-digit-scenes-train"):
        assert f"| w/ {row} |" in layout, row
    # every GRPO adaptation changed the weights (an adaptation that does not is a bug)
    for method in ("echo", "mm-upt", "supervised-grpo", "t3rl"):
        run = json.loads((work / f"results/adapt/demo/{method}/demo-digits/n8_random/seed0/run.json").read_text())
        assert run["weights_changed"] > 0.5, method


@pytest.mark.workflow
@SHARES_THE_DEMO_RUN
def test_same_predictions_whatever_the_thread_settings(demo_run, tmp_path):
    """Issue 16: a TTRV adaptation and its evaluation, and VR-TTRL per sample, of the demo's model again
    with every torch job under another OMP_NUM_THREADS (the demo run gives adaptation and evaluation 1;
    here 2) give the same predictions byte for byte: jobs pin their own thread count
    (cli.pin_numerics). One job of each rule, on the demo's model and data (the model's own warm
    start under other thread counts: tests/cli/test_cli.py)."""
    demo_run, _ = demo_run
    work = copy_workflow(tmp_path)
    for shared in ("results/models", "results/data"):  # times kept: up to date, not rebuilt
        shutil.copytree(demo_run / shared, work / shared)
    runs = ["demo/ttrv/demo-digits/demo-digits", "demo/vr-ttrl/demo-digit-scenes/demo-digit-scenes"]
    targets = [f"results/eval/{run}/n20_random/seed0/predictions.parquet" for run in runs]
    result = run_snakemake(work, *targets, "--cores", "2", "--workflow-profile", "profiles/default", "--set-threads",
                        "adapt=2", "adapt_per_sample=2", "evaluate=2")
    assert "rule build_demo_model" not in result.stdout + result.stderr
    for name in targets:
        assert (work / name).read_bytes() == (demo_run / name).read_bytes(), name


@pytest.mark.workflow
@SHARES_THE_DEMO_RUN
def test_a_copied_results_tree_has_nothing_to_do(demo_run, tmp_path):
    demo_run, _ = demo_run
    copy = tmp_path / "copied tree"
    shutil.copytree(demo_run, copy)  # files and their modification times, .snakemake included
    result = run_snakemake(copy, "--cores", "1", "-n")
    assert "Nothing to be done" in result.stdout, result.stdout[-3000:]


@pytest.mark.workflow
@SHARES_THE_DEMO_RUN
def test_a_pasted_log_line_reruns_the_step(demo_run, tmp_path):
    """On a copy of the shared demo run: it rewrites one evaluation, which in the shared run made every test after
    it in a random order find work to do (test_a_copied_results_tree_has_nothing_to_do, issue 52)."""
    demo_run = shutil.copytree(demo_run[0], tmp_path / "pasted run")  # modification times kept; a space to quote
    elsewhere = tmp_path / "elsewhere"  # the pasted line runs from any directory
    elsewhere.mkdir()
    run = "demo/zero-shot/none/demo-digit-scenes/n20_random/seed0"
    if not (demo_run / f"logs/evaluate/{run}.log").read_text().startswith(f"cd '{demo_run}'"):
        # a copy of the checkout's run (demo_run): its logs name the checkout; this job's log must name the copy
        run_snakemake(demo_run, f"results/eval/{run}/predictions.parquet", "--cores", "1", "--forcerun", "evaluate")
    line = (demo_run / f"logs/evaluate/{run}.log").read_text().splitlines()[0]
    assert line.startswith(f"cd '{demo_run}' && ")
    predictions = demo_run / f"results/eval/{run}/predictions.parquet"
    before = predictions.read_bytes()
    predictions.unlink()
    result = subprocess.run(["bash", "-c", line], cwd=elsewhere, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert predictions.read_bytes() == before  # greedy decoding: the same predictions
    # an adapted model's evaluation: its weights were temp(), and the error says how to keep them
    line = (demo_run / "logs/evaluate/demo/ttrv/demo-digits/demo-digits/n20_random/seed0.log").read_text().splitlines()[0]
    result = subprocess.run(["bash", "-c", line], cwd=elsewhere, capture_output=True, text=True)
    assert result.returncode == 1 and "`adaptation.keep_adapted_weights: true`" in result.stderr


def test_lint_is_clean(tmp_path):
    result = run_snakemake(copy_workflow(tmp_path), "--lint", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "bad_config, named",
    [
        # the glue of rules/common.smk: a schema error and a check of the plan stop Snakemake before any
        # job, one line naming the key (not after the 500-line schema Snakemake prints); every check
        # itself is a function test in tests/plan/test_plan.py
        ("learning_rat: 1", "config key `learning_rat`: unknown key (every key is in workflow/schemas/config.schema.yaml)"),
        ("adaptation: {n_samples: 598}", "config key `adaptation.n_samples`: 598 adaptation samples, but demo-digits's test split has 597"),
    ],
)
def test_config_errors_stop_before_any_job(tmp_path, monkeypatch, bad_config, named):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: an unreachable Hub
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    work = copy_workflow(tmp_path)
    (work / "bad.yaml").write_text(bad_config + "\n")
    result = run_snakemake(work, "--cores", "1", "--configfile", "bad.yaml", check=False)
    assert result.returncode != 0
    assert named in result.stdout + result.stderr
    assert "Failed validating" not in result.stdout + result.stderr
    assert not (work / "results").exists()


def test_a_config_mistake_stops_snakemake_with_one_line(tmp_path):
    """A misspelt dataset: Snakemake's exit is the message alone, the closest names first, no traceback."""
    work = copy_workflow(tmp_path)
    result = run_snakemake(work, "-n", "--config", 'datasets=["demo-digitz"]', check=False)
    assert result.returncode == 1
    assert ("config error: config key `datasets`: unknown name(s) 'demo-digitz' (did you mean demo-digits or "
            "demo-digit-scenes") in result.stderr
    assert "Traceback" not in result.stderr and 'File "' not in result.stderr
