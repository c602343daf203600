"""Issue 39: the survivors of mutmut in datasets/sources.py, each pinned by a test.

Covered: `hub_reachable` (the endpoint, port and timeout of its TCP connect, against a real
listening socket on 127.0.0.1 and a recorder of `socket.create_connection`), `hub_usable`
(HF_HUB_OFFLINE=1), `_data_files` (classnames.json left out), `_webdataset_shards`
(CLIP_benchmark's `<split>/{0..n-1}.tar` + `<split>/nshards.txt` layout, webdataset_builder.py /
datasets/builder.py build_wds_dataset; shards in shard order; the messages), `_load_hub` (the
hub_files message, the Hub config passed on), `_class_names` (a JSON mapping over a ClassLabel, a
classnames.txt, clip-benchmark's classnames.txt on the Hub through `hf_hub_download`, the message)
and `read_hf_source` (config's field mapping, column checks and their messages, `keep`, the row
index as source id, the raw folder, rows without an image, geometry rows whose image cannot be
opened). No network: the Hub is a recorder or a local socket. Every expected value is worked out
by hand in the test's docstring or comments.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import datasets
import pytest
from PIL import Image

from ttrl_bench.datasets import sources
from ttrl_bench.datasets.registry import DatasetSpec
from ttrl_bench.datasets.sources import DatasetSourceError

from tests.datasets.test_sources import GOOD, save  # its save_to_disk fixture builder and a 64 x 48 PNG


def classification_spec(fields=None, **kw) -> DatasetSpec:
    return DatasetSpec("cls-test", "recognition", "org/cls-test", "accuracy", reader="classification",
                       fields=fields if fields is not None else {"image": "image", "label": "label"}, **kw)


def no_column(column, key, columns) -> str:
    """_column's message, written out: the entry's name, the column, the field, the source's columns."""
    return (f"dataset 'cls-test': the source has no column {column!r} for field {key!r} (columns: {columns}); "
            f"map it with config `data.sources.cls-test.fields.{key}`")


# --- hub_reachable / hub_usable ----------------------------------------------------------------

class Recorder:
    """Stands in for socket.create_connection: records (address, timeout) and connects to nothing."""

    MISSING = "no timeout given"

    def __init__(self, error: OSError | None = None):
        self.calls, self.error = [], error

    def __call__(self, address, timeout=MISSING, source_address=None):
        self.calls.append((address, timeout))
        if self.error is not None:
            raise self.error
        return self

    def close(self):
        pass


def test_hub_reachable_connects_to_huggingface_co_443_within_3_seconds(monkeypatch):
    """No HF_ENDPOINT: the default endpoint https://huggingface.co has no port, so the connect goes
    to ("huggingface.co", 443) with the default timeout 3.0; the connect succeeding gives True."""
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    recorder = Recorder()
    monkeypatch.setattr(socket, "create_connection", recorder)
    assert sources.hub_reachable() is True
    assert recorder.calls == [(("huggingface.co", 443), 3.0)]


def test_hub_reachable_uses_hf_endpoints_host_port_and_the_given_timeout(monkeypatch):
    """HF_ENDPOINT=http://hub-mirror.internal:8080 names its own port: the connect goes to
    ("hub-mirror.internal", 8080), not 443; timeout=0.5 is passed as given."""
    monkeypatch.setenv("HF_ENDPOINT", "http://hub-mirror.internal:8080")
    recorder = Recorder()
    monkeypatch.setattr(socket, "create_connection", recorder)
    assert sources.hub_reachable(timeout=0.5) is True
    assert recorder.calls == [(("hub-mirror.internal", 8080), 0.5)]


def test_hub_reachable_is_false_when_the_connect_fails(monkeypatch):
    """An OSError from the connect (here ConnectionRefusedError) means unreachable: False."""
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    recorder = Recorder(ConnectionRefusedError(111, "Connection refused"))
    monkeypatch.setattr(socket, "create_connection", recorder)
    assert sources.hub_reachable() is False
    assert recorder.calls == [(("huggingface.co", 443), 3.0)]


def test_hub_reachable_against_a_real_local_listener(monkeypatch):
    """A socket listening on 127.0.0.1 (port chosen by the OS) accepts the TCP connect: True;
    once it is closed nothing listens on that port and the connect is refused: False."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    try:
        assert sources.hub_reachable(timeout=2.0) is True
    finally:
        listener.close()
    assert sources.hub_reachable(timeout=2.0) is False


@pytest.mark.parametrize("offline, reachable, usable", [
    ("1", False, True),  # HF_HUB_OFFLINE=1: the cache serves, whatever the network
    ("1", True, True),
    (None, True, True),  # online and the Hub answers
    (None, False, False),  # online, no Hub
    ("0", False, False),  # only "1" means offline
])
def test_hub_usable_is_offline_mode_or_a_reachable_hub(monkeypatch, offline, reachable, usable):
    """hub_usable() = HF_HUB_OFFLINE == "1" or hub_reachable(): the expected column is that `or`."""
    if offline is None:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    monkeypatch.setattr(sources, "hub_reachable", lambda timeout=3.0: reachable)
    assert sources.hub_usable() is usable


# --- _data_files ---------------------------------------------------------------------------------

def test_data_files_lists_json_files_without_classnames_json(tmp_path):
    """JSON patterns ("*.jsonl", "*.json") searched recursively, classnames.json (at any depth)
    left out, other formats ignored, the paths sorted as strings: a.json < b.jsonl < sub/c.json."""
    (tmp_path / "sub").mkdir()
    for name in ("b.jsonl", "a.json", "sub/c.json", "classnames.json", "sub/classnames.json", "d.csv"):
        (tmp_path / name).write_text("{}\n")
    assert sources._data_files(tmp_path, "json") == [str(tmp_path / "a.json"), str(tmp_path / "b.jsonl"),
                                                     str(tmp_path / "sub" / "c.json")]


# --- _webdataset_shards (CLIP_benchmark's layout) -------------------------------------------------

WDS_SPEC = DatasetSpec("wds-test", "recognition", "clip-benchmark/wds_test", "accuracy", split="test")


def test_shards_without_nshards_txt_come_in_shard_order(tmp_path):
    """CLIP_benchmark names shards "%d.tar": 0, 1, 2, 10 is their order (by length, then name), not
    the string order 0, 1, 10, 2. Only the split's folder (test/) counts; readme.txt is no shard."""
    (tmp_path / "test").mkdir()
    (tmp_path / "train").mkdir()
    for name in ("10.tar", "2.tar", "0.tar", "1.tar", "readme.txt"):
        (tmp_path / "test" / name).write_bytes(b"")
    (tmp_path / "train" / "0.tar").write_bytes(b"")
    assert sources._webdataset_shards(WDS_SPEC, tmp_path) == [str(tmp_path / "test" / f"{i}.tar")
                                                              for i in (0, 1, 2, 10)]


def test_no_split_folder_is_not_the_layout(tmp_path):
    """No test/ folder (and no nshards.txt): not clip-benchmark's layout, None."""
    (tmp_path / "0.tar").write_bytes(b"")
    assert sources._webdataset_shards(WDS_SPEC, tmp_path) is None


def test_nshards_txt_without_a_number_is_named_with_its_text(tmp_path):
    """"two\\n" is no int: the message quotes the file's text as repr, 'two\\n'."""
    (tmp_path / "test").mkdir()
    nshards = tmp_path / "test" / "nshards.txt"
    nshards.write_text("two\n")
    with pytest.raises(DatasetSourceError) as err:
        sources._webdataset_shards(WDS_SPEC, tmp_path)
    assert str(err.value) == f"dataset 'wds-test': {nshards} does not hold a shard count ('two\\n')"


def test_nshards_txt_quote_stops_at_40_characters(tmp_path):
    """A Git LFS pointer instead of the count: its first line "version https://git-lfs.github.com/spec/v1"
    is 42 characters; the first 40 are "version " (8) + "https://" (8) + "git-lfs." (8) + "github." (7)
    + "com/" (4) + "spec/" (5) = "version https://git-lfs.github.com/spec/", without the "v1"."""
    (tmp_path / "test").mkdir()
    nshards = tmp_path / "test" / "nshards.txt"
    nshards.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 2\n")
    with pytest.raises(DatasetSourceError) as err:
        sources._webdataset_shards(WDS_SPEC, tmp_path)
    assert str(err.value) == (f"dataset 'wds-test': {nshards} does not hold a shard count "
                              f"('version https://git-lfs.github.com/spec/')")


def test_missing_shards_are_listed_with_is_or_are(tmp_path):
    """nshards.txt says 3, only 0.tar is there: 1.tar and 2.tar, joined by ", ", "are" missing;
    with nshards.txt saying 2, only 1.tar "is" missing."""
    split = tmp_path / "test"
    split.mkdir()
    (split / "0.tar").write_bytes(b"")
    nshards = split / "nshards.txt"
    nshards.write_text("3\n")
    with pytest.raises(DatasetSourceError) as err:
        sources._webdataset_shards(WDS_SPEC, tmp_path)
    assert str(err.value) == (f"dataset 'wds-test': {nshards} says 3 shards, but {split / '1.tar'}, {split / '2.tar'} "
                              f"are missing (config `data.sources.wds-test.path`)")
    nshards.write_text("2\n")
    with pytest.raises(DatasetSourceError) as err:
        sources._webdataset_shards(WDS_SPEC, tmp_path)
    assert str(err.value) == (f"dataset 'wds-test': {nshards} says 2 shards, but {split / '1.tar'} "
                              f"is missing (config `data.sources.wds-test.path`)")


# --- _load_hub -----------------------------------------------------------------------------------

FILES_SPEC = dict(name="files-test", task="vqa", source="org/files-repo", metric="accuracy",
                  hub_files=("questions.jsonl", "images.zip"))
FILES_MESSAGE = ("dataset 'files-test': the Hub repository org/files-repo holds files, not a `datasets` split "
                 "(load_dataset('org/files-repo', split='test') stops with 'Unknown split'); download "
                 "questions.jsonl, images.zip from it (e.g. `huggingface-cli download --repo-type dataset "
                 "org/files-repo --local-dir DIR`) and set config `data.sources.files-test.path` to DIR")


def test_hub_files_message_ends_with_the_description():
    """A description is appended after "; "."""
    spec = DatasetSpec(**FILES_SPEC, description="images are COCO val2017")
    with pytest.raises(DatasetSourceError) as err:
        sources.open_source(spec, None)
    assert str(err.value) == FILES_MESSAGE + "; images are COCO val2017"


def test_hub_files_message_without_a_description_ends_at_dir():
    """No description: nothing after "... to DIR" (no "; ", no other text)."""
    with pytest.raises(DatasetSourceError) as err:
        sources.open_source(DatasetSpec(**FILES_SPEC), None)
    assert str(err.value) == FILES_MESSAGE


def test_hub_load_passes_the_entrys_config_and_split(monkeypatch):
    """hub_config "ocr" and split "validation" reach load_dataset as load_dataset(source, "ocr",
    split="validation"); not a clip-benchmark/wds_ repo, so no data_files."""
    calls, loaded = [], object()

    def fake_load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        return loaded

    monkeypatch.setattr(sources, "hub_usable", lambda: True)
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    spec = DatasetSpec("cfg-test", "vqa", "org/repo", "accuracy", hub_config="ocr", split="validation")
    assert sources.open_source(spec, None) is loaded
    assert calls == [(("org/repo", "ocr"), {"split": "validation"})]


# --- _class_names --------------------------------------------------------------------------------

def labelled(names=None):
    """Three rows with a "label" column: a ClassLabel of `names`, or plain ints when names is None."""
    feature = datasets.ClassLabel(names=names) if names else datasets.Value("int64")
    return datasets.Dataset.from_dict({"label": [0, 1, 2]}, features=datasets.Features({"label": feature}))


@pytest.fixture
def hub_download(monkeypatch, tmp_path):
    """hf_hub_download as sources.py looks it up (`from huggingface_hub import hf_hub_download` at
    call time): records (args, kwargs), returns a downloaded classnames.txt of "  airplane \\n\\nairport\\n"."""
    import huggingface_hub

    calls = []
    downloaded = tmp_path / "hub" / "classnames.txt"
    downloaded.parent.mkdir()
    downloaded.write_text("  airplane \n\nairport\n")

    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        return str(downloaded)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    return calls


def test_json_names_map_the_class_labels_in_label_order(tmp_path):
    """ClassLabel n02, n01, n03 through {"n01": "tench", "n02": "goldfish"}: label order, so
    goldfish, tench, and n03 (not in the file) kept as it is."""
    mapping = tmp_path / "names.json"
    mapping.write_text(json.dumps({"n01": "tench", "n02": "goldfish"}))
    names = sources._class_names(classification_spec(), labelled(["n02", "n01", "n03"]),
                                 {"class_names": str(mapping)}, "label")
    assert names == ["goldfish", "tench", "n03"]


def test_json_names_without_a_class_label_are_the_files_values(tmp_path):
    """No ClassLabel: the mapping's values in the file's order, tench then goldfish."""
    mapping = tmp_path / "names.json"
    mapping.write_text(json.dumps({"n01": "tench", "n02": "goldfish"}))
    assert sources._class_names(classification_spec(), labelled(), {"class_names": str(mapping)},
                                "label") == ["tench", "goldfish"]


def test_configured_text_names_are_its_non_blank_lines(tmp_path):
    """A .txt: one name a line, stripped, blank lines dropped: tench, goldfish."""
    path = tmp_path / "names.txt"
    path.write_text("tench\n  goldfish  \n\n")
    assert sources._class_names(classification_spec(), labelled(), {"class_names": str(path)}, "label") == [
        "tench", "goldfish"]


def test_clip_benchmark_names_come_from_the_hub(hub_download):
    """Hub only (no path), no ClassLabel, a clip-benchmark repo: classnames.txt of that dataset repo,
    hf_hub_download("clip-benchmark/wds_vtab-resisc45", "classnames.txt", repo_type="dataset");
    its lines stripped, the blank one dropped: airplane, airport."""
    spec = DatasetSpec("resisc-test", "recognition", "clip-benchmark/wds_vtab-resisc45", "accuracy")
    assert sources._class_names(spec, labelled(), {}, "label") == ["airplane", "airport"]
    assert hub_download == [(("clip-benchmark/wds_vtab-resisc45", "classnames.txt"), {"repo_type": "dataset"})]


NO_NAMES = ("dataset 'cls-test': no class names (no ClassLabel, no classnames.txt); set config "
            "`data.sources.cls-test.class_names`")


def test_no_names_on_the_hub_outside_clip_benchmark(hub_download):
    """org/cls-test from the Hub, no ClassLabel: nothing to download (not clip-benchmark), the
    message names the config key."""
    with pytest.raises(DatasetSourceError) as err:
        sources._class_names(classification_spec(), labelled(), {}, "label")
    assert str(err.value) == NO_NAMES
    assert hub_download == []


def test_a_local_clip_benchmark_copy_without_classnames_txt_does_not_download(tmp_path, hub_download):
    """A local copy (path set) of a clip-benchmark repo without classnames.txt: the Hub is not
    asked, the message names the config key."""
    spec = DatasetSpec("cls-test", "recognition", "clip-benchmark/wds_dtd", "accuracy")
    with pytest.raises(DatasetSourceError) as err:
        sources._class_names(spec, labelled(), {"path": str(tmp_path)}, "label")
    assert str(err.value) == NO_NAMES
    assert hub_download == []


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
