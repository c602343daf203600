"""plan/preflight.py, the caches it reads: what each model and dataset needs (Need, dataset_keys),
check_cache's messages word for word and when it stops (offline, the Hub unreachable), and what `fetch` logs and
calls. Every expected value is worked out by hand in the test's docstring or read from the registry / schema /
config (file:line named). No network: caches are built by hand in the libraries' layouts (as test_preflight.py
does), downloads and the Hub probe are stood in for.

Registry entries used below (src/ttrl_bench/datasets/registry.py) are described beside the constants."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from ttrl_bench.plan import preflight
from ttrl_bench.plan.preflight import Need, PreflightError, check_cache, dataset_keys, fetch_command

from tests.support.plan import cache_model  # a model in huggingface_hub's layout, its config and header readable


def cache_dataset(datasets_cache: Path, folder: str, configuration: str, split: str) -> None:
    """datasets' Arrow layout: <org>___<name in snake case>/<configuration>/<version>/<hash>/dataset_info.json."""
    directory = datasets_cache / folder / configuration / "0.0.0" / "abc123"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "dataset_info.json").write_text(json.dumps({"splits": {split: {"num_examples": 1}}}))

def reachable(monkeypatch, up: bool) -> None:
    """Stand in for the TCP probe of the Hub (datasets/sources.py hub_reachable; check_cache imports it at call time)."""
    monkeypatch.setattr("ttrl_bench.datasets.sources.hub_reachable", lambda: up)

CAPTURE_PROBLEM = ("config key `data.sources.capture.path` is not set: dataset 'capture' (datasets) is a Hub repository "
                   "of files (atinp/CAPTURe); download real_metadata.json, real_dataset.zip into a folder and point the "
                   "key at it")

# Registry entries used below (src/ttrl_bench/datasets/registry.py): imagenet is local-only
# (local:imagefolder), mathverse is CaraJ/MathVerse-lmmseval with Hub configuration and split "testmini",
# mme is lmms-lab-encoder/MME split "test", capture a Hub repository of files (real_metadata.json,
# real_dataset.zip). The authors' imagenet test list is not shipped (datasets/data/ttrv_items/index.json:
# verl/data/imagenet_1k_20/test.json, no "file"), so `ttrl-bench fetch` downloads it into TTRL_BENCH_CACHE.
IMAGENET_LIST = "verl/data/imagenet_1k_20/test.json"

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

IMAGENET_PROBLEM = ("config key `data.sources.imagenet.path` is not set: dataset 'imagenet' (datasets) has no Hub copy "
                    "(local:imagefolder); point it at a local copy")


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
