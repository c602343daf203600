"""A source row's image as bytes: the bytes the row carries, or a relative path (CRPE, CAPTURe)
resolved under a local copy's image folders or its zip (`ImageFiles`)."""

from __future__ import annotations

from pathlib import Path


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


def image_bytes(value, files: ImageFiles) -> bytes:
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
