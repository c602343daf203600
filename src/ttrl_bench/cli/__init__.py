"""The `ttrl-bench` command: its parser, built from each command group's parsers (registry,
preparation, adaptation, evaluation, results, planning, diagnostics: a module each), and `main`,
which runs one subcommand the way every job runs: its rerun command the log's first line,
torch's numerics pinned, an error logged in one line with exit status 1."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from ..runs.progress import readable_progress
from . import adaptation, diagnostics, evaluation, planning, preparation, registry, results
from .common import log

DESCRIPTION = """`ttrl-bench`: one subcommand per pipeline step. Every Snakemake rule calls one of these, so
any single step can be rerun by hand with the command line printed in its log."""

GROUPS = (registry, preparation, adaptation, evaluation, results, planning, diagnostics)

# The order `ttrl-bench --help` lists the subcommands in (and argparse's "choose from"): the
# registries, then the pipeline's steps, planning and the diagnostics before the last step's figures
COMMANDS = ("datasets", "methods", "fetch", "prepare-data", "build-demo-model", "convert-model", "adapt", "evaluate",
            "adapt-per-sample", "ingest", "import-author-logs", "render-tables", "plan", "cell", "targets",
            "audit-reward",
            "check-sandbox", "prompt", "rescore", "plot-figures")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ttrl-bench", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    adders = {name: add for group in GROUPS for name, add in group.PARSERS.items()}
    assert sorted(adders) == sorted(COMMANDS), "each group's commands, every one listed once in COMMANDS"
    for name in COMMANDS:
        adders[name](sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ttrl-bench")
    except PackageNotFoundError:  # a checkout run through PYTHONPATH without an install
        return "unknown (not installed)"


# Environment that changes what a step does or where it runs, carried into its rerun command
RERUN_ENV = ("OMP_NUM_THREADS", "TTRL_BENCH_THREADS", "CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HOME")


def rerun_command(argv: list[str]) -> str:
    """A shell command that reruns this step as is, pasted anywhere: the same directory,
    interpreter, package (PYTHONPATH) and settings, every word shell-quoted."""
    import shlex

    env = {name: os.environ[name] for name in RERUN_ENV if name in os.environ}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # src/
    words = ["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "ttrl_bench.cli", *argv]
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join(words)}"


# Subcommands that compute with torch: their numbers must not depend on the machine.
TORCH_COMMANDS = {"build-demo-model", "convert-model", "adapt", "evaluate", "adapt-per-sample", "audit-reward"}

# The steps rules start under `accelerate launch` (rules/adapt.smk get_launcher, runs/launch.py): their process
# group is the launch's, and is left before exit (runs/processes.py end_processes). Not `evaluate`: in-process vLLM
# keeps the one-process group it makes in its own state, and a later engine needs it (.ci/vllm-cpu.sh at 528a3a4).
LAUNCHED_COMMANDS = {"adapt", "adapt-per-sample"}


def pin_numerics() -> None:
    """The same numbers from 1 or 2 cores, and on other x86-64 machines (issue 16). torch runs on
    TTRL_BENCH_THREADS threads (default 1), whatever OMP_NUM_THREADS says: a reduction split over
    another number of threads rounds differently, and a tiny model's warm start amplifies that.
    MKL, oneDNN and ATen take the AVX2 code paths every x86-64 CPU since 2013 has, not the widest
    one the CPU offers; without a GPU only deterministic algorithms run. Called before torch loads."""
    import platform

    if platform.machine().lower() in ("x86_64", "amd64"):
        for name, value in (("MKL_CBWR", "AVX2"), ("ONEDNN_MAX_CPU_ISA", "AVX2"), ("ATEN_CPU_CAPABILITY", "avx2")):
            os.environ.setdefault(name, value)
    import torch

    if torch.cuda.is_available():  # GPU jobs: the host threads only feed the GPU
        if "TTRL_BENCH_THREADS" in os.environ:
            torch.set_num_threads(int(os.environ["TTRL_BENCH_THREADS"]))
        return
    torch.set_num_threads(int(os.environ.get("TTRL_BENCH_THREADS", "1")))
    # ATen's switch, which `torch.use_deterministic_algorithms` sets after importing torch._inductor (and with it
    # _dynamo: as long as importing transformers itself) for its compile flag; no job compiles, and the build and
    # every evaluation import nothing else of inductor (issue 57's profile)
    torch._C._set_deterministic_algorithms(True)
    # ... without its NaN fill of every new tensor (torch.utils.deterministic.fill_uninitialized_memory), which
    # reads nothing a kernel does not write first: TRL's log-prob kernel takes a 1,376 x 32,768 buffer per call,
    # 0.3-0.4 s to fill, about 40% of a demo adaptation (issue 57's profile). The same numbers either way.
    torch._C._set_deterministic_fill_uninitialized_memory(False)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if getattr(args, "rerun", True):  # pipeline steps; listings and fetch are not rerun from a log
        print(rerun_command(argv), file=sys.stderr, flush=True)  # the first line of every job's log
    stderr = readable_progress()
    try:
        return _run(args, argv)
    finally:
        sys.stderr = stderr


def _run(args, argv: list[str]) -> int:
    if args.command in TORCH_COMMANDS:
        pin_numerics()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        _run_command(args)
        sys.stdout.flush()  # a reader that closed the pipe shows here, not in the interpreter's exit
    except BrokenPipeError:  # `ttrl-bench plan ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (FileNotFoundError, KeyError, ValueError, OSError, NotImplementedError, RuntimeError) as err:
        log.error("%s", err)
        if getattr(err, "transient", False):  # e.g. a store locked by another process
            log.error("then retry: %s", rerun_command(argv))
        return 1
    return 0


def _run_command(args) -> None:
    """The subcommand; a launched step then leaves its group, failed or not (a gloo group alive at exit aborts
    the process after its work: SIGABRT, and the job is called failed; issue 52)."""
    try:
        args.func(args)
    finally:
        if args.command in LAUNCHED_COMMANDS:
            from ..runs.processes import end_processes

            end_processes()
