"""Loading a registry entry's source and turning it into raw samples (image file + label).

`read_source` picks the reader: the bundled demo sets (readers/bundled.py), else `read_hf_source`,
which opens the rows (`open_source`: the configured local copy in whatever format it is, else the
Hub, with `DatasetSourceError` naming the config key to set when it cannot), checks the mapped
columns, and hands each row to the entry's row reader (readers/rows.py), its image bytes written
under `raw_dir` (readers/images.py). Every reader yields dicts with `id`, `split`, `image_path` and
`label`; preprocessing then filters and formats them identically for all.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

from .readers.bundled import read_digit_scenes, read_digits
from .readers.images import ImageFiles, image_bytes
from .readers.rows import GEOMETRY_READERS, NON_COLUMN_FIELDS, ROW_READERS
from .registry import DatasetSpec

log = logging.getLogger(__name__)


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
        if fmt not in FILE_PATTERNS:  # a file set is files: no save_to_disk folder, no image folder
            raise DatasetSourceError(f"dataset {spec.name!r}: config `data.sources.{spec.name}.format` is {fmt!r} "
                                     f"for the file set {files!r}; known: {', '.join(FILE_PATTERNS)}")
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
    id_column = fields.get("id")  # none mapped: the row's index (a column named "" is no id)
    for index, row in enumerate(data):
        sample_id = f"{spec.name}-{index:06d}"
        base_sample = {"id": sample_id, "split": spec.manifest_split,
                       "source_id": str(row.get(id_column, index) if id_column else index)}
        try:
            blob = image_bytes(row[image_column], files)
        except (ValueError, OSError) as err:
            log.warning("%s: %s row %d (sample %s): %s", spec.name, where, index, sample_id, err)
            yield {**base_sample, "image_path": raw_dir / f"{sample_id}.missing", "skip": "no_image"}
            continue
        path = raw_dir / f"{sample_id}.img"
        try:
            if spec.reader in GEOMETRY_READERS:
                path.write_bytes(blob)  # the reader measures it
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
                if read is None:  # SEED-Bench's video rows: skipped before their frames are written
                    yield {**base_sample, "image_path": path, "skip": "not_applicable"}
                else:
                    path.write_bytes(blob)  # always, once read: RealWorldQA's resize rewrites the file in place
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
