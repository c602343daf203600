"""How a GPU job starts: one process, or one per GPU under `accelerate launch` with FSDP2.

Full fine-tuning keeps fp32 master weights, their gradients and AdamW's two moments: 16 bytes per
parameter before activations (133 GB for an 8B model), plus a bf16 KL reference (2 bytes). FSDP
(PyTorch's, through accelerate; FSDP2, which shards parameters in place as DTensors) divides that
by the number of GPUs; where one GPU still cannot hold its share, parameters and optimizer state
are offloaded to host memory (slower, correct). FSDP rather than DeepSpeed ZeRO-3: it is part of
PyTorch (no extra compiled package on the cluster), TRL and accelerate support it, and FSDP2 keeps
the model object itself, so the per-sample restore and the DARE forward need no wrapper logic.
The TTRV authors ran FSDP too (verl, 4 GPUs).
"""

from __future__ import annotations

import math
import shlex

BYTES_PER_PARAMETER = 16 + 2  # fp32 weights + gradients + AdamW moments, bf16 reference
GPU_MEMORY_GB = 80  # the papers' A100 / H100 80 GB
USABLE_SHARE = 0.75  # the rest: activations, rollouts, CUDA context


def machine_has_gpu() -> bool:
    """Whether this machine has an NVIDIA or AMD GPU, without importing torch (the Snakefile asks)."""
    from pathlib import Path

    nvidia = Path("/proc/driver/nvidia/gpus")
    return (nvidia.is_dir() and any(nvidia.iterdir())) or Path("/dev/kfd").exists()


def training_gb(params_b: float) -> float:
    return params_b * BYTES_PER_PARAMETER


def default_gpus(params_b: float) -> int:
    """GPUs per adaptation job so each holds its share of the training state (`models.<name>.gpus`
    overrides): 1 for 2B, 2 for 4B, 4 for 7-8B (as the TTRV authors' logs). Powers of two."""
    need = training_gb(params_b) / (GPU_MEMORY_GB * USABLE_SHARE)
    return 2 ** max(0, math.ceil(math.log2(max(need, 1.0))))


def needs_offload(params_b: float, gpus: int) -> bool:
    """Parameters and optimizer state on the host when one GPU's share does not fit (a 7-8B model
    on one GPU)."""
    return training_gb(params_b) / gpus > GPU_MEMORY_GB * USABLE_SHARE


def launcher(gpus: int, params_b: float, port: int | None = None) -> str:
    """The command prefix that runs `ttrl-bench <subcommand>` for a job with `gpus` GPUs: plain
    Python for one GPU whose share fits, else `accelerate launch` with one process per GPU, FSDP2
    full sharding of each transformer block (the model's `_no_split_modules`), offload if needed."""
    offload = needs_offload(params_b, gpus)
    if gpus == 1 and not offload:
        return "python -m ttrl_bench.cli"
    args = ["accelerate", "launch", "--num_processes", str(gpus), "--num_machines", "1",
            "--use_fsdp", "--fsdp_version", "2", "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP",
            "--fsdp_state_dict_type", "FULL_STATE_DICT", "--fsdp_offload_params", str(offload).lower()]
    if port is not None:  # several multi-process jobs on one node must not share the rendezvous port
        args += ["--main_process_port", str(port)]
    return shlex.join(args + ["-m", "ttrl_bench.cli"])
