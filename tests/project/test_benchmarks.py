"""The benchmark scripts run (quick mode) and print their tables, so they cannot rot."""

import os
import subprocess
import sys

import pytest

from tests.support import REPO


@pytest.mark.workflow
def test_benchmarks_quick_mode_prints_every_table(tmp_path):
    result = subprocess.run([sys.executable, "benchmarks/run.py", "--quick"], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "TTRL_BENCH_BENCHMARK_OUT": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("preprocessing", "restore", "generation", "store", "evaluation_memory", "workflow"):
        assert f"## {name}" in result.stdout
    assert "ratio decode / header" in result.stdout
    assert "ratio_disk_over_memory" in result.stdout


@pytest.mark.workflow
def test_the_gpu_check_rehearses_on_tiny_models(tmp_path):
    """benchmarks/gpu_check.sh --tiny part1 (issue 40): the lent-GPU check's jobs on tiny models on the CPU,
    rows under $OUT. TTRV and DARE on 4 samples at the tiny 2 prompts per step, 1 epoch: 2 optimizer steps
    each; VR-TTRL on 2 samples x 1 update: 2; greedy evaluation of 16 items (the tiny cap). Part 2 needs
    vLLM, which this venv has not: it says so and exits 3."""
    import pandas as pd
    import trl

    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "TTRL_BENCH_MODELS": str(tmp_path / "models")}
    result = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--tiny", "part1"], cwd=REPO, capture_output=True,
                            text=True, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # each model built once, by the first call, and reused by the three job calls
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["tiny-internvl", "tiny-qwen2.5-vl"]
    assert result.stdout.count(": reusing ") == 3
    rows = pd.concat([pd.read_csv(tmp_path / f"gpu-cpu-tiny-part1-{tag}.csv") for tag in ("ttrv", "vr-ttrl", "dare")])
    table = rows.set_index("method")
    assert table.loc[["ttrv", "vr-ttrl", "dare"], "optimizer_steps"].tolist() == [2, 2, 2]
    assert table.loc[["ttrv", "vr-ttrl", "dare"], "answer_tokens"].tolist() == [16, 128, 16]
    assert table.loc["greedy-eval", "eval_samples"] == 16 and table.loc["greedy-eval", "eval_samples_per_s"] > 0
    for method in ("ttrv", "vr-ttrl", "dare"):
        # seconds per step from TRL's own step_time (the trainer's construction not included)
        assert 0 < table.loc[method, "s_per_step"] < table.loc[method, "adapt_s"]
        assert 0.0 <= table.loc[method, "weights_changed"] <= 1.0  # random weights: often no learning signal
    assert set(rows["card"]) == {"cpu"} and set(rows["trl"]) == {trl.__version__}
    assert set(rows["rollout_backend"]) == {"hf"}  # no CUDA GPU here
    assert "card cpu" in (tmp_path / "versions.txt").read_text()
    part2 = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--tiny", "part2"], cwd=REPO, capture_output=True,
                           text=True, env=env)
    assert part2.returncode == 3 and "vLLM does not import here" in part2.stdout


def test_gpu_benchmark_predicts_each_job_and_skips_what_cannot_fit():
    """The plan's prediction beside each measured peak (issue 24): the H100 probe's shape (InternVL3-2B,
    32 rollouts x 32 new tokens, 5 tiles, fp32 master weights, vision trained) measured 66.6 GB
    (gpu-probe.md); the prediction must be within 10% of it. On a 40 GB GPU that job is skipped, on
    an 80 GB one it runs."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import gpu

    hp = {"max_completion_length": 32, "micro_batch_size": 32, "freeze_vision": False}
    predicted = gpu.predicted_peak_gb("internvl3-2b", "internvl", "ttrv", hp)
    assert predicted == pytest.approx(66.6, rel=0.10)
    assert gpu.skip_reason(predicted, 80.0) is None
    assert gpu.skip_reason(predicted, 40.0).startswith(f"skipped: predicted peak {predicted:.1f} GB > the GPU's 40.0 GB")
    assert gpu.predicted_peak_gb("tiny-internvl", "internvl", "ttrv", hp) != gpu.predicted_peak_gb(
        "tiny-internvl", "internvl", "ttrv", hp)  # NaN: the plan ships no config of the tiny models


def test_the_gpu_checks_predictions_come_from_shipped_traces(tmp_path, monkeypatch):
    """Part 1's adaptation jobs (gpu_check.sh: InternVL3-2B ttrv and dare at 16 answer tokens, Qwen2.5-VL-3B
    vr-ttrl at 128, 8 rollouts) are predicted from plan/data/traces.json: with an empty local cache and tracing
    refused, each prediction still comes (a fresh GPU machine would otherwise trace each on the spot)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import gpu
    from ttrl_bench.plan import memory

    monkeypatch.setenv("TTRL_BENCH_TRACE_CACHE", str(tmp_path))
    monkeypatch.setattr(memory, "trace_step", lambda *a, **k: pytest.fail("traced on the spot"))
    mcq = {"max_completion_length": 16, "epochs": 1, "rollout_backend": "hf"}
    for name, method, hp in [("internvl3-2b", "ttrv", mcq), ("internvl3-2b", "dare", mcq),
                             ("qwen2.5-vl-3b", "vr-ttrl", {"max_completion_length": 128, "epochs": 1,
                                                           "num_generations": 8})]:
        assert gpu.predicted_peak_gb(name, gpu.model_family(name), method, hp) > 0


def test_parser_gap_scores_logged_responses_by_both_parsers(tmp_path):
    """Two logged pairs in the authors' log format (Ray's prefix, colour codes) for DTD's test item "0" (gold C,
    "polka-dotted / knitted / bumpy / woven"): "]C" is C to their parser (a standalone letter) and nothing to
    ours; " C. bumpy" is C to both. A prompt of no item of theirs is left out."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import parser_gap

    from ttrl_bench.datasets import authors_items

    item = authors_items.load_list("dtd", "test")[0]
    text = item["prompt"].split("<image>", 1)[1]
    prefix = "\x1b[36m(TaskRunner pid=1)\x1b[0m "
    blocks = [f"[prompt] <|im_start|>user<img><IMG_CONTEXT></img>{t}<|im_end|><|im_start|>assistant\n"
              f"[response] {r}<|im_end|>\n[label_accuracy] 1.0\n" for t, r in
              ((text, "]C"), (text, " C. bumpy"), (" \nnot an item", "C"))]
    log = "".join(prefix + line + "\n" for line in "".join(blocks).splitlines())
    (tmp_path / "dtd_20_OpenGVLab_InternVL3-2B_2e_0101_000000.log").write_text(log)
    table = parser_gap.gap(tmp_path)
    assert table.to_dict("records") == [{"dataset": "dtd", "responses": 2, "ours": 50.0, "theirs": 100.0, "differ": 1,
                                         "theirs - ours": 50.0}]


@pytest.mark.workflow  # about 30 s: the cost model over 71 logs
def test_plan_vs_logs_replays_every_shipped_log_with_timing(tmp_path):
    """benchmarks/plan_vs_logs.py without the authors' raw logs (a repository path that does not exist): every log
    of author_runs.csv gets a row with the median start-up and the A6000, and the summary lines are printed."""
    out = tmp_path / "replay.md"
    result = subprocess.run([sys.executable, "benchmarks/plan_vs_logs.py", "--repo", str(tmp_path / "none"),
                             "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ") and line.endswith(" |")]
    assert len(rows) == 1 + 71 + 1 + 5  # the header and the 71 logs; the held-out table's header and 5 models
    assert "not fetched: start-up = the median, card = A6000" in out.read_text()
    assert "- adaptation, start-up included: median" in result.stdout and "evaluation 71/71" in result.stdout
    assert "- fitted on these logs (fit()): FLOP_RATE_FACTOR " in result.stdout  # and cost.py's beside them
    assert "- leave one model out: median" in result.stdout and "- leave one log out: median" in result.stdout


def test_plan_vs_logs_held_out_refits_without_the_group_and_predicts_it_with_the_refit():
    """held_out() on four made-up logs: group a's minutes are exactly FLOPs / 2 + traffic / 5 GB/s + start-up, group
    b's at 4 and 10 GB/s (all four points on fit()'s grid). Leaving b out fits a alone: 2.0, 5.0; b's first log is
    then predicted 40 / 2 + 20 / 5 + start-up = 24 + 2.15 min against 12 + 2.15 measured; its limit, MARGIN x
    (the slowest terms, here 1.5x: 36 + the slowest start-up 6.25) = 84.5 min, covers it."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import pandas as pd
    import plan_vs_logs
    from ttrl_bench.plan.cost import MARGIN, STARTUP_MIN, STARTUP_SLOWEST_MIN

    assert (MARGIN, STARTUP_MIN * 60, STARTUP_SLOWEST_MIN * 60) == (2.0, 129, 375)  # the numbers worked above
    flop, traffic = [20.0, 40.0, 40.0, 80.0], [10.0, 50.0, 20.0, 100.0]
    logs = pd.DataFrame({"model": ["a", "a", "b", "b"], "adapt_flop": flop, "adapt_traffic": traffic,
                         "adapt_flop_slow": [1.5 * f for f in flop], "adapt_traffic_slow": [1.5 * t for t in traffic],
                         # a: 20/2 + 10/5, 40/2 + 50/5; b: 40/4 + 20/10, 80/4 + 100/10
                         "adapt_meas": [m + STARTUP_MIN for m in (12.0, 30.0, 12.0, 30.0)]})
    (both,) = plan_vs_logs.fit(logs)
    assert both not in ((2.0, 5.0), (4.0, 10.0))  # all four logs: neither group's constants
    out = plan_vs_logs.held_out(logs, logs["model"])
    # each group predicted with the other's constants (exact grid points: equality)
    assert out[["factor", "bandwidth"]].values.tolist() == [[4.0, 10.0]] * 2 + [[2.0, 5.0]] * 2
    b_first = out.iloc[2]
    # 26.15 / 14.15; the float sums' rounding is ~1e-15 relative
    assert b_first["pred"] == pytest.approx(24 + 129 / 60, rel=1e-12)
    assert b_first["ratio"] == pytest.approx((24 + 129 / 60) / (12 + 129 / 60), rel=1e-12) and b_first["covered"]
    # a's second log with b's 4, 10 GB/s: 40/4 + 50/10 + 2.15 = 17.15 min against 32.15; its limit
    # 2 x (60/4 + 75/10 + 6.25) = 57.5 covers it
    assert out.iloc[1]["ratio"] == pytest.approx((15 + 129 / 60) / (30 + 129 / 60), rel=1e-12) and out.iloc[1]["covered"]
