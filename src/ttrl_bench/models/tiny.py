"""The offline demo model: a tiny VLM of a paper family (Qwen2.5-VL by default, or InternVL).

Nothing can be downloaded here, so the embedded default builds its own model: a byte-level BPE
tokenizer trained with `tokenizers` on the demo prompts, the family's config a few hundred
thousand parameters large (`families.py`), random weights, then a short supervised warm start on
the demo training split. The result is saved with `save_pretrained` and loaded afterwards through
the same `AutoProcessor` / `AutoModelForImageTextToText` path as a Hub id (see `loading.py`).
"""

from __future__ import annotations

import json
import logging
import random
import zlib
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tqdm import tqdm
from transformers import PreTrainedTokenizerFast

from ..datasets.registry import DIGIT_NAMES
from .tiny_families import chat_template, family as get_family

log = logging.getLogger(__name__)

# InternVL tiles: 56 px (4x4 patches of 14 px, pixel shuffle 0.5 -> 4 tokens a tile). Digits are one
# tile, the 112 px scenes 2x2 tiles + a thumbnail.
TILE_PX = 56


def train_tokenizer(corpus: list[str], family: str = "qwen2_5_vl", vocab_size: int = 600) -> PreTrainedTokenizerFast:
    """Byte-level BPE trained on `corpus`: every string stays encodable, frequent words are 1 token.
    The family's special tokens (and named ones as attributes, as its processor expects) come first."""
    spec = get_family(family)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(spec.special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=chat_template(spec.image_part),
        padding_side="left",
        extra_special_tokens=dict(spec.named_tokens),
    )


def build_tiny(tokenizer: PreTrainedTokenizerFast, family: str = "qwen2_5_vl", hidden: int = 64, text_layers: int = 2,
               sizes: dict | None = None, vocab_size: int | None = None, tile_px: int = TILE_PX):
    """(random-weight model, processor) of `family`, sized by `hidden` and `text_layers`, or by a
    published checkpoint's dimensions (`sizes`: {"text": {...}, "vision": {...}}; real image processing,
    `vocab_size` rows of embeddings)."""
    spec = get_family(family)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in spec.special_tokens}
    config = spec.config(ids, vocab_size or len(tokenizer), hidden, text_layers, tile_px, sizes)
    processor = spec.processor(tokenizer, chat_template(spec.image_part), tile_px, sizes is not None)
    model = spec.model_class(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, processor


# Share of the warm-start MCQ rows answered with the digit's numeral ("7") instead of its name.
NUMERAL_SHARE = 0.5


def answers_with_numeral(row: dict) -> bool:
    """Whether a warm-start row teaches the numeral: fixed by the row's id, whatever the seed."""
    return zlib.crc32(row["id"].encode()) % 1000 < 1000 * NUMERAL_SHARE


def warm_start_target(row: dict) -> str:
    """What the demo model is taught to answer.

    MCQ: the gold option's text (the class name, "seven"), not its letter: mapping an image to a
    letter needs a look-up across the shuffled options that a 2-layer model does not learn in
    minutes of CPU time (measured: chance after 1,600 steps), while image -> class name is learnt
    in ~150 steps. `extract_choice` maps a unique option text to its letter (rule 4), as it does
    for real VLMs that answer with the option text. But `NUMERAL_SHARE` of the rows answer with
    the numeral ("7"), as captions write digits either way: the model learns both forms, and a
    numeral names no option, so it is unparsable. That is the demo model's weakness, the one
    TTRV's format gains come from: it knows the digit but often answers in a form the question
    did not ask for. Label-free rewards give unparsable answers nothing and the option's name
    something whenever it agrees with the majority, so test-time RL teaches the requested form.
    Grounding: VisionReasoner's format, <think> then the JSON objects inside <answer>.
    """
    if "boxes" not in row:
        return str(DIGIT_NAMES.index(row["label"])) if answers_with_numeral(row) else row["label"]
    objects = [{"bbox_2d": [int(v) for v in box], "point_2d": [int(v) for v in point]}
               for box, point in zip(row["boxes"], row["points"])]
    return f"<think>{row['query']} is here.</think><answer>{json.dumps(objects, separators=(', ', ': '))}</answer>"


def _encoded_row(processor, row: dict, image) -> dict:
    """One row as the processor encodes it alone: the chat-formatted prompt + `warm_start_target`, and
    `labels` that score only the answer tokens. A row encodes the same in any batch (each text and image is
    processed on its own), so the warm start encodes each row once, not at each of its ~8 draws."""
    from ..generation.hf import chat_prompt

    prompt = chat_prompt(processor, row["prompt"], row.get("system"))
    answer = warm_start_target(row) + processor.tokenizer.eos_token
    encoded = dict(processor(text=[prompt + answer], images=[image], return_tensors="pt"))
    # The answer's tokens end the row: the byte-level pre-tokenizer splits at the prompt's closing newline, so the
    # answer tokenizes alone as it does after the prompt, and the image is processed once. Else the prompt is
    # processed alone: its length is where the answer starts.
    answer_ids = processor.tokenizer(answer, add_special_tokens=False, return_tensors="pt")["input_ids"][0]
    n_prompt = encoded["input_ids"].shape[1] - len(answer_ids)
    if not torch.equal(encoded["input_ids"][0, n_prompt:], answer_ids):
        n_prompt = processor(text=[prompt], images=[image], return_tensors="pt")["input_ids"].shape[1]
    encoded["labels"] = encoded["input_ids"].clone()
    encoded["labels"][0, :n_prompt] = -100
    return encoded


def _supervised_batch(processor, encoded: list[dict]) -> dict:
    """Rows of `_encoded_row` as the processor batches them: token rows padded on the right (`labels` with
    -100, the pad token's id in `input_ids`, 0 elsewhere), image tensors (one row per patch or tile)
    concatenated."""
    length = max(e["input_ids"].shape[1] for e in encoded)
    fill = {"input_ids": processor.tokenizer.pad_token_id, "labels": -100}
    batch = {}
    for key, first in encoded[0].items():
        if first.shape == encoded[0]["input_ids"].shape and not key.startswith("pixel"):  # a value per token
            batch[key] = torch.cat([torch.nn.functional.pad(e[key], (0, length - e[key].shape[1]),
                                                            value=fill.get(key, 0)) for e in encoded])
        else:
            batch[key] = torch.cat([e[key] for e in encoded])
    return batch


class _WarmStartBatches(torch.utils.data.Dataset):
    """Step `i`'s batch of rows `chosen[i]`, each row encoded once (`_encoded_row`), at its first draw."""

    def __init__(self, processor, rows: list[dict], load_image, chosen: list[list[int]]):
        self.processor, self.rows, self.load_image, self.chosen, self.encoded = processor, rows, load_image, chosen, {}

    def __len__(self) -> int:
        return len(self.chosen)

    def __getitem__(self, step: int) -> dict:
        for i in self.chosen[step]:
            if i not in self.encoded:
                self.encoded[i] = _encoded_row(self.processor, self.rows[i], self.load_image(self.rows[i]))
        return _supervised_batch(self.processor, [self.encoded[i] for i in self.chosen[step]])


# Rows per warm-start step (grounding rows are ~3x longer than MCQ rows), and one grounding step
# every GROUNDING_EVERY MCQ steps: the scenes' answer format is learnt in ~100 steps, but finding the
# queried digit is not learnt in any number the demo can afford (docs/demo.md), so they get fewer.
# Measured on the digits: batches of 32 at lr 2e-3 name the digit right (in either form) ~85% of
# the time after 300 steps; batches of 16 at 3e-3 learn 3x slower per sample, 4e-3 diverges.
BATCH_SIZE = {"mcq": 32, "grounding": 8}
GROUNDING_EVERY = 3


def warm_start(model, processor, rows: list[dict], load_image, steps: int, lr: float, seed: int) -> list[float]:
    """A short supervised fine-tune so the base model knows the digits but is far from perfect.

    `steps` MCQ steps, and a grounding step with every `GROUNDING_EVERY`-th when scene rows are
    present. TTRV's premise is a base model whose latent ability test-time RL can amplify: this one
    names the digit, half the time in a form the question did not ask for (`warm_start_target`).
    """
    by_task = {}
    for i, row in enumerate(rows):
        by_task.setdefault("grounding" if "boxes" in row else "mcq", []).append(i)
    schedule = [task for step in range(steps) for task in sorted(by_task)
                if task == "mcq" or step % GROUNDING_EVERY == 0 or "mcq" not in by_task]
    rng = random.Random(seed)
    chosen = [rng.sample(by_task[task], min(BATCH_SIZE[task], len(by_task[task]))) for task in schedule]
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    # the batches are encoded in a second process while this one trains: the build runs before any job that
    # needs the model, on one torch thread, so the second core is otherwise idle (issue 57's profile)
    batches = torch.utils.data.DataLoader(_WarmStartBatches(processor, rows, load_image, chosen), batch_size=None,
                                          num_workers=1, prefetch_factor=16)
    for batch in tqdm(batches, desc="warm start", unit="step"):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.eval()
    return losses


def build_demo_model(
    out_dir: Path,
    train_rows: list[dict],
    load_image,
    steps: int,
    lr: float = 2e-3,
    seed: int = 0,
    family: str = "qwen2_5_vl",
) -> dict:
    """Build, warm-start and save the demo model; returns a summary written to `build_info.json`."""
    torch.manual_seed(seed)
    corpus = [r["prompt"] for r in train_rows] + [warm_start_target(r) for r in train_rows]
    corpus += sorted({r["system"] for r in train_rows if isinstance(r.get("system"), str)})
    model, processor = build_tiny(train_tokenizer(corpus, family), family)
    losses = warm_start(model, processor, train_rows, load_image, steps, lr, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    info = {
        "architecture": type(model).__name__,
        "family": family,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(processor.tokenizer),
        "warm_start_steps": steps,
        "warm_start_first_loss": losses[0] if losses else None,
        "warm_start_last_loss": sum(losses[-10:]) / max(1, len(losses[-10:])),
        "seed": seed,
    }
    (out_dir / "build_info.json").write_text(json.dumps(info, indent=2))
    return info
