"""A model's transformers config without its weights: from its own config.json (a local directory or
the Hugging Face cache), else from the shipped table of the papers' models (data/model_configs.json).
Read by the plan's memory traces (plan/memory.py) and the real-width rehearsal models (real_width.py)."""

from __future__ import annotations

import contextlib
import copy
import json
from functools import lru_cache
from pathlib import Path

MODEL_CONFIGS = Path(__file__).parent / "data" / "model_configs.json"


def model_config(source: str):
    """The transformers config of `source` (a local model directory or a Hub id): its own
    config.json from the directory or the Hugging Face cache, else offline from the shipped table of
    the papers' models (data/model_configs.json). Raises naming the source if neither has it.
    A copy each call: callers may edit it."""
    return copy.deepcopy(_read_config(source))


@lru_cache(maxsize=None)  # the plan asks per job
def _read_config(source: str):
    from transformers import AutoConfig

    with contextlib.suppress(OSError, ValueError):
        return AutoConfig.from_pretrained(source, local_files_only=True)
    table = json.loads(MODEL_CONFIGS.read_text())
    entry = table.get(table["_aliases"].get(source, source))
    if entry is None:
        known = ", ".join(k for k in table if not k.startswith("_"))
        raise ValueError(f"no config.json for model {source!r}: not a local directory, not in the Hugging Face "
                         f"cache, not in {MODEL_CONFIGS.name} (known: {known})")
    entry = dict(entry)
    return AutoConfig.for_model(entry.pop("model_type"), **entry)


def _layers(config) -> tuple[str, str]:
    """The config fields holding the language model's and the vision tower's depth."""
    vision = "num_hidden_layers" if hasattr(config.vision_config, "num_hidden_layers") else "depth"
    return "num_hidden_layers", vision


def with_layers(config, text_layers: int, vision_layers: int):
    config = copy.deepcopy(config)
    text_field, vision_field = _layers(config)
    setattr(config.text_config, text_field, text_layers)
    setattr(config.vision_config, vision_field, vision_layers)
    layer_types = getattr(config.text_config, "layer_types", None)
    if layer_types:  # one per layer: a config saved with 28 no longer loads (transformers validates it)
        config.text_config.layer_types = list(layer_types[:text_layers])
    return config
