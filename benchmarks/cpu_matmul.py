"""GFLOPS of the three matmuls of a linear layer's training step on this CPU, fp32 against bf16, at
InternVL3-2B's MLP width (1536 -> 8960) over 512 tokens: why the real-width rehearsal
(tests/gpu_path/test_rehearsal.py) computes its 2-process round in fp32 and rehearses bf16 autocast on a short
prompt only. One torch thread, as every job runs (cli.pin_numerics).

    python benchmarks/cpu_matmul.py     # prints a Markdown table; results: benchmarks/results/rehearsal.md
"""

from __future__ import annotations

import platform
import time

import torch

TOKENS, IN, OUT = 512, 1536, 8960  # InternVL3-2B's text MLP (Qwen2.5-1.5B: hidden 1536, intermediate 8960)


def gflops(f, repeats: int = 3) -> float:
    f()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        f()
    return 2 * TOKENS * IN * OUT * repeats / (time.perf_counter() - start) / 1e9


def cpu_name() -> str:
    try:
        lines = open("/proc/cpuinfo").read().splitlines()
        flags = next(line for line in lines if line.startswith("flags")).split()
        name = next(line for line in lines if line.startswith("model name")).split(":", 1)[1].strip()
        return f"{name} ({', '.join(f for f in flags if f in ('avx2', 'avx512f', 'avx512_bf16', 'amx_bf16')) or 'no AVX2'})"
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        x, w, g = (torch.randn(*shape).to(dtype) for shape in ((TOKENS, IN), (OUT, IN), (TOKENS, OUT)))
        rows.append((str(dtype).removeprefix("torch."), gflops(lambda: x @ w.t()), gflops(lambda: g @ w),
                     gflops(lambda: g.t() @ x)))
    print(f"{cpu_name()}, torch {torch.__version__}, 1 thread, "
          f"{TOKENS} x {IN} -> {OUT}\n")
    print("| dtype | forward x @ W^T | backward grad_x = g @ W | backward grad_W = g^T @ x |")
    print("|---|---|---|---|")
    for name, *values in rows:
        print(f"| {name} | " + " | ".join(f"{v:.2f} GFLOPS" for v in values) + " |")


if __name__ == "__main__":
    main()
