"""The README's main job (`snakemake --cores all` on config/config.yaml), stage by stage, for the parent commit and
this checkout side by side in one run (issue 57: "the first command within 3 minutes on 2 cores"). Each revision's
workflow files are exported (`git archive`) into a temp dir and run from scratch, one after the other, with the
demo-model cache off (every run builds its model, as a first run does). Per stage: the wall seconds Snakemake's
`benchmark:` files record (prepare_data, build_demo_model, each adapt / adapt_per_sample / evaluate summed), and
the whole job's wall time and CPU seconds (every process's user + system time, which other load changes least). The
machine's load average before and after each run is printed: other processes on a shared machine slow every stage.
Prints a table and writes benchmarks/results/demo_stages.md (TTRL_BENCH_BENCHMARK_OUT: another folder) naming the
machine.

    python benchmarks/demo_stages.py [--before f3b4880] [--after CHECKOUT] [--cores 2]
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("TTRL_BENCH_BENCHMARK_OUT", ROOT / "benchmarks" / "results"))
BEFORE = "f3b4880"  # issue 57's parent commit: the 4 min 19 s the issue measured
WORKFLOW = ["Snakefile", "rules", "config", "workflow", "profiles", "envs", "src"]
STAGES = ["prepare_data", "build_demo_model", "adapt", "adapt_per_sample", "evaluate"]


def export(revision: str | Path, dest: Path) -> Path:
    """The workflow files of `revision`, or of a checkout's working tree (a Path: uncommitted changes included)."""
    if isinstance(revision, Path):
        dest.mkdir(parents=True, exist_ok=True)  # cp -r of several sources needs the folder
        subprocess.run(["cp", "-r", *[str(revision / name) for name in WORKFLOW], str(dest)], check=True)
        return dest
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, *WORKFLOW], check=True,
                             capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(dest, filter="data")
    return dest


def stage_seconds(work: Path) -> dict[str, float]:
    """Snakemake's benchmark files: the wall seconds (`s`) of every job, summed per rule."""
    seconds = dict.fromkeys(STAGES, 0.0)
    for stage in STAGES:
        for tsv in (work / "results/benchmarks" / stage).rglob("*.tsv"):
            rows = list(csv.DictReader(tsv.open(), delimiter="\t"))
            seconds[stage] += sum(float(r["s"]) for r in rows)
    return seconds


def run(work: Path, cores: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(work / "src"), "TTRL_BENCH_DEMO_CACHE": "off",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    load_before = os.getloadavg()[0]
    start, children = time.perf_counter(), os.times()
    result = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores)], cwd=work, env=env,
                            capture_output=True, text=True)
    wall = time.perf_counter() - start
    # every process's CPU seconds (user + system): what other load on a shared machine changes least
    cpu = sum(os.times()[i] - children[i] for i in (2, 3))
    if result.returncode != 0:
        raise SystemExit(f"{work}: snakemake failed\n{result.stderr[-3000:]}")
    return {"wall": wall, "cpu": cpu, "load_before": load_before, "load_after": os.getloadavg()[0], **stage_seconds(work)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with (default: issue 57's parent)")
    parser.add_argument("--after", type=Path, default=ROOT,
                        help="the checkout (or worktree) to time, its working tree as is (default: this one)")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    after = "this checkout" if args.after.resolve() == ROOT else str(args.after)
    revisions = {f"before ({args.before})": args.before, f"after ({after})": args.after.resolve()}
    measured = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, revision in revisions.items():
            work = export(revision, Path(tmp) / label.split()[0])
            measured[label] = run(work, args.cores)
            print(f"{label}: {measured[label]['wall']:.0f} s", flush=True)
    (before, a), (after, b) = measured.items()
    lines = [f"| stage | {before} s | {after} s | after / before |", "|---|---|---|---|"]
    names = {"wall": "whole main job (wall)", "cpu": "whole main job (CPU, all processes)"}
    for key in ["wall", "cpu", *STAGES]:
        ratio = f"{b[key] / a[key]:.2f}" if a[key] else "-"
        lines.append(f"| {names.get(key, key + ' (sum of jobs, wall)')} | {a[key]:.1f} | {b[key]:.1f} | {ratio} |")
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    load = ", ".join(f"{label}: {m['load_before']:.1f} -> {m['load_after']:.1f}" for label, m in measured.items())
    text = (f"# The demo's main job by stage, {before} vs {after}\n\n`python benchmarks/demo_stages.py --cores "
            f"{args.cores}` on {os.cpu_count()} x {cpu}, {time.strftime('%Y-%m-%d', time.gmtime())}; load average "
            f"(1 min) before -> after each run: {load}. Jobs run side by side (2 adaptations at once), so the sums "
            "exceed the wall time.\n\n" + "\n".join(lines) + "\n")
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "demo_stages.md").write_text(text)


if __name__ == "__main__":
    main()
