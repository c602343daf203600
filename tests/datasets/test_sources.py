"""datasets/sources.py, reaching the Hub: `hub_reachable` (the endpoint, port and timeout of its TCP connect,
against a real listening socket on 127.0.0.1 and a recorder of `socket.create_connection`), `hub_usable`
(HF_HUB_OFFLINE=1), `_data_files` (classnames.json left out), `_webdataset_shards` (CLIP_benchmark's
`<split>/{0..n-1}.tar` + `<split>/nshards.txt` layout, webdataset_builder.py / datasets/builder.py
build_wds_dataset; shards in shard order; the messages), `_load_hub` (the hub_files message, the Hub config
passed on) and `_class_names` (a JSON mapping over a ClassLabel, a classnames.txt, clip-benchmark's
classnames.txt on the Hub through `hf_hub_download`, the message). No network: the Hub is a recorder or a local
socket. Every expected value is worked out by hand in the test's docstring or comments."""

from __future__ import annotations

import json
import socket

import datasets
import pytest

from ttrl_bench.datasets import sources
from ttrl_bench.datasets.registry import DatasetSpec
from ttrl_bench.datasets.sources import DatasetSourceError

from tests.support.datasets import classification_spec


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
