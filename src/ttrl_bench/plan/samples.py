"""How many samples a job sees: a dataset's test split (prepared, bundled or a local copy's rows) and the
adaptation samples a job's batch layout is planned for; and how large its images typically are.

Layer 2 of the plan (grid): imports grid.py (docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

import json
from pathlib import Path

from ..datasets.readers.bundled import BUNDLED_TEST_SIZES
from ..datasets.registry import REGISTRY
from .grid import adaptation_samples

# A typical image (width, height in pixels) of a test set, counted into image tokens per model by
# models/families.py image_tokens_of: the evaluation minutes use it (resources.py, evaluation_cost.py); adaptation's
# do not (plan/cost.py FLOP_RATE_FACTOR's comment says why).
# Where a set's paper gives its size: RESISC45 256x256 (Cheng et al., arXiv:1703.00121, section 3), Food-101 at most
# 512 px a side (Bossard et al., ECCV 2014, section 4), DTD 300x300 to 640x640 (Cimpoi et al., arXiv:1311.3618,
# section 2); ImageNet's most frequent size, 500x375, for its variants. AI2D, MathVerse and MathVista vary: a
# size whose InternVL tiles match the TTRV authors' logs. Checked against those logs' mean prompt length
# (results/data/author_steps.csv.gz prompt_length/mean, less ~70-100 text tokens): InternVL AI2D ~1,900 (here 1,794),
# DTD ~1,600 (1,282), MathVista ~1,500 (1,282), MathVerse ~2,200 (1,794), RESISC45 ~256 (258), ImageNet-A/-V2
# ~2,400-2,900 (3,330: InternVL's 4:3 grid is its largest, so this overestimates a mixed set); Qwen2.5-VL ImageNet
# and -A/-R ~210-250 (234), -Sketch ~340 (336). Other sets: the family's benchmark image (families.IMAGE_TOKENS).
TYPICAL_IMAGE_SIZES = {
    "imagenet": (500, 375), "imagenet-v2": (500, 375), "imagenet-a": (500, 375), "imagenet-r": (500, 375),
    "imagenet-sketch": (600, 450), "food101": (512, 384), "dtd": (640, 640), "resisc45": (256, 256),
    "ai2d": (900, 600), "mathverse": (900, 600), "mathvista": (640, 640),
}


def split_size(plan, dataset: str) -> int | None:
    """Test samples of a dataset (a training set's rows for ECHO's geometry3k / geoqa): its
    prep_stats.json once prepared, the bundled sets' known size before; None where only
    preparation can tell (the resolution filter drops some)."""
    stats = Path(f"{plan.results}/data/{dataset}/prep_stats.json")
    if stats.exists():
        return json.loads(stats.read_text())["splits"].get(REGISTRY[dataset].manifest_split, 0)
    return BUNDLED_TEST_SIZES.get(dataset)


def local_rows(plan, dataset: str) -> tuple[int, str] | None:
    """Before preparation, the rows of a local JSON-lines copy (config `data.sources.<name>.path`): an upper bound
    of its samples (the resolution filter may drop some), and the copy's path; None for other sources."""
    source = plan.config["data"]["sources"].get(dataset) or {}
    path = Path(source["path"]) if source.get("path") else None
    if path is None or not path.is_dir() or source.get("format") not in (None, "json"):
        return None
    files = sorted(path.glob(source.get("files") or REGISTRY[dataset].local.get("files") or "**/*.jsonl"))
    if not files or any(f.suffix != ".jsonl" for f in files):
        return None
    return sum(1 for f in files for line in f.read_text().splitlines() if line.strip()), str(path)


def layout_samples(plan, job) -> int | None:
    """The adaptation samples a job's batch layout is planned for: one for a per-sample job (each adapt
    call sees one sample), else the protocol's; for "all" the prepared split's (None before)."""
    if job.rule == "adapt_per_sample":
        return 1
    return adaptation_samples(job.protocol) or split_size(plan, job.dataset)
