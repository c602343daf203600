"""The demo through the SLURM profile on a real (one-node) SLURM cluster."""

import json
import os
import shutil

import pytest

from tests.support.slurm_cluster import one_node_cluster, slurm_available
from tests.support.plan import cache_model
from tests.support.workflow import copy_workflow, run_snakemake
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
          learning_rate: 3.0e-5, epochs: 1, generation_batch_size: 8}   # a round of 2 prompts = one step
evaluation: {mcq: {samples: 64}}
"""


@pytest.mark.workflow
def test_demo_runs_through_the_slurm_profile(tmp_path, demo_data, scene_data, tiny_model_dir):
    if WHY_NOT:
        if REQUIRED:
            pytest.fail(f"SLURM is required here but {WHY_NOT}")
        pytest.skip(f"no SLURM: {WHY_NOT}")
    (tmp_path / "work").mkdir()
    work = copy_workflow(tmp_path / "work")
    (work / "small.yaml").write_text(SMALL_DEMO)
    # prepared data and a demo-shaped model (conftest: the demo's builder, 5 steps) in place: any model
    # will do, the scheduling of the GPU rules is what is tested (copy2 keeps times: the model is newer)
    for source, dest in ((demo_data, "results/data/demo-digits"), (scene_data, "results/data/demo-digit-scenes"),
                         (tiny_model_dir, "results/models/demo")):
        shutil.copytree(source, work / dest)
    with one_node_cluster(tmp_path / "cluster") as env:
        os.environ.update(SLURM_CONF=env["SLURM_CONF"], TTRL_SLURM_PARTITION="debug", TTRL_SLURM_ACCOUNT="")
        try:
            result = run_snakemake(
                work, "--workflow-profile", "profiles/slurm", "--configfile", "small.yaml", "--verbose",
                "--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "2",
                "--slurm-no-account", "results/benchmark.duckdb",  # the store: no tables, figures or audit
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


# --- what a cluster run asks for, without a cluster: a stub `sbatch` that records its arguments ----

STUB_SBATCH = """#!/bin/sh
echo "$@" >> "{log}"
echo "stub sbatch: recorded, not submitted" >&2
exit 1
"""
STUB_SACCTMGR = "#!/bin/sh\necho acct\n"  # the plugin validates the account against this list
# InternVL3-8B (a Hub id, taken from the Hugging Face cache: HF_HUB_OFFLINE=1; its config from the
# plan's shipped table) adapting on the bundled digits, already prepared: its adaptation is the first job
EIGHT_B = """\
datasets: [demo-digits]
methods: [ttrv]
models:
  big: {source: OpenGVLab/InternVL3-8B-hf}
"""


def _stub_cluster(tmp_path):
    work = copy_workflow(tmp_path / "work")
    (work / "big.yaml").write_text(EIGHT_B)
    data = work / "results/data/demo-digits"
    data.mkdir(parents=True)
    (data / "manifest.parquet").write_bytes(b"")
    (data / "prep_stats.json").write_text('{"splits": {"test": 597}}')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(STUB_SBATCH.format(log=tmp_path / "sbatch.log"))
    (bin_dir / "sacctmgr").write_text(STUB_SACCTMGR)
    for stub in ("sbatch", "sacctmgr"):
        (bin_dir / stub).chmod(0o755)
    return work, bin_dir


@pytest.fixture
def stub_cluster(tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    work, bin_dir = _stub_cluster(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the model from the (hand-built) Hugging Face cache
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    cache_model(tmp_path / "hf" / "hub", "OpenGVLab/InternVL3-8B-hf")
    monkeypatch.setenv("TTRL_SLURM_PARTITION", "gpu")
    monkeypatch.setenv("TTRL_SLURM_ACCOUNT", "acct")
    return work


CONFIG = ("--configfile", "big.yaml", "--replace-workflow-config")
ADAPTATION = "results/adapt/big/ttrv/demo-digits/n20_random/seed0/run.json"  # the target: that job alone
NO_WAITING = ("--retries", "0", "--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "1")


def _printed_resources(dry_run: str, rule: str) -> dict:
    """The `resources:` line of a rule's job in Snakemake's dry-run listing, as a dict."""
    block = dry_run[dry_run.index(f"rule {rule}:"):].split("\n\n")[0]
    line = next(line for line in block.splitlines() if line.strip().startswith("resources:"))
    return dict(item.strip().split("=", 1) for item in line.split(":", 1)[1].split(","))


def test_the_slurm_dry_run_shows_what_each_job_will_ask(stub_cluster):
    """Issue 24: the dry run shows each job's request as the plan decided it (test_plan.py
    test_adaptation_requests_are_the_cost_models_decision works the numbers out): InternVL3-8B's TTRV adaptation
    2 GPUs, 123000 MB, 84 minutes (not gpu=0, as when the GPU count was decided at submission); its evaluation one GPU, 8 GB + 4 bytes x 7.944e9
    parameters = 39778 MB, and the margin 2 x (the slowest case: 597 prepared items x (3,328 image + 100 text + 6
    new tokens) through HF generate at 6,617.9 tokens/s = 5.163 min, + 2.15 start-up) = 14.6 -> 15 minutes. No
    card named: no gpu_model pinned (empty), sbatch asks --gpus=N of any type."""
    evaluation = "results/eval/big/ttrv/demo-digits/demo-digits/n20_random/seed0/metrics.json"
    dry = run_snakemake(stub_cluster, "-n", "--workflow-profile", "profiles/slurm", *CONFIG, evaluation).stdout
    adapt, evaluate = _printed_resources(dry, "adapt"), _printed_resources(dry, "evaluate")
    assert (adapt["gpu"], adapt["mem_mb"], adapt["runtime"]) == ("2", "123000", "84"), adapt
    assert (evaluate["gpu"], evaluate["mem_mb"], evaluate["runtime"]) == ("1", "39778", "15"), evaluate
    assert adapt.get("gpu_model", "''") in ("", "''") and evaluate.get("gpu_model", "''") in ("", "''")


def test_an_8b_job_asks_slurm_for_its_gpus(stub_cluster, tmp_path):
    """Issue 26 point 1 and issue 24: sbatch receives the plan's request (2 GPUs, 123000 MB, 84 minutes: test_plan.py
    test_adaptation_requests_are_the_cost_models_decision)."""
    run_snakemake(stub_cluster, "--workflow-profile", "profiles/slurm", *CONFIG, ADAPTATION, *NO_WAITING, check=False)
    calls = (tmp_path / "sbatch.log").read_text().splitlines()
    adapt = [call for call in calls if "rule_adapt" in call]
    assert adapt and all(f in adapt[0] for f in ("--gpus=2", "--cpus-per-gpu=8", "--mem 123000", "-t 84")), calls


def test_the_configs_card_is_the_gpu_type_sbatch_asks_for(stub_cluster, tmp_path):
    """Issue 51: `resources.gpu_model: h200` is both the card the plan fits the jobs into and the `gpu_model`
    resource of the GPU rules. On 141 GB cards the 8B adaptation fits one GPU (test_plan.py's 129.4 GB on one GPU,
    no vLLM share under `auto`, < 141; 2 on an 80 GB H100): sbatch gets --gpus=h200:1."""
    (stub_cluster / "card.yaml").write_text("resources: {gpu_model: h200}\n")
    run_snakemake(stub_cluster, "--workflow-profile", "profiles/slurm", "--configfile", "big.yaml", "card.yaml",
               "--replace-workflow-config", ADAPTATION, *NO_WAITING, check=False)
    calls = (tmp_path / "sbatch.log").read_text().splitlines()
    adapt = [call for call in calls if "rule_adapt" in call]
    assert adapt and "--gpus=h200:1" in adapt[0] and "--gpus=2" not in adapt[0], calls


def test_the_slurm_profile_given_as_profile_stops_naming_the_flag(stub_cluster, tmp_path):
    """`--profile profiles/slurm` also applies profiles/default (gpu=1): it would submit the 8B job
    with one GPU; instead nothing is submitted and the message names the right flag."""
    result = run_snakemake(stub_cluster, "--profile", "profiles/slurm", *CONFIG, ADAPTATION, check=False)
    assert result.returncode != 0
    assert "use `--workflow-profile profiles/slurm`" in result.stdout + result.stderr
    assert not (tmp_path / "sbatch.log").exists()
