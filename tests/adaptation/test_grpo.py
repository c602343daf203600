"""adaptation/grpo.py: what TestTimeAdaptation hands its parts (the trainer, vLLM, the model: stand-ins),
what a run logs, starting over, the rollout backend `auto` picks, and the adaptation dataset's prompts. Every
expected value is worked out by hand in the test's docstring or comments."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from ttrl_bench.adaptation import grpo
from PIL import Image
from ttrl_bench.adaptation.utils import ProgressLog


class _Recorded:
    """What the stand-ins were called with."""

    def __init__(self):
        self.frozen, self.drop_path, self.rewards, self.forbidden = [], [], [], []
        self.config, self.trainer, self.collapsed, self.probed = None, None, [], []


def _build(monkeypatch, hp: dict, method: dict, task=None) -> tuple[grpo.TestTimeAdaptation, _Recorded, object]:
    """A TestTimeAdaptation on two samples with every heavy part stood in for: the model (a config only), the
    processor (a 100-token tokenizer), the trainer, GRPOConfig, vLLM's prompt fixes. GroupReward is the real one,
    its arguments recorded."""
    seen = _Recorded()
    model = SimpleNamespace(config=SimpleNamespace(model_type="qwen2_5_vl", image_token_id=151655))
    processor = SimpleNamespace(tokenizer=[None] * 100)

    class Reward(grpo.GroupReward):
        def __init__(self, *args, **kwargs):
            seen.rewards.append((args, kwargs))
            super().__init__(*args, **kwargs)

    class Trainer:
        def __init__(self, **kwargs):
            seen.trainer = kwargs
            self.train_dataset = kwargs["train_dataset"]
            self.vllm_generation = SimpleNamespace(llm="the engine")

    def drop_path(model_, rate):
        seen.drop_path.append((model_, rate))
        return 7

    def config(*args):
        seen.config = args
        return "grpo config"

    def forbidden(*args):
        seen.forbidden.append(args)
        return {"forbidden": args[0]}

    monkeypatch.setattr(grpo, "freeze_vision_encoder", lambda m: seen.frozen.append(m) or 3)
    monkeypatch.setattr(grpo, "add_vision_drop_path", drop_path)
    monkeypatch.setattr(grpo, "GroupReward", Reward)
    monkeypatch.setattr(grpo, "unsampleable_token_ids", lambda cfg, tok: [151655, 151656])
    monkeypatch.setattr(grpo, "forbidden_token_kwargs", forbidden)
    monkeypatch.setattr(grpo, "rollout_backend_and_reason",
                        lambda choice: ({"auto": "hf", "hf": "hf", "vllm": "vllm"}[choice], f"{choice} (test)"))
    monkeypatch.setattr(grpo, "grpo_vllm_environment", lambda settings: {"TTRL_SURVIVOR_VLLM": repr(settings)})
    monkeypatch.setattr(grpo, "grpo_config", config)
    monkeypatch.setattr(grpo, "adaptation_dataset",
                        lambda manifest, root: [{"image": f"{root}/{manifest['image'][0]}"}])
    monkeypatch.setattr(grpo, "lora_config", lambda lora: ("lora", lora))
    monkeypatch.setattr(grpo, "TestTimeGRPOTrainer", Trainer)
    monkeypatch.setattr(grpo, "image_span_token_ids", lambda proc: [151652, 151653] if proc is processor else None)
    monkeypatch.setattr(grpo, "placeholder_token_ids", lambda cfg: [151655] if cfg is model.config else None)
    monkeypatch.setattr(grpo, "collapse_prompts_before_generate", lambda *a: seen.collapsed.append(a))
    monkeypatch.setattr(grpo, "probe_colocated_expansion", lambda *a: seen.probed.append(a))
    monkeypatch.setenv("TTRL_SURVIVOR_VLLM", "untouched")
    manifest = pd.DataFrame({"id": ["s0", "s1"], "prompt": ["What is shown?", "Which?"], "image": ["a.png", "b.png"]})
    adaptation = grpo.TestTimeAdaptation(model, processor, manifest, "root", {**method, "hyperparameters": hp},
                                         "out", 5, task)
    return adaptation, seen, model


def test_test_time_adaptation_hands_every_setting_of_a_full_block_to_its_parts(monkeypatch, caplog):
    """A block that sets everything: vLLM rollouts, verl's advantages, micro-batch 2 of 4 rollouts, 8 votes, the
    vision tower frozen (qwen2_5_vl under freeze_vision true) with drop path 0.1 on 7 branches, kl_clamp 10, a
    LoRA, and the method's own update, vLLM settings and reward parameters. Each reaches its part:
    GroupReward(reward, params, 4, task, micro 2, reward_grid False: verl takes the rewards off the 2^-16 grid);
    the trainer gets the block's values; the vLLM environment of the method's settings; the engine gets the
    prompt fixes with the model's image token, the span ids and the first sample's image."""
    from ttrl_bench.evaluation.tasks import TASKS

    hp = {"num_generations": 4, "n_votes": 8, "temperature": 0.7, "micro_batch_size": 2, "freeze_vision": True,
          "vision_drop_path": 0.1, "advantages": "verl", "kl_clamp": 10.0, "decay_every_parameter": True,
          "trained_votes": "verl", "token_confidence": "sampled", "lr_schedule_per": "round",
          "lora": {"rank": 8, "alpha": 16}, "rollout_backend": "vllm"}
    method = {"reward": "majority_vote", "reward_params": {"unparsable": "no_reward"}, "update": {"rule": "echo"},
              "vllm": {"gpu_memory_utilization": 0.3}, "image_size_bound": {"longest_edge": 784}}
    task = TASKS["math"]
    with caplog.at_level(logging.INFO, logger="ttrl_bench.adaptation.grpo"):
        adaptation, seen, model = _build(monkeypatch, hp, method, task)
    assert seen.frozen == [model]
    assert "vision encoder frozen; 3 adapter parameters in its tower train" in caplog.messages
    assert seen.drop_path == [(model, 0.1)]
    assert "vision drop path 0.1: 7 residual branches hooked" in caplog.messages
    assert seen.rewards == [(("majority_vote", {"unparsable": "no_reward"}, 4, task, 2), {"reward_grid": False})]
    assert seen.forbidden == [("vllm", [151655, 151656], 100)]
    assert seen.config == ("out", hp, 5, {"forbidden": "vllm"}, {"gpu_memory_utilization": 0.3})
    assert grpo.os.environ["TTRL_SURVIVOR_VLLM"] == "{'gpu_memory_utilization': 0.3}"
    t = seen.trainer
    assert t["update"] == {"rule": "echo"} and t["model"] is model and t["processing_class"] is adaptation.processor
    assert t["reward_funcs"] == [adaptation.reward] and t["callbacks"] == [adaptation.progress]
    assert (t["args"], t["train_dataset"]) == ("grpo config", [{"image": "root/a.png"}])
    assert (t["n_votes"], t["forbidden_token_ids"], t["lr_schedule_per"], t["advantages"]) == (
        8, [151655, 151656], "round", "verl")
    assert (t["kl_clamp"], t["decay_every_parameter"], t["trained_votes"], t["token_confidence"]) == (
        10.0, True, "verl", "sampled")
    assert t["peft_config"] == ("lora", {"rank": 8, "alpha": 16})
    assert adaptation.reward.policy == (model, adaptation.processor)
    # the image bound the job gave the processor reaches vLLM's requests (models/families.py image_size_bound)
    assert seen.collapsed == [("the engine", 151655, [151652, 151653], {"longest_edge": 784})]
    assert seen.probed == [("the engine", adaptation.processor, "root/a.png", [151655], {"longest_edge": 784})]


def test_test_time_adaptation_of_a_bare_block_takes_every_default(monkeypatch, caplog):
    """A block with only num_generations 4 and a temperature, and a method with only its reward: nothing frozen
    (freeze_vision defaults to false; qwen2_5_vl), no drop path, a micro-batch of the 4 rollouts, reward
    parameters {} and TRL's reward grid; transformers' rollouts ("auto" without vLLM on a GPU: hf), the
    environment untouched, no prompt fixes; the trainer's defaults: no update, 4 votes, per-step schedule, TRL's
    advantages, no clamp, no decay of every parameter, the first votes trained, top-k confidence, no LoRA."""
    with caplog.at_level(logging.INFO, logger="ttrl_bench.adaptation.grpo"):
        adaptation, seen, model = _build(monkeypatch, {"num_generations": 4, "temperature": 1.0},
                                         {"reward": "majority_vote"})
    assert (seen.frozen, seen.drop_path, seen.collapsed, seen.probed) == ([], [], [], [])
    assert not [m for m in caplog.messages if "drop path" in m or "frozen" in m]
    assert seen.rewards == [(("majority_vote", {}, 4, None, 4), {"reward_grid": True})]
    assert seen.forbidden == [("hf", [151655, 151656], 100)]
    assert seen.config[3:] == ({"forbidden": "hf"}, None)
    assert grpo.os.environ["TTRL_SURVIVOR_VLLM"] == "untouched"
    t = seen.trainer
    assert t["update"] is None and t["n_votes"] == 4
    assert (t["lr_schedule_per"], t["advantages"], t["kl_clamp"], t["decay_every_parameter"]) == ("step", "trl", None,
                                                                                                    False)
    assert (t["trained_votes"], t["token_confidence"], t["peft_config"]) == ("first", "top_k", ("lora", None))
    # a new reward per run (_start_over) is built with the same arguments
    adaptation.new_reward()
    assert seen.rewards[1] == seen.rewards[0]


def test_freeze_vision_authors_freezes_internvls_tower_alone(monkeypatch, caplog):
    """freeze_vision "authors" is the TTRV authors' code: InternVL's vision encoder frozen (model type starting
    with "internvl", models/families.py TTRV_AUTHORS_FROZEN_VISION), Qwen2.5-VL's left to train. The frozen tower
    is logged with the count freeze_vision_encoder returns (stood in: 3)."""
    frozen = []
    monkeypatch.setattr(grpo, "freeze_vision_encoder", lambda m: frozen.append(m) or 3)
    internvl = SimpleNamespace(config=SimpleNamespace(model_type="internvl_chat"))
    qwen = SimpleNamespace(config=SimpleNamespace(model_type="qwen2_5_vl"))
    with caplog.at_level(logging.INFO, logger="ttrl_bench.adaptation.grpo"):
        grpo.freeze_vision_tower(internvl, "authors")
        grpo.freeze_vision_tower(qwen, "authors")
    assert frozen == [internvl]
    assert caplog.messages == ["vision encoder frozen; 3 adapter parameters in its tower train"]


def test_a_checkpoint_drop_path_must_be_resolved_by_the_plan_first(monkeypatch):
    """vision_drop_path "checkpoint" is resolved per model by the plan; the trainer refuses it by name."""
    with pytest.raises(ValueError) as err:
        _build(monkeypatch, {"num_generations": 4, "temperature": 1.0, "vision_drop_path": "checkpoint"},
               {"reward": "majority_vote"})
    assert str(err.value) == ("vision_drop_path: checkpoint is resolved per model by the plan (plan/resources.py "
                              "job_method_settings); give --method-json a rate")


def _ready_adaptation(monkeypatch, seen: dict, train_error: Exception | None = None) -> grpo.TestTimeAdaptation:
    """A TestTimeAdaptation as its constructor leaves it, built without it: a trainer whose `train` makes 3
    optimizer steps (or raises `train_error`), a reward that logged one round and one verification, a progress
    log of one step, temperature 0.9. set_seed, WeightSnapshot and _start_over are recorded."""

    class Model:
        def eval(self):
            seen["eval"] += 1

    class Trainer:
        args, state = SimpleNamespace(seed=11), SimpleNamespace(global_step=3)
        skipped_steps = 1  # one of the 3 had a non-finite gradient norm (trainer._get_grad_norm)

        def train(self):
            seen["train"] += 1
            if train_error is not None:
                raise train_error

    class Snapshot:  # changed_fraction: a quarter of the weights, an eighth once cast to bf16
        def __init__(self, model):
            seen["snapshots"].append(model)

        def changed_fraction(self, model, dtype=None):
            seen["measured"].append((model, dtype))
            return {None: 0.25, torch.bfloat16: 0.125}[dtype]

    monkeypatch.setattr(grpo, "set_seed", lambda seed, device_specific: seen["seeds"].append((seed, device_specific)))
    monkeypatch.setattr(grpo, "WeightSnapshot", Snapshot)
    adaptation = object.__new__(grpo.TestTimeAdaptation)
    adaptation.model, adaptation.processor, adaptation.trainer = Model(), "processor", Trainer()
    adaptation.hp, adaptation.runs = {"temperature": 0.9}, 0
    adaptation.reward = SimpleNamespace(records=[{"round": 0, "agreement": 0.5}], verifications=[{"sample": "s0"}])
    adaptation.progress = SimpleNamespace(losses=[0.5], learning_rates=[1e-6], step_times=[2.0])
    adaptation._start_over = lambda manifest, image_root: seen["starts"].append((manifest, image_root))
    return adaptation


def test_each_run_seeds_trains_and_logs_what_the_trainer_did(monkeypatch, caplog):
    """The first run trains on the constructor's manifest (no start-over), the second starts over on the one it is
    given; each seeds with the trainer's seed, per process (device_specific), and leaves the model in eval mode.
    The log: the reward's rounds, and as attrs 3 optimizer steps, the progress log, temperature 0.9, the
    verifications, the changed fraction against a snapshot taken before (0.25), and after the cast to bf16 (0.125)
    only where a save dtype is given. Logged: "3 optimizer steps changed 25.00% of the trainable weights"."""
    seen = {"eval": 0, "train": 0, "snapshots": [], "measured": [], "seeds": [], "starts": []}
    adaptation = _ready_adaptation(monkeypatch, seen)
    model = adaptation.model
    with caplog.at_level(logging.INFO, logger="ttrl_bench.adaptation.grpo"):
        first = adaptation.run()
    assert (adaptation.runs, seen["starts"], seen["train"], seen["eval"]) == (1, [], 1, 1)
    assert seen["seeds"] == [(11, True)] and seen["snapshots"] == [model]
    assert first.to_dict("records") == [{"round": 0, "agreement": 0.5}]
    assert first.attrs == {"optimizer_steps": 3, "losses": [0.5], "learning_rates": [1e-6], "step_times": [2.0],
                           "skipped_steps": 1, "temperature": 0.9, "verifications": [{"sample": "s0"}], "weights_changed": 0.25,
                           "weights_changed_saved": None}
    assert seen["measured"] == [(model, None)]
    assert caplog.messages == ["3 optimizer steps changed 25.00% of the trainable weights"]

    before = SimpleNamespace(changed_fraction=lambda m, dtype=None: {None: 0.5, torch.bfloat16: 0.375}[dtype]
                             if m is model else None)
    second = adaptation.run("manifest 2", "root 2", before=before, save_dtype=torch.bfloat16)
    assert (adaptation.runs, seen["starts"], seen["train"], seen["eval"]) == (2, [("manifest 2", "root 2")], 2, 2)
    assert seen["snapshots"] == [model] and seen["seeds"] == [(11, True), (11, True)]
    assert (second.attrs["weights_changed"], second.attrs["weights_changed_saved"]) == (0.5, 0.375)


def test_running_out_of_gpu_memory_is_a_memory_error_with_the_jobs_advice(monkeypatch):
    """torch's OutOfMemoryError in `train` becomes a MemoryError whose message out_of_memory_message writes from the
    model, the block and the error (stood in: it names all three), chained to the original error."""
    seen = {"eval": 0, "train": 0, "snapshots": [], "measured": [], "seeds": [], "starts": []}
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    adaptation = _ready_adaptation(monkeypatch, seen, oom)
    monkeypatch.setattr(grpo, "out_of_memory_message",
                        lambda model, hp, err: f"{model is adaptation.model} {hp} {err}")
    with pytest.raises(MemoryError) as err:
        adaptation.run()
    assert str(err.value) == "True {'temperature': 0.9} CUDA out of memory. Tried to allocate 2.00 GiB"
    assert err.value.__cause__ is oom


def test_adapt_builds_one_adaptation_runs_it_and_saves_in_the_save_dtype(monkeypatch):
    """adapt passes its arguments to TestTimeAdaptation in order, `before` and `save_dtype` to run, and saves the
    trainer's model with the processor to `save_to` in `save_dtype`, else in the model's own dtype (fp32 here);
    without `save_to` nothing is saved."""
    made, saved = [], []

    class Adaptation:
        def __init__(self, *args):
            made.append(args)
            self.trainer = "trainer"

        def run(self, **kwargs):
            made.append(kwargs)
            return "records"

    monkeypatch.setattr(grpo, "TestTimeAdaptation", Adaptation)
    monkeypatch.setattr(grpo, "save_adapted", lambda *args: saved.append(args))
    model = SimpleNamespace(dtype=torch.float32)
    got = grpo.adapt(model, "processor", "manifest", "root", "method", "out", 7, task="task",
                     save_dtype=torch.bfloat16, before="before", save_to="adapted")
    assert got == "records"
    assert made == [(model, "processor", "manifest", "root", "method", "out", 7, "task"),
                    {"before": "before", "save_dtype": torch.bfloat16}]
    assert saved == [("trainer", "processor", "adapted", torch.bfloat16)]
    grpo.adapt(model, "processor", "manifest", "root", "method", "out", 7, save_to="adapted")
    assert made[2:] == [(model, "processor", "manifest", "root", "method", "out", 7, None),
                        {"before": None, "save_dtype": None}]
    assert saved[1:] == [("trainer", "processor", "adapted", torch.float32)]
    grpo.adapt(model, "processor", "manifest", "root", "method", "out", 7)
    assert len(saved) == 2


def test_the_adaptation_dataset_puts_a_rows_system_prompt_first_and_keeps_its_question(tmp_path):
    from PIL import Image

    for name in ("a.png", "b.png"):
        Image.new("RGB", (4, 4)).save(tmp_path / name)
    (tmp_path / "c.png").write_bytes(b"not a png")
    manifest = pd.DataFrame({"id": ["s0", "s1", "s2"], "image": ["a.png", "b.png", "c.png"], "prompt": ["Q0", "Q1", "Q2"],
                             "system": ["Be brief.", None, None], "split": ["test"] * 3, "answer": ["A", "B", "C"]})
    dataset = grpo.adaptation_dataset(manifest, tmp_path)
    first, second = dataset[0], dataset[1]
    assert first["prompt"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q0"}]
    assert second["prompt"] == [{"role": "user", "content": "Q1"}]  # no system prompt for this row
    # the prompt text again for DARE's forward; the manifest's other columns ride along, split and system do not
    assert (first["question"], second["question"], first["answer"]) == ("Q0", "Q1", "A")
    assert "split" not in first and "system" not in first
    assert grpo.adaptation_dataset(manifest.drop(columns="system"), tmp_path)[0]["prompt"] == [
        {"role": "user", "content": "Q0"}]
    with pytest.raises(ValueError, match=rf"^adaptation sample s2: image {tmp_path / 'c.png'} does not decode: \S"):
        dataset[2]



def test_starting_over_resets_the_trainer_as_a_new_one_would_be(tmp_path):
    """`_start_over` on a trainer after a run: the new manifest's prompts (the image under image_root), the
    optimizer's state emptied (the optimizer kept), step 0 and no buffered inputs, vLLM's loaded step -1 (reload
    at the first generation), a new reward (the reward function TRL calls, with the policy set) and empty logs."""
    Image.new("RGB", (8, 8), "red").save(tmp_path / "a.png")
    manifest = pd.DataFrame({"id": ["s1"], "prompt": ["Name the colour."], "image": ["a.png"], "answer": ["red"]})
    optimizer = SimpleNamespace(state={"w": {"exp_avg": 1.0}})
    old = SimpleNamespace(policy=("old", "policy"))
    trainer = SimpleNamespace(train_dataset=None, optimizer=optimizer, _step=12, _buffered_inputs=[{"x": 1}],
                              use_vllm=True, _last_loaded_step=12, reward_funcs=[old])
    progress = ProgressLog()
    progress.losses, progress.learning_rates, progress.step_times = [0.1], [1e-6], [2.0]
    new = SimpleNamespace(policy=None)
    fake = SimpleNamespace(trainer=trainer, reward=old, new_reward=lambda: new, model="model", processor="processor",
                           progress=progress)
    grpo.TestTimeAdaptation._start_over(fake, manifest, tmp_path)
    row = trainer.train_dataset[0]
    assert row["prompt"] == [{"role": "user", "content": "Name the colour."}] and row["id"] == "s1"
    assert row["image"].size == (8, 8) and row["image"].getpixel((0, 0)) == (255, 0, 0)
    assert trainer.optimizer is optimizer and optimizer.state == {}
    assert (trainer._step, trainer._buffered_inputs, trainer._last_loaded_step) == (0, None, -1)
    assert fake.reward is new and trainer.reward_funcs == [new] and new.policy == ("model", "processor")
    assert (progress.losses, progress.learning_rates, progress.step_times) == ([], [], [])


def test_auto_rolls_out_through_hf_generate_until_vllm_rollouts_have_a_gpu_run(monkeypatch):
    """`auto` is HF generate even where vLLM could run (the stand-in says it could): docs/gpu-runs.md records colocated
    vLLM rollouts 5 of 20 steps on the last H100, none complete; `vllm` is the one setting that asks for them. The
    reason is the job's log line."""
    from ttrl_bench.adaptation.config import rollout_backend_and_reason

    from ttrl_bench.adaptation import config

    asked = []  # choose_backend answering that vLLM could run, recording what it was asked
    monkeypatch.setattr(config, "choose_backend", lambda choice, key: asked.append((choice, key)) or "vllm")
    backend, why = rollout_backend_and_reason("auto")
    assert backend == "hf" and "docs/gpu-runs.md" in why and "adaptation.rollout_backend: vllm" in why
    assert rollout_backend_and_reason("vllm") == ("vllm", "adaptation.rollout_backend: vllm")
    assert asked == [("auto", "adaptation.rollout_backend"), ("vllm", "adaptation.rollout_backend")]
