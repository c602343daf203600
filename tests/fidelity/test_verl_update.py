"""verl's update in TRL's trainer (issue 34 items 4-6): the hyper-parameters of presets.VERL_UPDATE make one GRPO
step compute what the TTRV authors' verl fork computes. verl's formulas are written out by hand below from the
fork (Akshit21112002/TTRV, verl/verl/trainer/ppo/core_algos.py: compute_grpo_outcome_advantage 113-154,
compute_policy_loss 343-415, kl_penalty low_var_kl 485-489, agg_loss token-mean 315-337; dp_actor.py:357-391 sums
them per micro-batch), never taken from this code's output."""

import math

import pytest
import torch

from ttrl_bench.adaptation import grpo, reward_bridge
from ttrl_bench.adaptation import trainer as trainer_module
from ttrl_bench.adaptation.config import grpo_config
from ttrl_bench.adaptation.reward_bridge import GroupReward
from ttrl_bench.adaptation.verl_update import check_verl_update, clamped_reference, k3_roots, verl_group_advantages
from ttrl_bench.adaptation.presets import VERL_UPDATE, resolve_method
from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.datasets.sampling import select_adaptation_samples
from ttrl_bench.evaluation.tasks import TASKS
from ttrl_bench.models.loading import load_model
from ttrl_bench.rewards.registry import Reward


def verl_advantages_by_hand(scores: list[float], group_size: int) -> list[torch.Tensor]:
    """core_algos.py:131-154 as verl runs it: float32 scores (the reward manager's float32 reward tensor summed
    over tokens), each group's 0-d scores gathered into a new tensor, torch.mean, torch.std of a (1, n) tensor,
    (score - mean) / (std + 1e-6) one score at a time; a group of one: mean 0, std 1."""
    scores = [torch.tensor(s, dtype=torch.float32) for s in scores]
    out = []
    for start in range(0, len(scores), group_size):
        group = scores[start : start + group_size]
        if len(group) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = torch.mean(torch.tensor(group)), torch.std(torch.tensor([group]))
        out += [(s - mean) / (std + 1e-6) for s in group]
    return out


def test_verls_advantages_of_a_unanimous_group_keep_their_float32_residue():
    """16 equal rewards 0.35 (float32 0.3499999940...): torch's float32 mean on the CPU is 0.35 - 2^-25 (the
    sum is not 16 x 0.35 exactly), the unbiased std of 16 values 2^-25 apart from their mean is
    sqrt(16 / 15) x 2^-25... -> 3.08e-8, so every rollout gets 2^-25 / (3.08e-8 + 1e-6) = +0.0289. A second group
    of mixed rewards, and groups of one (mean 0, std 1: the reward / (1 + 1e-6))."""
    unanimous = [0.35] * 16
    mixed = [0.35] * 12 + [-0.15] * 4
    ours = verl_group_advantages(torch.tensor(unanimous + mixed), 16)
    by_hand = torch.stack(verl_advantages_by_hand(unanimous + mixed, 16))
    assert torch.equal(ours, by_hand)
    assert ours[0].item() == pytest.approx(0.0289, abs=1e-4) and ours[0].item() > 0
    assert torch.equal(ours[:16], ours[:1].expand(16))  # the same small push for every rollout of the group
    # mixed: mean 0.225, deviations 0.125 (x12) and -0.375 (x4), std sqrt(0.75 / 15) = 0.223607: +0.559, -1.677
    assert ours[16].item() == pytest.approx(0.125 / 0.2236068, rel=1e-5)
    assert ours[-1].item() == pytest.approx(-0.375 / 0.2236068, rel=1e-5)
    singles = verl_group_advantages(torch.tensor([0.35, -2.0]), 1)
    assert torch.equal(singles, torch.stack(verl_advantages_by_hand([0.35, -2.0], 1)))
    assert singles.tolist() == pytest.approx([0.35 / (1 + 1e-6), -2.0 / (1 + 1e-6)])


def test_the_verl_advantages_skip_the_2_to_the_minus_16_grid():
    """The grid (TRL's advantages of equal rewards exactly 0) stays the default; under `advantages: verl`
    the reward is the float the reward computes, as verl's reward manager stores it."""
    completions = [[{"role": "assistant", "content": t}] for t in ["A", "A", "A", "B"]]
    columns = {"id": ["x"] * 4, "options": [["a", "b", "c", "d"]] * 4, "answer": ["A"] * 4}
    p = 0.75
    h = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    raw = GroupReward("ttrv", {}, num_generations=4, reward_grid=False)(prompts=None, completions=completions, **columns)
    assert raw == pytest.approx([p - 0.75 * h] * 3 + [0.25 - 0.75 * h], abs=1e-15)
    assert raw[0] != 21512 / 65536  # the grid's value (tests/adaptation/test_reward_bridge.py)


def _one_prompt_of_16(demo_data, tiny_model_dir, tmp_path, monkeypatch, extra_hp: dict):
    """One prompt, 16 rollouts of 2 tokens, one step, every rollout rewarded 0.35 (a stand-in reward: TTRV's
    "w/o frequency" gives a unanimous group one such value, -0.75 H); the advantages the loss receives."""
    monkeypatch.setattr(reward_bridge, "get_reward", lambda name, **params: Reward(lambda answers: [0.35] * len(answers)))
    model, processor = load_model(str(tiny_model_dir), dtype="fp32")
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 1, seed=0)
    spec = resolve_method("ttrv", {"num_generations": 16, "n_votes": 16, "generation_batch_size": 16,
                                   "micro_batch_size": 16, "max_completion_length": 2, "epochs": 1,
                                   "rollout_backend": "hf", **extra_hp})
    adaptation = grpo.TestTimeAdaptation(model, processor, samples, demo_data, spec, tmp_path, seed=0)
    trainer, seen = adaptation.trainer, []
    score = trainer._generate_and_score_completions

    def recorded(inputs):
        output = score(inputs)
        seen.append(output["advantages"].clone())
        return output

    trainer._generate_and_score_completions = recorded
    adaptation.run()
    assert len(seen) == 1 and seen[0].shape == (16,)
    return seen[0]


def test_a_unanimous_group_gets_verls_advantages_in_a_trainer_step(demo_data, tiny_model_dir, tmp_path, monkeypatch):
    """The real trainer: TRL's advantages of 16 equal (grid) rewards are exactly 0; verl's those of the
    hand-worked formula on float32 0.35, +0.0289 each."""
    default = _one_prompt_of_16(demo_data, tiny_model_dir, tmp_path / "trl", monkeypatch, {})
    assert torch.equal(default, torch.zeros(16))
    verl = _one_prompt_of_16(demo_data, tiny_model_dir, tmp_path / "verl", monkeypatch, {"advantages": "verl"})
    assert torch.equal(verl, torch.stack(verl_advantages_by_hand([0.35] * 16, 16)))
    assert verl[0].item() == pytest.approx(0.0289, abs=1e-4)


def test_k3_reaches_10_at_the_roots():
    """exp(d) - d - 1 = 10: d = -11 + e^-11 (-10.9999833) and d' = 2.6109 (e^2.6109 = 13.6109)."""
    low, high = k3_roots(10.0)
    assert low == pytest.approx(-11 + math.exp(-11), abs=1e-9)
    assert math.exp(low) - low - 1 == pytest.approx(10.0, abs=1e-12)
    assert math.exp(high) - high - 1 == pytest.approx(10.0, abs=1e-12)
    assert high == pytest.approx(2.6109, abs=1e-4)


def test_the_kl_clamp_is_verls_low_var_kl_value_and_gradient():
    """TRL's k3 of the clamped reference equals verl's torch.clamp(k3, -10, 10) on the same tensors: d = ref -
    logp of -12 (k3 = 11.000006) and 4 (k3 = 50.6) clamp to 10 with zero gradient; -10.5 (9.50003), -1, 0, 0.5,
    2.5 (8.68) unchanged, gradient d k3 / d logp = 1 - e^d."""
    d = torch.tensor([[-12.0, -10.5, -1.0, 0.0], [0.5, 2.5, 4.0, 2.7]])
    logp = torch.tensor([[-0.3, -7.5, -2.0, -0.01], [-12.0, -1.25, -30.0, -4.0]], requires_grad=True)
    ref = logp.detach() + d

    def trl_k3(ref_logps, logps):  # trl grpo_trainer.py `_compute_loss`, per_token_kl
        return torch.exp(ref_logps - logps) - (ref_logps - logps) - 1

    ours = trl_k3(clamped_reference(ref, logp, 10.0), logp)
    (ours_grad,) = torch.autograd.grad(ours.sum(), logp)
    kl = ref - logp  # verl core_algos.py:485-489
    verl = torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    (verl_grad,) = torch.autograd.grad(verl.sum(), logp)
    clamped = torch.tensor([[True, False, False, False], [False, False, True, True]])
    assert torch.allclose(ours, verl, rtol=0, atol=2e-5)
    # 10 up to float32 rounding of (logp + d) - logp: k3' (d) x half an ulp of logp, at most 12.6 x 2^-20 here
    assert torch.allclose(ours[clamped], torch.full((3,), 10.0), rtol=0, atol=2e-5)
    assert torch.equal(ours[~clamped], verl[~clamped])
    assert torch.equal(ours_grad[clamped], torch.zeros(3)) and torch.equal(verl_grad[clamped], torch.zeros(3))
    assert torch.allclose(ours_grad[~clamped], 1 - torch.exp(d[~clamped]), rtol=1e-6)
    assert torch.equal(ours_grad, verl_grad)


def test_trls_two_corrections_are_off_under_the_authors_settings(tmp_path):
    hp = {**resolve_method("ttrv")["hyperparameters"], "temperature": 1.0, "rollout_backend": "hf"}
    default = grpo_config(tmp_path, hp, seed=0)
    assert (default.vllm_importance_sampling_correction, default.use_bias_correction_kl) == (True, True)  # TRL's
    authors = grpo_config(tmp_path, {**hp, **VERL_UPDATE}, seed=0)
    assert (authors.vllm_importance_sampling_correction, authors.use_bias_correction_kl) == (False, False)
    with pytest.raises(ValueError, match="advantages"):
        check_verl_update({"advantages": "dapo"})
    with pytest.raises(ValueError, match="scale_rewards"):
        check_verl_update({"advantages": "verl", "scale_rewards": "batch"})
    with pytest.raises(ValueError, match="kl_clamp"):
        check_verl_update({"kl_clamp": -1})
    assert set(VERL_UPDATE) <= set(resolve_method("ttrv", VERL_UPDATE)["hyperparameters"])


def _trainer(model, processor, tmp_path, hp_extra):
    from datasets import Dataset

    hp = {**resolve_method("ttrv")["hyperparameters"], "num_generations": 2, "n_votes": 2, "generation_batch_size": 2,
          "micro_batch_size": 2, "max_completion_length": 3, "temperature": 1.0, "rollout_backend": "hf", **hp_extra}
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": "one"}]], "id": ["x"], "answer": ["1"]})
    return trainer_module.TestTimeGRPOTrainer(model=model, reward_funcs=[GroupReward("gold", {}, 2, TASKS["math"])],
                                    args=grpo_config(tmp_path, hp, seed=0), train_dataset=dataset,
                                    processing_class=processor, n_votes=2, forbidden_token_ids=[],
                                    advantages=hp.get("advantages", "trl"), kl_clamp=hp.get("kl_clamp"))


def _micro_batch(processor, logps):
    """Two text-only completions of 3 and 2 tokens (the second right-padded) after a 2-token prompt, as vLLM
    would have returned them: the old policy's log-probs (verl's recomputed old_log_prob) shifted from the
    policy's by up to +-0.3 (ratios past the 0.2 clip) and by -1.5 on a negative-advantage token (ratio 4.5:
    the dual clip 3); vLLM's own sampling log-probs another 0.2 off, with TRL's IS ratio exp(old - sampling);
    reference log-probs 3 and -12 nats off on two tokens (k3 16.1 and 11.0: clamped to 10)."""
    ids = processor.tokenizer(["look here", "one two three four"], add_special_tokens=False)["input_ids"]
    prompt = torch.tensor([ids[0][:2], ids[0][:2]])
    completion = torch.tensor([ids[1][:3], ids[1][:2] + [processor.tokenizer.pad_token_id]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    old = logps + torch.tensor([[0.3, -0.25, 0.05], [1.5, -0.1, 0.0]])
    sampling = old + torch.tensor([[0.2, -0.2, 0.1], [-0.2, 0.2, 0.0]])
    ref = logps + torch.tensor([[3.0, 0.4, -0.2], [-12.0, 0.1, 0.0]])
    return {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
            "completion_mask": mask, "advantages": torch.tensor([0.8, -1.3]), "num_items_in_batch": mask.sum(),
            "old_per_token_logps": old, "sampling_per_token_logps": sampling, "ref_per_token_logps": ref,
            "importance_sampling_ratio": torch.exp(old - sampling).clamp(max=3.0)}


def _verl_loss(logp, batch, kl_coef=1e-3, clip=0.2, clip_c=3.0):
    """One micro-batch's loss in verl (dp_actor.py:357-391; core_algos.py compute_policy_loss, kl_penalty
    low_var_kl, agg_loss token-mean); one micro-batch per step, so no accumulation divisor."""
    mask = batch["completion_mask"].float()
    adv = batch["advantages"].unsqueeze(1).expand_as(logp)

    def token_mean(x):
        return (x * mask).sum() / mask.sum()

    ratio = torch.exp(logp - batch["old_per_token_logps"])
    clipped = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - clip, 1 + clip))
    pg = torch.where(adv < 0, torch.min(-adv * clip_c, clipped), clipped)
    kl = batch["ref_per_token_logps"] - logp
    kld = torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    return token_mean(pg) + kl_coef * token_mean(kld)


def test_one_step_loss_and_gradient_are_verls_under_the_authors_settings(tiny_model_dir, tmp_path):
    """TRL's loss on a vLLM-sampled micro-batch of 2 (TTRV's micro-batch; bnpo = verl's token-mean), with the
    authors' settings, equals verl's in value and in every parameter's gradient: no IS factor, no ratio on k3,
    k3 clamped. With TRL's defaults on the same batch it does not."""
    model, processor = load_model(str(tiny_model_dir), dtype="fp32")
    trainer = _trainer(model, processor, tmp_path, VERL_UPDATE)
    trainer.use_vllm = True  # the batch stands for vLLM rollouts: TRL's IS correction would apply if it were on
    model.eval()  # no dropout, no accumulation divisor: both losses see the same forward
    assert (trainer.beta, trainer.loss_type, trainer.args.delta) == (1e-3, "bnpo", 3.0)
    inputs = lambda b: (torch.cat([b["prompt_ids"], b["completion_ids"]], 1),
                        torch.cat([b["prompt_mask"], b["completion_mask"]], 1), 3)
    with torch.no_grad():
        logps, _, _ = trainer_module.GRPOTrainer._get_per_token_logps_and_entropies(trainer, model, *inputs(_micro_batch(
            processor, torch.zeros(2, 3))))
    batch = _micro_batch(processor, logps)
    reference = batch["ref_per_token_logps"].clone()

    def loss_and_grads(loss_fn):
        model.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    ours, our_grads = loss_and_grads(lambda: trainer._compute_loss(model, batch))
    assert torch.equal(batch["ref_per_token_logps"], reference)  # the buffered batch is left as it was

    def verl():
        logp, _, _ = trainer_module.GRPOTrainer._get_per_token_logps_and_entropies(trainer, model, *inputs(batch))
        return _verl_loss(logp, batch)

    theirs, their_grads = loss_and_grads(verl)
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-6)
    assert our_grads.keys() == their_grads.keys() and our_grads
    for name, grad in our_grads.items():
        assert torch.allclose(grad, their_grads[name], rtol=1e-4, atol=1e-7), name

    # TRL's defaults on the same batch: IS factor on the policy loss, ratio on k3, no clamp
    trainer.vllm_importance_sampling_correction, trainer.args.use_bias_correction_kl, trainer.kl_clamp = True, True, None
    trl_default, _ = loss_and_grads(lambda: trainer._compute_loss(model, batch))
    assert abs(trl_default.item() - theirs.item()) > 1e-3


def test_verl_decays_every_parameter_where_transformers_spares_biases_and_norms():
    """verl's AdamW takes every parameter (TTRV authors' fork fsdp_workers.py:322-327); transformers' Trainer
    leaves out biases and LayerNorm weights: of a Linear + LayerNorm, only the Linear's weight."""
    import torch.nn as nn

    from ttrl_bench.adaptation.trainer import TestTimeGRPOTrainer

    model = nn.Sequential(nn.Linear(2, 2), nn.LayerNorm(2))
    trainer = object.__new__(TestTimeGRPOTrainer)
    trainer.decay_every_parameter = False
    assert trainer.get_decay_parameter_names(model) == ["0.weight"]
    trainer.decay_every_parameter = True
    assert trainer.get_decay_parameter_names(model) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_the_authors_diversity_term_keeps_verls_residue_of_an_agreeing_group():
    """Issue 53 item 1. 32 votes, 27 "A", 3 "B", one "C", one "D"; the 16 trained all "A". The authors' reward
    (ttt_metrics.py:22-46): p = 27/32, H = -sum p ln p over the 4 answers, normalized_entropy = H / ln 4,
    rewards_en = p - 0.75 H / ln 4. verl's float32 advantages of 16 such rewards (core_algos.py:131-154, by hand
    above): +0.0561 each; the paper's p - 0.75 H lands on a float32 whose mean is exact: 0.0."""
    h = -(27 / 32 * math.log(27 / 32) + 3 / 32 * math.log(3 / 32) + 2 * (1 / 32 * math.log(1 / 32)))
    theirs, paper = 27 / 32 - 0.75 * (h / math.log(4)), 27 / 32 - 0.75 * h
    completions = [[{"role": "assistant", "content": "A"}]] * 16
    extras = [["A"] * 11 + ["B"] * 3 + ["C", "D"]] + [[]] * 15  # the 16 extra votes beside the first trained row
    columns = {"id": ["x"] * 16, "options": [["a", "b", "c", "d"]] * 16, "answer": ["A"] * 16}
    authors = resolve_method("ttrv", {"diversity_entropy": "normalized"})
    assert authors["reward_params"]["entropy"] == "normalized"
    assert resolve_method("ttrv")["reward_params"]["entropy"] == "paper"
    assert resolve_method("ttrv", {"diversity_entropy": "normalized"},
                          {"reward_params": {"entropy": "paper"}})["reward_params"]["entropy"] == "paper"
    rewards = {}
    for name, params in [("authors", authors["reward_params"]), ("paper", resolve_method("ttrv")["reward_params"])]:
        rewards[name] = GroupReward("ttrv", params, num_generations=16, reward_grid=False)(
            prompts=None, completions=completions, extra_votes=extras, **columns)
    assert rewards["authors"] == pytest.approx([theirs] * 16, abs=1e-15)
    assert rewards["paper"] == pytest.approx([paper] * 16, abs=1e-15)
    verl = verl_group_advantages(torch.tensor(rewards["authors"]), 16)
    assert torch.equal(verl, torch.stack(verl_advantages_by_hand([theirs] * 16, 16)))
    assert verl[0].item() == pytest.approx(0.0561, abs=1e-4)
    assert torch.equal(verl_group_advantages(torch.tensor(rewards["paper"]), 16), torch.zeros(16))


def test_a_non_finite_gradient_norm_skips_the_step_and_never_reaches_the_weights(demo_data, tiny_model_dir, tmp_path,
                                                                                 monkeypatch):
    """Issue 53 item 2. verl's _optimizer_step (dp_actor.py:198-212): a gradient norm that is not finite is not
    stepped (zero_grad instead). A hook makes one trainable parameter's gradient NaN in every backward; with
    rewards that differ (advantages nonzero) the run's 2 optimizer steps are both skipped: every weight equal to
    the start bit for bit (AdamW would have written NaN into them), no AdamW state, 2 skipped steps in the log."""
    monkeypatch.setattr(reward_bridge, "get_reward", lambda name, **params: Reward(
        lambda answers: [float(i % 2) for i in range(len(answers))]))
    model, processor = load_model(str(tiny_model_dir), dtype="fp32")
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 2, seed=0)
    spec = resolve_method("ttrv", {"num_generations": 4, "n_votes": 4, "generation_batch_size": 8, "micro_batch_size": 4,
                                   "max_completion_length": 2, "epochs": 1, "rollout_backend": "hf",
                                   "learning_rate": 1e-2, "kl_beta": 0.0, **VERL_UPDATE})
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    adaptation = grpo.TestTimeAdaptation(model, processor, samples, demo_data, spec, tmp_path, seed=0)
    name, poisoned = next((n, p) for n, p in model.named_parameters() if "language_model" in n and p.requires_grad)
    poisoned.register_hook(lambda grad: torch.full_like(grad, float("nan")))
    log = adaptation.run()
    assert log.attrs["optimizer_steps"] == 2 and log.attrs["skipped_steps"] == 2
    assert all(torch.equal(p, start[n]) for n, p in model.named_parameters()), name
    assert not adaptation.trainer.optimizer.state
