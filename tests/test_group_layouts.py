"""Rollout groups across processes (issue 23 finding 2): every GRPO preset's batch layout is valid at
planning time for the GPU counts the paper configs give it, and a process holding part of a prompt's
group (ECHO's 5-prompt generation batch on 2 of them; TTRV Table 6's one sample on 2) still votes on
the whole group, on the CPU with 2 gloo processes under the rules' launch command."""

import contextlib
import json
import subprocess

import pytest

from conftest import REPO, free_ports
from ttrl_bench.runs.launch import launcher

TWO_LAYOUTS_SCRIPT = """
import json, sys
from pathlib import Path
from ttrl_bench.adaptation.grpo import TestTimeAdaptation
from ttrl_bench.adaptation.presets import resolve_method
from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.models.loading import load_model
from ttrl_bench.runs.processes import process_state
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
