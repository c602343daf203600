"""The `ttrv` preset updates the model as the authors' verl runs did (issue 22 item 3). Every number below is
worked out by hand from the authors' log ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log (Akshit21112002/TTRV
verl/logs/ai2d/20/; its config: data.train_batch_size 4, trainer.n_gpus_per_node 4, total_epochs 2,
rollout.n 16, n_vote 32, actor.ppo_mini_batch_size 1, ppo_micro_batch_size_per_gpu 2, optim.lr 5e-7,
lr_warmup_steps_ratio 0.03, warmup_style cosine, loss_agg_mode token-mean, clip_ratio_c 3.0; it prints
"Total training steps: 10" and step:1 .. step:10) and from verl's scheduler (verl/utils/torch_functional.py:
410-450, min_lr_ratio 0), never from this code's output."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from ttrl_bench.adaptation.config import grpo_config
from ttrl_bench.adaptation.grpo import adapt
from ttrl_bench.adaptation.layout import batch_layout, fit_to_samples
from ttrl_bench.adaptation.verl_update import per_round_schedule, steps_per_round
from ttrl_bench.adaptation.presets import resolve_method
from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.datasets.sampling import select_adaptation_samples
from ttrl_bench.models.loading import load_model

from tests.support.adaptation import learning_rates  # the lr of each optimizer step under a schedule

# verl's lr in round r of 10 (warm-up int(0.03 x 10) = 0 rounds): 5e-7 x 0.5 x (1 + cos(pi r / 10)), the cosines
# of 0, 18, 36, ... 162 degrees: 1, .9510565, .8090170, .5877853, .3090170, 0, -.3090170, ...
VERL_AI2D_LRS = [5.0e-7, 4.8776413e-7, 4.5225425e-7, 3.9694631e-7, 3.2725425e-7,
                 2.5e-7, 1.7274575e-7, 1.0305369e-7, 4.774575e-8, 1.223587e-8]


def _trl_args(layout: dict, num_processes: int, hp: dict) -> SimpleNamespace:
    """The fields of a GRPOConfig on `num_processes` GPUs the schedule reads; TRL's rule: steps_per_generation =
    generation_batch_size / (per-device batch x processes), in micro-batches."""
    micro_steps = layout["generation_batch_size"] // (layout["per_device_train_batch_size"] * num_processes)
    return SimpleNamespace(steps_per_generation=micro_steps, gradient_accumulation_steps=layout["gradient_accumulation_steps"],
                           warmup_steps=hp["warmup_ratio"], lr_scheduler_type=hp["lr_scheduler"], lr_scheduler_kwargs={})


def test_ai2d_internvl3_2b_on_4_gpus_takes_40_steps_at_verls_per_round_lrs():
    hp = fit_to_samples(resolve_method("ttrv")["hyperparameters"], 20)
    # 16 trained rollouts per optimizer step (1 prompt x rollout.n, split over 4 GPUs: 4 each), micro-batch 2
    # -> 2 accumulations; a round is 4 prompts x 16 = 64 trained rollouts, generated at once
    layout = batch_layout(hp, num_processes=4)
    assert layout == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2, "generation_batch_size": 64}
    args = _trl_args(layout, 4, hp)
    assert steps_per_round(args) == 4  # one step per prompt of the round
    # 20 samples // 4 per round = 5 rounds per epoch, x 2 epochs = 10 rounds = 40 optimizer steps
    rounds, steps = 10, 40
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=hp["learning_rate"])
    lrs = learning_rates(per_round_schedule(optimizer, args, 1, steps), optimizer, steps)
    assert lrs == pytest.approx([lr for lr in VERL_AI2D_LRS for _ in range(4)], rel=1e-6)
    assert len(VERL_AI2D_LRS) == rounds


def test_warm_up_is_int_of_3_percent_of_the_rounds_and_starts_at_lr_0():
    """verl fsdp_workers.py:334 int(0.03 x rounds): 0 up to 33 rounds, 1 at 34 (transformers' own rule,
    ceil(0.03 x steps), would warm up 2 of the 40 steps above). With 1 warm-up round of 34 the first round
    runs at lr 0, the second at the peak, the third at 0.5 (1 + cos(pi / 33))."""
    hp = resolve_method("ttrv")["hyperparameters"]
    args = _trl_args(batch_layout(hp), 1, hp)
    for rounds, first_lrs in [(33, [1.0, 0.5 * (1 + math.cos(math.pi / 33))]),
                              (34, [0.0, 1.0, 0.5 * (1 + math.cos(math.pi / 33))])]:
        optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        lrs = learning_rates(per_round_schedule(optimizer, args, 1, rounds * 4), optimizer, rounds * 4)
        assert lrs[: 4 * len(first_lrs) : 4] == pytest.approx(first_lrs)


def test_the_preset_speaks_trls_knobs(tmp_path):
    """bnpo loss (token-mean per micro-batch of 2), dual clip 3 as TRL's delta, data shuffled with seed 1 whatever
    the run's seed; the Appendix A preset keeps TRL's own update."""
    config = grpo_config(tmp_path, {**resolve_method("ttrv")["hyperparameters"], "temperature": 1.0,
                                    "rollout_backend": "hf"}, seed=7)
    assert (config.loss_type, config.delta, config.data_seed, config.seed) == ("bnpo", 3.0, 1, 7)
    assert (config.per_device_train_batch_size, config.steps_per_generation, config.gradient_accumulation_steps) == (2, 32, 8)
    appendix = resolve_method("ttrv-appendix-a")["hyperparameters"]
    assert (appendix["loss_type"], appendix["dual_clip"], appendix["lr_schedule_per"]) == ("dapo", None, "step")


def test_rollout_temperature_is_the_familys_in_the_logs():
    """1.5 in every Qwen2.5-VL log (e.g. imagenet_a_20_Qwen_Qwen2.5-VL-3B-Instruct_20e_0825_025412.log), 1.0 in
    every InternVL log; Appendix A's 1.0 for a family the authors never ran."""
    from transformers import InternVLConfig, Qwen2_5_VLConfig, Qwen3VLConfig

    from ttrl_bench.models.families import ttrv_logged_temperature

    temps = [ttrv_logged_temperature(c()) for c in (Qwen2_5_VLConfig, InternVLConfig, Qwen3VLConfig)]
    assert temps == [1.5, 1.0, 1.0]


def test_the_trainer_takes_one_step_per_prompt_and_steps_the_lr_per_round(demo_data, tiny_model_dir, tmp_path):
    """The real trainer on one process, the preset's layout scaled down: 2 trained of 4 votes, 2 prompts per
    round, 5 samples (drop_last: 2 rounds per epoch, the 5th sample unused), 2 epochs -> 4 rounds x 2 steps = 8
    optimizer steps. Warm-up 0.25 -> int(0.25 x 4) = 1 round: lr x [0, 1, 0.5 (1 + cos(pi/3)) = 0.75,
    0.5 (1 + cos(2 pi/3)) = 0.25], each for the round's 2 steps; one reward record per round."""
    model, processor = load_model(str(tiny_model_dir), dtype="fp32")
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 5, seed=0)
    spec = resolve_method("ttrv", {"num_generations": 2, "n_votes": 4, "generation_batch_size": 2 * 2,
                                   "max_completion_length": 3, "learning_rate": 1e-3, "warmup_ratio": 0.25})
    log = adapt(model, processor, samples, demo_data, spec, tmp_path, seed=0)
    assert log.attrs["optimizer_steps"] == 8
    assert log.attrs["learning_rates"] == pytest.approx([1e-3 * f for f in (0.0, 1.0, 0.75, 0.25) for _ in range(2)])
    assert len(log) == 4
    assert log.attrs["temperature"] == 1.5  # the tiny model is a Qwen2.5-VL: the logs' 1.5


# The authors' logged run configurations (issue 39): train_batch_size = n_gpus_per_node prompts a round, 16 trained
# rollouts each (rollout.n 16 of n_vote 32), one optimizer step per prompt. Rounds on 20 samples (drop_last):
# 20 // 4 = 5 per epoch with 4 GPUs, 20 // 8 = 2 with 8. Read from the logs: ai2d_20_..._InternVL3-2B_20e_0917_014128
# (4 GPUs, 20 epochs) "Total training steps: 100", 400 optimizer steps; imagenet_a_20_Qwen..._7B_0826_204339 (8 GPUs,
# 2 epochs) 4 rounds, 32 optimizer steps (tests/results/test_author_logs.py reads both).
LOGGED_ROUNDS = {(2, 8): 4, (5, 4): 25, (5, 8): 10, (10, 4): 50, (10, 8): 20, (20, 4): 100, (20, 8): 40}


@pytest.mark.parametrize("epochs, prompts", sorted(LOGGED_ROUNDS))
def test_logged_run_configurations_generate_16_trained_rollouts_per_prompt_per_round(epochs, prompts):
    """ttrv-<k>-epochs[-8-prompts]: a round of 4 (8) prompts x 16 trained rollouts = 64 (128) completions, on 4 (8)
    GPUs: micro-batch 2, 16 / (2 x 4) = 2 (16 / (2 x 8) = 1) accumulations per step, 64 / (2 x 4) = 8 (128 / (2 x 8)
    = 8) micro-batches per round = 4 (8) optimizer steps, one per prompt; rounds = k x (20 // prompts)."""
    from ttrl_bench.adaptation.layout import plan_batch_layout
    from ttrl_bench.plan.cost import JobSettings

    name = f"ttrv-{epochs}-epochs" + ("-8-prompts" if prompts == 8 else "")
    hp = resolve_method(name)["hyperparameters"]
    assert hp["generation_batch_size"] == {4: 64, 8: 128}[prompts]
    assert (hp["epochs"], hp["num_generations"], hp["n_votes"], hp["prompts_per_step"]) == (epochs, 16, 32, 1)
    layout = plan_batch_layout(hp, num_processes=prompts, n_samples=20)
    assert layout == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": {4: 2, 8: 1}[prompts],
                      "generation_batch_size": {4: 64, 8: 128}[prompts]}
    assert steps_per_round(_trl_args(layout, prompts, hp)) == prompts
    rounds = epochs * (20 // {4: 4, 8: 8}[prompts])  # prompts per round = the generation batch / 16
    assert rounds == LOGGED_ROUNDS[epochs, prompts]
    assert epochs * (20 // (layout["generation_batch_size"] // hp["num_generations"])) == LOGGED_ROUNDS[epochs, prompts]
    # the cost model counts one-prompt steps (rounds x prompts = k x 20) and sizes HF generate for the whole round
    settings = JobSettings.from_preset(hp, 20)
    assert (settings.rounds, settings.generation_batch, settings.rollouts, settings.trained) == \
        (epochs * 20, {4: 64, 8: 128}[prompts], 32, 16)


def test_the_logged_configurations_are_the_seven_besides_ttrv():
    """2, 5, 10, 20 epochs x 4, 8 prompts, less (2, 4) which is "ttrv" itself (64 per round, 2 epochs)."""
    from ttrl_bench.adaptation.presets import PRESETS

    logged = sorted(m for m in PRESETS if m.startswith("ttrv-") and "-epochs" in m)
    assert logged == sorted(f"ttrv-{e}-epochs" + ("-8-prompts" if p == 8 else "") for e, p in LOGGED_ROUNDS)
    ttrv = resolve_method("ttrv")["hyperparameters"]
    assert (ttrv["epochs"], ttrv["generation_batch_size"]) == (2, 64)


# The authors' config, pprinted at the top of ai2d_20_OpenGVLab_InternVL3-2B_2e_0916_235226.log (Akshit21112002/TTRV
# b9cf778, verl/logs/ai2d/20/), line by line: the `ttrv` preset's key, the log's line, the log's key and value.
AUTHORS_AI2D_CONFIG = [
    ("learning_rate", 18, "actor.optim.lr", 5e-7),
    ("warmup_ratio", 20, "actor.optim.lr_warmup_steps_ratio", 0.03),
    ("lr_scheduler", 23, "actor.optim.warmup_style", "cosine"),
    ("weight_decay", 24, "actor.optim.weight_decay", 0.01),
    ("max_grad_norm", 14, "actor.grad_clip", 1.0),
    ("kl_beta", 15, "actor.kl_loss_coef", 0.001),
    ("dual_clip", 6, "actor.clip_ratio_c", 3.0),
    ("micro_batch_size", 28, "actor.ppo_micro_batch_size_per_gpu", 2),
    ("prompts_per_step", 29, "actor.ppo_mini_batch_size", 1),
    ("num_generations", 69, "rollout.n", 16),
    ("n_votes", 70, "rollout.n_vote", 32),
    ("max_completion_length", 73, "rollout.response_length", 1024),
    ("epochs", 182, "trainer.total_epochs", 2),
]


@pytest.mark.parametrize("key, line, logged_key, logged", AUTHORS_AI2D_CONFIG, ids=[c[0] for c in AUTHORS_AI2D_CONFIG])
def test_the_ttrv_preset_is_the_authors_logged_config(key, line, logged_key, logged):
    """Each hyper-parameter of `ttrv` with no config layer is the value the authors' run printed (log line `line`)."""
    assert resolve_method("ttrv")["hyperparameters"][key] == logged


def test_the_ttrv_preset_translates_the_rest_of_the_log_into_trls_knobs():
    """The log's other settings, in TRL's terms (hyperparameters.py says why each): a round of train_batch_size 4
    (line 139) prompts x rollout.n 16 = 64 generated at once; loss_agg_mode token-mean (17) per micro-batch = TRL's
    "bnpo"; the KL on (use_kl_loss True, 34; low_var_kl = TRL's k3, 16); std-scaled group advantages (GRPO, 84);
    the lr scheduler stepped per round; the rollout temperature the family's (1.0 for this InternVL run, line 74;
    1.5 in the Qwen2.5-VL logs); data shuffled (136) with verl's seed 1; the vision encoder frozen."""
    hp = resolve_method("ttrv")["hyperparameters"]
    assert (hp["generation_batch_size"], hp["loss_type"], hp["scale_rewards"], hp["lr_schedule_per"]) == \
        (4 * 16, "bnpo", "group", "round")
    assert (hp["temperature"], hp["data_seed"], hp["freeze_vision"], hp["gradient_checkpointing"]) == \
        ("family", 1, True, True)


def test_the_appendix_a_preset_is_what_ttrv_appendix_a_states():
    """TTRV Appendix A: AdamW, cosine, peak lr 5e-7, 32 rollouts (all trained) at temperature 1.0, 1024 tokens; no KL,
    weight decay or warm-up stated (0); 8 prompts per step from the run script; TRL's own update otherwise (dapo, no
    dual clip, lr stepped per optimizer step, the run's own data seed)."""
    hp = resolve_method("ttrv-appendix-a")["hyperparameters"]
    assert (hp["learning_rate"], hp["lr_scheduler"], hp["num_generations"], hp["n_votes"], hp["temperature"],
            hp["max_completion_length"]) == (5e-7, "cosine", 32, 32, 1.0, 1024)
    assert (hp["kl_beta"], hp["weight_decay"], hp["warmup_ratio"], hp["prompts_per_step"], hp["epochs"]) == \
        (0.0, 0.0, 0.0, 8, 2)
    assert (hp["loss_type"], hp["dual_clip"], hp["lr_schedule_per"], hp["data_seed"], hp["generation_batch_size"]) == \
        ("dapo", None, "step", None, None)
