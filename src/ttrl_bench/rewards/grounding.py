"""VR-TTRL rewards for structured (grounding / counting) answers (VR-TTRL Section 3.2), after the
VisionReasoner reward of the Seg-Zero code (dvlab-research/Seg-Zero,
verl/utils/reward_score/vision_reasoner.py): `vision_reasoner_format_reward`,
`vision_reasoner_accuracy_reward`, `vision_reasoner_non_repeat_reward`.

An answer is the JSON list inside <answer></answer> of objects {"bbox_2d": [x1, y1, x2, y2],
"point_2d": [x, y]} in pixels of the original image. Where the paper is silent the authors' code
is the default; each departure is a field of `Conventions` (a reward_params key of
`vr_ttrl_consensus`). Pure functions: no torch, no trainer.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from .tags import tag_spans

# `vision_reasoner_format_reward`'s fullmatch of <think>.*?</think>\s*<answer>.*?</answer> holds when
# the text starts with <think>, ends with </answer> and between them has </think>, blanks, <answer>
_THINK_THEN_ANSWER = re.compile(r"</think>\s*<answer>")

# vision_reasoner_accuracy_reward: MAX_OBJECTS = 120, both lists cut to their first 120 objects
MAX_OBJECTS = 120


@dataclass(frozen=True)
class Thresholds:
    """A pair of objects matches on a test when IoU > iou, box L1 < l1 px, point distance < point px.
    VR-TTRL Table 9: loose 0.3/20/50, base 0.5/10/30 (default), strict 0.7/5/15."""

    iou: float = 0.5
    l1: float = 10.0
    point: float = 30.0


THRESHOLDS = {"loose": Thresholds(0.3, 20, 50), "base": Thresholds(), "strict": Thresholds(0.7, 5, 15)}


@dataclass(frozen=True)
class Conventions:
    """How the accuracy reward reads an answer; defaults follow vision_reasoner.py.

    pixel_iou       True: `batch_iou`'s inclusive-pixel IoU (+1 on every width and height);
                    False: continuous IoU, as `compute_bbox_iou` of the authors' evaluation scripts
    point_in_box    True: a point test passes only if the predicted point also lies inside its own
                    predicted box (`batch_points_in_box`, edges included); False: the paper's Point
                    L1 reward alone (VR-TTRL Section 3.2.2)
    point_distance  "euclidean": `batch_points_distance`; "l1": |dx| + |dy|, the paper's "Point L1"
    invalid_object  "zero_answer": one object without a 4-number bbox_2d and a 2-number point_2d
                    makes the whole answer score 0 (the authors' list comprehension / numpy raises
                    and the bare `except` returns 0); "drop_object": score the valid objects only
    """

    pixel_iou: bool = True
    point_in_box: bool = True
    point_distance: str = "euclidean"
    invalid_object: str = "zero_answer"

    @classmethod
    def from_params(cls, reward_params: dict) -> "Conventions":
        """The conventions named in a method's reward_params (other keys ignored)."""
        return cls(**{f.name: reward_params[f.name] for f in fields(cls) if f.name in reward_params})

    def __post_init__(self):
        if self.point_distance not in ("euclidean", "l1"):
            raise TypeError(f"point_distance must be 'euclidean' or 'l1', got {self.point_distance!r}")
        if self.invalid_object not in ("zero_answer", "drop_object"):
            raise TypeError(f"invalid_object must be 'zero_answer' or 'drop_object', got {self.invalid_object!r}")


# The other value of each convention: what the audit and the training log flip to count changes.
DEPARTURES = {"pixel_iou": False, "point_in_box": False, "point_distance": "l1", "invalid_object": "drop_object"}
assert set(DEPARTURES) == {f.name for f in fields(Conventions)}


def _coordinate(v) -> bool:
    """A JSON number that is a float64 (not a boolean, a string such as "40", NaN, infinite, or an
    integer of 400 digits): the authors' numpy arithmetic raises on strings, and the bare `except`
    scores the answer 0."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int beyond float64
        return False


def _numbers(value, length: int) -> bool:
    return isinstance(value, list) and len(value) == length and all(_coordinate(v) for v in value)


def answer_span(text: str | None) -> tuple[int, int] | None:
    """Character span of what the first <answer></answer> holds, blanks stripped at both ends (the
    authors' regex <answer>\\s*(.*?)\\s*</answer>, read in linear time), or None without one."""
    text = text or ""
    span = next(tag_spans(text), None)
    if span is None:
        return None
    start, end = span
    inner = text[start:end]
    start += len(inner) - len(inner.lstrip())
    return start, max(start, end - (len(inner) - len(inner.rstrip())))


def parse_objects(text: str | None) -> list | None:
    """The JSON list inside the first <answer></answer> (the authors' regex), or None when the
    tags are absent, the JSON is broken or not a list (a lone object is not an answer: the
    authors' loop over a dict walks its keys and fails). Items are not checked here. JSON nested
    deeper than the interpreter's recursion limit (a rollout repeating "[") is broken JSON too: the
    authors' bare `except` scores it 0."""
    span = answer_span(text)
    if span is None:
        return None
    try:
        data = json.loads(text[span[0]:span[1]])
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return None
    return data if isinstance(data, list) else None


def valid_object(item) -> bool:
    """A dict with a 4-number bbox_2d and a 2-number point_2d (finite, not booleans)."""
    return isinstance(item, dict) and _numbers(item.get("bbox_2d"), 4) and _numbers(item.get("point_2d"), 2)


def valid_objects(objects: list | None) -> list[dict]:
    """The valid objects of an answer (for masks and counts)."""
    return [o for o in objects or [] if valid_object(o)]


def scored_objects(objects: list | None, invalid_object: str = "zero_answer") -> list[dict]:
    """The objects the accuracy reward compares: all of them when every one is valid, none when
    one is not ("zero_answer", the authors'); the valid ones ("drop_object")."""
    if invalid_object == "drop_object":
        return valid_objects(objects)
    objects = objects or []
    return list(objects) if all(valid_object(o) for o in objects) else []


def visionreasoner_count(objects: list | None) -> int:
    """VisionReasoner's count of an answer (vision_reasoner_model.py:671 `count = len(bboxes)`): the boxes list
    comprehension of :110-115 reads every object's bbox_2d[0..3] as a number before the points' one (:116-119)
    runs, so an answer whose objects all have a readable box counts them all, point_2d or not; one object
    without one (no dict, no bbox_2d, fewer than 4 entries, a string, null or non-finite value) makes it raise
    and the answer counts 0. A boolean is a number there (True * x_factor)."""
    def number(v) -> bool:
        try:
            return isinstance(v, (int, float)) and math.isfinite(v)
        except OverflowError:  # an int beyond float64: their float multiplication raises
            return False

    def box(item) -> bool:
        value = item.get("bbox_2d") if isinstance(item, dict) else None
        return isinstance(value, list) and len(value) >= 4 and all(number(v) for v in value[:4])

    return len(objects) if objects and all(box(o) for o in objects) else 0


def point_in_box(obj: dict) -> bool:
    """`batch_points_in_box`: x1 <= x <= x2 and y1 <= y <= y2 for the object's own box."""
    (x1, y1, x2, y2), (x, y) = obj["bbox_2d"], obj["point_2d"]
    return x1 <= x <= x2 and y1 <= y <= y2


def thinking_format_reward(text: str) -> float:
    """`vision_reasoner_format_reward`, thinking part: 1 when the text as generated (nothing
    stripped) is exactly <think>...</think> <answer>...</answer>, else 0."""
    text = text or ""
    framed = len(text) >= len("<think></answer>") and text.startswith("<think>") and text.endswith("</answer>")
    return 1.0 if framed and _THINK_THEN_ANSWER.search(text, len("<think>"), len(text) - len("</answer>")) else 0.0


def answer_format_reward(text: str) -> float:
    """`vision_reasoner_format_reward`, `segmentation_format` part, in [0, 2]: the JSON inside
    the first answer tags must be a list; each dict item adds (1 if bbox_2d is a list of 4
    + 1 if point_2d is a list of 2) / len(list), the entries' types unchecked. A list or string
    item adds 0, unless it contains "bbox_2d" / "point_2d": that item, like a scalar, ends the sum
    there (the authors' `in` / indexing raises and the bare `except` returns the sum so far)."""
    data = parse_objects(text)
    if not data:
        return 0.0
    total = 0.0
    for item in data:
        if isinstance(item, dict):
            box, point = item.get("bbox_2d"), item.get("point_2d")
            passed = (isinstance(box, list) and len(box) == 4) + (isinstance(point, list) and len(point) == 2)
            total += passed / len(data)
        elif not isinstance(item, (list, str)) or "bbox_2d" in item or "point_2d" in item:
            break
    return total


def non_repeat_reward(text: str, scope: str = "output") -> float:
    """`vision_reasoner_non_repeat_reward`: split on ".", strip, drop empty pieces; 0 once a
    second repeated sentence is seen (a first repeat is tolerated), else 1.

    scope="output": the whole generated text, tags and answer included (the authors' code);
    scope="thinking": the text inside <think></think> only, as VR-TTRL Section 3.2.1 describes
    ("we split the thinking process into individual sentences"), same tolerance."""
    if scope not in ("output", "thinking"):
        raise TypeError(f"non_repeat must be 'output' or 'thinking', got {scope!r}")
    if scope == "thinking":
        span = next(tag_spans(text or "", "think"), None)
        text = text[span[0]:span[1]] if span else ""
    seen, repeats = set(), 0
    for sentence in (s.strip() for s in (text or "").split(".")):
        if not sentence:
            continue
        repeats += sentence in seen
        if repeats >= 2:
            return 0.0
        seen.add(sentence)
    return 1.0


def box_iou(a, b, pixel: bool = True) -> float:
    """IoU of [x1, y1, x2, y2] boxes. pixel=True: `batch_iou`, coordinates are inclusive pixel
    indices, so every width and height gets +1 (two copies of [0, 0, 0, 0] overlap fully);
    pixel=False: continuous areas (`compute_bbox_iou` in the authors' evaluation)."""
    one = 1.0 if pixel else 0.0
    inter = max(0.0, min(a[2], b[2]) - max(a[0], b[0]) + one) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]) + one)
    union = (a[2] - a[0] + one) * (a[3] - a[1] + one) + (b[2] - b[0] + one) * (b[3] - b[1] + one) - inter
    return inter / union if union > 0 else 0.0


def pairwise_accuracy(pred: list | None, target: list | None, thresholds: Thresholds = Thresholds(),
                      conventions: Conventions = Conventions()) -> float:
    """`vision_reasoner_accuracy_reward(pred, target)` in [0, 3]: per matched object pair, the
    tests passed (IoU > t, mean box L1 < t, point distance < t and, with point_in_box, the
    predicted point inside its own box); Hungarian matching on cost 3 - passed; the sum divided by
    max(M, K). Lists are cut to MAX_OBJECTS first; an empty or unusable answer scores 0.
    Not symmetric: the in-box test looks at `pred`'s points only."""
    p = scored_objects(pred, conventions.invalid_object)[:MAX_OBJECTS]
    q = scored_objects(target, conventions.invalid_object)[:MAX_OBJECTS]
    if not p or not q:
        return 0.0
    passed = np.zeros((len(p), len(q)))
    for i, a in enumerate(p):
        inside = point_in_box(a) or not conventions.point_in_box
        for j, b in enumerate(q):
            iou = box_iou(a["bbox_2d"], b["bbox_2d"], conventions.pixel_iou)
            l1 = sum(abs(x - y) for x, y in zip(a["bbox_2d"], b["bbox_2d"])) / 4
            dx, dy = (abs(x - y) for x, y in zip(a["point_2d"], b["point_2d"]))
            dist = math.hypot(dx, dy) if conventions.point_distance == "euclidean" else dx + dy
            passed[i, j] = (iou > thresholds.iou) + (l1 < thresholds.l1) + (dist < thresholds.point and inside)
    # imported here: the plan, so every snakemake start, imports this module (evaluation.tasks), and
    # scipy.optimize costs the workflow's start about a second (issue 57's profile)
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(3 - passed)
    return float(passed[rows, cols].sum()) / max(len(p), len(q))


def consensus(answers: Sequence[list | None], thresholds: Thresholds = Thresholds(), anti: bool = False,
              conventions: Conventions = Conventions()) -> tuple[int, list[float]]:
    """VR-TTRL geometric consensus (Section 3.2: "the answer that maximizes the total reward among
    them is chosen as the majority answer"). Answer i's total is the sum of its accuracy reward
    with each other answer as the target, sum_j pairwise_accuracy(a_i, a_j) (our reading: VR-TTRL
    has no public code); the pseudo-label is the highest total (lowest with anti=True, the
    VR-TTRL (-) ablation; ties: first), and each answer's reward is pairwise_accuracy(a_i, label).

    Every answer is a candidate, as the paper says ("the answer that maximizes the total reward
    among them"): one without scored objects (unparsable, or an invalid object such as a string
    coordinate under the authors' rule) has total 0, so it is the label when it comes first among
    answers tied at 0, and then every reward is 0 (the accuracy reward scores 0 against it). So a
    group with nothing scorable takes its first answer as the label, as the paper's rule reads; an
    earlier version gave no label there, which changed no reward and no prediction (the vote-only
    baseline answered with the first completion either way), only the logged label (issue 35)."""
    scorable = [bool(scored_objects(a, conventions.invalid_object)) for a in answers]
    totals = [
        sum(pairwise_accuracy(answers[i], answers[j], thresholds, conventions) for j in range(len(answers)) if j != i)
        if scorable[i] else 0.0
        for i in range(len(answers))
    ]
    label = totals.index((min if anti else max)(totals))
    return label, [pairwise_accuracy(a, answers[label], thresholds, conventions) for a in answers]


def convention_counts(answers: Sequence[list | None]) -> dict[str, float]:
    """Shares of one group's completions that a convention touches: no answer list (unparsable),
    an invalid object, more than MAX_OBJECTS objects, a valid object whose point lies outside its
    own box."""
    n = max(len(answers), 1)
    lists = [a for a in answers if a is not None]
    return {
        "unparsable": (len(answers) - len(lists)) / n,
        "invalid_object": sum(not all(valid_object(o) for o in a) for a in lists) / n,
        "over_max_objects": sum(len(a) > MAX_OBJECTS for a in lists) / n,
        "point_outside_box": sum(any(not point_in_box(o) for o in valid_objects(a)) for a in lists) / n,
    }


def flipped(conventions: Conventions, name: str) -> Conventions:
    """`conventions` with `name` set to its other value (DEPARTURES, or the default back)."""
    default = getattr(Conventions(), name)
    return replace(conventions, **{name: DEPARTURES[name] if getattr(conventions, name) == default else default})
