"""Preprocessing shared by every dataset: resolution filter, 4-way MCQ conversion, prompts.

Protocol: TTRV Appendix A ("Evaluation Protocol") and Appendix C (prompt wording), SPEC.md
"Evaluation protocol".
"""

from __future__ import annotations

import functools
import hashlib
import random
from pathlib import Path

from PIL import Image, UnidentifiedImageError

LETTERS = "ABCD"

# TTRV Appendix C, recognition prompt (ImageNet, Food101, Resisc45, ...). The paper prints it as
# "<image> \n Look at ... extra text. \n Options:\nA. ...\nD. garbage truck." The image goes
# first through the chat template; the text below is what follows it.
RECOGNITION_INSTRUCTION = (
    "Look at the given image and identify what it shows. Choose the correct answer from the "
    "options below and respond with only the corresponding option letter (A, B, C, or D). "
    "Do not include any explanation or extra text."
)

# Pixel limit of TTRV Appendix B / Table 8: "images larger than 1000x1000 are dropped".
MAX_SIDE = 1000


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) read from the file header: PIL's open() parses it and decodes nothing."""
    with Image.open(path) as im:
        return im.size


def resolution_verdict(path: Path, rule: str = "either_side", max_side: int = MAX_SIDE) -> str:
    """'kept', 'too_large' or 'unreadable' for one image file.

    "Larger than 1000x1000" is ambiguous, so both readings are offered: `either_side` (default:
    width > 1000 or height > 1000) and `area` (width * height > 1000 * 1000).
    """
    try:
        width, height = image_size(path)
    except Image.DecompressionBombError:  # PIL refuses over 2 x MAX_IMAGE_PIXELS before reading a pixel
        return "too_large"
    except (UnidentifiedImageError, OSError, ValueError):
        return "unreadable"
    if rule == "either_side":
        too_large = width > max_side or height > max_side
    elif rule == "area":
        too_large = width * height > max_side * max_side
    else:
        raise ValueError(f"resolution rule must be 'either_side' or 'area', got {rule!r}")
    return "too_large" if too_large else "kept"


# what PIL raises on a file that does not decode (UnidentifiedImageError is an OSError; a bad PNG chunk
# raises SyntaxError; over 2 x MAX_IMAGE_PIXELS, DecompressionBombError)
DECODE_ERRORS = (OSError, ValueError, SyntaxError, Image.DecompressionBombError)


def decode_verdict(path: Path) -> str:
    """'kept' if every pixel of the file decodes, else 'unreadable': a truncated JPEG keeps a valid
    header, passes the resolution filter and would otherwise fail evaluation instead."""
    try:
        with Image.open(path) as im:
            im.load()
    except DECODE_ERRORS:
        return "unreadable"
    return "kept"


def sample_rng(seed: int, dataset: str, sample_id: str) -> random.Random:
    """A generator seeded by (global seed, dataset, sample id) alone, so options never change
    between runs, machines or the order in which samples are processed."""
    digest = hashlib.sha256(f"{seed}|{dataset}|{sample_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@functools.lru_cache(maxsize=64)
def _sorted_classes(classes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(set(classes)))


def mcq_options(true_class: str, classes, rng: random.Random) -> tuple[list[str], str]:
    """True class + 3 distinct other classes, shuffled; returns (options, correct letter)."""
    # Sorting once per class list, not per sample: 1000-class ImageNet went 2.6x faster
    # (benchmarks/run.py); the draws are the same as before.
    others = [c for c in _sorted_classes(tuple(classes)) if c != true_class]
    if len(others) < 3:
        raise ValueError(f"4-way MCQ needs at least 4 distinct classes, got {len(others) + 1}")
    options = [true_class] + rng.sample(others, 3)
    rng.shuffle(options)
    return options, LETTERS[options.index(true_class)]


def recognition_prompt(options: list[str], style: str = "options") -> str:
    lines = [f"{letter}. {option}" for letter, option in zip(LETTERS, options)]
    instruction = RECOGNITION_INSTRUCTION
    if style == "texture":  # DTD's wording in Appendix C
        instruction = instruction.replace("what it shows", "what texture it shows")
    return instruction + "\nOptions:\n" + "\n".join(lines) + "."


# VQA prompts of TTRV Appendix C: each dataset's own question, its official options, and the
# option-letter instruction in that dataset's wording. "{letters}" reads "A, B, C, or D".
OPTION_LETTERS = "ABCDEFGHIJ"
VQA_PROMPTS = {
    "options": "{question}\nChoose the correct answer from the options below and respond with only the "
               "corresponding option letter ({letters}). Do not include any explanation or extra text."
               "\nOptions:\n{lines}",
    "mme": "{question} Please respond with only the corresponding option letter (A or B). Do not include any "
           "explanation or extra text. \nOptions:\n{lines}.",
    "mathverse": "Please directly answer the question and provide the correct option letter, e.g., A, B, C, D."
                 "\nDo not include any explanation or extra text.\nQuestion: {question}",
    "mathvista": "Hint: Please answer the question and provide the correct option letter, e.g., A, B, C, D, at "
                 "the end.\nDo not include any explanation or extra text.\nQuestion: {question}\nChoices:\n{paren_lines}",
    # CRPE's own text already lists the options and ends "...choices directly."; TTRV appends
    # "and do not include any explanation or extra text."
    "crpe": "{crpe_stem} and do not include any explanation or extra text.",
    "in_question": "{question}\nChoose the correct answer from the options below and respond with only the "
                   "corresponding option letter ({letters}). Do not include any explanation or extra text.",
    "verbatim": "{question}",  # RealWorldQA: the question carries its options and instruction
}
# Free-form questions (no options: MathVista "free_form", some MathVerse / RealWorldQA) are not
# covered by Appendix C; ours asks for the short answer the metric compares.
FREEFORM_PROMPT = "{question}\nAnswer the question with a single word or number. Do not include any explanation or extra text."
# Capture (TTRV Appendix C): the question around the counted object + the boxed-answer instruction.
CAPTURE_QUESTION = ("Count the exact number of {object} in the image. Assume the pattern of {object} continues "
                    "behind any black box. Provide the total number of {object} as if the black box were not there.")
CAPTURE_PROMPT = "{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}."


# ECHO (user683/ECHO verl/examples/ttrl_echo/Qwen2.5/geometry3k.sh `data.suffix_prompt`; MM-UPT's
# FORMAT_PROMPT is the same): the question, the choices as verl/data/save_as_json.py writes them
# ("\n\nChoices:\nA.x\nB.y", --choices_add_letters), then the reasoning / boxed-answer suffix.
MATH_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."


def math_prompt(question: str, options: list[str], list_options: bool = True) -> str:
    """ECHO's prompt; `list_options` False where the question already lists them (MathVerse)."""
    choices = ""
    if options and list_options:
        choices = "\n\nChoices:\n" + "\n".join(f"{letter}.{option}" for letter, option in zip(OPTION_LETTERS, options))
    return question + choices + MATH_SUFFIX


def _letters_phrase(n: int) -> str:
    letters = list(OPTION_LETTERS[:n])
    return " or ".join(letters) if n == 2 else ", ".join(letters[:-1]) + ", or " + letters[-1]


def vqa_prompt(question: str, options: list[str], style: str) -> str:
    if style == "verbatim":  # RealWorldQA: as asked, with or without options (its open-ended rows)
        return question
    if not options:
        return FREEFORM_PROMPT.format(question=question)
    lines = "\n".join(f"{letter}. {option}" for letter, option in zip(OPTION_LETTERS, options))
    paren_lines = "\n".join(f"({letter}) {option}" for letter, option in zip(OPTION_LETTERS, options))
    return VQA_PROMPTS[style].format(question=question, lines=lines, paren_lines=paren_lines,
                                     letters=_letters_phrase(len(options)), crpe_stem=question.rstrip().rstrip("."))


def capture_prompt(question: str) -> str:
    return CAPTURE_PROMPT.format(question=question)


def resize_square(path: Path, side: int) -> None:
    """RealWorldQA (TTRV Appendix B): resized to side x side instead of filtered; written as PNG
    so re-preparing gives the same bytes."""
    with Image.open(path) as im:
        resized = im.convert("RGB").resize((side, side), Image.Resampling.BICUBIC)
    resized.save(path, format="PNG", optimize=False)


# VR-TTRL / VisionReasoner prompt (SPEC.md; Seg-Zero code). Manifests keep the original image and
# original-pixel geometry; config `evaluation.grounding.input_size` (840 under the `authors` protocol)
# shows the model the image resized to a square (model_view) and maps its answer back (to_original).
GROUNDING_SYSTEM = "You are a helpful assistant."
GROUNDING_EXAMPLE = (
    '[{"bbox_2d": [10,100,200,210], "point_2d": [30,110]}, '
    '{"bbox_2d": [225,296,706,786], "point_2d": [302,410]}]'
)
GROUNDING_TEMPLATE = (
    'Please find "{query}" with bboxs and points.'
    "Compare the difference between object(s) and find the most closely matched object(s)."
    "Output the thinking process in <think> </think> and final answer in <answer> </answer> tags."
    "Output the bbox(es) and point(s) inside the interested object(s) in JSON format."
    "i.e., <think> thinking process here </think><answer>{answer}</answer>"
)


def grounding_prompt(query: str) -> str:
    return GROUNDING_TEMPLATE.format(query=query, answer=GROUNDING_EXAMPLE)


# VisionReasoner (dvlab-research/VisionReasoner @a455092) vision_reasoner/models/vision_reasoner_model.py:46
# `self.resize_size = 840`: every image is resized to 840 x 840 before the model sees it, the only size
# VisionReasoner-7B was trained (Seg-Zero training_scripts/visionreasoner_7b.yaml: VisionReasoner_multi_object_1k_840)
# and evaluated on; the consensus thresholds (10 px box L1, 30 px point distance) are in those pixels.
VISIONREASONER_SIDE = 840
GROUNDING_QUERIES = ("as_given", "visionreasoner")


def visionreasoner_query(query: str) -> str:
    """The query as VisionReasoner asks it: lower-cased, then '.', '"', '?', '!' stripped from both ends
    (evaluation/evaluation_segmentation.py:93 and evaluation_count.py:57; again in
    vision_reasoner_model.py:230 `_generate_model_output`)."""
    return query.lower().strip(".\"?!")


def view_side(input_size) -> int | None:
    """A row's `input_size` as a side in pixels, or None for no resize: None, 0, or NaN (pandas' fill where a
    manifest mixes rows with and without one)."""
    if not input_size or input_size != input_size:  # None, 0; NaN is the one value unequal to itself
        return None
    return int(input_size)


def model_view(image, input_size: int | None):
    """The image the model is shown: resized to input_size x input_size with PIL's bilinear filter
    (vision_reasoner_model.py:225), or as it is for None (or NaN: view_side)."""
    side = view_side(input_size)
    if side is None:
        return image
    return image.resize((side, side), Image.Resampling.BILINEAR)


def at_least(image, min_side: int | None):
    """The ECHO authors' evaluation image (standalone_inference.py:163-169, 187 `ensure_min_image_size`): a side
    under `min_side` px stretched to it, the other kept where it is long enough, bicubic; the image itself
    where both sides reach it or `min_side` is None (or NaN: view_side)."""
    side = view_side(min_side)
    width, height = image.size
    if side is None or (width >= side and height >= side):
        return image
    return image.resize((max(width, side), max(height, side)), Image.Resampling.BICUBIC)


def open_model_view(path, input_size: int | None, min_side: int | None = None):
    """The image file at `path` as the model is shown it: decoded to RGB (a grey, palette or RGBA file too),
    then model_view, then at_least. PIL's decoding errors pass through for the caller to name the sample."""
    with Image.open(path) as im:
        return at_least(model_view(im.convert("RGB"), input_size), min_side)


def decode_image(image_root: Path, sample: dict):
    """(RGB image, None), or (None, the reason naming the sample id and file) when it does not decode: the
    image evaluation scores and the prompt filters count (adaptation/prompt_budget.py), decoded once here.
    A grounding sample with `input_size` (GroundingTask.view) is shown resized to that square; a sample with
    `min_side` (config evaluation.math.min_image_side) has a shorter side enlarged to it."""
    path = Path(image_root) / sample["image"]
    try:
        return open_model_view(path, sample.get("input_size"), sample.get("min_side")), None
    except DECODE_ERRORS as err:
        return None, f"sample {sample['id']}: image {path} does not decode: {err}"


def _scaled(values, factors, offset: float) -> list | None:
    try:
        return [int(v * f + offset) for v, f in zip(values, factors)]
    except (OverflowError, ValueError, TypeError):  # a coordinate that scales to infinity: no usable object
        return None


def to_original(objects: list | None, width: int, height: int, input_size: int | None) -> list | None:
    """An answer given in the pixels of the input_size x input_size view, in the original image's:
    `int(v * x_factor + 0.5)` with x_factor = width / input_size (y alike), VisionReasoner's
    `extract_bbox_points_think` (vision_reasoner_model.py:110-119, factors from :223). Coordinates
    become integers, rounded half up (int() truncates toward zero, so -0.7 * f + 0.5 rounds as they do).
    Objects without a 4-number bbox_2d and a 2-number point_2d are kept as they are (still invalid);
    one whose coordinates overflow loses them (invalid, as their bare `except` makes it)."""
    from ..rewards.grounding import valid_object

    input_size = view_side(input_size)
    if input_size is None or objects is None:
        return objects
    fx, fy = width / input_size, height / input_size
    out = []
    for obj in objects:
        if not valid_object(obj):
            out.append(obj)
            continue
        box = _scaled(obj["bbox_2d"], (fx, fy, fx, fy), 0.5)
        point = _scaled(obj["point_2d"], (fx, fy), 0.5)
        out.append({**obj, "bbox_2d": box, "point_2d": point})
    return out


def to_model_view(objects: list[dict], width: int, height: int, input_size: int | None) -> list[dict]:
    """Original-pixel objects (the gold) in the input_size x input_size view's pixels, unrounded: where
    the rollouts' answers are scored against them in the training log."""
    input_size = view_side(input_size)
    if input_size is None:
        return objects
    fx, fy = input_size / width, input_size / height
    return [{**o, "bbox_2d": [o["bbox_2d"][0] * fx, o["bbox_2d"][1] * fy, o["bbox_2d"][2] * fx, o["bbox_2d"][3] * fy],
             "point_2d": [o["point_2d"][0] * fx, o["point_2d"][1] * fy]} for o in objects]
