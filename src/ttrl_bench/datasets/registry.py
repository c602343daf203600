"""Dataset registry: one entry per dataset (split), named in config (`datasets:`) and by the CLI.

An entry says where the data comes from, how its rows are read and how it is scored; the code
that loads a source lives in `sources.py`, its readers in `readers/`, the shared preprocessing in
`preprocessing.py`.
Sources are the Hub ids public harnesses use (lmms-eval, clip-benchmark); each entry's `fields`
(our name -> the source's column) is what those harnesses, the dataset cards and the authors'
scripts say (read, not downloaded: this machine is offline; each entry's `evidence` names where,
docs/dataset-evidence.md the whole audit), and a config can override it. A local copy always
works: config `data.sources.<name>: {path: ..., fields: {...}}`.
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
    reader: str = ""  # how a row becomes a sample (readers.rows.ROW_READERS); "" for bundled sets
    fields: dict = field(default_factory=dict)  # our field -> the source's column
    resize: int | None = None  # square side to resize to instead of filtering (RealWorldQA)
    prompt: str = "options"  # prompt style of TTRV Appendix C (preprocessing.VQA_PROMPTS, "texture" for DTD)
    local: dict = field(default_factory=dict)  # defaults for a local copy: `files` (glob), `image_dir`
    # TTRV's 1000x1000 limit (Appendix B); ECHO keeps every image (user683/ECHO verl/data/save_as_json.py
    # writes them all, standalone_inference.py only enlarges images under 28 px: evaluation.math.min_image_side)
    filter_resolution: bool = True
    # a Hub repository of plain files (CAPTURe, CRPE) that `load_dataset(source, split=...)` cannot
    # read: the files a local copy needs; the Hub path stops naming them and `data.sources.<name>.path`
    hub_files: tuple[str, ...] = ()
    # where the layout above was read (repository, path, commit) and what it says; docs/dataset-evidence.md
    evidence: str = ""

    @property
    def manifest_split(self) -> str:
        """The manifest's split of this entry's rows: "train" for a training set, else "test"."""
        return "train" if self.split == "train" else "test"


DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


# Column names as the public harnesses read them (lmms-eval, clip_benchmark, Seg-Zero, CAPTURe;
# checked against dataset cards and harness code, not downloads; override with config
# `data.sources.<name>.fields`). Not columns: `answer_format`, how a source states the correct
# option: "letter" (default), "index" (AI2D) or "text" (MathVista); `letter_range`, options named
# by the question's letters when they are drawn in the image (LogicVista).
IMAGE_LABEL = {"image": "image", "label": "label"}
# clip-benchmark shards (CLIP_benchmark webdataset_builder.py): `<split>/<n>.tar` of s%07d.<image ext>
# + s%07d.cls (an int label), `<split>/nshards.txt`, classnames.txt at the root; `datasets` names
# the columns by extension and adds __key__ / __url__. The extension is the source files' (jpg) or
# the converter's default --image-format webp.
WDS_JPG = {"image": "jpg", "image_alternatives": ("webp", "png", "jpeg"), "label": "cls", "id": "__key__"}
WDS_WEBP = {"image": "webp", "image_alternatives": ("jpg", "png", "jpeg"), "label": "cls", "id": "__key__"}
WDS = WDS_JPG
REFCOCO = {"image": "image", "expressions": "answer", "bbox": "bbox", "segmentation": "segmentation"}
REASONSEG = {"image": "image", "query": "text", "mask": "mask"}
REFCOCO_EV = ("lmms-eval lmms_eval/tasks/refcoco*/_default_template_seg_yaml @75571cf: lmms-lab-encoder/RefCOCO, RefCOCOplus, RefCOCOg "
              "(moved from lmms-lab, PR #1416 4be7ee0); HF card lmms-lab/RefCOCO: question_id, image, question, answer "
              "(list), segmentation (flat float polygon), bbox [x,y,w,h], iscrowd, file_name; splits val/test/testA/testB")
# VisionReasoner's evaluation sets (the `authors` rows of VR-TTRL Table 2): one row per object
VISIONREASONER_SEG = {"image": "image", "query": "text", "mask": "mask", "bbox": "bbox", "id": "ann_id"}
VISIONREASONER_COUNT = {"image": "image", "query": "text", "count": "count", "id": "ann_id"}
VISIONREASONER_EV = ("dvlab-research/VisionReasoner @a455092 README.md:243-259 (evaluation commands: Ricky06662/refcoco_testA, "
                     "refcocoplus_testA, refcocog_test, ReasonSeg_val/test, counting_pixmo_validation, counting_pixmo_test, "
                     "counting_countbench); load_dataset(path, split='test')")
VISIONREASONER_SEG_EV = (VISIONREASONER_EV + "; evaluation/evaluation_segmentation.py:92-101 reads image, text "
                         "(lower-cased, stripped), image_id, ann_id, mask (a bool HxW list), img_height, img_width, bbox "
                         "(where present; [x1,y1,x2,y2] by compute_bbox_iou:38-59); one row per object (refcoco_testA "
                         "1,975 rows per issue 35; not downloaded here)")
VISIONREASONER_COUNT_EV = (VISIONREASONER_EV + "; evaluation/evaluation_count.py:56-64 reads image, text (lower-cased, "
                           "stripped), image_id, ann_id, img_height, img_width, count; the text's wording not seen")
SEGZERO_EV = ("dvlab-research/Seg-Zero evaluation_scripts/create_reasonseg_hf.py @42a3345: image, mask "
              "Sequence(Sequence(bool)), text, image_id, ann_id, img_height, img_width, pushed as split test; "
              "evaluation.py reads load_dataset(path, split='test')")


def _recognition(name, source, paper_name, split="test", fields=WDS, **kw) -> DatasetSpec:
    return DatasetSpec(name, "recognition", source, "accuracy", paper_name, split=split, reader="classification",
                       fields=fields, **kw)


def _vqa(name, source, paper_name, reader, fields, split="test", **kw) -> DatasetSpec:
    return DatasetSpec(name, "vqa", source, "accuracy", paper_name, split=split, reader=reader, fields=fields, **kw)


def _math(name, source, paper_name, reader, fields, split="test", **kw) -> DatasetSpec:
    return DatasetSpec(name, "math", source, "pass@k", paper_name, split=split, reader=reader, fields=fields,
                       prompt="math", filter_resolution=False, **kw)


def _grounding(name, source, paper_name, split, reader, fields, task="grounding", **kw) -> DatasetSpec:
    """A VR-TTRL set. No resolution filter: TTRV's 1,000 px limit (Appendix B) is TTRV's; VR-TTRL and
    VisionReasoner keep every image (VisionReasoner evaluation/evaluation_segmentation.py:75-81 scores
    every row of its test split; ReasonSeg draws on 1296 x 968 ScanNet frames)."""
    metric = "giou_ciou" if task == "grounding" else "count_accuracy"
    return DatasetSpec(name, task, source, metric, paper_name, split=split, reader=reader, fields=fields,
                       filter_resolution=False, **kw)


_ENTRIES = [
    # Bundled demo sets (scikit-learn's real handwritten digits).
    DatasetSpec("demo-digits", "recognition", "bundled:sklearn.datasets.load_digits", "accuracy", "Digits",
                classes=DIGIT_NAMES, description="1,797 handwritten digits (8x8, upscaled), 4-way MCQ",
                evidence="bundled: sklearn.datasets.load_digits (images, target), read by readers.bundled.read_digits"),
    DatasetSpec("demo-digit-scenes", "grounding", "bundled:sklearn.datasets.load_digits:scenes", "giou_ciou",
                "Digit scenes", description="2-3 real digits on a 112 px canvas; find one by name",
                evidence="bundled: built from sklearn.datasets.load_digits by readers.bundled.read_digit_scenes"),
    # the scenes' training split: where VR-TTRL Table 11's offline variant trains in config/cpu-methods.yaml
    DatasetSpec("demo-digit-scenes-train", "grounding", "bundled:sklearn.datasets.load_digits:scenes", "giou_ciou",
                "Digit scenes (train)", split="train", description="the 600 training scenes of demo-digit-scenes",
                evidence="bundled: built from sklearn.datasets.load_digits by readers.bundled.read_digit_scenes"),
    # TTRV Table 1: recognition as 4-way MCQ (Appendix A, after Gavrikov et al. 2024). Class names
    # come from the source's ClassLabel, its classnames.txt (clip-benchmark), or config
    # `data.sources.<name>.class_names` (ImageNet folders are named by WordNet id).
    _recognition("imagenet", "local:imagefolder", "ImageNet", split="val", fields=IMAGE_LABEL,
                 description="ImageNet val as an image folder (class folders) + the 1000 class names",
                 evidence="no Hub copy: local image folder (class folders named by WordNet id); names from config"),
    _recognition("imagenet-v2", "clip-benchmark/wds_imagenetv2", "ImageNet-V2", fields=WDS_WEBP,
                 evidence="CLIP_benchmark clip_benchmark/datasets/builder.py build_wds_dataset @48de38c: test/<n>.tar + "
                          "test/nshards.txt + classnames.txt; image ext webp (a loader's key_dict for this repo, found "
                          "by find_string; shard content not seen)"),
    _recognition("imagenet-r", "clip-benchmark/wds_imagenet-r", "ImageNet-R", fields=WDS_JPG,
                 evidence="CLIP_benchmark builder.py @48de38c (layout as imagenet-v2); jpg per the same key_dict; "
                          "HF tree: test/, classnames.txt, zeroshot_classification_templates.txt; 200 classes"),
    _recognition("imagenet-sketch", "clip-benchmark/wds_imagenet_sketch", "ImageNet-S", fields=WDS_JPG,
                 evidence="CLIP_benchmark builder.py @48de38c (layout as imagenet-v2); jpg per the same key_dict"),
    _recognition("imagenet-a", "clip-benchmark/wds_imagenet-a", "ImageNet-A", fields=WDS_JPG,
                 evidence="HF tree clip-benchmark/wds_imagenet-a: test/0..3.tar + test/nshards.txt, classnames.txt; "
                          "jpg per the same key_dict; 200 classes"),
    _recognition("food101", "ethz/food101", "Food101", split="validation", fields=IMAGE_LABEL,
                 evidence="HF viewer ethz/food101: splits train 75.8k / validation 25.3k (no test); card: image, "
                          "label ClassLabel apple_pie..."),
    _recognition("dtd", "clip-benchmark/wds_vtab-dtd", "DTD", prompt="texture", fields=WDS_WEBP,
                 evidence="CLIP_benchmark builder.py @48de38c: train/ and test/ shard folders (only test/ read); "
                          "webp is webdataset_builder.py's default --image-format (shard content not seen)"),
    _recognition("resisc45", "clip-benchmark/wds_vtab-resisc45", "Resisc45", fields=WDS_WEBP,
                 evidence="HF viewer: splits train 18.9k / test 6.3k (only test/ read); webp as dtd (not seen)"),
    # TTRV Table 2: VQA with the official options + the option-letter instruction (Appendix C).
    # lmms-eval's copy; `question_for_eval` is the question with its "Choices:\nA:..." lines
    _vqa("mathverse", "CaraJ/MathVerse-lmmseval", "MathVerse", "options_in_text", split="testmini",
         hub_config="testmini",
         fields={"image": "image", "question": "question_for_eval", "answer": "answer", "id": "sample_index"},
         prompt="mathverse",
         evidence="lmms-eval lmms_eval/tasks/mathverse/mathverse_testmini.yaml @75571cf: CaraJ/MathVerse-lmmseval, dataset_name testmini, "
                  "split testmini (3,940 rows per HF viewer); utils.py reads question_for_eval, answer, sample_index"),
    _vqa("mathvista", "AI4Math/MathVista", "MathVista", "options_list", split="testmini",
         fields={"image": "decoded_image", "question": "question", "options": "choices", "answer": "answer",
                 "id": "pid", "answer_format": "text"}, prompt="mathvista",
         evidence="lmms-eval lmms_eval/tasks/mathvista/mathvista_testmini_cot.yaml @75571cf: AI4Math/MathVista split testmini; utils.py: "
                  "decoded_image, choices (None for free_form), answer = the option text"),
    _vqa("seed-bench", "lmms-lab-encoder/SEED-Bench", "SEED", "choice_columns",
         fields={"image": "image", "question": "question", "answer": "answer", "id": "question_id",
                 "choices": ("choice_a", "choice_b", "choice_c", "choice_d"), "keep": ("data_type", "image")},
         description="image questions only (data_type == 'image')",
         evidence="lmms-eval lmms_eval/tasks/seedbench/seedbench.yaml @75571cf: lmms-lab-encoder/SEED-Bench (moved from lmms-lab, PR "
                  "#1416 4be7ee0), test split; utils.py: image a list, choice_a..d, answer letter, data_type"),
    _vqa("mme", "lmms-lab-encoder/MME", "MME", "yes_no",
         fields={"image": "image", "question": "question", "answer": "answer", "id": "question_id",
                 "category": "category"}, prompt="mme", description="yes/no questions as 'A. No / B. Yes'",
         evidence="lmms-eval lmms_eval/tasks/mme/mme.yaml @75571cf: lmms-lab-encoder/MME (moved, PR #1416), test split; utils.py: "
                  "question, answer Yes/No, category, question_id shared by an image's two questions"),
    _vqa("realworldqa", "lmms-lab-encoder/RealWorldQA", "RealWorldQA", "options_in_text",
         fields={"image": "image", "question": "question", "answer": "answer"}, resize=1000, prompt="verbatim",
         description="resized to 1000x1000, not filtered; the question carries its options",
         evidence="lmms-eval lmms_eval/tasks/realworldqa/realworldqa.yaml @75571cf: lmms-lab-encoder/RealWorldQA (moved, PR #1416), test "
                  "split; utils.py: question with options + instruction, answer a letter or open-ended"),
    # CAPTURe's real split: a JSON array (real_metadata.json) + real_dataset.zip's images (the zip's
    # folder `dataset/`, the authors' README renames it real_dataset/; the zip itself reads too); the
    # question is TTRV's Appendix C template around the `object` noun.
    DatasetSpec("capture", "counting-freeform", "atinp/CAPTURe", "smape", "Capture", reader="capture",
                fields={"image": "image_file", "object": "object", "answer": "ground_truth"}, prompt="capture",
                local={"files": "real_metadata.json", "image_dir": ("dataset", "real_dataset"),
                       "image_zip": "real_dataset.zip"},
                hub_files=("real_metadata.json", "real_dataset.zip"),
                description="free-form counting scored by 1 - sMAPE; local copy of the repo's files needed",
                evidence="atinpothiraj/CAPTURe @0effae3: real_metadata.json (824 objects: image_file, ground_truth "
                         "int, object, bbox, ...), README: unzip real_dataset.zip -> dataset/; VLMEvalKit "
                         "vlmeval/dataset/utils/capture.py @e9df441 (branch) does the same via hf_hub_download"),
    # CRPE relation split: jsonl rows whose `text` carries the options; `image` is
    # abnormal_images/<f>.jpg (in the repo) or coco/val2017/<f>.jpg (COCO val2017, not in the repo).
    _vqa("crpe", "OpenGVLab/CRPE", "CRPE", "options_in_text",
         fields={"image": "image", "question": "text", "answer": "correct_option", "id": "question_id"},
         prompt="crpe", local={"files": "crpe_relation.jsonl"},
         hub_files=("crpe_relation.jsonl", "abnormal_images/"),
         description="local copy: crpe_relation.jsonl + abnormal_images/ from the repo, and COCO val2017 "
                     "placed as coco/val2017/ under the copy (or a folder of `data.sources.crpe.image_dir`)",
         evidence="HF tree OpenGVLab/CRPE: crpe_{exist,relation}{,_meta}.jsonl + abnormal_images/ (no split); "
                  "OpenGVLab/all-seeing all-seeing-v2/llava/eval/eval_crpe.py @5cb8cea: question_id, category, "
                  "correct_option, text; lmms-eval PR #1354 b71d25a: 7,576 rows, 537 COCO val2017 + 544 abnormal images"),
    _vqa("ai2d", "lmms-lab-encoder/ai2d", "AI2D", "options_list",
         fields={"image": "image", "question": "question", "options": "options", "answer": "answer",
                 "answer_format": "index"},
         evidence="lmms-eval lmms_eval/tasks/ai2d/ai2d.yaml @75571cf: lmms-lab-encoder/ai2d (moved, PR #1416), test split; utils.py "
                  "ai2d_doc_to_target: options[int(answer)], so answer is an index string"),
    _vqa("mathvision", "MathLLMs/MathVision", "MathVision", "options_list",
         fields={"image": "decoded_image", "question": "question", "options": "options", "answer": "answer",
                 "id": "id"},
         evidence="lmms-eval lmms_eval/tasks/mathvision/mathvision_test.yaml @75571cf: MathLLMs/MathVision split test; utils.py: "
                  "decoded_image, options (empty: free-form), answer a letter when options"),
    _vqa("logicvista", "lscpku/LogicVista", "LogicVista", "options_in_text",
         fields={"image": "image", "question": "question", "answer": "answer", "letter_range": True},
         prompt="in_question",
         evidence="lmms-eval lmms_eval/tasks/logicvista/reasoning/logicvista_thinking.yaml @75571cf: lscpku/LogicVista split test; "
                  "Yijia-Xiao/LogicVista data/dataset.json @e5795f1: 448 questions, none with option lines: "
                  "options inline '(A) x (B) y' or in the image ('(A, B, C, or D)'); answers 'C', 'A, C', '3'"),
    # ECHO (arXiv 2602.02150 Section 4.1, Appendix A.1): two training sets the methods adapt on and four
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
          description="training split (2,101), an adaptation source (ECHO Table 2, MM-UPT)",
          evidence="EasyR1 layout (images: list of Image, problem with '<image>', answer), train split; not "
                   "re-read in this audit (no card or loader of hiyouga/geometry3k found by the search tools)"),
    _math("geoqa", "WaltonFuture/GEOQA_R1V_Train_8K", "GeoQA", "math",
          {"image": "images", "image_alternatives": ("image",), "question": "problem", "answer": "answer",
           "answer_alternatives": ("solution",)}, split="train",
          description="GeoQA R1-V 8K training set, an adaptation source (ECHO Table 2, MM-UPT)",
          evidence="WaltonFuture's EasyR1 sets (ZeroBench, DetectionVQA cards): images/problem/answer, train; "
                   "this repo's own card not found; leonardPKU/GEOQA_R1V_Train_8K (R1-V original) on the Hub"),
    _math("mathvision-math", "MathLLMs/MathVision", "MathVision", "math",
          {"image": "decoded_image", "question": "question", "options": "options", "answer": "answer", "id": "id"},
          description="full test set (3,040), boxed answers, pass@k (ECHO)",
          evidence="lmms-eval lmms_eval/tasks/mathvision/mathvision_test.yaml @75571cf: split test; decoded_image, options, answer letter"),
    _math("mathverse-math", "CaraJ/MathVerse-lmmseval", "MathVerse", "math_options_in_text",
          {"image": "image", "question": "question_for_eval", "answer": "answer", "id": "sample_index"},
          split="testmini", hub_config="testmini", description="testmini (3,940), boxed answers, pass@k (ECHO)",
          evidence="lmms-eval lmms_eval/tasks/mathverse/mathverse_testmini.yaml @75571cf: config testmini, split testmini (3,940 rows)"),
    _math("mathvista-math", "AI4Math/MathVista", "MathVista", "math",
          {"image": "decoded_image", "question": "question", "options": "choices", "answer": "answer", "id": "pid",
           "answer_format": "text"}, split="testmini", description="testmini (1,000), boxed answers, pass@k (ECHO)",
          evidence="lmms-eval lmms_eval/tasks/mathvista/mathvista_testmini_cot.yaml @75571cf: split testmini; answer the option text"),
    _math("logicvista-math", "lscpku/LogicVista", "LogicVista", "math_options_in_text",
          {"image": "image", "question": "question", "answer": "answer", "letter_range": True},
          description="448 questions, several-letter answers kept, boxed answers, pass@k (ECHO)",
          evidence="Yijia-Xiao/LogicVista data/dataset.json @e5795f1 (see logicvista): letters from the question"),
    # VR-TTRL Table 2: the 8 splits (segmentation by gIoU, counting by count accuracy); boxes,
    # points and masks stay in original pixel coordinates.
    _grounding("refcoco", "lmms-lab-encoder/RefCOCO", "RefCOCO-val", "val", "refer", REFCOCO, evidence=REFCOCO_EV),
    _grounding("refcoco-testA", "lmms-lab-encoder/RefCOCO", "RefCOCO-testA", "testA", "refer", REFCOCO,
               evidence=REFCOCO_EV),
    _grounding("refcoco+", "lmms-lab-encoder/RefCOCOplus", "RefCOCO+-val", "val", "refer", REFCOCO, evidence=REFCOCO_EV),
    _grounding("refcoco+-testA", "lmms-lab-encoder/RefCOCOplus", "RefCOCO+-testA", "testA", "refer", REFCOCO,
               evidence=REFCOCO_EV),
    _grounding("refcocog", "lmms-lab-encoder/RefCOCOg", "RefCOCOg-test", "test", "refer", REFCOCO,
               evidence=REFCOCO_EV + "; RefCOCOg splits val 7.57k / test 5.02k (HF viewer)"),
    _grounding("reasonseg", "Ricky06662/ReasonSeg_val", "ReasonSeg-val", "test", "mask", REASONSEG, evidence=SEGZERO_EV),
    _grounding("reasonseg-test", "Ricky06662/ReasonSeg_test", "ReasonSeg-test", "test", "mask", REASONSEG,
               evidence=SEGZERO_EV),
    # VisionReasoner's own evaluation copies of the VR-TTRL Table 2 splits (dvlab-research/VisionReasoner
    # @a455092 evaluation/): one row per object where the lmms-lab copies above have one per referring
    # expression, and its own counting sets. For the `authors` protocol (docs/protocols.md "VR-TTRL"); the
    # lmms-lab / allenai / vikhyatk entries above stay for `clean`. ReasonSeg is already its copy (reasonseg).
    _grounding("vr-refcoco-testA", "Ricky06662/refcoco_testA", "RefCOCO-testA", "test", "mask", VISIONREASONER_SEG,
               description="VisionReasoner's RefCOCO testA: one row per object", evidence=VISIONREASONER_SEG_EV),
    _grounding("vr-refcoco+-testA", "Ricky06662/refcocoplus_testA", "RefCOCO+-testA", "test", "mask",
               VISIONREASONER_SEG, description="VisionReasoner's RefCOCO+ testA: one row per object",
               evidence=VISIONREASONER_SEG_EV),
    _grounding("vr-refcocog", "Ricky06662/refcocog_test", "RefCOCOg-test", "test", "mask", VISIONREASONER_SEG,
               description="VisionReasoner's RefCOCOg (umd) test: one row per object", evidence=VISIONREASONER_SEG_EV),
    _grounding("vr-pixmo-count", "Ricky06662/counting_pixmo_validation", "PixMo-Count-val", "test", "count_text",
               VISIONREASONER_COUNT, task="counting", description="VisionReasoner's PixMo-Count validation copy",
               evidence=VISIONREASONER_COUNT_EV),
    _grounding("vr-pixmo-count-test", "Ricky06662/counting_pixmo_test", "PixMo-Count-test", "test", "count_text",
               VISIONREASONER_COUNT, task="counting", description="VisionReasoner's PixMo-Count test copy",
               evidence=VISIONREASONER_COUNT_EV),
    _grounding("vr-countbench", "Ricky06662/counting_countbench", "CountBench-test", "test", "count_text",
               VISIONREASONER_COUNT, task="counting", description="VisionReasoner's CountBench copy",
               evidence=VISIONREASONER_COUNT_EV),
    # VR-TTRL Table 11's training splits (the offline variant adapts on them; their manifest rows are
    # split "train"). Neither has a Hub copy in these layouts (lmms-lab publishes RefCOCOg val / test
    # only; ReasonSeg's 239 training images are LISA's release): config `data.sources.<name>.path`.
    _grounding("refcocog-train", "local:refcocog-train", "RefCOCOg-train", "train", "refer", REFCOCO,
               description="RefCOCOg (umd) train in lmms-lab's RefCOCOg columns; local copy needed",
               evidence="no Hub copy in this layout (lmms-lab RefCOCOg has val/test only); columns as refcocog"),
    _grounding("reasonseg-train", "local:reasonseg-train", "ReasonSeg-train", "train", "mask", REASONSEG,
               description="ReasonSeg train in Seg-Zero's ReasonSeg_val columns (image, text, mask); local copy needed",
               evidence="no Hub copy; columns as Seg-Zero's create_reasonseg_hf.py writes them (see reasonseg)"),
    _grounding("pixmo-count", "allenai/pixmo-count", "PixMo-Count-val", "validation", "count_points",
               {"image": "image", "query": "label", "count": "count", "points": "points"}, task="counting",
               description="images by URL: a local copy with an `image` column is needed offline",
               evidence="HF card allenai/pixmo-count: image_url, image_sha256, count int32, points `sequence: {x, y}` (loads as a dict of lists), label; splits validation 540 / train / test 540; no image column"),
    _grounding("pixmo-count-test", "allenai/pixmo-count", "PixMo-Count-test", "test", "count_points",
               {"image": "image", "query": "label", "count": "count", "points": "points"}, task="counting",
               description="images by URL: a local copy with an `image` column is needed offline",
               evidence="HF card allenai/pixmo-count: image_url, image_sha256, count int32, points `sequence: {x, y}` (loads as a dict of lists), label; splits validation 540 / train / test 540; no image column"),
    _grounding("countbench", "vikhyatk/CountBenchQA", "CountBench-test", "test", "count_question",
               {"image": "image", "question": "question", "answer": "number"}, task="counting",
               evidence="lmms-eval lmms_eval/tasks/countbenchqa/countbenchqa.yaml @75571cf: vikhyatk/CountBenchQA split test; utils.py: "
                        "image, text, question, number"),
]

REGISTRY: dict[str, DatasetSpec] = {spec.name: spec for spec in _ENTRIES}


def register_dataset(spec: DatasetSpec) -> None:
    """A new dataset entry (docs/extending.md), e.g. `_vqa(...)` for multiple choice; its `evidence` says where
    its layout was read (for a local copy of your own: your files)."""
    if spec.name in REGISTRY:
        raise ValueError(f"dataset {spec.name!r} is registered already")
    if not spec.evidence:
        raise ValueError(f"dataset {spec.name!r}: give its `evidence` (where its layout was read)")
    REGISTRY[spec.name] = spec


def get_dataset(name: str) -> DatasetSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; registered: {', '.join(sorted(REGISTRY))}") from None
