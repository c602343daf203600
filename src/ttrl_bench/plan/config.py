"""A config as the workflow sees it: YAML files merged as Snakemake merges them, validated against
workflow/schemas/config.schema.yaml with its defaults filled in, and its variant under another rerun
protocol (`variant`).

Layer 1 of the plan (config): imports protocols.py only (docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import jsonschema
import yaml

from .protocols import SETTINGS, _get, _has, apply_protocol

REPO = Path(__file__).resolve().parents[3]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = REPO / "config" / "config.yaml"


def _with_defaults(validator_class):
    """The validator that also fills in each property's `default` (jsonschema's FAQ recipe, as
    snakemake.utils.validate does)."""
    properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, props, instance, schema):
        if isinstance(instance, dict):
            for name, sub in props.items():
                if "default" in sub:
                    instance.setdefault(name, sub["default"])
        yield from properties(validator, props, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def schema_error(error: jsonschema.ValidationError) -> str:
    """The schema's error in one line, the offending key first (Snakemake's own message prints it
    after the whole schema)."""
    path = [str(part) for part in error.absolute_path]
    if error.validator == "additionalProperties":  # the unknown key itself, not its parent
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return (f"config key `{'.'.join(path + unknown[:1])}`: unknown key "
                "(every key is in workflow/schemas/config.schema.yaml)")
    return f"config key `{'.'.join(path) or '(top level)'}`: {error.message}"


def validated(config: dict, schema_path: Path = SCHEMA) -> dict:
    """`config` checked against the schema, its defaults filled in (in place); ValueError naming
    the key of the most relevant error."""
    apply_protocol(config)  # the protocol's keys first: the schema's defaults fill only what is left
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = _with_defaults(jsonschema.validators.validator_for(schema))(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is not None:
        raise ValueError(schema_error(error))
    if config["experiments_enabled"] == "all":  # every table's experiments (docs/slurm.md gives their totals)
        for block in config["experiments"].values():
            block["enabled"] = True
    return config


@functools.lru_cache(maxsize=4)
def _schema(schema_path: str) -> dict:
    return yaml.safe_load(Path(schema_path).read_text())


def schema_default(path: tuple[str, ...], schema_path: Path = SCHEMA):
    """The schema's `default` of a config key path, e.g. ("evaluation", "mcq", "max_new_tokens") -> 6;
    None where the schema gives none (a preset's value applies)."""
    node = _schema(str(schema_path))
    for key in path:
        node = node.get("properties", {}).get(key) or node.get("additionalProperties")
        if not isinstance(node, dict):
            return None
    return node.get("default")


def merge(base: dict, update: dict) -> dict:
    """`update` merged into `base` key by key, as Snakemake merges a --configfile into the
    workflow's configfile (nested dicts merge, anything else is replaced)."""
    out = dict(base)
    for key, value in update.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_config(*paths: str | Path, replace: bool = True) -> dict:
    """The validated config of these files merged in order; `replace=False` merges them into
    config/config.yaml as `snakemake --configfile` does without --replace-workflow-config."""
    config: dict = {} if replace else yaml.safe_load(DEFAULT_CONFIG.read_text())
    for path in paths:
        try:
            config = merge(config, yaml.safe_load(Path(path).read_text()) or {})
        except (OSError, yaml.YAMLError) as err:
            raise ValueError(f"config file {path}: {err}") from None
    return validated(config)


def _delete(config: dict, path: tuple[str, ...]) -> None:
    for key in path[:-1]:
        config = config[key]
    del config[path[-1]]


def variant(config: dict, name: str) -> dict:
    """A validated config as if its `protocol` were `name`, for an experiment that names another protocol
    (`experiments.<e>.protocols`): each key left at the config's own protocol's value (the authors' value,
    or the schema's default under clean) takes `name`'s; a key the config set to another value keeps it.
    A key set by hand to exactly its own protocol's value is indistinguishable from one left alone."""
    own = config["protocol"]
    out = copy.deepcopy(config)
    for path, theirs, *_ in SETTINGS:
        if not _has(out, path):
            continue
        left_alone = _get(out, path) == (theirs if own == "authors" else schema_default(path))
        if left_alone:
            _delete(out, path)  # refilled below: by `name`'s value, else the schema's default
    out["protocol"] = name
    return validated(out)
