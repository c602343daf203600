"""Dataset registry: one entry per dataset, named in config (`datasets:`) and by the CLI.

An entry says where the data comes from and how it is scored; the code that reads a source
lives in `sources.py`, the shared preprocessing in `preprocessing.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    task: str  # "recognition" (4-way MCQ built from classes), "vqa", "grounding", "counting"
    source: str  # Hub id, or "bundled:<what>" for data that ships inside a package
    metric: str  # "accuracy", "smape", "giou_ciou", "count_accuracy"
    classes: tuple[str, ...] = field(default=())
    description: str = ""


DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

REGISTRY: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in [
        DatasetSpec(
            name="demo-digits",
            task="recognition",
            source="bundled:sklearn.datasets.load_digits",
            metric="accuracy",
            classes=DIGIT_NAMES,
            description="scikit-learn's 1,797 handwritten digits (8x8, upscaled), 4-way MCQ",
        ),
        DatasetSpec(
            name="demo-digit-scenes",
            task="grounding",
            source="bundled:sklearn.datasets.load_digits:scenes",
            metric="giou_ciou",
            description="2-3 real digits pasted on a 112 px canvas; find one by name (box + point)",
        ),
    ]
}


def get_dataset(name: str) -> DatasetSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; registered: {', '.join(sorted(REGISTRY))}") from None
