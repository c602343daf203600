"""What every job records about itself so a rerun next month can be checked against this one."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version

TRACKED_PACKAGES = ("ttrl-bench", "torch", "transformers", "trl", "datasets", "vllm")


def config_hash(params: dict) -> str:
    """Stable short hash of a job's resolved parameters (key order does not matter)."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:16]


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, timeout=5).stdout
        return out.stdout.strip() + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(params: dict) -> dict:
    return {
        "config_hash": config_hash(params),
        "params": params,
        "versions": package_versions(),
        "git_revision": git_revision(),
    }
