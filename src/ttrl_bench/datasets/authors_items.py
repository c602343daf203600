"""The TTRV authors' own items: the test items and adaptation samples behind TTRV's published cells.

TTRV: Test-Time Reinforcement Learning for Vision Language Models (arXiv 2510.06783). Its authors ship
them in their repository (Akshit21112002/TTRV @b9cf778, `verl/data/<set>_<n>/{test,train}.json`, MIT
licence): each item is the full prompt with the options already drawn, the answer, an id and the
image's path on their machine. A rerun that is to be compared with a published cell scores these
items, not options we draw ourselves (config `data.items: authors`).

The lists are data (`data/ttrv_items/`, xz-compressed, the authors' bytes unchanged, their MIT notice
beside them; `index.json` names each file's path and git blob id at the pinned commit). Four test
lists over 4 MB are absent from the mirror we copy from (ImageNet, -R, -Sketch, -V2): `ttrl-bench
fetch` downloads them from the pinned commit and checks each against its git blob id.

Images are found from the item's original path, per set (`LOCATORS`): in a local copy of the dataset
in its official layout (the path's last components), or in the Hub rows that carry the file name or
the question. A missing image or item stops preparation with its id, path and a count; nothing is
replaced by another item.
"""

from __future__ import annotations

import hashlib
import json
import logging
import lzma
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .preprocessing import OPTION_LETTERS, decode_verdict, resize_square

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).parent / "data" / "ttrv_items"
INDEX = json.loads((DATA_DIR / "index.json").read_text())
TTRV_REPOSITORY, TTRV_COMMIT = INDEX["repository"], INDEX["commit"]
ITEM_SOURCE = "ttrv-authors"  # the manifest's `item_source` for these rows ("ours" for our own conversion)
AUTHORS_ROOT = "/home/anirban/kanksha1/"  # where the authors' image paths start
_IMAGE_TOKEN = "<image>"


class AuthorsItemsError(ValueError):
    """An item list or an item's image that cannot be had; the message names the item and the fix."""


@dataclass(frozen=True)
class Locator:
    """How an item's original path finds its image.

    "file": the path's last `tail` components under a local copy (config `data.sources.<name>.path`)
    in the dataset's official layout, `layout`. "hub-key": the source row (Hub or a local copy of it)
    whose `column` equals the path's last `tail` components. "hub-question": the source row with the
    item's options whose question the item's prompt contains (the authors renamed these files).
    "hub-row": the row whose index is the file name's number, its question checked the same way.
    """

    kind: str
    tail: int = 1
    column: str = ""
    layout: str = ""
    suffix: str = ""  # "hub-key": an extension the authors added to the file name, dropped from both keys


# Our dataset name -> how its items' images are found. The layouts are the official releases' (the
# authors' paths end in them); the Hub columns are the registry entries' sources.
LOCATORS = {
    "dtd": Locator("file", 3, layout="images/<class>/<class>_<nnnn>.jpg (the DTD release, dtd-r1.0.1.tar.gz: folder dtd/)"),
    "resisc45": Locator("file", 2, layout="<class>/<class>_<nnn>.jpg (the NWPU-RESISC45 release)"),
    "imagenet": Locator("file", 2, layout="<wnid>/ILSVRC2012_val_<nnnnnnnn>.JPEG (ILSVRC2012 val sorted into class folders)"),
    "imagenet-a": Locator("file", 2, layout="<wnid>/<file>.jpg (imagenet-a.tar: folder imagenet-a/)"),
    "imagenet-r": Locator("file", 2, layout="<wnid>/<file>.jpg (imagenet-r.tar: folder imagenet-r/)"),
    "imagenet-sketch": Locator("file", 2, layout="<wnid>/sketch_<n>.JPEG (ImageNet-Sketch: folder sketch/)"),
    "imagenet-v2": Locator("file", 2, layout="<class index>/<sha1>.jpeg (imagenetv2-matched-frequency.tar.gz: "
                                            "folder imagenetv2-matched-frequency-format-val/)"),
    "mathverse": Locator("file", 3, layout="images/images_version_<v>/image_<n>.png (MathVerse's images.zip)"),
    # testmini's `image` is "images/<pid>.jpg" for all 1,000 rows (lupantech/MathVista data/testmini.json); all
    # 490 items match testmini's question and answer letter
    "mathvista": Locator("hub-key", 2, column="image"),
    # question_id is the release path without images/: "code_reasoning/0020.png" (lmms-eval tasks/mme/utils.py)
    "mme": Locator("hub-key", 2, column="question_id"),
    # SEED-Bench-image/<data_id>.jpeg: the release's file names are the bare data_id ("1454426_2591111986"; its
    # SEED-Bench-image.zip), the authors added ".jpeg"; lmms-eval's copy keys its rows by data_id. Not by question
    # and options: their list holds different images asked the same question with the same options.
    "seed-bench": Locator("hub-key", 1, column="data_id", suffix=".jpeg"),
    # images_<k>/image_<i>.jpg: row (k-1) * 1544 + i of the Hub's two parquet halves, which no column names;
    # matched by question and options instead
    "ai2d": Locator("hub-question"),
    # images/<n>.png is row n of 765 (every prompt is "<image> \n" + row n's question); the last item's id is 765
    "realworldqa": Locator("hub-row"),
}

# (adaptation samples, sampling strategy) of a config -> the authors' list of that run (TTRV Appendix A's
# 20; Table 9's 500; Table 4's biased 4-class draw; Table 6's single sample, which their file repeats
# four times, once per GPU: one distinct item).
ADAPTATION_LISTS = {(20, "random"): "adapt-20", (500, "random"): "adapt-500", (20, "biased-4"): "adapt-biased-20",
                    (1, "random"): "adapt-single"}


def has_authors_items(dataset: str) -> bool:
    return dataset in INDEX["datasets"]


def adaptation_list(dataset: str, n, sampling: str) -> str:
    """The authors' list for `n` samples drawn by `sampling`, or an error naming the lists they ship."""
    name = ADAPTATION_LISTS.get((n, sampling))
    lists = INDEX["datasets"][dataset]["lists"]
    if name not in lists:
        shipped = [f"{k[0]} ({k[1]})" for k, v in ADAPTATION_LISTS.items() if v in lists]
        raise AuthorsItemsError(
            f"dataset {dataset!r}: the TTRV authors ship no list of {n} adaptation samples drawn {sampling!r}; they ship "
            f"{', '.join(shipped)} (config adaptation.n_samples / sampling, or data.items: ours to draw our own)")
    return name


def cache_dir() -> Path:
    """Where `ttrl-bench fetch` keeps the lists too large to ship: TTRL_BENCH_CACHE, else ~/.cache/ttrl-bench."""
    return Path(os.environ.get("TTRL_BENCH_CACHE") or Path.home() / ".cache" / "ttrl-bench") / "ttrv_items"


def git_blob_id(data: bytes) -> str:
    """git's object id of a file's bytes (sha1 of "blob <size>\\0" + bytes): what the authors' tree names."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _raw_url(path: str) -> str:
    return f"https://raw.githubusercontent.com/{TTRV_REPOSITORY}/{TTRV_COMMIT}/{path}"


def list_path(dataset: str, name: str) -> Path:
    entry = INDEX["datasets"][dataset]["lists"][name]
    return DATA_DIR / entry["file"] if "file" in entry else cache_dir() / f"{dataset}.{name}.json"


def missing_lists(datasets: list[str]) -> list[str]:
    """The unshipped test lists of these datasets not yet fetched into the cache."""
    return [d for d in datasets if has_authors_items(d) and not list_path(d, "test").exists()]


def fetch_list(dataset: str, name: str = "test") -> Path:
    """Download an unshipped list from the pinned commit into the cache, checked against its git blob id."""
    import urllib.request

    entry, path = INDEX["datasets"][dataset]["lists"][name], list_path(dataset, name)
    if path.exists():
        return path
    log.info("fetching the TTRV authors' %s list of %s: %s", name, dataset, _raw_url(entry["authors_path"]))
    with urllib.request.urlopen(_raw_url(entry["authors_path"]), timeout=30) as response:
        data = response.read()
    if git_blob_id(data) != entry["git_blob"]:
        raise AuthorsItemsError(f"{_raw_url(entry['authors_path'])}: the download's git blob id is {git_blob_id(data)}, "
                                f"not {entry['git_blob']} as in {TTRV_REPOSITORY} @{TTRV_COMMIT}; nothing was kept")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".part").write_bytes(data)
    path.with_suffix(".part").rename(path)
    return path


def load_list(dataset: str, name: str) -> list[dict]:
    """One of the authors' lists, checked against its git blob id at the pinned commit."""
    entry, path = INDEX["datasets"][dataset]["lists"][name], list_path(dataset, name)
    if not path.exists() and os.environ.get("HF_HUB_OFFLINE") != "1":
        try:
            fetch_list(dataset, name)
        except OSError as err:  # no network here: the message below says what to do
            log.warning("fetching %s failed: %s", _raw_url(entry["authors_path"]), err)
    if not path.exists():
        raise AuthorsItemsError(f"dataset {dataset!r}: the TTRV authors' {name} list ({entry['authors_path']}, over 4 MB, "
                                f"not shipped) is not in {path.parent}; run `ttrl-bench fetch CONFIG` on a machine "
                                f"with internet that shares TTRL_BENCH_CACHE")
    data = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
    if git_blob_id(data) != entry["git_blob"]:
        raise AuthorsItemsError(f"{path}: git blob id {git_blob_id(data)}, not the authors' {entry['git_blob']} "
                                f"({entry['authors_path']} @{TTRV_COMMIT}); delete it and fetch again")
    return json.loads(data)


# --- one item -> manifest fields ------------------------------------------------------------------

_OPTION_LINE = re.compile(r"^\s*(?:\(([A-J])\)|([A-J])\s*[.:])\s*(.*?)\s*$", re.MULTILINE)


def item_text(prompt: str) -> str:
    """The text our template puts after the image: the authors' prompt without its "<image>" token."""
    return prompt.replace(_IMAGE_TOKEN, "", 1).strip()


def item_options(prompt: str) -> list[str]:
    """The options as the prompt lists them ("A. x", "A:x", "(A) x"; MME's "B. Yes." keeps no period)."""
    lines = [(paren or plain, text) for paren, plain, text in _OPTION_LINE.findall(prompt)]
    start = max((i for i, (letter, _) in enumerate(lines) if letter == "A"), default=None)
    if start is None:
        return []
    options = []
    for letter, text in lines[start:]:
        if letter != OPTION_LETTERS[len(options)]:
            break
        options.append(text.rstrip(".") if text.endswith(".") and not text.endswith("..") else text)
    return options


def authors_texts(samples: pd.DataFrame) -> list[str]:
    """The text after the image as the authors' template receives it (protocol `authors`): their item's
    prompt after "<image>", verbatim (" \\n Look at ..."); for an item of ours, our prompt after the
    " \\n" every one of their items starts with. verl splits the prompt at "<image>" into the image and
    this text (their rl_dataset.py `_build_messages`), as TRL puts the image before the user text."""
    theirs = samples["authors_prompt"] if "authors_prompt" in samples else [None] * len(samples)
    return [p.split(_IMAGE_TOKEN, 1)[1] if isinstance(p, str) and _IMAGE_TOKEN in p else " \n" + ours
            for p, ours in zip(theirs, samples["prompt"])]


def relative_path(image_path: str) -> str:
    """The authors' path without their home folder: "dtd/images/bumpy/bumpy_0092.jpg"."""
    return image_path.removeprefix(AUTHORS_ROOT)


def path_tail(image_path: str, tail: int) -> str:
    return "/".join(Path(image_path).parts[-tail:])


def _manifest_row(dataset: str, split: str, item: dict, image: str) -> dict:
    prompt, answer = str(item["prompt"]), str(item["answer"]).strip()
    options = item_options(prompt)
    row = {"id": f"{dataset}-{split}-{item['id']}" if split != "test" else f"{dataset}-{item['id']}", "split": split,
           "image": image, "source_id": relative_path(item["image_path"]), "item_id": str(item["id"]),
           "item_source": ITEM_SOURCE, "authors_prompt": prompt, "prompt": item_text(prompt), "options": options,
           "answer": answer}
    if dataset == "mme":  # MME's official score pairs the two questions of an image by category
        row["category"] = Path(item["image_path"]).parent.name
    if answer and answer in OPTION_LETTERS[: len(options)]:
        row["label"] = options[OPTION_LETTERS.index(answer)]
    return row


# --- images ------------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def _image_key(dataset: str, item: dict) -> str:
    locator = LOCATORS[dataset]
    if locator.kind == "hub-row":
        numbers = re.findall(r"\d+", Path(item["image_path"]).stem)
        return numbers[-1] if numbers else ""
    if locator.kind == "hub-question":
        return relative_path(item["image_path"])
    return path_tail(item["image_path"], locator.tail).removesuffix(locator.suffix)


def _file_images(dataset: str, items: list[dict], source: dict) -> tuple[dict, list]:
    """key -> image bytes from a local copy in the official layout; the keys not found."""
    locator = LOCATORS[dataset]
    if not source.get("path"):
        raise AuthorsItemsError(f"dataset {dataset!r}: the TTRV authors' items need a local copy in the official layout "
                                f"{locator.layout}; set config `data.sources.{dataset}.path` to its folder")
    root = Path(source["path"])
    found, missing = {}, []
    for key in {_image_key(dataset, item) for item in items}:
        path = root / key
        if path.is_file():
            found[key] = path.read_bytes()
        else:
            missing.append(key)
    return found, missing


def missing_file_images(dataset: str, root: Path) -> tuple[int, list[str]]:
    """(the images every list of the authors' `dataset` needs, the ones absent from the local copy at `root`,
    sorted), from one directory listing per folder: the pre-flight's count, before any job is queued."""
    keys = {_image_key(dataset, item) for name in INDEX["datasets"][dataset]["lists"] for item in load_list(dataset, name)}
    listed: dict[Path, set] = {}
    missing = []
    for key in sorted(keys):
        folder = (Path(root) / key).parent
        if folder not in listed:
            listed[folder] = set(os.listdir(folder)) if folder.is_dir() else set()
        if Path(key).name not in listed[folder]:
            missing.append(key)
    return len(keys), missing


def _hub_images(spec, items: list[dict], source: dict) -> tuple[dict, list]:
    """key -> image bytes from the entry's source rows (Hub, or its local copy); the keys not found."""
    from .readers.images import ImageFiles, image_bytes
    from .readers.rows import ROW_READERS
    from .sources import _column, _undecoded_images, open_source

    locator = LOCATORS[spec.name]
    fields = {**spec.fields, **source.get("fields", {})}
    data = open_source(spec, source)
    image_column = _column(spec, data, fields, "image")
    data = _undecoded_images(data, image_column)
    files = ImageFiles.of(source)  # a local copy's relative image paths, as the entry's reader resolves them
    wanted = {_image_key(spec.name, item): item for item in items}
    found = {}
    if locator.kind == "hub-key":
        column = _column(spec, data, {"key": locator.column}, "key")
        for row in data:
            key = str(row[column]).removesuffix(locator.suffix)  # whichever way the copy spells it
            if key in wanted and key not in found:
                found[key] = image_bytes(row[image_column], files)
    else:  # the rows' own question and options, as the entry's reader gives them
        by_options: dict[tuple, list] = {}
        for index, row in enumerate(data):
            try:
                read = ROW_READERS[spec.reader](row, fields, None)
            except (ValueError, KeyError, TypeError):
                read = None
            if locator.kind == "hub-row" and str(index) in wanted:
                item = wanted[str(index)]
                question = _norm(read["question"]) if read else ""
                if not question or question not in _norm(item["prompt"]):
                    raise AuthorsItemsError(
                        f"dataset {spec.name!r}: item {item['id']} ({relative_path(item['image_path'])}) is row {index} "
                        f"by its file name, but that row's question {question[:80]!r} is not in the item's prompt: "
                        f"the source is not the copy the authors used")
                found[str(index)] = image_bytes(row[image_column], files)
            elif locator.kind == "hub-question" and read and read.get("options"):
                by_options.setdefault(tuple(read["options"]), []).append((_norm(read["question"]), index))
        for key, item in wanted.items() if locator.kind == "hub-question" else ():
            prompt = _norm(item["prompt"])
            rows = [i for question, i in by_options.get(tuple(item_options(item["prompt"])), []) if question and question in prompt]
            blobs = {hashlib.sha1(blob).hexdigest(): blob for blob in (image_bytes(data[i][image_column], files) for i in rows)}
            if len(blobs) > 1:
                raise AuthorsItemsError(f"dataset {spec.name!r}: item {item['id']} ({relative_path(item['image_path'])}) "
                                        f"matches {len(blobs)} different images by its question and options (rows {rows})")
            if blobs:
                found[key] = next(iter(blobs.values()))
    return found, [key for key in wanted if key not in found]


def prepare_authors_items(spec, out_dir: Path, source: dict | None = None) -> dict:
    """The authors' test list and every adaptation list of `spec`'s dataset as a manifest; stops, naming
    each missing item (id and path) and the count, if any image cannot be found."""
    source = source or {}
    lists = {"test": load_list(spec.name, "test")}
    for name in INDEX["datasets"][spec.name]["lists"]:
        if name != "test":
            lists[name] = load_list(spec.name, name)
    everything = [item for items in lists.values() for item in items]
    if LOCATORS[spec.name].kind == "file":
        images, missing = _file_images(spec.name, everything, source)
    else:
        images, missing = _hub_images(spec, everything, source)
    if missing:
        absent = [(split, item) for split, items in lists.items() for item in items
                  if _image_key(spec.name, item) in set(missing)]
        shown = "\n".join(f"  {split} item {item['id']}: {relative_path(item['image_path'])}" for split, item in absent[:20])
        where = source.get("path") or f"{spec.source} (split {spec.split!r})"
        raise AuthorsItemsError(
            f"dataset {spec.name!r}: {len(absent)} of the TTRV authors' {len(everything)} items have no image in {where} "
            f"({len(missing)} image(s) missing):\n{shown}" + ("\n  ..." if len(absent) > 20 else ""))
    image_dir = out_dir / "images"
    image_dir.mkdir(parents=True, exist_ok=True)
    stored = {}
    for key, blob in sorted(images.items()):
        name = hashlib.sha1(key.encode()).hexdigest()[:20] + ".img"
        (image_dir / name).write_bytes(blob)
        if decode_verdict(image_dir / name) != "kept":
            raise AuthorsItemsError(f"dataset {spec.name!r}: the image of {key} does not decode ({image_dir / name})")
        if spec.resize:  # RealWorldQA: TTRV Appendix B resizes to 1000 x 1000
            resize_square(image_dir / name, spec.resize)
        stored[key] = f"images/{name}"
    rows = [_manifest_row(spec.name, split, item, stored[_image_key(spec.name, item)])
            for split, items in lists.items() for item in items]
    manifest = pd.DataFrame(rows)
    manifest.to_parquet(out_dir / "manifest.parquet", index=False)
    test = manifest[manifest["split"] == "test"]
    letters = test["answer"].str.fullmatch(r"[A-J]")
    stats = {"dataset": spec.name, "items": ITEM_SOURCE, "authors": f"{TTRV_REPOSITORY}@{TTRV_COMMIT[:7]}",
             "original": len(test), "kept": len(test), "dropped": {},
             "splits": {k: int(v) for k, v in manifest["split"].value_counts().sort_index().items()},
             "answers_not_letters": int((~letters).sum())}
    (out_dir / "prep_stats.json").write_text(json.dumps(stats, indent=2))
    log.info("%s: %d of %d of the TTRV authors' test items found; adaptation lists %s", spec.name, len(test),
             len(lists["test"]), {k: v for k, v in stats["splits"].items() if k != "test"})
    if stats["answers_not_letters"]:
        log.warning("%s: %d of the authors' answers are option text, not a letter (kept as they wrote them)",
                    spec.name, stats["answers_not_letters"])
    return stats


def adaptation_samples(manifest: pd.DataFrame, dataset: str, n, sampling: str, seed: int) -> pd.DataFrame:
    """The adaptation items of a run on a manifest of the authors' items: their list for (n, sampling),
    one row per distinct item (their single-sample list repeats one item four times, once per GPU), the
    same for every seed, as they ship one list per run. Where they ship none (TTRV Table 6's single sample
    outside ImageNet-A, say), our seeded draw from their test items, with a warning."""
    from .sampling import select_adaptation_samples

    try:
        name = adaptation_list(dataset, n, sampling)
    except AuthorsItemsError as err:
        log.warning("%s; drawing %s of their test items with our seeded draw (seed %d) instead", err, n, seed)
        return select_adaptation_samples(manifest[manifest["split"] == "test"].reset_index(drop=True), n, seed, sampling)
    rows = manifest[manifest["split"] == name]
    return rows.drop_duplicates(subset=["authors_prompt", "source_id"]).reset_index(drop=True)
