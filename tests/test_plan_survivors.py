"""Issue 39: tests for the plan/ mutants that survived the re-run of mutmut with tests/test_plan_units.py and
tests/test_plan_jobs.py in its selection. The pre-flight's exact messages (check_cache, fetch), its offline
switch, the caches it reads, what `fetch` logs and calls; two evaluation flags of the grid; the plan's table, the
one-GPU proposal and the largest request (resources.py); the dry run's request check (checks.py); the fake model a
trace runs on (memory.py build_fake). Every expected value is worked out by hand in the test's docstring or read
from the registry / schema / config (file:line named).
No network: caches are built by hand in the libraries' layouts (as tests/test_preflight.py does), downloads and
the Hub probe are stood in for."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from ttrl_bench.plan import Job, Plan, preflight, validated
from ttrl_bench.plan.config import merge
from ttrl_bench.plan.preflight import Need, PreflightError, check_cache, dataset_keys, fetch_command

from test_preflight import cache_model  # a model in huggingface_hub's layout, its config and header readable

REPO = Path(__file__).resolve().parents[1]
COMMIT = "0" * 40

# Registry entries used below (src/ttrl_bench/datasets/registry.py): imagenet is local-only
# (local:imagefolder), mathverse is CaraJ/MathVerse-lmmseval with Hub configuration and split "testmini",
# mme is lmms-lab-encoder/MME split "test", capture a Hub repository of files (real_metadata.json,
# real_dataset.zip). The authors' imagenet test list is not shipped (datasets/data/ttrv_items/index.json:
# verl/data/imagenet_1k_20/test.json, no "file"), so `ttrl-bench fetch` downloads it into TTRL_BENCH_CACHE.
IMAGENET_LIST = "verl/data/imagenet_1k_20/test.json"
IMAGENET_PROBLEM = ("config key `data.sources.imagenet.path` is not set: dataset 'imagenet' (datasets) has no Hub copy "
                    "(local:imagefolder); point it at a local copy")
CAPTURE_PROBLEM = ("config key `data.sources.capture.path` is not set: dataset 'capture' (datasets) is a Hub repository "
                   "of files (atinp/CAPTURe); download real_metadata.json, real_dataset.zip into a folder and point the "
                   "key at it")


@pytest.fixture
def caches(tmp_path, monkeypatch):
    """Empty caches under tmp_path, the working directory there: the hub cache hf/hub, the datasets cache
    named by HF_DATASETS_CACHE (not HF_HOME/datasets, so the message shows which one was read), the authors'
    lists in tb/ttrv_items; HF_HUB_OFFLINE unset."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "arrow"))
    monkeypatch.setenv("TTRL_BENCH_CACHE", str(tmp_path / "tb"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HOME", str(tmp_path / "hf"))
    return tmp_path


def reachable(monkeypatch, up: bool) -> None:
    """Stand in for the TCP probe of the Hub (datasets/sources.py hub_reachable; check_cache imports it at call time)."""
    monkeypatch.setattr("ttrl_bench.datasets.sources.hub_reachable", lambda: up)


def cache_dataset(datasets_cache: Path, folder: str, configuration: str, split: str) -> None:
    """datasets' Arrow layout: <org>___<name in snake case>/<configuration>/<version>/<hash>/dataset_info.json."""
    directory = datasets_cache / folder / configuration / "0.0.0" / "abc123"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "dataset_info.json").write_text(json.dumps({"splits": {split: {"num_examples": 1}}}))



# --- Need, dataset_keys, the caches ----------------------------------------------------------------------------

def test_each_kind_of_need_describes_itself_for_the_message_and_the_fetch_log(caches):
    """Need.describe: a model is "model <repo>"; the authors' items name the list's path in their repository
    and the folder they go to (TTRL_BENCH_CACHE/ttrv_items, authors_items.cache_dir); a dataset its split,
    and its Hub configuration only where it has one (mathverse's "testmini", not mme's None)."""
    assert Need("model", "models.a.source", "Org/M").describe() == "model Org/M"
    assert Need("items", "datasets", IMAGENET_LIST, "imagenet").describe() == (
        f"dataset imagenet: the TTRV authors' test items, {IMAGENET_LIST} (into {caches / 'tb' / 'ttrv_items'})")
    assert Need("dataset", "datasets", "CaraJ/MathVerse-lmmseval", "mathverse", "testmini", "testmini").describe() == (
        "dataset mathverse: CaraJ/MathVerse-lmmseval (split 'testmini', configuration 'testmini')")
    assert Need("dataset", "datasets", "lmms-lab-encoder/MME", "mme", None, "test").describe() == (
        "dataset mme: lmms-lab-encoder/MME (split 'test')")


def test_a_dataset_is_named_by_the_main_grid_before_any_experiment_that_also_asks_for_it():
    """dataset_keys: mme is in `datasets` and in experiment x's datasets: the main grid's key wins. ai2d is
    first asked for by x's datasets (before its cross pair), food101 only by x's cross pair; y has datasets and
    no `cross` key (seed-bench); dtd's block is disabled, so it has no key."""
    config = {"datasets": ["mme"],
              "experiments": {"x": {"enabled": True, "datasets": ["mme", "ai2d"], "cross": [["ai2d", "food101"]]},
                              "y": {"enabled": True, "datasets": ["seed-bench"]},
                              "off": {"enabled": False, "datasets": ["dtd"]}}}
    assert dataset_keys(config) == {"mme": "datasets", "ai2d": "experiments.x.datasets", "food101": "experiments.x.cross",
                                    "seed-bench": "experiments.y.datasets"}


def test_needs_skip_built_and_local_models_and_go_on_to_the_next(caches):
    """needs() walks the models in the order given: `built` (a demo model built by a job) and `local` (an existing
    directory, resolve_model_source's "used as is") need no download, and the model after them still does."""
    weights = cache_model(caches / "local", "org/weights")  # a directory holding a readable checkpoint
    config = {"models": {"built": {"build": "tiny-internvl"}, "local": {"source": str(weights)},
                         "absent": {"source": "OpenGVLab/InternVL3-8B-hf"}}}
    assert preflight.needs(config, ["built", "local", "absent"], []) == (
        [Need("model", "models.absent.source", "OpenGVLab/InternVL3-8B-hf", files=tuple(preflight.MODEL_FILES))], [])


def test_a_dataset_is_named_by_the_experiment_asking_for_it_else_by_datasets(caches):
    """The key in each need and problem is dataset_keys' (here experiments.x.datasets); a dataset no key of the
    config names (needs() called with it directly) falls back to `datasets`. Each case: the authors' imagenet list
    (data.items: authors, imagenet's copy set), capture (a Hub repository of files, no path) and mme (a Hub
    dataset). The configs have no `data` section or one without `sources` (unvalidated dicts: no schema
    defaults): both read as "no local copy"."""
    (caches / "copies" / "imagenet").mkdir(parents=True)
    authors = {"items": "authors", "sources": {"imagenet": {"path": "copies/imagenet"}}}

    def expected(key: str) -> tuple[list[Need], list[str]]:
        return ([Need("items", key, IMAGENET_LIST, "imagenet"),
                 Need("dataset", key, "lmms-lab-encoder/MME", "mme", None, "test")],
                [CAPTURE_PROBLEM.replace("(datasets)", f"({key})")])

    block = {"x": {"enabled": True, "datasets": ["imagenet", "capture", "mme"]}}
    assert preflight.needs({"experiments": block, "data": authors}, [], ["imagenet", "capture", "mme"]) == (
        expected("experiments.x.datasets"))
    assert preflight.needs({"data": authors}, [], ["imagenet", "capture", "mme"]) == expected("datasets")
    problem = IMAGENET_PROBLEM.replace("(datasets)", "(experiments.x.datasets)")
    assert preflight.needs({"experiments": block}, [], ["imagenet"]) == ([], [problem])
    assert preflight.needs({"data": {}}, [], ["imagenet"]) == ([], [IMAGENET_PROBLEM])


def test_the_datasets_cache_is_hf_datasets_cache_else_hf_home_datasets(caches, monkeypatch):
    """datasets_cache_dir reads HF_DATASETS_CACHE (as datasets/config.py does); without it, HF_HOME/datasets."""
    assert preflight.datasets_cache_dir() == caches / "arrow"
    monkeypatch.delenv("HF_DATASETS_CACHE")
    assert preflight.datasets_cache_dir() == caches / "hf" / "datasets"


def test_a_dataset_with_a_hub_configuration_is_cached_only_under_that_configuration(tmp_path):
    """MathVerse is loaded as load_dataset("CaraJ/MathVerse-lmmseval", "testmini", split="testmini"). Its split
    prepared under another configuration ("default") is not what the job loads offline: not cached, and
    missing() keeps it; prepared under "testmini" it is cached. Folder: caraj___math_verse-lmmseval
    (datasets' camelcase_to_snakecase of "MathVerse-lmmseval")."""
    need = Need("dataset", "datasets", "CaraJ/MathVerse-lmmseval", "mathverse", "testmini", "testmini")
    cache_dataset(tmp_path / "arrow", "CaraJ___math_verse-lmmseval", "default", "testmini")
    assert not preflight.dataset_cached(need.repo, "testmini", "testmini", tmp_path / "arrow")
    assert preflight.missing([need], tmp_path / "hub", tmp_path / "arrow") == [need]
    cache_dataset(tmp_path / "arrow", "CaraJ___math_verse-lmmseval", "testmini", "testmini")
    assert preflight.dataset_cached(need.repo, "testmini", "testmini", tmp_path / "arrow")
    assert preflight.missing([need], tmp_path / "hub", tmp_path / "arrow") == []


def test_the_authors_items_are_missing_until_their_list_is_in_the_cache(caches):
    """missing() for an "items" need asks authors_items whether the list file is there
    (TTRL_BENCH_CACHE/ttrv_items/imagenet.test.json), never the datasets cache."""
    need = Need("items", "datasets", IMAGENET_LIST, "imagenet")
    assert preflight.missing([need], caches / "hub", caches / "arrow") == [need]
    (caches / "tb" / "ttrv_items").mkdir(parents=True)
    (caches / "tb" / "ttrv_items" / "imagenet.test.json").write_text("[]")
    assert preflight.missing([need], caches / "hub", caches / "arrow") == []


def test_the_fetch_command_names_config_files_relative_to_the_working_directory_or_as_given(caches):
    """Inside the working directory a file is named relative to it; outside, as it was given (shlex quotes the
    space); no file at all gives the placeholder CONFIG.yaml."""
    assert fetch_command([caches / "a.yaml", "sub/b.yaml", "/elsewhere/my c.yaml"]) == (
        "ttrl-bench fetch a.yaml sub/b.yaml '/elsewhere/my c.yaml'")
    assert fetch_command([]) == "ttrl-bench fetch CONFIG.yaml"


# --- check_cache: the message and when it stops ------------------------------------------------------------------

CONFIG = {"models": {"absent": {"source": "OpenGVLab/InternVL3-8B-hf"},
                     "to-convert": {"convert_from": "OpenGVLab/InternVL2_5-4B"}},
          "datasets": ["imagenet", "mathverse"], "data": {"sources": {}}}


def test_the_preflight_message_lists_problems_then_missing_downloads_with_the_caches_and_the_fetch(caches, monkeypatch):
    """The whole message, line by line. The local-only imagenet has no path (a problem: 1); the Hub model and
    mathverse (its split cached under the wrong configuration only) are not in the caches (2): 3 things.
    Offline the reason is HF_HUB_OFFLINE; online with the Hub unreachable it is that. The hub cache is
    huggingface_hub's HF_HUB_CACHE, the datasets cache HF_DATASETS_CACHE (the fixture's)."""
    cache_dataset(caches / "arrow", "CaraJ___math_verse-lmmseval", "default", "testmini")

    def expected(why: str) -> str:
        return "\n".join([
            "pre-flight: 3 thing(s) this config needs are missing:",
            f"  {IMAGENET_PROBLEM}",
            f"  not in the Hugging Face cache ({why}; hub cache {caches / 'hf' / 'hub'}, "
            f"datasets cache {caches / 'arrow'}):",
            "    config key `models.absent.source`: model OpenGVLab/InternVL3-8B-hf",
            "    config key `datasets`: dataset mathverse: CaraJ/MathVerse-lmmseval "
            "(split 'testmini', configuration 'testmini')",
            "  fetch them on a machine with internet that shares this HF_HOME (a login node): ttrl-bench fetch ttrv.yaml"])

    with pytest.raises(PreflightError) as error:
        check_cache(CONFIG, ["absent"], ["imagenet", "mathverse"], [caches / "ttrv.yaml"], offline=True)
    assert str(error.value) == expected("HF_HUB_OFFLINE=1: jobs read only the cache")
    reachable(monkeypatch, False)
    with pytest.raises(PreflightError) as error:
        check_cache(CONFIG, ["absent"], ["imagenet", "mathverse"], [caches / "ttrv.yaml"], offline=False)
    assert str(error.value) == expected("the Hub is unreachable from here")


def test_offline_is_the_argument_else_hf_hub_offline_and_online_a_reachable_hub_downloads_for_the_jobs(caches, monkeypatch):
    """The model `absent` is in no cache and the Hub answers. Online (offline=False, or HF_HUB_OFFLINE not "1"
    with offline=None) the jobs download it: no stop, whatever HF_HUB_OFFLINE says when the argument is given.
    Offline (offline=True, or None with HF_HUB_OFFLINE=1) only the cache counts: stop, naming the model."""
    reachable(monkeypatch, True)
    args = (CONFIG, ["absent"], [], ["c.yaml"])
    head = "pre-flight: 1 thing(s) this config needs are missing:\n  not in the Hugging Face cache (HF_HUB_OFFLINE=1"
    with pytest.raises(PreflightError) as error:
        check_cache(*args, offline=True)
    assert str(error.value).startswith(head)
    assert check_cache(*args, offline=False) is None
    assert check_cache(*args) is None  # HF_HUB_OFFLINE unset
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert check_cache(*args) is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PreflightError) as error:
        check_cache(*args)
    assert str(error.value).startswith(head)
    assert check_cache(*args, offline=False) is None  # the argument wins over the variable
    cache_model(caches / "hf" / "hub", "OpenGVLab/InternVL3-8B-hf")
    assert check_cache(*args, offline=True) is None  # cached: nothing to fetch


def test_with_a_reachable_hub_only_the_problems_no_download_fixes_stop_the_dry_run(caches, monkeypatch):
    """Online with the Hub reachable the missing model is the jobs' to download; imagenet's missing path still
    stops: 1 thing, one line, no cache section and no fetch command."""
    reachable(monkeypatch, True)
    with pytest.raises(PreflightError) as error:
        check_cache(CONFIG, ["absent"], ["imagenet"], ["c.yaml"], offline=False)
    assert str(error.value) == f"pre-flight: 1 thing(s) this config needs are missing:\n  {IMAGENET_PROBLEM}"


def test_a_model_converted_under_the_given_results_tree_needs_no_download(caches, monkeypatch):
    """`to-convert` is already converted under out/models/converted/to-convert (results=out, not ./results,
    which does not exist): the offline check passes and fetch downloads nothing. Under ./results it would be
    the converter's checkpoint OpenGVLab/InternVL2_5-4B to fetch."""
    (caches / "out" / "models" / "converted" / "to-convert").mkdir(parents=True)
    assert check_cache(CONFIG, ["to-convert"], [], ["c.yaml"], results=caches / "out", offline=True) is None
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda *a, **k: pytest.fail("downloaded"))
    assert preflight.fetch(CONFIG, ["to-convert"], [], results=caches / "out") == []


# --- fetch ---------------------------------------------------------------------------------------------------------

def test_fetch_refuses_with_every_problem_on_its_own_line(caches, monkeypatch):
    """Two datasets no download fixes: imagenet (local-only, no path) and capture (a Hub repository of files,
    no path): the message is the heading and one indented line each, in the order given."""
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda *a, **k: pytest.fail("downloaded"))
    with pytest.raises(PreflightError) as error:
        preflight.fetch(CONFIG, ["absent"], ["imagenet", "capture"])
    assert str(error.value) == f"fetch: fix these config keys first:\n  {IMAGENET_PROBLEM}\n  {CAPTURE_PROBLEM}"


def test_fetch_downloads_each_kind_in_order_and_logs_it_numbered_with_its_config_key(caches, monkeypatch, caplog):
    """data.items: authors with imagenet's local copy set (an existing folder): imagenet needs only the authors'
    unshipped test list; mme's list is shipped and found on the Hub by key, so mme is a Hub dataset. Three
    fetches: the model by snapshot_download with MODEL_FILES, the list by authors_items.fetch_list("imagenet"),
    mme by _fetch_dataset; each logged as "fetch i/3: <describe> (config key `<key>`)", i from 1."""
    (caches / "copies" / "imagenet").mkdir(parents=True)
    config = {**CONFIG, "data": {"items": "authors", "sources": {"imagenet": {"path": "copies/imagenet"}}}}
    calls = []
    monkeypatch.setattr("huggingface_hub.snapshot_download",
                        lambda repo, allow_patterns: calls.append((repo, allow_patterns)))
    monkeypatch.setattr("ttrl_bench.datasets.authors_items.fetch_list", lambda name: calls.append(("list", name)))
    monkeypatch.setattr(preflight, "_fetch_dataset", lambda need: calls.append(("dataset", need.name)))
    caplog.set_level(logging.INFO, logger="ttrl_bench.plan.preflight")
    fetched = preflight.fetch(config, ["absent"], ["imagenet", "mme"])
    assert calls == [("OpenGVLab/InternVL3-8B-hf", preflight.MODEL_FILES), ("list", "imagenet"), ("dataset", "mme")]
    assert [n.kind for n in fetched] == ["model", "items", "dataset"]
    assert [r.getMessage() for r in caplog.records if r.name == "ttrl_bench.plan.preflight"] == [
        "fetch 1/3: model OpenGVLab/InternVL3-8B-hf (config key `models.absent.source`)",
        f"fetch 2/3: dataset imagenet: the TTRV authors' test items, {IMAGENET_LIST} (into {caches / 'tb' / 'ttrv_items'}) "
        "(config key `datasets`)",
        "fetch 3/3: dataset mme: lmms-lab-encoder/MME (split 'test') (config key `datasets`)"]


# --- grid: evaluation flags ------------------------------------------------------------------------------------

def demo_with(extra: str) -> Plan:
    """config/config.yaml with `extra` merged in, as `snakemake --configfile extra.yaml` does."""
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())
    return Plan(validated(merge(base, yaml.safe_load(extra))))


def test_sam2_multimask_and_several_pass_k_reach_the_evaluation_command(tmp_path, monkeypatch):
    """eval_flags passes evaluation.grounding.sam2_multimask where set (`single`: the schema's null default
    sends none) and joins evaluation.math.pass_k with commas (the CLI splits it there). Grounding: the demo's
    64 tokens, 8 samples, empty_mask_iou zero (test_plan.py's demo flags) then --sam2-multimask single.
    Math (mathvista-math in the demo grid): the schema's math defaults (workflow/schemas/config.schema.yaml:
    max_new_tokens 3072 l.315, samples all l.321, temperature 0.6 l.326, top_p 0.95 l.335, prompt training,
    grader exact), n_samples 4 and pass_k [1, 4] from the config."""
    monkeypatch.chdir(tmp_path)
    plan = demo_with("evaluation: {grounding: {sam2_multimask: single}}")
    assert plan.eval_flags("demo-digit-scenes", "n20_random") == (
        "--max-new-tokens 64 --eval-samples 8 --exclude-adaptation-samples --empty-mask-iou zero "
        "--sam2-multimask single --protocol clean")
    plan = demo_with("datasets: [demo-digits, mathvista-math]\nevaluation: {math: {n_samples: 4, pass_k: [1, 4]}}")
    assert plan.eval_flags("mathvista-math", "n20_random") == (
        "--max-new-tokens 3072 --eval-samples all --exclude-adaptation-samples --prompt training --grader exact "
        "--protocol clean --temperature 0.6 --top-p 0.95 --n-samples 4 --pass-k 1,4")


# --- resources: the plan's table -------------------------------------------------------------------------------

def test_plan_table_rows_and_totals_assembled_from_each_jobs_request_or_decision(monkeypatch):
    """plan_table's own arithmetic, with the cost model's answers stood in for (plan/cost.py and
    plan/evaluation_cost.py have their own tests): a plan of datasets a, b; model m converted from an original
    checkpoint, model demo built by the workflow; no card set: the H100 80 GB.
    Requests: conversion 16,500 MB, 60 min; an evaluation 24,500 MB, limit 50 min on 1 GPU; the built model's
    adaptation 1 GPU, 8,000 MB, 40 min. Decisions (for the --gpu-memory given, 40 GB): m on a (1 round: known)
    2 GPUs, offload, micro-batch 4, 70.5 GB, 300.2 GB host, limit 40, 0.5 GPU-hours (12.85 min of adaptation + the
    2.15 min start-up, on 2 GPUs) -> minutes round(0.5 x 60 / 2) = 15, parts adaptation 2 x 12.85 / 60 = 0.42833,
    start-up 2 x 2.15 / 60 = 0.07167; m on b (0 rounds: n_samples all, not known yet) minutes and GPU-hours None.
    Evaluations: a's expected 40.0 min -> minutes round(40 + 2.15) = 42, GPU-hours round(40 / 60 + 2.15 / 60, 2)
    = 0.70; the cross one's test set unknown (expected None): minutes and GPU-hours None, limit still 50.
    Rows: host_gb = MB / 1000 (16.5, 24.5, 8.0); a built model's GPU-hours None (not counted unknown: its request
    is fixed); conversion and preparation 0.0 on no GPU; "->b" only where the target is not the train set.
    Totals: 8 jobs; adapt 0.5, evaluate 0.70 -> 1.2 GPU-hours; parts adaptation 0.4, evaluation 0.7, start-up
    0.07167 + 0.03583 = 0.1075 -> 0.1; 2 jobs not costed (adapt b, the cross evaluation); the longest job counted is
    the evaluation's 42 min -> node hours round(max(1.2 / 8, 42 / 60), 1) = 0.7; the calibration factor 0.78381 at 3
    decimals, 0.784, the prefill 1.25. No job at all: the preparations only, node hours 0.0."""
    from types import SimpleNamespace

    from ttrl_bench.plan import Job, Request, resources
    from ttrl_bench.plan.cards import CARDS
    from ttrl_bench.plan.cost import Calibration, Decision

    adapt_a, adapt_b = Job("adapt", "m", "ttrv", "a", None, "p", 0), Job("adapt", "m", "ttrv", "b", None, "p", 0)
    cross, same = Job("evaluate", "m", "ttrv", "a", "b", "p", 0), Job("evaluate", "m", "ttrv", "a", "a", "p", 0)
    built = Job("adapt", "demo", "ttrv", "a", None, "p", 0)
    plan = SimpleNamespace(datasets=["a", "b"], models={"m": {"convert_from": "Org/M"}, "demo": {"build": "tiny"}},
                           jobs=lambda: [adapt_a, adapt_b, cross, same, built], config={})
    requests = {Job("convert_model", "m"): Request(0, 16500, 60), cross: Request(1, 24500, 50),
                same: Request(1, 24500, 50), built: Request(1, 8000, 40)}
    parts = {"adaptation_min": 12.85, "startup_min": 2.15}
    decisions = {adapt_a: Decision(2, True, 4, 70.5, 300.2, 331000, 40, 0.5, parts),
                 adapt_b: Decision(1, False, 8, 40.0, 100.0, 110000, 30, 9.99, parts)}
    memory_asked = []
    monkeypatch.setattr(resources, "job_request", lambda plan, job: requests[job])
    monkeypatch.setattr(resources, "job_decision", lambda plan, job, gb: memory_asked.append(gb) or decisions[job])
    monkeypatch.setattr(resources, "job_settings", lambda plan, job: SimpleNamespace(rounds={adapt_a: 1, adapt_b: 0}[job]))
    monkeypatch.setattr(resources, "evaluation_job_estimate",
                        lambda plan, job: {"expected_min": {cross: None, same: 40.0}[job]})
    monkeypatch.setattr(resources, "STARTUP_MIN", 2.15)
    monkeypatch.setattr(resources, "calibration", lambda: Calibration(0.78381, [], prefill=1.25))

    def row(rule, job, gpus=0, offload=False, micro_batch=None, peak=None, host=None, minutes=None, hours=0.0, **extra):
        return {"rule": rule, "job": job, "gpus": gpus, "offload": offload, "micro_batch": micro_batch,
                "gpu_peak_gb": peak, "host_gb": host, "minutes": minutes, "gpu_hours": hours, **extra}

    rows, totals = resources.plan_table(plan, 40)
    assert rows == [
        row("prepare_data", "prepare_data a"), row("prepare_data", "prepare_data b"),
        row("convert_model", "convert_model m", host=16.5, minutes=60),
        row("adapt", "adapt m/ttrv/a/p/seed0", 2, True, 4, 70.5, 300.2, 15, 0.5, limit=40, unknown=False,
            parts={"adaptation": 2 * 12.85 / 60, "startup": 2 * 2.15 / 60}),
        row("adapt", "adapt m/ttrv/b/p/seed0", 1, False, 8, 40.0, 100.0, None, None, limit=30, unknown=True, parts={}),
        row("evaluate", "evaluate m/ttrv/a->b/p/seed0", 1, host=24.5, minutes=None, hours=None, limit=50, parts={},
            unknown=True),
        row("evaluate", "evaluate m/ttrv/a/p/seed0", 1, host=24.5, minutes=42, hours=0.70, limit=50, unknown=False,
            parts={"evaluation": 40 / 60, "startup": 2.15 / 60}),
        row("adapt", "adapt demo/ttrv/a/p/seed0", 1, host=8.0, minutes=None, hours=None, limit=40, parts={},
            unknown=False)]
    assert memory_asked == [40, 40]
    assert totals == {"jobs": 8, "gpu_hours": 1.2, "gpu_hours_by_rule": {"adapt": 0.5, "evaluate": 0.7},
                      "gpu_hours_by_part": {"adaptation": 0.4, "evaluation": 0.7, "startup": 0.1}, "unknown": 2,
                      "card": CARDS["h100"], "margin": 2.0, "startup_min": 2.15,
                      "gpus_per_node": 8, "node_hours": 0.7, "factor": 0.784, "prefill_factor": 1.25}
    plan.jobs = lambda: []
    empty = resources.plan_table(plan)[1]
    assert (empty["jobs"], empty["gpu_hours"], empty["gpu_hours_by_rule"], empty["node_hours"]) == (2, 0.0, {}, 0.0)


def test_fewer_gpus_names_each_multi_gpu_model_with_its_one_gpu_cost_or_why_nothing_fits(monkeypatch):
    """fewer_gpus, with the decisions stood in for (for the --gpu-memory given, 40 GB). Models in sorted order:
    a-wide (4 GPUs; on one GPU nothing fits: the decision's error), b-two (two 2-GPU adaptations, 3.0 + 1.5 = 4.5
    GPU-hours; on one GPU 7.2 with offload + 2.5 without = 9.7: "1 of them with offload"), c-plain (4 GPUs, 2.0;
    one GPU without offload 6.0: no offload clause), d-one (already one GPU: not named) and demo (built by the
    workflow: never decided, its request is fixed)."""
    from types import SimpleNamespace

    from ttrl_bench.plan import Job, resources
    from ttrl_bench.plan.cost import Decision

    def adapt(model, dataset="x"):
        return Job("adapt", model, "ttrv", dataset, None, "p", 0)

    jobs = [adapt("d-one"), adapt("c-plain"), adapt("b-two", "x"), adapt("b-two", "y"), adapt("a-wide"), adapt("demo"),
            Job("evaluate", "b-two", "ttrv", "x", "x", "p", 0)]
    plan = SimpleNamespace(models={m: {"source": f"o/{m}"} for m in ("a-wide", "b-two", "c-plain", "d-one")}
                           | {"demo": {"build": "tiny"}}, jobs=lambda: jobs)

    def decision(gpus, hours, offload=False):
        return Decision(gpus, offload, 1, 50.0, 100.0, 110000, 60, hours)

    decided = {(adapt("d-one"), None): decision(1, 1.0), (adapt("c-plain"), None): decision(4, 2.0),
               (adapt("c-plain"), 1): decision(1, 6.0), (adapt("b-two", "x"), None): decision(2, 3.0),
               (adapt("b-two", "y"), None): decision(2, 1.5), (adapt("b-two", "x"), 1): decision(1, 7.2, True),
               (adapt("b-two", "y"), 1): decision(1, 2.5), (adapt("a-wide"), None): decision(4, 8.0)}

    def job_decision(plan, job, gpu_memory_gb, gpus=None):
        assert gpu_memory_gb == 40
        if job == adapt("a-wide") and gpus == 1:
            raise ValueError("adapt a-wide/ttrv/x: predicted GPU peak 90.0 GB per GPU exceeds the GPU's 40 GB")
        return decided[job, gpus]

    monkeypatch.setattr(resources, "job_decision", job_decision)
    assert resources.fewer_gpus(plan, 40) == [
        "models.a-wide.gpus: 1 does not fit: adapt a-wide/ttrv/x: predicted GPU peak 90.0 GB per GPU exceeds the "
        "GPU's 40 GB",
        "models.b-two.gpus: 1 runs its 2 multi-GPU adaptation(s) on one GPU each, 1 of them with offload: "
        "9.7 GPU-hours instead of 4.5",
        "models.c-plain.gpus: 1 runs its 1 multi-GPU adaptation(s) on one GPU each: 6.0 GPU-hours instead of 2.0"]


def test_a_converted_models_drop_path_is_its_original_checkpoints_and_the_micro_batch_the_decided_one(monkeypatch):
    """job_method_settings with vision_drop_path "checkpoint" (the authors' protocol, protocols.py): the rate of the
    checkpoint the authors trained, named by its Hub id (models/families.py:243 ORIGINAL_VISION_DROP_PATH: InternVL3-
    0.1). A model converted from OpenGVLab/InternVL3-2B is read from results/models/converted/<name> (the plan's
    `source` of a converted model), a path that names no family: its rate comes from `convert_from`, 0.1, not the
    path's 0.0. A Hub model's from its source; a Qwen's 0.0. The decided micro-batch (4) replaces the preset's."""
    from types import SimpleNamespace

    from ttrl_bench.plan import Job, Request, resources

    plan = SimpleNamespace(
        models={"ivl3-orig": {"convert_from": "OpenGVLab/InternVL3-2B", "source": "results/models/converted/ivl3-orig"},
                "ivl3-hf": {"source": "OpenGVLab/InternVL3-2B-hf"}, "qwen": {"source": "Qwen/Qwen2.5-VL-7B-Instruct"}},
        method_settings=lambda method, protocol: {
            "hyperparameters": {"vision_drop_path": "checkpoint", "micro_batch_size": 2}, "reward": "r"})
    monkeypatch.setattr(resources, "job_request", lambda plan, job: Request(2, 1000, 10, micro_batch=4))
    for model, rate in (("ivl3-orig", 0.1), ("ivl3-hf", 0.1), ("qwen", 0.0)):
        job = Job("adapt", model, "ttrv", "ai2d", None, "n20_random_authors", 0)
        assert resources.job_method_settings(plan, job) == {
            "hyperparameters": {"vision_drop_path": rate, "micro_batch_size": 4}, "reward": "r"}


def test_the_largest_gpu_request_is_the_widest_jobs_and_zero_without_jobs(monkeypatch):
    """largest_gpu_request: max over the jobs' requests (1, 4, 2 -> 4); a plan of no job asks for 0 GPUs (max's
    default), not 1 and not an error."""
    from types import SimpleNamespace

    from ttrl_bench.plan import Job, Request, resources

    jobs = [Job("evaluate", "m", "zero-shot", "none", "a", "p", 0), Job("adapt", "m", "ttrv", "a", None, "p", 0),
            Job("adapt", "m", "ttrv", "b", None, "p", 0)]
    gpus = dict(zip(jobs, (1, 4, 2)))
    monkeypatch.setattr(resources, "job_request", lambda plan, job: Request(gpus[job], 1000, 10))
    assert resources.largest_gpu_request(SimpleNamespace(jobs=lambda: jobs)) == 4
    assert resources.largest_gpu_request(SimpleNamespace(jobs=lambda: [])) == 0


# --- checks: every job's request and GRPO layout ------------------------------------------------------------------

def test_check_requests_decides_every_jobs_request_and_lays_out_each_grpo_adaptation(tmp_path, monkeypatch):
    """config/config.yaml's demo with models.demo.gpus 3. The MCQ adaptations (num_generations 16, prompts_per_step 1,
    micro_batch_size 16; config.yaml:35-42) on 3 processes: micro-batch min(16, 16 // 3 = 5) = 5, and 16 is no
    multiple of 5 x 3 = 15: refused. With VR-TTRL alone (grounding: 8 rollouts, micro-batch 8; config.yaml:46-52):
    min(8, 8 // 3 = 2) = 2, 8 is no multiple of 2 x 3 = 6: refused. On 1 GPU, Tent (an objective baseline, no
    num_generations) is not laid out and passes beside VR-TTRL; every job's request, evaluations included, is
    decided (in plan.jobs() order)."""
    from ttrl_bench.plan import checks

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as error:
        checks.check_requests(demo_with("models: {demo: {gpus: 3}}"))
    assert str(error.value) == ("adaptation.hyperparameters.<task>: prompts_per_step x num_generations = 16 completions "
                                "per step is not a multiple of micro_batch_size 5 x 3 process(es)")
    with pytest.raises(ValueError) as error:
        checks.check_requests(demo_with("models: {demo: {gpus: 3}}\nmethods: [zero-shot, vr-ttrl]"))
    assert str(error.value) == ("adaptation.hyperparameters.<task>: prompts_per_step x num_generations = 8 completions "
                                "per step is not a multiple of micro_batch_size 2 x 3 process(es)")
    # n_samples "all": the layout is planned for the split's samples, read through the plan (the bundled size
    # before preparation; samples.py layout_samples); 16 rollouts in micro-batches of 16 on 1 GPU run
    assert checks.check_requests(demo_with("adaptation: {n_samples: all}\nmethods: [zero-shot, ttrv]")) is None
    plan = demo_with("methods: [zero-shot, tent, vr-ttrl]")
    asked = []
    real = checks.job_request
    monkeypatch.setattr(checks, "job_request", lambda plan, job: asked.append(job) or real(plan, job))
    checks.check_requests(plan)
    assert asked == plan.jobs() and {j.rule for j in asked} == {"adapt_per_sample", "evaluate"}


# --- memory: the fake model a trace runs on ---------------------------------------------------------------------

def test_the_fake_model_owns_its_config_and_takes_real_inputs_under_its_mode():
    """build_fake (plan/memory.py): transformers' from_config keeps the config object it is given (model.config is
    it), and a trace edits the model's config, so build_fake hands it a deep copy: editing the fake model's config,
    nested text_config included, leaves the caller's. Its FakeTensorMode allows non-fake inputs: real token ids
    (torch.zeros made outside the mode) go through the fake embedding, giving a fake (1, 3, hidden) tensor without
    memory. A 1-layer InternVL3-2B-hf config keeps the build under a second."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    from ttrl_bench.plan import memory

    config = memory.model_config("OpenGVLab/InternVL3-2B-hf")
    config.text_config.num_hidden_layers, config.vision_config.num_hidden_layers = 1, 1
    before = config.to_dict()
    model, mode = memory.build_fake(config, torch.bfloat16)
    model.config.use_cache = False
    model.config.text_config.use_cache = False
    model.config.text_config.num_hidden_layers = 5
    assert config.to_dict() == before
    ids = torch.zeros(1, 3, dtype=torch.long)
    with mode:
        embeds = model.get_input_embeddings()(ids)
    assert isinstance(embeds, FakeTensor) and tuple(embeds.shape) == (1, 3, config.text_config.hidden_size)
    assert embeds.dtype == torch.bfloat16


# --- cost: the compute minutes of a job -------------------------------------------------------------------------

def test_compute_minutes_of_a_training_job_without_reference_and_of_a_vote_only_job(monkeypatch):
    """runtime_minutes with the traces and the authors' throughput stood in for: 1e10 FLOP/s per GPU, x the fitted
    FLOP_RATE_FACTOR 3.09 = 3.09e10, a model of 1e9 parameters (8.5e8 trainable), a traced training step of 5e11 FLOPs
    per sequence (1e12 at micro-batch 2), a traced prefill of 1e11 per sequence.
    Training, no KL reference (kl_beta 0): 2 prompts x (4 trained x 5e11 + 8 rollouts x 5e11 / 3 x 1 old-policy
    forward + 8 x 10 new tokens x 2 x 1e9) = 2 x 3.49333e12 = 6.98667e12 a round, x 3 rounds = 2.096e13 FLOPs; on 2 GPUs
    2.096e13 / (3.09e10 x 2) / 60 = 339.1586 s / 60 = 5.65264 min. (With a reference: two forwards, 2.896e13.)
    Traffic: 2 prompts x 4 trained / 2 GPUs / micro-batch 2 = 2 micro-batches a GPU a round, x 3 rounds = 6, each
    8.5e8 trainable x 12 B / 10.2 GB/s = 1.0 s: 0.1 min. Total 5.75264 min.
    Vote-only (updates: False): 1 prompt x 8 rollouts x (8e11 / 8 + 10 x 2 x 1e9) = 9.6e11 a round, x 5 rounds =
    4.8e12 FLOPs; 4.8e12 / 3.09e10 / 60 = 155.3398 s / 60 = 2.58900 min on 1 GPU; no step, no traffic."""
    from ttrl_bench.plan import cost, memory
    from ttrl_bench.plan.memory import Trace

    per_sequence = {"train": 5e11, "prefill": 1e11}
    monkeypatch.setattr(memory, "cached_trace",
                        lambda config, shape: Trace(0.0, int(1e9), int(8.5e8), per_sequence[shape.kind] * shape.sequences,
                                                    0.0, {}))
    monkeypatch.setattr(cost, "authors_throughput_flops", lambda: 1e10)
    training = cost.JobSettings(rollouts=8, trained=4, prompts_per_step=2, new_tokens=10, rounds=3, reference=False)
    time = cost.runtime_minutes(None, training, 2, 2)
    # rel 1e-12: the same divisions in another order
    assert time == pytest.approx({"flops": 2.096e13, "flops_per_gpu_second": 3.09e10, "flop_min": 2.096e13 / 6.18e10 / 60,
                                  "traffic_min": 0.1, "compute_min": 2.096e13 / 6.18e10 / 60 + 0.1}, rel=1e-12)
    assert round(time["compute_min"], 5) == 5.75264
    with_reference = cost.runtime_minutes(None, cost.JobSettings(8, 4, 2, 10, 3), 2, 2)
    assert with_reference["flops"] == pytest.approx(2.896e13, rel=1e-12)
    vote_only = cost.JobSettings(rollouts=8, trained=8, prompts_per_step=1, new_tokens=10, rounds=5, trains=False,
                                 reference=False)
    assert cost.runtime_minutes(None, vote_only, 1, 1) == pytest.approx(
        {"flops": 4.8e12, "flops_per_gpu_second": 3.09e10, "flop_min": 4.8e12 / 3.09e10 / 60, "traffic_min": 0.0,
         "compute_min": 4.8e12 / 3.09e10 / 60}, rel=1e-12)
    assert round(cost.runtime_minutes(None, vote_only, 1, 1)["compute_min"], 5) == 2.58900


def test_a_decision_records_the_parameters_and_trainable_counts_of_the_trace_it_rests_on(monkeypatch):
    """Decision.predicted ("the parts behind the numbers") names the traced model's parameter counts: a training job
    the training trace's (8e9 parameters, 7e9 trainable, as in test_plan_cost.py's synthetic traces), a vote-only
    job the prefill trace's (the whole model, nothing trainable: 0), on the one GPU a vote-only job takes."""
    from ttrl_bench.plan import cost, memory
    from ttrl_bench.plan.memory import Trace

    def trace(config, shape):
        if shape.kind == "train":
            return Trace(116 + 2 + 1.5 * shape.sequences, int(8e9), int(7e9), 1e12 * shape.sequences, 0.0, {})
        return Trace(16 + 0.1 * shape.sequences, int(8e9), 0, 1e11 * shape.sequences, 0.0, {})

    monkeypatch.setattr(memory, "cached_trace", trace)
    monkeypatch.setattr(cost, "calibration", lambda: cost.Calibration(1.0, []))
    monkeypatch.setattr(cost, "authors_throughput_flops", lambda: 1e10)
    d = cost.decide(None, cost.JobSettings(rollouts=32, trained=16, prompts_per_step=1, new_tokens=32, rounds=10))
    assert (d.predicted["parameters"], d.predicted["trainable"]) == (8_000_000_000, 7_000_000_000)
    vote_only = cost.JobSettings(rollouts=8, trained=8, prompts_per_step=1, new_tokens=10, rounds=5, trains=False,
                                 reference=False)
    d = cost.decide(None, vote_only)
    # one GPU and one sequence at a time: nothing shards or batches a vote-only job
    assert (d.gpus, d.micro_batch, d.predicted["parameters"], d.predicted["trainable"]) == (1, 1, 8_000_000_000, 0)


def test_a_training_steps_peak_defaults_to_no_offload_on_an_80_gb_gpu(monkeypatch):
    """gpu_peak_gb's defaults (offload False, 80 GB: the schema's GPU memory), with test_plan_cost.py's synthetic
    trace (8e9 parameters, 7e9 trainable, peak 118 + 1.5 GB per sequence) and calibration 1: fp32 state
    8e9 x 4 + 7e9 x 12 bytes = 116 GB; at micro-batch 8 on 2 GPUs: held 116 / 2 = 58 + activations 118 + 12 - 116
    = 14, + the bf16 reference 2 x 8e9 / 2 = 8 GB, + vLLM's 0.3 x 80 = 24 GB: 104 GB per GPU. A vote-only job has
    only its generation's peak, every other part 0."""
    from ttrl_bench.plan import cost, memory
    from ttrl_bench.plan.memory import Trace

    monkeypatch.setattr(memory, "cached_trace", lambda config, shape: Trace(
        118 + 1.5 * shape.sequences, int(8e9), int(7e9), 1e12 * shape.sequences, 0.0, {}))
    monkeypatch.setattr(cost, "calibration", lambda: cost.Calibration(1.0, [], prefill=1.0))
    settings = cost.JobSettings(rollouts=32, trained=16, prompts_per_step=1, new_tokens=32, rounds=10, vllm_share=0.3)
    peaks = cost.gpu_peak_gb(None, settings, 8, 2)
    assert (peaks["state_gb"], peaks["activations_gb"], peaks["reference_gb"], peaks["vllm_gb"]) == pytest.approx(
        (116.0, 14.0, 8.0, 24.0), rel=1e-12)
    assert peaks["train_gb"] == pytest.approx(104.0, rel=1e-12) and peaks["generation_gb"] == 0.0
    # bf16 weights (fp32_master False): 2 bytes each, state 8e9 x 2 + 7e9 x 6 = 58 GB
    bf16 = cost.gpu_peak_gb(None, cost.JobSettings(32, 16, 1, 32, 10, fp32_master=False), 8, 2)
    assert bf16["state_gb"] == pytest.approx(58.0, rel=1e-12)
    # no KL reference, no vLLM: 0 GB of reference; HF generate's prefill of this process's ceil(32 / 2) = 16
    # rollouts, traced on the job's model config: 118 + 1.5 x 16 = 142 GB (prefill factor 1)
    monkeypatch.setattr(memory, "cached_trace", lambda config, shape: Trace(
        118 + 1.5 * shape.sequences + (0 if config == "the model" else 1000), int(8e9), int(7e9), 0.0, 0.0, {}))
    plain = cost.gpu_peak_gb("the model", cost.JobSettings(32, 16, 1, 32, 10, reference=False), 8, 2)
    assert (plain["reference_gb"], plain["generation_gb"]) == (0.0, 142.0)
    # vote-only: no training step; each process generates all 8 rollouts with the whole model: 118 + 1.5 x 8 = 130 GB
    vote_only = cost.JobSettings(rollouts=8, trained=8, prompts_per_step=1, new_tokens=10, rounds=5, trains=False)
    assert cost.gpu_peak_gb("the model", vote_only, 1, 1) == {
        "train_gb": 0.0, "generation_gb": 130.0, "state_gb": 0.0, "activations_gb": 0.0, "reference_gb": 0.0,
        "vllm_gb": 0.0, "factor": 1.0, "prefill_factor": 1.0}


def test_the_jobs_of_a_small_grid_name_every_field_of_each_run():
    """The demo config cut to zero-shot, ttrv and vr-ttrl on demo-digits, seed 3. vr-ttrl adapts on boxes, not
    on letters: not on this dataset. One adaptation (ttrv on the 20 random samples, n20_random) and two
    evaluations in Run order (method "ttrv" before "zero-shot"): zero-shot's train "none", its protocol the same
    n20_random (the adaptation samples are excluded from its items too)."""
    plan = demo_with("methods: [zero-shot, ttrv, vr-ttrl]\ndatasets: [demo-digits]\nseeds: [3]\n")
    assert plan.jobs() == [
        Job("adapt", "demo", "ttrv", "demo-digits", None, "n20_random", 3),
        Job("evaluate", "demo", "ttrv", "demo-digits", "demo-digits", "n20_random", 3),
        Job("evaluate", "demo", "zero-shot", "none", "demo-digits", "n20_random", 3),
    ]
    assert (plan.fits("zero-shot", "demo-digits"), plan.fits("ttrv", "demo-digits"), plan.fits("vr-ttrl", "demo-digits")) \
        == (False, True, False)
