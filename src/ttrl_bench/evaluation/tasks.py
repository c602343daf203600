"""What differs between task kinds, in one place: how an output is parsed, what the gold answer
is, how one prediction is scored, and the dataset-level metrics. Used by greedy evaluation and
by the rewards' training log alike."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

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
from .math_answers import answer_text, letters_of, normalize_math_answer, numbers_close
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
    ours = [short_answers_match(extract_choice(r["raw_output"], list(r["options"])) if len(r["options"])
                                else extract_short_answer(r["raw_output"]), r["gold"]) for r in rows]
    theirs = [authors_correct(authors_answer(r["raw_output"]), r["gold"]) for r in rows]
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
    Predicted masks are the predicted boxes (no SAM2 here), so the metrics are called box_giou /
    box_ciou; they are scored against the dataset's own masks where it has them."""

    family = "grounding"

    def __init__(self, primary: str = "box_giou", masker=None, empty_mask_iou: str = "zero"):
        # masker: masks from predicted objects (evaluation.masks.Sam2Masker); None -> the boxes
        self.masker = masker
        # config evaluation.grounding.empty_mask_iou (metrics.giou_ciou_from_counts)
        self.empty_mask_iou = empty_mask_iou
        self.prefix = "" if masker else "box_"
        # count_accuracy for the counting sets (PixMo-Count, CountBench)
        self.primary = primary.replace("box_", self.prefix)

    def parse(self, text: str, row: dict):
        return grounding.parse_objects(text)

    def gold(self, row: dict):
        return _objects(row["boxes"], row["points"])

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
        masker = self.masker or (lambda r, p: box_mask(p, r["width"], r["height"]))
        # Seg-Zero evaluation_visionreasoner.py: an answer the extraction cannot read whole (one
        # invalid object) is scored as an empty mask (intersection 0, union = the gold mask)
        pred_masks = [masker(r, grounding.scored_objects(p)) for p, r in zip(parsed, rows)]
        gold_masks = [gold_mask(r, self.gold(r)) for r in rows]
        inter = [int((p & g).sum()) for p, g in zip(pred_masks, gold_masks)]
        union = [int((p | g).sum()) for p, g in zip(pred_masks, gold_masks)]
        n_pred = [len(grounding.valid_objects(p)) for p in parsed]
        return {
            "parsed": [json.dumps(p) if p is not None else None for p in parsed],
            "gold": [json.dumps(self.gold(r)) for r in rows],
            "intersection": inter,
            "union": union,
            "n_pred": n_pred,
            # counting: one object per counted thing (count column: PixMo-Count, CountBench)
            "correct": [n == int(r.get("count", len(r["boxes"]))) for n, r in zip(n_pred, rows)],
        }

    def metrics(self, predictions: pd.DataFrame) -> dict[str, float]:
        giou, ciou = giou_ciou_from_counts(list(predictions["intersection"]), list(predictions["union"]),
                                           self.empty_mask_iou)
        return {f"{self.prefix}giou": 100 * giou, f"{self.prefix}ciou": 100 * ciou,
                "count_accuracy": 100 * predictions["correct"].mean()}


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
    """ECHO's math reasoning (papers/echo.txt Section 4, Tables 2 and 12): the answer is reasoned and
    put in \\boxed{}; evaluation math_answers.py explains extraction and normal forms. A question
    with options is answered by option letter(s) ("B", LogicVista's "A,C"), read from the boxed
    answer or, as in `check_correctness`, from the text of one option; without options by the
    normal form of the answer. Scored pass@k over the completions of each question (Chen et al.
    2021, evaluation.metrics.pass_at_k): a greedy evaluation is pass@1 of one completion.

    `family` "mcq": the answers are discrete values, so the majority-vote rewards apply (MM-UPT,
    ECHO vote on them). `pass_k`: the k of the pass@k metrics (config evaluation.math.pass_k)."""

    family = "mcq"
    primary = "pass@1"

    def __init__(self, pass_k: tuple[int, ...] = (1,)):
        self.pass_k = tuple(sorted({1, *pass_k}))

    def parse(self, text: str, row: dict):
        options = list(row.get("options") if row.get("options") is not None else [])
        answer = answer_text(text)
        if not options:
            return normalize_math_answer(answer)
        letters = letters_of(answer, options)
        # "The answer is (C)" without a box, as extraction.extract_choice reads letters
        return letters if letters is not None else extract_choice(text, options)

    def gold(self, row: dict):
        options = row.get("options")
        return str(row["answer"]) if options is not None and len(options) else normalize_math_answer(row["answer"])

    def score(self, parsed, gold) -> float:
        if parsed is None or gold is None:
            return 0.0
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


TASKS = {
    "recognition": MCQTask(),
    "vqa": MCQTask(),
    "counting-freeform": FreeformCountTask(),
    "grounding": GroundingTask(),
    "counting": GroundingTask(primary="count_accuracy"),
    "math": MathTask(),
}


def task_for(dataset: str, sam2: str | None = None, image_root=None, empty_mask_iou: str = "zero",
             choice_parser: str = "robust", pass_k: tuple[int, ...] = (1,)):
    """The task of a dataset; `sam2`: a SAM2 checkpoint for grounding masks, `empty_mask_iou`:
    how a sample with empty prediction and target counts in gIoU, `choice_parser`: how option
    letters are read, `pass_k`: the k of a math task's pass@k (evaluation only; config
    evaluation.grounding / evaluation.mcq / evaluation.math)."""
    spec = get_dataset(dataset)
    if spec.task == "math" and tuple(pass_k) != (1,):
        return MathTask(tuple(pass_k))
    if dataset == "mme":
        return MMETask(choice_parser)
    if spec.task in ("recognition", "vqa") and choice_parser != "robust":
        return MCQTask(choice_parser)
    if spec.task not in TASKS:
        raise NotImplementedError(f"dataset {dataset!r}: task {spec.task!r} has no evaluation yet")
    task = TASKS[spec.task]
    if task.family == "grounding" and (sam2 or empty_mask_iou != "zero"):
        from .masks import Sam2Masker

        return GroundingTask(task.primary, Sam2Masker(sam2, image_root) if sam2 else None, empty_mask_iou)
    return task
