"""vLLM engine settings (config `evaluation.vllm`, `adaptation.vllm`), the sampling guard against
image / video placeholder tokens, and the check for TRL's double-expanded image placeholders.

Two engines, two blocks: greedy evaluation builds its own `vllm.LLM` and has the GPU to itself;
rollouts run in the `vllm.LLM` that TRL 1.16 builds inside `GRPOTrainer` (colocate mode), which
shares the GPU with training and takes only the settings `GRPOConfig` has fields for
(`trl/generation/vllm_generation.py`: `max_num_seqs` = per-device batch x TP size x
steps_per_generation, times n_votes / num_generations here for the vote expansion
(adaptation/placement.py `trl_construction_overrides`), `seed` = process index, `max_num_batched_tokens`
= 4096, CUDA graphs on).
"""

from __future__ import annotations

# Defaults of the two config blocks; workflow/schemas/config.schema.yaml repeats them
# (tests/generation/test_vllm_settings.py keeps both equal).
EVALUATION_DEFAULTS = {
    # Prompt budget, image tokens included; the context is this + the task's max_new_tokens.
    # InternVL at 12 tiles of 448 px is 12 x 256 = 3,072 image tokens, the TTRV authors' AI2D
    # prompts average 1,490 tokens (measured in the first GPU probe, an H100 run before the rewrite); vLLM's own default is the
    # model's 32k window, whose KV-cache reservation failed the engine start there.
    "max_prompt_tokens": 4096,
    # Share of GPU memory the engine reserves (weights + KV cache); the evaluation job is alone on
    # its GPU, so vLLM's own default. On vLLM's CPU build it is the share of host memory.
    "gpu_memory_utilization": 0.9,
    # Eager mode: CUDA graphs failed the engine start on the lent H100 (they import flashinfer),
    # eager ran 36 samples/s vs 18 for transformers' generate (docs/gpu-runs.md).
    "enforce_eager": True,
    # Sequences decoded at once; null = vLLM's default.
    "max_num_seqs": None,
    # Weights' dtype: "auto" = the checkpoint's, as transformers loads it for the HF path (vLLM's
    # CPU build turns a float32 checkpoint into bfloat16 unless told "float32").
    "dtype": "auto",
    # Passed to the model's HF image processor inside vLLM; the job adds its image bound as "size"
    # (models/families.py image_size_bound, given to the HF path too) unless this sets one itself.
    "mm_processor_kwargs": {},
}

ADAPTATION_DEFAULTS = {
    # Prompt budget; GRPOConfig.vllm_max_model_length = this + max_completion_length.
    "max_prompt_tokens": 4096,
    # GRPOConfig's own default: the policy, its gradients and optimizer state share the GPU
    # (the TTRV authors used 0.65 with the policy sharded over 4 GPUs by FSDP).
    "gpu_memory_utilization": 0.3,
    # Offload weights and KV cache during the optimizer step: less memory, slower wake-up.
    "enable_sleep_mode": False,
    # vLLM's FlashInfer top-k/top-p sampler: false (VLLM_USE_FLASHINFER_SAMPLER=0), what the last GPU run's rollouts
    # needed (docs/gpu-runs.md: set by hand on the lent H100, flashinfer not installed); null = vLLM's choice. TRL
    # builds this engine without `enforce_eager` (trl/generation/vllm_generation.py:347-364): CUDA graphs stay on.
    "flashinfer_sampler": False,
}


def _settings(settings: dict | None, defaults: dict, key: str) -> dict:
    unknown = set(settings or {}) - set(defaults)
    if unknown:
        raise ValueError(f"config key {key}: unknown setting(s) {sorted(unknown)}; known: {sorted(defaults)}")
    return {**defaults, **(settings or {})}


def llm_kwargs(model_path: str, settings: dict | None, max_new_tokens: int, seed: int) -> dict:
    """Keyword arguments of `vllm.LLM(...)` for greedy evaluation (config `evaluation.vllm`)."""
    s = _settings(settings, EVALUATION_DEFAULTS, "evaluation.vllm")
    kwargs = {
        "model": model_path,
        "max_model_len": s["max_prompt_tokens"] + max_new_tokens,
        "gpu_memory_utilization": s["gpu_memory_utilization"],
        "enforce_eager": s["enforce_eager"],
        "dtype": s["dtype"],
        "limit_mm_per_prompt": {"image": 1},  # one image per prompt in every dataset here
        "mm_processor_kwargs": s["mm_processor_kwargs"] or None,
        "seed": seed,
    }
    if s["max_num_seqs"] is not None:
        kwargs["max_num_seqs"] = s["max_num_seqs"]
    return kwargs


def bounded_settings(settings: dict | None, size: dict) -> tuple[dict, dict]:
    """(config `evaluation.vllm` with the image bound in `mm_processor_kwargs`, the bound): a `size` the config
    sets in mm_processor_kwargs wins over `size` (models/families.py image_size_bound); the caller gives the HF
    processor the same (families.bound_processor), so both backends see the same image tokens."""
    s = _settings(settings, EVALUATION_DEFAULTS, "evaluation.vllm")
    kwargs = dict(s["mm_processor_kwargs"] or {})
    size = kwargs.get("size") or size
    if size:
        kwargs["size"] = size
    return {**s, "mm_processor_kwargs": kwargs}, size


def grpo_vllm_kwargs(settings: dict | None, max_completion_length: int) -> dict:
    """`GRPOConfig` keyword arguments for TRL's colocated vLLM rollouts (config `adaptation.vllm`).
    Field names from trl/trainer/grpo_config.py (TRL 1.16)."""
    s = _settings(settings, ADAPTATION_DEFAULTS, "adaptation.vllm")
    return {
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": s["gpu_memory_utilization"],
        "vllm_max_model_length": s["max_prompt_tokens"] + max_completion_length,
        "vllm_enable_sleep_mode": s["enable_sleep_mode"],
        "vllm_tensor_parallel_size": 1,
    }


def prompt_budget(settings: dict | None) -> int:
    """The rollouts' prompt budget (config adaptation.vllm.max_prompt_tokens), for both rollout backends."""
    return _settings(settings, ADAPTATION_DEFAULTS, "adaptation.vllm")["max_prompt_tokens"]


def grpo_vllm_environment(settings: dict | None) -> dict[str, str]:
    """Environment variables vLLM reads for the colocated engine (config `adaptation.vllm`), set before
    TRL builds it: the settings GRPOConfig has no field for."""
    s = _settings(settings, ADAPTATION_DEFAULTS, "adaptation.vllm")
    if s["flashinfer_sampler"] is None:
        return {}
    return {"VLLM_USE_FLASHINFER_SAMPLER": "1" if s["flashinfer_sampler"] else "0"}


def forbid_tokens_sampling_kwargs(forbidden_ids: list[int], tokenizer_size: int) -> dict:
    """`SamplingParams` keyword arguments (for `GRPOConfig.generation_kwargs` with vLLM rollouts,
    which TRL merges into its `SamplingParams`) that make the forbidden ids unsampleable.

    `allowed_token_ids` masks every other id to -inf before sampling; `logit_bias` is clamped to
    -100 by vLLM (possible, merely unlikely) and `bad_words` takes strings it re-tokenizes.
    vLLM rejects allowed ids at or above the tokenizer's length, hence `tokenizer_size`
    (`len(processor.tokenizer)`). The transformers backend's equivalent is
    `GenerationConfig(suppress_tokens=forbidden_ids)`."""
    forbidden = set(forbidden_ids)
    if not forbidden:
        return {}
    outside = sorted(i for i in forbidden if not 0 <= i < tokenizer_size)
    if outside:
        raise ValueError(f"placeholder token ids {outside} lie outside the tokenizer's {tokenizer_size} ids")
    return {"allowed_token_ids": [i for i in range(tokenizer_size) if i not in forbidden]}


class PlaceholderExpansionError(RuntimeError):
    """vLLM did not condition on the prompt the trainer trains on."""


def check_engine_prompt(sent_ids: list[int], engine_ids: list[int], placeholder_ids: list[int]) -> None:
    """Raise unless the engine ran exactly the token ids it was sent.

    TRL 1.16's colocated rollouts send vLLM the processor-expanded prompt ids (one placeholder per
    image token) together with the raw image; vLLM's processor then replaces the first placeholder
    with a whole expansion again (huggingface/trl#6294; mismatched sizes: #6401). TRL trains on its
    own ids, so nothing crashes: the rollouts are conditioned on a corrupted prompt."""
    if list(engine_ids) == list(sent_ids):
        return
    count = lambda ids: sum(1 for t in ids if t in set(placeholder_ids))  # noqa: E731
    raise PlaceholderExpansionError(
        f"vLLM ran a different prompt than the trainer sent: {len(sent_ids)} tokens with {count(sent_ids)} image "
        f"placeholders sent, {len(engine_ids)} with {count(engine_ids)} run. Image placeholders were expanded twice "
        "(huggingface/trl issue 6294, and 6401 for image sizes the two processors resize differently): vLLM "
        "rollouts with images are refused for this TRL / vLLM / model combination; set "
        "adaptation.rollout_backend: hf, or give vLLM unexpanded prompts (collapse_prompts_before_generate)."
    )


def collapse_placeholder_runs(ids: list[int], placeholder_id: int, added_around: tuple[int, int] | None = None) -> list[int]:
    """The unexpanded prompt vLLM's processor expects: each run of `placeholder_id` becomes one
    placeholder, and `added_around` (the start / end ids the family's processor puts around the
    run, e.g. InternVL's `<img>` / `</img>`; none for Qwen2.5-VL) are dropped with it."""
    out: list[int] = []
    i = 0
    while i < len(ids):
        if ids[i] != placeholder_id:
            out.append(ids[i])
            i += 1
            continue
        j = i
        while j < len(ids) and ids[j] == placeholder_id:
            j += 1
        if added_around and out and out[-1] == added_around[0] and j < len(ids) and ids[j] == added_around[1]:
            out.pop()
            j += 1
        out.append(placeholder_id)
        i = j
    return out


def collapse_prompts_before_generate(llm, placeholder_id: int, added_around: tuple[int, int] | None = None,
                                     size: dict | None = None) -> None:
    """Avoid the double expansion in TRL 1.16's colocated rollouts: `llm.generate` (the engine
    at `trainer.vllm_generation.llm`) collapses each token prompt that comes with an image back
    to the unexpanded form, so vLLM expands it once, into the very ids the trainer trains on.
    Until TRL gives vLLM unexpanded prompts itself (huggingface/trl pull request 6718). `size`: the image
    bound the trainer's processor has (models/families.py image_size_bound), given to vLLM's processor per
    request (TRL builds the engine without mm_processor_kwargs), so vLLM expands each image as the trainer did."""
    generate = llm.generate

    def generate_unexpanded(prompts, *args, **kwargs):
        if isinstance(prompts, list):
            prompts = [{**p, "prompt_token_ids": collapse_placeholder_runs(p["prompt_token_ids"], placeholder_id, added_around),
                        **({"mm_processor_kwargs": {"size": size}} if size else {})}
                       if isinstance(p, dict) and "prompt_token_ids" in p and p.get("multi_modal_data") else p
                       for p in prompts]
        return generate(prompts, *args, **kwargs)

    llm.generate = generate_unexpanded


def probe_colocated_expansion(llm, processor, image, placeholder_ids: list[int], size: dict | None = None) -> None:
    """One request the way TRL 1.16's colocated rollouts make it (processor-expanded ids + the raw
    image, `trl/generation/vllm_generation.py`), then `check_engine_prompt` on what vLLM ran.
    Call it on `trainer.vllm_generation.llm` before training."""
    from vllm import SamplingParams

    messages = [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "Describe."}]}]
    encoded = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    expanded = [int(t) for t in encoded["input_ids"][0]]
    request = {"prompt_token_ids": expanded, "multi_modal_data": {"image": image},
               **({"mm_processor_kwargs": {"size": size}} if size else {})}
    output = llm.generate([request],
                          SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)[0]
    check_engine_prompt(expanded, list(output.prompt_token_ids), placeholder_ids)
