"""Fixture builders shared by the datasets' tests: PNG bytes (a good 64x48 image, a 1200x900 one too large for
TTRV's 1000x1000 limit, bytes that are no image), a save_to_disk copy, and preparing an entry from it."""

from __future__ import annotations

import io
import tarfile

import datasets
import pandas as pd
from PIL import Image

from ttrl_bench.datasets.prepare import prepare_dataset
from ttrl_bench.datasets.registry import DatasetSpec


def png(width=64, height=48, color=(200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="PNG")
    return buffer.getvalue()


GOOD, LARGE, CORRUPT = png(), png(1200, 900), b"this is not an image"
THREE_IMAGES = [GOOD, LARGE, CORRUPT]
STANDARD_DROPS = {"original": 3, "kept": 1, "dropped": {"too_large": 1, "unreadable": 1}}


def save(tmp_path, columns: dict, features: dict) -> dict:
    """A save_to_disk copy with the given columns; images given as bytes."""
    for name, feature in features.items():
        if isinstance(feature, datasets.Image):
            columns[name] = [{"bytes": b, "path": None} if b is not None else None for b in columns[name]]
        elif isinstance(feature, datasets.List) and isinstance(feature.feature, datasets.Image):
            columns[name] = [[{"bytes": b, "path": None} for b in images] for images in columns[name]]
    path = tmp_path / "source"
    datasets.Dataset.from_dict(columns, features=datasets.Features(features)).save_to_disk(str(path))
    return {"path": str(path)}


def prepare(tmp_path, name: str, source: dict, seed: int = 0):
    stats = prepare_dataset(name, tmp_path / "prepared", seed, source=source)
    return stats, pd.read_parquet(tmp_path / "prepared" / "manifest.parquet")


def counts(stats: dict) -> dict:
    return {key: stats[key] for key in ("original", "kept", "dropped")}


CLASSES = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead"]


def encoded(blob: bytes, ext: str) -> bytes:
    """An image re-encoded as a shard stores it (CLIP_benchmark PIL_to_bytes: lossless webp, or
    the source file's own jpg); bytes that are no image stay as they are."""
    try:
        image = Image.open(io.BytesIO(blob))
        image.load()
    except OSError:
        return blob
    buffer = io.BytesIO()
    image.save(buffer, **({"format": "WEBP", "lossless": True} if ext == "webp" else {"format": "JPEG"}))
    return buffer.getvalue()


def write_shard(path, samples, image_ext, first_index=0):
    """One webdataset shard as CLIP_benchmark's convert_dataset writes it: s%07d.<ext> + s%07d.cls."""
    with tarfile.open(path, "w") as tar:
        for i, (blob, label) in enumerate(samples, start=first_index):
            for ext, data in ((image_ext, encoded(blob, image_ext)), ("cls", str(label).encode())):
                info = tarfile.TarInfo(f"s{i:07d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def webdataset_copy(tmp_path, image_ext="jpg") -> dict:
    """A download of a clip-benchmark repository: test/0.tar + test/1.tar with test/nshards.txt "2",
    a train/ split beside it (wds_vtab-*), classnames.txt and the zero-shot templates at the root."""
    root = tmp_path / "wds"
    (root / "test").mkdir(parents=True)
    (root / "train").mkdir()
    (root / "classnames.txt").write_text("\n".join(CLASSES) + "\n")
    (root / "zeroshot_classification_templates.txt").write_text("a photo of a {c}.\n")
    write_shard(root / "test" / "0.tar", [(GOOD, 3), (LARGE, 0)], image_ext)
    write_shard(root / "test" / "1.tar", [(CORRUPT, 1)], image_ext, first_index=2)
    (root / "test" / "nshards.txt").write_text("2\n")
    write_shard(root / "train" / "0.tar", [(GOOD, 4)] * 5, image_ext)  # never read: the entries are test sets
    (root / "train" / "nshards.txt").write_text("1\n")
    return {"path": str(root)}


MATHVERSE_Q = ("What is the meaning of the highlighted segment?\nChoices:\nA:The turbine's center is 35 meters "
               "above the ground.\nB:The turbine completes a single cycle in 35 seconds.\nC:The length of the "
               "blade is 35 meters.\nD:The turbine has 35 blades.")


# LogicVista's questions as Yijia-Xiao/LogicVista data/dataset.json writes them: no option lines;
# options inline, or drawn in the image with the letters named in the question
LOGICVISTA_IN_IMAGE = "What choice (A, B, C, or D) should be in place of the question mark that fits the pattern?"
LOGICVISTA_INLINE = ("In 1996, total output from all fuels was 200TWh. If output for Nuclear in 2006 was twice that for "
                     "Coal in 1996, what was the output for Nuclear in 2006? Select from A, B, C, and D. (A) 140TWh "
                     "(B) 400TWh (C) 64TWh (D) 96TWh")


LOGICVISTA_SPAN = ("Which option from A-E should replace the question mark to follow the pattern present above the "
                   "separating line? (select from A-E)")


LOGICVISTA_TWO = "Which choices in the image (A-D) belong to the green category?"
LOGICVISTA_DIGITS = "Which is the correct answer according to the image? Select from 1-5"


def logicvista_copy(tmp_path, images, questions, answers) -> dict:
    n = len(questions)
    return save(tmp_path, {"question": questions, "answer": answers, "reasoning": ["because"] * n,
                           "image": images, "skill": [["inductive"]] * n, "id": [f"v1_{i}" for i in range(n)]},
                {"question": datasets.Value("string"), "answer": datasets.Value("string"),
                 "reasoning": datasets.Value("string"), "image": datasets.Image(),
                 "skill": datasets.List(datasets.Value("string")), "id": datasets.Value("string")})


def classification_spec(fields=None, **kw) -> DatasetSpec:
    return DatasetSpec("cls-test", "recognition", "org/cls-test", "accuracy", reader="classification",
                       fields=fields if fields is not None else {"image": "image", "label": "label"}, **kw)
