"""datasets/prepare.py over the whole registry: every entry has a fixture test and names the evidence for its
layout; offline and bad input (missing copies and columns, bad answers, truncated images, decompression bombs)
are named or counted, never fatal; preparing twice gives identical bytes. Fixture rows follow one pattern unless a test says otherwise: a good 64x48 image, a 1200x900
image (too large for TTRV's 1000x1000 limit) and bytes that are no image (unreadable)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import datasets
import pytest
from PIL import Image

from ttrl_bench.datasets import sources
from ttrl_bench.datasets.prepare import prepare_dataset
from ttrl_bench.datasets.readers import rows
from ttrl_bench.datasets.registry import REGISTRY
from ttrl_bench.datasets.sources import DatasetSourceError

from tests.support.datasets import GOOD, counts, prepare, save
from tests.support.datasets import webdataset_copy


def test_the_scenes_training_split_is_its_600_scenes(tmp_path):
    """demo-digit-scenes-train (VR-TTRL Table 11's training split in config/cpu-methods.yaml): the scenes'
    manifest with its 600 train scenes (readers.bundled.SCENES_PER_SPLIT) beside the 120 test ones, each with a query."""
    from ttrl_bench.datasets.prepare import load_manifest

    prepare_dataset("demo-digit-scenes-train", tmp_path / "scenes-train", seed=0)
    manifest = load_manifest(tmp_path / "scenes-train")
    assert manifest["split"].value_counts().to_dict() == {"train": 600, "test": 120}
    assert len(load_manifest(tmp_path / "scenes-train", "train")) == 600 and manifest["prompt"].str.len().min() > 0


def test_every_registry_entry_has_a_fixture_test():
    """The rule, not a hand-kept list: every entry's name is quoted in a test module that prepares datasets from
    fixtures (calls `prepare(` or `prepare_dataset(`), so a new entry fails here until a test builds one in its
    layout (docs/extending.md, step 5)."""
    modules = [path.read_text() for path in Path(__file__).parents[1].rglob("*.py")]  # every test module; conftest.py builds the demo sets
    preparing = [text for text in modules if re.search(r"\bprepare(_dataset)?\(", text)]
    missing = [name for name in REGISTRY if not any(f'"{name}"' in text or f"'{name}'" in text for text in preparing)]
    assert missing == []


def test_offline_without_a_local_copy_names_the_hub_id_and_config_key(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "hub_reachable", lambda timeout=3.0: False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(DatasetSourceError, match=r"lmms-lab-encoder/MME.*`data\.sources\.mme\.path`"):
        prepare(tmp_path, "mme", None)
    with pytest.raises(DatasetSourceError, match=r"no Hub copy.*data\.sources\.imagenet\.path"):
        prepare(tmp_path, "imagenet", None)


def test_missing_local_copy_and_missing_column_are_named(tmp_path):
    with pytest.raises(DatasetSourceError, match=r"does not exist"):
        prepare(tmp_path, "ai2d", {"path": str(tmp_path / "nowhere")})
    source = save(tmp_path, {"image": [GOOD], "question": ["q"], "answer": ["Yes"], "category": ["OCR"]},
                  {"image": datasets.Image(), "question": datasets.Value("string"), "answer": datasets.Value("string"),
                   "category": datasets.Value("string")})
    with pytest.raises(DatasetSourceError, match=r"no column 'options' for field 'options'.*data\.sources\.ai2d\.fields\.options"):
        prepare(tmp_path, "ai2d", source)
    # the same copy works once the field is mapped... to a column that is there
    stats, _ = prepare(tmp_path, "mme", source)
    assert stats["kept"] == 1


def test_a_row_with_a_bad_answer_is_counted_not_fatal(tmp_path):
    source = save(tmp_path, {"image": [GOOD, GOOD], "question": ["q", "q"], "answer": ["Yes", "Maybe"],
                             "category": ["OCR", "OCR"]},
                  {"image": datasets.Image(), "question": datasets.Value("string"), "answer": datasets.Value("string"),
                   "category": datasets.Value("string")})
    stats, _ = prepare(tmp_path, "mme", source)
    assert counts(stats) == {"original": 2, "kept": 1, "dropped": {"bad_row": 1}}


def test_preparing_twice_gives_identical_bytes(tmp_path):
    source = webdataset_copy(tmp_path, "webp")
    prepare_dataset("dtd", tmp_path / "a", 0, source=source)
    prepare_dataset("dtd", tmp_path / "b", 0, source=source)
    prepare_dataset("dtd", tmp_path / "a", 0, source=source)  # again, over the first
    for name in ("manifest.parquet", "prep_stats.json", "images/dtd-000000.img"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_a_digit_answer_is_read_by_the_sources_answer_format():
    numeric = ["1", "2", "3", "4"]
    assert rows._letter_answer("1", numeric, "text") == "A"  # MathVista: the option itself
    assert rows._letter_answer("1", numeric, "index") == "B"  # AI2D: an index into the options
    assert rows._letter_answer("(C)", numeric, "letter") == "C"
    with pytest.raises(ValueError, match="not a valid letter"):
        rows._letter_answer("1", numeric, "letter")


def bomb_png(side=20000) -> bytes:
    """A valid side x side 1-bit black PNG (about 50 KB): 400M pixels, over PIL's bomb limit of
    2 x Image.MAX_IMAGE_PIXELS, so Image.open refuses it before reading a pixel."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    compressor, row = zlib.compressobj(9), b"\x00" * (1 + side // 8)  # filter byte + packed pixels
    body = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)  # 1 bit, greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def truncated_jpeg() -> bytes:
    """A 64x48 JPEG cut inside its scan data: the header (and so the size) reads fine, the pixels do not."""
    buffer = io.BytesIO()
    Image.effect_noise((64, 48), 64).convert("RGB").save(buffer, format="JPEG", quality=95)
    blob = buffer.getvalue()
    return blob[: len(blob) // 2]


def test_truncated_jpeg_and_decompression_bomb_are_counted_not_fatal(tmp_path):
    bomb, cut = bomb_png(), truncated_jpeg()
    with Image.open(io.BytesIO(cut)) as im:
        assert im.size == (64, 48)  # what the header-only resolution filter sees
    mme = {"question": datasets.Value("string"), "answer": datasets.Value("string"),
           "category": datasets.Value("string"), "image": datasets.Image()}
    source = save(tmp_path, {"image": [GOOD, cut, bomb], "question": ["q"] * 3, "answer": ["Yes"] * 3,
                             "category": ["OCR"] * 3}, mme)
    stats, manifest = prepare(tmp_path, "mme", source)
    assert counts(stats) == {"original": 3, "kept": 1, "dropped": {"too_large": 1, "unreadable": 1}}
    assert list(manifest["id"]) == ["mme-000000"]


def test_decompression_bomb_in_a_grounding_source_is_too_large(tmp_path):
    # the grounding readers read the image size before the filter does
    polygon = [10.0, 20.0, 40.0, 20.0, 40.0, 60.0, 10.0, 60.0]
    source = save(tmp_path, {"image": [GOOD, bomb_png(), truncated_jpeg()], "answer": [["dog"], ["cat"], ["cow"]],
                             "segmentation": [polygon] * 3, "bbox": [[10.0, 20.0, 30.0, 40.0]] * 3},
                  {"image": datasets.Image(), "answer": datasets.List(datasets.Value("string")),
                   "segmentation": datasets.List(datasets.Value("float32")),
                   "bbox": datasets.List(datasets.Value("float32"))})
    stats, manifest = prepare(tmp_path, "refcoco", source)
    assert counts(stats) == {"original": 3, "kept": 1, "dropped": {"too_large": 1, "unreadable": 1}}
    assert list(manifest["query"]) == ["dog"]


def test_every_registry_entry_names_the_evidence_for_its_layout():
    """Issue 33: where each layout was read (docs/dataset-evidence.md has the long form)."""
    assert [name for name, spec in REGISTRY.items() if len(spec.evidence) < 20] == []
