"""The bundled demo sets, built from scikit-learn's digits (no download): `read_digits` (digit
recognition) and `read_digit_scenes` (grounding scenes with known boxes).

Each reader writes the set's images to `raw_dir` and yields dicts with `id`, `split`, `image_path`
and `label`, as datasets/sources.py's readers of Hub and local sources do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image

from ..registry import DIGIT_NAMES

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


# Digit scenes: a 112 px canvas (8 x 8 patches of 14 px: 16 image tokens after 2x2 merging) on a
# 4 x 4 grid of 28 px cells; 2 or 3 distinct digits, one of them the query.
SCENE_SIDE, SCENE_CELL, SCENES_PER_SPLIT = 112, 28, {"train": 600, "test": 120}

# Test split sizes known before preparation (the dry run checks sample counts against them):
# scikit-learn's digits are 1,797 images.
BUNDLED_TEST_SIZES = {"demo-digits": 1797 - DIGITS_TRAIN_SIZE, "demo-digit-scenes": SCENES_PER_SPLIT["test"]}


def read_digit_scenes(raw_dir: Path) -> Iterator[dict]:
    """Grounding scenes made of real handwritten digits with known boxes (the demo's stand-in
    for RefCOCO: "find the digit seven" -> one box and one point, original pixel coordinates)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    raw_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(12345)  # the scenes are data: fixed, whatever the run's seed
    cells = [(r, c) for r in range(SCENE_SIDE // SCENE_CELL) for c in range(SCENE_SIDE // SCENE_CELL)]
    index = 0
    for split, count in SCENES_PER_SPLIT.items():
        # train scenes use digits of the recognition train split, test scenes the test split
        pool = np.arange(DIGITS_TRAIN_SIZE) if split == "train" else np.arange(DIGITS_TRAIN_SIZE, len(digits.target))
        for _ in range(count):
            n_objects = int(rng.integers(2, 4))
            picks = rng.choice(pool, size=20, replace=False)
            chosen, classes = [], set()
            for pick in picks:  # distinct classes, so the query names exactly one object
                if digits.target[pick] not in classes:
                    chosen.append(int(pick))
                    classes.add(digits.target[pick])
                if len(chosen) == n_objects:
                    break
            places = rng.choice(len(cells), size=n_objects, replace=False)
            canvas = Image.new("RGB", (SCENE_SIDE, SCENE_SIDE), "white")
            boxes = []
            for pick, place in zip(chosen, places):
                gray = np.uint8(255 - digits.images[pick] * (255 / 16))
                tile = Image.fromarray(gray, mode="L").convert("RGB").resize((SCENE_CELL, SCENE_CELL), Image.Resampling.NEAREST)
                row, col = cells[place]
                canvas.paste(tile, (col * SCENE_CELL, row * SCENE_CELL))
                boxes.append([col * SCENE_CELL, row * SCENE_CELL, (col + 1) * SCENE_CELL, (row + 1) * SCENE_CELL])
            target = int(rng.integers(n_objects))
            path = raw_dir / f"scene-{index:04d}.png"
            if not path.exists():
                canvas.save(path)
            box = boxes[target]
            yield {
                "id": f"scene-{index:04d}",
                "split": split,
                "image_path": path,
                "label": DIGIT_NAMES[int(digits.target[chosen[target]])],
                "query": f"the digit {DIGIT_NAMES[int(digits.target[chosen[target]])]}",
                "boxes": [box],
                "points": [[(box[0] + box[2]) // 2, (box[1] + box[3]) // 2]],
            }
            index += 1
