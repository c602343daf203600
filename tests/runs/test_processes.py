"""A script's process group is left before the interpreter exits (runs/processes.py `end_processes`): a gloo
group alive at exit aborted a finished 2-process test script once under load (issue 52). The CLI's launched steps
call it (tests/cli/test_cli.py)."""

import torch.distributed as dist

from ttrl_bench.runs.processes import end_processes


def test_ending_the_processes_leaves_the_group_and_does_nothing_outside_one(join_one_process_group):
    end_processes()  # no group: nothing to leave, no error
    join_one_process_group()
    end_processes()
    assert not dist.is_initialized()
    end_processes()  # twice: still nothing raised
