"""Peak GPU memory of one training step or one generation prefill, traced by PyTorch without a GPU.

transformers' own model class is built from the model's config under `FakeTensorMode` (tensors with
shapes and dtypes but no storage), and `torch.distributed._tools.mem_tracker.MemTracker` records
every tensor alive during one forward + backward (weights, gradients, AdamW state, activations,
temporaries) and its peak. Traps met, each handled below (issue 24):
- `module.to()` cannot swap fake parameters: the model is built under the target default dtype.
- `torch.autocast("cuda")` switches itself off without a driver and backward on fake CUDA tensors
  fails: fake CPU tensors under CPU bf16 autocast (attention then takes the flash kernel, as on a GPU).
- MemTracker updates every module's own peak on every operator (quadratic in depth): only the
  global peak is kept (`_FrozenAwareTracker._update_peak_stats`).
- MemTracker puts gradient hooks on every parameter of a module it enters and fails on frozen ones:
  `_FrozenAwareTracker` installs them only on modules whose parameters all train (the peak counts
  every tensor either way; hooks only label gradients). A frozen vision tower runs under `no_grad`,
  so the tower and the language model are traced as two calls (`get_image_features`, then the
  language model on `inputs_embeds`), which is also what the model's own forward does.
- A fake optimizer step's transients are not a fused CUDA AdamW's: the AdamW state is made resident
  by one step before tracking, and the peak is read before `step()`.
- Qwen-VL towers read sequence lengths from `image_grid_thw` with `.tolist()` (data-dependent):
  models/families.py `traced_image_features` passes the grid-derived indices precomputed from real
  tensors and a flash-named packed attention (transformers' own hooks for both).
The traced peak is scaled by the calibration factor of its kind (cost.py, data/calibration.csv) to
the peaks measured on a GPU: the trace cannot see the CUDA context, the caching allocator's
fragmentation or kernels' workspaces, and a training trace holds what a GPU does not (layers'
checkpointed inputs and gradient temporaries kept alive through the backward); a prefill trace holds
what the GPU allocates (factor 1, cost.PREFILL_FACTOR).

Traces are cached on disk by a hash of (model config, shape) because one takes 10 s to minutes.

Layer 3 of the plan (memory: what each step holds): imports no other plan module; the model's config
comes from models/configs.py (docs/DESIGN.md "The plan's layers").
"""

from __future__ import annotations

import contextlib
import gc
import copy
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

from ..models.configs import model_config

GB = 1e9
TRACE_VERSION = 1  # bump when the traced procedure changes: old cache entries are then ignored
SHIPPED_TRACES = Path(__file__).parent / "data" / "traces.json"


@dataclass(frozen=True)
class StepShape:
    """What one process holds in one training forward (or one generation prefill)."""

    sequences: int  # sequences in one forward: the micro-batch (or the generation batch)
    prompt_tokens: int  # text tokens of a prompt besides its image tokens
    image_tokens: int  # image tokens per sequence (InternVL: 256 per 448 px tile; Qwen-VL: 1 per 28 px square)
    new_tokens: int  # completion tokens (the training logits are computed for these only)
    fp32_master: bool = True  # fp32 weights + AdamW under bf16 autocast; False: bf16 weights and state
    trainable_vision: bool = True
    gradient_checkpointing: bool = True
    kind: str = "train"  # "train": forward + backward with AdamW state; "prefill": generate's first forward
    autocast: bool = True  # bf16 autocast; False: every op in the weights' dtype (issue 23 finding 9: the
    # first generation of a run happened before accelerate wrapped forward in autocast)
    # With a frozen vision tower: the adapter inside it trains (models/families.py freeze_vision_encoder).
    # Left out of the cache key when False, and for a family whose adapter sits outside the tower
    # (InternVL's projector trains either way), so the traces of earlier shapes stay valid.
    trainable_adapter: bool = False
    # A LoRA adapter of this rank on these modules trains instead of the weights (adaptation/config.py
    # lora_config); 0: none. Both left out of the cache key when 0.
    lora_rank: int = 0
    lora_targets: str = "all-linear"  # peft's target_modules, a list joined by commas

    def __post_init__(self):
        if self.kind not in ("train", "prefill"):
            raise ValueError(f"StepShape.kind must be 'train' or 'prefill', not {self.kind!r}")


@dataclass(frozen=True)
class Trace:
    peak_gb: float  # traced peak of one process, before calibration
    parameters: int
    trainable: int
    flops: float  # of the traced forward (+ backward for "train")
    seconds: float  # time the trace took here
    breakdown_gb: dict  # MemTracker's categories at the peak

    @classmethod
    def from_json(cls, data: dict) -> "Trace":
        return cls(**data)


@lru_cache(maxsize=None)
def parameter_count(source: str) -> int:
    """Parameters of the model of `source` (its config, model_config), counted on the meta device."""
    import torch
    from transformers import AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(model_config(source))
    return sum(p.numel() for p in model.parameters())


# config_dict's last results by config object (a strong reference kept, so an id is not reused while held).
# transformers' diff against a default config builds that default each call: the paper configs' dry run
# asked 2,210 times for a few configs, 24 of its 68 s. The plan does not edit a config once it has read it
# (models/configs.model_config gives each caller its own copy).
_CONFIG_DICTS: dict[int, tuple[object, dict]] = {}


def config_dict(config) -> dict:
    """The fields of a transformers config that define the architecture (for the cache key); shared: not to be
    edited."""
    held = _CONFIG_DICTS.get(id(config))
    if held is None:  # a held entry's config is alive, so no other object has its id
        if len(_CONFIG_DICTS) >= 64:
            _CONFIG_DICTS.pop(next(iter(_CONFIG_DICTS)))
        held = _CONFIG_DICTS[id(config)] = (config, json.loads(config.to_json_string(use_diff=True)))
    return held[1]


def _key_shape(config, shape: StepShape) -> dict:
    from ..models.families import adapter_in_vision_tower

    fields = asdict(shape)
    if not (shape.trainable_adapter and not shape.trainable_vision and adapter_in_vision_tower(config.model_type)):
        del fields["trainable_adapter"]
    if not shape.lora_rank:
        del fields["lora_rank"], fields["lora_targets"]
    return fields


def _inject_lora(model, shape: StepShape) -> None:
    """peft's LoRA layers injected in place (what TRL's get_peft_model does to the policy), the base weights
    frozen. peft moves each new layer to its base layer's device and dtype with `.to()`, which cannot swap
    fake parameters (the trap of the model build above); under fake mode every layer is already on the CPU
    in the build's dtype, so `.to()` is made the identity while peft injects."""
    from unittest import mock

    import torch
    from peft import LoraConfig, inject_adapter_in_model

    targets = shape.lora_targets if shape.lora_targets == "all-linear" else shape.lora_targets.split(",")
    with mock.patch.object(torch.nn.Module, "to", lambda module, *args, **kwargs: module):
        inject_adapter_in_model(LoraConfig(r=shape.lora_rank, lora_alpha=shape.lora_rank, target_modules=targets,
                                           bias="none"), model)
    for name, param in model.named_parameters():
        param.requires_grad_("lora_" in name)
    model.enable_input_require_grads()  # as TRL for a peft model under gradient checkpointing


def trace_key(config, shape: StepShape) -> str:
    payload = json.dumps({"v": TRACE_VERSION, "config": config_dict(config), "shape": _key_shape(config, shape)},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def cache_dir() -> Path:
    return Path(os.environ.get("TTRL_BENCH_TRACE_CACHE", Path.home() / ".cache" / "ttrl-bench" / "traces"))


def cached_trace(config, shape: StepShape, trace_fn=None) -> Trace:
    """The trace of (config, shape): from the shipped traces (data/traces.json), the local cache, or a
    new trace run now (then cached)."""
    key = trace_key(config, shape)
    shipped = _shipped_traces()
    if key in shipped:
        return Trace.from_json(shipped[key]["trace"])
    path = cache_dir() / f"{key}.json"
    if path.exists():
        return Trace.from_json(json.loads(path.read_text())["trace"])
    trace = (trace_fn or trace_step)(config, shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"shape": asdict(shape), "config": config_dict(config), "trace": asdict(trace)}))
    return trace


# The image tokens a shape is traced at when its own are not shipped: a step's peak and FLOPs are linear in its
# image tokens (the same sequences, text and completion), so any count is read off the line through these two.
# Checked on the replay's shape (4 x 2 sequences, 64 + image + 1,024 tokens), traced at 256, 1,280 and 3,072:
# the line through the first two misses the third's FLOPs by 0.1% (InternVL3-2B, frozen tower) and 1.2%
# (Qwen2.5-VL-3B, tower trained), its peak by 0.1% and 0.5%; one slope over all tokens missed Qwen's 256 by 24%.
ANCHOR_IMAGE_TOKENS = (256, 1280)


def image_trace(config, shape: StepShape) -> Trace:
    """The trace of `shape` at its image tokens: shipped, or on the line through its traces (cached_trace) at
    the two `ANCHOR_IMAGE_TOKENS` (one trace per count of image tokens would cost a trace per test set)."""
    low, high = ANCHOR_IMAGE_TOKENS
    if shape.image_tokens in (low, high) or trace_key(config, shape) in _shipped_traces():
        return cached_trace(config, shape)
    a, b = (cached_trace(config, replace(shape, image_tokens=n)) for n in (low, high))
    t = (shape.image_tokens - low) / (high - low)
    line = lambda x, y: x + t * (y - x)  # noqa: E731
    return Trace(peak_gb=line(a.peak_gb, b.peak_gb), parameters=b.parameters, trainable=b.trainable,
                 flops=line(a.flops, b.flops), seconds=0.0,
                 breakdown_gb={k: line(a.breakdown_gb.get(k, 0.0), v) for k, v in b.breakdown_gb.items()})


def _shipped_traces() -> dict:
    """data/traces.json (400 KB), read once per version of the file: the dry run asks per trace."""
    if not SHIPPED_TRACES.exists():
        return {}
    stat = SHIPPED_TRACES.stat()
    return _read_traces(SHIPPED_TRACES, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _read_traces(path: Path, mtime_ns: int, size: int) -> dict:
    return json.loads(path.read_text())


@contextlib.contextmanager
def _default_dtype(dtype):
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def build_fake(config, dtype):
    """transformers' own model class for `config`, with fake (storage-less) parameters of `dtype`."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoModelForImageTextToText

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode, torch.device("cpu"), _default_dtype(dtype):
        model = AutoModelForImageTextToText.from_config(copy.deepcopy(config))  # the trace edits its config
    return model, mode


def _language_forward(model, features, shape: StepShape, logits_to_keep: int, use_cache: bool):
    """The language model and head on prompt + completion embeddings, image features in place of the
    image tokens (what the model's forward does after `get_image_features`)."""
    import torch

    length = shape.prompt_tokens + shape.image_tokens + (shape.new_tokens if shape.kind == "train" else 0)
    ids = torch.zeros(shape.sequences, length, dtype=torch.long)
    embeds = model.get_input_embeddings()(ids)
    start = shape.prompt_tokens // 2  # the image sits inside the prompt
    image = features.reshape(shape.sequences, -1, embeds.shape[-1])[:, : shape.image_tokens].to(embeds.dtype)
    embeds = torch.cat([embeds[:, :start], image, embeds[:, start + image.shape[1]:]], dim=1)
    return model(inputs_embeds=embeds, attention_mask=torch.ones_like(ids), logits_to_keep=logits_to_keep,
                 use_cache=use_cache)


def trace_step(config, shape: StepShape) -> Trace:
    """Trace one step of `shape` on transformers' model for `config` (no GPU, no real memory: fake
    tensors) and return its peak memory per process, parameter counts and FLOPs."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from ..models.families import freeze_vision_encoder, traced_image_features

    started = time.time()
    dtype = torch.float32 if shape.fp32_master else torch.bfloat16
    model, mode = build_fake(config, dtype)
    train = shape.kind == "train"
    tower = _tower(model)
    with mode:
        if shape.lora_rank:
            _inject_lora(model, shape)
        parameters = sum(p.numel() for p in model.parameters())
        if train and not shape.lora_rank:
            if not shape.trainable_vision:
                if shape.trainable_adapter:
                    freeze_vision_encoder(model)
                else:
                    tower.requires_grad_(False)
        if train:
            model.train()  # transformers checkpoints layers only in training mode
            if shape.gradient_checkpointing:
                # reentrant: the checkpointed forward runs under no_grad. With the non-reentrant kind,
                # MemTracker's module hooks keep every layer's activations alive (a 1,360-token
                # InternVL3-2B layer added 7 GB instead of its 0.13 GB input); on a GPU both kinds hold
                # the same: each layer's input, and one layer recomputed at a time.
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            model.config.use_cache = False
            params = [p for p in model.parameters() if p.requires_grad]
            optimizer = torch.optim.AdamW(params, lr=1e-6, foreach=True)
            for p in params:  # AdamW's state resident, as from the second step on
                p.grad = torch.zeros_like(p)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        else:
            model.requires_grad_(False)
            params, optimizer = [], None
        gc.collect()  # garbage of the build is not the step's
        tracker = _frozen_aware_tracker()
        tracker.track_external(*([model, optimizer] if optimizer else [model]))
        flops = FlopCounterMode(display=False)
        with tracker, flops, torch.autocast("cpu", dtype=torch.bfloat16, enabled=shape.autocast):
            tower_trains = train and any(p.requires_grad for p in tower.parameters())
            with torch.no_grad() if not tower_trains else contextlib.nullcontext():
                features = traced_image_features(model, shape.sequences, shape.image_tokens)
            with torch.no_grad() if not train else contextlib.nullcontext():
                out = _language_forward(model, features, shape, shape.new_tokens + 1 if train else 1, not train)
            if train:
                # TRL's per-token log-probabilities: log-softmax of the completion logits in fp32
                logits = out.logits.float()
                loss = torch.log_softmax(logits, dim=-1).amax(-1).mean()
                del out, logits
                loss.backward()
        peak = tracker.get_tracker_snapshot("peak")
    device_peak = max(peak.values(), key=lambda d: d["Total"])
    return Trace(peak_gb=device_peak["Total"] / GB, parameters=parameters,
                 trainable=sum(p.numel() for p in params), flops=float(flops.get_total_flops()),
                 seconds=round(time.time() - started, 1),
                 breakdown_gb={str(k): round(v / GB, 3) for k, v in device_peak.items() if v})


def _frozen_aware_tracker():
    from torch.distributed._tools.mem_tracker import MemTracker

    class _FrozenAwareTracker(MemTracker):
        def _track_module_params_and_buffers(self, module, install_grad_hooks=True):
            trains = all(p.requires_grad for p in module.parameters())
            return super()._track_module_params_and_buffers(module, install_grad_hooks and trains)

        def _update_peak_stats(self, peak_state) -> None:
            # Only the global peak: MemTracker also updates every tracked module's peak on every
            # operator, quadratic in the depth (a 52-layer InternVL3-2B step: most of an hour here).
            for dev, snap in self._curr_mem_snap.items():
                if self._peak_mem.get(dev, 0) < snap["Total"]:
                    self._peak_mem[dev] = snap["Total"]
                    self._peak_mem_snap[dev] = dict(snap)

    return _FrozenAwareTracker()


def _tower(model):
    from ..models.families import vision_tower

    return vision_tower(model)


def ship_cache() -> int:
    """Copy every trace of the local cache into the shipped data/traces.json (how the committed traces
    are regenerated: delete data/traces.json, run `ttrl-bench plan CONFIG` for the paper configs and
    `python -m ttrl_bench.plan.cost`, which also traces the calibration points)."""
    shipped = dict(_shipped_traces())  # a copy: the cached read stays as the file was
    for path in sorted(cache_dir().glob("*.json")):
        shipped[path.stem] = json.loads(path.read_text())
    SHIPPED_TRACES.write_text(json.dumps(shipped, indent=1, sort_keys=True) + "\n")
    return len(shipped)

