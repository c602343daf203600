"""Named moments a test can kill a run at (tests/workflow/test_resume.py), without racing its log."""

from __future__ import annotations

import os
import signal

ENV = "TTRL_BENCH_TEST_KILL_AT"
MOMENTS = ("adapt-save", "adapt-outputs", "evaluate", "ingest")


def kill_point(moment: str) -> None:
    """With TTRL_BENCH_TEST_KILL_AT=<moment> set, SIGKILL this job's process group here: Snakemake and every
    job it runs (a local job shares Snakemake's group), as a preemption would. Unset, as in every real run,
    nothing happens."""
    assert moment in MOMENTS, moment
    if os.environ.get(ENV) == moment:
        os.killpg(os.getpgrp(), signal.SIGKILL)
