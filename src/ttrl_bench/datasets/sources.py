"""Readers that turn a registry entry's source into raw samples (image file + label).

Each reader writes the source's images to `raw_dir` and yields dicts with `id`, `split`,
`image_path` and `label`; preprocessing then filters and formats them identically for all.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image

from .preprocessing import CAPTURE_QUESTION, OPTION_LETTERS
from .registry import DIGIT_NAMES, DatasetSpec

log = logging.getLogger(__name__)

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


# ---------------------------------------------------------------------------------------------
# Paper datasets: a Hugging Face dataset (Hub or local copy) -> rows -> samples.


class DatasetSourceError(RuntimeError):
    """A dataset that cannot be read: unreachable Hub, missing local copy, missing column."""


def hub_reachable(timeout: float = 3.0) -> bool:
    """A plain TCP connect to the Hub (or HF_ENDPOINT's mirror): `load_dataset` itself retries for
    ~25 s before failing offline."""
    import os
    import socket
    from urllib.parse import urlparse

    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def hub_usable() -> bool:
    """HF_HUB_OFFLINE=1 (models and datasets come from the Hugging Face cache), or a reachable Hub."""
    import os

    return os.environ.get("HF_HUB_OFFLINE") == "1" or hub_reachable()


# File formats `datasets` loads from data files, in the order a directory is probed for them.
FILE_PATTERNS = {"parquet": ("*.parquet",), "webdataset": ("*.tar",), "json": ("*.jsonl", "*.json"), "csv": ("*.csv",)}
LOCAL_FORMATS = ("hf-disk", *FILE_PATTERNS, "imagefolder")


def _data_files(path: Path, fmt: str) -> list[str]:
    return sorted(str(f) for pattern in FILE_PATTERNS[fmt] for f in path.rglob(pattern) if f.name != "classnames.json")


def _local_format(path: Path) -> str:
    if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists() or (path / "state.json").exists():
        return "hf-disk"
    return next((fmt for fmt in FILE_PATTERNS if _data_files(path, fmt)), "imagefolder")


def _webdataset_shards(spec: DatasetSpec, path: Path) -> list[str] | None:
    """clip-benchmark's layout (CLIP_benchmark webdataset_builder.py / datasets/builder.py
    build_wds_dataset): `<split>/0.tar` ... `<split>/{n-1}.tar` with `<split>/nshards.txt` holding n,
    classnames.txt at the root. Only the entry's split is read (wds_vtab-* ship train/ beside
    test/); every shard nshards.txt names must be there. None: not that layout."""
    split_dir = path / spec.split
    nshards_file = split_dir / "nshards.txt"
    if not nshards_file.exists():  # the split's folder without its count: its shards, in shard order
        shards = sorted(split_dir.glob("*.tar"), key=lambda f: (len(f.stem), f.stem)) if split_dir.is_dir() else []
        return [str(f) for f in shards] or None
    try:
        nshards = int(nshards_file.read_text().strip())
    except ValueError:
        raise DatasetSourceError(f"dataset {spec.name!r}: {nshards_file} does not hold a shard count "
                                 f"({nshards_file.read_text()[:40]!r})") from None
    shards = [split_dir / f"{i}.tar" for i in range(nshards)]
    missing = [str(s) for s in shards if not s.exists()]
    if missing:
        raise DatasetSourceError(f"dataset {spec.name!r}: {nshards_file} says {nshards} shards, but "
                                 f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing "
                                 f"(config `data.sources.{spec.name}.path`)")
    return [str(s) for s in shards]


def _load_local(spec: DatasetSpec, path: Path, fmt: str | None, files: str | None = None):
    import datasets

    key = f"data.sources.{spec.name}.path"
    if not path.exists():
        raise DatasetSourceError(f"dataset {spec.name!r}: local copy {path} (config `{key}`) does not exist")
    if files:  # one file set of a multi-file copy (CRPE's crpe_relation.jsonl, CAPTURe's real_metadata.json)
        matched = sorted(str(f) for f in path.glob(files))
        if not matched:
            raise DatasetSourceError(f"dataset {spec.name!r}: no file {files!r} under {path} (config `{key}`; "
                                     f"another file set: `data.sources.{spec.name}.files`)")
        suffix = "*" + Path(matched[0]).suffix
        fmt = fmt or next((f for f, patterns in FILE_PATTERNS.items() if suffix in patterns), "json")
        return datasets.load_dataset(fmt, data_files={"data": matched}, split="data")
    fmt = fmt or _local_format(path)
    if fmt not in LOCAL_FORMATS:
        raise DatasetSourceError(f"dataset {spec.name!r}: config `data.sources.{spec.name}.format` is {fmt!r}; "
                                 f"known: {', '.join(LOCAL_FORMATS)}")
    if fmt == "hf-disk":
        data = datasets.load_from_disk(str(path))
        if isinstance(data, datasets.DatasetDict):
            if spec.split not in data:
                raise DatasetSourceError(f"dataset {spec.name!r}: {path} has splits {sorted(data)}, "
                                         f"not {spec.split!r}")
            data = data[spec.split]
        return data
    if fmt == "imagefolder":
        # one split whatever the folder is called ("val" would otherwise become "validation")
        return datasets.load_dataset("imagefolder", data_files={"data": str(path / "**")}, split="data")
    files = _webdataset_shards(spec, path) if fmt == "webdataset" else None
    if files is None:
        files = _data_files(path, fmt)
    if not files:
        raise DatasetSourceError(f"dataset {spec.name!r}: no {fmt} files under {path} (config `{key}`)")
    return datasets.load_dataset(fmt, data_files={"data": files}, split="data")


def _load_hub(spec: DatasetSpec):
    import datasets

    if spec.source.startswith("local:"):
        raise DatasetSourceError(f"dataset {spec.name!r} has no Hub copy ({spec.source}); set config "
                                 f"`data.sources.{spec.name}.path` to a local copy")
    if spec.hub_files:  # a repo of plain files that `load_dataset(id, split=...)` cannot read
        raise DatasetSourceError(
            f"dataset {spec.name!r}: the Hub repository {spec.source} holds files, not a `datasets` split "
            f"(load_dataset({spec.source!r}, split={spec.split!r}) stops with 'Unknown split'); download "
            f"{', '.join(spec.hub_files)} from it (e.g. `huggingface-cli download --repo-type dataset "
            f"{spec.source} --local-dir DIR`) and set config `data.sources.{spec.name}.path` to DIR"
            + (f"; {spec.description}" if spec.description else ""))
    if not hub_usable():
        raise DatasetSourceError(
            f"dataset {spec.name!r}: the Hugging Face Hub is unreachable, so {spec.source} (split {spec.split!r}) "
            f"cannot be downloaded; set config `data.sources.{spec.name}.path` to a local copy, or HF_HUB_OFFLINE=1 "
            f"to read a copy already in the Hugging Face cache")
    kwargs = {}
    if spec.source.startswith("clip-benchmark/wds_"):
        # the split's shards only: with one shard, `datasets` would infer the "text" module from
        # <split>/nshards.txt (a tie between one .tar and one .txt goes to ".txt")
        kwargs["data_files"] = {spec.split: f"{spec.split}/*.tar"}
    try:
        return datasets.load_dataset(spec.source, spec.hub_config, split=spec.split, **kwargs)
    except Exception as err:  # the library's own errors vary by version; the cause stays chained
        raise DatasetSourceError(f"dataset {spec.name!r}: loading {spec.source} (config {spec.hub_config!r}, "
                                 f"split {spec.split!r}) failed: {err}; a local copy can be set with config "
                                 f"`data.sources.{spec.name}.path`") from err


def open_source(spec: DatasetSpec, source: dict | None):
    """The rows of a registry entry: the configured local copy if any, else the Hub."""
    source = source or {}
    if source.get("path"):
        return _load_local(spec, Path(source["path"]), source.get("format"), source.get("files"))
    return _load_hub(spec)


def _column(spec: DatasetSpec, data, fields: dict, key: str) -> str:
    column = fields[key]
    candidates = (column, *fields.get(f"{key}_alternatives", ()))
    for name in candidates:
        if name in data.column_names:
            return name
    raise DatasetSourceError(f"dataset {spec.name!r}: the source has no column {column!r} for field {key!r} "
                             f"(columns: {data.column_names}); map it with config "
                             f"`data.sources.{spec.name}.fields.{key}`")


def _undecoded_images(data, column: str):
    """Image columns as raw bytes, so the resolution filter reads headers only and the prepared
    copy is byte-identical to the source (no re-encoding)."""
    import datasets

    feature = data.features[column]
    if isinstance(feature, datasets.Image):
        return data.cast_column(column, datasets.Image(decode=False))
    if isinstance(feature, (datasets.List, datasets.Sequence)) and isinstance(feature.feature, datasets.Image):
        return data.cast_column(column, datasets.List(datasets.Image(decode=False)))
    return data


class ImageFiles:
    """Where a source's relative image paths (CRPE, CAPTURe) are read: the copy's `image_dir`
    (one folder or a list, tried in order; default the copy itself), then `image_zip` inside the
    copy (CAPTURe's real_dataset.zip unextracted: members `dataset/<file>`, found by the path
    under their top folder too)."""

    def __init__(self, root: Path | None, image_dirs=("",), image_zip: str | None = None):
        image_dirs = [image_dirs] if isinstance(image_dirs, str) else list(image_dirs or [""])
        self.dirs = [root / d for d in image_dirs] if root is not None else []
        self.zip = root / image_zip if root is not None and image_zip and (root / image_zip).exists() else None
        self._members: dict[str, str] | None = None

    @classmethod
    def of(cls, source: dict) -> "ImageFiles":
        """The image files of config `data.sources.<name>` (a local copy's `path`, `image_dir`, `image_zip`);
        none for the Hub, whose rows carry their bytes."""
        root = Path(source["path"]) if source.get("path") else None
        return cls(root, source.get("image_dir", ""), source.get("image_zip"))

    def _zip_members(self) -> dict[str, str]:
        if self._members is None:
            import zipfile

            with zipfile.ZipFile(self.zip) as archive:
                names = [n for n in archive.namelist() if not n.endswith("/")]
            self._members = {n.split("/", 1)[1]: n for n in names if "/" in n}  # under the top folder
            self._members.update({n: n for n in names})
        return self._members

    def read(self, name: str) -> bytes:
        if Path(name).is_absolute() or not self.dirs:
            return Path(name).read_bytes()
        for folder in self.dirs:
            if (folder / name).is_file():
                return (folder / name).read_bytes()
        if self.zip is not None and name in self._zip_members():
            import zipfile

            with zipfile.ZipFile(self.zip) as archive:
                return archive.read(self._zip_members()[name])
        where = " nor ".join(str(folder) for folder in self.dirs) + (f" nor {self.zip}" if self.zip else "")
        raise FileNotFoundError(f"image file {name!r} is neither in {where}")


def _image_bytes(value, files: ImageFiles) -> bytes:
    """The image bytes of a row's value; relative paths resolve through `files`."""
    if isinstance(value, list):  # a sequence of images (SEED-Bench): the first is the question's
        value = value[0] if value else None
    if isinstance(value, dict):
        if value.get("bytes"):
            return value["bytes"]
        value = value.get("path")
    if isinstance(value, str) and value:
        return files.read(value)
    raise ValueError("no image")


# Row readers: one source row -> the fields preprocessing needs (task-specific), or None to skip
# (skipped rows are counted under their reason). `f` is the entry's field mapping; its keys in
# NON_COLUMN_FIELDS are settings, not columns.
NON_COLUMN_FIELDS = ("answer_format", "letter_range")
_OPTION_LINE = re.compile(r"^\s*\(?([A-J])\)?\s*[.:)]\s*(.+?)\s*$", re.MULTILINE)


def _letter_answer(answer, options: list[str], answer_format: str = "letter") -> str:
    """Gold as a letter, from the source's answer format (registry field `answer_format`; a digit
    is ambiguous between an index and an option's text, so it is never guessed): "letter" ("B",
    "(B)"), "index" ("1": AI2D) or "text" (the option itself: MathVista)."""
    text = str(answer).strip()
    if answer_format == "letter" and re.fullmatch(r"\(?[A-J]\)?\.?", text) and text.strip("().") in OPTION_LETTERS[: len(options)]:
        return text.strip("().")
    if answer_format == "index" and text.isdigit() and int(text) < len(options):
        return OPTION_LETTERS[int(text)]
    if answer_format == "text" and text in options:
        return OPTION_LETTERS[options.index(text)]
    raise ValueError(f"answer {answer!r} is not a valid {answer_format} for {len(options)} options")


def read_classification(row, f, classes):
    label = row[f["label"]]
    return {"label": classes[label] if isinstance(label, int) else str(label), "classes": classes}


def read_options_list(row, f, classes):
    options = [str(o) for o in (row[f["options"]] or [])]
    if not options:  # free-form question (MathVista "free_form", MathVision without choices)
        return {"question": row[f["question"]], "options": [], "answer": str(row[f["answer"]]).strip()}
    return {"question": row[f["question"]], "options": options,
            "answer": _letter_answer(row[f["answer"]], options, f.get("answer_format", "letter"))}


def read_choice_columns(row, f, classes):
    column, wanted = f.get("keep", (None, None))
    if column and row[column] != wanted:
        return None
    options = [str(row[c]) for c in f["choices"]]
    return {"question": row[f["question"]], "options": options, "answer": _letter_answer(row[f["answer"]], options)}


_INLINE_OPTION = re.compile(r"\(([A-J])\)\s*(.+?)\s*(?=,?\s*\([A-J]\)|$)", re.DOTALL)
# the letters a question names when its options are drawn in the image (LogicVista): "(A, B, C,
# or D)", "A, B, C and D", "(A-D)", "from A-E", "A to E"
_LETTER_LIST = re.compile(r"\b([A-J])((?:\s*,\s*[A-J]\b)+)\s*,?\s*(?:or|and)\s+([A-J])\b")
_LETTER_SPAN = re.compile(r"\b([A-J])\s*(?:-|–|to)\s*([A-J])\b")


def _options_in_question(question: str, letter_range: bool = False) -> list[str]:
    """The options a question text carries: lines "A. x" / "A: x" / "(A) x" (MathVerse,
    RealWorldQA, CRPE), else inline "(A) x (B) y" (LogicVista); with `letter_range` (LogicVista,
    whose options are mostly in the image) else the letters it names, as the options themselves.
    [] when none (free-form)."""
    for found in (_OPTION_LINE.findall(question), _INLINE_OPTION.findall(question)):
        letters = [letter for letter, _ in found]
        if len(found) >= 2 and letters == list(OPTION_LETTERS[: len(letters)]):
            return [text.strip().rstrip(",").strip() for _, text in found]
    if letter_range:
        if match := _LETTER_LIST.search(question):
            letters = [match.group(1), *re.findall(r"[A-J]", match.group(2)), match.group(3)]
        elif match := _LETTER_SPAN.search(question):
            letters = [chr(c) for c in range(ord(match.group(1)), ord(match.group(2)) + 1)]
        else:
            letters = []
        if len(letters) >= 2 and letters == list(OPTION_LETTERS[: len(letters)]):
            return letters
    return []


def read_options_in_text(row, f, classes):
    """MathVerse, RealWorldQA, LogicVista: the question carries its options (see _options_in_question)."""
    question = row[f["question"]]
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"field 'question' (column {f['question']!r}) is empty")
    options = _options_in_question(question, f.get("letter_range", False))
    answer = "" if row[f["answer"]] is None else str(row[f["answer"]]).strip()
    if not answer:
        raise ValueError(f"field 'answer' (column {f['answer']!r}) is empty")
    if re.fullmatch(r"[A-J](\s*,\s*[A-J])+", answer):
        return None  # several correct letters (LogicVista): a one-letter answer cannot score it
    if not options:
        return {"question": question, "options": [], "answer": answer}  # free-form
    return {"question": question, "options": options, "answer": _letter_answer(answer, options)}


def read_yes_no(row, f, classes):
    """MME (TTRV Appendix A): yes/no -> "A. No / B. Yes"."""
    answer = str(row[f["answer"]]).strip().lower()
    if answer not in ("yes", "no"):
        raise ValueError(f"MME answer must be yes or no, got {row[f['answer']]!r}")
    return {"question": row[f["question"]], "options": ["No", "Yes"], "answer": "A" if answer == "no" else "B",
            "category": row[f["category"]]}  # for MME's official score (evaluation.metrics.mme_score)


def read_capture(row, f, classes):
    """CAPTURe (real split): the count is `ground_truth`, the question TTRV's template."""
    return {"question": CAPTURE_QUESTION.format(object=row[f["object"]]), "answer": int(row[f["answer"]])}


def read_count_question(row, f, classes):
    """CountBench: a question ("How many dogs are in the image?") and a number; the query is the noun."""
    question = row[f["question"]]
    noun = re.search(r"how many (.+?)(?: are| is| can| do|\?|$)", question, re.IGNORECASE)
    return {"question": question, "answer": int(row[f["answer"]]), "query": noun.group(1) if noun else question}


def read_count_text(row, f, classes):
    """VisionReasoner's counting copies: the query as its `text` column gives it and the `count`
    (evaluation/evaluation_count.py:56-64); no points."""
    return {"query": row[f["query"]], "answer": int(row[f["count"]])}


def read_count_points(row, f, classes):
    """PixMo-Count: an object label, a count and one point per object (none in the eval splits' rows)."""
    points = row[f["points"]] or []
    if isinstance(points, dict):  # the card's `sequence: [x, y]`: `datasets` loads a dict of lists
        points = [{"x": x, "y": y} for x, y in zip(points.get("x") or [], points.get("y") or [], strict=True)]
    points = [[float(p["x"]), float(p["y"])] for p in points]
    return {"query": row[f["query"]], "answer": int(row[f["count"]]), "points": points}


_IMAGE_TAG = re.compile(r"<image\d*>")
_ANSWER_TAGS = re.compile(r"^\s*<answer>(.*?)</answer>\s*$", re.DOTALL)
_LETTERS_ANSWER = re.compile(r"^\(?([A-J])\)?\.?$|^[A-J](?:\s*,\s*[A-J])+$")


def _math_gold(row, f, options: list[str]) -> str:
    """The gold of a math row: the answer as written (free-form), or its option letter(s), sorted
    and comma-joined when several are correct (LogicVista "A, C" -> "A,C")."""
    value = row[f["answer"]]
    answer = "" if value is None else str(value).strip()
    if match := _ANSWER_TAGS.match(answer):  # R1-V's GeoQA: "<answer> 145° </answer>"
        answer = match.group(1).strip()
    if not answer:
        raise ValueError(f"field 'answer' (column {f['answer']!r}) is empty")
    if not options:
        return answer
    if _LETTERS_ANSWER.match(answer):
        letters = sorted(set(re.findall(r"[A-J]", answer)))
        if all(letter in OPTION_LETTERS[: len(options)] for letter in letters):
            return ",".join(letters)
    if f.get("answer_format") == "text" and answer in options:
        return OPTION_LETTERS[options.index(answer)]
    raise ValueError(f"field 'answer' (column {f['answer']!r}): {answer!r} is no option letter "
                     f"(A-{OPTION_LETTERS[len(options) - 1]})" + (" nor one of the options" if f.get("answer_format") == "text" else ""))


def _math_question(row, f) -> str:
    question = row[f["question"]]
    if not isinstance(question, str):
        raise ValueError(f"field 'question' (column {f['question']!r}) is {type(question).__name__}, not text")
    # ECHO's save_as_json.py drops "<image1>" tags; EasyR1's "<image>" is the image itself, which
    # the chat template places before the text
    return _IMAGE_TAG.sub("", question).strip()


def read_math(row, f, classes):
    """ECHO's sets with the options in a list column (MathVision `options`, MathVista `choices`) or
    none (Geometry3k, GeoQA, free-form questions): the prompt lists the choices."""
    options = [str(o) for o in (row[f["options"]] or [])] if "options" in f else []
    return {"question": _math_question(row, f), "options": options, "answer": _math_gold(row, f, options),
            "list_options": True}


def read_math_options_in_text(row, f, classes):
    """ECHO's sets whose question already carries the options (MathVerse `question_for_eval`,
    LogicVista; see _options_in_question); without them the question is free-form."""
    question = _math_question(row, f)
    if not question:
        raise ValueError(f"field 'question' (column {f['question']!r}) is empty")
    options = _options_in_question(question, f.get("letter_range", False))
    return {"question": question, "options": options, "answer": _math_gold(row, f, options), "list_options": False}


def _rle(mask):
    from pycocotools import mask as mask_utils

    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode()}


def _box_of(mask) -> list[int]:
    ys, xs = np.nonzero(mask)
    return [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]


def read_refer(row, f, classes, size):
    """RefCOCO(+/g) in lmms-lab's layout: COCO box [x, y, w, h] and polygon(s); one sample per
    referring expression. Masks are COCO RLE (pycocotools), in original pixels."""
    from pycocotools import mask as mask_utils

    width, height = size
    x, y, w, h = (float(v) for v in row[f["bbox"]])
    polygons = row[f["segmentation"]]
    polygons = [polygons] if polygons and not isinstance(polygons[0], list) else polygons
    mask = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects([list(map(float, p)) for p in polygons],
                                                                     height, width)))
    expressions = row[f["expressions"]]
    expressions = [expressions] if isinstance(expressions, str) else list(expressions)
    box = [x, y, x + w, y + h]
    return [{"query": e, "boxes": [box], "points": [[x + w / 2, y + h / 2]], "mask": _rle(mask)} for e in expressions]


def read_mask(row, f, classes, size):
    """ReasonSeg (Seg-Zero's layout): a query and a binary mask; the box is the mask's extent, or the
    row's `bbox` where the entry maps one (VisionReasoner's RefCOCO copies: [x1, y1, x2, y2], as its
    evaluation_segmentation.py `compute_bbox_iou` reads it)."""
    mask = np.asarray(row[f["mask"]], dtype=bool)
    if mask.shape != (size[1], size[0]):
        raise ValueError(f"mask shape {mask.shape} does not match the image ({size[1]}, {size[0]})")
    box = [float(v) for v in row[f["bbox"]]] if "bbox" in f else _box_of(mask)
    if len(box) != 4:
        raise ValueError(f"field 'bbox' (column {f['bbox']!r}) has {len(box)} numbers, not 4")
    return [{"query": row[f["query"]], "boxes": [box], "points": [[(box[0] + box[2]) / 2, (box[1] + box[3]) / 2]],
             "mask": _rle(mask)}]


ROW_READERS = {
    "classification": read_classification,
    "options_list": read_options_list,
    "choice_columns": read_choice_columns,
    "options_in_text": read_options_in_text,
    "yes_no": read_yes_no,
    "count_question": read_count_question,
    "capture": read_capture,
    "count_points": read_count_points,
    "count_text": read_count_text,
    "math": read_math,
    "math_options_in_text": read_math_options_in_text,
}
GEOMETRY_READERS = {"refer": read_refer, "mask": read_mask}  # these need the image size


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]


def _class_names(spec: DatasetSpec, data, source: dict, label_column: str) -> list[str]:
    """ClassLabel names, or a classnames.txt beside the data (clip-benchmark), or a configured
    file (one name per line in label order, or a JSON {folder name: class name})."""
    import datasets

    configured = source.get("class_names")
    names = data.features[label_column].names if isinstance(data.features[label_column], datasets.ClassLabel) else None
    if configured:
        path = Path(configured)
        if not path.exists():
            raise DatasetSourceError(f"dataset {spec.name!r}: config `data.sources.{spec.name}.class_names` "
                                     f"file {path} does not exist")
        if path.suffix == ".json":
            mapping = json.loads(path.read_text())
            return [mapping.get(n, n) for n in names] if names else list(mapping.values())
        return _lines(path)
    if names:
        return [n.replace("_", " ") for n in names]  # Food101's "apple_pie" -> "apple pie"
    local = Path(source["path"]) / "classnames.txt" if source.get("path") else None
    if local and local.exists():
        return _lines(local)
    if spec.source.startswith("clip-benchmark/") and not source.get("path"):
        from huggingface_hub import hf_hub_download

        return _lines(hf_hub_download(spec.source, "classnames.txt", repo_type="dataset"))
    raise DatasetSourceError(f"dataset {spec.name!r}: no class names (no ClassLabel, no classnames.txt); set "
                             f"config `data.sources.{spec.name}.class_names`")


def read_hf_source(spec: DatasetSpec, raw_dir: Path, source: dict | None) -> Iterator[dict]:
    """Samples of a Hub or local dataset: the image's original bytes written under `raw_dir`,
    plus the fields of the entry's row reader. A row that cannot be read (bad answer, missing
    image) yields a sample with `skip` set to the reason, so it is counted, never lost silently."""
    from PIL import Image

    source = source or {}
    if source.get("path"):  # the registry's defaults for a local copy (files, image_dir), then config's
        source = {**spec.local, **source}
    fields = {**spec.fields, **source.get("fields", {})}
    data = open_source(spec, source)
    image_column = _column(spec, data, fields, "image")
    for key, column in list(fields.items()):  # every mapped column must exist: fail before any row
        if key in ("image", "id", *NON_COLUMN_FIELDS) or key.endswith("_alternatives"):
            continue
        if f"{key}_alternatives" in fields:  # the first of the column and its alternatives the source has
            fields[key] = _column(spec, data, fields, key)
            continue
        for name in column[:1] if key == "keep" else column if isinstance(column, tuple) else (column,):
            _column(spec, data, {key: name}, key)
    data = _undecoded_images(data, image_column)
    classes = None
    if spec.reader == "classification":
        classes = tuple(_class_names(spec, data, source, _column(spec, data, fields, "label")))
    # relative image paths (CRPE, CAPTURe) resolve under the copy, its `image_dir`(s) or `image_zip`
    files = ImageFiles.of(source)
    raw_dir.mkdir(parents=True, exist_ok=True)
    where = source.get("path") or f"{spec.source} (split {spec.split!r})"  # named in every row warning
    for index, row in enumerate(data):
        sample_id = f"{spec.name}-{index:06d}"
        base_sample = {"id": sample_id, "split": spec.manifest_split,
                       "source_id": str(row.get(fields.get("id", ""), index))}
        try:
            blob = _image_bytes(row[image_column], files)
        except (ValueError, OSError) as err:
            log.warning("%s: %s row %d (sample %s): %s", spec.name, where, index, sample_id, err)
            yield {**base_sample, "image_path": raw_dir / f"{sample_id}.missing", "skip": "no_image"}
            continue
        path = raw_dir / f"{sample_id}.img"
        path.write_bytes(blob)  # always: RealWorldQA's resize rewrites the file in place
        try:
            if spec.reader in GEOMETRY_READERS:
                try:
                    with Image.open(path) as im:
                        size = im.size
                except (OSError, Image.DecompressionBombError):  # counted by the resolution filter
                    yield {**base_sample, "image_path": path, "query": ""}
                    continue
                for j, fields_j in enumerate(GEOMETRY_READERS[spec.reader](row, fields, classes, size)):
                    yield {**base_sample, "id": f"{sample_id}-{j}", "image_path": path, **fields_j}
            else:
                read = ROW_READERS[spec.reader](row, fields, classes)
                if read is None:
                    yield {**base_sample, "image_path": path, "skip": "not_applicable"}
                else:
                    yield {**base_sample, "image_path": path, **read}
        except (ValueError, KeyError, TypeError, IndexError, OSError) as err:
            log.warning("%s: %s row %d (sample %s): %s", spec.name, where, index, sample_id, err)
            yield {**base_sample, "image_path": path, "skip": "bad_row"}


def read_source(spec: DatasetSpec, raw_dir: Path, source: dict | None = None) -> Iterator[dict]:
    if spec.source == "bundled:sklearn.datasets.load_digits":
        return read_digits(raw_dir)
    if spec.source == "bundled:sklearn.datasets.load_digits:scenes":
        return read_digit_scenes(raw_dir)
    return read_hf_source(spec, raw_dir, source)
