"""The GPU card a run is planned for: one key, `resources.gpu_model` in the config, which is also the
`gpu_model` resource the GPU rules hand to SLURM (profiles/slurm/config.yaml: `sbatch --gpus=<model>:N`).
Each card: its memory (what the plan fits every job into) and its throughput relative to the H100 80 GB
(what scales the minutes measured on another card), each figure with its source.

Link: the datasheet's GPU-to-GPU bandwidth (NVLink on SXM boards, else PCIe 4.0 x16: 64 GB/s both directions);
the A100s are taken as PCIe cards (the authors' A100s shared a machine with A6000s; SXM's NVLink would be faster).

Relative throughput is the dense bf16 tensor-core peak over the H100 SXM's (989 TFLOPS): the cost model's
minutes are FLOPs at an achieved rate, and the rate measured on one card is scaled by this ratio to another.
It is a peak ratio, not a measured one: a small model on a fast card reaches a smaller share of its peak, so
the plan's limits carry the margin of cost.py (`MARGIN`).

Layer 1 of the plan (config): imports nothing of the plan (docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Card:
    key: str  # resources.gpu_model, and SLURM's gpu_model resource (the SLURM plugin takes [a-zA-Z0-9_.] only)
    name: str
    memory_gb: float
    relative: float  # dense bf16 tensor throughput / the H100 SXM's
    source: str
    link_gb_s: float = 64.0  # GPU-to-GPU bandwidth, both directions (datasheet): scales cost.py's weight traffic


H100_BF16_TFLOPS = 989.0  # NVIDIA H100 datasheet (SXM5): 1,979 TFLOPS bf16 with sparsity, half dense
CARDS = {c.key: c for c in (
    Card("h100", "H100 80GB", 80, 1.0,
         "NVIDIA H100 datasheet (SXM5): 80 GB HBM3, 989 TFLOPS dense bf16, NVLink 900 GB/s", 900),
    Card("h200", "H200 141GB", 141, 989 / H100_BF16_TFLOPS,
         "NVIDIA H200 datasheet (SXM): 141 GB HBM3e, 989 TFLOPS dense bf16 (the H100's compute, more bandwidth), "
         "NVLink 900 GB/s", 900),
    Card("a100_80", "A100 80GB", 80, 312 / H100_BF16_TFLOPS,
         "NVIDIA A100 datasheet: 80 GB HBM2e, 312 TFLOPS dense bf16, PCIe 4.0 64 GB/s"),
    Card("a100_40", "A100 40GB", 40, 312 / H100_BF16_TFLOPS,
         "NVIDIA A100 datasheet: 40 GB HBM2, 312 TFLOPS dense bf16, PCIe 4.0 64 GB/s"),
    Card("a6000", "RTX A6000 48GB", 48, 154.8 / H100_BF16_TFLOPS,
         "NVIDIA RTX A6000 datasheet: 48 GB GDDR6, 309.7 TFLOPS bf16 with sparsity (154.8 dense), PCIe 4.0 x16"),
    Card("l40s", "L40S 48GB", 48, 362 / H100_BF16_TFLOPS,
         "NVIDIA L40S datasheet: 48 GB GDDR6, 733 TFLOPS bf16 with sparsity (362 dense), PCIe 4.0 x16, no NVLink"),
)}
DEFAULT_CARD = "h100"
# The card the cost model's adaptation rate was measured on (cost.py AUTHORS_UPDATE): the TTRV authors' logs
# report 47.4-47.5 GiB of total GPU memory on rank 0 in 68 of their 71 readable logs (79.1 GiB in 3), a
# 48 GB card, A6000 class (their paper's Appendix: "4 A100 + 4 A6000"); the fitted log
# (ai2d InternVL3-2B "2e") is one of the 68.
AUTHORS_CARD = "a6000"
# The card the evaluation throughput was measured on (evaluation_cost.py, docs/gpu-runs.md: one H100 80 GB).
EVALUATION_CARD = "h100"


def card(key: str | None) -> Card:
    """The card of a key (None: the default, H100 80 GB); ValueError naming the config key otherwise."""
    key = key or DEFAULT_CARD
    if key not in CARDS:
        raise ValueError(f"config key `resources.gpu_model`: unknown card {key!r}; known: {', '.join(CARDS)}")
    return CARDS[key]


def slurm_gpu_model(config: dict) -> str:
    """The `gpu_model` resource of the GPU rules: the card's key where the config names one (sbatch
    --gpus=<key>:N), else "" (not pinned: the plugin then asks --gpus=N of any type)."""
    return config.get("resources", {}).get("gpu_model") or ""


def config_card(config: dict) -> Card:
    """The card a validated config plans for (`resources.gpu_model`, default H100 80 GB)."""
    return card(config.get("resources", {}).get("gpu_model"))


def gpu_memory_gb(config: dict) -> float:
    """The memory every job is fitted into: `resources.gpu_memory_gb` where set, else the card's."""
    resources = config.get("resources", {})
    return resources.get("gpu_memory_gb") or config_card(config).memory_gb


def speed(target: Card, measured_on: str, slowest: bool = False, link: bool = False) -> float:
    """How much faster `target` runs what was measured on the card `measured_on` (peak ratio; `link`: of the
    GPU-to-GPU bandwidth, for the weights' traffic). `slowest`: the slowest plausible case, where a faster card
    brings nothing (the TTRV authors' 3 logs on 80 GB A100s ran no faster per round than their A6000 ones:
    benchmarks/results/plan_vs_logs.md) and a slower one its full loss."""
    of = "link_gb_s" if link else "relative"
    ratio = getattr(target, of) / getattr(CARDS[measured_on], of)
    return min(1.0, ratio) if slowest else ratio
