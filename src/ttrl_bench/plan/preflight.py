"""Pre-flight: what a config downloads (models, original checkpoints to convert, datasets), whether
each is already in the Hugging Face cache or at its configured local path, and the fetch that puts
it there from a machine with internet (a login node) before the jobs run where there is none.

The dry run calls `check_cache`; `ttrl-bench fetch CONFIG` calls `fetch`. Both read the same list
(`needs`), so what the check names is exactly what the fetch downloads. No torch, no `datasets`
import for the check: it runs in every dry run.

Layer 6 of the plan (checks): imports no other plan module (docs/DESIGN.md "The plan's layers").
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..datasets import authors_items
from ..datasets.registry import REGISTRY, get_dataset
from ..models.source import resolve_model_source

log = logging.getLogger(__name__)

# What a model's jobs read from its Hub repository: weights, configs, tokenizer and processor files
# (transformers' from_pretrained), never a repository's duplicate .bin / .pth / ONNX weights.
MODEL_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja", "*.py"]
# A model counts as cached when these are: its config and weights (one file or a sharded index).
MODEL_CONFIG, MODEL_WEIGHTS = "config.json", ("model.safetensors", "model.safetensors.index.json")
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json")  # transformers' older format


# SAM2's original repositories: a checkpoint and a Hydra config, no config.json (what VisionReasoner loads
# through the sam2 package); transformers reads their "-hf" conversions.
SAM2_ORIGINAL = {"facebook/sam2-hiera-large": "sam2_hiera_large.pt + sam2_hiera_l.yaml"}


@dataclass(frozen=True)
class Need:
    """One download of a config: a Hub model or dataset, named by the config key that asks for it."""

    kind: str  # "model", "dataset" or "items" (an unshipped list of the TTRV authors' items)
    key: str  # the config key to name (models.<name>.source, datasets, experiments.<name>.datasets)
    repo: str  # Hub id
    name: str = ""  # our dataset name (registry entry)
    hub_config: str | None = None  # the dataset's Hub configuration
    split: str = ""  # the dataset's split
    files: tuple[str, ...] = ()  # a model's file patterns (convert_from: the converter's)

    def describe(self) -> str:
        if self.kind == "model":
            return f"model {self.repo}"
        if self.kind == "items":
            return f"dataset {self.name}: the TTRV authors' test items, {self.repo} (into {authors_items.cache_dir()})"
        config = f", configuration {self.hub_config!r}" if self.hub_config else ""
        return f"dataset {self.name}: {self.repo} (split {self.split!r}{config})"


class PreflightError(ValueError):
    """Something a config needs is neither cached nor at a local path; the message lists all of them."""


def dataset_keys(config: dict) -> dict[str, str]:
    """Each dataset of the config -> the first key that asks for it: `datasets` (the main grid),
    `experiments.<name>.datasets` or `experiments.<name>.cross` (enabled experiments only)."""
    keys = {d: "datasets" for d in config.get("datasets", [])}
    for name, block in config.get("experiments", {}).items():
        if block.get("enabled"):
            for d in block.get("datasets", []):
                keys.setdefault(d, f"experiments.{name}.datasets")
            for d in (d for pair in block.get("cross", []) for d in pair):
                keys.setdefault(d, f"experiments.{name}.cross")
    return keys


def needs(config: dict, models: list[str], datasets: list[str], results: Path = Path("results")) -> tuple[list[Need], list[str]]:
    """(the Hub downloads of these models and datasets, problems no download fixes). Skipped: built
    demo models, local model directories, models already converted under `results`, datasets
    already prepared there or with a configured local copy (`data.sources.<name>.path`, which must
    exist), bundled datasets. A local-only dataset (`local:...`) without a path is a problem."""
    from ..models.source import CHECKPOINT_FILES

    wanted, problems = [], []
    for name in models:
        model = config["models"][name]
        if "build" in model or ("convert_from" in model and (results / "models/converted" / name).exists()):
            continue
        field = "convert_from" if "convert_from" in model else "source"
        key, source = f"models.{name}.{field}", model[field]
        try:
            if Path(resolve_model_source(source, key)).exists():
                problems += checkpoint_problems(Path(source), key)
                continue
        except FileNotFoundError as err:
            problems.append(str(err))
            continue
        wanted.append(Need("model", key, source, files=tuple(CHECKPOINT_FILES if field == "convert_from" else MODEL_FILES)))
    sam2 = config.get("evaluation", {}).get("grounding", {}).get("sam2")
    if sam2 and any(get_dataset(d).metric == "giou_ciou" for d in datasets):  # masks from SAM2 (evaluation/masks.py)
        key = "evaluation.grounding.sam2"
        if sam2 in SAM2_ORIGINAL:
            problems.append(f"config key `{key}`: {sam2} is SAM2's original release ({SAM2_ORIGINAL[sam2]}), which "
                            f"transformers' Sam2Model cannot read; name {sam2}-hf, the same weights in its format")
        else:
            try:
                if not Path(resolve_model_source(sam2, key)).exists():
                    wanted.append(Need("model", key, sam2, files=tuple(MODEL_FILES)))
            except FileNotFoundError as err:
                problems.append(str(err))
    keys, sources = dataset_keys(config), config.get("data", {}).get("sources", {})
    authors = config.get("data", {}).get("items") == "authors"
    for name in datasets:
        spec = get_dataset(name)
        local = (sources.get(name) or {}).get("path")
        if spec.source.startswith("bundled:") or (results / "data" / name / "manifest.parquet").exists():
            continue
        if authors and authors_items.has_authors_items(name):
            entry = authors_items.INDEX["datasets"][name]["lists"]["test"]
            if authors_items.missing_lists([name]):
                wanted.append(Need("items", keys.get(name, "datasets"), entry["authors_path"], name))
            locator = authors_items.LOCATORS[name]
            if locator.kind == "file" and not local:  # with one, the local copy's check below applies
                problems.append(f"config key `data.sources.{name}.path` is not set: the TTRV authors' {name} items "
                                f"(data.items: authors) find their images in a local copy of {name} in its official "
                                f"layout, {locator.layout}")
                continue
        if local:
            if not Path(local).exists():
                problems.append(f"config key `data.sources.{name}.path`: {local} does not exist")
            elif authors and authors_items.has_authors_items(name) and authors_items.LOCATORS[name].kind == "file" \
                    and not authors_items.missing_lists([name]):
                problems += _missing_images(name, local)
        elif spec.source.startswith("local:"):
            problems.append(f"config key `data.sources.{name}.path` is not set: dataset {name!r} "
                            f"({keys.get(name, 'datasets')}) has no Hub copy ({spec.source}); point it at a local copy")
        elif spec.hub_files:  # CAPTURe, CRPE: a repository of files that `load_dataset` cannot read as a split
            problems.append(f"config key `data.sources.{name}.path` is not set: dataset {name!r} "
                            f"({keys.get(name, 'datasets')}) is a Hub repository of files ({spec.source}); download "
                            f"{', '.join(spec.hub_files)} into a folder and point the key at it")
        else:
            wanted.append(Need("dataset", keys.get(name, "datasets"), spec.source, name, spec.hub_config, spec.split))
    return wanted, problems


def safetensors_header(path: Path) -> dict:
    """The tensors a .safetensors file declares (name -> {dtype, shape, data_offsets}), from its header alone:
    8 bytes of little-endian length, then that much JSON (the format's specification)."""
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise ValueError(f"{len(head)} bytes, no safetensors header")
        length = int.from_bytes(head, "little")
        if length > os.path.getsize(path) - 8:
            raise ValueError(f"a header of {length} bytes in a file of {os.path.getsize(path)}")
        header = json.loads(handle.read(length))
    header.pop("__metadata__", None)
    if not header:
        raise ValueError("no tensors")
    return header


def checkpoint_problems(directory: Path, key: str) -> list[str]:
    """What loading this model directory would fail on, read cheaply (headers, no weights): a config.json that
    names its architecture (model_type), weights files whose safetensors headers read, and among their tensors the
    embedding table the config sizes (its text model's vocab_size x hidden_size)."""
    config_path = Path(directory) / MODEL_CONFIG
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError) as err:
        return [f"config key `{key}`: {config_path} is not a readable config ({err})"]
    if not isinstance(config, dict) or "model_type" not in config:
        return [f"config key `{key}`: {config_path} names no model_type (an empty or foreign config)"]
    index = Path(directory) / MODEL_WEIGHTS[1]
    if not any((Path(directory) / name).exists() for name in MODEL_WEIGHTS) and any(
            (Path(directory) / name).exists() for name in PICKLED_WEIGHTS):
        return []  # pickled weights, which transformers still loads: no header to read without unpickling them
    try:
        files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else [MODEL_WEIGHTS[0]]
    except (ValueError, KeyError) as err:
        return [f"config key `{key}`: {index} is not a safetensors index ({err})"]
    tensors = {}
    for name in files:
        try:
            tensors.update(safetensors_header(Path(directory) / name))
        except (OSError, ValueError) as err:
            return [f"config key `{key}`: {Path(directory) / name} is not a readable safetensors file ({err})"]
    text = config.get("text_config") or config.get("llm_config") or config
    shape = [text.get("vocab_size", config.get("vocab_size")), text.get("hidden_size", config.get("hidden_size"))]
    if None not in shape and not any(t.get("shape") == shape for t in tensors.values()):
        return [f"config key `{key}`: none of the {len(tensors)} tensors in {directory} has the shape {shape} of the "
                f"embedding table its config.json sizes (vocab_size x hidden_size): weights and config disagree"]
    return []


def cached_checkpoint(repo: str, cache_dir: Path | None = None) -> Path | None:
    """The snapshot directory of a cached model (its config.json's folder), or None."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, MODEL_CONFIG, cache_dir=str(cache_dir or hub_cache_dir()))
    return Path(found).parent if isinstance(found, str) else None


def _missing_images(name: str, local: str) -> list[str]:
    """The local copy lacks images the TTRV authors' items of `name` need: their count and the first paths."""
    try:
        needed, absent = authors_items.missing_file_images(name, Path(local))
    except authors_items.AuthorsItemsError as err:  # a list that does not verify: preparation stops naming it
        log.warning("pre-flight: the images of %s's authors' items are not counted: %s", name, err)
        return []
    if not absent:
        return []
    return [f"config key `data.sources.{name}.path`: {len(absent)} of the {needed} images the TTRV authors' {name} items "
            f"need are not in {local} (layout {authors_items.LOCATORS[name].layout}), e.g. {', '.join(absent[:3])}"]


def hub_cache_dir() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def datasets_cache_dir() -> Path:
    """Where `datasets` keeps prepared Arrow copies: HF_DATASETS_CACHE, else HF_HOME/datasets
    (as datasets/config.py computes it, without importing all of `datasets`)."""
    from huggingface_hub import constants

    return Path(os.environ.get("HF_DATASETS_CACHE") or Path(constants.HF_HOME) / "datasets")


def model_cached(repo: str, cache_dir: Path) -> bool:
    """The repository's config and weights are in the hub cache (huggingface_hub's own lookup)."""
    from huggingface_hub import try_to_load_from_cache

    def has(filename):
        return isinstance(try_to_load_from_cache(repo, filename, cache_dir=str(cache_dir)), str)

    return has(MODEL_CONFIG) and any(has(f) for f in MODEL_WEIGHTS)


def dataset_cached(repo: str, hub_config: str | None, split: str, cache_dir: Path) -> bool:
    """`load_dataset(repo, hub_config, split=split)` works offline: datasets' CachedDatasetModuleFactory
    reads <cache>/<org>___<name>/<configuration>/<version>/<hash>/, whose dataset_info.json lists the
    split (the layout `datasets` writes, its name part in snake case)."""
    from datasets.naming import camelcase_to_snakecase

    org_and_name = repo.split("/")
    org_and_name[-1] = camelcase_to_snakecase(org_and_name[-1])
    pattern = Path(cache_dir) / "___".join(org_and_name) / (glob.escape(hub_config) if hub_config else "*") / "*" / "*"
    for directory in glob.glob(str(pattern)):
        info = Path(directory) / "dataset_info.json"
        if info.exists() and split in (json.loads(info.read_text()).get("splits") or {}):
            return True
    return False


def class_names_cached(repo: str, cache_dir: Path) -> bool:
    """clip-benchmark sets name their classes in a classnames.txt (datasets/sources.py reads it)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, "classnames.txt", cache_dir=str(cache_dir), repo_type="dataset")
    return not repo.startswith("clip-benchmark/") or isinstance(found, str)


def missing(wanted: list[Need], hub_cache: Path | None = None, datasets_cache: Path | None = None) -> list[Need]:
    """The downloads not yet in the caches."""
    hub_cache, datasets_cache = hub_cache or hub_cache_dir(), datasets_cache or datasets_cache_dir()
    return [n for n in wanted if not (model_cached(n.repo, hub_cache) if n.kind == "model" else
                                      not authors_items.missing_lists([n.name]) if n.kind == "items" else
                                      dataset_cached(n.repo, n.hub_config, n.split, datasets_cache)
                                      and class_names_cached(n.repo, hub_cache))]


def fetch_command(configfiles: list) -> str:
    """`ttrl-bench fetch` of these config files, paths relative to the working directory where inside it."""
    cwd = Path.cwd().resolve()
    names = [str(Path(f).resolve().relative_to(cwd)) if Path(f).resolve().is_relative_to(cwd) else str(f)
             for f in configfiles] or ["CONFIG.yaml"]
    return shlex.join(["ttrl-bench", "fetch", *names])


def check_cache(config: dict, models: list[str], datasets: list[str], configfiles: list[str],
                results: Path = Path("results"), offline: bool | None = None) -> None:
    """The dry run's pre-flight: stop, listing every missing model and dataset with its config key
    and the command that fetches them, when jobs could not load them: offline (HF_HUB_OFFLINE=1,
    compute nodes without internet: only the cache counts) or without a reachable Hub. A local-only
    dataset without a path, or a configured path that does not exist, stops it always."""
    from ..datasets.sources import hub_reachable

    wanted, problems = needs(config, models, datasets, results)
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" if offline is None else offline
    absent = missing(wanted) if wanted else []
    for need in wanted:  # what is cached is read too: its config and weights' headers
        if need.kind == "model" and need not in absent and need.files == tuple(MODEL_FILES):
            problems += checkpoint_problems(cached_checkpoint(need.repo), need.key)
    if absent and not offline and hub_reachable():
        absent = []  # the jobs download them
    if not absent and not problems:
        return
    lines = [f"  {p}" for p in problems]
    if absent:
        why = "HF_HUB_OFFLINE=1: jobs read only the cache" if offline else "the Hub is unreachable from here"
        lines.append(f"  not in the Hugging Face cache ({why}; hub cache {hub_cache_dir()}, datasets cache "
                     f"{datasets_cache_dir()}):")
        lines += [f"    config key `{n.key}`: {n.describe()}" for n in absent]
        lines.append(f"  fetch them on a machine with internet that shares this HF_HOME (a login node): "
                     f"{fetch_command(configfiles)}")
    raise PreflightError(f"pre-flight: {len(problems) + len(absent)} thing(s) this config needs are missing:\n"
                         + "\n".join(lines))


def fetch(config: dict, models: list[str], datasets: list[str], results: Path = Path("results")) -> list[Need]:
    """Download these models and datasets of the config (the plan's, as the dry run checks them) into
    the Hugging Face caches (progress bars from huggingface_hub and datasets); returns what was fetched.
    Problems no download fixes (a local-only dataset without a path) raise before any download."""
    wanted, problems = needs(config, models, datasets, results)
    if problems:
        raise PreflightError("fetch: fix these config keys first:\n" + "\n".join(f"  {p}" for p in problems))
    for index, need in enumerate(wanted, 1):
        log.info("fetch %d/%d: %s (config key `%s`)", index, len(wanted), need.describe(), need.key)
        if need.kind == "model":
            from huggingface_hub import snapshot_download

            snapshot_download(need.repo, allow_patterns=list(need.files))
        elif need.kind == "items":
            authors_items.fetch_list(need.name)
        else:
            _fetch_dataset(need)
    return wanted


def _fetch_dataset(need: Need) -> None:
    """`load_dataset` as preparation calls it (datasets/sources.py), which leaves the Arrow copy that
    offline jobs read; clip-benchmark sets also keep their classnames.txt in the hub cache."""
    from ..datasets.sources import _load_hub

    spec = REGISTRY[need.name]
    _load_hub(spec)  # the call preparation makes (clip-benchmark: the split's shards only)
    if spec.source.startswith("clip-benchmark/"):
        from huggingface_hub import hf_hub_download

        hf_hub_download(spec.source, "classnames.txt", repo_type="dataset")
