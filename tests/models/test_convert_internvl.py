"""InternVL2.5-4B conversion (models/convert_internvl.py), offline.

A tiny random checkpoint is written in OpenGVLab's original layout: config.json with the fields of
the real InternVL2_5-4B config (as the TTRV authors' run log prints it), weights under the names of
modeling_intern_vit.py / modeling_internvl_chat.py / Qwen2ForCausalLM in two safetensors shards with
an index, and a byte-level BPE tokenizer as vocab.json + merges.txt + tokenizer_config.json +
added_tokens.json carrying the InternVL special tokens after the Qwen ones, as in the real vocabulary.
"""

from __future__ import annotations

import copy
import json
import math
import shutil

import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from ttrl_bench.generation.hf import chat_prompt, generate_greedy
from ttrl_bench.models.convert_internvl import CheckpointError, convert_internvl, translate_config
from ttrl_bench.models.loading import load_model

# config.json of OpenGVLab/InternVL2_5-4B as printed in Akshit21112002/TTRV
# verl/logs/ai2d/20/ai2d_20_OpenGVLab_InternVL2_5-4B_2e_0917_050515.log (dtype fields left out).
REAL_CONFIG = {
    "architectures": ["InternVLChatModel"],
    "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig",
                 "AutoModel": "modeling_internvl_chat.InternVLChatModel",
                 "AutoModelForCausalLM": "modeling_internvl_chat.InternVLChatModel"},
    "downsample_ratio": 0.5,
    "dynamic_image_size": True,
    "eos_token_id": 151645,
    "force_image_size": 448,
    "llm_config": {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
        "intermediate_size": 11008, "max_position_embeddings": 32768, "max_window_layers": 70,
        "model_type": "qwen2", "num_attention_heads": 16, "num_hidden_layers": 36, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 32768,
        "use_cache": True, "use_sliding_window": False, "vocab_size": 151674,
    },
    "max_dynamic_patch": 12,
    "min_dynamic_patch": 1,
    "model_type": "internvl_chat",
    "pad_token_id": 151643,
    "ps_version": "v2",
    "select_layer": -1,
    "template": "internvl2_5",
    "tie_word_embeddings": False,
    "use_backbone_lora": 0,
    "use_llm_lora": 0,
    "use_thumbnail": True,
    "vision_config": {
        "architectures": ["InternVisionModel"], "attention_dropout": 0.0, "drop_path_rate": 0.0, "dropout": 0.0,
        "hidden_act": "gelu", "hidden_size": 1024, "image_size": 448, "initializer_factor": 1.0,
        "initializer_range": 0.02, "intermediate_size": 4096, "layer_norm_eps": 1e-06, "model_type": "intern_vit_6b",
        "norm_type": "layer_norm", "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 24,
        "patch_size": 14, "qk_normalization": False, "qkv_bias": True, "use_flash_attn": True,
    },
}

# Qwen's chat tokens, then InternVL's additions in their real order (ids 151643-151645, 151665-151673).
QWEN_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
INTERNVL_TOKENS = ["<img>", "</img>", "<IMG_CONTEXT>", "<quad>", "</quad>", "<ref>", "</ref>", "<box>", "</box>"]
VISION, VISION_FFN, TILE = 32, 64, 56  # tile 56 px = 4 x 4 patches of 14 px -> 2 x 2 = 4 tokens after pixel shuffle
TEXT, TEXT_FFN = 32, 64


def write_tokenizer(directory) -> dict[str, int]:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(["What is shown in the image? Answer with the option's letter."] * 4, trainer=trainer)
    bpe.model.save(str(directory))  # vocab.json, merges.txt
    base = len(json.loads((directory / "vocab.json").read_text()))
    ids = {token: base + i for i, token in enumerate(QWEN_TOKENS + INTERNVL_TOKENS)}
    (directory / "added_tokens.json").write_text(json.dumps(ids))
    entry = {"special": True, "lstrip": False, "rstrip": False, "normalized": False, "single_word": False}
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Qwen2Tokenizer", "model_max_length": 8192, "errors": "replace", "bos_token": None,
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "additional_special_tokens": QWEN_TOKENS[1:] + INTERNVL_TOKENS,
        "added_tokens_decoder": {str(i): {"content": t, **entry} for t, i in ids.items()},
    }))
    return ids


def tiny_config(ids: dict[str, int]) -> dict:
    config = copy.deepcopy(REAL_CONFIG)
    special = {"bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"]}
    config.update(force_image_size=TILE, eos_token_id=special["eos_token_id"], pad_token_id=special["bos_token_id"])
    config["llm_config"].update(hidden_size=TEXT, intermediate_size=TEXT_FFN, num_attention_heads=4,
                                num_key_value_heads=2, num_hidden_layers=2, vocab_size=max(ids.values()) + 1, **special)
    config["vision_config"].update(hidden_size=VISION, intermediate_size=VISION_FFN, num_attention_heads=2,
                                   num_hidden_layers=2, image_size=TILE)
    return config


def original_weights(vocab_size: int) -> dict[str, torch.Tensor]:
    """Names and shapes of the original modules, random bf16 values."""
    def r(*shape):
        return torch.randn(*shape).mul(0.5).to(torch.bfloat16)

    kv = TEXT // 4 * 2  # head_dim 8 x 2 key-value heads
    w = {"vision_model.embeddings.class_embedding": r(1, 1, VISION),
         "vision_model.embeddings.patch_embedding.weight": r(VISION, 3, 14, 14),
         "vision_model.embeddings.patch_embedding.bias": r(VISION),
         "vision_model.embeddings.position_embedding": r(1, (TILE // 14) ** 2 + 1, VISION)}
    for i in range(2):
        p = f"vision_model.encoder.layers.{i}."
        w.update({p + "attn.qkv.weight": r(3 * VISION, VISION), p + "attn.qkv.bias": r(3 * VISION),
                  p + "attn.proj.weight": r(VISION, VISION), p + "attn.proj.bias": r(VISION),
                  p + "ls1": r(VISION), p + "ls2": r(VISION),
                  p + "norm1.weight": r(VISION), p + "norm1.bias": r(VISION),
                  p + "norm2.weight": r(VISION), p + "norm2.bias": r(VISION),
                  p + "mlp.fc1.weight": r(VISION_FFN, VISION), p + "mlp.fc1.bias": r(VISION_FFN),
                  p + "mlp.fc2.weight": r(VISION, VISION_FFN), p + "mlp.fc2.bias": r(VISION)})
        p = f"language_model.model.layers.{i}."
        w.update({p + "self_attn.q_proj.weight": r(TEXT, TEXT), p + "self_attn.q_proj.bias": r(TEXT),
                  p + "self_attn.k_proj.weight": r(kv, TEXT), p + "self_attn.k_proj.bias": r(kv),
                  p + "self_attn.v_proj.weight": r(kv, TEXT), p + "self_attn.v_proj.bias": r(kv),
                  p + "self_attn.o_proj.weight": r(TEXT, TEXT),
                  p + "mlp.gate_proj.weight": r(TEXT_FFN, TEXT), p + "mlp.up_proj.weight": r(TEXT_FFN, TEXT),
                  p + "mlp.down_proj.weight": r(TEXT, TEXT_FFN),
                  p + "input_layernorm.weight": r(TEXT), p + "post_attention_layernorm.weight": r(TEXT)})
    w.update({"language_model.model.embed_tokens.weight": r(vocab_size, TEXT),
              "language_model.model.norm.weight": r(TEXT),
              "language_model.lm_head.weight": r(vocab_size, TEXT),
              "mlp1.0.weight": r(4 * VISION), "mlp1.0.bias": r(4 * VISION),
              "mlp1.1.weight": r(TEXT, 4 * VISION), "mlp1.1.bias": r(TEXT),
              "mlp1.3.weight": r(TEXT, TEXT), "mlp1.3.bias": r(TEXT)})
    return w


def write_checkpoint(directory, weights: dict, config: dict) -> None:
    """Two shards and an index, as the Hub checkpoint stores them."""
    keys = sorted(weights)
    shards = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2 :]}
    for name, part in shards.items():
        save_file({k: weights[k].contiguous() for k in part}, str(directory / name))
    index = {"metadata": {}, "weight_map": {k: name for name, part in shards.items() for k in part}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    (directory / "config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    directory = tmp_path_factory.mktemp("InternVL2_5-tiny")
    ids = write_tokenizer(directory)
    vocab_size = max(ids.values()) + 1
    torch.manual_seed(0)
    weights = original_weights(vocab_size)
    write_checkpoint(directory, weights, tiny_config(ids))
    return directory, weights, ids


@pytest.fixture(scope="module")
def converted(original, tmp_path_factory):
    out = tmp_path_factory.mktemp("converted")
    info = convert_internvl(str(original[0]), out)
    return out, info


def test_weights_land_where_the_original_modules_put_them(original, converted):
    _, w, ids = original
    model, processor = load_model(str(converted[0]), device="cpu")
    assert model.dtype == torch.bfloat16  # stored dtype kept
    sd = model.state_dict()
    same = lambda new, old: torch.equal(sd[new], w[old])  # noqa: E731
    assert same("model.multi_modal_projector.layer_norm.weight", "mlp1.0.weight")
    assert same("model.multi_modal_projector.linear_1.weight", "mlp1.1.weight")
    assert same("model.multi_modal_projector.linear_2.bias", "mlp1.3.bias")
    # The fused qkv rows are (q; k; v), VISION rows each.
    qkv, qkv_bias = w["vision_model.encoder.layers.1.attn.qkv.weight"], w["vision_model.encoder.layers.1.attn.qkv.bias"]
    for n, name in enumerate(["q_proj", "k_proj", "v_proj"]):
        rows = slice(n * VISION, (n + 1) * VISION)
        assert torch.equal(sd[f"model.vision_tower.encoder.layer.1.attention.{name}.weight"], qkv[rows])
        assert torch.equal(sd[f"model.vision_tower.encoder.layer.1.attention.{name}.bias"], qkv_bias[rows])
    assert same("model.vision_tower.encoder.layer.1.attention.projection_layer.weight", "vision_model.encoder.layers.1.attn.proj.weight")
    assert same("model.vision_tower.embeddings.cls_token", "vision_model.embeddings.class_embedding")
    assert same("model.vision_tower.embeddings.position_embeddings", "vision_model.embeddings.position_embedding")
    assert same("model.vision_tower.embeddings.patch_embeddings.projection.weight", "vision_model.embeddings.patch_embedding.weight")
    assert same("model.vision_tower.encoder.layer.0.lambda_1", "vision_model.encoder.layers.0.ls1")
    assert same("model.vision_tower.encoder.layer.0.layernorm_after.bias", "vision_model.encoder.layers.0.norm2.bias")
    assert same("model.language_model.layers.1.self_attn.k_proj.bias", "language_model.model.layers.1.self_attn.k_proj.bias")
    # InternVL2.5-4B's lm_head is trained separately from the input embeddings: not tied.
    assert same("lm_head.weight", "language_model.lm_head.weight")
    assert not torch.equal(model.lm_head.weight, model.model.language_model.embed_tokens.weight)
    assert model.config.image_token_id == ids["<IMG_CONTEXT>"] == processor.image_token_id
    assert model.generation_config.eos_token_id == ids["<|im_end|>"]
    assert converted[1]["parameters"] == sum(t.numel() for t in w.values()) == model.num_parameters()


def test_split_attention_computes_the_original_fused_attention(original, converted):
    """InternAttention._naive_attn of modeling_intern_vit.py on the original weights, against the
    converted layer's attention with its q/k/v split."""
    _, w, _ = original
    model, _ = load_model(str(converted[0]), device="cpu", dtype="fp32")
    p = "vision_model.encoder.layers.0.attn."
    heads, head_dim, tokens = 2, VISION // 2, (TILE // 14) ** 2 + 1
    x = torch.randn(1, tokens, VISION)
    qkv = F.linear(x, w[p + "qkv.weight"].float(), w[p + "qkv.bias"].float())
    q, k, v = qkv.reshape(1, tokens, 3, heads, head_dim).permute(2, 0, 3, 1, 4).unbind(0)
    attn = ((q * head_dim**-0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
    expected = F.linear((attn @ v).transpose(1, 2).reshape(1, tokens, VISION), w[p + "proj.weight"].float(), w[p + "proj.bias"].float())
    with torch.no_grad():
        got, _ = model.model.vision_tower.encoder.layer[0].attention(x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_pixel_shuffle_is_the_originals_v2(converted):
    """InternVLChatModel.pixel_shuffle with ps_version v2 (the checkpoint's), against transformers'."""
    model, _ = load_model(str(converted[0]), device="cpu", dtype="fp32")
    x = torch.randn(2, 4, 4, VISION)
    n, width, height, c = x.shape
    y = x.view(n, width, height // 2, c * 2).permute(0, 2, 1, 3).contiguous()
    y = y.view(n, height // 2, width // 2, c * 4).permute(0, 2, 1, 3).contiguous()
    torch.testing.assert_close(model.model.pixel_shuffle(x, scale_factor=0.5), y)


def test_chat_template_forward_and_greedy_generate_with_an_image(converted):
    model, processor = load_model(str(converted[0]), device="cpu", dtype="fp32")
    prompt = chat_prompt(processor, "What is shown?")
    assert prompt == "<|im_start|>user\n<IMG_CONTEXT>\nWhat is shown?<|im_end|>\n<|im_start|>assistant\n"
    image = Image.fromarray(torch.randint(0, 256, (TILE, 2 * TILE, 3), dtype=torch.uint8).numpy())
    batch = processor(text=[prompt], images=[image], return_tensors="pt")
    # 2:1 image -> 2 tiles of 56 px plus a thumbnail (dynamic_preprocess), 4 tokens each.
    assert batch["pixel_values"].shape == (3, 3, TILE, TILE)
    ids = batch["input_ids"][0].tolist()
    assert ids.count(model.config.image_token_id) == 3 * 4
    assert ids.count(processor.start_image_token_id) == ids.count(processor.end_image_token_id) == 1
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape == (1, len(ids), model.config.text_config.vocab_size)
    assert torch.isfinite(logits).all()
    answer = generate_greedy(model, processor, ["What is shown?"], [image], max_new_tokens=1, batch_size=1, progress=False)
    first = processor.tokenizer.decode([int(logits[0, -1].argmax())], skip_special_tokens=True)
    assert answer == [first]  # greedy decoding's first token is the forward pass's argmax


def test_real_size_config_has_internvl25_4b_parameter_count():
    """The authors' log reports "InternVLChatModel contains 3.71B parameters": InternViT-300M (304.0M),
    projector (12.6M), Qwen2.5-3B with an untied lm_head (3396.0M); tied it would be 3.40B."""
    config = translate_config(REAL_CONFIG, image_token_id=151667)
    from transformers import InternVLForConditionalGeneration

    with torch.device("meta"):
        model = InternVLForConditionalGeneration(config)
    assert round(model.num_parameters() / 1e9, 2) == 3.71
    assert config.image_seq_length == 256 and not config.tie_word_embeddings
    assert config.text_config.rope_parameters["rope_theta"] == 1e6
    assert config.vision_config.attention_bias and not config.vision_config.use_qk_norm
    assert math.isclose(config.downsample_ratio, 0.5)


def _copy(original, tmp_path):
    directory = tmp_path / "ckpt"
    shutil.copytree(original[0], directory)
    return directory


def test_broken_checkpoints_name_the_file_or_key(original, tmp_path):
    directory = _copy(original, tmp_path)
    (directory / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointError, match="model-00002-of-00002.safetensors"):
        convert_internvl(str(directory), tmp_path / "out1")

    directory = _copy(original, tmp_path / "b")
    weights = {k: v for k, v in original[1].items() if k != "mlp1.1.weight"}
    config = json.loads((directory / "config.json").read_text())
    for f in directory.glob("model*"):
        f.unlink()
    write_checkpoint(directory, weights, config)
    with pytest.raises(CheckpointError, match=r"missing \['model.multi_modal_projector.linear_1.weight'\]"):
        convert_internvl(str(directory), tmp_path / "out2")

    write_checkpoint(directory, {**original[1], "vision_model.head.weight": torch.zeros(2)}, config)
    with pytest.raises(CheckpointError, match="weight vision_model.head.weight: no counterpart"):
        convert_internvl(str(directory), tmp_path / "out3")

    del config["llm_config"]["num_key_value_heads"]
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="config.json: llm_config: missing field `num_key_value_heads`"):
        convert_internvl(str(directory), tmp_path / "out4")

    directory = _copy(original, tmp_path / "c")
    tok_config = json.loads((directory / "tokenizer_config.json").read_text())
    tok_config["added_tokens_decoder"] = {k: v for k, v in tok_config["added_tokens_decoder"].items() if v["content"] != "<IMG_CONTEXT>"}
    tok_config["additional_special_tokens"].remove("<IMG_CONTEXT>")
    (directory / "tokenizer_config.json").write_text(json.dumps(tok_config))
    added = json.loads((directory / "added_tokens.json").read_text())
    del added["<IMG_CONTEXT>"]
    (directory / "added_tokens.json").write_text(json.dumps(added))
    with pytest.raises(CheckpointError, match="lack <IMG_CONTEXT>"):
        convert_internvl(str(directory), tmp_path / "out5")

    with pytest.raises(CheckpointError, match="models.<name>.convert_from"):
        convert_internvl(str(tmp_path / "no-such-dir"), tmp_path / "out6")
