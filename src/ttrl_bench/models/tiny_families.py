"""The offline tiny models' families (tiny.py, real_width.py): each family's special tokens (and where the
published checkpoints hold them), chat template, config and processor builders (`FAMILIES`). Real
checkpoints bring their own processor and template; what differs between families at run time is in
families.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from transformers import (
    GotOcr2ImageProcessor,
    InternVLConfig,
    InternVLForConditionalGeneration,
    InternVLProcessor,
    InternVLVideoProcessor,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2VLImageProcessor,
    Qwen2VLVideoProcessor,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
    Qwen3VLProcessor,
)
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor


@dataclass(frozen=True)
class Family:
    """How to build a tiny offline model of one family: special tokens (named ones become tokenizer
    attributes, as the family's processor expects), the chat template's image part, config, processor."""

    special_tokens: tuple[str, ...]
    named_tokens: dict[str, str]
    image_part: str
    model_class: type
    config: Callable  # (ids: token -> id, vocab_size, hidden, text_layers, tile_px, sizes) -> config
    processor: Callable  # (tokenizer, chat_template, tile_px, real_size) -> processor
    # Where the published checkpoints' tokenizers hold these tokens, and their length (ids past it in
    # the embedding are padding rows): the real-width rehearsal's tokenizer puts them there.
    published_ids: dict[str, int]
    published_length: int


def chat_template(image_part: str) -> str:
    """The family's ChatML template without a default system prompt or video branch: the demo prompts
    carry no system turn, and a shorter prompt keeps CPU rollouts fast."""
    return (
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}" + image_part + "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


def _text_config(ids: dict, vocab_size: int, hidden: int, layers: int, **extra) -> dict:
    return {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        **extra,
    }


def _qwen_config(ids, vocab_size, hidden, layers, tile_px, sizes=None):
    """`sizes` ({"text": {...}, "vision": {...}}) overrides the tiny dimensions, e.g. with a published
    checkpoint's (benchmarks/gpu.py builds random-weight models at real size)."""
    sizes = sizes or {}
    heads = sizes.get("text", {}).get("num_attention_heads", 4)
    half_head_dim = sizes.get("text", {}).get("hidden_size", hidden) // heads // 2
    # mrope splits the rotary half-dimension into (temporal, height, width) sections.
    mrope = [half_head_dim - 2 * (half_head_dim // 3), half_head_dim // 3, half_head_dim // 3]
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": mrope}
    return Qwen2_5_VLConfig(
        text_config={**_text_config(ids, vocab_size, hidden, layers, rope_parameters=rope), **sizes.get("text", {})},
        vision_config={
            "depth": 2, "hidden_size": hidden, "intermediate_size": 2 * hidden, "num_heads": 4,
            "out_hidden_size": hidden, "patch_size": 14, "spatial_merge_size": 2, "window_size": 56,
            "fullatt_block_indexes": [1], **sizes.get("vision", {}),
        },
        **_qwen_special_tokens(ids, sizes),
    )


def _qwen_special_tokens(ids, sizes):
    """The Qwen-VL families' image/video placeholder ids (in our tokenizer) and embedding tying."""
    return dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
                tie_word_embeddings=sizes.get("tie_word_embeddings", True))


def _qwen_processor(tokenizer, template, tile_px, real_size=False):
    # Digits (56 px) stay 4x4 patches of 14 px, merged 2x2 -> 4 image tokens; scenes (112 px) 16.
    # Real size: the image processor's own pixel bounds (an 840 px scene -> 900 tokens).
    size = None if real_size else {"shortest_edge": 56 * 56, "longest_edge": 112 * 112}
    return Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(**({"size": size} if size else {})),
                               video_processor=Qwen2VLVideoProcessor(size=size),
                               tokenizer=tokenizer, chat_template=template)


def _qwen3_config(ids, vocab_size, hidden, layers, tile_px, sizes=None):
    """Qwen3-VL: a Qwen3 text model with interleaved mrope, a vision tower of 16 px patches whose
    `deepstack_visual_indexes` layers also feed the language model."""
    sizes = sizes or {}
    text = sizes.get("text", {})
    heads = text.get("num_attention_heads", 4)
    head_dim = text.get("head_dim", text.get("hidden_size", hidden) // heads)
    half = head_dim // 2
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_interleaved": True,
            "mrope_section": [half - 2 * (half // 3), half // 3, half // 3]}
    return Qwen3VLConfig(
        text_config={**_text_config(ids, vocab_size, hidden, layers, head_dim=head_dim, rope_parameters=rope), **text},
        vision_config={
            "depth": 2, "hidden_size": hidden, "intermediate_size": 2 * hidden, "num_heads": 4,
            "out_hidden_size": hidden, "patch_size": 16, "spatial_merge_size": 2, "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0], **sizes.get("vision", {}),
        },
        **_qwen_special_tokens(ids, sizes),
    )


def _qwen3_processor(tokenizer, template, tile_px, real_size=False):
    # 16 px patches merged 2x2: the 56 px digits become 64 px (4 tokens), the 112 px scenes 128 px (16)
    size = None if real_size else {"shortest_edge": 64 * 64, "longest_edge": 128 * 128}
    kwargs = {"size": size} if size else {}
    return Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, **kwargs),
                            video_processor=Qwen3VLVideoProcessor(**kwargs), tokenizer=tokenizer,
                            chat_template=template)


def _internvl_config(ids, vocab_size, hidden, layers, tile_px, sizes=None):
    # InternViT on tiles of `tile_px` (448 in the real models), patch 14, pixel shuffle 0.5:
    # (tile_px / 14 / 2)^2 image tokens per tile (256 for 448 px).
    sizes = sizes or {}
    return InternVLConfig(
        vision_config={"hidden_size": hidden // 2, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "intermediate_size": hidden, "image_size": tile_px, "patch_size": 14, **sizes.get("vision", {})},
        text_config={**_text_config(ids, vocab_size, hidden, layers, model_type="qwen2"), **sizes.get("text", {})},
        image_token_id=ids["<IMG_CONTEXT>"],
        image_seq_length=(tile_px // 28) ** 2,
        downsample_ratio=0.5,
        tie_word_embeddings=sizes.get("tie_word_embeddings", True),
    )


def _internvl_processor(tokenizer, template, tile_px, real_size=False):
    # GotOcr2 tiling as in the real InternVL processors (crop_to_patches, thumbnail): 4 tiles at most
    # for the tiny models, 12 at real size (InternVL3's max_dynamic_patch).
    image_processor = GotOcr2ImageProcessor(size={"height": tile_px, "width": tile_px}, crop_to_patches=True,
                                            min_patches=1, max_patches=12 if real_size else 4)
    return InternVLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                             video_processor=InternVLVideoProcessor(), image_seq_length=(tile_px // 28) ** 2,
                             chat_template=template)


CHATML = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Qwen2's tokenizer (every family here builds on it): 151,643 BPE tokens, then ChatML and the vision tokens;
# Qwen2.5-VL's tokenizer ends at <|file_sep|> 151664, its configs name image 151655, video 151656 and
# vision start 151652 (models/data/model_configs.json).
QWEN2_IDS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
QWEN_VL_TOKENS = dict(special_tokens=CHATML + ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"),
                      named_tokens={}, image_part="<|vision_start|><|image_pad|><|vision_end|>",
                      published_ids={**QWEN2_IDS, "<|vision_start|>": 151652, "<|vision_end|>": 151653,
                                     "<|image_pad|>": 151655, "<|video_pad|>": 151656},
                      published_length=151665)

FAMILIES: dict[str, Family] = {
    # Qwen2.5-VL: <|vision_start|><|image_pad|><|vision_end|> per image; the processor expands the pad.
    "qwen2_5_vl": Family(
        **QWEN_VL_TOKENS,
        model_class=Qwen2_5_VLForConditionalGeneration,
        config=_qwen_config,
        processor=_qwen_processor,
    ),
    # Qwen3-VL: the same tokens and template part as Qwen2.5-VL, 16 px patches (ECHO Table 2's Qwen3-VL-8B).
    # Its tokenizer adds <tool_response> </tool_response> <think> </think> (151665-151668): 151,669.
    "qwen3_vl": Family(
        **{**QWEN_VL_TOKENS, "published_length": 151669},
        model_class=Qwen3VLForConditionalGeneration,
        config=_qwen3_config,
        processor=_qwen3_processor,
    ),
    # InternVL (-hf): the template emits "<IMG_CONTEXT>\n"; the processor expands it to
    # <img> + image_seq_length x tiles <IMG_CONTEXT> + </img>, reading the tokens' names from the tokenizer.
    "internvl": Family(
        special_tokens=CHATML + ("<img>", "</img>", "<IMG_CONTEXT>", "<video>"),
        named_tokens={"start_image_token": "<img>", "end_image_token": "</img>",
                      "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"},
        image_part="<IMG_CONTEXT>\n",
        # InternVL3-hf: Qwen2.5-VL's 151,665 tokens, then <img> </img> <IMG_CONTEXT> (the config's
        # image_token_id 151667) <quad> </quad> <ref> </ref> <box> </box>: 151,674 (transformers'
        # convert_internvl_weights_to_hf.py write_tokenizer). Where it keeps "<video>" is not established
        # here: ours takes <quad>'s 151668, which no image prompt contains.
        published_ids={**QWEN2_IDS, "<img>": 151665, "</img>": 151666, "<IMG_CONTEXT>": 151667, "<video>": 151668},
        published_length=151674,
        model_class=InternVLForConditionalGeneration,
        config=_internvl_config,
        processor=_internvl_processor,
    ),
}


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise KeyError(f"unknown model family {name!r} (config key demo_model.family); known: {', '.join(FAMILIES)}")
    return FAMILIES[name]
