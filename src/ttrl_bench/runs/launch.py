"""How a GPU job starts: one process, or one per GPU under `accelerate launch` with FSDP2.

Full fine-tuning keeps fp32 master weights, their gradients and AdamW's two moments: 16 bytes per
parameter before activations (133 GB for an 8B model), plus a bf16 KL reference (2 bytes). FSDP
(PyTorch's, through accelerate; FSDP2, which shards parameters in place as DTensors) divides that
by the number of GPUs; where one GPU still cannot hold its share, parameters and optimizer state
are offloaded to host memory (slower, correct). How many GPUs and whether to offload is the plan's
decision (plan/cost.py, from traced memory). FSDP rather than DeepSpeed ZeRO-3: it is part of
PyTorch (no extra compiled package on the cluster), TRL and accelerate support it, and FSDP2 keeps
the model object itself, so the per-sample restore and the DARE forward need no wrapper logic.
The TTRV authors ran FSDP too (verl, 4 GPUs).
"""

from __future__ import annotations

import shlex


def machine_has_gpu() -> bool:
    """Whether this machine has an NVIDIA or AMD GPU, without importing torch (the Snakefile asks)."""
    from pathlib import Path

    nvidia = Path("/proc/driver/nvidia/gpus")
    return (nvidia.is_dir() and any(nvidia.iterdir())) or Path("/dev/kfd").exists()


def launcher(gpus: int, offload: bool = False, port: int | None = None) -> str:
    """The command prefix that runs `ttrl-bench <subcommand>` for a job with `gpus` GPUs, offloaded
    or not (both decided by the plan: plan/resources.py): plain Python for one GPU without offload,
    else `accelerate launch` with one process per GPU, FSDP2 full sharding of each transformer block
    (the model's `_no_split_modules`), parameters and optimizer state on the host if offloaded."""
    if gpus == 1 and not offload:
        return "python -m ttrl_bench.cli"
    args = ["accelerate", "launch", "--num_processes", str(gpus), "--num_machines", "1",
            "--use_fsdp", "--fsdp_version", "2", "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP",
            "--fsdp_state_dict_type", "FULL_STATE_DICT", "--fsdp_offload_params", str(offload).lower()]
    if port is not None:  # several multi-process jobs on one node must not share the rendezvous port
        args += ["--main_process_port", str(port)]
    return shlex.join(args + ["-m", "ttrl_bench.cli"])
