"""plan/memory.py: the fake model a trace runs on (`build_fake`) and the tracing functions:
- `cached_trace` past the shipped traces (every shape the other tests ask for is shipped): a shape no
  traces.json holds is traced once by `trace_fn`, written to $TTRL_BENCH_TRACE_CACHE/<key>.json with its shape and
  config, and read back from there on the next call; a checkout without the shipped file reads no shipped traces.
  `trace_fn` is a recorder returning a Trace chosen by hand. `cache_dir` without the variable; `ship_cache`'s file.
- `_language_forward` on a recording stand-in model: the sequence length of each kind, where the image sits,
  the embeddings' dtype, the attention mask.
- `_inject_lora` with named target modules and another rank: one real trace (2 layers, about a second).
- `trace_step` on the tiny InternVL (about 0.5 s a trace): bf16 weights and moments, a frozen tower (trainable
  counts, no backward through it), gradient checkpointing's activations, the LM head's FLOPs worked by hand in a
  prefill and in training, a prefill without autocast; StepShape's refusal of another kind.
- A prefill's KV cache worked by hand per layer (`use_cache` in a prefill), and a training
  step handed to the tracker with no gradient held (`zero_grad(set_to_none=True)`)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from ttrl_bench.plan import memory
from ttrl_bench.plan.memory import StepShape, Trace

from tests.support.plan import tiny_internvl_config  # InternVL3-2B cut to one 128-wide text and one 64-wide vision layer


def test_the_fake_model_owns_its_config_and_takes_real_inputs_under_its_mode():
    """build_fake (plan/memory.py): transformers' from_config keeps the config object it is given (model.config is
    it), and a trace edits the model's config, so build_fake hands it a deep copy: editing the fake model's config,
    nested text_config included, leaves the caller's. Its FakeTensorMode allows non-fake inputs: real token ids
    (torch.zeros made outside the mode) go through the fake embedding, giving a fake (1, 3, hidden) tensor without
    memory. A 1-layer InternVL3-2B-hf config keeps the build under a second."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    from ttrl_bench.plan import memory

    config = memory.model_config("OpenGVLab/InternVL3-2B-hf")
    config.text_config.num_hidden_layers, config.vision_config.num_hidden_layers = 1, 1
    before = config.to_dict()
    model, mode = memory.build_fake(config, torch.bfloat16)
    model.config.use_cache = False
    model.config.text_config.use_cache = False
    model.config.text_config.num_hidden_layers = 5
    assert config.to_dict() == before
    ids = torch.zeros(1, 3, dtype=torch.long)
    with mode:
        embeds = model.get_input_embeddings()(ids)
    assert isinstance(embeds, FakeTensor) and tuple(embeds.shape) == (1, 3, config.text_config.hidden_size)
    assert embeds.dtype == torch.bfloat16


# 7 sequences of 3 + 5 + 11 tokens: no shipped trace has it (the shipped shapes are the configs' micro-batches)
SHAPE = StepShape(sequences=7, prompt_tokens=3, image_tokens=5, new_tokens=11)

TRACE = Trace(peak_gb=1.5, parameters=10, trainable=4, flops=2.0e9, seconds=0.3, breakdown_gb={"Parameter": 0.25})

SOURCE = "OpenGVLab/InternVL3-2B-hf"  # in plan/data/model_configs.json

def test_a_shape_not_shipped_is_traced_once_then_read_from_the_local_cache(tmp_path, monkeypatch):
    cache = tmp_path / "home" / "traces"  # neither folder there yet
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(cache))
    config = memory.model_config(SOURCE)
    key = memory.trace_key(config, SHAPE)
    assert key not in json.loads(memory.SHIPPED_TRACES.read_text())
    calls = []
    assert memory.cached_trace(config, SHAPE, trace_fn=lambda c, s: calls.append((c, s)) or TRACE) == TRACE
    assert calls == [(config, SHAPE)]
    written = json.loads((cache / f"{key}.json").read_text())
    assert written["trace"] == {"peak_gb": 1.5, "parameters": 10, "trainable": 4, "flops": 2.0e9, "seconds": 0.3,
                                "breakdown_gb": {"Parameter": 0.25}}
    assert written["shape"]["sequences"] == 7 and written["config"] == memory.config_dict(config)
    # the second call reads the file: no trace runs, and what the file says is what comes back
    written["trace"]["peak_gb"] = 2.75
    (cache / f"{key}.json").write_text(json.dumps(written))
    again = memory.cached_trace(config, SHAPE, trace_fn=lambda *a: pytest.fail("traced again"))
    assert again == Trace(2.75, 10, 4, 2.0e9, 0.3, {"Parameter": 0.25})
    # a second shape joins the folder that exists now
    other = StepShape(sequences=9, prompt_tokens=3, image_tokens=5, new_tokens=11)
    assert memory.cached_trace(config, other, trace_fn=lambda c, s: TRACE) == TRACE
    assert sorted(p.name for p in cache.iterdir()) == sorted([f"{key}.json", f"{memory.trace_key(config, other)}.json"])


def test_a_checkout_without_the_shipped_traces_traces_into_the_local_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(tmp_path / "traces"))
    monkeypatch.setattr(memory, "SHIPPED_TRACES", tmp_path / "absent.json")
    config = memory.model_config(SOURCE)
    assert memory.cached_trace(config, SHAPE, trace_fn=lambda c, s: TRACE) == TRACE
    assert (tmp_path / "traces" / f"{memory.trace_key(config, SHAPE)}.json").exists()


def test_the_cache_folder_defaults_to_the_users_cache_and_the_variable_overrides_it(tmp_path, monkeypatch):
    monkeypatch.delenv("TTRL_BENCH_TRACE_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert memory.cache_dir() == tmp_path / ".cache" / "ttrl-bench" / "traces"
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(tmp_path / "elsewhere"))
    assert memory.cache_dir() == tmp_path / "elsewhere"


def test_ship_cache_merges_the_local_traces_into_the_shipped_file_sorted_one_space_indented(tmp_path, monkeypatch):
    """The shipped {"c": 0, "a": 1} and the cache's b.json {"x": 2}, c.json 3 (a .txt beside them is no trace):
    c replaced by the cache's, 3 keys, written sorted with indent 1 and a final newline (the committed file's
    layout, so a regenerated traces.json diffs line by line)."""
    shipped = tmp_path / "traces.json"
    shipped.write_text('{"c": 0, "a": 1}')
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "c.json").write_text("3")
    (cache / "b.json").write_text('{"x": 2}')
    (cache / "notes.txt").write_text("not json")
    monkeypatch.setattr(memory, "SHIPPED_TRACES", shipped)
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(cache))
    assert memory.ship_cache() == 3
    assert shipped.read_text() == '{\n "a": 1,\n "b": {\n  "x": 2\n },\n "c": 3\n}\n'
    # without a shipped file: the cache alone
    shipped.unlink()
    assert memory.ship_cache() == 2
    assert shipped.read_text() == '{\n "b": {\n  "x": 2\n },\n "c": 3\n}\n'


class _Recorder(torch.nn.Module):
    """A language model stand-in: 4-wide embeddings of 10 ids (float32), its forward's keywords recorded."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.calls = []

    def get_input_embeddings(self):
        return self.embed

    def forward(self, **kwargs):
        self.calls.append(kwargs)
        return "out"


def test_the_language_forward_lays_out_prompt_image_and_completion_per_kind():
    """Prompt 6 tokens, image 3 features, completion 5, 2 sequences. Training sees 6 + 3 + 5 = 14 positions,
    a prefill (generate's first forward) 6 + 3 = 9. The image sits at 6 // 2 = 3 .. 5, its float64 features cast to
    the embeddings' float32; the mask is all ones over the whole length."""
    features = torch.arange(2 * 3 * 4, dtype=torch.float64).reshape(6, 4) + 100.0
    for kind, length in (("train", 14), ("prefill", 9)):
        model = _Recorder()
        shape = StepShape(sequences=2, prompt_tokens=6, image_tokens=3, new_tokens=5, kind=kind)
        assert memory._language_forward(model, features, shape, logits_to_keep=5, use_cache=False) == "out"
        (call,) = model.calls
        embeds = call["inputs_embeds"]
        assert embeds.shape == (2, length, 4) and embeds.dtype == torch.float32
        image = features.reshape(2, 3, 4).float()
        assert torch.equal(embeds[:, 3:6], image)
        assert (embeds[:, :3] < 100).all() and (embeds[:, 6:] < 100).all()  # the embeddings of id 0 elsewhere
        assert torch.equal(call["attention_mask"], torch.ones(2, length, dtype=torch.long))
        assert (call["logits_to_keep"], call["use_cache"]) == (5, False)


def test_a_lora_on_named_modules_of_another_rank_trains_those_alone():
    """Rank 4 on "q_proj,v_proj" of Qwen2.5-VL-7B cut to 2 language and 2 vision layers (the vision blocks name
    theirs qkv / proj, the merger mlp.0 / mlp.2: none of them is targeted): per language layer q 3584 -> 3584,
    v 3584 -> 512, r x (in + out) = 4 x (7168 + 4096) = 45,056; 2 layers 90,112 trainable."""
    from ttrl_bench.models.configs import model_config, with_layers

    config = with_layers(model_config("Qwen/Qwen2.5-VL-7B-Instruct"), 2, 2)
    shape = StepShape(sequences=1, prompt_tokens=8, image_tokens=16, new_tokens=8, lora_rank=4,
                      lora_targets="q_proj,v_proj")
    assert memory.trace_step(config, shape).trainable == 2 * 4 * (7168 + 4096) == 90_112


def test_without_fp32_master_weights_the_trace_holds_bf16_weights_and_moments():
    """fp32_master False: every weight in bf16, 2 bytes a parameter, and AdamW's two moments in the weights' dtype,
    2 x 2 bytes (tests/plan/test_cost.py's fp32 twin: 4 and 8)."""
    shape = StepShape(sequences=2, prompt_tokens=16, image_tokens=256, new_tokens=8, fp32_master=False)
    trace = memory.trace_step(tiny_internvl_config(), shape)
    assert trace.breakdown_gb["_MemRefType.PARAM"] == pytest.approx(2 * trace.parameters / 1e9, abs=1e-3)
    assert trace.breakdown_gb["_MemRefType.OPT"] == pytest.approx(4 * trace.parameters / 1e9, abs=1e-3)


def test_a_frozen_tower_leaves_the_rest_trainable_and_checkpointing_holds_fewer_activations():
    """The tiny InternVL with 4 text layers, 64 completion tokens. trainable_vision False: every parameter but the
    vision tower's trains (counted on transformers' own class, meta device), the same with the adapter flag
    (InternVL's projector sits outside the tower and trains either way). Reentrant gradient checkpointing keeps
    each layer's input only: under half the activations at the peak of a step without it (measured: 0.010 against
    0.028 GB; the non-reentrant kind, whose recomputed layers MemTracker's hooks keep alive, holds 0.019, and
    transformers' default kwargs, non-reentrant, 0.020)."""
    from transformers import AutoModelForImageTextToText

    config = tiny_internvl_config()
    config.text_config.num_hidden_layers = 4
    with torch.device("meta"):
        tower = AutoModelForImageTextToText.from_config(config).model.vision_tower
    frozen = sum(p.numel() for p in tower.parameters())
    shape = StepShape(sequences=2, prompt_tokens=16, image_tokens=256, new_tokens=64)
    whole = memory.trace_step(config, shape)
    assert whole.trainable == whole.parameters
    for adapter in (False, True):
        trace = memory.trace_step(config, replace(shape, trainable_vision=False, trainable_adapter=adapter))
        assert (trace.parameters, trace.trainable) == (whole.parameters, whole.parameters - frozen)
        assert trace.flops < whole.flops  # no backward through the frozen tower
    every_layer = memory.trace_step(config, replace(shape, gradient_checkpointing=False))
    assert whole.breakdown_gb["_MemRefType.ACT"] < every_layer.breakdown_gb["_MemRefType.ACT"] / 2


def test_a_step_shape_of_another_kind_is_refused_by_name():
    with pytest.raises(ValueError) as err:
        StepShape(sequences=1, prompt_tokens=1, image_tokens=1, new_tokens=1, kind="decode")
    assert str(err.value) == "StepShape.kind must be 'train' or 'prefill', not 'decode'"


def _with_vocabulary(size: int):
    config = tiny_internvl_config()
    config.text_config.vocab_size = size
    return config


def test_the_lm_head_computes_the_kept_logits_only_one_in_a_prefill_and_the_completions_in_training():
    """FlopCounterMode counts matmuls; a vocabulary 512 words larger adds only the LM head's (embedding lookups are
    no matmul). Hidden 128, 2 sequences. Prefill (generate's first forward keeps one position's logits, no
    gradient): 2 x 2 x 1 x 128 x 512 = 262,144 FLOPs more. Training (8 completion tokens: 8 + 1 positions kept, the
    last prompt token predicting the first completion token), forward and the two backward matmuls (input and
    weight gradients): 3 x 2 x 2 x 9 x 128 x 512 = 7,077,888. A prefill trains nothing, and its completion length
    changes neither its FLOPs nor its peak (generate's later tokens are not in it)."""
    prefill = StepShape(sequences=2, prompt_tokens=16, image_tokens=256, new_tokens=8, kind="prefill")
    small, large = (memory.trace_step(_with_vocabulary(v), prefill) for v in (512, 1024))
    assert large.flops - small.flops == 2 * 2 * 1 * 128 * 512 == 262_144
    assert small.trainable == 0 and small.parameters == large.parameters - 512 * 128  # embedding rows (head tied)
    longer = memory.trace_step(_with_vocabulary(512), replace(prefill, new_tokens=64))
    assert (longer.flops, longer.peak_gb) == (small.flops, small.peak_gb)
    train = replace(prefill, kind="train")
    small, large = (memory.trace_step(_with_vocabulary(v), train) for v in (512, 1024))
    assert large.flops - small.flops == 3 * 2 * 2 * 9 * 128 * 512 == 7_077_888


def test_a_prefill_without_autocast_holds_fp32_activations():
    """autocast False (issue 23 finding 9: generate's first call ran outside accelerate's autocast): the fp32
    weights' activations stay fp32, a higher peak than under bf16 autocast (measured 0.0106 against 0.0096 GB)."""
    prefill = StepShape(sequences=2, prompt_tokens=16, image_tokens=256, new_tokens=8, kind="prefill")
    bf16 = memory.trace_step(tiny_internvl_config(), prefill)
    assert memory.trace_step(tiny_internvl_config(), replace(prefill, autocast=False)).peak_gb > bf16.peak_gb


def test_a_prefill_holds_each_layers_keys_and_values_in_generates_cache():
    """generate's first forward fills the KV cache (use_cache): each language layer more adds its weights and its
    cached keys and values to the prefill's peak, which sits after the last layer. The tiny InternVL, 2 against 4
    text layers; 2 sequences of 1,024 prompt + 256 image positions; 1 KV head of 128 / 2 = 64 dims. The keys are
    float32 (the rotary embedding multiplies the bf16 keys by float32 cos/sin; autocast leaves products alone) and
    transformers' DynamicLayer starts the values in the keys' dtype, so a layer caches 2 x 2 x 1,280 x 64 x 4 bytes
    = 1,310,720. Its fp32 weights: q 128 x 128 + 128, k and v 128 x 64 + 64 each, o 128 x 128, the MLP 3 x 128 x 256,
    two norms 2 x 128 = 147,968 parameters, 591,872 bytes. Without the cache (use_cache False) a layer's keys and
    values are freed with it, and 2 layers more add their weights only."""
    prefill = StepShape(sequences=2, prompt_tokens=1024, image_tokens=256, new_tokens=8, kind="prefill")
    traces = []
    for layers in (2, 4):
        config = tiny_internvl_config()
        config.text_config.num_hidden_layers = layers
        traces.append(memory.trace_step(config, prefill))
    assert traces[1].parameters - traces[0].parameters == 2 * 147_968
    added = (traces[1].peak_gb - traces[0].peak_gb) * 1e9
    assert added == pytest.approx(2 * (591_872 + 1_310_720), abs=1)


def test_a_training_step_starts_without_gradients_as_after_zero_grad_set_to_none(monkeypatch):
    """The optimizer's first step makes AdamW's moments resident, then zero_grad(set_to_none=True) drops the
    gradients (TRL's and accelerate's default): the traced step holds each gradient from the moment its backward
    makes it, as on a GPU, not for the whole step. The tracker is handed the model and the optimizer with no
    parameter holding a gradient."""
    seen = []
    real = memory._frozen_aware_tracker

    def recording_tracker():
        tracker = real()
        track = tracker.track_external

        def track_external(*modules):
            seen.append([p.grad is None for p in modules[0].parameters()])
            return track(*modules)

        tracker.track_external = track_external
        return tracker

    monkeypatch.setattr(memory, "_frozen_aware_tracker", recording_tracker)
    shape = StepShape(sequences=1, prompt_tokens=8, image_tokens=256, new_tokens=4)
    trace = memory.trace_step(tiny_internvl_config(), shape)
    (grads_none,) = seen
    assert grads_none and all(grads_none) and trace.trainable == trace.parameters


# --- the trace cache ---------------------------------------------------------------------------------------------

def test_the_trace_cache_folder_is_the_environments_or_the_users(tmp_path, monkeypatch):
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(tmp_path / "mine"))
    assert memory.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("TTRL_BENCH_TRACE_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert memory.cache_dir() == tmp_path / "home" / ".cache" / "ttrl-bench" / "traces"


def test_shipping_the_cache_adds_each_local_trace_to_the_shipped_file(tmp_path, monkeypatch):
    """ship_cache: every <key>.json of the local cache (nothing else there) joins the shipped entries under its key;
    the file is rewritten with sorted keys at every level, one space of indent, a final newline, and the count of
    entries returned: 1 shipped + 2 local = 3. Without a shipped file, the local ones alone: 2."""
    shipped = tmp_path / "traces.json"
    shipped.write_text(json.dumps({"b0": {"z": 1, "a": 2}}))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "k2.json").write_text(json.dumps({"trace": {"peak_gb": 2.0}, "shape": {"sequences": 2}}))
    (cache / "a1.json").write_text(json.dumps({"trace": {"peak_gb": 1.0}}))
    (cache / "notes.txt").write_text("not a trace")
    monkeypatch.setattr(memory, "SHIPPED_TRACES", shipped)
    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(cache))
    assert memory.ship_cache() == 3
    assert shipped.read_text() == (
        '{\n "a1": {\n  "trace": {\n   "peak_gb": 1.0\n  }\n },\n "b0": {\n  "a": 2,\n  "z": 1\n },\n'
        ' "k2": {\n  "shape": {\n   "sequences": 2\n  },\n  "trace": {\n   "peak_gb": 2.0\n  }\n }\n}\n')
    shipped.unlink()
    assert memory.ship_cache() == 2
    assert list(json.loads(shipped.read_text())) == ["a1", "k2"]
