"""What a TTRV authors' verl console log says about its job's start-up and its card, beyond the per-round
`timing_s/*` that author_logs.py reads (benchmarks/plan_vs_logs.py replays the plan against both).

- Start-up: from the launch time in the file name (`..._MMDD_HHMMSS.log`, the authors' launch script's `date`)
  to the last timestamp printed before the first validation prompt (`[prompt]`) or the first step line: Ray's
  start, the workers' model loads (NCCL's `[W917 06:26:09...]`) and the vLLM engine (`WARNING 09-17 06:26:52`).
- Card: verl's `device memory used/total (GB): 9.80/47.37` (fsdp_workers.py's log_gpu_memory_usage), the total
  memory of rank 0's card."""

from __future__ import annotations

import re
from datetime import datetime

_LAUNCH = re.compile(r"_(\d{4})_(\d{6})(?:_[a-z_]+)?\.log$")
_STAMPS = (  # (pattern, strptime format of its group, after the year is put in front)
    (re.compile(r"^(?:\x1b\[[0-9;]*m)?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"), "%Y-%m-%d %H:%M:%S"),
    (re.compile(r"\[W(\d{3,4}) (\d\d:\d\d:\d\d)"), "W"),  # glog: [W917 ...] is month 9 day 17
    (re.compile(r"(?:INFO|WARNING) (\d\d-\d\d \d\d:\d\d:\d\d)"), "%m-%d %H:%M:%S"),
)
_TOTAL = re.compile(r"device memory used/total \(GB\): [0-9.]+/([0-9.]+)")


def launch_time(file_name: str, year: int) -> datetime | None:
    """The launch time a log's file name carries, None where it carries none."""
    match = _LAUNCH.search(file_name)
    return datetime.strptime(f"{year}{match[1]}{match[2]}", "%Y%m%d%H%M%S") if match else None


def _stamp(line: str, year: int) -> datetime | None:
    for pattern, form in _STAMPS:
        match = pattern.search(line)
        if not match:
            continue
        try:
            if form == "W":  # glog's month has no leading zero: the last two digits are the day
                digits = match[1]
                return datetime.strptime(f"{year}-{digits[:-2]}-{digits[-2:]} {match[2]}", "%Y-%m-%d %H:%M:%S")
            if form.startswith("%Y"):
                return datetime.strptime(match[1], form)
            return datetime.strptime(f"{year}-{match[1]}", f"%Y-{form}")
        except ValueError:
            continue
    return None


def startup_seconds(text: str, file_name: str, year: int = 2025) -> float | None:
    """Seconds from the launch (file name) to the last timestamp before the first validation prompt or step
    line; None where the log holds no timestamp or its name no launch time."""
    last = None
    for line in text.splitlines():
        if "[prompt]" in line or re.search(r"\bstep:\d", line):
            break
        last = _stamp(line, year) or last
    launch = launch_time(file_name, year)
    if last is None or launch is None:
        return None
    return (last - launch).total_seconds()


def card_memory_gb(text: str) -> float | None:
    """The total memory of rank 0's card as verl logs it, None where the log does not."""
    match = _TOTAL.search(text)
    return float(match[1]) if match else None
