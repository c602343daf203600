"""Convert an original-format InternVL checkpoint into a transformers-native ("-hf") directory.

TTRV Tables 3, 5, 6, 11 and 12 use InternVL2.5-4B (`OpenGVLab/InternVL2_5-4B`), which the Hub holds
only in OpenGVLab's original format: remote code (`InternVLChatModel`, `modeling_internvl_chat.py`),
a config with `llm_config` / `vision_config`, weights named `vision_model.*`, `language_model.*`,
`mlp1.*`. Only the MPO variants and InternVL3 have "-hf" conversions.

Why a conversion and not `trust_remote_code`:
- The remote model has no processor. Image tiling lives in the model card's user code
  (`load_image` / `dynamic_preprocess`), the prompt format in a Python conversation template
  (`internvl2_5` in `conversation.py`), and `InternVLChatModel.forward` needs `image_flags` plus an
  `img_context_token_id` that only its own `chat()` sets. TRL's GRPOTrainer calls
  `model(**processor_outputs)` and `processor.apply_chat_template`, so the remote model would need
  family-specific code in the trainer, which this project keeps family-agnostic.
- Its `auto_map` registers `AutoModel` / `AutoModelForCausalLM` only, so `load_model`
  (`AutoModelForImageTextToText`) cannot load it.
- The TTRV authors took the remote-code path, and it needed exactly that: their verl fork builds an
  `InternVLProcessor` by hand (verl/verl/utils/tokenizer.py), injects `image_flags` for InternVL in
  the actor (verl/verl/workers/actor/dp_actor.py), and sets `img_context_token_id` by hand
  (verl/verl/workers/fsdp_workers.py). LLaMA-Factory refuses `InternVLChatModel` checkpoints and
  asks for the "-hf" format (hiyouga/LlamaFactory src/llamafactory/model/patcher.py, patch_config).
After conversion InternVL2.5-4B is an `InternVLForConditionalGeneration` with an `InternVLProcessor`,
the same classes as the Hub's InternVL3 "-hf" models.

The key mapping and config translation follow transformers' own
`models/internvl/convert_internvl_weights_to_hf.py`, which the wheel does not ship. Differences:
weights and config are read from the checkpoint's files (that script instantiates the remote model);
the tokenizer is the checkpoint's own (that script loads Qwen2.5-VL's and adds InternVL's tokens);
`tie_word_embeddings` comes from `llm_config` (that script leaves InternVLConfig's default, True,
which would replace InternVL2.5-4B's separately trained `lm_head` by the input embeddings).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import (
    GenerationConfig,
    GotOcr2ImageProcessor,
    InternVLConfig,
    InternVLForConditionalGeneration,
    InternVLProcessor,
    InternVLVideoProcessor,
    InternVLVisionConfig,
    Qwen2Config,
    Qwen2Tokenizer,
)

from .loading import resolve_model_source
from .source import CHECKPOINT_FILES

# The tokens the original `chat()` puts around an image (modeling_internvl_chat.py), named the way
# InternVLProcessor looks them up on the tokenizer. `<video>` is not in InternVL2.5's vocabulary, but
# the processor needs the attribute; as in transformers' conversion, it is registered past the
# embedding matrix and never produced, since this project passes no videos.
IMAGE_TOKENS = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>"}
VIDEO_TOKEN = "<video>"
END_OF_TURN = "<|im_end|>"

# The ChatML layout of InternVL's `internvl2_5` conversation template (roles `<|im_start|>user\n`,
# separator `<|im_end|>\n`), an image as the context token the processor expands to
# <img><IMG_CONTEXT>*n</img>, followed by a newline as in `chat()`'s "<image>\n" + question. No
# default system message (InternVL's own `chat()` adds one): as in transformers' conversion, hence
# the Hub's InternVL3 "-hf" processors, and as in TTRV's runs, whose template
# (verl/verl/utils/tokenizer.py) also drops the newlines after the role and the image.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<IMG_CONTEXT>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CHATML_TEMPLATES = {"internvl2_5"}  # conversation templates CHAT_TEMPLATE reproduces

# ImageNet statistics of the original preprocessing (`build_transform` in the model card).
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]

# Original InternViT / Qwen2 / projector names -> InternVLForConditionalGeneration names; the first
# full match wins. Layouts: modeling_intern_vit.py, modeling_internvl_chat.py (mlp1 = LayerNorm,
# Linear, GELU, Linear), Qwen2ForCausalLM.
_LAYER = r"vision_model\.encoder\.layers\.(\d+)\."
_TOWER = "model.vision_tower."
KEY_MAP = [
    (r"vision_model\.embeddings\.class_embedding", _TOWER + "embeddings.cls_token"),
    (r"vision_model\.embeddings\.position_embedding", _TOWER + "embeddings.position_embeddings"),
    (r"vision_model\.embeddings\.patch_embedding\.(weight|bias)", _TOWER + r"embeddings.patch_embeddings.projection.\1"),
    (_LAYER + r"attn\.proj\.(weight|bias)", _TOWER + r"encoder.layer.\1.attention.projection_layer.\2"),
    (_LAYER + r"attn\.(q_norm|k_norm)\.weight", _TOWER + r"encoder.layer.\1.attention.\2.weight"),
    (_LAYER + r"ls([12])", _TOWER + r"encoder.layer.\1.lambda_\2"),
    (_LAYER + r"norm1\.(weight|bias)", _TOWER + r"encoder.layer.\1.layernorm_before.\2"),
    (_LAYER + r"norm2\.(weight|bias)", _TOWER + r"encoder.layer.\1.layernorm_after.\2"),
    (_LAYER + r"mlp\.(fc[12])\.(weight|bias)", _TOWER + r"encoder.layer.\1.mlp.\2.\3"),
    (r"language_model\.model\.(.+)", r"model.language_model.\1"),
    (r"language_model\.lm_head\.weight", "lm_head.weight"),
    (r"mlp1\.0\.(weight|bias)", r"model.multi_modal_projector.layer_norm.\1"),
    (r"mlp1\.1\.(weight|bias)", r"model.multi_modal_projector.linear_1.\1"),
    (r"mlp1\.3\.(weight|bias)", r"model.multi_modal_projector.linear_2.\1"),
]
# InternViT fuses q, k, v in one Linear whose output rows are ordered (3, heads, head_dim):
# `qkv(x).reshape(B, N, 3, heads, head_dim)` in InternAttention._naive_attn.
FUSED_QKV = re.compile(_LAYER + r"attn\.qkv\.(weight|bias)")



class CheckpointError(ValueError):
    """The original checkpoint is missing a file, a config field or a weight the conversion needs."""


def _field(section: dict, name: str, where: str):
    if name not in section:
        raise CheckpointError(f"{where}: missing field `{name}`")
    return section[name]


def read_original_config(source: Path) -> dict:
    path = source / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file; expected an original-format InternVL checkpoint")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}: not valid JSON ({err})") from err
    if "InternVLChatModel" not in config.get("architectures", []):
        raise CheckpointError(
            f"{path}: `architectures` is {config.get('architectures')}, not the original InternVLChatModel; "
            "a transformers-native checkpoint needs no conversion, point `source` at it"
        )
    return config


def text_config(original: dict, where: str) -> Qwen2Config:
    """`llm_config` -> Qwen2Config. Only Qwen2 LLMs (InternVL2.5-1B/4B/38B/78B, InternVL3) are handled:
    InternLM2 ones fuse q/k/v per key-value group and need another mapping."""
    llm = _field(original, "llm_config", where)
    where = f"{where}: llm_config"
    arch = _field(llm, "architectures", where)
    if arch != ["Qwen2ForCausalLM"]:
        raise CheckpointError(f"{where}.architectures is {arch}; only Qwen2ForCausalLM LLMs are converted")
    if llm.get("rope_scaling"):
        raise CheckpointError(f"{where}.rope_scaling is {llm['rope_scaling']}; only plain RoPE is converted")
    required = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads"]
    optional = ["hidden_act", "max_position_embeddings", "rms_norm_eps", "use_sliding_window", "sliding_window",
                "max_window_layers", "attention_dropout", "initializer_range", "bos_token_id", "eos_token_id",
                "pad_token_id"]
    fields = {name: _field(llm, name, where) for name in required}
    fields.update({name: llm[name] for name in optional if name in llm})
    return Qwen2Config(
        **fields,
        rope_parameters={"rope_type": "default", "rope_theta": float(_field(llm, "rope_theta", where))},
        tie_word_embeddings=llm.get("tie_word_embeddings", False),  # Qwen2Config's default, as the remote code
        use_cache=True,
    )


def vision_config(original: dict, where: str) -> InternVLVisionConfig:
    """`vision_config` (InternVisionConfig) -> InternVLVisionConfig; absent optional fields take the
    defaults of the original configuration_intern_vit.py."""
    vision = _field(original, "vision_config", where)
    where = f"{where}: vision_config"
    image_size = original.get("force_image_size") or vision.get("image_size", 224)
    return InternVLVisionConfig(
        hidden_size=_field(vision, "hidden_size", where),
        num_hidden_layers=_field(vision, "num_hidden_layers", where),
        num_attention_heads=_field(vision, "num_attention_heads", where),
        intermediate_size=_field(vision, "intermediate_size", where),
        hidden_act=vision.get("hidden_act", "gelu"),
        norm_type=vision.get("norm_type", "rms_norm"),
        layer_norm_eps=vision.get("layer_norm_eps", 1e-6),
        attention_bias=vision.get("qkv_bias", False),
        use_qk_norm=vision.get("qk_normalization", True),
        attention_dropout=vision.get("attention_dropout", 0.0),
        projection_dropout=vision.get("dropout", 0.0),
        initializer_range=vision.get("initializer_range", 0.02),
        image_size=image_size,
        patch_size=vision.get("patch_size", 14),
        num_channels=vision.get("num_channels", 3),
        use_absolute_position_embeddings=True,
    )


def translate_config(original: dict, image_token_id: int, where: str = "config.json") -> InternVLConfig:
    """The original InternVLChatConfig -> InternVLConfig."""
    if original.get("ps_version", "v1") != "v2":
        # v1's pixel shuffle leaves the feature map transposed; transformers implements v2 only.
        raise CheckpointError(f"{where}: `ps_version` is {original.get('ps_version')!r}; only 'v2' is converted")
    if original.get("template") not in CHATML_TEMPLATES:
        raise CheckpointError(
            f"{where}: conversation `template` {original.get('template')!r} is not one the converted chat "
            f"template reproduces ({', '.join(sorted(CHATML_TEMPLATES))})"
        )
    text, vision = text_config(original, where), vision_config(original, where)
    ratio = _field(original, "downsample_ratio", where)
    # Tokens per 448 px tile: (448 / 14)^2 patches, pixel-shuffled by 0.5 in each direction -> 256.
    image_seq_length = int((vision.image_size[0] // vision.patch_size[0]) ** 2 * ratio**2)
    config = InternVLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=image_token_id,
        image_seq_length=image_seq_length,
        downsample_ratio=ratio,
        projector_hidden_act="gelu",  # mlp1's nn.GELU()
        vision_feature_layer=original.get("select_layer", -1),
        vision_feature_select_strategy="default",  # extract_feature drops the CLS token
        tie_word_embeddings=text.tie_word_embeddings,
    )
    config.architectures = ["InternVLForConditionalGeneration"]
    return config


def read_original_weights(source: Path) -> dict[str, torch.Tensor]:
    """Every tensor of model.safetensors, or of the shards model.safetensors.index.json names."""
    index = source / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as err:
            raise CheckpointError(f"{index}: not a safetensors index with a `weight_map` ({err})") from err
        shards = sorted(set(weight_map.values()))
    elif (source / "model.safetensors").is_file():
        weight_map, shards = None, ["model.safetensors"]
    else:
        raise CheckpointError(f"{source}: neither model.safetensors nor model.safetensors.index.json")
    tensors = {}
    for shard in shards:
        path = source / shard
        if not path.is_file():
            raise CheckpointError(f"{index}: shard {shard} is listed but {path} does not exist")
        try:
            with safe_open(path, framework="pt") as f:
                tensors.update({key: f.get_tensor(key) for key in f.keys()})
        except Exception as err:  # safetensors raises its own error types for truncated or garbled files
            raise CheckpointError(f"{path}: cannot read safetensors ({err})") from err
    if weight_map is not None and (missing := sorted(set(weight_map) - set(tensors))):
        raise CheckpointError(f"{index}: keys listed but absent from their shards: {missing[:5]}")
    return tensors


def convert_state_dict(original: dict[str, torch.Tensor], vision_hidden_size: int) -> dict[str, torch.Tensor]:
    converted = {}
    for key, tensor in original.items():
        if m := FUSED_QKV.fullmatch(key):
            if tensor.shape[0] != 3 * vision_hidden_size:
                raise CheckpointError(
                    f"weight {key}: {tuple(tensor.shape)} rows, expected 3 x vision_config.hidden_size = "
                    f"{3 * vision_hidden_size}"
                )
            layer, kind = m.groups()
            for name, part in zip(("q_proj", "k_proj", "v_proj"), tensor.chunk(3, dim=0)):
                converted[f"{_TOWER}encoder.layer.{layer}.attention.{name}.{kind}"] = part.contiguous()
            continue
        for pattern, target in KEY_MAP:
            if re.fullmatch(pattern, key):
                converted[re.sub(pattern, target, key)] = tensor
                break
        else:
            raise CheckpointError(f"weight {key}: no counterpart in InternVLForConditionalGeneration")
    return converted


def check_against_model(converted: dict[str, torch.Tensor], config: InternVLConfig, where: Path) -> None:
    """Names and shapes against an InternVLForConditionalGeneration built on the meta device (no memory)."""
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in InternVLForConditionalGeneration(config).state_dict().items()}
    if config.tie_word_embeddings:
        expected.pop("lm_head.weight")
    missing = sorted(set(expected) - set(converted))
    unexpected = sorted(set(converted) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            f"{where}: converted weights do not match config.json: missing {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}"
        )
    wrong = [(k, tuple(v.shape), expected[k]) for k, v in converted.items() if tuple(v.shape) != expected[k]]
    if wrong:
        key, got, want = wrong[0]
        raise CheckpointError(f"{where}: weight for {key} has shape {got}, config.json implies {want}")


def load_tokenizer(source: Path, vocab_size: int) -> Qwen2Tokenizer:
    """The checkpoint's own tokenizer, with InternVLProcessor's named image tokens. Loaded through its
    class, not AutoTokenizer: that would read config.json, whose `auto_map` makes transformers ask
    whether to run the checkpoint's remote code."""
    path = source / "tokenizer_config.json"
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    tokenizer_class = json.loads(path.read_text()).get("tokenizer_class")
    if tokenizer_class not in ("Qwen2Tokenizer", "Qwen2TokenizerFast"):
        raise CheckpointError(f"{path}: `tokenizer_class` is {tokenizer_class!r}; only Qwen2's tokenizer is converted")
    try:
        plain = Qwen2Tokenizer.from_pretrained(source)
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{source}: cannot load the tokenizer (vocab.json + merges.txt or tokenizer.json): {err}") from err
    vocab = plain.get_vocab()
    for token in [*IMAGE_TOKENS.values(), END_OF_TURN]:
        if token not in vocab:
            raise CheckpointError(f"{source}: tokenizer files (tokenizer_config.json / added_tokens.json) lack {token}")
        if vocab[token] >= vocab_size:
            raise CheckpointError(f"{source}: token {token} has id {vocab[token]} >= llm_config.vocab_size {vocab_size}")
    tokenizer = Qwen2Tokenizer.from_pretrained(source, extra_special_tokens={**IMAGE_TOKENS, "video_token": VIDEO_TOKEN})
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_processor(tokenizer, config: InternVLConfig, original: dict) -> InternVLProcessor:
    """Tiles of `image_size` px, up to `max_dynamic_patch` of them plus a thumbnail (the original
    `dynamic_preprocess`), bicubic resize, ImageNet normalisation. TTRV's runs tiled too: the prompts
    in its InternVL2.5-4B logs carry 13, 7 or 3 x 256 image tokens."""
    side = config.vision_config.image_size[0]
    image_processor = GotOcr2ImageProcessor(
        size={"height": side, "width": side},
        image_mean=IMAGENET_MEAN,
        image_std=IMAGENET_STD,
        crop_to_patches=original.get("dynamic_image_size", True),
        min_patches=original.get("min_dynamic_patch", 1),
        max_patches=original.get("max_dynamic_patch", 12),
    )
    return InternVLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        # Unused here (no videos), but part of the processor; frames preprocessed like the images.
        video_processor=InternVLVideoProcessor(size={"height": side, "width": side}, image_mean=IMAGENET_MEAN,
                                               image_std=IMAGENET_STD),
        image_seq_length=config.image_seq_length,
        chat_template=CHAT_TEMPLATE,
    )


def fetch_checkpoint(source: str) -> Path:
    """A local directory as is; a Hub id ("org/name") through the HF cache, or the network where
    there is one."""
    try:
        source = resolve_model_source(source, "models.<name>.convert_from")
    except FileNotFoundError as err:
        raise CheckpointError(str(err)) from None
    if Path(source).is_dir():
        return Path(source)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(source, allow_patterns=CHECKPOINT_FILES))


def convert_internvl(source: str, out_dir: Path) -> dict:
    """Write a transformers-native copy of the original checkpoint `source` to `out_dir`, loadable by
    `load_model`. Weights keep their stored dtype. Returns a summary for the log."""
    src = fetch_checkpoint(source)
    original_config, where = read_original_config(src), str(src / "config.json")
    vocab_size = _field(_field(original_config, "llm_config", where), "vocab_size", f"{where}: llm_config")
    tokenizer = load_tokenizer(src, vocab_size)
    config = translate_config(original_config, tokenizer.context_image_token_id, where)
    original = read_original_weights(src)
    converted = convert_state_dict(original, config.vision_config.hidden_size)
    check_against_model(converted, config, src)

    with torch.device("meta"):
        model = InternVLForConditionalGeneration(config)
    model.load_state_dict(converted, strict=False, assign=True)  # strictness checked above; tied head absent
    if config.tie_word_embeddings:
        model.tie_weights()
    end_of_turn = tokenizer.convert_tokens_to_ids(END_OF_TURN)  # `chat()` stops at the template's separator
    model.generation_config = GenerationConfig(eos_token_id=end_of_turn, pad_token_id=tokenizer.pad_token_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    build_processor(tokenizer, config, original_config).save_pretrained(out_dir)
    return {
        "source": source,
        "original_tensors": len(original),
        "converted_tensors": len(converted),
        "parameters": sum(t.numel() for t in converted.values()),
        "dtype": str(next(iter(converted.values())).dtype),
        "image_token_id": config.image_token_id,
        "image_seq_length": config.image_seq_length,
        "tie_word_embeddings": config.tie_word_embeddings,
    }
