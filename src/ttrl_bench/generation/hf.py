"""Greedy and sampled generation with transformers' `generate` (the CPU and fallback backend), in the
adaptation's precision (precision.py)."""

from __future__ import annotations

import torch
from tqdm import tqdm

from .precision import compute_device, generation_precision


def chat_messages(text: str, system: str | None = None, image=None) -> list[dict]:
    """An optional system turn, then the user turn: the image first, then the prompt text (TTRV
    Appendix C; VisionReasoner's prompt has a system turn)."""
    image_part = {"type": "image", "image": image} if image is not None else {"type": "image"}
    messages = [{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []
    return messages + [{"role": "user", "content": [image_part, {"type": "text", "text": text}]}]


def chat_prompt(processor, text: str, system: str | None = None) -> str:
    return processor.apply_chat_template(chat_messages(text, system), add_generation_prompt=True)


@torch.inference_mode()
def generate_greedy(model, processor, prompts: list[str], images: list, max_new_tokens: int, batch_size: int,
                    systems: list[str | None] | None = None, progress: bool = True) -> list[str]:
    """Temperature-0 decoding (TTRV / VR-TTRL Appendix A), batched, decoded without special tokens."""
    systems = systems or [None] * len(prompts)
    outputs: list[str] = []
    for start in tqdm(range(0, len(prompts), batch_size), desc="greedy eval", unit="batch", disable=not progress):
        texts = [chat_prompt(processor, p, s) for p, s in zip(prompts[start : start + batch_size], systems[start : start + batch_size])]
        batch = processor(
            text=texts, images=images[start : start + batch_size], return_tensors="pt", padding=True
        ).to(compute_device(model))
        with generation_precision(model):
            generated = model.generate(**batch, do_sample=False, max_new_tokens=max_new_tokens)
        new_tokens = generated[:, batch["input_ids"].shape[1] :]
        outputs.extend(processor.batch_decode(new_tokens, skip_special_tokens=True))
    return outputs


@torch.inference_mode()
def generate_sampled(model, processor, prompts: list[str], images: list, max_new_tokens: int, batch_size: int,
                     sampling: dict, systems: list[str | None] | None = None) -> list[list[str]]:
    """`sampling["n"]` completions per prompt at `temperature` / `top_p` (ECHO's pass@k evaluation,
    config evaluation.math), seeded by `sampling["seed"]`; one list of texts per prompt."""
    systems = systems or [None] * len(prompts)
    n = int(sampling["n"])
    torch.manual_seed(int(sampling.get("seed", 0)))
    outputs: list[list[str]] = []
    for start in range(0, len(prompts), batch_size):
        texts = [chat_prompt(processor, p, s) for p, s in zip(prompts[start : start + batch_size], systems[start : start + batch_size])]
        batch = processor(
            text=texts, images=images[start : start + batch_size], return_tensors="pt", padding=True
        ).to(compute_device(model))
        # top_k 0: no top-k cut (vLLM's default, and the checkpoint's generation config may set one), unless
        # the config sets one (evaluation.math.top_k: the ECHO authors' 50)
        with generation_precision(model):
            generated = model.generate(**batch, do_sample=True, temperature=float(sampling["temperature"]),
                                       top_p=float(sampling.get("top_p", 1.0)), top_k=int(sampling.get("top_k") or 0),
                                       num_return_sequences=n,
                                       max_new_tokens=max_new_tokens)
        decoded = processor.batch_decode(generated[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        outputs.extend(decoded[i : i + n] for i in range(0, len(decoded), n))  # grouped by prompt
    return outputs


@torch.inference_mode()
def generate_samples(model, processor, prompt: str, image, n: int, temperature: float, max_new_tokens: int,
                     system: str | None = None) -> list[str]:
    """`n` sampled completions of one prompt (the rollouts of the vote-only baseline)."""
    batch = processor(text=[chat_prompt(processor, prompt, system)], images=[image], return_tensors="pt").to(compute_device(model))
    with generation_precision(model):
        generated = model.generate(**batch, do_sample=True, temperature=temperature, max_new_tokens=max_new_tokens,
                                   num_return_sequences=n, top_k=0, top_p=1.0)
    return processor.batch_decode(generated[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
