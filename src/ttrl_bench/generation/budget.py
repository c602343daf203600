"""The prompt budget, checked per item before any engine sees it: a prompt (its image tokens included) over
`max_prompt_tokens` (config evaluation.vllm / adaptation.vllm) is one item's error, never the whole job's.

vLLM refuses a request list with any prompt over its model length ("The decoder prompt (length N) is longer
than the maximum model length"), and HF generate would run it at any size; both backends apply this one
check, so they score the same items. The count is the processor's own: its text tokens with the image
placeholder replaced by the image's tokens (transformers' `_get_num_multimodal_tokens`, what vLLM reads to
size its placeholders), under the bound the processor carries (models/families.py `image_size_bound`)."""

from __future__ import annotations

from .hf import chat_prompt


def prompt_tokens(processor, text: str, image, system: str | None = None) -> tuple[int, int]:
    """(prompt tokens, image tokens) of one chat prompt with one image, as the processor expands it."""
    chat = chat_prompt(processor, text, system)
    counted = getattr(processor, "_get_num_multimodal_tokens", None)
    if counted is None:  # a processor without the count: expand it (costs the image's preprocessing)
        expanded = processor(text=[chat], images=[image], return_tensors="pt")["input_ids"]
        ids = len(processor.tokenizer(chat, add_special_tokens=False)["input_ids"])
        return int(expanded.shape[1]), int(expanded.shape[1]) - ids + 1
    image_tokens = int(counted(image_sizes=[(image.height, image.width)])["num_image_tokens"][0])
    text_tokens = len(processor.tokenizer(chat)["input_ids"])  # the one placeholder token counted once
    return text_tokens - 1 + image_tokens, image_tokens


def over_budget(processor, item: str, text: str, image, budget: int | None, key: str,
                system: str | None = None) -> str | None:
    """Why `item` cannot be sent (its prompt exceeds `budget`, config `key`), or None when it fits."""
    if budget is None:
        return None
    total, image_tokens = prompt_tokens(processor, text, image, system)
    if total <= budget:
        return None
    return (f"{item}: prompt of {total} tokens ({image_tokens} image tokens, image {image.width}x{image.height}) "
            f"exceeds the prompt budget of {budget} ({key}.max_prompt_tokens)")


def within_budget(processor, sample: dict, decoded: tuple, max_prompt_tokens: int | None, key: str) -> tuple:
    """(image, None), or (None, why) for an image that did not decode (datasets/preprocessing.py decode_image)
    or a prompt over the budget of config `key`: one sample's error, not a dead job."""
    image, error = decoded
    if error is None:
        error = over_budget(processor, f"sample {sample['id']}", sample["prompt"], image, max_prompt_tokens, key,
                            sample.get("system"))
    return (None, error) if error else decoded
