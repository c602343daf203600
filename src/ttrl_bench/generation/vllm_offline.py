"""Greedy evaluation through vLLM's offline engine. The prompts are the ones the HF path builds
(the processor's chat template), so both backends score the same text.

Checked on vLLM's CPU build (tests/gpu_path/test_vllm_cpu.py: the greedy outputs of the tiny Qwen2.5-VL
equal transformers' `generate`); on a GPU, not yet (issue 14)."""

from __future__ import annotations

from .hf import chat_prompt
from .vllm_settings import llm_kwargs


class VllmGreedy:
    """One vLLM engine for a whole evaluation, fed in chunks (evaluation streams its images).
    `settings`: config `evaluation.vllm` (defaults in vllm_settings.EVALUATION_DEFAULTS).
    `sampling` ({n, temperature, top_p, seed}; config evaluation.math): n sampled completions per
    prompt, returned as one list per prompt, instead of the greedy one."""

    def __init__(self, model_path: str, settings: dict | None, max_new_tokens: int, seed: int = 0,
                 sampling: dict | None = None):
        from vllm import LLM

        self.llm = LLM(**llm_kwargs(model_path, settings, max_new_tokens, seed))
        self.max_new_tokens = max_new_tokens
        self.sampling = sampling

    def _params(self):
        from vllm import SamplingParams

        if self.sampling is None:
            return SamplingParams(temperature=0.0, max_tokens=self.max_new_tokens, detokenize=False)
        s = self.sampling
        top_k = {"top_k": int(s["top_k"])} if s.get("top_k") else {}  # evaluation.math.top_k; unset: vLLM's none
        return SamplingParams(n=int(s["n"]), temperature=float(s["temperature"]), top_p=float(s.get("top_p", 1.0)),
                              seed=int(s.get("seed", 0)), max_tokens=self.max_new_tokens, detokenize=False, **top_k)

    def __call__(self, processor, prompts: list[str], images: list, systems: list[str | None] | None = None) -> list:
        systems = systems or [None] * len(prompts)
        requests = [{"prompt": chat_prompt(processor, p, s), "multi_modal_data": {"image": image}}
                    for p, s, image in zip(prompts, systems, images)]
        # Token ids decoded by the processor, as the HF path does: vLLM's incremental detokenizer
        # renders an incomplete UTF-8 byte sequence differently (measured on vLLM's CPU build: 16 of
        # 16 id sequences equal to HF's, 25 of 48 texts).
        outputs = self.llm.generate(requests, self._params())
        if self.sampling is None:
            return processor.batch_decode([list(o.outputs[0].token_ids) for o in outputs], skip_special_tokens=True)
        return [processor.batch_decode([list(c.token_ids) for c in o.outputs], skip_special_tokens=True) for o in outputs]
