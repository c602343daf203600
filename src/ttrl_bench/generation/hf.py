"""Greedy and sampled generation with transformers' `generate` (the CPU and fallback backend)."""

from __future__ import annotations

import torch
from tqdm import tqdm


def chat_prompt(processor, text: str) -> str:
    """The user turn every dataset uses: the image first, then the prompt text (TTRV Appendix C)."""
    return processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}],
        add_generation_prompt=True,
    )


@torch.inference_mode()
def generate_greedy(model, processor, prompts: list[str], images: list, max_new_tokens: int, batch_size: int) -> list[str]:
    """Temperature-0 decoding (TTRV / VR-TTRL Appendix A), batched, decoded without special tokens."""
    outputs: list[str] = []
    for start in tqdm(range(0, len(prompts), batch_size), desc="greedy eval", unit="batch"):
        texts = [chat_prompt(processor, p) for p in prompts[start : start + batch_size]]
        batch = processor(
            text=texts, images=images[start : start + batch_size], return_tensors="pt", padding=True
        ).to(model.device)
        generated = model.generate(**batch, do_sample=False, max_new_tokens=max_new_tokens)
        new_tokens = generated[:, batch["input_ids"].shape[1] :]
        outputs.extend(processor.batch_decode(new_tokens, skip_special_tokens=True))
    return outputs
