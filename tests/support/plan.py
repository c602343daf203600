"""Builders shared by the plan's tests: plans of the demo config, Hugging Face caches built by hand in the
libraries' layouts (no network), and a tiny InternVL3 config for traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from ttrl_bench.plan import Plan, validated
from ttrl_bench.datasets import authors_items
from ttrl_bench.datasets.registry import REGISTRY
from ttrl_bench.plan import memory
from ttrl_bench.plan.config import merge

from tests.support import REPO


def demo_plan(extra: str) -> Plan:
    """config/config.yaml with `extra` merged in, as `snakemake --configfile extra.yaml` does."""
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())
    return Plan(validated(merge(base, yaml.safe_load(extra))))


COMMIT = "0" * 40


def safetensors_file(path: Path, tensors: dict) -> None:
    """A .safetensors file as the format lays it out: 8-byte little-endian header length, the JSON header
    (name -> dtype, shape, offsets), then the data: zeros, as a sparse file (a 7B model's embedding table is 1.1 GB;
    writing the ten paper models' tables took 33 s of the paper-config tests' set-up)."""
    offset, header = 0, {}
    for name, shape in tensors.items():
        size = 2 * int(np.prod(shape))  # BF16
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    with path.open("wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        f.truncate(8 + len(text) + offset)


def cache_model(hub_cache: Path, repo: str, files=("config.json", "model.safetensors")) -> Path:
    """huggingface_hub's cache layout: models--org--name/refs/main -> snapshots/<commit>/<file>; a config.json
    naming its model type and text model's sizes, a model.safetensors holding the embedding table they size."""
    root = hub_cache / f"models--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(COMMIT)
    config, embedding = _shipped_config(repo)
    for name in files:
        path = root / "snapshots" / COMMIT / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name == "config.json":
            path.write_text(json.dumps(config))
        elif name == "model.safetensors":
            safetensors_file(path, {"model.language_model.embed_tokens.weight": embedding})
        else:
            path.write_text("{}")
    return root / "snapshots" / COMMIT


def _shipped_config(repo: str) -> tuple[dict, tuple[int, int]]:
    """A paper model's config as the shipped table holds it (models/data/model_configs.json, which the plan reads
    the same), else a small Qwen2.5-VL's; and its embedding table's shape (vocab_size, hidden_size)."""
    from transformers import AutoConfig

    from ttrl_bench.models.configs import MODEL_CONFIGS

    table = json.loads(MODEL_CONFIGS.read_text())
    entry = dict(table.get(table["_aliases"].get(repo, repo)) or {"model_type": "qwen2_5_vl",
                                                                  "text_config": {"vocab_size": 8, "hidden_size": 4}})
    text = AutoConfig.for_model(**entry).get_text_config()
    return entry, (text.vocab_size, text.hidden_size)


def cache_dataset(datasets_cache: Path, repo: str, split: str, configuration: str | None = None) -> None:
    """datasets' Arrow cache: <org>___<name in snake case>/<configuration>/<version>/<hash>/dataset_info.json."""
    from datasets.naming import camelcase_to_snakecase

    org, name = repo.split("/")
    directory = datasets_cache / f"{org}___{camelcase_to_snakecase(name)}" / (configuration or "default") / "0.0.0" / "abc123"
    directory.mkdir(parents=True, exist_ok=True)
    info = directory / "dataset_info.json"  # one per configuration, every split prepared in it
    splits = json.loads(info.read_text())["splits"] if info.exists() else {}
    splits[split] = {"name": split, "num_examples": 1}
    info.write_text(json.dumps({"config_name": configuration or "default", "splits": splits}))


def cache_dataset_file(hub_cache: Path, repo: str, filename: str) -> None:
    """huggingface_hub's layout for a dataset repository's file: datasets--org--name/..."""
    root = hub_cache / f"datasets--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(COMMIT)
    (root / "snapshots" / COMMIT).mkdir(parents=True, exist_ok=True)
    (root / "snapshots" / COMMIT / filename).write_text("a\nb\n")


def cache_everything(home: Path, configs: list[dict]) -> None:
    """A cache holding every Hub model of these configs and every Hub dataset of the registry."""
    for config in configs:
        for model in config.get("models", {}).values():
            if "build" not in model:
                cache_model(home / "hub", model.get("convert_from", model.get("source")))
    for name, block in authors_items.INDEX["datasets"].items():
        if "file" not in block["lists"]["test"]:  # the authors' lists `ttrl-bench fetch` downloads
            path = home / "ttrl-bench" / "ttrv_items" / f"{name}.test.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("[]")
    for spec in REGISTRY.values():
        if not spec.source.startswith(("bundled:", "local:")):
            cache_dataset(home / "datasets", spec.source, spec.split, spec.hub_config)
            if spec.source.startswith("clip-benchmark/"):
                cache_dataset_file(home / "hub", spec.source, "classnames.txt")


def tiny_internvl_config():
    config = memory.model_config("OpenGVLab/InternVL3-2B-hf")
    text = config.text_config
    text.num_hidden_layers, text.hidden_size, text.intermediate_size, text.vocab_size = 1, 128, 256, 512
    text.num_attention_heads, text.num_key_value_heads = 2, 1
    config.vision_config.num_hidden_layers, config.vision_config.hidden_size = 1, 64
    config.vision_config.num_attention_heads, config.vision_config.intermediate_size = 2, 128
    return config
