"""datasets/sources.py, reading a source: `read_hf_source` (config's field mapping, column checks and their
messages, `keep`, the row index as source id, the raw folder, rows without an image, geometry rows whose image
cannot be opened), `_local_format`, `_load_local`, `open_source`, `_undecoded_images`, bad rows and
`read_source`. No network. Every expected value is worked out by hand in the test's docstring or comments."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from PIL import Image

from ttrl_bench.datasets import sources
from ttrl_bench.datasets.registry import DatasetSpec
from ttrl_bench.datasets.sources import DatasetSourceError

from tests.support.datasets import GOOD, save  # a 64 x 48 PNG and the save_to_disk fixture builder
from tests.support.datasets import classification_spec


def no_column(column, key, columns) -> str:
    """_column's message, written out: the entry's name, the column, the field, the source's columns."""
    return (f"dataset 'cls-test': the source has no column {column!r} for field {key!r} (columns: {columns}); "
            f"map it with config `data.sources.cls-test.fields.{key}`")


# --- read_hf_source ------------------------------------------------------------------------------

def class_copy(tmp_path, label_column="label", names=("apple_pie", "tench"), labels=(1, 0), images=(GOOD, GOOD),
               extra=None):
    columns = {"image": list(images), label_column: list(labels), **(extra or {})}
    features = {"image": datasets.Image(), label_column: datasets.ClassLabel(names=list(names)),
                **{k: datasets.Value("string") for k in extra or {}}}
    return save(tmp_path, columns, features)


def test_configs_field_mapping_overrides_the_entrys(tmp_path):
    """The entry maps label -> "label", config maps it to "cls", the copy's column. ClassLabel of cls:
    apple_pie, tench -> "apple pie", "tench"; rows cls 1, 0 -> tench, apple pie; no id field, so
    the source id is the row index."""
    source = class_copy(tmp_path, label_column="cls")
    raw = tmp_path / "raw"
    samples = list(sources.read_hf_source(classification_spec(), raw, {**source, "fields": {"label": "cls"}}))
    classes = ("apple pie", "tench")
    assert samples == [
        {"id": "cls-test-000000", "split": "test", "source_id": "0", "image_path": raw / "cls-test-000000.img",
         "label": "tench", "classes": classes},
        {"id": "cls-test-000001", "split": "test", "source_id": "1", "image_path": raw / "cls-test-000001.img",
         "label": "apple pie", "classes": classes},
    ]


def test_raw_folder_is_made_with_its_parents(tmp_path):
    """raw_dir two levels below an absent folder: made, parents too; the row's bytes written there."""
    raw = tmp_path / "absent" / "deeper" / "raw"
    samples = list(sources.read_hf_source(classification_spec(), raw, class_copy(tmp_path, labels=(0,), images=(GOOD,))))
    assert [s["image_path"] for s in samples] == [raw / "cls-test-000000.img"]
    assert (raw / "cls-test-000000.img").read_bytes() == GOOD


def test_without_an_id_field_the_source_id_is_the_row_index(tmp_path):
    """No "id" in the fields: source_id is str(row index), "0" and "1", never another column's value;
    the copy has string columns named "XXXX" and "" (a pandas index saved without a name) that must not be
    read as the id."""
    source = class_copy(tmp_path, extra={"XXXX": ["a", "b"], "": ["pandas-index-7", "pandas-index-8"]})
    samples = list(sources.read_hf_source(classification_spec(), tmp_path / "raw", source))
    assert [s["source_id"] for s in samples] == ["0", "1"]


def test_a_missing_image_column_is_named(tmp_path):
    """Columns picture, label; field image -> "image": no such column."""
    source = save(tmp_path, {"picture": ["x"], "label": [0]},
                  {"picture": datasets.Value("string"), "label": datasets.ClassLabel(names=["a"])})
    with pytest.raises(DatasetSourceError) as err:
        list(sources.read_hf_source(classification_spec(), tmp_path / "raw", source))
    assert str(err.value) == no_column("image", "image", ["picture", "label"])


def test_a_field_with_alternatives_none_of_which_is_there_is_named(tmp_path):
    """label -> "label", else "cls": the copy has neither (columns image, target)."""
    source = save(tmp_path, {"image": [GOOD], "target": [0]},
                  {"image": datasets.Image(), "target": datasets.ClassLabel(names=["a"])})
    spec = classification_spec({"image": "image", "label": "label", "label_alternatives": ("cls",)})
    with pytest.raises(DatasetSourceError) as err:
        list(sources.read_hf_source(spec, tmp_path / "raw", source))
    assert str(err.value) == no_column("label", "label", ["image", "target"])


def test_fields_after_one_with_alternatives_are_still_checked(tmp_path):
    """Fields in order image, label (+ alternatives, found: "label"), extra -> "nope": the check goes
    on past label and stops at extra, which the copy (image, label) lacks."""
    spec = classification_spec({"image": "image", "label": "label", "label_alternatives": ("cls",), "extra": "nope"})
    with pytest.raises(DatasetSourceError) as err:
        list(sources.read_hf_source(spec, tmp_path / "raw", class_copy(tmp_path)))
    assert str(err.value) == no_column("nope", "extra", ["image", "label"])


def test_a_label_mapped_to_a_tuple_is_no_column(tmp_path):
    """label -> ("label",) (a tuple, not a name): every name in it is a column, but the label itself
    must be one column, so reading the labels stops with the message for ('label',)."""
    spec = classification_spec({"image": "image", "label": ("label",)})
    with pytest.raises(DatasetSourceError) as err:
        list(sources.read_hf_source(spec, tmp_path / "raw", class_copy(tmp_path)))
    assert str(err.value) == no_column(("label",), "label", ["image", "label"])


def test_keep_checks_only_its_column_not_its_value(tmp_path):
    """keep = ("kind", "photo"): "kind" is a column, "photo" the value to keep (no column "photo").
    Row 0 (photo): options x, y, answer "B" (the second of two letters A, B); row 1 (video): skipped."""
    spec = DatasetSpec("keep-test", "vqa", "org/keep", "accuracy", reader="choice_columns",
                       fields={"image": "image", "question": "question", "choices": ("a", "b"), "answer": "answer",
                               "keep": ("kind", "photo")})
    strings = {c: datasets.Value("string") for c in ("question", "a", "b", "answer", "kind")}
    source = save(tmp_path, {"image": [GOOD, GOOD], "question": ["q1", "q2"], "a": ["x", "x"], "b": ["y", "y"],
                             "answer": ["B", "A"], "kind": ["photo", "video"]}, {"image": datasets.Image(), **strings})
    raw = tmp_path / "raw"
    assert list(sources.read_hf_source(spec, raw, source)) == [
        {"id": "keep-test-000000", "split": "test", "source_id": "0", "image_path": raw / "keep-test-000000.img",
         "question": "q1", "options": ["x", "y"], "answer": "B"},
        {"id": "keep-test-000001", "split": "test", "source_id": "1", "image_path": raw / "keep-test-000001.img",
         "skip": "not_applicable"},
    ]
    # issue 53 item 7: a skipped row's image is never written (SEED-Bench's video frames), a kept row's is
    assert sorted(p.name for p in raw.iterdir()) == ["keep-test-000000.img"]


def test_a_row_without_an_image_is_warned_about_and_the_next_rows_still_read(tmp_path, caplog):
    """Row 0 has no image: image_bytes raises ValueError("no image"), the sample is skipped as
    no_image with a .missing path, the warning "<name>: <copy> row 0 (sample cls-test-000000): no image";
    row 1 (label 0 -> "apple pie") is still read."""
    source = class_copy(tmp_path, labels=(1, 0), images=(None, GOOD))
    raw = tmp_path / "raw"
    with caplog.at_level("WARNING", logger="ttrl_bench.datasets.sources"):
        samples = list(sources.read_hf_source(classification_spec(), raw, source))
    assert samples == [
        {"id": "cls-test-000000", "split": "test", "source_id": "0", "image_path": raw / "cls-test-000000.missing",
         "skip": "no_image"},
        {"id": "cls-test-000001", "split": "test", "source_id": "1", "image_path": raw / "cls-test-000001.img",
         "label": "apple pie", "classes": ("apple pie", "tench")},
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "ttrl_bench.datasets.sources"] == [
        f"cls-test: {source['path']} row 0 (sample cls-test-000000): no image"]


def test_a_geometry_row_whose_image_does_not_open_gets_an_empty_query(tmp_path):
    """Mask reader, image bytes that are no image: PIL cannot open them (OSError), so the sample is
    the base sample with its .img path and query "" (the resolution filter counts it unreadable)."""
    spec = DatasetSpec("seg-test", "grounding", "org/seg", "giou_ciou", reader="mask",
                       fields={"image": "image", "query": "text", "mask": "mask"})
    source = save(tmp_path, {"image": [b"no image here"], "text": ["the dog"], "mask": [[[True]]]},
                  {"image": datasets.Image(), "text": datasets.Value("string"),
                   "mask": datasets.List(datasets.List(datasets.Value("bool")))})
    raw = tmp_path / "raw"
    assert list(sources.read_hf_source(spec, raw, source)) == [
        {"id": "seg-test-000000", "split": "test", "source_id": "0", "image_path": raw / "seg-test-000000.img",
         "query": ""}]


# --- sources2: _local_format, _load_local, open_source, _undecoded_images, bad rows, read_source --

@pytest.fixture
def load_recorder(monkeypatch):
    """datasets.load_dataset as sources.py calls it (`datasets.load_dataset` looked up at call time):
    records (args, kwargs), returns a sentinel; the real call cannot show which files it got."""
    calls, loaded = [], object()

    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        return loaded

    monkeypatch.setattr(datasets, "load_dataset", fake)
    return calls, loaded


@pytest.mark.parametrize("marker", ["dataset_info.json", "dataset_dict.json", "state.json"])
def test_any_one_save_to_disk_marker_means_hf_disk(tmp_path, marker):
    """Each of save_to_disk's three files alone marks an "hf-disk" copy (the test is an `or` of the
    three, names in lower case as `datasets` writes them). Without the marker check the folder would
    be "json": the marker itself is a *.json file that _data_files finds."""
    (tmp_path / marker).write_text("{}")
    assert sources._local_format(tmp_path) == "hf-disk"


def test_a_missing_local_copy_names_its_config_key(tmp_path):
    """The path does not exist: the message names the entry, the path and the key data.sources.<name>.path."""
    path = tmp_path / "absent"
    with pytest.raises(DatasetSourceError) as err:
        sources._load_local(classification_spec(), path, None)
    assert str(err.value) == (f"dataset 'cls-test': local copy {path} (config `data.sources.cls-test.path`) "
                              f"does not exist")


def test_a_file_set_matching_nothing_is_named(tmp_path):
    """files="*.jsonl" under a folder holding only a.json: no match; the message names the glob (repr),
    the folder, the path key and the files key."""
    (tmp_path / "a.json").write_text("{}\n")
    with pytest.raises(DatasetSourceError) as err:
        sources._load_local(classification_spec(), tmp_path, None, "*.jsonl")
    assert str(err.value) == (f"dataset 'cls-test': no file '*.jsonl' under {tmp_path} (config "
                              f"`data.sources.cls-test.path`; another file set: `data.sources.cls-test.files`)")


def test_a_file_sets_format_follows_its_suffix(tmp_path, load_recorder):
    """files="b*.csv" matches b1.csv and b0.csv (not a.csv), sorted b0, b1; the first's suffix ".csv"
    -> pattern "*.csv" -> format "csv" (FILE_PATTERNS), one split "data"."""
    calls, loaded = load_recorder
    for name in ("b1.csv", "b0.csv", "a.csv"):
        (tmp_path / name).write_text("q\nx\n")
    assert sources._load_local(classification_spec(), tmp_path, None, "b*.csv") is loaded
    assert calls == [(("csv",), {"data_files": {"data": [str(tmp_path / "b0.csv"), str(tmp_path / "b1.csv")]},
                                 "split": "data"})]


def test_a_file_set_of_an_unknown_suffix_is_read_as_json(tmp_path, load_recorder):
    """files="*.txt": "*.txt" is in no FILE_PATTERNS entry, so the format falls back to "json"."""
    calls, loaded = load_recorder
    (tmp_path / "rows.txt").write_text('{"q": "x"}\n')
    assert sources._load_local(classification_spec(), tmp_path, None, "*.txt") is loaded
    assert calls == [(("json",), {"data_files": {"data": [str(tmp_path / "rows.txt")]}, "split": "data"})]


def test_a_file_set_refuses_a_format_that_reads_no_file_list(tmp_path, load_recorder):
    """`files` with a configured format that is no file format (a save_to_disk folder "hf-disk", "imagefolder",
    or an unknown "arrow") is refused before anything loads, naming the format, the file set and the file
    formats FILE_PATTERNS knows (parquet, webdataset, json, csv), as the same format without `files` is."""
    calls, _ = load_recorder
    (tmp_path / "rows.jsonl").write_text('{"q": "x"}\n')
    for fmt in ("hf-disk", "imagefolder", "arrow"):
        with pytest.raises(DatasetSourceError) as err:
            sources._load_local(classification_spec(), tmp_path, fmt, "*.jsonl")
        assert str(err.value) == (f"dataset 'cls-test': config `data.sources.cls-test.format` is {fmt!r} for the "
                                  "file set '*.jsonl'; known: parquet, webdataset, json, csv")
    assert calls == []


def test_an_unknown_configured_format_is_named_with_the_known_ones(tmp_path):
    """format "arrow" given through open_source (the config's `format`): the message names it and
    the known formats in LOCAL_FORMATS order: hf-disk, then FILE_PATTERNS' parquet, webdataset, json,
    csv, then imagefolder. The folder holds a.jsonl, so ignoring `format` would load it as json."""
    (tmp_path / "a.jsonl").write_text('{"q": "x"}\n')
    with pytest.raises(DatasetSourceError) as err:
        sources.open_source(classification_spec(), {"path": str(tmp_path), "format": "arrow"})
    assert str(err.value) == ("dataset 'cls-test': config `data.sources.cls-test.format` is 'arrow'; "
                              "known: hf-disk, parquet, webdataset, json, csv, imagefolder")


def test_the_configured_format_wins_over_the_detected_one(tmp_path, load_recorder):
    """a.parquet and b.jsonl: detection would pick parquet (first in FILE_PATTERNS); config's
    format "json" makes open_source load b.jsonl only."""
    import pandas as pd

    calls, loaded = load_recorder
    pd.DataFrame({"q": ["p"]}).to_parquet(tmp_path / "a.parquet")
    (tmp_path / "b.jsonl").write_text('{"q": "j"}\n')
    assert sources._local_format(tmp_path) == "parquet"
    assert sources.open_source(classification_spec(), {"path": str(tmp_path), "format": "json"}) is loaded
    assert calls == [(("json",), {"data_files": {"data": [str(tmp_path / "b.jsonl")]}, "split": "data"})]


def dict_copy(tmp_path, splits: dict) -> Path:
    path = tmp_path / "dict"
    datasets.DatasetDict({s: datasets.Dataset.from_dict({"q": rows}) for s, rows in splits.items()}).save_to_disk(str(path))
    return path


def test_a_dataset_dict_copy_gives_the_entrys_split(tmp_path):
    """A save_to_disk DatasetDict (train: t0, t1; test: x0): spec split "test" -> the test rows, x0 only."""
    path = dict_copy(tmp_path, {"train": ["t0", "t1"], "test": ["x0"]})
    data = sources._load_local(classification_spec(), path, None)
    assert list(data["q"]) == ["x0"]


def test_a_dataset_dict_without_the_split_names_its_splits(tmp_path):
    """Splits validation, train (saved in that order) and spec split "test": the message lists them
    sorted, ['train', 'validation'], and the split wanted, 'test'."""
    path = dict_copy(tmp_path, {"validation": ["v0"], "train": ["t0"]})
    with pytest.raises(DatasetSourceError) as err:
        sources._load_local(classification_spec(), path, None)
    assert str(err.value) == f"dataset 'cls-test': {path} has splits ['train', 'validation'], not 'test'"


def test_only_webdataset_reads_the_split_folders_shards(tmp_path, load_recorder):
    """format "json" for a folder with rows.jsonl and a test/0.tar (spec split "test"): the shards
    belong to webdataset only, so the data files are _data_files' json files: [rows.jsonl]."""
    calls, loaded = load_recorder
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "0.tar").write_bytes(b"")
    (tmp_path / "rows.jsonl").write_text('{"q": "x"}\n')
    assert sources._load_local(classification_spec(), tmp_path, "json") is loaded
    assert calls == [(("json",), {"data_files": {"data": [str(tmp_path / "rows.jsonl")]}, "split": "data"})]


def test_a_parquet_copy_is_read_from_all_its_files(tmp_path):
    """A real parquet copy: a.parquet (q: a0, a1) and sub/b.parquet (q: b0), detected as parquet,
    files sorted a.parquet < sub/b.parquet, one split: rows a0, a1, b0."""
    import pandas as pd

    (tmp_path / "sub").mkdir()
    pd.DataFrame({"q": ["a0", "a1"]}).to_parquet(tmp_path / "a.parquet")
    pd.DataFrame({"q": ["b0"]}).to_parquet(tmp_path / "sub" / "b.parquet")
    data = sources.open_source(classification_spec(), {"path": str(tmp_path)})
    assert list(data["q"]) == ["a0", "a1", "b0"]


def test_a_format_with_no_files_is_named(tmp_path):
    """format "parquet" for a folder holding only a.jsonl: no parquet files; the message names the
    format, the folder and the path key."""
    (tmp_path / "a.jsonl").write_text('{"q": "x"}\n')
    with pytest.raises(DatasetSourceError) as err:
        sources._load_local(classification_spec(), tmp_path, "parquet")
    assert str(err.value) == f"dataset 'cls-test': no parquet files under {tmp_path} (config `data.sources.cls-test.path`)"


def test_image_columns_are_cast_to_decode_false(tmp_path):
    """An Image column becomes Image(decode=False), a list of images List(Image(decode=False)): the
    schema says so (decode=None would read the same rows but is another feature, saved as null)."""
    data = datasets.Dataset.from_dict(
        {"image": [{"bytes": GOOD, "path": None}], "images": [[{"bytes": GOOD, "path": None}]]},
        features=datasets.Features({"image": datasets.Image(), "images": datasets.List(datasets.Image())}))
    one = sources._undecoded_images(data, "image")
    assert one.features["image"] == datasets.Image(decode=False) and one.features["image"].decode is False
    assert one[0]["image"] == {"bytes": GOOD, "path": None}
    many = sources._undecoded_images(data, "images")
    assert many.features["images"] == datasets.List(datasets.Image(decode=False))
    assert many.features["images"].feature.decode is False


def test_a_row_the_reader_rejects_is_skipped_as_bad_row(tmp_path, caplog):
    """choice_columns, options x, y (letters A, B), answer "Z": _letter_answer raises ValueError
    "answer 'Z' is not a valid letter for 2 options"; the sample keeps its .img path and is skipped
    as "bad_row", with a warning naming the entry, the copy, the row and the sample."""
    spec = DatasetSpec("bad-test", "vqa", "org/bad", "accuracy", reader="choice_columns",
                       fields={"image": "image", "question": "question", "choices": ("a", "b"), "answer": "answer"})
    strings = {c: datasets.Value("string") for c in ("question", "a", "b", "answer")}
    source = save(tmp_path, {"image": [GOOD], "question": ["q"], "a": ["x"], "b": ["y"], "answer": ["Z"]},
                  {"image": datasets.Image(), **strings})
    raw = tmp_path / "raw"
    with caplog.at_level("WARNING", logger="ttrl_bench.datasets.sources"):
        samples = list(sources.read_hf_source(spec, raw, source))
    assert samples == [{"id": "bad-test-000000", "split": "test", "source_id": "0",
                        "image_path": raw / "bad-test-000000.img", "skip": "bad_row"}]
    assert [r.getMessage() for r in caplog.records if r.name == "ttrl_bench.datasets.sources"] == [
        f"bad-test: {source['path']} row 0 (sample bad-test-000000): answer 'Z' is not a valid letter for 2 options"]


def test_read_source_reads_the_bundled_digits(tmp_path, monkeypatch):
    """source "bundled:sklearn.datasets.load_digits" -> read_digits(raw_dir), never read_hf_source.
    scikit-learn's digit 0 has target 0: id digits-0000, split train (index < 1200), image
    raw/0000.png at 8 * 7 = 56 px a side, label "zero"."""
    def no_hub(*args, **kwargs):
        raise AssertionError("read_hf_source called")

    monkeypatch.setattr(sources, "read_hf_source", no_hub)
    spec = DatasetSpec("demo-digits", "recognition", "bundled:sklearn.datasets.load_digits", "accuracy")
    raw = tmp_path / "raw"
    first = next(iter(sources.read_source(spec, raw)))
    assert first == {"id": "digits-0000", "split": "train", "image_path": raw / "0000.png", "label": "zero"}
    with Image.open(raw / "0000.png") as im:
        assert im.size == (56, 56)
