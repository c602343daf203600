"""Issue 39: datasets/readers/images.py's ImageFiles, where a source's relative image paths resolve (CRPE's
COCO folders, CAPTURe's real_dataset.zip with members `dataset/<file>`), at the edges mutmut found untested:
nested members of the zip, its folder entries, a source with no local copy, and the message naming every place
looked in."""

from __future__ import annotations

import zipfile

import pytest

from ttrl_bench.datasets.readers.images import ImageFiles, image_bytes


@pytest.fixture
def capture_zip(tmp_path):
    """A zip as CAPTURe ships it (top folder `dataset/`), with its folder entries and one nested file."""
    with zipfile.ZipFile(tmp_path / "real_dataset.zip", "w") as archive:
        archive.writestr("dataset/", b"")
        archive.writestr("dataset/sub/", b"")
        archive.writestr("dataset/a.png", b"A")
        archive.writestr("dataset/sub/b.png", b"B")
    return tmp_path


def test_zip_members_are_found_by_their_whole_path_under_the_top_folder(capture_zip):
    """`sub/b.png` is the member `dataset/sub/b.png` (the path under the top folder, all of it), and the member's
    own name works too; its bare file name `b.png` is no member (another folder may hold a b.png)."""
    files = ImageFiles(capture_zip, image_dirs="missing", image_zip="real_dataset.zip")
    assert files.read("a.png") == b"A" and files.read("sub/b.png") == b"B"
    assert files.read("dataset/sub/b.png") == b"B"
    with pytest.raises(FileNotFoundError):
        files.read("b.png")
    with pytest.raises(FileNotFoundError):
        files.read("sub")


def test_a_folder_entry_of_the_zip_is_not_an_image(capture_zip):
    """The zip's folder entries (`dataset/`, `dataset/sub/`, empty) are no members: asking for one is a
    missing file, not an empty image."""
    files = ImageFiles(capture_zip, image_dirs="missing", image_zip="real_dataset.zip")
    for name in ("dataset/", "sub/", ""):
        with pytest.raises(FileNotFoundError):
            files.read(name)


def test_without_a_local_copy_a_path_is_read_as_it_is(tmp_path, monkeypatch):
    """A Hub source has no local copy (ImageFiles.of without `path`): a row's path is read as given, relative
    to the working directory too; an absolute path is read as it is under a local copy as well."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "row.png").write_bytes(b"R")
    hub = ImageFiles.of({})
    assert hub.dirs == [] and hub.read("row.png") == b"R"
    local = ImageFiles(tmp_path / "copy")
    assert local.read(str(tmp_path / "row.png")) == b"R"
    assert image_bytes({"bytes": None, "path": "row.png"}, hub) == b"R"


def test_a_missing_file_names_every_folder_and_the_zip_looked_in(capture_zip):
    """The message lists the image folders in order, then the zip, joined by " nor "."""
    files = ImageFiles(capture_zip, image_dirs=["one", "two"], image_zip="real_dataset.zip")
    with pytest.raises(FileNotFoundError) as err:
        files.read("c.png")
    assert str(err.value) == (f"image file 'c.png' is neither in {capture_zip / 'one'} nor {capture_zip / 'two'} "
                              f"nor {capture_zip / 'real_dataset.zip'}")
    without_zip = ImageFiles(capture_zip, image_dirs="one")
    with pytest.raises(FileNotFoundError) as err:
        without_zip.read("c.png")
    assert str(err.value) == f"image file 'c.png' is neither in {capture_zip / 'one'}"


def test_no_image_folder_given_means_the_copy_itself(tmp_path):
    """image_dirs None or [] (a config without `image_dir`): the folder looked in is the copy's root."""
    (tmp_path / "x.png").write_bytes(b"X")
    for dirs in (None, []):
        files = ImageFiles(tmp_path, image_dirs=dirs)
        assert files.dirs == [tmp_path] and files.read("x.png") == b"X"


@pytest.mark.parametrize("value", [[], 7, {"bytes": b"", "path": None}, ""])
def test_a_value_that_holds_no_image_is_refused_as_no_image(tmp_path, value):
    """An empty sequence of images (SEED-Bench), a number, a dict with neither bytes nor path, an empty path: all
    'no image' (ValueError), which read_hf_source counts as an unreadable row."""
    with pytest.raises(ValueError, match="^no image$"):
        image_bytes(value, ImageFiles(tmp_path))
