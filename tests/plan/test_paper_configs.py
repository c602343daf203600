"""The plans of the full-paper configs: the jobs each paper implies, counted by hand below; the
README's job counts are these plans' totals (`python -m tests.plan.test_paper_configs` rewrites them).
The plan is the library's (ttrl_bench.plan); one Snakemake dry run checks that the workflow runs
exactly the planned jobs."""

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.support.plan import cache_everything
from tests.support import REPO
from tests.support.workflow import copy_workflow, run_snakemake, job_counts
from ttrl_bench.datasets import authors_items
from ttrl_bench.datasets.registry import REGISTRY
from ttrl_bench.plan import Plan, checks, validated
from ttrl_bench.plan.config import merge

# "165<!-- job count: ttrv -->": a number in README.md and the case of CASES it is the total of
README_COUNT = re.compile(r"(\d+)(<!-- job count: ([\w.+-]+) -->)")

ALL_TTRV_EXPERIMENTS = """experiments:
  table3_reward_ablation: {enabled: true}
  table4_random_sampling: {enabled: true}
  table4_biased_sampling: {enabled: true}
  table6_one_sample: {enabled: true}
  table9_500_samples: {enabled: true}
  table5_random_reward: {enabled: true}
  table7_qwen: {enabled: true}
  table11_five_seeds: {enabled: true}
  table12_cross_dataset: {enabled: true}
"""
ALL_VR_TTRL_EXPERIMENTS = """experiments:
  table3_variants: {enabled: true}
  table7_rollouts: {enabled: true}
  table8_updates: {enabled: true}
  table9_thresholds: {enabled: true}
  table10_baselines: {enabled: true}
  table11_offline: {enabled: true}
"""
ALL_ECHO_EXPERIMENTS = """experiments:
  table12_supervised: {enabled: true}
"""
AGGREGATE = {"ingest_results": 1, "render_tables": 1, "plot_figures": 1, "audit_rewards": 1, "all": 1}

CASES = {
    # Tables 1-2: 16 datasets x 3 models, 48 zero-shot evaluations; every cell adapted with its log's run
    #   configuration (48: InternVL3-2B 15 ttrv + AI2D 20 epochs, InternVL2.5-4B 15 at 8 prompts + AI2D ttrv,
    #   InternVL3-8B 8 at 500 samples + 6 + AI2D 5 epochs + MathVerse 20 epochs) and at 2 epochs (48 ttrv, of
    #   which InternVL3-2B's 15 and InternVL2.5-4B's AI2D are logged runs already: 32 new): 80 adapt, 48 + 80
    #   evaluations, all under the authors protocol; the 2-epoch block again under clean (`protocols: [authors,
    #   clean]`): 48 adapt, 48 zero-shot + 48 evaluations; InternVL2.5-4B is converted from its original format once
    "ttrv": ("config/ttrv.yaml", None, {"prepare_data": 16, "convert_model": 1, "adapt": 80 + 48,
                                        "evaluate": 128 + 96}),
    # + Table 3: 3 more rewards x 3 datasets (9 adapt, 9 eval); Table 4: InternVL3-4B x 2 datasets,
    #   random (2 adapt, 2 + 2 zero-shot eval) and biased-4 (2, 2: zero-shot is shared without
    #   exclusion); Table 5: random reward x 2 (2, 2); Table 6: n = 1 x 4 datasets (4, 4);
    #   Table 7: Qwen x 4 datasets (4, 4 + 4); Table 9: n = 500 x 2 models x 8 datasets (16, 16);
    #   Table 11: seeds 1-4 x 5 datasets (20, 20 + 20); Table 12: 6 cross pairs (0, 6)
    "ttrv+experiments": ("config/ttrv.yaml", ALL_TTRV_EXPERIMENTS,
                         {"prepare_data": 16, "convert_model": 1, "adapt": 128 + 9 + 4 + 2 + 4 + 4 + 16 + 20,
                          "evaluate": 224 + 9 + 6 + 2 + 4 + 8 + 16 + 40 + 6}),
    # Table 2: 8 splits x 2 models; vote-only and VR-TTRL per sample (32 jobs), zero-shot 16
    "vr-ttrl": ("config/vr-ttrl.yaml", None, {"prepare_data": 8, "adapt_per_sample": 32, "evaluate": 16}),
    # + Table 3: 2 variants x 2 splits x 2 models (8); Table 7: 16 and 32 rollouts (2);
    #   Table 8: 1, 2, 3, 10, 15 updates (5; 5 updates is VR-TTRL itself); Table 9: 2 thresholds (2);
    #   Table 10: 4 Appendix C baselines x 2 splits x 2 models (16; zero-shot and VR-TTRL are the
    #   main grid's); Table 11: Qwen2.5-VL-7B trained offline on 2 training splits (2 more datasets
    #   to prepare, 2 adapt, 2 evaluations on their targets)
    "vr-ttrl+experiments": ("config/vr-ttrl.yaml", ALL_VR_TTRL_EXPERIMENTS,
                            {"prepare_data": 8 + 2, "adapt_per_sample": 32 + 8 + 2 + 5 + 2 + 16, "adapt": 2,
                             "evaluate": 16 + 2}),
    # 5 datasets x 1 model x 3 rewards x 3 seeds = 45 adaptations; 45 + 15 zero-shot evaluations
    "dare": ("config/dare.yaml", None, {"prepare_data": 5, "adapt": 45, "evaluate": 60}),
    # ECHO Table 2: 2 training sets + 4 targets prepared; 2 models x {MM-UPT, ECHO} x 2 training sets
    #   = 8 adaptations, each evaluated on the 4 targets (32), + 2 models x 4 targets zero-shot (8)
    "echo": ("config/echo.yaml", None, {"prepare_data": 6, "adapt": 8, "evaluate": 40}),
    # + Table 12: Qwen2.5-VL-7B, supervised GRPO on Geometry3k (1 adapt, 4 eval); its ECHO and
    #   zero-shot rows are Table 2's runs (0 new)
    "echo+experiments": ("config/echo.yaml", ALL_ECHO_EXPERIMENTS,
                         {"prepare_data": 6, "adapt": 8 + 1, "evaluate": 40 + 4}),
}


def _planned(case: str) -> dict[str, int]:
    """Jobs per rule of a case's plan, on a fresh results tree."""
    config, extra, _ = CASES[case]
    merged = merge(yaml.safe_load((REPO / config).read_text()), yaml.safe_load(extra or "{}"))
    plan = Plan(validated(merged))
    checks.check_methods_fit(plan)  # every method of every block runs somewhere
    return plan.job_counts()


def _dry_run(case: str, work: Path) -> dict[str, int]:
    """The case's job counts, with an (empty) local copy of every local-only dataset (ImageNet,
    VR-TTRL's training splits, CaptureQA's and CRPE's files) and of every set whose authors' items find their
    images in one (DTD, ...): the pre-flight stops a config that has none."""
    config, extra, _ = CASES[case]
    (work / "local-copy").mkdir()
    local = {name: {"path": "local-copy"} for name, spec in REGISTRY.items() if spec.source.startswith("local:")
             or spec.hub_files or authors_items.has_authors_items(name) and authors_items.LOCATORS[name].kind == "file"}
    for name in [n for n in local if authors_items.has_authors_items(n)
                 and "file" in authors_items.INDEX["datasets"][n]["lists"]["test"]]:  # lists shipped in the package
        # the images the authors' shipped lists need (empty files: the pre-flight counts names, not bytes)
        local[name] = {"path": f"local-copy/{name}"}
        for key in authors_items.missing_file_images(name, work / "local-copy" / name)[1]:
            (work / "local-copy" / name / key).parent.mkdir(parents=True, exist_ok=True)
            (work / "local-copy" / name / key).touch()
    (work / "local-copies.yaml").write_text(yaml.safe_dump({"data": {"sources": local}}))
    files = [config, "local-copies.yaml"]
    if extra:
        (work / "extra.yaml").write_text(extra)
        files.append("extra.yaml")
    return job_counts(run_snakemake(work, "-n", "--configfile", *files, "--replace-workflow-config").stdout)


def _filled_cache(home: Path) -> Path:
    """A Hugging Face cache holding every model of the paper configs and every Hub dataset."""
    cache_everything(home, [yaml.safe_load(path.read_text()) for path in sorted((REPO / "config").glob("*.yaml"))])
    return home


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory):
    return _filled_cache(tmp_path_factory.mktemp("hf"))


@pytest.fixture(autouse=True)
def offline_hub(monkeypatch, filled_cache):
    """The papers' models are Hub ids and this machine is offline: HF_HUB_OFFLINE=1 (docs/fetching.md) says
    to take them from the Hugging Face cache, which the pre-flight finds filled (test_preflight.py
    builds it in the libraries' layout)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(filled_cache))
    monkeypatch.setenv("TTRL_BENCH_CACHE", str(filled_cache / "ttrl-bench"))  # the fetched authors' lists
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)


@pytest.fixture(autouse=True)
def fresh_tree(tmp_path, monkeypatch):
    """Plans read prepared datasets' sizes relative to the working directory: a fresh one."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("case", CASES)
def test_planned_job_counts(case):
    counts = _planned(case)
    assert counts == {**CASES[case][2], **AGGREGATE}
    readme = {name: int(n) for n, _, name in README_COUNT.findall((REPO / "README.md").read_text())}
    assert readme.get(case, sum(counts.values())) == sum(counts.values()), "run: python -m tests.plan.test_paper_configs"


@pytest.mark.parametrize("case", CASES)
def test_every_job_is_planned_from_the_shipped_traces(case, monkeypatch, tmp_path):
    """plan/data/traces.json holds every trace the paper configs' jobs need, every experiment enabled:
    their requests are decided offline, no trace runs here (a new one takes 10 s to minutes)."""
    from ttrl_bench.plan import job_request, memory

    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(memory, "trace_step", lambda config, shape: pytest.fail(f"not in traces.json: {shape}"))
    config, extra, _ = CASES[case]
    plan = Plan(validated(merge(yaml.safe_load((REPO / config).read_text()), yaml.safe_load(extra or "{}"))))
    assert all(job_request(plan, job).gpus >= 1 for job in plan.jobs())


def test_snakemake_runs_the_planned_jobs(tmp_path, monkeypatch):
    """The richest case (conversion, protocols, seeds, cross pairs): Snakemake's dry run, offline
    (HF_HUB_OFFLINE=1, README: models from the Hugging Face cache, no Hub probe), has the plan's jobs."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _dry_run("ttrv+experiments", copy_workflow(tmp_path)) == _planned("ttrv+experiments")


def test_readme_job_counts_name_known_cases():
    names = [name for _, _, name in README_COUNT.findall((REPO / "README.md").read_text())]
    assert names and set(names) <= set(CASES)


if __name__ == "__main__":  # rewrite README.md's job counts from the configs' plans
    readme = REPO / "README.md"
    text = readme.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # a fresh results tree
        totals = {name: sum(_planned(name).values()) for name in sorted({n for _, _, n in README_COUNT.findall(text)})}
    readme.write_text(README_COUNT.sub(lambda m: f"{totals[m.group(3)]}{m.group(2)}", text))
    print(totals, file=sys.stderr)
