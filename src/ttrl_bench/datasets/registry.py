"""Dataset registry: one entry per dataset (split), named in config (`datasets:`) and by the CLI.

An entry says where the data comes from and how it is scored; the code that reads a source
lives in `sources.py`, the shared preprocessing in `preprocessing.py`. Sources are the Hub ids
public harnesses use (lmms-eval, clip-benchmark); none could be checked against its dataset card
from this offline machine. A local copy always works: config `data.sources.<name>: <path>`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    task: str  # "recognition" (4-way MCQ from classes), "vqa" (MCQ with official options),
    #            "counting-freeform" (a number), "grounding" (objects), "counting" (objects, count)
    source: str  # Hub id, "bundled:<what>" (ships in a package), or "local:<format>" (path required)
    metric: str  # "accuracy", "smape", "giou_ciou", "count_accuracy"
    paper_name: str = ""  # column name in the papers' tables
    hub_config: str | None = None
    split: str = "test"
    classes: tuple[str, ...] = field(default=())
    description: str = ""


DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _recognition(name, source, paper_name, split="test", **kw) -> DatasetSpec:
    return DatasetSpec(name, "recognition", source, "accuracy", paper_name, split=split, **kw)


def _vqa(name, source, paper_name, split="test", **kw) -> DatasetSpec:
    return DatasetSpec(name, "vqa", source, "accuracy", paper_name, split=split, **kw)


def _grounding(name, source, paper_name, split, task="grounding", **kw) -> DatasetSpec:
    metric = "giou_ciou" if task == "grounding" else "count_accuracy"
    return DatasetSpec(name, task, source, metric, paper_name, split=split, **kw)


_ENTRIES = [
    # Bundled demo sets (scikit-learn's real handwritten digits).
    DatasetSpec("demo-digits", "recognition", "bundled:sklearn.datasets.load_digits", "accuracy", "Digits",
                classes=DIGIT_NAMES, description="1,797 handwritten digits (8x8, upscaled), 4-way MCQ"),
    DatasetSpec("demo-digit-scenes", "grounding", "bundled:sklearn.datasets.load_digits:scenes", "giou_ciou",
                "Digit scenes", description="2-3 real digits on a 112 px canvas; find one by name"),
    # TTRV Table 1: recognition as 4-way MCQ (Appendix A, after Gavrikov et al. 2024).
    _recognition("imagenet", "local:imagefolder", "ImageNet", split="val",
                 description="ImageNet val as an image folder (class folders) + the 1000 class names"),
    _recognition("imagenet-v2", "clip-benchmark/wds_imagenetv2", "ImageNet-V2"),
    _recognition("imagenet-r", "clip-benchmark/wds_imagenet-r", "ImageNet-R"),
    _recognition("imagenet-sketch", "clip-benchmark/wds_imagenet_sketch", "ImageNet-S"),
    _recognition("imagenet-a", "clip-benchmark/wds_imagenet-a", "ImageNet-A"),
    _recognition("food101", "ethz/food101", "Food101", split="validation"),
    _recognition("dtd", "clip-benchmark/wds_vtab-dtd", "DTD"),
    _recognition("resisc45", "clip-benchmark/wds_vtab-resisc45", "Resisc45"),
    # TTRV Table 2: VQA with the official options + the option-letter instruction.
    _vqa("mathverse", "AI4Math/MathVerse", "MathVerse", split="testmini", hub_config="testmini"),
    _vqa("mathvista", "AI4Math/MathVista", "MathVista", split="testmini"),
    _vqa("seed-bench", "lmms-lab/SEED-Bench", "SEED"),
    _vqa("mme", "lmms-lab/MME", "MME", description="yes/no questions as 'A. No / B. Yes'"),
    _vqa("realworldqa", "lmms-lab/RealWorldQA", "RealWorldQA", description="resized to 1000x1000, not filtered"),
    DatasetSpec("capture", "counting-freeform", "atinp/CAPTURe", "smape", "Capture",
                description="free-form counting scored by 1 - sMAPE"),
    _vqa("crpe", "OpenGVLab/CRPE", "CRPE"),
    _vqa("ai2d", "lmms-lab/ai2d", "AI2D"),
    _vqa("mathvision", "MathLLMs/MathVision", "MathVision"),
    _vqa("logicvista", "lscpku/LogicVista", "LogicVista"),
    # VR-TTRL Table 2: the 8 splits (segmentation by gIoU, counting by count accuracy).
    _grounding("refcoco", "lmms-lab/RefCOCO", "RefCOCO-val", "val"),
    _grounding("refcoco-testA", "lmms-lab/RefCOCO", "RefCOCO-testA", "testA"),
    _grounding("refcoco+", "lmms-lab/RefCOCOplus", "RefCOCO+-val", "val"),
    _grounding("refcoco+-testA", "lmms-lab/RefCOCOplus", "RefCOCO+-testA", "testA"),
    _grounding("refcocog", "lmms-lab/RefCOCOg", "RefCOCOg-test", "test"),
    _grounding("reasonseg", "Ricky06662/ReasonSeg_val", "ReasonSeg-val", "val"),
    _grounding("reasonseg-test", "Ricky06662/ReasonSeg_test", "ReasonSeg-test", "test"),
    _grounding("pixmo-count", "allenai/pixmo-count", "PixMo-Count-val", "validation", task="counting",
               description="images by URL: a local copy with the images is needed offline"),
    _grounding("pixmo-count-test", "allenai/pixmo-count", "PixMo-Count-test", "test", task="counting"),
    _grounding("countbench", "vikhyatk/CountBenchQA", "CountBench-test", "test", task="counting"),
]

REGISTRY: dict[str, DatasetSpec] = {spec.name: spec for spec in _ENTRIES}


def get_dataset(name: str) -> DatasetSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; registered: {', '.join(sorted(REGISTRY))}") from None
