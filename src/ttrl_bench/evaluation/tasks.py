"""What differs between task kinds, in one place: how an output is parsed, what the gold answer
is, how one prediction is scored, and the dataset-level metrics. Used by greedy evaluation and
by the rewards' training log alike."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ..datasets.preprocessing import (
    GROUNDING_QUERIES,
    MATH_SUFFIX,
    grounding_prompt,
    to_model_view,
    to_original,
    visionreasoner_query,
)
from ..datasets.registry import get_dataset
from ..rewards import grounding
from .extraction import (
    answer_region,
    authors_answer,
    authors_correct,
    extract_choice,
    extract_short_answer,
    short_answers_match,
    ttrv_choice,
)
from .math_answers import (AUTHORS_EVAL_SYSTEM, answer_text, authors_answer_text, boxed_answer, lenient_correct,
                           letters_of, normalize_math_answer, numbers_close)
from .metrics import giou_ciou_from_counts, mme_score, pass_at_k, smape_score, verl_mean_at


class MCQTask:
    """Multiple choice (recognition, VQA): the answer is an option letter. A VQA question without
    options (MathVista "free_form", ...) is answered free-form and compared as a short answer.

    `family` groups tasks whose answers the same methods can vote on: "mcq" (discrete answers:
    letters, numbers) or "grounding" (object lists); config sections and presets use it."""

    family = "mcq"
    primary = "accuracy"

    def __init__(self, choice_parser: str = "robust"):
        # config evaluation.mcq.choice_parser: "robust" = extract_choice, "ttrv" = TTRV's letters, unreadable
        # outputs as failures; "authors" = TTRV's parser and grading as their votes and evaluation use them
        if choice_parser not in CHOICE_PARSERS:
            raise ValueError(f"evaluation.mcq.choice_parser must be one of {', '.join(CHOICE_PARSERS)}, got {choice_parser!r}")
        self.choice_parser = choice_parser
        self.choose = ttrv_choice if choice_parser == "ttrv" else extract_choice

    def parse(self, text: str, row: dict):
        if self.choice_parser == "authors":  # a letter, or the output's own text: never None
            return authors_answer(text)
        options = list(row["options"])
        return self.choose(text, options) if options else extract_short_answer(text)

    def gold(self, row: dict):
        return row["answer"]

    def score(self, parsed, gold) -> float:
        if self.choice_parser == "authors":
            return float(authors_correct(parsed, gold))
        return float(short_answers_match(parsed, gold))

    def format_rewards(self, texts: list[str], **format_params) -> list[float]:
        return [0.0] * len(texts)

    def prediction_columns(self, parsed: list, samples: pd.DataFrame) -> dict:
        gold = list(samples["answer"])
        columns = {"parsed": parsed, "gold": gold, "correct": [bool(self.score(p, g)) for p, g in zip(parsed, gold)]}
        if {"prompt", "options"} <= set(samples):  # the text each item was given and its options, for rescoring
            columns.update(prompt_text=list(samples["prompt"]), options=[list(o) for o in samples["options"]])
        return columns

    def metrics(self, predictions: pd.DataFrame) -> dict[str, float]:
        return {"accuracy": 100 * float(predictions["correct"].mean()), **rescored_metrics(predictions)}


# How option letters are read (config evaluation.mcq.choice_parser; the protocols set it).
CHOICE_PARSERS = ("robust", "ttrv", "authors")


def rescored_metrics(predictions: pd.DataFrame) -> dict[str, float]:
    """The same generations scored both ways (issue 34): our parser's accuracy, the TTRV authors' parser's,
    and the authors' metric, verl's mean@n over prompt-text groups (metrics.verl_mean_at: `authors_mean@1`,
    and `authors_mean@max` for the largest group size, their val-core). Empty for predictions written
    before these columns existed (`ttrl-bench rescore` needs `prompt_text` and `options`)."""
    if not {"raw_output", "gold", "options", "prompt_text"} <= set(predictions):
        return {}
    rows = predictions.to_dict("records")

    def correct(parser: str) -> list[float]:  # each row as MCQTask reads and scores it under that parser
        task = MCQTask(parser)
        return [task.score(task.parse(r["raw_output"], r), r["gold"]) for r in rows]

    ours, theirs = correct("robust"), correct("authors")
    means = verl_mean_at([r["prompt_text"] for r in rows], [100.0 * t for t in theirs])
    out = {"accuracy_robust_parser": 100 * sum(ours) / len(rows), "accuracy_authors_parser": 100 * sum(theirs) / len(rows),
           "authors_mean@max": means[max(means)], "authors_max_group": float(max(means))}
    if 1 in means:
        out["authors_mean@1"] = means[1]
    return out


class MMETask(MCQTask):
    """MME: accuracy as TTRV reports it, plus MME's official score (acc + acc+) as an extra."""

    def prediction_columns(self, parsed: list, samples: pd.DataFrame) -> dict:
        columns = super().prediction_columns(parsed, samples)
        if "category" in samples:
            columns.update(category=list(samples["category"]), source_image=list(samples["source_id"]))
        return columns

    def metrics(self, predictions: pd.DataFrame) -> dict[str, float]:
        metrics = super().metrics(predictions)
        if "category" in predictions:
            metrics.update(mme_score(predictions["category"], predictions["source_image"], predictions["correct"]))
        return metrics


def _objects(boxes, points) -> list[dict]:
    return [{"bbox_2d": [float(v) for v in b], "point_2d": [float(v) for v in p]} for b, p in zip(boxes, points)]


def box_mask(objects: list[dict] | None, width: int, height: int) -> np.ndarray:
    """Union of the objects' boxes as a boolean mask (the "box mask" stand-in for SAM2 masks)."""
    mask = np.zeros((height, width), dtype=bool)
    for obj in grounding.valid_objects(objects):
        x1, y1, x2, y2 = obj["bbox_2d"]
        x1, x2 = sorted((int(round(x1)), int(round(x2))))
        y1, y2 = sorted((int(round(y1)), int(round(y2))))
        mask[max(0, y1) : min(height, y2), max(0, x1) : min(width, x2)] = True
    return mask


def gold_mask(row: dict, objects: list[dict]) -> np.ndarray:
    """The dataset's mask (COCO RLE from preparation: RefCOCO polygons, ReasonSeg masks), else
    the union of the gold boxes (the demo's scenes)."""
    if row.get("mask"):
        from pycocotools import mask as mask_utils

        rle = json.loads(row["mask"])
        return mask_utils.decode({"size": rle["size"], "counts": rle["counts"].encode()}).astype(bool)
    return box_mask(objects, row["width"], row["height"])


class GroundingTask:
    """Referring grounding (VR-TTRL): the answer is a list of objects with a box and a point.
    Without a masker (config evaluation.grounding.sam2) the predicted masks are the predicted boxes and
    the metrics are called box_giou / box_ciou, our own metrics (results/paper_tables.py never puts them
    in a published mask cell); they are scored against the dataset's own masks where it has them.

    `input_size` (config evaluation.grounding.input_size; 840 under `authors`): the model sees the image
    resized to that square (preprocessing.model_view) and answers in its pixels. Parsed answers and the
    gold of `gold` are in the model's pixels (the rollouts' rewards and training log compare them there, as
    VisionReasoner's thresholds are meant); `prediction_columns` maps answers back to the original image
    with VisionReasoner's rounding (preprocessing.to_original) before masks and metrics. `query`
    ("as_given" or "visionreasoner": lower-cased and stripped, preprocessing.visionreasoner_query) is the
    query the prompt is built from. `view` applies both to a manifest."""

    family = "grounding"

    def __init__(self, primary: str = "box_giou", masker=None, empty_mask_iou: str = "zero",
                 input_size: int | None = None, query: str = "as_given"):
        # masker: masks from predicted objects (evaluation.masks.Sam2Masker); None -> the boxes
        self.masker = masker
        # config evaluation.grounding.empty_mask_iou (metrics.giou_ciou_from_counts)
        self.empty_mask_iou = empty_mask_iou
        self.prefix = "" if masker else "box_"
        # count_accuracy for the counting sets (PixMo-Count, CountBench)
        self.primary = primary.replace("box_", self.prefix)
        if query not in GROUNDING_QUERIES:
            raise ValueError(f"evaluation.grounding.query must be one of {', '.join(GROUNDING_QUERIES)}, got {query!r}")
        if input_size is not None and int(input_size) < 1:
            raise ValueError(f"evaluation.grounding.input_size must be a positive side in pixels, got {input_size!r}")
        self.input_size = int(input_size) if input_size else None
        self.query = query

    def view(self, samples: pd.DataFrame) -> pd.DataFrame:
        """The manifest as the model is asked: the prompt built from VisionReasoner's form of the query
        (query "visionreasoner"), and an `input_size` column the image loaders resize to."""
        if self.query == "visionreasoner" and "query" in samples:
            samples = samples.assign(prompt=[grounding_prompt(visionreasoner_query(q)) for q in samples["query"]])
        if self.input_size:
            samples = samples.assign(input_size=self.input_size)
        return samples

    def parse(self, text: str, row: dict):
        return grounding.parse_objects(text)

    def gold(self, row: dict):
        """The gold objects in the pixels the model answers in (original pixels without input_size)."""
        return to_model_view(_objects(row["boxes"], row["points"]), row["width"], row["height"], _input_size(row))

    def score(self, parsed, gold) -> float:
        return grounding.pairwise_accuracy(parsed, gold) / 3

    def format_rewards(self, texts: list[str], non_repeat: str = "output") -> list[float]:
        """VisionReasoner format rewards on the text as generated (Seg-Zero vision_reasoner.py
        `vision_reasoner_format_reward` + `vision_reasoner_non_repeat_reward`): thinking format
        + answer format + non-repeat, in [0, 4]; `non_repeat` is the reward param of that name."""
        return [
            grounding.thinking_format_reward(t) + grounding.answer_format_reward(t)
            + grounding.non_repeat_reward(t, non_repeat)
            for t in texts
        ]

    def prediction_columns(self, parsed: list, samples: pd.DataFrame) -> dict:
        rows = samples.to_dict("records")
        # answers in original pixels (VisionReasoner's rescaling from the model's view, if any)
        parsed = [to_original(p, r["width"], r["height"], _input_size(r)) for p, r in zip(parsed, rows)]
        golds = [_objects(r["boxes"], r["points"]) for r in rows]
        masker = self.masker or (lambda r, p: box_mask(p, r["width"], r["height"]))
        # Seg-Zero evaluation_visionreasoner.py: an answer the extraction cannot read whole (one
        # invalid object) is scored as an empty mask (intersection 0, union = the gold mask)
        pred_masks = [masker(r, grounding.scored_objects(p)) for p, r in zip(parsed, rows)]
        gold_masks = [gold_mask(r, g) for r, g in zip(rows, golds)]
        inter = [int((p & g).sum()) for p, g in zip(pred_masks, gold_masks)]
        union = [int((p | g).sum()) for p, g in zip(pred_masks, gold_masks)]
        # the count: VisionReasoner's len(bboxes) (vision_reasoner_model.py:671), every object with a readable box,
        # point_2d or not; none when one object has no box (its list comprehension raises, :110-121)
        from .box_metrics import complete_iou  # torch and torchvision: only where boxes are scored

        n_pred = [grounding.visionreasoner_count(p) for p in parsed]
        return {
            "parsed": [json.dumps(p) if p is not None else None for p in parsed],
            "gold": [json.dumps(g) for g in golds],
            "intersection": inter,
            "union": union,
            "n_pred": n_pred,
            # counting: one object per counted thing (count column: PixMo-Count, CountBench)
            "correct": [n == int(r.get("count", len(r["boxes"]))) for n, r in zip(n_pred, rows)],
            "bbox_hit": [bbox_hit(p, g) for p, g in zip(parsed, golds)],
            "complete_iou": [complete_iou(p, g) for p, g in zip(parsed, golds)],  # Appendix A's cIoU (box_metrics.py)
        }

    def metrics(self, predictions: pd.DataFrame) -> dict[str, float]:
        giou, ciou = giou_ciou_from_counts(list(predictions["intersection"]), list(predictions["union"]),
                                           self.empty_mask_iou)
        metrics = {f"{self.prefix}giou": 100 * giou, f"{self.prefix}ciou": 100 * ciou,
                   "count_accuracy": 100 * predictions["correct"].mean()}
        if "bbox_hit" in predictions and predictions["bbox_hit"].notna().all() and len(predictions):
            metrics["bbox_ap"] = 100 * float(predictions["bbox_hit"].astype(float).mean())
        if "complete_iou" in predictions and len(predictions):  # VR-TTRL Appendix A's definitions (box_metrics.py)
            from .box_metrics import coco_bbox_ap

            metrics["box_complete_iou"] = 100 * float(predictions["complete_iou"].mean())
            metrics["bbox_ap_coco"] = 100 * coco_bbox_ap(
                [json.loads(p) if isinstance(p, str) else None for p in predictions["parsed"]],
                [json.loads(g) for g in predictions["gold"]])
        return metrics


def _input_size(row: dict) -> int | None:
    value = row.get("input_size")
    return None if value is None or pd.isna(value) else int(value)


def bbox_hit(parsed: list | None, gold: list[dict]) -> bool | None:
    """VisionReasoner's per-row `bbox_iou`, which its calculate_iou_with_bbox.py averages and prints as
    "bbox_AP" (evaluation/evaluation_segmentation.py:123-130): 1 when any predicted box (original pixels)
    has `compute_bbox_iou` > 0.5 with the row's gold box (continuous areas, :38-59), else 0; an answer
    with an invalid object has no boxes (its parse raises: vision_reasoner_model.py:110-121). VR-TTRL
    Appendix A defines bbox_AP as COCO's AP over IoU 0.5:0.95, which needs scored detections: not
    implemented (VisionReasoner's answers carry no scores). None for a row without exactly one gold box
    (counting rows)."""
    if len(gold) != 1:
        return None
    target = gold[0]["bbox_2d"]
    return any(grounding.box_iou(o["bbox_2d"], target, pixel=False) > 0.5 for o in grounding.scored_objects(parsed))


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}


class FreeformCountTask:
    """Capture (TTRV Appendix A): a free-form count, scored by 1 - sMAPE. In the answer region
    (extraction.answer_region: <answer> tags, after </think>, the \\boxed{} value the prompt asks
    for) the first number (digits, or a number word up to twelve); none -> unparsable.
    CAPTURe reads counts with an LLM asked for the final number and `safe_string_to_int`
    (occluded_scripts/*.py), so a fractional count is unparsable there (-1): so it is here."""

    family = "mcq"  # discrete answers: the voting rewards apply
    primary = "smape_score"

    def parse(self, text: str, row: dict):
        region = answer_region(text or "")
        if match := _NUMBER.search(region):
            value = float(match.group())
            return value if value.is_integer() else None
        words = [_NUMBER_WORDS[w] for w in re.findall(r"[a-z]+", region.lower()) if w in _NUMBER_WORDS]
        return float(words[0]) if words else None

    def gold(self, row: dict):
        return float(row["answer"])

    def score(self, parsed, gold) -> float:
        return smape_score([parsed], [gold])

    def format_rewards(self, texts: list[str], **format_params) -> list[float]:
        return [0.0] * len(texts)

    def prediction_columns(self, parsed: list, samples: pd.DataFrame) -> dict:
        gold = [float(g) for g in samples["answer"]]
        return {"parsed": parsed, "gold": gold, "correct": [p is not None and p == g for p, g in zip(parsed, gold)]}

    def metrics(self, predictions: pd.DataFrame) -> dict[str, float]:
        parsed = [None if pd.isna(p) else p for p in predictions["parsed"]]
        return {"smape_score": 100 * smape_score(parsed, list(predictions["gold"])),
                "exact_accuracy": 100 * predictions["correct"].mean()}


class MathTask:
    """ECHO's math reasoning (ECHO, arXiv 2602.02150, Section 4, Tables 2 and 12): the answer is reasoned and
    put in \\boxed{}; evaluation math_answers.py explains extraction and normal forms. A question
    with options is answered by option letter(s) ("B", LogicVista's "A,C"), read from the boxed
    answer or, as in `check_correctness`, from the text of one option; without options by the
    normal form of the answer. Scored pass@k over the completions of each question (Chen et al.
    2021, evaluation.metrics.pass_at_k): a greedy evaluation is pass@1 of one completion.

    `family` "mcq": the answers are discrete values, so the majority-vote rewards apply (MM-UPT,
    ECHO vote on them). `pass_k`: the k of the pass@k metrics (config evaluation.math.pass_k).

    `grader` (config evaluation.math.grader): "exact", ours; "lenient", the ECHO authors' evaluation
    (standalone_inference.py): their extraction, the raw gold string, math_answers.lenient_correct.
    `answer_parser` (hyper-parameter answer_parser, the votes in training): "boxed", the authors' vote
    (only a whole \\boxed{} answers; an unboxed completion is unparsable, so "no_reward" gives it 0);
    anything else, our fallback chain (math_answers.answer_text)."""

    family = "mcq"
    primary = "pass@1"

    def __init__(self, pass_k: tuple[int, ...] = (1,), grader: str = "exact", answer_parser: str = "robust"):
        if grader not in MATH_GRADERS:
            raise ValueError(f"math grader must be one of {', '.join(MATH_GRADERS)}, got {grader!r}")
        self.pass_k = tuple(sorted({1, *pass_k}))
        self.grader, self.boxed_only = grader, answer_parser == "boxed"

    def parse(self, text: str, row: dict):
        if self.grader == "lenient":  # their extraction; "" (nothing found) is a parse failure
            return authors_answer_text(text) or None
        options = list(row.get("options") if row.get("options") is not None else [])
        answer = boxed_answer(text) if self.boxed_only else answer_text(text)
        if not options:
            return normalize_math_answer(answer)
        letters = letters_of(answer, options)
        if self.boxed_only:  # a boxed non-letter votes as its own value, as their string count does
            return letters if letters is not None else normalize_math_answer(answer)
        # "The answer is (C)" without a box, as extraction.extract_choice reads letters
        return letters if letters is not None else extract_choice(text, options)

    def gold(self, row: dict):
        if self.grader == "lenient":
            return None if row["answer"] is None else str(row["answer"])
        options = row.get("options")
        return str(row["answer"]) if options is not None and len(options) else normalize_math_answer(row["answer"])

    def score(self, parsed, gold) -> float:
        if parsed is None or gold is None:
            return 0.0
        if self.grader == "lenient":
            return float(lenient_correct(parsed, gold))
        return float(parsed == gold or numbers_close(parsed, gold))

    def format_rewards(self, texts: list[str], **format_params) -> list[float]:
        return [0.0] * len(texts)

    def prediction_columns(self, parsed: list, samples: pd.DataFrame) -> dict:
        """`parsed[i]`: one parsed answer (greedy) or the list of a question's k sampled ones."""
        golds = [self.gold(row) for row in samples.to_dict("records")]
        each = [p if isinstance(p, list) else [p] for p in parsed]
        right = [[self.score(p, g) == 1.0 for p in ps] for ps, g in zip(each, golds)]
        return {"parsed": [ps[0] for ps in each], "parsed_samples": each, "gold": golds,
                "n_samples": [len(ps) for ps in each], "n_correct": [sum(r) for r in right],
                "correct": [r[0] for r in right]}

    def metrics(self, predictions: pd.DataFrame) -> dict[str, float]:
        """pass@k (%) for every k of `pass_k` up to the fewest completions of a question."""
        n, c = predictions["n_samples"].astype(int), predictions["n_correct"].astype(int)
        if max(self.pass_k) > n.min():
            raise ValueError(f"pass@{max(self.pass_k)} needs at least {max(self.pass_k)} completions per question, "
                             f"got {n.min()} (config evaluation.math.pass_k must not exceed evaluation.math.n_samples)")
        return {f"pass@{k}": 100 * float(np.mean([pass_at_k(ni, ci, k) for ni, ci in zip(n, c)]))
                for k in self.pass_k}


# config evaluation.math.grader: ours, or the ECHO authors' standalone_inference.py `check_correctness`
MATH_GRADERS = ("exact", "lenient")
# config evaluation.math.prompt: the training prompt (reasoning suffix), or the ECHO authors' evaluation prompt
MATH_PROMPTS = ("training", "authors")


def authors_math_prompts(samples: pd.DataFrame) -> pd.DataFrame:
    """The items as the ECHO authors' evaluation asks them (standalone_inference.py:171-214): their system
    turn (math_answers.AUTHORS_EVAL_SYSTEM), then the image and the item's text without training's
    "Please reason step by step ..." suffix (their test.json `prompt` is the question and its choices,
    data/save_as_json.py:164-169; verl appends the suffix in training only, geometry3k.sh:50)."""
    return samples.assign(prompt=[str(p).removesuffix(MATH_SUFFIX) for p in samples["prompt"]],
                          system=AUTHORS_EVAL_SYSTEM)


TASKS = {
    "recognition": MCQTask(),
    "vqa": MCQTask(),
    "counting-freeform": FreeformCountTask(),
    "grounding": GroundingTask(),
    "counting": GroundingTask(primary="count_accuracy"),
    "math": MathTask(),
}


def task_for(dataset: str, sam2: str | None = None, image_root=None, empty_mask_iou: str = "zero",
             choice_parser: str = "robust", pass_k: tuple[int, ...] = (1,), input_size: int | None = None,
             query: str = "as_given", sam2_multimask: str = "best_score", grader: str = "exact"):
    """The task of a dataset; `sam2`: a SAM2 checkpoint for grounding masks, `empty_mask_iou`:
    how a sample with empty prediction and target counts in gIoU, `choice_parser`: how option
    letters are read (a math task's votes: "boxed", the ECHO authors' boxed-only vote), `pass_k`: the k
    of a math task's pass@k, `grader` a math task's grading (MathTask); grounding's `input_size`, `query` and
    `sam2_multimask` (GroundingTask, masks.Sam2Masker) (evaluation only; config
    evaluation.grounding / evaluation.mcq / evaluation.math)."""
    spec = get_dataset(dataset)
    if spec.task == "math" and (tuple(pass_k) != (1,) or grader != "exact" or choice_parser == "boxed"):
        return MathTask(tuple(pass_k), grader, choice_parser)
    if dataset == "mme":
        return MMETask(choice_parser)
    if spec.task in ("recognition", "vqa") and choice_parser != "robust":
        return MCQTask(choice_parser)
    if spec.task not in TASKS:
        raise NotImplementedError(f"dataset {dataset!r}: task {spec.task!r} has no evaluation yet")
    task = TASKS[spec.task]
    as_given = query in (None, "as_given")
    if task.family == "grounding" and (sam2 or empty_mask_iou != "zero" or input_size or not as_given):
        from .masks import Sam2Masker

        # counting sets are scored by their count: no SAM2 (VisionReasoner's count_objects_batch runs none)
        masker = Sam2Masker(sam2, image_root, multimask=sam2_multimask or "best_score") \
            if sam2 and spec.task == "grounding" else None
        return GroundingTask(task.primary, masker, empty_mask_iou, input_size, query or "as_given")
    return task
