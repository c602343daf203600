"""Per-call cost of the T3RL verifier's sandbox (paid once per verified rollout): `run_untrusted("print(1)")`
of this tree against the same call of another commit's tree (by default the parent of issue 54's work),
side by side in one run, and the bare interpreter it wraps (`python -I -S -c print(1)`). Each tree runs in
a worker process of its own (PYTHONPATH = that tree's src, the other commit's taken out with `git
archive`); the calls alternate between the workers, the order flipped every round, so that load from
other processes on the machine falls on each alike. Each worker's first call (this tree's: the start-up
check, once per process) is not timed. Prints a table and writes benchmarks/results/sandbox.md
(TTRL_BENCH_BENCHMARK_OUT: another folder) naming the machine and its load.

    python benchmarks/sandbox.py [--runs 20] [--before f3b4880]
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("TTRL_BENCH_BENCHMARK_OUT", ROOT / "benchmarks" / "results"))
BEFORE = "f3b4880"  # main before issue 54 (uid 65534, Docker's allowlist, AF_UNIX only, the check in run_untrusted)

WORKER = """
import sys, time
from ttrl_bench.rewards.sandbox import run_untrusted
assert run_untrusted("print(1)").stdout == "1\\n"  # warm: the interpreter view; this tree's start-up check
print("ready", flush=True)
for _ in sys.stdin:
    start = time.perf_counter()
    outcome = run_untrusted("print(1)")
    assert outcome.stdout == "1\\n", outcome
    print(1000 * (time.perf_counter() - start), flush=True)
"""


def tree_of(commit: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, "src"],
                             capture_output=True, check=True).stdout
    path = into / "archive.tar"
    path.write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def worker(src: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(src)})
    line = process.stdout.readline().strip()
    if line != "ready":
        raise SystemExit(f"the worker for {src} did not start: {line!r}")
    return process


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    return f"{platform.node()}: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--before", default=BEFORE)
    args = parser.parse_args()
    python = os.path.realpath(sys.executable)
    with tempfile.TemporaryDirectory() as folder:
        workers = {f"before ({args.before})": worker(tree_of(args.before, Path(folder))),
                   "after (this tree)": worker(ROOT / "src")}
        times: dict[str, list[float]] = {name: [] for name in [*workers, "bare python -I -S"]}
        load = [os.getloadavg()[0]]
        for i in range(args.runs):
            for name in (list(workers) if i % 2 == 0 else list(workers)[::-1]):
                workers[name].stdin.write("run\n")
                workers[name].stdin.flush()
                times[name].append(float(workers[name].stdout.readline()))
            start = time.perf_counter()
            subprocess.run([python, "-I", "-S", "-c", "print(1)"], capture_output=True, check=True)
            times["bare python -I -S"].append(1000 * (time.perf_counter() - start))
        load.append(os.getloadavg()[0])
        for process in workers.values():
            process.stdin.close()
            process.wait()
    rows = [(name, len(ms), statistics.median(ms), statistics.quantiles(ms, n=10)[-1]) for name, ms in times.items()]
    lines = ["## sandbox per-call cost (`run_untrusted(\"print(1)\")`), before and after side by side", "",
             f"machine: {machine()}", f"load average (1 min) at start and end: {load[0]:.2f}, {load[1]:.2f}", "",
             "| case | runs | median ms | p90 ms |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {n} | {median:.1f} | {p90:.1f} |" for name, n, median, p90 in rows]
    before, after = statistics.median(times[f"before ({args.before})"]), statistics.median(times["after (this tree)"])
    paired = statistics.median(a - b for a, b in zip(times["after (this tree)"], times[f"before ({args.before})"]))
    lines += ["", f"after - before: {after - before:+.1f} ms per call (medians); median of the {args.runs} "
              f"differences within a round: {paired:+.1f} ms"]
    text = "\n".join(lines) + "\n"
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "sandbox.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
