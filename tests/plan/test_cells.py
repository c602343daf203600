"""plan/cells.py: one published cell, one config (a table is a paper and a number; the experiments kept, the
datasets taken, the file name). Expected values are read from the config files and the dataset registry named
in each docstring."""

from __future__ import annotations

import pytest

from ttrl_bench.plan.cells import cell_config, cell_file_name, split_table


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
