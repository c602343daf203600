"""The job's process group is left before the interpreter exits (runs/processes.py `end_processes`):
a gloo group alive at exit aborted a finished 2-process job once under load (issue 52)."""

from types import SimpleNamespace

import pytest
import torch.distributed as dist

from ttrl_bench import cli
from ttrl_bench.runs.processes import end_processes


@pytest.fixture
def join_one_process_group(tmp_path):
    """Joins a one-process gloo group when called; a test that failed leaves no group in this worker."""
    yield lambda: dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    if dist.is_initialized():
        dist.destroy_process_group()


def test_ending_the_processes_leaves_the_group_and_does_nothing_outside_one(join_one_process_group):
    end_processes()  # no group: nothing to leave, no error
    join_one_process_group()
    end_processes()
    assert not dist.is_initialized()
    end_processes()  # twice: still nothing raised


def test_every_cli_command_leaves_the_group_its_work_joined(join_one_process_group):
    """What `accelerate launch -m ttrl_bench.cli adapt ...` runs on each process: the command joins the
    group (TRL's trainer does), and main ends it after the command returns."""
    command = SimpleNamespace(command="a command", verbose=False, func=lambda args: join_one_process_group())
    assert cli._run(command, []) == 0
    assert not dist.is_initialized()
