"""plan/config.py: the config's layers (embedded default, each file, the protocol, the schema's defaults),
`merge`, the schema's errors naming the key and an unreadable file. Expected values are read from
workflow/schemas/config.schema.yaml and the config files named in each docstring."""

from __future__ import annotations

from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]
DEMO_MODEL = {"demo": {"source": "results/models/demo", "build": "tiny-qwen2.5-vl"}}


def test_the_schemas_errors_name_the_offending_key_first():
    """Unknown keys are named by their full path, the first of several in sorted order (max_new_token before zzz),
    under `models.<name>` too (additionalProperties); a missing required key is the top level's."""
    from ttrl_bench.plan.config import validated

    minimal = {"models": {"m": {"source": "org/m"}}, "datasets": ["demo-digits"], "methods": ["zero-shot"]}
    cases = [
        ({**minimal, "evaluation": {"mcq": {"zzz": 1, "max_new_token": 5}}},
         "config key `evaluation.mcq.max_new_token`: unknown key (every key is in workflow/schemas/config.schema.yaml)"),
        ({**minimal, "models": {"m": {"source": "org/m", "sorce": "org/m"}}},
         "config key `models.m.sorce`: unknown key (every key is in workflow/schemas/config.schema.yaml)"),
        ({k: v for k, v in minimal.items() if k != "datasets"}, "config key `(top level)`: 'datasets' is a required property"),
        ({**minimal, "seeds": []}, "config key `seeds`: [] should be non-empty"),
        ({**minimal, "evaluation": {"mcq": {"max_new_tokens": "many"}}},
         "config key `evaluation.mcq.max_new_tokens`: 'many' is not of type 'integer'"),
    ]
    for config, message in cases:
        with pytest.raises(ValueError) as err:
            validated(config)
        assert str(err.value) == message


def test_schema_default_follows_named_and_any_name_keys():
    """workflow/schemas/config.schema.yaml: evaluation.mcq.max_new_tokens 6, protocol clean, seeds [0]; a model of any
    name (models' additionalProperties) main_grid true, gpus none (the plan decides); an unknown key, or one under a
    list, none."""
    from ttrl_bench.plan.config import schema_default

    assert schema_default(("evaluation", "mcq", "max_new_tokens")) == 6
    assert (schema_default(("protocol",)), schema_default(("seeds",))) == ("clean", [0])
    assert schema_default(("models", "any-name", "main_grid")) is True
    assert schema_default(("models", "any-name", "gpus")) is None and schema_default(("no_such_key", "x")) is None
    assert schema_default(("seeds", "x")) is None  # under a key without properties (a list)


def test_merge_nests_dicts_and_replaces_everything_else():
    """As Snakemake merges a --configfile: nested dicts key by key, lists and scalars replaced whole, a dict over a
    scalar (or a scalar over a dict) replaces it; neither argument is changed."""
    from ttrl_bench.plan.config import merge

    base = {"seeds": [0, 1], "evaluation": {"mcq": {"max_new_tokens": 6, "samples": "all"}, "batch_size": 64}, "x": 1}
    update = {"seeds": [2], "evaluation": {"mcq": {"max_new_tokens": 16}}, "x": {"y": 2}, "new": True}
    assert merge(base, update) == {"seeds": [2], "evaluation": {"mcq": {"max_new_tokens": 16, "samples": "all"},
                                                                "batch_size": 64}, "x": {"y": 2}, "new": True}
    assert merge({"x": {"y": 2}}, {"x": 3}) == {"x": 3}
    assert base["evaluation"]["mcq"] == {"max_new_tokens": 6, "samples": "all"} and update["x"] == {"y": 2}


def test_config_layers_embedded_default_then_each_file_then_the_protocol_then_the_schema(tmp_path):
    """load_config(a, b, replace=False), as `snakemake --configfile a b` without --replace-workflow-config: the
    embedded config/config.yaml (datasets, the demo model, grounding samples 8 over the schema's 200), then a.yaml
    (16 MCQ tokens over the embedded 6; seeds [1, 2]), then b.yaml (seeds [3] over a's); the schema fills what none
    sets (chat_template model, empty_mask_iou zero). Under `protocol: authors` the protocol's value fills a key no
    file sets (chat_template authors) but never one a file sets (16 tokens, not the authors' 1,024). With
    replace=True the embedded default is gone: no datasets. An empty file is no change."""
    from ttrl_bench.plan.config import load_config

    a, b, empty = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "empty.yaml"
    a.write_text("evaluation: {mcq: {max_new_tokens: 16}}\nseeds: [1, 2]\n")
    b.write_text("seeds: [3]\n")
    empty.write_text("")
    config = load_config(a, b, replace=False)
    assert (config["datasets"], config["models"], config["seeds"]) == (["demo-digits", "demo-digit-scenes"],
                                                                       {"demo": {**DEMO_MODEL["demo"], "main_grid": True}}, [3])
    assert config["evaluation"]["mcq"] == {"max_new_tokens": 16, "samples": "all", "chat_template": "model",
                                           "choice_parser": "robust"}
    assert (config["evaluation"]["grounding"]["samples"], config["evaluation"]["grounding"]["empty_mask_iou"]) == (8, "zero")
    b.write_text("protocol: authors\n")
    authors = load_config(a, b, replace=False)
    assert authors["evaluation"]["mcq"] == {"max_new_tokens": 16, "samples": "all", "chat_template": "authors",
                                            "choice_parser": "authors"}
    assert load_config(empty, replace=False) == load_config(replace=False) == load_config(REPO / "config" / "config.yaml")
    with pytest.raises(ValueError, match=r"^config key `\(top level\)`: 'datasets' is a required property$"):
        load_config(a)


def test_an_unreadable_config_file_is_named(tmp_path):
    """A missing file and a YAML syntax error: "config file <path>: " and the reader's own message."""
    from ttrl_bench.plan.config import load_config

    missing, broken = tmp_path / "none.yaml", tmp_path / "broken.yaml"
    broken.write_text("seeds: [0\n")
    with pytest.raises(ValueError) as err:
        load_config(missing)
    assert str(err.value) == f"config file {missing}: [Errno 2] No such file or directory: '{missing}'"
    with pytest.raises(ValueError) as err:
        load_config(broken)
    assert str(err.value).startswith(f"config file {broken}: while parsing a flow sequence")
