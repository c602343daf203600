"""A saved checkpoint's completion record: written last, listing every file with its size, so a directory
left half-written (a kill while saving) or half-deleted (a kill during Snakemake's removal of temp()
outputs, which unlinks file by file) is told apart from a whole one before anything loads it."""

from __future__ import annotations

import json
from pathlib import Path

RECORD = "ttrl_bench_saved.json"


def _files(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name not in (RECORD, ".snakemake_timestamp")}


def record_saved(directory: Path) -> None:
    """Write the record, after every other file of the checkpoint (through a rename: never half a record)."""
    tmp = directory / f"{RECORD}.tmp"
    tmp.write_text(json.dumps({"files": _files(directory)}, indent=1))
    tmp.replace(directory / RECORD)


def missing_files(directory: Path) -> list[str]:
    """What the record lists and the directory lacks (or holds at another size); the record itself when
    it is gone. Empty for a whole checkpoint."""
    record = directory / RECORD
    if not record.is_file():
        return [RECORD]
    present = _files(directory)
    return [name for name, size in json.loads(record.read_text())["files"].items() if present.get(name) != size]
