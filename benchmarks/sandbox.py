"""Start-up cost of the T3RL verifier's sandbox (rewards/sandbox.py), paid once per verified rollout:
`run_untrusted("print(1)")` through bubblewrap against the bare interpreter it wraps
(`python -I -S -c print(1)`), median and 90th percentile of N runs. Prints a table and writes
benchmarks/results/sandbox.csv (TTRL_BENCH_BENCHMARK_OUT: another folder).

    python benchmarks/sandbox.py [--runs 20]
"""

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
OUT = Path(os.environ.get("TTRL_BENCH_BENCHMARK_OUT", ROOT / "benchmarks" / "results"))

from ttrl_bench.rewards.sandbox import run_untrusted  # noqa: E402


def timed(run, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        run()
        times.append(1000 * (time.perf_counter() - start))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    python = os.path.realpath(sys.executable)
    cases = {
        "bare python -I -S": lambda: subprocess.run([python, "-I", "-S", "-c", "print(1)"], capture_output=True, check=True),
        "sandbox (bwrap + audit hook)": lambda: run_untrusted("print(1)"),
    }
    rows = []
    for name, run in cases.items():
        ms = pd.Series(timed(run, args.runs))
        rows.append({"case": name, "runs": args.runs, "median_ms": round(ms.median(), 1),
                     "p90_ms": round(ms.quantile(0.9), 1), "machine": f"{platform.node()} {os.cpu_count()} cores"})
    table = pd.DataFrame(rows)
    print("## sandbox start-up\n" + table.to_string(index=False))
    OUT.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT / "sandbox.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
