"""Greedy evaluation through vLLM's offline engine (GPU). The prompts are the ones the HF path
builds (the processor's chat template), so both backends score the same text.

NOT VERIFIED: no vLLM and no GPU on the machines this was written on; the call follows vLLM's
documented offline multimodal API (`LLM.generate` with `multi_modal_data`)."""

from __future__ import annotations

from .hf import chat_prompt


def generate_greedy_vllm(model_path: str, processor, prompts: list[str], images: list, max_new_tokens: int,
                         systems: list[str | None] | None = None) -> list[str]:
    from vllm import LLM, SamplingParams

    systems = systems or [None] * len(prompts)
    llm = LLM(model=model_path, limit_mm_per_prompt={"image": 1}, seed=0)
    requests = [{"prompt": chat_prompt(processor, p, s), "multi_modal_data": {"image": image}}
                for p, s, image in zip(prompts, systems, images)]
    outputs = llm.generate(requests, (SamplingParams(temperature=0.0, max_tokens=max_new_tokens)))
    return [output.outputs[0].text for output in outputs]
