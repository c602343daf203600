"""Per-completion uncertainty for DARE: the mean token entropy of each completion under the current
policy (SPEC.md, DARE: "a forward pass of the policy"), and its normalisation to [0, 1].

The forward is model-agnostic: the processor builds every input its model needs (Qwen2.5-VL's
`image_grid_thw` and `mm_token_type_ids`, InternVL's tile-indexed `pixel_values`, ...) for as many
copies of the prompt as there are completions in a micro-batch; per-token fields are extended over
the completion as TRL's GRPOTrainer does. Nothing here knows a model family.
"""

from __future__ import annotations

import math

import torch

from ..generation.hf import chat_prompt


def _per_token_field(value, input_ids: torch.Tensor) -> bool:
    """An integer (batch, prompt length) tensor: a mask or token-type ids, one entry per token."""
    return (isinstance(value, torch.Tensor) and not value.is_floating_point()
            and tuple(value.shape) == tuple(input_ids.shape))


@torch.no_grad()
def completion_entropies(model, processor, prompt_text: str, image, completion_ids: list[list[int]],
                         system: str | None = None, micro_batch: int = 8) -> list[float]:
    """Mean token entropy (nats) of each completion of one prompt; 0.0 for an empty completion."""
    text = chat_prompt(processor, prompt_text, system)
    pad = processor.tokenizer.pad_token_id
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=model.device.type == "cuda")
    result: list[float] = []
    for start in range(0, len(completion_ids), micro_batch):
        chunk = completion_ids[start : start + micro_batch]
        m, longest = len(chunk), max(1, max(map(len, chunk)))
        inputs = processor(text=[text] * m, images=[image] * m, return_tensors="pt")
        prompt_ids = inputs.pop("input_ids")
        completion = torch.full((m, longest), pad, dtype=torch.long)
        completion_mask = torch.zeros_like(completion)
        for i, ids in enumerate(chunk):
            completion[i, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
            completion_mask[i, : len(ids)] = 1
        fields = {}
        for key, value in inputs.items():
            if _per_token_field(value, prompt_ids):  # attention mask, token type ids: cover the completion too
                tail = completion_mask if key == "attention_mask" else torch.zeros_like(completion)
                value = torch.cat([value, tail.to(value.dtype)], dim=1)
            fields[key] = value.to(model.device)
        input_ids = torch.cat([prompt_ids, completion], dim=1).to(model.device)
        with autocast:
            # logits at positions P-1 .. P+L-2 predict the L completion tokens
            logits = model(input_ids=input_ids, **fields, logits_to_keep=longest + 1).logits[:, :-1].float()
        logp = logits.log_softmax(-1)
        entropy = -(logp.exp() * logp).sum(-1)  # (m, longest)
        result += [float(entropy[i, : len(ids)].mean()) if len(ids) else 0.0 for i, ids in enumerate(chunk)]
    return result


def normalise_uncertainty(entropies: list[float], vocab_size: int, how: str) -> list[float]:
    """Entropies (nats) -> [0, 1], as DARE's bonus (1 - u) needs: "vocab" divides by log |V|
    (the maximum entropy of one token), "minmax" rescales within the group."""
    if how == "vocab":
        return [min(1.0, h / math.log(vocab_size)) for h in entropies]
    if how == "minmax":
        lo, hi = min(entropies), max(entropies)
        return [0.0 if hi == lo else (h - lo) / (hi - lo) for h in entropies]
    raise ValueError(f"uncertainty normalisation must be 'vocab' or 'minmax', got {how!r}")
