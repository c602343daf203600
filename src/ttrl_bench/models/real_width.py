"""Random-weight models of a published checkpoint's shape, built offline (issue 23's rehearsal).

The architecture is the checkpoint's own config (configs.py `model_config`: its config.json, or the
shipped table of the papers' models) at its published widths, vocabulary and image-token counts, with
only the depth cut (`text_layers`, `vision_layers`) so that it trains on a CPU. The tokenizer is a small
BPE trained on `corpus`, laid out as the published one: its special tokens at the published ids
(tiny_families.py `published_ids`, e.g. InternVL3's <IMG_CONTEXT> at 151667), unused filler tokens between,
the published length, so that placeholder ids, padding rows past the tokenizer and prompt lengths are
the real ones. Saved in bf16 as the checkpoints are; loaded afterwards like a Hub id (loading.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from .configs import model_config, with_layers
from .tiny import train_tokenizer
from .tiny_families import chat_template, family as get_family


def published_layout_tokenizer(corpus: list[str], family: str) -> PreTrainedTokenizerFast:
    """A BPE tokenizer trained on `corpus`, its special tokens moved to the published checkpoint's ids
    and its vocabulary filled to the published length with `<|filler_N|>` tokens no text encodes to."""
    spec = get_family(family)
    trained = train_tokenizer(corpus, family)
    state = json.loads(trained.backend_tokenizer.to_str())
    regular = [t for t, _ in sorted(state["model"]["vocab"].items(), key=lambda kv: kv[1])
               if t not in spec.published_ids]
    vocab = {token: i for i, token in enumerate(regular)}
    vocab.update(spec.published_ids)
    taken = set(vocab.values())
    vocab.update({f"<|filler_{i}|>": i for i in range(spec.published_length) if i not in taken})
    state["model"]["vocab"] = vocab
    for added in state["added_tokens"]:
        added["id"] = spec.published_ids[added["content"]]
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(state)),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=chat_template(spec.image_part),
        padding_side="left",
        extra_special_tokens=dict(spec.named_tokens),
    )


def build_real_width(source: str, out: Path, corpus: list[str], text_layers: int | None = 1, vision_layers: int = 1,
                     seed: int = 0) -> Path:
    """Save to `out` a random-weight model of `source`'s published shape with `text_layers` language and
    `vision_layers` vision layers (`text_layers` None: the published depths, as benchmarks/gpu.py builds
    them for a GPU), its processor at the checkpoint's own image sizes, and a tokenizer in the published
    layout. Returns `out`."""
    config = model_config(source)
    if text_layers is not None:
        config = with_layers(config, text_layers, vision_layers)
    spec = get_family(config.model_type)
    tokenizer = published_layout_tokenizer(corpus, config.model_type)
    tile_px = getattr(config.vision_config, "image_size", None)  # InternVL's tiles; Qwen-VL's processors size by pixels
    tile_px = tile_px[0] if isinstance(tile_px, (list, tuple)) else tile_px
    processor = spec.processor(tokenizer, chat_template(spec.image_part), tile_px, True)
    torch.manual_seed(seed)
    model = spec.model_class._from_config(config, dtype=torch.bfloat16)  # as the checkpoints are stored; half the memory
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
