"""Pre-flight (issue 26 points 2-3): the dry run finds each model and dataset of a config in a Hugging
Face cache or at its local path and names every missing one with its config key and the command
that fetches them. The caches here are built by hand in the libraries' layouts (tests/support/plan.py, no network); the
first test checks that huggingface_hub's and datasets' own lookups find them."""

import json
from pathlib import Path

import pytest

from tests.support.plan import cache_dataset, cache_dataset_file, cache_model, safetensors_file
from ttrl_bench.datasets.registry import REGISTRY
from ttrl_bench.plan import preflight
from ttrl_bench.plan.preflight import Need, PreflightError, check_cache, dataset_cached, model_cached

def test_the_hand_built_caches_are_what_the_libraries_look_up(tmp_path):
    from datasets.packaged_modules.cache.cache import _find_hash_in_cache
    from huggingface_hub import try_to_load_from_cache

    cache_model(tmp_path / "hub", "Org/Model-2B")
    assert try_to_load_from_cache("Org/Model-2B", "config.json", cache_dir=str(tmp_path / "hub")).endswith("config.json")
    cache_dataset(tmp_path / "datasets", "CaraJ/MathVerse-lmmseval", "testmini", "testmini")
    assert _find_hash_in_cache("CaraJ/MathVerse-lmmseval", "testmini", str(tmp_path / "datasets"), {}, None) == (
        "testmini", "0.0.0", "abc123")


def test_a_model_needs_its_config_and_weights_and_a_dataset_its_split(tmp_path):
    cache_model(tmp_path, "org/config-only", files=("config.json",))
    cache_model(tmp_path, "org/sharded", files=("config.json", "model.safetensors.index.json"))
    assert not model_cached("org/config-only", tmp_path)
    assert model_cached("org/sharded", tmp_path)
    assert not model_cached("org/absent", tmp_path)
    cache_dataset(tmp_path, "ethz/food101", "train")
    assert not dataset_cached("ethz/food101", None, "validation", tmp_path)  # TTRV scores food101's validation split
    cache_dataset(tmp_path, "ethz/food101", "validation")
    assert dataset_cached("ethz/food101", None, "validation", tmp_path)
    assert not dataset_cached("CaraJ/MathVerse-lmmseval", "testmini", "testmini", tmp_path)
    # a clip-benchmark set also needs its classnames.txt (no ClassLabel in the shards)
    dtd = Need("dataset", "datasets", "clip-benchmark/wds_vtab-dtd", "dtd", None, "test")
    cache_dataset(tmp_path / "datasets", dtd.repo, "test")
    assert preflight.missing([dtd], tmp_path / "hub", tmp_path / "datasets") == [dtd]
    cache_dataset_file(tmp_path / "hub", dtd.repo, "classnames.txt")
    assert preflight.missing([dtd], tmp_path / "hub", tmp_path / "datasets") == []


CONFIG = {
    "models": {
        "cached": {"source": "OpenGVLab/InternVL3-2B-hf"},
        "to-convert": {"convert_from": "OpenGVLab/InternVL2_5-4B"},
        "absent": {"source": "OpenGVLab/InternVL3-8B-hf"},
        "built": {"build": "tiny-internvl"},
    },
    "datasets": ["food101", "mme", "imagenet", "demo-digits"],
    "experiments": {"cross": {"enabled": True, "cross": [["food101", "seed-bench"]]},
                    "off": {"enabled": False, "datasets": ["ai2d"]}},
    "data": {"sources": {}},
}


@pytest.fixture
def hf_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HOME", str(tmp_path / "hf"))
    return tmp_path / "hf"


def test_offline_every_missing_model_and_dataset_is_named_with_its_key_and_the_fetch(hf_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cache_model(hf_home / "hub", "OpenGVLab/InternVL3-2B-hf")
    cache_dataset(hf_home / "datasets", "ethz/food101", "validation")
    models, datasets = sorted(CONFIG["models"]), sorted(set(CONFIG["datasets"]) | {"seed-bench"})
    with pytest.raises(PreflightError) as error:
        check_cache(CONFIG, models, datasets, [tmp_path / "ttrv.yaml"], offline=True)
    message = str(error.value)
    assert message.startswith("pre-flight: 5 thing(s) this config needs are missing:")
    for line in ["config key `data.sources.imagenet.path` is not set: dataset 'imagenet' (datasets) has no Hub copy",
                 "config key `models.to-convert.convert_from`: model OpenGVLab/InternVL2_5-4B",
                 "config key `models.absent.source`: model OpenGVLab/InternVL3-8B-hf",
                 "config key `datasets`: dataset mme: lmms-lab-encoder/MME (split 'test')",
                 "config key `experiments.cross.cross`: dataset seed-bench: lmms-lab-encoder/SEED-Bench (split 'test')",
                 "ttrl-bench fetch ttrv.yaml"]:
        assert line in message
    for cached in ("InternVL3-2B-hf", "food101", "tiny-internvl", "demo-digits", "ai2d"):
        assert cached not in message


def test_without_network_and_not_offline_every_missing_one_is_named(hf_home, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: an unreachable Hub
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    config = {**CONFIG, "datasets": ["mme"], "experiments": {}}
    with pytest.raises(PreflightError) as error:
        check_cache(config, ["absent", "to-convert"], ["mme"], ["c.yaml"])
    message = str(error.value)
    assert "the Hub is unreachable from here" in message
    assert "`models.absent.source`" in message and "`models.to-convert.convert_from`" in message and "mme" in message


def test_local_copies_prepared_datasets_and_converted_models_need_no_cache(hf_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "copies" / "imagenet").mkdir(parents=True)
    (tmp_path / "results" / "data" / "mme").mkdir(parents=True)
    (tmp_path / "results" / "data" / "mme" / "manifest.parquet").write_text("")
    (tmp_path / "results" / "models" / "converted" / "to-convert").mkdir(parents=True)
    config = {**CONFIG, "data": {"sources": {"imagenet": {"path": "copies/imagenet"}}}}
    check_cache(config, ["to-convert", "built"], ["imagenet", "mme", "demo-digits"], ["c.yaml"], offline=True)
    config["data"]["sources"]["imagenet"]["path"] = "copies/none"
    with pytest.raises(PreflightError, match=r"config key `data.sources.imagenet.path`: copies/none does not exist"):
        check_cache(config, [], ["imagenet"], ["c.yaml"], offline=True)


def test_fetch_downloads_what_the_check_lists(hf_home, monkeypatch):
    calls = []
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda repo, allow_patterns: calls.append((repo, allow_patterns)))
    monkeypatch.setattr(preflight, "_fetch_dataset", lambda need: calls.append(need.name))
    config = {**CONFIG, "data": {"sources": {"imagenet": {"path": "."}}}}
    # what the dry run's check is given (checks.run_all): the models of the plan's runs and its datasets
    models, datasets = sorted(CONFIG["models"]), sorted(set(CONFIG["datasets"]) | {"seed-bench"})
    fetched = preflight.fetch(config, models, datasets)
    from ttrl_bench.models.convert_internvl import CHECKPOINT_FILES

    # the models of the main grid (all: no main_grid false) and the datasets of the enabled blocks
    assert calls == [("OpenGVLab/InternVL3-8B-hf", preflight.MODEL_FILES), ("OpenGVLab/InternVL3-2B-hf", preflight.MODEL_FILES),
                     ("OpenGVLab/InternVL2_5-4B", CHECKPOINT_FILES), "food101", "mme", "seed-bench"]
    assert [n.kind for n in fetched] == ["model"] * 3 + ["dataset"] * 3
    with pytest.raises(PreflightError, match="data.sources.imagenet.path"):
        preflight.fetch(CONFIG, models, datasets)  # a local-only set without a copy: nothing downloads


def test_the_models_a_config_uses(tmp_path):
    """What the pre-flight checks and fetch downloads: the main grid's models (not `main_grid: false`)
    and those of enabled experiments."""
    from ttrl_bench.plan import Plan, validated

    block = {"methods": ["zero-shot"], "datasets": ["mme"]}
    config = validated({"datasets": ["mme"], "methods": ["zero-shot"],
                        "models": {"a": {"source": "o/a"}, "b": {"source": "o/b", "main_grid": False},
                                   "c": {"source": "o/c", "main_grid": False}},
                        "experiments": {"x": {"enabled": True, "models": ["b"], **block},
                                        "y": {"enabled": False, "models": ["c"], **block}}})
    assert Plan(config).run_models == ["a", "b"]


def test_offline_ttrv_dry_run_with_an_empty_cache_stops_before_any_job(tmp_path):
    """Issue 26's done-when: HF_HUB_OFFLINE=1 and an empty cache list every model and dataset of
    config/ttrv.yaml and the fetch. Tables 1-2 under the authors' items: 3 models; 6 Hub datasets (Food101,
    MathVista, SEED, MME, RealWorldQA, AI2D); the 4 unshipped authors' test lists (ImageNet, -R, -Sketch, -V2);
    10 local copies not set (DTD, RESISC45, MathVerse and the 5 ImageNets for the authors' items; CaptureQA
    and CRPE, Hub repositories of files)."""
    import os

    from tests.support.workflow import copy_workflow, run_snakemake

    work = copy_workflow(tmp_path)
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty"), "TTRL_BENCH_CACHE": str(tmp_path / "empty")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        result = run_snakemake(work, "-n", "--configfile", "config/ttrv.yaml", "--replace-workflow-config", check=False)
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "pre-flight: 23 thing(s) this config needs are missing:" in output
    assert output.count("    config key `models.") == 3 and output.count("    config key `datasets`: dataset ") == 10
    assert output.count("the TTRV authors' test items, verl/data/") == 4 and output.count("official layout") == 8
    assert output.count("is a Hub repository of files") == 2
    assert "ttrl-bench fetch config/ttrv.yaml" in output
    assert "Job stats" not in output and not (work / "results").exists()


def test_fetch_command_reads_the_config_as_snakemake_does_and_refuses_before_downloading(capsys, caplog, monkeypatch):
    from ttrl_bench.cli import main

    repo = Path(__file__).parents[2]
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda *a, **k: pytest.fail("downloaded"))
    assert main(["fetch", str(repo / "config/ttrv.yaml")]) == 1
    assert "fetch: fix these config keys first:" in caplog.text and "`data.sources.imagenet.path` is not set" in caplog.text
    assert capsys.readouterr().err == ""  # no rerun line: fetch is not a pipeline step
    from ttrl_bench.plan import Plan, load_config

    # the schema's defaults filled in: experiments are off unless enabled, so Table 7's Qwen is not fetched
    assert Plan(load_config(repo / "config/ttrv.yaml")).run_models == ["internvl2.5-4b", "internvl3-2b", "internvl3-8b"]


def test_a_hub_id_without_an_organisation_is_looked_up_by_its_name_alone(tmp_path):
    """The Hub's older canonical datasets have no organisation (e.g. `Food101`): datasets' cache folder is then the
    snake-cased name alone, food101/<configuration>/<version>/<hash>/ (no `___` joint)."""
    directory = tmp_path / "food101" / "default" / "0.0.0" / "abc123"
    directory.mkdir(parents=True)
    (directory / "dataset_info.json").write_text(json.dumps({"splits": {"validation": {"num_examples": 1}}}))
    assert dataset_cached("Food101", None, "validation", tmp_path)
    assert not dataset_cached("Food101", None, "train", tmp_path)


def test_fetching_a_dataset_loads_it_as_preparation_does_and_a_clip_benchmark_sets_class_names(monkeypatch):
    """_fetch_dataset: the registry entry of the need's name goes to datasets/sources.py `_load_hub` (the call
    preparation makes); a clip-benchmark set (DTD: clip-benchmark/wds_vtab-dtd) also downloads its
    classnames.txt from the dataset repository, an other set (MME: lmms-lab-encoder/MME) nothing more."""
    calls = []
    monkeypatch.setattr("ttrl_bench.datasets.sources._load_hub", lambda spec: calls.append(("load", spec)))
    monkeypatch.setattr("huggingface_hub.hf_hub_download",
                        lambda repo, filename, repo_type: calls.append((repo, filename, repo_type)))
    preflight._fetch_dataset(Need("dataset", "datasets", "clip-benchmark/wds_vtab-dtd", "dtd", None, "test"))
    assert calls == [("load", REGISTRY["dtd"]), ("clip-benchmark/wds_vtab-dtd", "classnames.txt", "dataset")]
    calls.clear()
    preflight._fetch_dataset(Need("dataset", "datasets", "lmms-lab-encoder/MME", "mme", None, "test"))
    assert calls == [("load", REGISTRY["mme"])]


def test_sam2_is_named_by_the_check_and_downloaded_by_fetch_where_masks_are_scored(hf_home, monkeypatch):
    """evaluation.grounding.sam2 is a download of a config with a mask-scored (giou_ciou) dataset only; the
    original release, which Sam2Model cannot read, is refused naming its -hf conversion."""
    grounding = {"models": {"built": {"build": "tiny-qwen"}}, "datasets": ["demo-digit-scenes"], "data": {"sources": {}},
                 "evaluation": {"grounding": {"sam2": "facebook/sam2-hiera-large-hf"}}}
    with pytest.raises(PreflightError) as error:
        check_cache(grounding, ["built"], ["demo-digit-scenes"], ["vr.yaml"], offline=True)
    assert "config key `evaluation.grounding.sam2`: model facebook/sam2-hiera-large-hf" in str(error.value)
    cache_model(hf_home / "hub", "facebook/sam2-hiera-large-hf")
    check_cache(grounding, ["built"], ["demo-digit-scenes"], ["vr.yaml"], offline=True)  # cached: nothing missing
    check_cache(grounding, ["built"], ["demo-digits"], ["vr.yaml"], offline=True)  # no masks scored: no SAM2
    calls = []
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda repo, allow_patterns: calls.append(repo))
    preflight.fetch(grounding, ["built"], ["demo-digit-scenes"])
    assert calls == ["facebook/sam2-hiera-large-hf"]
    grounding["evaluation"]["grounding"]["sam2"] = "facebook/sam2-hiera-large"
    with pytest.raises(PreflightError, match=r"`evaluation.grounding.sam2`: facebook/sam2-hiera-large is SAM2's "
                                             r"original release .* name facebook/sam2-hiera-large-hf"):
        check_cache(grounding, ["built"], ["demo-digit-scenes"], ["vr.yaml"], offline=True)


def test_the_check_reads_each_cached_or_local_model_s_config_and_safetensors_header(hf_home, tmp_path):
    """A 0-byte model.safetensors beside a `{}` config.json passed the dry run (existence only); now each is read."""
    config = {"models": {"m": {"source": "org/model"}}, "datasets": [], "data": {"sources": {}}}
    snapshot = cache_model(hf_home / "hub", "org/model")
    check_cache(config, ["m"], [], ["c.yaml"], offline=True)  # config and header agree: nothing to say
    (snapshot / "model.safetensors").write_bytes(b"")
    with pytest.raises(PreflightError, match=r"`models.m.source`: .*model.safetensors is not a readable safetensors "
                                             r"file \(0 bytes, no safetensors header\)"):
        check_cache(config, ["m"], [], ["c.yaml"], offline=True)
    (snapshot / "config.json").write_text("{}")
    with pytest.raises(PreflightError, match=r"config.json names no model_type"):
        check_cache(config, ["m"], [], ["c.yaml"], offline=True)
    local = tmp_path / "local"
    local.mkdir()
    (local / "config.json").write_text(json.dumps({"model_type": "internvl", "text_config": {"vocab_size": 8,
                                                                                             "hidden_size": 6}}))
    safetensors_file(local / "model.safetensors", {"embed_tokens.weight": (8, 4)})
    with pytest.raises(PreflightError, match=r"none of the 1 tensors in .*local has the shape \[8, 6\] of the "
                                             r"embedding table"):
        check_cache({**config, "models": {"m": {"source": str(local)}}}, ["m"], [], ["c.yaml"], offline=True)
    # a checkpoint of pickled weights only (pytorch_model.bin, which transformers loads) has no header to read
    (local / "model.safetensors").unlink()
    (local / "pytorch_model.bin").write_bytes(b"pickled")
    check_cache({**config, "models": {"m": {"source": str(local)}}}, ["m"], [], ["c.yaml"], offline=True)


def test_an_authors_items_copy_missing_images_is_counted_and_named_before_any_job(hf_home, tmp_path):
    """A 1-image ImageNet-A copy: the TTRV authors' lists need 7,467 distinct images (their test list's 7,467,
    the adaptation lists drawn from it); 7,466 are missing, the first named, before preparation would find out."""
    first = "n01498041/0.000116_digital clock _ digital clock_0.865662.jpg"  # the sorted first of their paths
    (tmp_path / "a" / "n01498041").mkdir(parents=True)
    (tmp_path / "a" / first).write_bytes(b"jpg")
    config = {"models": {}, "datasets": ["imagenet-a"], "data": {"items": "authors",
                                                                 "sources": {"imagenet-a": {"path": str(tmp_path / "a")}}}}
    with pytest.raises(PreflightError) as error:
        check_cache(config, [], ["imagenet-a"], ["c.yaml"], offline=True)
    message = str(error.value)
    assert f"`data.sources.imagenet-a.path`: 7466 of the 7467 images the TTRV authors' imagenet-a items need are not in {tmp_path / 'a'}" in message
    assert "e.g. n01498041/0.000348_chameleon _ box turtle_0.55540705.jpg" in message and first + "," not in message


def test_the_workflows_parse_imports_no_torch():
    """Every Snakemake command parses the workflow first (a dry run, `--unlock`, each test's run): the modules
    rules/common.smk imports, and the pre-flight it runs, load neither torch nor transformers (each parse took
    ~5 CPU-seconds more with them: issue 52's suite time)."""
    import re
    import subprocess
    import sys

    from tests.support import REPO

    modules = re.findall(r"^from (ttrl_bench[.\w]*) import", (REPO / "rules/common.smk").read_text(), re.M)
    assert "ttrl_bench.plan" in modules
    probe = "; ".join([f"import {m}" for m in modules] + [
        "from ttrl_bench.plan import preflight", "preflight.needs({'models': {}}, [], [])",
        "import sys", "print(sorted({'torch', 'transformers', 'torchvision'} & set(sys.modules)))"])
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
