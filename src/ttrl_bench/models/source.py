"""Where a model comes from: a local directory or a Hub id. No torch here: the Snakefile checks
sources with it before any job runs."""

from __future__ import annotations

from pathlib import Path

# Files of an InternVL checkpoint fetched by Hub id to convert (convert_internvl.py): config, weights, tokenizer.
# The remote code is not needed. Here, not there: the preflight reads it in the Snakefile's parse, without torch.
CHECKPOINT_FILES = ["config.json", "*.safetensors", "model.safetensors.index.json", "vocab.json", "merges.txt",
                    "tokenizer.json", "tokenizer_config.json", "added_tokens.json", "special_tokens_map.json"]


def resolve_model_source(source: str, key: str = "models.<name>.source") -> str:
    """A local directory is used as is; anything else must be a Hub id ("org/name"), which needs
    the network or a populated HF cache. Fail early, naming the key, rather than deep inside
    transformers."""
    if Path(source).exists():
        return str(source)
    if source.count("/") != 1 or source.startswith((".", "/", "~")):
        raise FileNotFoundError(
            f"model {source!r}: no such local directory, and not a Hub id (org/name); "
            f"check the config key {key}"
        )
    return source
