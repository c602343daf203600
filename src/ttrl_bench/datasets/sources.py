"""Readers that turn a registry entry's source into raw samples (image file + label).

Each reader writes the source's images to `raw_dir` and yields dicts with `id`, `split`,
`image_path` and `label`; preprocessing then filters and formats them identically for all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image

from .registry import DIGIT_NAMES, DatasetSpec

# The demo's split: the first 1,200 digits train the warm start, the other 597 are the test set.
DIGITS_TRAIN_SIZE = 1200
DIGITS_UPSCALE = 7  # 8 px -> 56 px: four 14-px patches a side for the Qwen2.5-VL vision tower


def read_digits(raw_dir: Path) -> Iterator[dict]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    raw_dir.mkdir(parents=True, exist_ok=True)
    for index, (pixels, target) in enumerate(zip(digits.images, digits.target)):
        path = raw_dir / f"{index:04d}.png"
        if not path.exists():
            gray = np.uint8(255 - pixels * (255 / 16))  # 0..16 ink -> dark ink on white paper
            image = Image.fromarray(gray, mode="L").convert("RGB")
            side = 8 * DIGITS_UPSCALE
            image.resize((side, side), Image.Resampling.NEAREST).save(path, optimize=False)
        yield {
            "id": f"digits-{index:04d}",
            "split": "train" if index < DIGITS_TRAIN_SIZE else "test",
            "image_path": path,
            "label": DIGIT_NAMES[int(target)],
        }


def read_source(spec: DatasetSpec, raw_dir: Path) -> Iterator[dict]:
    if spec.source == "bundled:sklearn.datasets.load_digits":
        return read_digits(raw_dir)
    raise NotImplementedError(f"dataset {spec.name!r}: no reader for source {spec.source!r} yet")
