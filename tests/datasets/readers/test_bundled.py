"""Issue 39: the bundled demo sets' readers (datasets/readers/bundled.py), checked against scikit-learn's
digits themselves: ids, splits, labels, the pixels written, the scenes' boxes and points. Every expected value is
read from `sklearn.datasets.load_digits()` or worked out by hand in the docstring."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_digits

from ttrl_bench.datasets.readers.bundled import read_digit_scenes, read_digits
from ttrl_bench.datasets.registry import DIGIT_NAMES

DIGITS = load_digits()


@pytest.fixture
def digits(tmp_path):
    raw = tmp_path / "digits" / "raw"  # two levels not yet made: parents=True
    return raw, list(read_digits(raw))


@pytest.fixture
def scenes(tmp_path):
    raw = tmp_path / "scenes" / "raw"
    return raw, list(read_digit_scenes(raw))


def test_digits_are_sklearns_1797_split_1200_train_then_597_test(digits):
    """One row per sklearn digit, in its order: ids digits-0000 .. digits-1796, the first 1,200 train and the
    rest test (indices 1199 and 1200 on either side), labels the names of sklearn's targets (target[0..2] =
    0, 1, 2; target[1200] = 7; target[1796] = 8)."""
    raw, rows = digits
    assert len(rows) == 1797 and [r["id"] for r in rows[:2]] == ["digits-0000", "digits-0001"]
    assert rows[-1]["id"] == "digits-1796"
    assert [r["split"] for r in rows[1199:1201]] == ["train", "test"]
    assert sum(r["split"] == "train" for r in rows) == 1200 and rows[-1]["split"] == "test"
    assert [r["label"] for r in rows[:3]] == ["zero", "one", "two"]
    assert (rows[1200]["label"], rows[1796]["label"]) == ("seven", "eight")
    assert all(r["label"] == DIGIT_NAMES[int(t)] for r, t in zip(rows, DIGITS.target))
    assert rows[5]["image_path"] == raw / "0005.png" and set(rows[0]) == {"id", "split", "image_path", "label"}


def test_a_digit_is_written_as_dark_ink_on_white_56_px_rgb(digits):
    """Digit 0's first pixel row is 0, 0, 5, 13, 9, 1, 0, 0 (ink 0..16): grey 255 - ink * 255 / 16, truncated
    to uint8: 255, 255, 175 (255 - 79.69), 47 (255 - 207.19), 111 (255 - 143.44), 239 (255 - 15.94). Each 8 px
    pixel becomes a 7 x 7 block (nearest), so the image is 56 x 56 RGB and pixels x = 14..20 of rows 0..6 are
    175."""
    raw, rows = digits
    with Image.open(rows[0]["image_path"]) as image:
        assert (image.mode, image.size) == ("RGB", (56, 56))
        assert [image.getpixel((7 * c, 0))[0] for c in range(6)] == [255, 255, 175, 47, 111, 239]
        assert {image.getpixel((x, y)) for x in range(14, 21) for y in range(7)} == {(175, 175, 175)}
        assert image.getpixel((21, 0)) == (47, 47, 47)
    # digit 1's pixel (row 1, column 4) is full ink 16: 255 - 16 * 255 / 16 = 0, black (x 28..34, y 7..13)
    with Image.open(rows[1]["image_path"]) as image:
        assert image.getpixel((28, 7)) == image.getpixel((34, 13)) == (0, 0, 0)


def test_an_image_already_written_is_kept(tmp_path):
    """A raw directory prepared before is reused: a file already at 0000.png is not rewritten (its bytes stay),
    while the next digit's file is written."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "0000.png").write_bytes(b"kept")
    rows = read_digits(raw)
    next(rows), next(rows)
    assert (raw / "0000.png").read_bytes() == b"kept" and (raw / "0001.png").stat().st_size > 0


def _tile(index: int) -> np.ndarray:
    """sklearn digit `index` as read_digit_scenes pastes it: 8 px -> 28 px, nearest (28 / 8 = 3.5 px a pixel)."""
    gray = np.uint8(255 - DIGITS.images[index] * (255 / 16))
    return np.asarray(Image.fromarray(gray, mode="L").resize((28, 28), Image.Resampling.NEAREST))


def test_scenes_are_600_train_then_120_test_with_one_box_on_the_28_px_grid(scenes):
    """720 scenes, scene-0000 .. scene-0719, 600 train then 120 test (SCENES_PER_SPLIT); each has one box, a
    cell of the 4 x 4 grid of 28 px cells ([28c, 28r, 28c + 28, 28r + 28]), its point the cell's centre
    (+14, +14), and a query naming its label."""
    raw, rows = scenes
    assert len(rows) == 720 and (rows[0]["id"], rows[-1]["id"]) == ("scene-0000", "scene-0719")
    assert [r["split"] for r in rows[599:601]] == ["train", "test"] and sum(r["split"] == "test" for r in rows) == 120
    for r in rows:
        [box], [point] = r["boxes"], r["points"]
        assert box[0] % 28 == 0 and box[1] % 28 == 0 and box[2:] == [box[0] + 28, box[1] + 28]
        assert 0 <= box[0] <= 84 and 0 <= box[1] <= 84 and point == [box[0] + 14, box[1] + 14]
        assert all(type(v) is int for v in box + point)  # pixel coordinates, written to the manifest as ints
        assert r["query"] == f"the digit {r['label']}" and r["label"] in DIGIT_NAMES
        assert r["image_path"] == raw / f"{r['id']}.png"


def test_each_scene_shows_two_or_three_distinct_digits_of_its_split_and_the_box_holds_the_label(scenes):
    """The image is 112 x 112 RGB on white. Cells with ink are the scene's 2 or 3 digits; each inked cell is
    exactly some sklearn digit's tile from the scene's split (train scenes: digits 0..1199, test: 1200..1796),
    of pairwise distinct classes, and the box's cell is a digit of the row's label. Checked on the first 6
    train and the first 6 test scenes (a search over the split's digits per cell)."""
    _, rows = scenes
    tiles = {i: _tile(i) for i in range(len(DIGITS.target))}
    counts = []
    for r in rows[:6] + rows[600:606]:
        pool = range(1200) if r["split"] == "train" else range(1200, 1797)
        with Image.open(r["image_path"]) as image:
            assert (image.mode, image.size) == ("RGB", (112, 112))
            grey = np.asarray(image.convert("L"))
        classes, label_at = [], {}
        for row in range(4):
            for col in range(4):
                cell = grey[28 * row:28 * row + 28, 28 * col:28 * col + 28]
                if cell.min() == 255:
                    continue
                matches = {int(DIGITS.target[i]) for i in pool if np.array_equal(tiles[i], cell)}
                assert len(matches) == 1, (r["id"], row, col)
                classes.append(matches.pop())
                label_at[(28 * col, 28 * row)] = DIGIT_NAMES[classes[-1]]
        assert len(classes) in (2, 3) and len(set(classes)) == len(classes)
        assert label_at[tuple(r["boxes"][0][:2])] == r["label"]
        counts.append(len(classes))
    assert set(counts) == {2, 3}  # 2 or 3 objects a scene (rng.integers(2, 4)): both among 12 scenes


def test_scenes_are_the_same_on_every_call(tmp_path, scenes):
    """The scenes are data, drawn from a fixed generator whatever the run's seed: a second build into another
    directory gives the same rows (labels, boxes, points) and the same pixels; a third into that same, existing
    directory too (its images kept)."""
    _, rows = scenes
    again = list(read_digit_scenes(tmp_path / "again"))
    assert list(read_digit_scenes(tmp_path / "again")) == again
    strip = lambda rs: [{k: v for k, v in r.items() if k != "image_path"} for r in rs]  # noqa: E731
    assert strip(again) == strip(rows)
    for a, b in zip(again[::97], rows[::97]):
        assert a["image_path"].read_bytes() == b["image_path"].read_bytes()
