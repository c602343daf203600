"""Tests written against the mutants that survived mutmut's re-run of adaptation/ (issue 39): verl's k3, its
clamped reference, its checks and per-round lr schedule (verl_update.py), MEMO's augmentations (baselines.py),
what TestTimeAdaptation hands its parts and what a run logs (grpo.py), the weight snapshot across parameters and
processes (weights.py) and the KL reference's loading arguments (config.py), with stand-ins for the model, the
trainer, vLLM, CUDA and the other processes. Every expected value is worked out by hand in the test's docstring or
comments, or read from the source a function cites."""

from __future__ import annotations

import logging
import math
import warnings
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from ttrl_bench.adaptation import baselines, grpo
from ttrl_bench.adaptation.verl_update import (check_verl_update, clamped_reference, k3, per_round_schedule,
                                              steps_per_round)


# --- verl_update.py: k3 and the clamped reference ---------------------------------------------------------------

def test_k3_is_exp_d_minus_d_minus_1():
    """k3(d) = e^d - d - 1 (verl core_algos.py:485-488): 0 at d = 0, e - 2 = 0.718282 at 1, e^-1 = 0.367879 at -1,
    e^2 - 3 = 4.389056 at 2."""
    got = k3(torch.tensor([0.0, 1.0, -1.0, 2.0], dtype=torch.float64))
    assert got.tolist() == pytest.approx([0.0, math.e - 2, math.exp(-1), math.exp(2) - 3], abs=1e-12)
    assert got[0].item() == 0.0


def test_a_small_kl_bound_clamps_each_side_to_its_own_root():
    """Bound b = k3(0.5) = e^0.5 - 1.5 = 0.1487213: its positive root is 0.5; its negative root d solves
    e^d - d - 1 = b, d = -0.6 + (k3(-0.6) - b) / (1 - e^-0.6) = -0.6 + (0.1488116 - 0.1487213) / 0.4511884
    = -0.59980 (one Newton step from -0.6; k3(-0.6) = e^-0.6 + 0.6 - 1 = 0.1488116). With logp 0:
    d = 0.25 (k3 0.0340) and 0 (k3 0) stay; d = 0.8 (k3 e^0.8 - 1.8 = 0.4255) is past the bound on the positive
    side and becomes 0.5; d = -2 (k3 e^-2 + 1 = 1.1353) becomes -0.59980. The side is that of d, not of d > 1."""
    bound = math.exp(0.5) - 1.5
    logps = torch.zeros(4)
    ref = torch.tensor([0.25, 0.0, 0.8, -2.0])
    got = clamped_reference(ref, logps, bound)
    assert got[:2].tolist() == [0.25, 0.0]
    assert got[2].item() == pytest.approx(0.5, abs=1e-6)
    assert got[3].item() == pytest.approx(-0.59980, abs=1e-5)


def test_at_the_bound_itself_the_reference_keeps_its_value_and_the_gradient_passes():
    """torch.clamp(k3, max=b) passes the gradient where k3 equals b exactly (verl core_algos.py:489), so the
    reference is kept there: with logp 0 (requires grad) and ref 1, k3 = e - 2 in float32, and the bound is
    that very float32 number. The result is ref (1.0), which does not depend on logp: d result / d logp = 0.
    Replacing it by logp + root would give d result / d logp = 1."""
    logps = torch.zeros(1, requires_grad=True)
    ref = torch.ones(1)
    bound = k3(ref - logps.detach()).item()  # e - 2 rounded to float32, exactly
    got = clamped_reference(ref, logps, bound)
    assert got.item() == 1.0
    got.sum().backward()
    assert logps.grad.tolist() == [0.0]


def test_the_clamped_reference_keeps_the_policys_bf16_dtype():
    """The root added to logp is cast to logp's dtype: bf16 log-probs give a bf16 reference (a float32 root would
    promote the sum, and the torch.where, to float32). d = -12 + 0 = -12 is past the bound 10 (k3 11.000006)."""
    logps = torch.zeros(2, dtype=torch.bfloat16)
    ref = torch.tensor([-12.0, 0.5], dtype=torch.bfloat16)
    got = clamped_reference(ref, logps, 10.0)
    assert got.dtype == torch.bfloat16
    assert got[1].item() == 0.5


def test_an_unknown_advantage_rule_or_a_bound_not_above_0_is_refused_by_name():
    """The exact message for advantages "ppo": the config key, the value, and the known rules joined by ", ".
    kl_clamp must be a positive number or null: 0 and True are refused, 0.5 (a bound under 1) and 10 pass."""
    with pytest.raises(ValueError) as err:
        check_verl_update({"advantages": "ppo"})
    assert str(err.value) == "adaptation.hyperparameters.<task>.advantages = 'ppo'; known: trl, verl"
    for bad in (0, True):
        with pytest.raises(ValueError) as err:
            check_verl_update({"kl_clamp": bad})
        assert str(err.value) == f"adaptation.hyperparameters.<task>.kl_clamp = {bad!r}; a positive bound or null"
    for good in (0.5, 10, None):
        check_verl_update({"advantages": "verl", "kl_clamp": good})


def test_steps_per_round_counts_whole_optimizer_steps_of_a_generation_batch():
    """steps_per_generation 4 micro-batches x 3 iterations = 12 micro-batches per round, 2 per optimizer step: 6
    optimizer steps, a whole number (an int). 3 micro-batches (1 iteration of 3) with 2 per step are 1.5 steps:
    refused with the exact message."""
    got = steps_per_round(SimpleNamespace(steps_per_generation=4, gradient_accumulation_steps=2), 3)
    assert got == 6 and isinstance(got, int)
    with pytest.raises(ValueError) as err:
        steps_per_round(SimpleNamespace(steps_per_generation=3, gradient_accumulation_steps=2), 1)
    assert str(err.value) == ("lr_schedule_per round needs whole optimizer steps per round: 3 micro-batches per "
                              "generation batch, 2 per step; raise generation_batch_size")


def learning_rates(schedule, optimizer, steps: int) -> list[float]:
    """The lr of each of `steps` optimizer steps (the schedule stepped after each, as Trainer does)."""
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return rates


def _learning_rates(args, num_iterations: int, steps: int) -> list[float]:
    """The lr of each optimizer step (base lr 1) under per_round_schedule."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    return learning_rates(per_round_schedule(optimizer, args, num_iterations, steps), optimizer, steps)


def test_the_per_round_schedule_holds_each_rounds_lr_and_counts_warm_up_in_rounds():
    """steps_per_generation 2 x num_iterations 2 = 4 micro-batches, 2 per step: 2 optimizer steps per round.
    7 steps make ceil(7 / 2) = 4 rounds. warmup_steps 1 (not below 1: a count of rounds, not a ratio): 1 round.
    transformers' linear schedule over rounds r: r / 1 under the warm-up, then (4 - r) / (4 - 1): rounds 0..3 give
    0, 1, 2/3, 1/3, each held for its 2 steps (the last round has one step left)."""
    args = SimpleNamespace(steps_per_generation=2, gradient_accumulation_steps=2, warmup_steps=1,
                           lr_scheduler_type="linear", lr_scheduler_kwargs={})
    assert _learning_rates(args, 2, 7) == pytest.approx([0, 0, 1, 1, 2 / 3, 2 / 3, 1 / 3], abs=1e-12)


def test_the_per_round_schedule_passes_the_schedulers_own_arguments():
    """cosine_with_min_lr with lr_scheduler_kwargs min_lr_rate 0.1, warm-up ratio 0.0 (int(0.0 x 4) = 0 rounds),
    1 optimizer step per round (2 micro-batches, 2 per step), 4 steps = 4 rounds. transformers' factor
    0.5 (1 + cos(pi x r / 4)) x 0.9 + 0.1: r = 0: 1; r = 1: 0.5 (1 + 0.707107) x 0.9 + 0.1 = 0.868198; r = 2: 0.55;
    r = 3: 0.5 (1 - 0.707107) x 0.9 + 0.1 = 0.231802. Without the kwargs transformers refuses this schedule."""
    args = SimpleNamespace(steps_per_generation=2, gradient_accumulation_steps=2, warmup_steps=0.0,
                           lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": 0.1})
    assert _learning_rates(args, 1, 4) == pytest.approx([1.0, 0.868198, 0.55, 0.231802], abs=1e-6)


# --- baselines.py: MEMO's augmented copies ------------------------------------------------------------------------

def test_memos_augmentations_run_silently_and_never_touch_the_gpus_random_state(monkeypatch):
    """augmented_copies forks only the CPU generator (devices=[]): with two (stand-in) CUDA devices, the GPUs' RNG
    state is never read, so no CUDA context is made on every GPU of a multi-GPU node, and torch's "you have 2
    available devices" warning is not raised. The PIL crop always antialiases: torchvision warns only when told
    antialias=False, which the function does not do. The global CPU RNG is left as it was."""
    from PIL import Image

    def no_gpu(*args):
        raise AssertionError("a GPU's RNG state was read")

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state", no_gpu)
    monkeypatch.setattr(torch.cuda, "set_rng_state", no_gpu)
    monkeypatch.setattr(torch.random, "_fork_rng_warned_already", False)
    image = Image.new("RGB", (24, 16), (90, 140, 200))
    state = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copies = baselines.augmented_copies(image, 2, 0)
    assert [c.size for c in copies] == [(24, 16), (24, 16)]
    assert torch.equal(torch.get_rng_state(), state)


def test_memos_colour_jitter_scales_brightness_contrast_and_saturation_by_0_6_to_1_4(monkeypatch):
    """C.1 names "random crop/flip/color jitter" without strengths; ours: brightness, contrast and saturation
    factors uniform in [1 - 0.4, 1 + 0.4] (torchvision's ColorJitter(0.4, 0.4, 0.4)). On a uniform grey image
    (128) contrast and saturation blend with the image's own grey, so only brightness acts: each copy is 128 x f,
    f in [0.6, 1.4], i.e. in [76.8, 179.2]; 40 seeded copies spread over most of it (a factor range of
    [0, 2.4] would leave it). The jitter's own arguments are checked through a recording wrapper."""
    from PIL import Image
    from torchvision.transforms import v2

    made = []
    real = v2.ColorJitter

    def recording(**kwargs):
        made.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(v2, "ColorJitter", recording)
    grey = Image.new("RGB", (8, 8), (128, 128, 128))
    values = [c.getpixel((0, 0)) for c in baselines.augmented_copies(grey, 40, 3)]
    assert made == [{"brightness": 0.4, "contrast": 0.4, "saturation": 0.4}]
    assert all(r == g == b for r, g, b in values)
    levels = [r for r, _, _ in values]
    assert 76 <= min(levels) < 90 and 166 < max(levels) <= 180


# --- grpo.py: what TestTimeAdaptation hands its parts ------------------------------------------------------------

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


# --- weights.py: the snapshot across several parameters and processes -----------------------------------------

class _Three(torch.nn.Module):
    """Parameters a (frozen), b (4 values), c (4), d (4), in that order."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
        self.b = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0, 4.0]))
        self.c = torch.nn.Parameter(torch.tensor([1.0001, 5.0, 6.0, 7.0]))
        self.d = torch.nn.Parameter(torch.tensor([8.0, 9.0, 10.0, 11.0]))


def test_the_changed_fraction_sums_over_every_trainable_parameter_past_a_frozen_one():
    """Frozen a comes first; the snapshot still holds b, c and d. Then b gets 1 changed value, c 2 (one of them
    1.0001 -> 1.0002, which bf16 rounds both to 1.0), d 2: with all trainable, (1 + 2 + 2) / 12 = 5/12; cast to
    bf16, (1 + 1 + 2) / 12 = 1/3 (both sides cast: fp32 1.0001 itself differs from bf16 1.0); with c frozen after
    the snapshot, c is skipped and d, after it, still counts: (1 + 2) / 8 = 3/8."""
    from ttrl_bench.adaptation.weights import WeightSnapshot

    model = _Three()
    snap = WeightSnapshot(model)
    assert snap.names == ["b", "c", "d"]
    with torch.no_grad():
        model.b[0] = 0.0
        model.c[0], model.c[1] = 1.0002, 0.0
        model.d[2], model.d[3] = 0.0, 0.0
    assert snap.changed_fraction(model) == pytest.approx(5 / 12, abs=1e-15)
    assert snap.changed_fraction(model, torch.bfloat16) == pytest.approx(1 / 3, abs=1e-15)
    model.c.requires_grad_(False)
    assert snap.changed_fraction(model) == 3 / 8


def test_a_snapshot_is_pinned_where_cuda_is_and_the_fraction_comes_from_the_main_process(monkeypatch):
    """Where CUDA is present, the host copies are pinned (stood in: CUDA reported, pin_memory recorded). With two
    processes, the process that holds no copy takes the main process's fraction from broadcast_object_list (stood
    in: it answers [0.375]) after joining every parameter's gather; a single process never broadcasts."""
    from ttrl_bench.adaptation import weights

    pinned, broadcasts = [], []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(self) or self)
    monkeypatch.setattr(weights, "process_state", lambda: SimpleNamespace(num_processes=1, is_main_process=True))
    monkeypatch.setattr(weights, "broadcast_object_list", lambda objects: broadcasts.append(list(objects)) or [0.375])
    model = _Three()
    single = weights.WeightSnapshot(model)
    assert [p.tolist() for p in pinned] == [model.b.tolist(), model.c.tolist(), model.d.tolist()]
    assert [p is single.values[name] for p, name in zip(pinned, "bcd")] == [True] * 3
    assert single.changed_fraction(model) == 0.0 and broadcasts == []
    monkeypatch.setattr(weights, "process_state", lambda: SimpleNamespace(num_processes=2, is_main_process=False))
    other = weights.WeightSnapshot(model)
    assert other.values == {} and other.names == ["b", "c", "d"]
    gathered, gather = [], weights.full_tensor
    monkeypatch.setattr(weights, "full_tensor", lambda param: gathered.append(param.tolist()) or gather(param))
    assert other.changed_fraction(model) == 0.375
    # every process joins each parameter's gather (a collective under FSDP2), the one holding no copy included
    assert gathered == [model.b.tolist(), model.c.tolist(), model.d.tolist()]
    assert broadcasts == [[0.0]]  # it has counted nothing itself: 0 / 0 -> 0.0, replaced by the main's


# --- config.py: the KL reference's loading arguments --------------------------------------------------------------

def test_grpo_config_asks_placement_for_the_reference_with_cuda_and_this_processs_device(tmp_path, monkeypatch):
    """GRPOConfig.model_init_kwargs are placement.reference_init_kwargs(whether CUDA is present, this process's
    device), as asked: stood in by a recorder that answers {"device_map": "stand-in"} (the real one gives None on
    the CPU, so on the CPU only the recorder tells on_gpu False from a lost flag, or the device from None)."""
    from ttrl_bench.adaptation import config
    from ttrl_bench.runs.processes import process_state

    asked = []
    monkeypatch.setattr(config, "choose_backend", lambda choice, key: "hf")
    monkeypatch.setattr(config, "reference_init_kwargs", lambda on_gpu, device: asked.append((on_gpu, device))
                        or {"device_map": "stand-in"})
    hp = {"num_generations": 4, "max_completion_length": 8, "temperature": 0.7, "epochs": 2, "learning_rate": 1e-6}
    args = config.grpo_config(tmp_path, hp, seed=0)
    assert asked == [(torch.cuda.is_available(), process_state().device)]
    assert type(asked[0][0]) is bool
    assert args.model_init_kwargs == {"device_map": "stand-in"}


# --- per_sample.py: the shared TestTimeAdaptation -----------------------------------------------------------------

def test_the_shared_adaptation_is_built_with_the_jobs_model_processor_and_method(monkeypatch):
    """VR-TTRL's per-sample GRPO builds its one TestTimeAdaptation from the job's own model, processor and method
    (with the first sample's manifest, the image root, out_dir, seed and the grounding task), runs it on that
    sample, and runs the same one on the next sample's manifest."""
    from ttrl_bench.adaptation import per_sample

    built, runs = [], []

    class Adaptation:
        def __init__(self, *args):
            built.append(args)

        def run(self, *args, **kwargs):
            runs.append((args, kwargs))
            return "log"

    monkeypatch.setattr(per_sample, "TestTimeAdaptation", Adaptation)
    method = {"hyperparameters": {"num_generations": 4}, "reward": "vr_ttrl"}
    adapt_one = per_sample._adapter("model", "processor", "samples", "root", method, "out", 7)
    assert adapt_one("sample 0", "before 0") == "log"
    assert adapt_one("sample 1", "before 1") == "log"
    assert len(built) == 1 and built[0][:7] == ("model", "processor", "sample 0", "root", method, "out", 7)
    assert type(built[0][7]).__name__ == "GroundingTask"
    assert runs == [((), {"before": "before 0"}), (("sample 1", "root"), {"before": "before 1"})]


def test_a_vote_only_job_takes_no_weight_snapshot(tmp_path, monkeypatch):
    """Vote-only (`updates` false) changes no weight, so it keeps no host copy of the weights (7B: about 30 GB):
    WeightSnapshot, stood in by a recorder, is never built; each sample's answer is its consensus vote, seeded
    seed + index (3, 4), voted by the model and processor given, on the sample's row and image. Each sample's
    seconds lie between 0 and the whole call's wall time."""
    import time

    from PIL import Image

    from ttrl_bench.adaptation import per_sample

    Image.new("RGB", (8, 6)).save(tmp_path / "a.png")
    snapshots, votes = [], []
    monkeypatch.setattr(per_sample, "WeightSnapshot", lambda model: snapshots.append(model))

    def vote(model, processor, row, image, hp, params, seed):
        votes.append((model, processor, row["id"], image.size, hp["num_generations"], params, seed))
        return f"vote {seed}"

    monkeypatch.setattr(per_sample, "consensus_vote", vote)
    samples = pd.DataFrame({"id": ["a", "b"], "image": ["a.png", "a.png"], "prompt": ["Pa", "Pb"]})
    method = {"hyperparameters": {"updates": False, "num_generations": 4}, "reward_params": {"k": 1}}
    start = time.perf_counter()
    outputs, log, seconds = per_sample.adapt_each_sample("model", "processor", samples, tmp_path, method,
                                                         tmp_path, 3, 9)
    wall = time.perf_counter() - start
    assert (outputs, snapshots) == (["vote 3", "vote 4"], [])
    assert votes == [("model", "processor", "a", (8, 6), 4, {"k": 1}, 3),
                     ("model", "processor", "b", (8, 6), 4, {"k": 1}, 4)]
    assert len(seconds) == 2 and all(0 <= s <= wall for s in seconds)
    assert log.empty


def test_optimizer_arguments_run_on_the_gpu_where_cuda_is_there(monkeypatch):
    """use_cpu is `not torch.cuda.is_available()`: True on this CPU machine, False where CUDA answers True
    (stood in here; nothing else of the arguments is read from the device)."""
    import torch

    from ttrl_bench.adaptation.config import optimizer_arguments

    hp = {"learning_rate": 1e-6}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert optimizer_arguments(hp, 0)["use_cpu"] is True
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert optimizer_arguments(hp, 0)["use_cpu"] is False


def test_select_trainable_freezes_the_tower_on_request_and_trains_norms_outside_it():
    """InternVL3-2B cut to one 128-wide text layer (test_plan_cost's tiny config, meta device). freeze_vision true:
    every vision-tower parameter frozen (InternVL's adapter, the projector, sits outside the tower and trains), the
    rest trainable; the default (false) trains everything. trainable "norm" (Tent's choice): the norms outside the
    tower alone: the projector's LayerNorm over 64 x 2 x 2 = 256 pixel-shuffled features (weight and bias, 512)
    and the text layer's two RMSNorms and the final one, 3 x 128: 896. Another value is refused by name."""
    from tests.plan.test_cost import _tiny_internvl
    from transformers import AutoModelForImageTextToText

    from ttrl_bench.models.families import vision_tower

    def tiny():
        with torch.device("meta"):
            return AutoModelForImageTextToText.from_config(_tiny_internvl())

    def trainable(model):
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    model = tiny()
    total, tower = sum(p.numel() for p in model.parameters()), sum(p.numel() for p in vision_tower(model).parameters())
    baselines.select_trainable(model, {"freeze_vision": True})
    assert not any(p.requires_grad for p in vision_tower(model).parameters())
    assert trainable(model) == total - tower
    model = tiny()
    baselines.select_trainable(model, {})
    assert trainable(model) == total
    model = tiny()
    baselines.select_trainable(model, {"trainable": "norm"})
    assert trainable(model) == 2 * 256 + 3 * 128 == 896
    with pytest.raises(ValueError, match="trainable must be 'language' or 'norm', got 'all'"):
        baselines.select_trainable(tiny(), {"trainable": "all"})


def test_a_baseline_refuses_a_manifest_of_more_than_one_sample_by_count():
    """Appendix C.1's baselines adapt on one test sample at a time: two rows are refused before any model work."""
    with pytest.raises(ValueError) as err:
        baselines.adapt_baseline(None, None, pd.DataFrame({"id": ["a", "b"]}), None, {}, None, seed=0)
    assert str(err.value) == "Appendix C baselines adapt on one sample at a time, got 2"


def test_a_baseline_opens_the_image_at_the_rows_input_size_and_answers_as_long_as_a_rollout(monkeypatch, tmp_path):
    """adapt_baseline's first two steps, the rest stopped: the sample's image is opened under the image root at the
    row's input_size (GroundingTask.view's: VR-TTRL's 840 px), or at none where the manifest has no such column,
    and the pseudo-answer is generated with up to max_completion_length new tokens (as long as VR-TTRL's rollouts)."""
    from pathlib import Path

    class Stop(Exception):
        pass

    seen = []
    monkeypatch.setattr(baselines, "open_model_view", lambda path, size: seen.append((path, size)) or "view")

    def pseudo_answer(model, processor, row, image, method, seed, max_new_tokens):
        seen.append((row["id"], image, seed, max_new_tokens))
        raise Stop

    monkeypatch.setattr(baselines, "pseudo_answer", pseudo_answer)
    method = {"hyperparameters": {"max_completion_length": 2048}}
    for manifest, size in ((pd.DataFrame({"id": ["s"], "image": ["img/1.png"], "input_size": [840]}), 840),
                           (pd.DataFrame({"id": ["s"], "image": ["img/1.png"]}), None)):
        seen.clear()
        with pytest.raises(Stop):
            baselines.adapt_baseline(None, None, manifest, Path("/data"), method, tmp_path, seed=3)
        assert seen == [(Path("/data/img/1.png"), size), ("s", "view", 3, 2048)]


def test_each_baseline_objective_scores_the_pseudo_answer_with_its_own_loss(monkeypatch):
    """objective_loss on stand-in logits of the one copy: 2 answer positions over 2 tokens, both with probabilities
    (1/4, 3/4) (logits 0 and ln 3); pseudo-answer ids [1, 0], mask [1, 0] (the second position not counted).
    Tent: the first position's entropy, -(1/4 ln 1/4 + 3/4 ln 3/4) = 0.5623; SFT: -ln p(1) = -ln 3/4 = 0.2877."""
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, math.log(3.0)]]])
    monkeypatch.setattr(baselines, "completion_logits", lambda *a, **k: logits)
    answer = baselines.PseudoAnswer("B", [1, 0], [1, 0], ["image"])
    row = {"prompt": "p"}
    tent = baselines.objective_loss(None, None, row, answer, {"objective": "tent"})
    sft = baselines.objective_loss(None, None, row, answer, {"objective": "sft"})
    assert tent.item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))
    assert sft.item() == pytest.approx(-math.log(0.75))


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
