"""Dataset registry: one entry per dataset (split), named in config (`datasets:`) and by the CLI.

An entry says where the data comes from, how its rows are read and how it is scored; the code
that reads a source lives in `sources.py`, the shared preprocessing in `preprocessing.py`.
Sources are the Hub ids public harnesses use (lmms-eval, clip-benchmark); each entry's `fields`
(our name -> the source's column) is what those harnesses and the dataset cards say (read, not
downloaded: this machine is offline), and a config can override it. A local copy
always works: config `data.sources.<name>: {path: ..., fields: {...}}`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    task: str  # "recognition" (4-way MCQ from classes), "vqa" (MCQ with official options),
    #            "counting-freeform" (a number), "grounding" (objects), "counting" (objects, count),
    #            "math" (reasoned, boxed answer: a number, an expression or option letters; ECHO)
    source: str  # Hub id, "bundled:<what>" (ships in a package), or "local:<format>" (path required)
    metric: str  # "accuracy", "smape", "giou_ciou", "count_accuracy", "pass@k"
    paper_name: str = ""  # column name in the papers' tables
    hub_config: str | None = None
    split: str = "test"  # the source's split; "train" marks a training set (adaptation reads its rows)
    classes: tuple[str, ...] = field(default=())
    description: str = ""
    reader: str = ""  # how a row becomes a sample (sources.ROW_READERS); "" for bundled sets
    fields: dict = field(default_factory=dict)  # our field -> the source's column
    resize: int | None = None  # square side to resize to instead of filtering (RealWorldQA)
    prompt: str = "options"  # prompt style of TTRV Appendix C (preprocessing.VQA_PROMPTS, "texture" for DTD)
    local: dict = field(default_factory=dict)  # defaults for a local copy: `files` (glob), `image_dir`
    # TTRV's 1000x1000 limit (Appendix B); ECHO keeps every image (user683/ECHO verl/data/save_as_json.py
    # writes them all, standalone_inference.py only enlarges images under 28 px)
    filter_resolution: bool = True

    @property
    def manifest_split(self) -> str:
        """The manifest's split of this entry's rows: "train" for a training set, else "test"."""
        return "train" if self.split == "train" else "test"


DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


# Column names as the public harnesses read them (lmms-eval, clip_benchmark, Seg-Zero, CAPTURe;
# checked against dataset cards and harness code, not downloads; override with config
# `data.sources.<name>.fields`). `answer_format` (not a column): how a source states the
# correct option: "letter" (default), "index" (AI2D) or "text" (MathVista).
IMAGE_LABEL = {"image": "image", "label": "label"}
WDS = {"image": "jpg", "image_alternatives": ("webp", "png", "jpeg"), "label": "cls"}  # clip-benchmark shards
REFCOCO = {"image": "image", "expressions": "answer", "bbox": "bbox", "segmentation": "segmentation"}
REASONSEG = {"image": "image", "query": "text", "mask": "mask"}


def _recognition(name, source, paper_name, split="test", fields=WDS, **kw) -> DatasetSpec:
    return DatasetSpec(name, "recognition", source, "accuracy", paper_name, split=split, reader="classification",
                       fields=fields, **kw)


def _vqa(name, source, paper_name, reader, fields, split="test", **kw) -> DatasetSpec:
    return DatasetSpec(name, "vqa", source, "accuracy", paper_name, split=split, reader=reader, fields=fields, **kw)


def _math(name, source, paper_name, reader, fields, split="test", **kw) -> DatasetSpec:
    return DatasetSpec(name, "math", source, "pass@k", paper_name, split=split, reader=reader, fields=fields,
                       prompt="math", filter_resolution=False, **kw)


def _grounding(name, source, paper_name, split, reader, fields, task="grounding", **kw) -> DatasetSpec:
    metric = "giou_ciou" if task == "grounding" else "count_accuracy"
    return DatasetSpec(name, task, source, metric, paper_name, split=split, reader=reader, fields=fields, **kw)


_ENTRIES = [
    # Bundled demo sets (scikit-learn's real handwritten digits).
    DatasetSpec("demo-digits", "recognition", "bundled:sklearn.datasets.load_digits", "accuracy", "Digits",
                classes=DIGIT_NAMES, description="1,797 handwritten digits (8x8, upscaled), 4-way MCQ"),
    DatasetSpec("demo-digit-scenes", "grounding", "bundled:sklearn.datasets.load_digits:scenes", "giou_ciou",
                "Digit scenes", description="2-3 real digits on a 112 px canvas; find one by name"),
    # the scenes' training split: where VR-TTRL Table 11's offline variant trains in config/cpu-methods.yaml
    DatasetSpec("demo-digit-scenes-train", "grounding", "bundled:sklearn.datasets.load_digits:scenes", "giou_ciou",
                "Digit scenes (train)", split="train", description="the 600 training scenes of demo-digit-scenes"),
    # TTRV Table 1: recognition as 4-way MCQ (Appendix A, after Gavrikov et al. 2024). Class names
    # come from the source's ClassLabel, its classnames.txt (clip-benchmark), or config
    # `data.sources.<name>.class_names` (ImageNet folders are named by WordNet id).
    _recognition("imagenet", "local:imagefolder", "ImageNet", split="val", fields=IMAGE_LABEL,
                 description="ImageNet val as an image folder (class folders) + the 1000 class names"),
    _recognition("imagenet-v2", "clip-benchmark/wds_imagenetv2", "ImageNet-V2"),
    _recognition("imagenet-r", "clip-benchmark/wds_imagenet-r", "ImageNet-R"),
    _recognition("imagenet-sketch", "clip-benchmark/wds_imagenet_sketch", "ImageNet-S"),
    _recognition("imagenet-a", "clip-benchmark/wds_imagenet-a", "ImageNet-A"),
    _recognition("food101", "ethz/food101", "Food101", split="validation", fields=IMAGE_LABEL),
    _recognition("dtd", "clip-benchmark/wds_vtab-dtd", "DTD", prompt="texture"),
    _recognition("resisc45", "clip-benchmark/wds_vtab-resisc45", "Resisc45"),
    # TTRV Table 2: VQA with the official options + the option-letter instruction (Appendix C).
    # lmms-eval's copy; `question_for_eval` is the question with its "Choices:\nA:..." lines
    _vqa("mathverse", "CaraJ/MathVerse-lmmseval", "MathVerse", "options_in_text", split="testmini",
         hub_config="testmini",
         fields={"image": "image", "question": "question_for_eval", "answer": "answer", "id": "sample_index"},
         prompt="mathverse"),
    _vqa("mathvista", "AI4Math/MathVista", "MathVista", "options_list", split="testmini",
         fields={"image": "decoded_image", "question": "question", "options": "choices", "answer": "answer",
                 "id": "pid", "answer_format": "text"}, prompt="mathvista"),
    _vqa("seed-bench", "lmms-lab/SEED-Bench", "SEED", "choice_columns",
         fields={"image": "image", "question": "question", "answer": "answer", "id": "question_id",
                 "choices": ("choice_a", "choice_b", "choice_c", "choice_d"), "keep": ("data_type", "image")},
         description="image questions only (data_type == 'image')"),
    _vqa("mme", "lmms-lab/MME", "MME", "yes_no",
         fields={"image": "image", "question": "question", "answer": "answer", "id": "question_id",
                 "category": "category"}, prompt="mme", description="yes/no questions as 'A. No / B. Yes'"),
    _vqa("realworldqa", "lmms-lab/RealWorldQA", "RealWorldQA", "options_in_text",
         fields={"image": "image", "question": "question", "answer": "answer"}, resize=1000, prompt="verbatim",
         description="resized to 1000x1000, not filtered; the question carries its options"),
    # CAPTURe's real split: a JSON array (real_metadata.json) + real_dataset.zip's images; the
    # question is TTRV's Appendix C template around the `object` noun.
    DatasetSpec("capture", "counting-freeform", "atinp/CAPTURe", "smape", "Capture", reader="capture",
                fields={"image": "image_file", "object": "object", "answer": "ground_truth"}, prompt="capture",
                local={"files": "real_metadata.json", "image_dir": "dataset"},
                description="free-form counting scored by 1 - sMAPE; local copy of the repo's files needed"),
    # CRPE relation split: jsonl rows whose `text` carries the options; images are COCO val2017
    # (and the repo's abnormal_images/) under the copy's directory.
    _vqa("crpe", "OpenGVLab/CRPE", "CRPE", "options_in_text",
         fields={"image": "image", "question": "text", "answer": "correct_option", "id": "question_id"},
         prompt="crpe", local={"files": "crpe_relation.jsonl"},
         description="local copy: crpe_relation.jsonl + the COCO images it names"),
    _vqa("ai2d", "lmms-lab/ai2d", "AI2D", "options_list",
         fields={"image": "image", "question": "question", "options": "options", "answer": "answer",
                 "answer_format": "index"}),
    _vqa("mathvision", "MathLLMs/MathVision", "MathVision", "options_list",
         fields={"image": "decoded_image", "question": "question", "options": "options", "answer": "answer",
                 "id": "id"}),
    _vqa("logicvista", "lscpku/LogicVista", "LogicVista", "options_in_text",
         fields={"image": "image", "question": "question", "answer": "answer"}, prompt="in_question"),
    # ECHO (papers/echo.txt Section 4.1, Appendix A.1): two training sets the methods adapt on and four
    # targets, all in the "math" task (reasoned answer in \boxed{}, pass@k). Geometry3k: the Hub id of
    # user683/ECHO verl/data/save_as_json.py (default --dataset_name) and of MM-UPT's README; GeoQA: the
    # copy MM-UPT's README names (waltonfuture/MM-UPT), EasyR1's layout (images, problem, answer) like
    # hiyouga/geometry3k; R1-V's original (image, problem, solution "<answer> x </answer>") reads too.
    # The targets are the sizes the paper states: MathVision test 3,040, MathVista testmini 1,000,
    # MathVerse testmini 3,940 (all five versions), LogicVista 448. ECHO's code names no Hub id
    # for them; these are the benchmarks' own (MathVerse: lmms-eval's copy, whose
    # `question_for_eval` carries the choices).
    _math("geometry3k", "hiyouga/geometry3k", "Geometry3k", "math",
          {"image": "images", "question": "problem", "answer": "answer"}, split="train",
          description="training split (2,101), an adaptation source (ECHO Table 2, MM-UPT)"),
    _math("geoqa", "WaltonFuture/GEOQA_R1V_Train_8K", "GeoQA", "math",
          {"image": "images", "image_alternatives": ("image",), "question": "problem", "answer": "answer",
           "answer_alternatives": ("solution",)}, split="train",
          description="GeoQA R1-V 8K training set, an adaptation source (ECHO Table 2, MM-UPT)"),
    _math("mathvision-math", "MathLLMs/MathVision", "MathVision", "math",
          {"image": "decoded_image", "question": "question", "options": "options", "answer": "answer", "id": "id"},
          description="full test set (3,040), boxed answers, pass@k (ECHO)"),
    _math("mathverse-math", "CaraJ/MathVerse-lmmseval", "MathVerse", "math_options_in_text",
          {"image": "image", "question": "question_for_eval", "answer": "answer", "id": "sample_index"},
          split="testmini", hub_config="testmini", description="testmini (3,940), boxed answers, pass@k (ECHO)"),
    _math("mathvista-math", "AI4Math/MathVista", "MathVista", "math",
          {"image": "decoded_image", "question": "question", "options": "choices", "answer": "answer", "id": "pid",
           "answer_format": "text"}, split="testmini", description="testmini (1,000), boxed answers, pass@k (ECHO)"),
    _math("logicvista-math", "lscpku/LogicVista", "LogicVista", "math_options_in_text",
          {"image": "image", "question": "question", "answer": "answer"},
          description="448 questions, several-letter answers kept, boxed answers, pass@k (ECHO)"),
    # VR-TTRL Table 2: the 8 splits (segmentation by gIoU, counting by count accuracy); boxes,
    # points and masks stay in original pixel coordinates.
    _grounding("refcoco", "lmms-lab/RefCOCO", "RefCOCO-val", "val", "refer", REFCOCO),
    _grounding("refcoco-testA", "lmms-lab/RefCOCO", "RefCOCO-testA", "testA", "refer", REFCOCO),
    _grounding("refcoco+", "lmms-lab/RefCOCOplus", "RefCOCO+-val", "val", "refer", REFCOCO),
    _grounding("refcoco+-testA", "lmms-lab/RefCOCOplus", "RefCOCO+-testA", "testA", "refer", REFCOCO),
    _grounding("refcocog", "lmms-lab/RefCOCOg", "RefCOCOg-test", "test", "refer", REFCOCO),
    _grounding("reasonseg", "Ricky06662/ReasonSeg_val", "ReasonSeg-val", "test", "mask", REASONSEG),
    _grounding("reasonseg-test", "Ricky06662/ReasonSeg_test", "ReasonSeg-test", "test", "mask", REASONSEG),
    # VR-TTRL Table 11's training splits (the offline variant adapts on them; their manifest rows are
    # split "train"). Neither has a Hub copy in these layouts (lmms-lab publishes RefCOCOg val / test
    # only; ReasonSeg's 239 training images are LISA's release): config `data.sources.<name>.path`.
    _grounding("refcocog-train", "local:refcocog-train", "RefCOCOg-train", "train", "refer", REFCOCO,
               description="RefCOCOg (umd) train in lmms-lab's RefCOCOg columns; local copy needed"),
    _grounding("reasonseg-train", "local:reasonseg-train", "ReasonSeg-train", "train", "mask", REASONSEG,
               description="ReasonSeg train in Seg-Zero's ReasonSeg_val columns (image, text, mask); local copy needed"),
    _grounding("pixmo-count", "allenai/pixmo-count", "PixMo-Count-val", "validation", "count_points",
               {"image": "image", "query": "label", "count": "count", "points": "points"}, task="counting",
               description="images by URL: a local copy with an `image` column is needed offline"),
    _grounding("pixmo-count-test", "allenai/pixmo-count", "PixMo-Count-test", "test", "count_points",
               {"image": "image", "query": "label", "count": "count", "points": "points"}, task="counting",
               description="images by URL: a local copy with an `image` column is needed offline"),
    _grounding("countbench", "vikhyatk/CountBenchQA", "CountBench-test", "test", "count_question",
               {"image": "image", "question": "question", "answer": "number"}, task="counting"),
]

REGISTRY: dict[str, DatasetSpec] = {spec.name: spec for spec in _ENTRIES}


def get_dataset(name: str) -> DatasetSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; registered: {', '.join(sorted(REGISTRY))}") from None
