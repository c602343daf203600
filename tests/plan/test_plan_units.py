"""The plan's small pure functions one at a time (issue 39, mutation testing of src/ttrl_bench/plan): one
results tree per config (results_tree.py), one published cell's config (cells.py), the config layers and their
defaults (config.py), the names a config gives (names.py), the sample counts (samples.py) and the dry-run checks
at, just under and just over their limits (checks.py). Expected values are worked by hand in each docstring or
read from the config files and the dataset registry named there."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ttrl_bench.plan import checks
from ttrl_bench.plan.cells import cell_config, cell_file_name, split_table
from ttrl_bench.plan.results_tree import check_results_tree, claim_results_tree, config_files

REPO = Path(__file__).resolve().parents[2]


# --- results_tree.py: one results tree per config ----------------------------------------------------------------

# the guard's last words: Snakemake's --configfile swallows targets written after it (issue 57)
TRAP = "; targets go before --configfile, which takes every file name after it as a config file)"


def test_config_files_are_named_relative_to_the_working_directory_unless_outside_it(tmp_path, monkeypatch):
    """From tmp/work: `sub/../a.yaml` is a.yaml; ../other.yaml lies outside the working directory, so it is kept
    absolute (a relative ../ would name another file from another directory); the embedded default comes first
    unless --replace-workflow-config."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    outside = str(tmp_path / "other.yaml")
    assert config_files(["sub/../a.yaml", outside], replaced=True) == ["a.yaml", outside]
    assert config_files([outside], replaced=False) == ["config/config.yaml", outside]
    assert config_files([], replaced=True) == []


def test_a_results_tree_claimed_by_another_config_names_both_and_the_command(tmp_path, monkeypatch):
    """The claim: the first run's files as indented JSON (indent 1), in a results directory created with its
    parents, or in one that exists already without a claim. The message joins each side's files with " + " ("no
    config file" for a run with none); its command repeats every --configfile but the embedded default, and asks
    for --replace-workflow-config only where the default is not among the files."""
    monkeypatch.chdir(tmp_path)
    claim_results_tree("runs/a/results", ["config/config.yaml", "extra.yaml"])  # runs/a/ does not exist yet
    assert (tmp_path / "runs/a/results/config_files.json").read_text() == (
        '{\n "config_files": [\n  "config/config.yaml",\n  "extra.yaml"\n ]\n}\n')
    with pytest.raises(ValueError) as err:
        check_results_tree("runs/a/results", [])
    assert str(err.value).startswith(
        "runs/a/results/ holds the results of config config/config.yaml + extra.yaml (runs/a/results/config_files.json);"
        " a run of no config file here would replace its store, tables and figures.")
    assert str(err.value).endswith(" --replace-workflow-config (or move runs/a/results/ away" + TRAP)

    (tmp_path / "results").mkdir()  # an existing directory without a claim: claimed
    claim_results_tree("results", ["config/ttrv.yaml"])
    with pytest.raises(ValueError) as err:
        check_results_tree("results", ["config/config.yaml", "extra.yaml"])
    assert str(err.value) == (
        "results/ holds the results of config config/ttrv.yaml (results/config_files.json); a run of "
        "config/config.yaml + extra.yaml here would replace its store, tables and figures. Run it in a directory of "
        "its own: snakemake --directory runs/<name> --configfile extra.yaml (or move results/ away" + TRAP)


# --- cells.py: one published cell, one config --------------------------------------------------------------------

# A paper config as read (before validation), its experiments one per case of cell_config's filter
TTRV_LIKE = {
    "models": {"internvl3-2b": {"paper_name": "InternVL3-2B", "source": "OpenGVLab/InternVL3-2B-hf"},
               "qwen": {"source": "Qwen/Qwen2.5-VL-3B-Instruct"}},
    "datasets": ["imagenet-a", "ai2d"],
    "tables": {"dataset_names": {"ai2d": "AI2D-test"}},
    "data": {"items": "authors"},
    "experiments": {
        "off": {"enabled": False, "table": "ttrv-9", "models": ["internvl3-2b"], "datasets": ["imagenet-a"]},
        "other_table": {"enabled": True, "table": "ttrv-3", "datasets": ["imagenet-a"]},
        "untabled": {"enabled": True, "datasets": ["imagenet-a"]},
        "qwen_only": {"enabled": True, "table": "ttrv-1", "models": ["qwen"], "datasets": ["imagenet-a"]},
        "every_model": {"enabled": True, "table": "ttrv-1", "datasets": ["imagenet-a", "ai2d"], "methods": ["ttrv"]},
        "transfer": {"enabled": True, "table": "ttrv-1", "models": ["internvl3-2b"],
                     "cross": [["imagenet-r", "imagenet-a"], ["imagenet-a", "ai2d"]]},
        "elsewhere": {"enabled": True, "table": "ttrv-1", "models": ["internvl3-2b"], "datasets": ["ai2d"]},
    },
}


def test_a_table_is_a_paper_and_a_number():
    """rpartition at the last "-": "vr-ttrl-2" is VR-TTRL's Table 2, not a paper "vr"."""
    assert split_table("ttrv-1") == ("ttrv", 1)
    assert split_table("vr-ttrl-2") == ("vr-ttrl", 2)
    assert split_table("echo-10") == ("echo", 10)
    for table in ("nope-1", "ttrv-x", "ttrv"):
        with pytest.raises(ValueError) as err:
            split_table(table)
        assert str(err.value) == (f"table {table!r}: give a paper and a table number, e.g. ttrv-1 (papers: ttrv, "
                                  "vr-ttrl, echo)")


def test_a_cell_keeps_the_tables_enabled_experiments_that_run_its_model_on_its_dataset():
    """InternVL3-2B (by its paper name) on ImageNet-A (the registry's paper name of imagenet-a), Table 1 of TTRV_LIKE:
    skipped are `off` (disabled), `other_table` (Table 3), `untabled` (no table), `qwen_only` (another model) and
    `elsewhere` (only ai2d); kept `every_model` (no `models` key: every model; its datasets cut to imagenet-a) and
    `transfer` (only the cross pair evaluated on imagenet-a). The main grid keeps imagenet-a; the rest of the config
    as it was, and the config read stays untouched (the cell's model entry is a copy)."""
    cell = cell_config(TTRV_LIKE, "ttrv-1", "InternVL3-2B", "ImageNet-A")
    assert cell == {
        "models": {"internvl3-2b": {"paper_name": "InternVL3-2B", "source": "OpenGVLab/InternVL3-2B-hf"}},
        "datasets": ["imagenet-a"],
        "tables": {"dataset_names": {"ai2d": "AI2D-test"}},
        "data": {"items": "authors"},
        "experiments": {
            "every_model": {"enabled": True, "table": "ttrv-1", "datasets": ["imagenet-a"], "methods": ["ttrv"],
                            "models": ["internvl3-2b"], "cross": []},
            "transfer": {"enabled": True, "table": "ttrv-1", "models": ["internvl3-2b"], "datasets": [],
                         "cross": [["imagenet-r", "imagenet-a"]]},
        },
    }
    cell["models"]["internvl3-2b"]["source"] = "elsewhere"
    assert TTRV_LIKE["models"]["internvl3-2b"]["source"] == "OpenGVLab/InternVL3-2B-hf"
    # a model by our name (it has no paper name), a dataset by the config's `tables.dataset_names`
    qwen = cell_config(TTRV_LIKE, "ttrv-1", "qwen", "AI2D-test")
    assert (list(qwen["models"]), qwen["datasets"]) == (["qwen"], ["ai2d"])
    assert qwen["experiments"] == {"every_model": {"enabled": True, "table": "ttrv-1", "datasets": ["ai2d"],
                                                   "methods": ["ttrv"], "models": ["qwen"], "cross": []}}


def test_a_cell_outside_the_main_grid_takes_its_experiments_datasets():
    """ECHO-like: the main grid runs geometry3k only; "MathVision" is the registry's paper name of both mathvision
    and mathvision-math, one adapted on in an experiment, the other a cross pair's target: the cell's datasets are
    both, sorted. The config has no `tables` key; `tables` without `dataset_names` reads as no renaming."""
    from ttrl_bench.plan.cells import _dataset_name

    echo_like = {"models": {"qwen2.5-vl-7b": {"paper_name": "Qwen2.5-VL-7B"}}, "datasets": ["geometry3k"],
                 "experiments": {"mcq": {"enabled": True, "table": "echo-1", "datasets": ["mathvision"]},
                                 "transfer": {"enabled": True, "table": "echo-1",
                                              "cross": [["geometry3k", "mathvision-math"]]}}}
    cell = cell_config(echo_like, "echo-1", "Qwen2.5-VL-7B", "MathVision")
    assert cell["datasets"] == ["mathvision", "mathvision-math"]
    assert list(cell["experiments"]) == ["mcq", "transfer"]
    # where the main grid has the dataset, the cell runs its zero-shot row there: mathvision, not the union
    cell = cell_config({**echo_like, "datasets": ["mathvision"]}, "echo-1", "Qwen2.5-VL-7B", "MathVision")
    assert cell["datasets"] == ["mathvision"]
    assert _dataset_name({"tables": {}}, "AI2D") == ["ai2d"]


def test_a_cell_that_matches_nothing_says_what_the_config_has():
    """The enabled experiments' tables, sorted and once each (ttrv-1, ttrv-3; the disabled ttrv-9 and the untabled
    block left out); the models as "paper name (ours)", ours twice where there is no paper name."""
    with pytest.raises(ValueError) as err:
        cell_config(TTRV_LIKE, "ttrv-2", "InternVL3-2B", "ImageNet-A")
    assert str(err.value) == ("no enabled experiment of ttrv Table 2 runs InternVL3-2B on ImageNet-A in this config "
                              "(its tables: ttrv-1, ttrv-3); an experiment's `table` key names its table")
    with pytest.raises(ValueError) as err:
        cell_config({"models": TTRV_LIKE["models"], "datasets": ["imagenet-a"]}, "ttrv-1", "InternVL3-2B", "ImageNet-A")
    assert str(err.value) == ("no enabled experiment of ttrv Table 1 runs InternVL3-2B on ImageNet-A in this config "
                              "(its tables: ); an experiment's `table` key names its table")
    with pytest.raises(ValueError) as err:
        cell_config(TTRV_LIKE, "ttrv-1", "InternVL9", "ImageNet-A")
    assert str(err.value) == "model 'InternVL9' is not a model of the config; known: InternVL3-2B (internvl3-2b), qwen (qwen)"
    with pytest.raises(ValueError) as err:
        cell_config(TTRV_LIKE, "ttrv-1", "qwen", "ImageNet-Z")
    assert str(err.value) == "dataset 'ImageNet-Z': no registry entry has this name or paper name"


def test_a_cells_file_name_keeps_letters_digits_and_dashes_dots_underscores():
    """Every other character (a space, "+", "/") becomes "_"."""
    assert cell_file_name("ttrv-1", "InternVL3-2B", "ImageNet-A") == "cells/ttrv-1_InternVL3-2B_ImageNet-A.yaml"
    assert cell_file_name("vr-ttrl-1", "Qwen2.5-VL 7B", "RefCOCO+ val/A") == "cells/vr-ttrl-1_Qwen2.5-VL_7B_RefCOCO__val_A.yaml"


# --- checks.py: the dry-run checks, each at, just under and just over its limit -------------------------------


def _sources_plan(models: dict, sources: dict | None = None, datasets=("demo-digits",)):
    """What check_sources reads of a Plan: the runs' models, the models' entries, the datasets, data.sources."""
    return SimpleNamespace(runs=[SimpleNamespace(model=name) for name in models if name != "unused"], models=models,
                           datasets=list(datasets), config={"data": {"sources": sources or {}}})


def test_check_sources_probes_the_hub_only_for_models_neither_built_nor_local(tmp_path, monkeypatch):
    """Sorted by name: `built` (built by the workflow) and `local` (an existing directory) need nothing; `conv` is
    converted from the Hub id in `convert_from` (its `source`, the converted copy, does not exist yet), `hub` loads
    its Hub id: with the Hub unreachable the first of these two (conv) is named by its key. `unused` is in no run:
    never checked. A source neither a directory nor org/name is named by its key whatever the Hub."""
    models = {"built": {"build": "tiny-qwen2.5-vl", "source": "results/models/demo"},
              "conv": {"convert_from": "org/conv", "source": str(tmp_path / "converted")},
              "hub": {"source": "org/model"}, "local": {"source": str(tmp_path)}, "unused": {"source": "nowhere"}}
    monkeypatch.setattr(checks, "hub_usable", lambda: True)
    checks.check_sources(_sources_plan(models))
    monkeypatch.setattr(checks, "hub_usable", lambda: False)
    checks.check_sources(_sources_plan({k: models[k] for k in ("built", "local")}))  # no Hub model: no probe
    with pytest.raises(ValueError) as err:
        checks.check_sources(_sources_plan(models))
    assert str(err.value) == (
        "config key `models.conv.convert_from`: the Hugging Face Hub is unreachable, so org/conv cannot be downloaded; "
        "point the key at a local copy, or set HF_HUB_OFFLINE=1 to load models already in the Hugging Face cache")
    with pytest.raises(ValueError) as err:
        checks.check_sources(_sources_plan({**models, "bad": {"source": "no-org-name"}}))
    assert str(err.value) == ("model 'no-org-name': no such local directory, and not a Hub id (org/name); check the "
                              "config key models.bad.source")


def test_check_sources_names_a_missing_dataset_copy_or_class_list(tmp_path, monkeypatch):
    """data.sources.<d>.path and .class_names must exist where set (empty: unset); datasets outside the plan are not
    checked."""
    monkeypatch.setattr(checks, "hub_usable", lambda: False)
    local = {"local": {"source": str(tmp_path)}}
    (tmp_path / "classes.json").write_text("[]")
    present = {"demo-digits": {"path": str(tmp_path), "class_names": str(tmp_path / "classes.json")},
               "imagenet": {"path": "/no/such/copy"}}
    checks.check_sources(_sources_plan(local, present))
    checks.check_sources(_sources_plan(local, {"demo-digits": {"path": "", "class_names": None}}))
    for field, value in (("path", "/no/such/copy"), ("class_names", str(tmp_path / "none.json"))):
        with pytest.raises(ValueError) as err:
            checks.check_sources(_sources_plan(local, {"demo-digits": {**present["demo-digits"], field: value}}))
        assert str(err.value) == f"config key `data.sources.demo-digits.{field}`: {value} does not exist"


# --- samples.py: how many samples a job sees ---------------------------------------------------------------------


def test_split_size_reads_the_prepared_split_then_the_bundled_sizes(tmp_path):
    """Prepared: prep_stats.json's count of the registry's manifest split (geometry3k: ECHO's training set, its
    `train` split, 2,101 rows; 0 where the stats lack it). Before: the bundled sets' known sizes, 1,797 sklearn
    digits - 1,200 for training = 597 and 120 scenes; None for a Hub set."""
    from ttrl_bench.plan.samples import split_size

    plan = SimpleNamespace(results=str(tmp_path))
    assert (split_size(plan, "demo-digits"), split_size(plan, "demo-digit-scenes"), split_size(plan, "ai2d")) == (
        597, 120, None)
    for dataset, splits in (("geometry3k", {"train": 2101, "test": 601}), ("demo-digits", {"train": 1200})):
        (tmp_path / "data" / dataset).mkdir(parents=True)
        (tmp_path / "data" / dataset / "prep_stats.json").write_text(json.dumps({"splits": splits}))
    assert split_size(plan, "geometry3k") == 2101 and split_size(plan, "demo-digits") == 0


def test_local_rows_count_the_non_blank_lines_of_a_json_lines_copy(tmp_path):
    """A copy of 3 + 2 + 1 rows (one blank line skipped) in three .jsonl files (the default glob **/*.jsonl,
    sub-folders included): 6; only quiz.jsonl (the source's `files`): 3; CRPE's registry default crpe_relation.jsonl:
    1. None:
    no source, no path, a path that is no directory, another format, no file matched, or a matched file that is not
    JSON lines (CAPTURe's registry default real_metadata.json)."""
    from ttrl_bench.plan.samples import local_rows

    copy = tmp_path / "copy"
    (copy / "sub").mkdir(parents=True)
    (copy / "quiz.jsonl").write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3}\n')
    (copy / "sub" / "more.jsonl").write_text('{"a": 4}\n{"a": 5}')
    (copy / "crpe_relation.jsonl").write_text('{"a": 6}\n')
    (copy / "real_metadata.json").write_text('[{"a": 7}]')

    def rows(dataset, source):
        return local_rows(SimpleNamespace(config={"data": {"sources": {dataset: source}}}), dataset)

    assert rows("ai2d", {"path": str(copy)}) == (6, str(copy))  # quiz 3 + more 2 + crpe_relation 1
    assert rows("ai2d", {"path": str(copy), "format": "json", "files": "quiz.jsonl"}) == (3, str(copy))
    assert rows("crpe", {"path": str(copy)}) == (1, str(copy))
    assert rows("capture", {"path": str(copy)}) is None
    assert rows("ai2d", {"path": str(copy), "files": "*.parquet"}) is None
    assert rows("ai2d", {"path": str(copy), "format": "parquet"}) is None
    assert rows("ai2d", {"path": str(copy / "quiz.jsonl")}) is None
    assert rows("ai2d", {"path": None}) is None and rows("ai2d", None) is None


def test_layout_samples_are_one_per_sample_else_the_protocols_else_the_prepared_split(tmp_path):
    """adapt_per_sample: 1 (each adapt call sees one sample); n20_random: 20; nall_random: the prepared split's
    597 bundled digits, and None for a Hub set before preparation."""
    from ttrl_bench.plan.samples import layout_samples

    plan = SimpleNamespace(results=str(tmp_path))
    job = SimpleNamespace(rule="adapt", protocol="n20_random", dataset="demo-digits")
    assert layout_samples(plan, job) == 20
    assert layout_samples(plan, SimpleNamespace(**{**vars(job), "rule": "adapt_per_sample"})) == 1
    assert layout_samples(plan, SimpleNamespace(**{**vars(job), "protocol": "nall_random"})) == 597
    assert layout_samples(plan, SimpleNamespace(rule="adapt", protocol="nall_random_authors", dataset="ai2d")) is None


# --- config.py: the config's layers and the schema's defaults ----------------------------------------------------

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


# --- names.py: the names a config gives ----------------------------------------------------------------------------


def test_did_you_mean_lists_up_to_three_names_from_a_similarity_of_0_6():
    """difflib's ratio 2M/T: "ttrv-x" (6 letters) against ttrv-xy 12/13 = 0.92, ttrv-xyz 12/14 = 0.86, ttrv-xyzw
    12/15 = 0.80, ttrv-xyzwv 12/16 = 0.75: the best three, best first. At the cutoff: abcdefghij against abcdefxyzw
    shares 6 of 20 letters' pairs, 12/20 = 0.6, listed; against abcdexyzwv 10/20 = 0.5, not. Non-string names compare
    as text ("7" against "17": 2/3)."""
    from ttrl_bench.plan.names import did_you_mean

    assert did_you_mean("ttrv-x", ["ttrv-xyzwv", "ttrv-xyzw", "ttrv-xy", "ttrv-xyz", "other"]) == (
        " (did you mean ttrv-xy or ttrv-xyz or ttrv-xyzw?)")
    assert did_you_mean("abcdefghij", ["abcdefxyzw"]) == " (did you mean abcdefxyzw?)"
    assert did_you_mean("abcdefghij", ["abcdexyzwv"]) == ""
    assert did_you_mean(7, [17, 2]) == " (did you mean 17?)"


def test_check_known_lists_twelve_known_names_and_names_the_command_from_thirteen():
    """Twelve known methods are listed, sorted; thirteen are too many: the command that lists them, with their count.
    Only datasets and methods have such a command: data.sources lists all 45 registry names."""
    from ttrl_bench.datasets.registry import REGISTRY
    from ttrl_bench.plan.names import METHOD_NAMES, check_known

    check_known("methods", ["m11"], [f"m{i:02d}" for i in range(12)])
    with pytest.raises(ValueError) as err:
        check_known("methods", ["zz"], [f"m{i:02d}" for i in reversed(range(12))])
    assert str(err.value) == ("config key `methods`: unknown name(s) 'zz'; known: m00, m01, m02, m03, m04, m05, m06, "
                              "m07, m08, m09, m10, m11")
    with pytest.raises(ValueError) as err:
        check_known("methods", ["zz"], [f"m{i:02d}" for i in range(13)])
    assert str(err.value) == "config key `methods`: unknown name(s) 'zz'; `ttrl-bench methods list` lists the 13 known"
    with pytest.raises(ValueError) as err:
        check_known("methods", ["zero-shot", "ttrvv", "tent2"], METHOD_NAMES)
    assert str(err.value) == ("config key `methods`: unknown name(s) 'ttrvv' (did you mean ttrv?), 'tent2' (did you "
                              f"mean tent?); `ttrl-bench methods list` lists the {len(METHOD_NAMES)} known")
    with pytest.raises(ValueError) as err:
        check_known("data.sources", ["imagenet-z"], REGISTRY)
    assert str(err.value) == ("config key `data.sources`: unknown name(s) 'imagenet-z' (did you mean imagenet-r or "
                              f"imagenet-a or imagenet?); known: {', '.join(sorted(REGISTRY))}")
    assert len(REGISTRY) == 45


def test_check_names_names_each_key_and_skips_disabled_experiments():
    """One wrong name per case, each named by its key; an experiment's cross pairs count as its datasets; a disabled
    experiment's names are not checked; an experiment without models, methods or datasets has none to check."""
    from ttrl_bench.plan.names import check_names

    good = {"datasets": ["demo-digits"], "data": {"sources": {"demo-digits": {}}}, "methods": ["zero-shot", "ttrv"],
            "adaptation": {"method_overrides": {"ttrv": {}}},
            "experiments": {"off": {"enabled": False, "models": ["nobody"], "methods": ["nothing"], "datasets": ["none"]},
                            "bare": {"enabled": True},
                            "x": {"enabled": True, "models": ["demo"], "methods": ["ttrv"], "datasets": ["demo-digits"],
                                  "cross": [["demo-digits", "demo-digit-scenes"]]}}}
    models = {"demo": {}, "other": {}}
    check_names(good, models)
    x = good["experiments"]["x"]

    def experiment_x(**change):  # the disabled experiment first: skipping it must not end the loop
        return {"experiments": {**good["experiments"], "x": {**x, **change}}}

    cases = [
        ({"datasets": ["demo-digitz"]}, "config key `datasets`: unknown name(s) 'demo-digitz' (did you mean demo-digits"),
        ({"data": {"sources": {"demo-digitz": {}}}}, "config key `data.sources`: unknown name(s) 'demo-digitz'"),
        ({"methods": ["ttrvv"]}, "config key `methods`: unknown name(s) 'ttrvv' (did you mean ttrv?)"),
        ({"adaptation": {"method_overrides": {"ttrvv": {}}}},
         "config key `adaptation.method_overrides`: unknown name(s) 'ttrvv' (did you mean ttrv?)"),
        (experiment_x(models=["demo2"]),
         "config key `experiments.x.models`: unknown name(s) 'demo2' (did you mean demo?); known: demo, other"),
        (experiment_x(methods=["ttrvv"]), "config key `experiments.x.methods`: unknown name(s) 'ttrvv'"),
        (experiment_x(cross=[["demo-digits", "demo-digitz"]]),
         "config key `experiments.x.datasets`: unknown name(s) 'demo-digitz'"),
        # demo-digits 20/22 = 0.91, demo-digit-scenes 20/28 = 0.71; the kind is the key's last part: datasets
        (experiment_x(datasets=["demo-digitz"]),
         "config key `experiments.x.datasets`: unknown name(s) 'demo-digitz' (did you mean demo-digits or "
         "demo-digit-scenes?); `ttrl-bench datasets list` lists the 45 known"),
    ]
    for change, message in cases:
        with pytest.raises(ValueError) as err:
            check_names({**good, **change}, models)
        assert str(err.value).startswith(message)


def test_a_rewards_parameters_are_checked_once_named_by_where_they_are_set():
    """An override's reward_params is named by its key, a preset's by the method; the reward's own parameters follow
    (supervised GRPO's gold reward takes none). DARE's `uncertainty` is the GRPO wrapper's, never the reward's: it
    is dropped before the reward is built (so not in the message). A method without a reward (Tent) passes."""
    from ttrl_bench.plan.names import check_reward

    check_reward("tent", {"reward_params": {}}, None)
    dare = {"reward": "dare", "reward_params": {"alpha": 0.5, "tau": 0.05, "uncertainty": "vocab"}}
    check_reward("dare", dare, None)
    cases = [
        ("supervised-grpo", {"reward": "gold", "reward_params": {"x": 1}}, {"reward_params": {"x": 1}},
         "config key `adaptation.method_overrides.supervised-grpo.reward_params`: reward 'gold': bad reward_params "
         "{'x': 1}: <lambda>() got an unexpected keyword argument 'x'; reward 'gold' takes no parameters"),
        ("ttrv", {"reward": "ttrv", "reward_params": {"alpha": 0.75, "bogus": 1}}, None,
         "config key `methods (preset ttrv)`: reward 'ttrv': bad reward_params {'alpha': 0.75, 'bogus': 1}: <lambda>() "
         "got an unexpected keyword argument 'bogus'; reward 'ttrv' takes alpha, entropy, unparsable"),
        ("dare", {**dare, "reward_params": {**dare["reward_params"], "x": 1}}, {"hyperparameters": {}},
         "config key `methods (preset dare)`: reward 'dare': bad reward_params {'alpha': 0.5, 'tau': 0.05, 'x': 1}: "
         "_dare() got an unexpected keyword argument 'x'; reward 'dare' takes alpha, tau, eps"),
    ]
    for method, spec, overrides, message in cases:
        with pytest.raises(ValueError) as err:
            check_reward(method, spec, overrides)
        assert str(err.value) == message


def test_unknown_hyperparameters_are_named_by_their_config_path_first_in_sorted_order():
    """Two typos (zz, n_vote): n_vote, first sorted, is named. The per-task layer is checked against every key of its
    task's presets (grounding's include Tent's `trainable` and MEMO's `memo_form`); a method override against its
    own preset's keys and the optional ones every method takes (TTRV's kl_beta; updates_per_generation, optional).
    zero-shot has no preset: only the optional keys (no epochs). An override of None sets nothing."""
    from ttrl_bench.plan.names import check_hyperparameter_keys

    def layers(hyperparameters=None, overrides=None):
        return {"adaptation": {"hyperparameters": hyperparameters or {}, "method_overrides": overrides or {}}}

    check_hyperparameter_keys(layers({"grounding": {"trainable": "language", "memo_form": "x"}},
                                     {"ttrv": None, "dare": {"reward_params": {}}}))
    with pytest.raises(ValueError) as err:
        check_hyperparameter_keys(layers({"grounding": {"zz": 1, "n_vote": 2}}))
    message = str(err.value)
    assert message.startswith("config key `adaptation.hyperparameters.grounding.n_vote`: unknown hyper-parameter; "
                              "known for grounding methods: advantages, answer_parser, augmentations, ")
    assert ", memo_form, " in message and ", trainable, " in message
    with pytest.raises(ValueError) as err:
        check_hyperparameter_keys(layers(overrides={"ttrv": {"hyperparameters": {"zz": 1, "n_vote": 2}}}))
    message = str(err.value)
    assert message.startswith("config key `adaptation.method_overrides.ttrv.hyperparameters.n_vote`: unknown "
                              "hyper-parameter of ttrv; known: advantages, answer_parser, ")
    assert ", kl_beta, " in message and ", updates_per_generation, " in message
    with pytest.raises(ValueError) as err:
        check_hyperparameter_keys(layers(overrides={"zero-shot": {"hyperparameters": {"epochs": 1}}}))
    message = str(err.value)
    assert message.startswith("config key `adaptation.method_overrides.zero-shot.hyperparameters.epochs`: unknown "
                              "hyper-parameter of zero-shot; known: advantages, ")
    assert ", epochs, " not in message and ", updates_per_generation, " in message


def test_resolved_methods_carry_the_rollout_backend_and_name_a_bad_override():
    """The config's rollout backend goes into every method's hyper-parameters (Tent's too), over its preset's layer;
    a reward_params typo is named by the method's override key (its reward built once, now), and so is an `update`
    override of a method with TRL's standard update (TTRV)."""
    from ttrl_bench.plan.names import resolved_methods

    config = {"adaptation": {"rollout_backend": "vllm", "hyperparameters": {"mcq": {"learning_rate": 1e-5}},
                             "method_overrides": {"ttrv": None}}}
    specs = resolved_methods(config, ["ttrv", "tent"])
    assert (specs["ttrv"]["hyperparameters"]["rollout_backend"], specs["ttrv"]["hyperparameters"]["learning_rate"]) == (
        "vllm", 1e-5)
    assert specs["tent"]["hyperparameters"]["rollout_backend"] == "vllm"
    assert specs["tent"]["hyperparameters"]["learning_rate"] == 5e-7  # the grounding preset's: no mcq layer there
    config["adaptation"]["method_overrides"] = {"ttrv": {"reward_params": {"bogus": 1}}}  # over the preset's three
    with pytest.raises(ValueError) as err:
        resolved_methods(config, ["ttrv"])
    assert str(err.value) == ("config key `adaptation.method_overrides.ttrv.reward_params`: reward 'ttrv': bad "
                              "reward_params {'alpha': 0.75, 'entropy': 'paper', 'unparsable': 'answer', 'bogus': 1}: "
                              "<lambda>() got an unexpected keyword argument 'bogus'; reward 'ttrv' takes alpha, entropy, "
                              "unparsable")
    config["adaptation"]["method_overrides"] = {"ttrv": {"update": {"clip": 1}}}
    with pytest.raises(ValueError) as err:
        resolved_methods(config, ["ttrv"])
    assert str(err.value) == ("config key `adaptation.method_overrides.ttrv`: method 'ttrv' has TRL's standard update: "
                              "no update parameters to override")


def test_a_variant_under_the_other_protocol_keeps_what_the_config_set_itself():
    """authors -> clean: every key at the authors' value (SETTINGS) is dropped and refilled by the schema's defaults
    (chat_template model, choice_parser robust; the adaptation keys have none: absent), while kl_clamp 5.0 (the
    authors' is 10.0) and 16 MCQ tokens (theirs 1,024) were set by hand and stay. clean -> authors (the demo): a key
    at the schema's default (6 MCQ tokens) takes the authors' 1,024; the demo's 64 grounding tokens (the schema's
    1,024) stay instead of the authors' 2,048. The config given is not changed."""
    from ttrl_bench.plan.config import load_config, validated, variant

    demo = load_config(replace=False)
    mcq = {**demo["adaptation"]["hyperparameters"]["mcq"], "kl_clamp": 5.0}
    authors = validated({**demo, "protocol": "authors",
                         "adaptation": {**demo["adaptation"], "hyperparameters": {**demo["adaptation"]["hyperparameters"],
                                                                                  "mcq": mcq}},
                         "evaluation": {**demo["evaluation"], "mcq": {"max_new_tokens": 16, "samples": "all"}}})
    clean = variant(authors, "clean")
    assert clean["protocol"] == "clean" and authors["protocol"] == "authors"
    assert clean["evaluation"]["mcq"] == {"max_new_tokens": 16, "samples": "all", "chat_template": "model",
                                          "choice_parser": "robust"}
    own = {**demo["adaptation"]["hyperparameters"]["mcq"], "kl_clamp": 5.0}  # the demo's own keys and kl_clamp
    assert clean["adaptation"]["hyperparameters"]["mcq"] == own
    assert authors["evaluation"]["mcq"]["chat_template"] == "authors"
    assert authors["adaptation"]["hyperparameters"]["mcq"]["advantages"] == "verl"
    back = variant(demo, "authors")
    assert (back["evaluation"]["mcq"]["max_new_tokens"], back["evaluation"]["grounding"]["max_new_tokens"]) == (1024, 64)
    assert back["adaptation"]["hyperparameters"]["mcq"]["kl_clamp"] == 10.0 and demo["protocol"] == "clean"


def test_the_built_demo_model_runs_only_on_bundled_and_local_datasets():
    """demo-digits is bundled, imagenet and refcocog-train are local copies (registry sources local:...): the built
    model may run on them; ai2d and imagenet-a come from the Hub: named, in the config's order, with the first built
    model. The merge is named only where Snakemake merged --configfile(s) into config/config.yaml (replaced False)."""
    models = {"demo": {"build": "tiny-qwen2.5-vl", "source": "results/models/demo"},
              "demo2": {"build": "tiny-internvl", "source": "results/models/demo2"}, "hub": {"source": "org/model"}}
    checks.check_demo_model_alone(models, ["demo-digits", "imagenet", "refcocog-train"])
    checks.check_demo_model_alone({"hub": models["hub"]}, ["ai2d"], ["mine.yaml"], replaced=False)
    alone = ("config: the built demo model 'demo' (models.demo.build) runs on the bundled demo sets and local datasets "
             "(docs/extending.md), not on ai2d, imagenet-a (Hub or paper datasets): give those a model with a `source`")
    merged = (". config/ttrv.yaml, x.yaml was merged into config/config.yaml, whose demo model came along; add "
              "--replace-workflow-config to run it alone")
    for configfiles, replaced, message in [((), None, alone), (["config/ttrv.yaml", "x.yaml"], True, alone),
                                           (["config/ttrv.yaml", "x.yaml"], None, alone), ((), False, alone),
                                           (["config/ttrv.yaml", "x.yaml"], False, alone + merged)]:
        with pytest.raises(ValueError) as err:
            checks.check_demo_model_alone(models, ["demo-digits", "ai2d", "imagenet-a"], configfiles, replaced)
        assert str(err.value) == message


def test_the_slurm_checks_messages_name_the_variable_and_the_least_cap():
    """Each unset variable by name and what profiles/slurm submits with it; a cap of 4 GPUs passes a largest job of 4,
    a cap under it (2) stops and suggests N >= 4, the one-GPU cap of profiles/default with one-GPU jobs N >= 2 (never 1)."""
    slurm = {"TTRL_SLURM_PARTITION": "gpu", "TTRL_SLURM_ACCOUNT": ""}
    with pytest.raises(ValueError) as err:
        checks.check_slurm({"TTRL_SLURM_PARTITION": "gpu"}, None, 1)
    assert str(err.value) == (
        "environment variable TTRL_SLURM_ACCOUNT is unset: profiles/slurm submits the account jobs are charged to "
        "(empty, with --slurm-no-account, where there is none) as $TTRL_SLURM_ACCOUNT; export TTRL_SLURM_ACCOUNT=... "
        "before snakemake (docs/slurm.md, Running on SLURM)")
    checks.check_slurm(slurm, 4, 4)  # at the limit: the largest job keeps its 4 GPUs
    with pytest.raises(ValueError) as err:
        checks.check_slurm(slurm, 2, 4)
    assert str(err.value) == (
        "a global resource limit gpu=2 on SLURM would cap each job at 2 GPU(s) (this config's largest job asks for 4) "
        "and run 2 GPU(s) of jobs at a time. profiles/default's local limit is gpu=1, and Snakemake applies it when "
        "the SLURM profile is given with --profile: use `--workflow-profile profiles/slurm` (it replaces "
        "profiles/default); to cap a cluster run on purpose, `--resources gpu=N` with N >= 4")
    with pytest.raises(ValueError) as err:
        checks.check_slurm(slurm, 1, 1)
    assert str(err.value).endswith("`--resources gpu=N` with N >= 2")


# the tasks of the fake plans' datasets (datasets/registry.py) and their `fits` (grid.py Plan.fits: a method adapts
# on the datasets of its task)
TASKS = {"demo-digits": "mcq", "ai2d": "mcq", "crpe": "mcq", "demo-digit-scenes": "grounding"}


def _fits(method: str, dataset: str) -> bool:
    from ttrl_bench.adaptation.presets import method_task

    return method_task(method) == TASKS[dataset]


def test_a_method_that_fits_none_of_its_blocks_datasets_is_named_with_its_task():
    """VR-TTRL (grounding) among two MCQ sets of the main grid: named, the sets sorted; TTRV (mcq) in an experiment
    whose only adaptation set is a cross pair's training side (the scenes): named under the experiment's key. A
    method fitting one of two sets passes, zero-shot and a block without adaptation sets are never checked."""
    def plan(*blocks):
        return SimpleNamespace(blocks=list(blocks), fits=_fits)

    checks.check_methods_fit(plan(("", {"methods": ["zero-shot", "ttrv", "vr-ttrl"], "datasets": ["demo-digits",
                                                                                                   "demo-digit-scenes"]}),
                                  ("experiments.y", {"methods": ["vr-ttrl"]})))
    with pytest.raises(ValueError) as err:
        checks.check_methods_fit(plan(("", {"methods": ["zero-shot", "ttrv", "vr-ttrl"], "datasets": ["demo-digits", "ai2d"]})))
    assert str(err.value) == ("config key `methods`: vr-ttrl adapts on grounding datasets and none of ai2d, demo-digits "
                              "is one, so it would run nowhere; remove it or add a dataset of its task")
    with pytest.raises(ValueError) as err:
        checks.check_methods_fit(plan(("", {"methods": ["ttrv"], "datasets": ["ai2d"]}),
                                      ("experiments.x", {"methods": ["ttrv"], "cross": [["demo-digit-scenes", "ai2d"]]})))
    assert str(err.value) == ("config key `experiments.x.methods`: ttrv adapts on mcq datasets and none of "
                              "demo-digit-scenes is one, so it would run nowhere; remove it or add a dataset of its task")


def test_methods_counting_unparsable_answers_differently_in_one_block_are_warned(caplog):
    """Main grid: TTRL's `no_reward` set by an override, TTRV's preset `answer`: one warning naming both and where each
    is set; TTRV w/o frequency has no such parameter and zero-shot no spec: left out. An experiment whose methods
    agree: no warning. Logged once, as a warning of this module's logger."""
    specs = {"ttrl-majority": {"reward_params": {"unparsable": "no_reward"}},
             "ttrv": {"reward_params": {"alpha": 0.75, "unparsable": "answer"}},
             "ttrv-no-frequency": {"reward_params": {"alpha": 0.75}}, "dare": {"reward_params": {"unparsable": "answer"}}}
    plan = SimpleNamespace(config={"adaptation": {"method_overrides": {"ttrl-majority": {"reward_params": {}},
                                                                       "ttrv": {"hyperparameters": {}}}}},
                           method_specs=specs,
                           blocks=[("", {"methods": ["zero-shot", "ttrl-majority", "ttrv", "ttrv-no-frequency"]}),
                                   ("experiments.x", {"methods": ["ttrv", "dare", "ttrv-no-frequency"]})])
    warning = ("config `methods`: these methods count unparsable answers differently: ttrl-majority no_reward "
               "(adaptation.method_overrides), ttrv answer (preset); set adaptation.method_overrides.<method>."
               "reward_params.unparsable to compare like with like (rewards/voting.py)")
    with caplog.at_level("WARNING"):
        assert checks.warn_mixed_unparsable(plan) == [warning]
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [("ttrl_bench.plan.checks", "WARNING",
                                                                                warning)]
    plan.blocks = [("experiments.x", {"methods": ["ttrl-majority", "dare"]})]
    assert checks.warn_mixed_unparsable(plan)[0].startswith("config `experiments.x`: these methods count")


def test_adaptation_samples_per_block_pass_at_the_split_size_and_stop_one_over_naming_the_blocks_key(tmp_path):
    """demo-digits' bundled test split holds 1,797 - 1,200 = 597 digits; a local CRPE copy (no size known before
    preparation) 3 rows. A block's own n_samples is named by its key, else adaptation.n_samples (the plan's 598 here);
    a cross pair adapts on its first dataset (demo-digits; its target ai2d has no known size); "all" always fits.
    Only blocks with a GRPO method that fits the dataset count (zero-shot alone: nothing adapts)."""
    copy = tmp_path / "crpe"
    copy.mkdir()
    (copy / "crpe_relation.jsonl").write_text('{"a": 1}\n{"a": 2}\n{"a": 3}\n')

    def plan(n_adapt, *blocks):
        return SimpleNamespace(blocks=list(blocks), n_adapt=n_adapt, grpo_methods=["ttrv"], fits=_fits, runs=[],
                               results=str(tmp_path / "results"),
                               config={"data": {"sources": {"crpe": {"path": str(copy)}}},
                                       "evaluation": {"exclude_adaptation_samples": True}})

    ttrv = {"methods": ["zero-shot", "ttrv"]}
    checks.check_sample_counts(plan(597, ("", {**ttrv, "datasets": ["demo-digits"]}),
                                    ("experiments.x", {**ttrv, "n_samples": 3, "datasets": ["crpe"]}),
                                    ("experiments.y", {**ttrv, "n_samples": "all", "datasets": ["demo-digits", "crpe"]}),
                                    ("experiments.z", {"methods": ["zero-shot"], "n_samples": 598,
                                                       "datasets": ["demo-digits"]})))
    over = [
        (plan(20, ("experiments.x", {**ttrv, "n_samples": 598, "datasets": ["demo-digits"]})),
         "config key `experiments.x.n_samples`: 598 adaptation samples, but demo-digits's test split has 597"),
        (plan(598, ("experiments.y", {**ttrv, "datasets": ["demo-digits"]})),
         "config key `adaptation.n_samples`: 598 adaptation samples, but demo-digits's test split has 597"),
        (plan(20, ("experiments.c", {**ttrv, "n_samples": 598, "cross": [["demo-digits", "ai2d"]]})),
         "config key `experiments.c.n_samples`: 598 adaptation samples, but demo-digits's test split has 597"),
        (plan(20, ("experiments.x", {**ttrv, "n_samples": 4, "datasets": ["crpe"]})),
         f"config key `experiments.x.n_samples`: 4 adaptation samples, but the local copy of crpe ({copy}) has 3 rows"),
    ]
    for bad, message in over:
        with pytest.raises(ValueError) as err:
            checks.check_sample_counts(bad)
        assert str(err.value) == message


def test_run_all_runs_each_check_in_order_with_the_plans_settings(monkeypatch):
    """The plan's models, datasets and results directory reach the checks, the config files as given; the pre-flight
    (check_cache) before the sources check, the requests last."""
    calls = []
    for name in ("check_demo_model_alone", "check_methods_fit", "warn_mixed_unparsable", "check_sample_counts",
                 "check_cache", "check_sources", "check_requests"):
        monkeypatch.setattr(checks, name, lambda *args, name=name: calls.append((name, args)))
    plan = SimpleNamespace(models={"m": {}}, datasets=["ai2d"], config={"c": 1}, run_models=["m"], results="out")
    checks.run_all(plan, ("a.yaml",), replaced=False)
    assert calls == [("check_demo_model_alone", ({"m": {}}, ["ai2d"], ("a.yaml",), False)),
                     ("check_methods_fit", (plan,)), ("warn_mixed_unparsable", (plan,)), ("check_sample_counts", (plan,)),
                     ("check_cache", ({"c": 1}, ["m"], ["ai2d"], ["a.yaml"], Path("out"))),
                     ("check_sources", (plan,)), ("check_requests", (plan,))]


def test_evaluation_samples_per_run_pass_at_the_split_less_the_held_out_and_stop_one_over(tmp_path):
    """597 bundled digits, 20 of them held out for adaptation (n20_random, exclude_adaptation_samples, an MCQ set):
    577 pass, 578 stop; without holding out 597 pass, 598 stop; nall_random holds out nothing known before
    preparation (597 pass). The 120 scenes are a grounding set: never held out (120 pass, 121 stop). "all" and a set
    of unknown size (ai2d, not prepared) are not checked."""
    def plan(exclude, mcq, grounding, protocol="n20_random"):
        runs = [SimpleNamespace(target=target, protocol=protocol) for target in ("ai2d", "demo-digits", "demo-digit-scenes")]
        return SimpleNamespace(blocks=[], runs=runs, results=str(tmp_path / "results"),
                               section={"ai2d": "mcq", "demo-digits": "mcq", "demo-digit-scenes": "grounding"},
                               task={"ai2d": "mcq", "demo-digits": "mcq", "demo-digit-scenes": "grounding"},
                               config={"evaluation": {"exclude_adaptation_samples": exclude, "mcq": {"samples": mcq},
                                                      "grounding": {"samples": grounding}}})

    for passing in (plan(True, 577, 120), plan(False, 597, "all"), plan(True, 597, 120, "nall_random"),
                    plan(True, "all", "all")):
        checks.check_sample_counts(passing)
    over = [
        (plan(True, 578, 120), "config key `evaluation.mcq.samples`: 578 evaluation samples, but demo-digits's test "
                               "split has 597, 20 of them held out for adaptation"),
        (plan(False, 598, 120), "config key `evaluation.mcq.samples`: 598 evaluation samples, but demo-digits's test "
                                "split has 597"),
        (plan(True, 577, 121), "config key `evaluation.grounding.samples`: 121 evaluation samples, but "
                               "demo-digit-scenes's test split has 120"),
    ]
    for bad, message in over:
        with pytest.raises(ValueError) as err:
            checks.check_sample_counts(bad)
        assert str(err.value) == message
