"""The recognition entries of datasets/registry.py (CLIP_benchmark's webdataset shards, food101, ImageNet's
image folder, class names). Every registry entry through its real loader: a tiny fixture with the source's columns and
types (a save_to_disk dataset, webdataset shards, an image folder, or JSON lines + files) is
prepared with `prepare_dataset` and checked against counts and prompts worked out by hand.

Fixture rows follow one pattern unless a test says otherwise: a good 64x48 image, a 1200x900
image (too large for TTRV's 1000x1000 limit) and bytes that are no image (unreadable)."""

from __future__ import annotations

import json

import datasets
import pytest

from ttrl_bench.datasets import sources
from ttrl_bench.datasets.sources import DatasetSourceError

from tests.support.datasets import CORRUPT, GOOD, LARGE, STANDARD_DROPS, THREE_IMAGES, counts, prepare, save
from tests.support.datasets import CLASSES, webdataset_copy


# the image extension of each clip-benchmark repository (registry evidence: jpg for the ImageNet
# variants made from files, webp, the converter's default, for the others)
WDS_ENTRIES = {"imagenet-v2": "webp", "imagenet-r": "jpg", "imagenet-sketch": "jpg", "imagenet-a": "jpg",
               "dtd": "webp", "resisc45": "webp"}


@pytest.mark.parametrize("name", WDS_ENTRIES)
def test_clip_benchmark_webdataset_entries(tmp_path, name):
    stats, manifest = prepare(tmp_path, name, webdataset_copy(tmp_path, WDS_ENTRIES[name]))
    assert counts(stats) == STANDARD_DROPS  # test/ only: 3 samples over 2 shards, not train/'s 5
    row = manifest.iloc[0]
    assert row["label"] == "tiger shark"  # cls 3 in classnames.txt order
    assert row["source_id"] == "s0000000"  # the shard key
    options = list(row["options"])
    assert len(set(options)) == 4 and options["ABCD".index(row["answer"])] == "tiger shark"
    what = "what texture it shows" if name == "dtd" else "what it shows"  # DTD's wording, Appendix C
    assert row["prompt"].startswith(f"Look at the given image and identify {what}. Choose the correct answer")
    assert row["prompt"].endswith("\nOptions:\n" + "\n".join(f"{l}. {o}" for l, o in zip("ABCD", options)) + ".")


def test_the_other_image_extension_is_read_too(tmp_path):
    stats, _ = prepare(tmp_path, "imagenet-r", webdataset_copy(tmp_path, "webp"))
    assert counts(stats) == STANDARD_DROPS


def test_the_fixture_shards_load_as_datasets_loads_the_repository(tmp_path):
    # datasets' webdataset builder names the columns by extension, decodes .cls to int, adds the key
    root = webdataset_copy(tmp_path, "webp")["path"]
    data = datasets.load_dataset("webdataset", data_files={"test": f"{root}/test/*.tar"}, split="test")
    assert sorted(data.column_names) == ["__key__", "__url__", "cls", "webp"]
    assert list(data["cls"]) == [3, 0, 1] and list(data["__key__"]) == ["s0000000", "s0000001", "s0000002"]


def test_a_shard_missing_from_nshards_is_named(tmp_path):
    source = webdataset_copy(tmp_path)
    (tmp_path / "wds" / "test" / "1.tar").unlink()
    with pytest.raises(DatasetSourceError, match=r"nshards\.txt says 2 shards, but .*test/1\.tar is missing"):
        prepare(tmp_path, "dtd", source)


def test_clip_benchmark_hub_loads_the_splits_shards_only(tmp_path, monkeypatch):
    # one shard + nshards.txt: datasets' module inference would pick "text" (a .tar/.txt tie goes to .txt)
    calls = []

    def fake_load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        raise RuntimeError("offline")

    monkeypatch.setattr(sources, "hub_usable", lambda: True)
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    with pytest.raises(DatasetSourceError, match=r"clip-benchmark/wds_imagenet-a .*data\.sources\.imagenet-a\.path"):
        prepare(tmp_path, "imagenet-a", None)
    assert calls == [(("clip-benchmark/wds_imagenet-a", None), {"split": "test", "data_files": {"test": "test/*.tar"}})]


def test_food101_class_names_come_from_the_class_label(tmp_path):
    names = ["apple_pie", "baby_back_ribs", "baklava", "beef_carpaccio", "beignets"]
    source = save(tmp_path, {"image": THREE_IMAGES, "label": [2, 0, 1]},
                  {"image": datasets.Image(), "label": datasets.ClassLabel(names=names)})
    stats, manifest = prepare(tmp_path, "food101", source)
    assert counts(stats) == STANDARD_DROPS
    assert manifest.iloc[0]["label"] == "baklava"
    assert set(manifest.iloc[0]["options"]) <= {"apple pie", "baby back ribs", "baklava", "beef carpaccio", "beignets"}


def test_imagenet_image_folder_with_wordnet_id_names(tmp_path):
    root = tmp_path / "imagenet-val"
    wnids = ["n01440764", "n01443537", "n01484850", "n01491361"]
    for wnid, blob in zip(wnids, [GOOD, LARGE, CORRUPT, GOOD]):
        (root / wnid).mkdir(parents=True)
        (root / wnid / f"ILSVRC2012_val_{wnid}.JPEG").write_bytes(blob)
    names = tmp_path / "imagenet_names.json"
    names.write_text(json.dumps(dict(zip(wnids, CLASSES))))
    stats, manifest = prepare(tmp_path, "imagenet", {"path": str(root), "class_names": str(names)})
    assert counts(stats) == {"original": 4, "kept": 2, "dropped": {"too_large": 1, "unreadable": 1}}
    assert list(manifest["label"]) == ["tench", "tiger shark"]


def test_missing_class_names_name_the_config_key(tmp_path):
    root = tmp_path / "folder"
    for wnid in ["n1", "n2"]:
        (root / wnid).mkdir(parents=True)
        (root / wnid / "a.png").write_bytes(GOOD)
    with pytest.raises(DatasetSourceError, match=r"data\.sources\.imagenet\.class_names"):
        prepare(tmp_path, "imagenet", {"path": str(root), "class_names": str(tmp_path / "absent.txt")})
