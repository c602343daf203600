"""What differs between VLM families, in one place (DESIGN.md "Model families").

Adaptation and rewards never test a family's name. What they need from a model is answered here:
- the vision tower to freeze: transformers' own `get_encoder(modality="image")` lookup, and the adapter
  inside it that stays trainable (`freeze_vision_encoder`);
- the placeholder tokens a rollout must never contain (image / video context tokens: a sampled one
  makes the training forward count one image token too many, docs/gpu-runs.md), read from the config;
- the teacher-forced forward of a prompt, its image and a completion (`completion_logits`): the
  processor builds every input its model needs, so losses and entropies never name a family;
- the image tokens of a benchmark image per family (`IMAGE_TOKENS`, benchmarks/gpu.py);
- for the offline tiny models: each family's special tokens, chat template, config and processor
  (tiny_families.py `FAMILIES`, used by `tiny.py`). Real checkpoints bring their own processor and template.

Families of the paper configs: Qwen2.5-VL (VR-TTRL, VisionReasoner, ECHO), Qwen3-VL (ECHO Table 2)
and InternVL in transformers' native "-hf" format (TTRV: InternVL3-2B/8B, InternVL2.5-4B after conversion).
"""

from __future__ import annotations

import torch

from ..generation.hf import chat_prompt
from ..generation.precision import compute_device

# Config fields that name a token standing in for image or video features.
PLACEHOLDER_FIELDS = ("image_token_id", "video_token_id", "image_token_index", "video_token_index")


def vision_tower(model):
    """The vision encoder (VR-TTRL Appendix A freezes it). transformers looks it up under the names
    its VLMs use (`visual` for Qwen2.5-VL, `vision_tower` for InternVL, ...)."""
    tower = model.get_encoder(modality="image")
    if tower is model or tower is getattr(model, "model", None):
        raise ValueError(
            f"{type(model).__name__}: no vision encoder found by transformers' get_encoder(modality='image'); "
            "set adaptation.hyperparameters.<task>.freeze_vision: false or add the family to models/families.py"
        )
    return tower


# The vision-language adapter (projector) where a family keeps it inside the module get_encoder returns:
# Qwen-VL's patch merger, and Qwen3-VL's DeepStack mergers too. InternVL's multi_modal_projector sits
# outside its vision tower, so freezing the tower leaves it trainable already.
VISION_ADAPTERS_IN_TOWER = {"qwen2_5_vl": ("merger",), "qwen3_vl": ("merger", "deepstack_merger_list")}
# `freeze_vision: authors`: the families whose vision encoder the TTRV authors' verl fork freezes
# (Akshit21112002/TTRV verl/verl/workers/fsdp_workers.py:236-243: InternVL's `vision_model`, its mlp1
# projector left trainable, "internvl will occur a bug when using the vision encoder"); every other
# family, Qwen2.5-VL included, trains its whole vision tower there.
TTRV_AUTHORS_FROZEN_VISION = ("internvl",)
FREEZE_VISION_CHOICES = (True, False, "authors")


def freezes_vision_encoder(model_type: str, setting) -> bool:
    """Whether `freeze_vision` (True: the encoder frozen, its adapter trained, VR-TTRL Appendix C.1 "language-side
    and adapter parameters, with the vision encoder frozen"; False: nothing frozen; "authors": as the TTRV
    authors' code does for this family) freezes this model type's vision encoder."""
    if setting not in FREEZE_VISION_CHOICES:
        raise ValueError(f"freeze_vision must be true, false or 'authors', got {setting!r}")
    if setting == "authors":
        return model_type.startswith(TTRV_AUTHORS_FROZEN_VISION)
    return bool(setting)


def adapter_in_vision_tower(model_type: str) -> bool:
    return model_type in VISION_ADAPTERS_IN_TOWER


def freeze_vision_encoder(model) -> int:
    """Freeze the vision encoder and keep its adapter trainable (VISION_ADAPTERS_IN_TOWER); returns the
    parameters left trainable in the tower (the adapter's)."""
    tower = vision_tower(model)
    tower.requires_grad_(False)
    for name in VISION_ADAPTERS_IN_TOWER.get(model.config.model_type, ()):
        getattr(tower, name).requires_grad_(True)
    return sum(p.numel() for p in tower.parameters() if p.requires_grad)


def placeholder_token_ids(config) -> list[int]:
    """Ids of the image / video placeholder tokens of a model's config (top level or text config)."""
    ids = {getattr(c, f, None) for c in (config, config.get_text_config()) for f in PLACEHOLDER_FIELDS}
    return sorted(i for i in ids if isinstance(i, int) and i >= 0)


def unsampleable_token_ids(config, tokenizer) -> list[int]:
    """Token ids a rollout must never contain: the placeholders, and the embedding rows past the
    tokenizer (Qwen2.5-VL-7B has 152064 rows for 151665 tokens: such an id decodes to nothing)."""
    return placeholder_token_ids(config) + list(range(len(tokenizer), config.get_text_config().vocab_size))


# The TTRV authors' rollout temperature per family (Akshit21112002/TTRV verl/logs, each log's config
# `actor_rollout_ref.rollout.temperature`): 1.5 in every Qwen2.5-VL log, 1.0 in every InternVL log.
TTRV_LOGGED_TEMPERATURE = {"qwen2_5_vl": 1.5, "internvl": 1.0}


def ttrv_logged_temperature(config) -> float:
    """The rollout temperature the TTRV authors' runs used for this model's family (config.model_type); for a
    family they never ran, TTRV Appendix A's 1.0."""
    return TTRV_LOGGED_TEMPERATURE.get(config.model_type, 1.0)


def image_span_token_ids(processor) -> tuple[int, int] | None:
    """The start / end tokens a family's processor puts around an image's placeholder run
    (InternVL's <img> / </img>; Qwen2.5-VL's <|vision_start|> / <|vision_end|> come from the chat
    template instead, so its processor adds none)."""
    span = (getattr(processor, "start_image_token_id", None), getattr(processor, "end_image_token_id", None))
    return span if all(isinstance(i, int) for i in span) else None


def _per_token_field(value, input_ids: torch.Tensor) -> bool:
    """An integer (batch, prompt length) tensor: a mask or token-type ids, one entry per token."""
    return (isinstance(value, torch.Tensor) and not value.is_floating_point()
            and tuple(value.shape) == tuple(input_ids.shape))


def completion_logits(model, processor, prompt_text: str, images: list, completions: list[list[int]],
                      system: str | None = None) -> torch.Tensor:
    """Logits (rows, longest completion, vocab) predicting each token of `completions[i]` after the
    chat prompt with `images[i]`: row i, position t scores token t of completion i (padding past
    its end). The processor builds every input its model needs (Qwen2.5-VL's `image_grid_thw` and
    `mm_token_type_ids`, InternVL's tile-indexed `pixel_values`, ...) for the rows' prompts; per-token
    fields are extended over the completion as TRL's GRPOTrainer does. bf16 autocast on GPU (the
    trainable weights stay fp32); gradients flow unless the caller disables them."""
    text = chat_prompt(processor, prompt_text, system)
    pad = processor.tokenizer.pad_token_id
    m, longest = len(completions), max(1, max(map(len, completions)))
    inputs = processor(text=[text] * m, images=list(images), return_tensors="pt")  # same-size images: one length
    prompt_ids = inputs.pop("input_ids")
    completion = torch.full((m, longest), pad, dtype=torch.long)
    completion_mask = torch.zeros_like(completion)
    for i, ids in enumerate(completions):
        completion[i, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
        completion_mask[i, : len(ids)] = 1
    fields, device = {}, compute_device(model)  # the accelerator's, also under FSDP2 CPU offload
    for key, value in inputs.items():
        if _per_token_field(value, prompt_ids):  # attention mask, token type ids: cover the completion too
            tail = completion_mask if key == "attention_mask" else torch.zeros_like(completion)
            value = torch.cat([value, tail.to(value.dtype)], dim=1)
        fields[key] = value.to(device)
    input_ids = torch.cat([prompt_ids, completion], dim=1).to(device)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
        # logits at positions P-1 .. P+L-2 predict the L completion tokens
        return model(input_ids=input_ids, **fields, logits_to_keep=longest + 1).logits[:, :-1]


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


# The image-size bound both backends get, per family and protocol (`image_size_bound`). Qwen-VL families resize an
# image to whole (patch x merge)-pixel squares, one token each, between a floor and a ceiling of pixels: the
# checkpoints' ceiling is 16,384 tokens (Qwen2.5-VL: max_pixels 12,845,056 = 16384 x 28^2, a 2592x1944 photo ->
# 6,417 tokens), past any prompt budget here. `authors`: that ceiling and the floor of 4 tokens, as every paper's
# code sets it: the TTRV authors' verl fork (verl/utils/dataset/preprocessor/qwen_vl.py:33-34 MIN_PIXELS 4*28*28,
# MAX_PIXELS 16384*28*28), ECHO's (verl/utils/dataset/vision_utils.py process_image -> qwen_vl_utils.fetch_image,
# whose defaults are those two) and VisionReasoner's (AutoProcessor's own, after its 840 px resize). `clean`: a
# ceiling of 3,072 tokens, InternVL's 12 tiles of 256 (our choice): every family's image then fits the default
# 4,096-token prompt budget (generation/vllm_settings.py) with 1,024 tokens of text. InternVL bounds its tokens by
# tiles (12 + a thumbnail of 256, + <img> </img>: 3,330), the same under both protocols: no pixel bound.
MAX_IMAGE_TOKENS = {"authors": 16384, "clean": 3072}
MIN_IMAGE_TOKENS = 4
INTERNVL_MAX_TILES = 12  # max_dynamic_patch of InternVL3's checkpoints
INTERNVL_MAX_IMAGE_TOKENS = (INTERNVL_MAX_TILES + 1) * 256 + 2


def image_size_bound(config, protocol: str) -> dict:
    """The image processor's `size` ({"shortest_edge", "longest_edge"} in pixels, transformers 5's form) that a
    protocol gives this model (config.model_type, vision_config's patch and merge sizes), for HF
    (`bound_processor`) and vLLM (`mm_processor_kwargs`, evaluation.vllm) alike; {} for a family bounded by tiles."""
    if protocol not in MAX_IMAGE_TOKENS:
        raise ValueError(f"image size bound: unknown protocol {protocol!r}; known: {', '.join(MAX_IMAGE_TOKENS)}")
    vision = getattr(config, "vision_config", None)
    if not config.model_type.startswith("qwen") or vision is None:
        return {}
    square = (vision.patch_size * vision.spatial_merge_size) ** 2  # pixels per image token
    return {"shortest_edge": MIN_IMAGE_TOKENS * square, "longest_edge": MAX_IMAGE_TOKENS[protocol] * square}


def max_image_tokens(config, protocol: str) -> int:
    """The most image tokens one image can take under `image_size_bound` (the plan's image tokens)."""
    size = image_size_bound(config, protocol)
    if not size:
        return INTERNVL_MAX_IMAGE_TOKENS
    return MAX_IMAGE_TOKENS[protocol]


def bound_processor(processor, size: dict) -> None:
    """Give a loaded processor's image processor the bound (`image_size_bound`, or evaluation.vllm's
    mm_processor_kwargs["size"]), so HF's inputs and the token counts (generation/budget.py) use it."""
    if size:
        image_processor = processor.image_processor
        image_processor.size = {"shortest_edge": image_processor.size["shortest_edge"],
                                "longest_edge": image_processor.size["longest_edge"], **size}


# Image tokens of one benchmark image per family (benchmarks/gpu.py, docs/gpu-runs.md): InternVL's 896 px
# digit image as 4 tiles + a thumbnail of 256 tokens each; Qwen2.5-VL's 840 px scene in 28 px squares. The
# plan's typical image where a test set's image size is not documented (plan/samples.py TYPICAL_IMAGE_SIZES).
IMAGE_TOKENS = {"internvl": 5 * 256, "qwen2_5_vl": (840 // 28) ** 2}


def image_tokens_of(config, protocol: str, width: int, height: int) -> int:
    """Image tokens of one width x height image as the model's processor counts them under the protocol's bound,
    through transformers' own rules: Qwen-VL's smart_resize to whole (patch x merge) squares within
    `image_size_bound`; InternVL's GotOcr2 tiling (the 448 px tile grid closest to the image's aspect ratio,
    at most 12 tiles, + a thumbnail when more than one), 256 tokens a tile, + <img> </img>."""
    size = image_size_bound(config, protocol)
    if not size:
        from transformers.models.got_ocr2.image_processing_got_ocr2 import get_optimal_tiled_canvas

        rows, columns = get_optimal_tiled_canvas((height, width), (448, 448), 1, INTERNVL_MAX_TILES)
        tiles = rows * columns + (rows * columns > 1)
        return tiles * 256 + 2
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    vision = config.vision_config
    factor = vision.patch_size * vision.spatial_merge_size
    resized_height, resized_width = smart_resize(height, width, factor, size["shortest_edge"], size["longest_edge"])
    return resized_height * resized_width // factor**2


def image_tokens(config, protocol: str, size: tuple[int, int] | None = None) -> tuple[int, int]:
    """(typical, most) image tokens of one image of this model under a protocol, for the plan's costs
    (plan/evaluation_cost.py, plan/cost.py): the test set's typical image (`size`, width x height) as the processor
    counts it, else a benchmark image's (`IMAGE_TOKENS`), and the bound's most (`max_image_tokens`)."""
    family = "qwen2_5_vl" if config.model_type.startswith("qwen") else "internvl"
    typical = image_tokens_of(config, protocol, *size) if size else IMAGE_TOKENS[family]
    return typical, max_image_tokens(config, protocol)


# The chat templates the TTRV authors' verl fork gives a family (protocol `authors`, config
# evaluation.mcq.chat_template / adaptation.hyperparameters.mcq.chat_template: authors). InternVL:
# Akshit21112002/TTRV verl/verl/utils/tokenizer.py `hf_tokenizer` replaces the tokenizer's template for
# model_type "internvl*" by one with no newline after the role or the turn end and no system prompt,
# the image as the family's placeholder (their log: "<|im_start|>user<img>...</img> \nwhich of these define
# dairy item ...<|im_end|><|im_start|>assistant"). Every other family keeps its own template (their
# `hf_processor` returns AutoProcessor's): Qwen2.5-VL's, whose default system turn their Qwen runs saw too.
# Qwen3-VL was never run by them: its own template, not a known one of theirs.
AUTHORS_IMAGE_PLACEHOLDER = {"internvl": "<IMG_CONTEXT>"}
CHAT_TEMPLATES = ("model", "authors")


def authors_chat_template(image_placeholder: str) -> str:
    return (
        "{% for message in messages %}<|im_start|>{{ message['role'] }}"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}" + image_placeholder + "{% elif part['type'] == 'text' %}{{ part['text'] }}"
        "{% endif %}{% endfor %}{% endif %}<|im_end|>{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant{% endif %}"
    )


def use_chat_template(processor, config, which: str) -> str:
    """Set the chat template a protocol asks for on a loaded processor: "model" keeps the checkpoint's,
    "authors" the TTRV authors' for this family (config.model_type), where they set one. Returns what
    the prompts now go through, for the run's log."""
    if which not in CHAT_TEMPLATES:
        raise ValueError(f"chat template must be one of {', '.join(CHAT_TEMPLATES)}, got {which!r}")
    family_name = next((f for f in AUTHORS_IMAGE_PLACEHOLDER if config.model_type.startswith(f)), None)
    if which == "model" or family_name is None:
        return f"{config.model_type}'s own"
    processor.chat_template = authors_chat_template(AUTHORS_IMAGE_PLACEHOLDER[family_name])
    return f"the TTRV authors' {family_name} template"


def traced_image_features(model, images: int, tokens_per_image: int):
    """The image features of `images` square images of `tokens_per_image` tokens each, computed by the
    model's own vision tower on placeholder pixels under plan/memory.py's fake tensors (only shapes
    matter). InternVL: 448 px tiles of 256 tokens through `get_image_features`. Qwen-VL: flattened
    patches (2 frames x patch^2 pixels, merged 2 x 2 into one token) through the tower itself, with
    the grid-derived indices transformers lets callers precompute (transformers/vision_utils.py) made
    from real tensors, and packed attention through a flash-named kernel (`_packed_trace_attention`):
    the towers' other paths read sequence lengths with `.tolist()`, which fake tensors cannot answer."""
    config = model.config
    vision = config.vision_config
    if config.model_type == "internvl":
        per_tile = int((vision.image_size[0] // vision.patch_size[0] * config.downsample_ratio) ** 2)
        tiles = images * -(-tokens_per_image // per_tile)
        return model.model.get_image_features(pixel_values=torch.zeros(tiles, 3, *vision.image_size)).pooler_output
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from transformers import AttentionInterface
    from transformers import vision_utils as vu
    from transformers.utils.generic import get_max_seqlen

    AttentionInterface.register("flash_packed_trace", _packed_trace_attention)
    tower = model.model.visual
    tower.config._attn_implementation = "flash_packed_trace"
    side = vision.spatial_merge_size * max(1, round(tokens_per_image ** 0.5))  # patches per side
    with unset_fake_temporarily():
        grid = torch.tensor([[1, side, side]] * images)
        extra = {"position_ids": vu.get_vision_position_ids(grid, vision.spatial_merge_size)}
        extra["cu_seqlens"], _ = vu.get_vision_attention_seqlens(grid, vision)
        extra["max_seqlen"] = side * side
        if config.model_type == "qwen2_5_vl":
            extra["window_index"], extra["cu_window_seqlens"] = vu.get_vision_window_index(
                grid, vision.spatial_merge_size, vision.window_size, vision.patch_size)
            extra["max_window_seqlen"] = get_max_seqlen(torch.as_tensor(extra["cu_window_seqlens"]), tower.config)
        else:  # Qwen3-VL's learned position table, resampled to the grid
            extra["interp_indices"], extra["interp_weights"] = vu.get_vision_interpolation_indices_and_weights(
                grid, tower.num_grid_per_side, mode=tower.interpolation_mode,
                align_corners=tower.interpolation_align_corners, spatial_merge_size=vision.spatial_merge_size)
    pixels = torch.zeros(images * side * side, 3 * vision.temporal_patch_size * vision.patch_size ** 2)
    return tower(pixels, grid_thw=grid, **extra).pooler_output


def _packed_trace_attention(module, query, key, value, attention_mask=None, scaling=None, **kwargs):
    """Attention over a packed sequence for memory traces: one fused-kernel call over all tokens keeps
    O(tokens) memory, as flash-attention's variable-length kernel does on the GPU (its FLOPs are those
    of full attention: an upper bound for windowed towers)."""
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, scale=scaling)
    return out.transpose(1, 2), None


# Stochastic depth in the vision encoder's training forward. The TTRV authors trained InternVL's original
# (remote-code) checkpoints, whose InternViT drops each layer's attention and MLP branch per image tile with a
# rate rising linearly from 0 to `drop_path_rate` over the layers, in training mode only; their logs print the
# checkpoint's vision_config (Akshit21112002/TTRV verl/logs, e.g. ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log
# line 288): 0.1 in every InternVL3-2B and -8B log, 0.0 in every InternVL2.5-4B log. The -hf conversions in
# transformers have no drop path, so under `vision_drop_path` it is added back by forward hooks.
ORIGINAL_VISION_DROP_PATH = (("InternVL3-", 0.1), ("InternVL2_5-", 0.0), ("InternVL2.5-", 0.0))
# the residual branches of each family's vision layers (transformers' InternVLVisionLayer: attention, mlp)
VISION_RESIDUAL_BRANCHES = {"internvl": ("attention", "mlp")}


def original_vision_drop_path(model_id: str) -> float:
    """The drop-path rate of the original checkpoint the authors trained, from its Hub id (InternVL3-4B's 0.1
    is the InternVL3 series' value, not seen in a log); 0.0 for families whose vision encoder has none (Qwen)."""
    return next((rate for marker, rate in ORIGINAL_VISION_DROP_PATH if marker in model_id), 0.0)


def drop_path_rates(layers: int, rate: float) -> list[float]:
    """Per layer, as InternViT builds them: torch.linspace(0, rate, layers)."""
    return [float(r) for r in torch.linspace(0, rate, layers)]


def add_vision_drop_path(model, rate: float) -> int:
    """Hooks that drop each vision layer's residual branches per sample (one image tile), with probability
    drop_path_rates(layers, rate)[i], scaling the kept ones by 1 / (1 - p), in the differentiable training
    forward only (model.training and gradients on): verl's update forward runs in train mode, its old and
    reference log-probs in eval mode (dp_actor.py:233, 283) and its rollouts in vLLM, none of which drop.
    Returns the number of hooked branches; ValueError for a family whose branches are not known here."""
    branches = VISION_RESIDUAL_BRANCHES.get(model.config.model_type)
    if branches is None:
        raise ValueError(f"vision_drop_path {rate}: no vision residual branches known for model type "
                         f"{model.config.model_type!r} (models/families.py VISION_RESIDUAL_BRANCHES)")
    layers = vision_tower(model).encoder.layer
    hooked = 0
    for layer, p in zip(layers, drop_path_rates(len(layers), rate)):
        if p <= 0:
            continue
        for name in branches:
            getattr(layer, name).register_forward_hook(_drop_branch(p))
            hooked += 1
    return hooked


def _drop_branch(p: float):
    def hook(module, args, output):
        if not (module.training and torch.is_grad_enabled()):
            return output
        branch = output[0] if isinstance(output, tuple) else output
        keep = torch.rand((branch.shape[0],) + (1,) * (branch.dim() - 1), device=branch.device) >= p
        dropped = branch * keep.to(branch.dtype) / (1 - p) if p < 1 else branch * 0
        return (dropped, *output[1:]) if isinstance(output, tuple) else dropped
    return hook
