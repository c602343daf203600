"""The start-up and card of an authors' log (results/author_timing.py, issue 51)."""


LOG_HEAD = (  # the shape of the authors' logs' first lines (ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log)
    "2025-09-16 23:52:40,101\tINFO worker.py:1942 -- Started a local Ray instance.\n"
    "\x1b[36m(WorkerDict pid=1)\x1b[0m [rank0]:[W916 23:53:31.413058891 ProcessGroupNCCL.cpp:4561] barrier\n"
    "\x1b[36m(WorkerDict pid=1)\x1b[0m Before building vllm rollout, memory allocated (GB): 1.95, memory reserved "
    "(GB): 9.16, device memory used/total (GB): 9.80/47.37\n"
    "\x1b[36m(WorkerDict pid=1)\x1b[0m WARNING 09-16 23:54:16 [topk_topp_sampler.py:69] FlashInfer is not available.\n"
    "\x1b[36m(TaskRunner pid=2)\x1b[0m [prompt] <|im_start|>user<img>\n"
    "WARNING 09-16 23:59:59 [later] after validation began: not start-up\n")


def test_a_logs_start_up_runs_from_its_launch_to_the_last_timestamp_before_validation():
    """Launch 23:52:26 (the file name's 0916_235226); the last stamp before the first `[prompt]` is vLLM's
    23:54:16 (glog's [W916 23:53:31 and Ray's 23:52:40 come earlier; 23:59:59 comes after): 110 s. The card's
    total memory is verl's 47.37 GB. A name without a launch time, or a log without a stamp: None."""
    from ttrl_bench.results.author_timing import card_memory_gb, launch_time, startup_seconds

    name = "ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log"
    assert str(launch_time(name, 2025)) == "2025-09-16 23:52:26"
    assert startup_seconds(LOG_HEAD, name) == 110.0
    assert startup_seconds(LOG_HEAD.split("WARNING 09-16 23:54")[0], name) == 65.0  # then glog's 23:53:31
    assert launch_time("mathverse_20_OpenGVLab_InternVL3-8B_2e_0912_050407_old_prompt.log", 2025).hour == 5
    assert startup_seconds(LOG_HEAD, "no_time.log") is None and startup_seconds("no stamps\n", name) is None
    assert card_memory_gb(LOG_HEAD) == 47.37 and card_memory_gb("nothing") is None
