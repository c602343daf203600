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
    outputs = llm.generate(requests, SamplingParams(temperature=0.0, max_tokens=max_new_tokens))
    return [output.outputs[0].text for output in outputs]
