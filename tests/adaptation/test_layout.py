"""Rollout groups across processes (issue 23 finding 2): every GRPO preset's batch layout is valid at
planning time for the GPU counts the paper configs give it, and a process holding part of a prompt's
group (ECHO's 5-prompt generation batch on 2 of them; TTRV Table 6's one sample on 2) still votes on
the whole group, on the CPU with 2 gloo processes under the rules' launch command."""

from __future__ import annotations

import contextlib
import json
import subprocess

import pytest

from tests.support import REPO, free_ports
from ttrl_bench.adaptation.layout import batch_layout, check_votes, fit_to_samples
from ttrl_bench.adaptation.presets import resolve_method
from ttrl_bench.runs.launch import launcher

TWO_LAYOUTS_SCRIPT = """
import json, sys
from pathlib import Path
from ttrl_bench.adaptation.grpo import TestTimeAdaptation
from ttrl_bench.adaptation.presets import resolve_method
from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.models.loading import load_model
from ttrl_bench.runs.processes import end_processes, process_state
model_dir, data, out = map(Path, sys.argv[1:4])
tiny = {"num_generations": 4, "n_votes": 8, "max_completion_length": 3, "epochs": 1, "kl_beta": 0.0,
        "learning_rate": 1e-3, "warmup_ratio": 0.0}
runs = {
    # ECHO Table 5's layout: 5 prompts generated at once, one trained per step: 20 rollouts, 10 per process
    "echo": (resolve_method("echo", {**tiny, "generation_batch_size": 5 * 4}), 5),
    # TTRV Table 6: one sample (4 prompts per step shrink to 1): 4 trained rollouts, 2 per process
    "ttrv": (resolve_method("ttrv", tiny), 1),
}
result = {}
for name, (spec, n) in runs.items():
    model, processor = load_model(str(model_dir), dtype="fp32")
    adaptation = TestTimeAdaptation(model, processor, load_manifest(data, "test").head(n), data, spec, out / name, 0)
    log = adaptation.run()
    accelerator = adaptation.trainer.accelerator
    result[name] = {"votes": list(log["votes"]), "steps": log.attrs["optimizer_steps"], "rounds": len(log),
                    "distributed": accelerator.distributed_type.value, "sync_each_batch": accelerator.gradient_state.plugin_kwargs.get(
                        "sync_each_batch", False), "accumulation": adaptation.trainer.args.gradient_accumulation_steps}
open(f"result-{process_state().process_index}.json", "w").write(json.dumps(result))
end_processes()  # as the CLI does: a live gloo group at exit can abort the process (issue 52)
"""


@pytest.mark.workflow
def test_groups_split_across_processes_vote_on_the_whole_group(demo_data, tiny_model_dir, tmp_path):
    """ECHO: 5 prompts x 4 trained = 20 rollouts per generation batch, 10 per process: the third prompt's
    group is split 2 + 2; every group still votes on its 8 rollouts, 5 steps of one prompt each, one
    generation round. TTRV Table 6: one sample's 4 trained rollouts, 2 per process, 8 votes, one step.
    Before issue 23 both stopped at the first generation ("needs each process to hold whole groups")."""
    script = tmp_path / "layouts.py"
    script.write_text(TWO_LAYOUTS_SCRIPT)
    command = launcher(2, port=free_ports()[0]).split()[:-2]
    result = subprocess.run(command + [str(script), str(tiny_model_dir), str(demo_data), str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        values = json.loads((tmp_path / f"result-{rank}.json").read_text())
        # ECHO's micro-batch of 1: 4 / (1 x 2) = 2 accumulated micro-batches, each one's gradients reduced
        # (issue 23 finding 4: sync_each_batch; under FSDP2 no unsharded gradients held across micro-batches).
        # On the CPU accelerate runs the rules' --use_fsdp launch as MULTI_CPU (gloo, DDP): it selects FSDP
        # only for GPU-type devices (accelerate state.py ~985-1013), so FSDP2 itself is shown on a GPU only.
        assert values["echo"] == {"votes": [8], "steps": 5, "rounds": 1, "distributed": "MULTI_CPU",
                                  "sync_each_batch": True, "accumulation": 2}
        assert values["ttrv"] == {"votes": [8], "steps": 1, "rounds": 1, "distributed": "MULTI_CPU",
                                  "sync_each_batch": True, "accumulation": 1}


def _config_jobs():
    """(config file, model, method, GPUs, adaptation samples) of every GRPO job the paper and demo
    configs can plan (enabled or not), at its `models.<name>.gpus` or every GPU count the plan may
    choose (plan/cost.py GPU_COUNTS), the hyper-parameters resolved as the rules do."""
    import yaml

    from ttrl_bench.adaptation.presets import is_per_sample, method_task, resolve_method
    from ttrl_bench.plan.cost import GPU_COUNTS

    for path in sorted((REPO / "config").glob("*.yaml")):
        config = yaml.safe_load(path.read_text())
        adaptation = config.get("adaptation", {})
        blocks = [{}] + list(config.get("experiments", {}).values())
        for block in blocks:
            n = block.get("n_samples", adaptation.get("n_samples", 20))
            for model in block.get("models", list(config["models"])):
                entry = config["models"][model]
                for method in block.get("methods", config["methods"]):
                    spec = resolve_method(method, {"rollout_backend": adaptation.get("rollout_backend", "auto"),
                                                   **adaptation.get("hyperparameters", {}).get(method_task(method), {})},
                                          adaptation.get("method_overrides", {}).get(method))
                    if spec is None or "objective" in spec:
                        continue  # zero-shot; the Appendix C baselines (baselines.py) run no GRPO layout
                    samples = 1 if is_per_sample(method) else (10_000 if n == "all" else n)
                    for gpus in [entry["gpus"]] if "gpus" in entry else GPU_COUNTS:
                        yield path.name, model, method, gpus, samples, spec["hyperparameters"]


def test_every_configured_grpo_job_has_a_batch_layout():
    """The dry run's check (adaptation/layout.py plan_batch_layout) on every job of config/*.yaml:
    none is refused at every GPU count the plan may choose. Worked by hand: ECHO (Table 5: 5 prompts x 32 trained, 64 votes, micro-batch 1)
    on 4 GPUs, 160 rollouts = 40 per process, the second prompt's group split 8 + 24 across the first
    two; 32 per step / (1 x 4) = 8 accumulation steps. TTRV Table 6 on InternVL2.5-4B (2 GPUs): one
    sample, 16 trained rollouts, 8 per process; the authors' micro-batch 2, 16 / (2 x 2) = 4 accumulation steps."""
    from ttrl_bench.adaptation.layout import plan_batch_layout
    from ttrl_bench.adaptation.presets import resolve_method

    jobs = list(_config_jobs())
    layouts = {}
    for job in jobs:  # some GPU counts are refused (4 completions a step on 8 GPUs): the plan skips them
        with contextlib.suppress(ValueError):
            layouts[job[:5]] = plan_batch_layout(job[5], job[3], job[4])
    runnable = lambda keys: {(k[0], k[1], k[2], k[4]) for k in keys}  # noqa: E731
    assert runnable(layouts) == runnable(jobs)  # every job has a GPU count whose layout runs
    assert {"echo.yaml", "ttrv.yaml", "vr-ttrl.yaml", "dare.yaml", "config.yaml"} <= {job[0] for job in jobs}
    assert layouts["echo.yaml", "qwen2.5-vl-7b", "echo", 4, 10_000] == {
        "per_device_train_batch_size": 1, "gradient_accumulation_steps": 8, "generation_batch_size": 160}
    assert layouts["ttrv.yaml", "internvl2.5-4b", "ttrv", 2, 1] == {
        "per_device_train_batch_size": 2, "gradient_accumulation_steps": 4, "generation_batch_size": 16}
    hp = resolve_method("ttrv")["hyperparameters"]
    with pytest.raises(ValueError, match="n_votes = 24 must be a multiple of num_generations = 16"):
        plan_batch_layout({**hp, "n_votes": 24}, 1, 20)
    with pytest.raises(ValueError, match="micro_batch_size 3"):
        plan_batch_layout({**hp, "micro_batch_size": 3}, 4, 20)


# --- adaptation/layout.py worked by hand (issue 39): the batch fields, their defaults, and every refusal's message ---

KEY = "adaptation.hyperparameters.<task>"


def _whole(layout: dict) -> dict:
    """GRPOConfig's batch fields are whole numbers (TRL takes them in range() and %): ints, not floats."""
    assert all(type(v) is int for v in layout.values()), layout
    return layout


def test_batch_layouts_of_the_presets_worked_by_hand():
    """- TTRV (the authors' logs: 1 prompt x 16 trained a step, micro-batch 2, a round of 4 prompts = 64) on 4 GPUs:
      micro min(2, 16 // 4 = 4) = 2, 16 / (2 x 4) = 2 accumulations, generation 64.
    - TTRV Appendix A (8 prompts x 32 a step, micro 4, no generation batch) on 2 GPUs: 256 a step, micro min(4, 128)
      = 4, 256 / (4 x 2) = 32 accumulations; generation by default 32 x min(2 processes, 8 prompts) = 64, which
      divides the step's 256.
    - VR-TTRL (8 rollouts, micro 4) on 4 GPUs: micro min(4, 8 // 4 = 2) = 2, 8 / 8 = 1, generation 8 x min(4, 1) = 8;
      on 8 GPUs: micro min(4, max(1, 1)) = 1, one accumulation, generation 8.
    - the bare minimum (4 rollouts; no prompts_per_step, micro_batch_size or generation_batch_size) on the default one
      process: micro = the 4 rollouts, 1 accumulation, one group generated; on 2: micro 2, generation 4 x min(2, 1) = 4."""
    ttrv = {"num_generations": 16, "prompts_per_step": 1, "micro_batch_size": 2, "generation_batch_size": 64}
    assert _whole(batch_layout(ttrv, 4)) == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2,
                                             "generation_batch_size": 64}
    appendix = {"num_generations": 32, "prompts_per_step": 8, "micro_batch_size": 4, "generation_batch_size": None}
    assert _whole(batch_layout(appendix, 2)) == {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 32,
                                                 "generation_batch_size": 64}
    vr = {"num_generations": 8, "prompts_per_step": 1, "micro_batch_size": 4}
    assert _whole(batch_layout(vr, 4)) == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
                                           "generation_batch_size": 8}
    assert _whole(batch_layout(vr, 8)) == {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 1,
                                           "generation_batch_size": 8}
    assert _whole(batch_layout({"num_generations": 4})) == {"per_device_train_batch_size": 4,
                                                           "gradient_accumulation_steps": 1, "generation_batch_size": 4}
    assert _whole(batch_layout({"num_generations": 4}, 2)) == {"per_device_train_batch_size": 2,
                                                              "gradient_accumulation_steps": 1, "generation_batch_size": 4}
    # the presets themselves resolve to the first three
    assert batch_layout(resolve_method("ttrv")["hyperparameters"], 4) == batch_layout(ttrv, 4)
    assert batch_layout(resolve_method("ttrv-appendix-a")["hyperparameters"], 2) == batch_layout(appendix, 2)
    assert batch_layout(resolve_method("vr-ttrl")["hyperparameters"], 8) == batch_layout(vr, 8)


def test_batch_layouts_that_cannot_run_are_refused_with_the_numbers():
    """- VR-TTRL's 8 rollouts a step on 16 GPUs: micro max(1, 0) = 1, 8 is not a multiple of 1 x 16; on 3 GPUs:
      micro min(4, 8 // 3 = 2) = 2, 8 is not a multiple of 2 x 3.
    - a generation batch of 24 with 16 rollouts a prompt: not a multiple of 16 (nor dividing or divided by 16).
    - half a group (2 of 4 rollouts) generated at a time, though 2 divides the 8 of a step and micro 2 x 1: not a
      multiple of num_generations 4.
    - one 4-rollout group generated at a time for a step of 4 prompts on 2 processes with micro 4: 4 is not a multiple
      of 4 x 2, though it divides the step's 16.
    - 8 rollouts a prompt, 2 prompts a step (16), generation 24 = 3 groups: neither divides nor is divided by 16;
      32 (2 steps) and 8 (half a step) are fine."""
    vr = {"num_generations": 8, "prompts_per_step": 1, "micro_batch_size": 4}
    with pytest.raises(ValueError) as err:
        batch_layout(vr, 16)
    assert str(err.value) == (f"{KEY}: prompts_per_step x num_generations = 8 completions per step is not a multiple "
                              "of micro_batch_size 1 x 16 process(es)")
    with pytest.raises(ValueError, match=r"= 8 completions per step is not a multiple of micro_batch_size 2 x 3 process"):
        batch_layout(vr, 3)
    with pytest.raises(ValueError) as err:
        batch_layout({"num_generations": 16, "micro_batch_size": 2, "generation_batch_size": 24}, 1)
    assert str(err.value) == (f"{KEY}.generation_batch_size = 24 must be a multiple of num_generations 16 and of "
                              "micro_batch_size 2 x 1 process(es), and divide or be divided by the 16 completions of one step")
    with pytest.raises(ValueError, match=r"generation_batch_size = 2 must be a multiple of num_generations 4 "):
        batch_layout({"num_generations": 4, "prompts_per_step": 2, "micro_batch_size": 2, "generation_batch_size": 2}, 1)
    with pytest.raises(ValueError, match=r"generation_batch_size = 4 .* micro_batch_size 4 x 2 process\(es\)"):
        batch_layout({"num_generations": 4, "prompts_per_step": 4, "micro_batch_size": 4, "generation_batch_size": 4}, 2)
    two_prompts = {"num_generations": 8, "prompts_per_step": 2, "micro_batch_size": 2}
    with pytest.raises(ValueError, match=r"= 24 must .* the 16 completions of one step"):
        batch_layout({**two_prompts, "generation_batch_size": 24}, 1)
    assert batch_layout({**two_prompts, "generation_batch_size": 32}, 1)["generation_batch_size"] == 32
    assert batch_layout({**two_prompts, "generation_batch_size": 8}, 1)["generation_batch_size"] == 8


def test_votes_are_a_whole_multiple_of_the_trained_rollouts():
    """TTRV: 32 votes, 16 trained -> 32; without n_votes every rollout votes (16); ECHO's authors' scripts: 32 votes =
    32 trained (geometry3k.sh:27-28), allowed; 24 of 16 (1.5 each) and 8 of 16 (fewer votes than trained) refused."""
    assert check_votes({"num_generations": 16, "n_votes": 32}) == 32
    assert check_votes({"num_generations": 16}) == 16
    assert check_votes({"num_generations": 16, "n_votes": None}) == 16
    assert check_votes({"num_generations": 32, "n_votes": 32}) == 32
    for n_votes in (24, 8):
        with pytest.raises(ValueError) as err:
            check_votes({"num_generations": 16, "n_votes": n_votes})
        assert str(err.value) == (f"adaptation.hyperparameters.<task>.n_votes = {n_votes} must be a multiple of "
                                  "num_generations = 16: the trained rollouts are the first of the votes, each with the "
                                  "same number of extras")


def test_fewer_samples_than_a_step_or_a_generation_batch_shrink_them_with_a_warning(caplog):
    """- TTRV Appendix A's 8 prompts a step on TTRV Table 6's one sample: 1 prompt a step (warned).
    - ECHO Table 5 (5 prompts x 32 generated at once, 1 prompt a step) on 3 samples: 160 > 3 x 32, so the batch
      shrinks to the whole steps they fill, 32 x 3 = 96; on 1 sample to 32; on exactly 5 it is kept, unwarned.
    - 4 rollouts, 2 prompts a step, a generation batch of 64: 6 samples fill 6 // 2 = 3 steps of 8 = 24; 3 samples
      1 step = 8; 3 samples with a batch of 12 (= 3 x 4) are kept (the layout then refuses 12 against a step of 8).
    - no prompts_per_step (1): 3 samples fill 3 steps of 4 = 12; one sample is no fewer than its one prompt."""
    with caplog.at_level("WARNING", logger="ttrl_bench.adaptation.layout"):
        assert fit_to_samples({"num_generations": 32, "prompts_per_step": 8, "generation_batch_size": None}, 1) == \
            {"num_generations": 32, "prompts_per_step": 1, "generation_batch_size": None}
        assert caplog.messages == ["1 adaptation samples < prompts_per_step 8: 1 prompt(s) per step"]
        caplog.clear()
        echo = {"num_generations": 32, "prompts_per_step": 1, "generation_batch_size": 160}
        assert fit_to_samples(echo, 3) == {**echo, "generation_batch_size": 96}
        assert fit_to_samples(echo, 1) == {**echo, "generation_batch_size": 32}
        assert caplog.messages == ["3 adaptation samples fill no generation batch of 160 completions: 96",
                                   "1 adaptation samples fill no generation batch of 160 completions: 32"]
        caplog.clear()
        assert fit_to_samples(echo, 5) == echo
        assert fit_to_samples({"num_generations": 32, "prompts_per_step": 8}, 8) == {"num_generations": 32,
                                                                                    "prompts_per_step": 8}
        assert caplog.messages == []  # as many samples as the batch or the step holds: nothing to shrink
        two = {"num_generations": 4, "prompts_per_step": 2, "generation_batch_size": 64}
        assert fit_to_samples(two, 6)["generation_batch_size"] == 24
        assert fit_to_samples(two, 3)["generation_batch_size"] == 8
        assert fit_to_samples({**two, "generation_batch_size": 12}, 3)["generation_batch_size"] == 12
        assert fit_to_samples({"num_generations": 4, "generation_batch_size": 64}, 3)["generation_batch_size"] == 12
        caplog.clear()
        assert fit_to_samples({"num_generations": 4}, 1) == {"num_generations": 4}
        assert caplog.messages == []
    assert all(type(fit_to_samples(two, n)["generation_batch_size"]) is int for n in (3, 6))


def test_plan_batch_layout_fits_checks_and_lays_out_in_that_order():
    """TTRV Table 6 (one sample) with Appendix A's 8 prompts x 32 on 2 GPUs: the step shrinks to 1 prompt (32), micro
    4, 32 / (4 x 2) = 4 accumulations, generation 32 x min(2, 1) = 32. ECHO's 160 on 3 samples and 4 GPUs: 96, micro
    1 (Table 5), 32 / 4 = 8. Votes are checked after the fit: 24 of 16 refused whatever the samples."""
    from ttrl_bench.adaptation.layout import plan_batch_layout

    appendix = resolve_method("ttrv-appendix-a")["hyperparameters"]
    assert plan_batch_layout(appendix, 2, 1) == {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 4,
                                                 "generation_batch_size": 32}
    echo = resolve_method("echo")["hyperparameters"]
    assert plan_batch_layout(echo, 4, 3) == {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 8,
                                             "generation_batch_size": 96}
    with pytest.raises(ValueError, match="n_votes = 24 must be a multiple of num_generations = 16"):
        plan_batch_layout({**resolve_method("ttrv")["hyperparameters"], "n_votes": 24}, 4, 20)
