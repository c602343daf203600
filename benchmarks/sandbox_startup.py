"""Start-up time per run of the T3RL verifier's sandbox (paid once per verified rollout), before and
after issue 37 (cgroup, seccomp filter, pipes, read-only root with only the libraries the
interpreter maps), against the bare interpreter; and the start-up check (`check_sandbox`: once
per T3RL run). The "before" sandbox is rewards/sandbox.py as of BEFORE (git show), loaded as a
module of its own. Runs alternate between the cases, so that load from other processes on the
machine falls on each alike. Prints a table and writes benchmarks/results/sandbox_startup.md
(TTRL_BENCH_BENCHMARK_OUT: another folder) naming the machine.

    python benchmarks/sandbox_startup.py [--runs 30] [--before c0da271]
"""

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
OUT = Path(os.environ.get("TTRL_BENCH_BENCHMARK_OUT", ROOT / "benchmarks" / "results"))

from ttrl_bench.rewards import sandbox  # noqa: E402

BEFORE = "c0da271"  # the last commit of the single-file sandbox (namespaces, per-process limits, no cgroup)


def load_before(commit: str):
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:src/ttrl_bench/rewards/sandbox.py"],
                            capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "sandbox_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("sandbox_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    return f"{platform.node()}: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--before", default=BEFORE)
    args = parser.parse_args()
    python = os.path.realpath(sys.executable)
    before = load_before(args.before)
    cases = {
        "bare python -I -S": lambda: subprocess.run([python, "-I", "-S", "-c", "print(1)"], capture_output=True,
                                                    check=True),
        f"before ({args.before}: namespaces, rlimits)": lambda: before.run_untrusted("print(1)"),
        "after (+ cgroup, seccomp, pipes, read-only root)": lambda: sandbox.run_untrusted("print(1)"),
    }
    for run in cases.values():  # warm: the interpreter view, page cache
        run()
    times = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, run in cases.items():
            start = time.perf_counter()
            run()
            times[name].append(1000 * (time.perf_counter() - start))
    checks = []
    for _ in range(3):
        sandbox.check_sandbox.cache_clear()
        start = time.perf_counter()
        sandbox.check_sandbox()
        checks.append(1000 * (time.perf_counter() - start))
    rows = [(name, len(ms), statistics.median(ms), statistics.quantiles(ms, n=10)[-1]) for name, ms in times.items()]
    rows.append(("start-up check (6 * 7 + escape suite), once per T3RL run; p90 column: max of 3", 3,
                 statistics.median(checks), max(checks)))
    lines = ["## sandbox start-up per run (`run_untrusted(\"print(1)\")`)", "", f"machine: {machine()}", "",
             "| case | runs | median ms | p90 ms |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {n} | {median:.1f} | {p90:.1f} |" for name, n, median, p90 in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "sandbox_startup.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
