"""Which generation backend runs: vLLM (GPU, installed with the `gpu` extra) or transformers'
`generate` (everywhere). One rule for adaptation rollouts and for greedy evaluation."""

from __future__ import annotations

import importlib.util

import torch


def choose_backend(choice: str, config_key: str) -> str:
    """"auto": vLLM when it is installed and a GPU is present, else transformers ("hf"). Asking
    for vLLM where it cannot run is an error naming `config_key`, not a silent fallback."""
    if choice not in ("auto", "hf", "vllm"):
        raise ValueError(f"{config_key} must be auto, hf or vllm, got {choice!r}")
    has_vllm = importlib.util.find_spec("vllm") is not None
    if choice == "auto":
        return "vllm" if has_vllm and torch.cuda.is_available() else "hf"
    if choice == "vllm" and not (has_vllm and torch.cuda.is_available()):
        raise ValueError(
            f"config key {config_key} is 'vllm' but "
            + ("vLLM is not installed (pip install '.[gpu]')" if not has_vllm else "no CUDA GPU is visible")
        )
    return choice
