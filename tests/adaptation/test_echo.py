"""ECHO's update rule (hand-worked token advantages and clip ranges, the loss through TRL), its
presets and baselines (MM-UPT, supervised GRPO), and one step of each on a tiny model of every family."""

import math
import threading

import pytest
import torch

from tests.support.adaptation import _completions  # TRL's conversational completions of the texts
from tests.support.adaptation import ONE_STEP, half_taught, math_samples  # ECHO's tiny models taught half the answers
from ttrl_bench.adaptation import trainer as trainer_module
from ttrl_bench.adaptation.hyperparameters import check_update
from ttrl_bench.adaptation.echo import (
    LogitStatistics,
    adaptive_clip,
    hybrid_advantages,
    masked_whiten,
    tail_confidence,
    token_statistics,
)
from ttrl_bench.adaptation.config import grpo_config
from ttrl_bench.adaptation.grpo import adapt
from ttrl_bench.adaptation.layout import batch_layout, fit_to_samples
from ttrl_bench.adaptation.reward_bridge import GroupReward
from ttrl_bench.adaptation.presets import METHOD_NAMES, method_task, resolve_method
from ttrl_bench.evaluation.tasks import TASKS
from ttrl_bench.models.tiny_families import FAMILIES  # every family the configs use (ECHO: Qwen2.5-VL, Qwen3-VL)
from ttrl_bench.models.loading import load_model

ECHO_METHODS = ["echo", "mm-upt", "supervised-grpo"]


def _sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_top5_confidence_and_entropy_of_one_position():
    """p = (.4, .2, .15, .1, .1, .05): top-5 mean (1 - .05) / 5 = 0.19; H = -sum p ln p =
    .366516 + .321888 + .284568 + 2 * .230259 + .149787 = 1.583276; token 1: ln .2 = -1.609438."""
    p = torch.tensor([[[0.4, 0.2, 0.15, 0.1, 0.1, 0.05]]])
    logps, entropy, confidence = token_statistics(p.log(), torch.tensor([[1]]), top_k=5)
    assert confidence.item() == pytest.approx(0.19, abs=1e-6)
    assert entropy.item() == pytest.approx(1.583276, abs=1e-5)
    assert logps.item() == pytest.approx(-1.609438, abs=1e-6)


def test_logit_statistics_score_each_completion_token_by_the_previous_position_at_the_temperature():
    """TRL's helper reads (B, logits_to_keep) per-token fields; the model's logits at position p predict
    token p + 1, so 2 completion tokens need the last 3 positions' logits, the last one dropped. With
    temperature 2, logits 2 ln p are the distribution p again."""
    p = torch.tensor([0.4, 0.2, 0.15, 0.1, 0.1, 0.05])
    asked = {}

    class Model:
        def __call__(self, input_ids, attention_mask, logits_to_keep):
            asked["keep"] = logits_to_keep
            junk = torch.tensor([50.0, 0, 0, 0, 0, 0])  # the position after the last token: must be ignored
            logits = torch.stack([2 * p.log(), 2 * p.roll(1).log(), junk]).unsqueeze(0)
            return type("Out", (), {"logits": logits})

    stats = LogitStatistics(Model(), logits_to_keep=2, temperature=2.0, top_k=5)
    out = stats(input_ids=torch.tensor([[9, 9, 0, 0]]), attention_mask=torch.ones(1, 4), labels=None, fused_lm_head=True)
    assert asked["keep"] == 3
    # token 0 under p (.4), token 0 under p rolled by one (.05)
    assert out.log_probs[0].tolist() == pytest.approx([math.log(0.4), math.log(0.05)], abs=1e-6)
    assert out.entropy[0].tolist() == pytest.approx([1.583276, 1.583276], abs=1e-5)
    assert stats.confidence[0][0].tolist() == pytest.approx([0.19, 0.19], abs=1e-6)


# The 2 x 3 example: completion 0 has 3 tokens, completion 1 has 2 (its 3rd is padding, whose values
# must not count). Sequence advantages A = (1.0, -0.5).
#   entropy H       row 0: 1, 2, 3      row 1: 2, 2, [9]
#   confidence C    row 0: .9, .5, .7   row 1: .7, .7, [.1]
# z over the 5 real tokens, unbiased variance (verl masked_whiten):
#   H: mean 2, deviations -1, 0, 1, 0, 0, var 2 / 4 = .5, z = -1.41421, 0, 1.41421, 0, 0
#   1 - C: .1, .5, .3, .3, .3, mean .3, deviations -.2, .2, 0, 0, 0, var .08 / 4 = .02,
#          z = -1.41421, 1.41421, 0, 0, 0
# S = z(H) + z(1 - C) = -2.82843, 1.41421, 1.41421, 0, 0 -> clamp to [-2, 2]: -2, 1.41421, 1.41421, 0, 0
# A_it = A_i (1 + .1 S): row 0: 1 * (.8, 1.141421, 1.141421); row 1: -.5 * (1, 1), padding 0.
ENTROPY = torch.tensor([[1.0, 2.0, 3.0], [2.0, 2.0, 9.0]])
CONFIDENCE = torch.tensor([[0.9, 0.5, 0.7], [0.7, 0.7, 0.1]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
ADVANTAGES = torch.tensor([1.0, -0.5])


def test_hybrid_token_advantages_by_hand():
    shaped = hybrid_advantages(ADVANTAGES, ENTROPY, CONFIDENCE, MASK, alpha=1.0, beta=1.0, s_max=2.0, mult_coeff=0.1)
    assert shaped[0].tolist() == pytest.approx([0.8, 1.141421, 1.141421], abs=1e-5)
    assert shaped[1].tolist() == pytest.approx([-0.5, -0.5, 0.0], abs=1e-5)
    z = masked_whiten(ENTROPY, MASK)
    assert z[0].tolist() == pytest.approx([-math.sqrt(2), 0.0, math.sqrt(2)], abs=1e-5)
    # without the clamp, token (0, 0) gets 1 + .1 * -2.82843 = .717157
    unclamped = hybrid_advantages(ADVANTAGES, ENTROPY, CONFIDENCE, MASK, s_max=None)
    assert unclamped[0, 0].item() == pytest.approx(0.717157, abs=1e-5)
    # alpha, beta weigh the two z-scores: entropy alone (beta 0) gives row 0 1 + .1 * (-1.41421, 0, 1.41421)
    entropy_only = hybrid_advantages(ADVANTAGES, ENTROPY, CONFIDENCE, MASK, beta=0.0)
    assert entropy_only[0].tolist() == pytest.approx([0.858579, 1.0, 1.141421], abs=1e-5)
    # a = 0: TRL's sequence advantage on every real token
    plain = hybrid_advantages(ADVANTAGES, ENTROPY, CONFIDENCE, MASK, mult_coeff=0.0)
    assert plain.tolist() == [[1.0, 1.0, 1.0], [-0.5, -0.5, 0.0]]


def test_hybrid_advantages_default_to_the_authors_clamp_and_pool_both_z_scores_over_processes():
    """The 2 x 3 example above. Defaults (alpha = beta = 1, s_max = 2, a = .1; ppo_trainer.yaml `hybrid_adv`)
    clamp S(0, 0) = -2.82843 to -2: row 0 (.8, 1.141421, 1.141421) (s_max 3 would give .717157 there).
    Confidences outside [0, 1] are clamped first (core_algos.py `confidences = torch.clamp(..., 0, 1)`): 1.3 and
    -.4 in row 1 act as 1 and 0 (worked below). Split over two processes (row 0 here, row 1 elsewhere),
    `reduce` summing both processes' (count, sum, sum of squares) of each statistic, gives each row the whole
    batch's values; whitening the entropy of row 0 alone (z = -1, 0, 1) would give it (.8, 1.141421, 1.1).
    bf16 inputs give bf16 advantages, as the authors' mask cast to the entropy's dtype does (core_algos.py
    `response_mask.to(dtype=entropys.dtype)`)."""
    assert hybrid_advantages(ADVANTAGES, ENTROPY, CONFIDENCE, MASK)[0].tolist() == pytest.approx(
        [0.8, 1.141421, 1.141421], abs=1e-5)
    # clamped 1 - C = .1, .5, .3 | 0, 1: mean .38, deviations -.28, .12, -.08, -.38, .62, var .628 / 4 = .157,
    # sd .396232, z = -.706657, .302853, -.201902, -.959034, 1.564740; S = z(H) + that = -2.120870 (-> -2),
    # .302853, 1.212311 | -.959034, 1.564740; row 0: 1 + .1 S; row 1: -.5 (1 + .1 S) = -.452048, -.578237
    shaped = hybrid_advantages(ADVANTAGES, ENTROPY, torch.tensor([[0.9, 0.5, 0.7], [1.3, -0.4, 0.1]]), MASK)
    assert shaped[0].tolist() == pytest.approx([0.8, 1.030285, 1.121231], abs=1e-5)
    assert shaped[1].tolist() == pytest.approx([-0.452048, -0.578237, 0.0], abs=1e-5)
    # two "processes" (threads) holding one row each; `reduce` is an all-reduce sum over them
    # the limits only stop a hang (each wait ends once both threads arrive): room for a loaded machine
    posted, barrier = [None, None], threading.Barrier(2, timeout=120)

    def all_reduce(rank, t):
        posted[rank] = t
        barrier.wait()
        total = posted[0] + posted[1]
        barrier.wait()  # both have read before either posts its next statistic
        return total

    rows = [None, None]

    def process(rank):
        rows[rank] = hybrid_advantages(ADVANTAGES[rank : rank + 1], ENTROPY[rank : rank + 1],
                                       CONFIDENCE[rank : rank + 1], MASK[rank : rank + 1],
                                       reduce=lambda t: all_reduce(rank, t))

    threads = [threading.Thread(target=process, args=(rank,), daemon=True) for rank in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert rows[0][0].tolist() == pytest.approx([0.8, 1.141421, 1.141421], abs=1e-5)
    assert rows[1][0].tolist() == pytest.approx([-0.5, -0.5, 0.0], abs=1e-5)
    bf16 = hybrid_advantages(ADVANTAGES.bfloat16(), ENTROPY.bfloat16(), CONFIDENCE.bfloat16(), MASK.float())
    assert bf16.dtype == torch.bfloat16


def test_z_scores_pool_every_process_tokens():
    """Two processes holding one completion each standardise as the whole batch does: `reduce` adds
    the other process's (count, sum, sum of squares)."""
    whole = masked_whiten(ENTROPY, MASK)
    other = torch.tensor([2.0, 4.0, 8.0], dtype=torch.float64)  # row 1's real tokens: 2 of them, 2 + 2, 4 + 4
    half = masked_whiten(ENTROPY[:1], MASK[:1], reduce=lambda t: t + other)
    assert half[0].tolist() == pytest.approx(whole[0].tolist(), abs=1e-6)


def test_confidence_adaptive_clip_range():
    """eps = .05 + .15 sigmoid(4 (1 - C_tail)): C_tail = 1 -> .05 + .15 * .5 = .125; C_tail = 0 ->
    .05 + .15 * sigmoid(4) = .05 + .15 * .982014 = .197302."""
    ones, zeros, mask = torch.ones(1, 20), torch.zeros(1, 20), torch.ones(1, 20)
    assert adaptive_clip(ones, mask).item() == pytest.approx(0.125, abs=1e-6)
    assert adaptive_clip(zeros, mask).item() == pytest.approx(0.05 + 0.15 * _sigmoid(4), abs=1e-6)
    assert adaptive_clip(zeros, mask).item() == pytest.approx(0.197302, abs=1e-6)
    # the 2 x 3 example, window 16 > length: row 0 mean(.9, .5, .7) = .7 -> .05 + .15 sigmoid(1.2) = .165279;
    # row 1 mean(.7, .7) = .7 (the padded .1 excluded) -> .165279
    assert adaptive_clip(CONFIDENCE, MASK).tolist() == pytest.approx([0.165279, 0.165279], abs=1e-6)
    # window 2: row 0's last two real tokens (.5, .7) -> .6 -> .05 + .15 sigmoid(1.6) = .05 + .15 * .832018
    assert tail_confidence(CONFIDENCE, MASK, tail_window=2).tolist() == pytest.approx([0.6, 0.7], abs=1e-6)
    assert adaptive_clip(CONFIDENCE, MASK, tail_window=2)[0].item() == pytest.approx(0.174803, abs=1e-6)
    # a 20-token completion: only its last 16 count (4 tokens at 0, then 16 at 1 -> C_tail 1)
    late = torch.cat([torch.zeros(1, 4), torch.ones(1, 16)], dim=1)
    assert adaptive_clip(late, mask).item() == pytest.approx(0.125, abs=1e-6)


def test_token_statistics_default_to_the_authors_top_5_confidence():
    """ppo_trainer.yaml:939 `confidence_topk: 5`: with top_k left out, p = (.4, .2, .15, .1, .1, .05) gives
    the top-5 mean (1 - .05) / 5 = .19, not the top-6 mean 1 / 6 = .166667."""
    p = torch.tensor([[[0.4, 0.2, 0.15, 0.1, 0.1, 0.05]]])
    _, _, confidence = token_statistics(p.log(), torch.tensor([[1]]))
    assert confidence.item() == pytest.approx(0.19, abs=1e-6)


def test_tail_confidence_window_defaults_to_16_and_divides_by_the_tokens_it_holds():
    """core_algos.py:213-229 `_compute_tail_confidence`, ppo_trainer.yaml:936 `tail_window: 16`.
    A 17-token completion, one 0 then sixteen 1s: the last 16 are all 1 -> 1.0 (a 17-token window
    would give 16 / 17 = .941176). A one-token completion (.6, then padding .9) -> .6 / 1 = .6 (the count
    clamp is min 1, core_algos.py:226, so it only guards an empty completion, whose mean is 0 / 1 = 0)."""
    late = torch.cat([torch.zeros(1, 1), torch.ones(1, 16)], dim=1)
    assert tail_confidence(late, torch.ones(1, 17)).item() == pytest.approx(1.0, abs=1e-6)
    short = tail_confidence(torch.tensor([[0.6, 0.9], [0.8, 0.8]]), torch.tensor([[1, 0], [0, 0]]))
    assert short.tolist() == pytest.approx([0.6, 0.0], abs=1e-6)



def test_a_window_of_zero_or_less_is_the_whole_completion_and_top_k_is_at_least_one():
    """core_algos.py:217-218: `tail_window <= 0` is the whole width, so the mean over every completion token:
    (.2 + .4 + .9) / 3 = .5 (not an empty window's 0 / 1 = 0). dp_actor.py:281 `max(1, min(topk, V))`: a top-k of
    0 or less is the most likely token's probability, .4 for p = (.4, .2, .15, .1, .1, .05) (not the NaN mean of
    no values); 99 is every token, 1 / 6."""
    confidence, mask = torch.tensor([[0.2, 0.4, 0.9, 0.7]]), torch.tensor([[1, 1, 1, 0]])
    for window in (0, -3):
        assert tail_confidence(confidence, mask, window).item() == pytest.approx(0.5, abs=1e-6)
    assert tail_confidence(confidence, mask, 1).item() == pytest.approx(0.9, abs=1e-6)
    p = torch.tensor([[[0.4, 0.2, 0.15, 0.1, 0.1, 0.05]]])
    for k, expected in ((0, 0.4), (-2, 0.4), (1, 0.4), (99, 1 / 6)):
        assert token_statistics(p.log(), torch.tensor([[1]]), top_k=k)[2].item() == pytest.approx(expected, abs=1e-6)


def test_equal_token_statistics_whiten_to_zero_and_an_unknown_echo_parameter_names_the_known_ones():
    """verl's masked_whiten (torch_functional.py) adds 1e-8 to the variance before rsqrt: 4 equal entropies (.7) have
    variance 0, so every z is 0 x 1e4 = 0 (with the variance's epsilon subtracted, rsqrt(-1e-8) would make them NaN).
    check_update refuses a misspelt key naming it and the ten known ones in ppo_trainer.yaml's order."""
    z = masked_whiten(torch.full((1, 4), 0.7), torch.ones(1, 4))
    assert z.tolist() == [[0.0, 0.0, 0.0, 0.0]]
    with pytest.raises(KeyError) as refused:
        check_update({"kapa": 4.0, "alpha": 2.0})
    assert refused.value.args[0] == ("echo update: unknown parameter(s) ['kapa']; known: alpha, beta, s_max, mult_coeff, "
                                     "tail_window, confidence_topk, eps_min, eps_max, kappa, use_adaptive_clip")
    assert check_update({"alpha": 2.0})["alpha"] == 2.0 and check_update({})["kappa"] == 4.0


def test_tail_confidence_is_clamped_and_kept_in_the_confidences_dtype_and_device():
    """As core_algos.py:228-229: the mean is clamped to [0, 1] and returned in the confidence's dtype on its
    device. Means of 1.5 and -.5 (two tokens each: (1.4 + 1.6) / 2, (-.4 + -.6) / 2) -> 1.0 and 0.0; bf16
    confidences give a bf16 tail (.5 and .25 are exact in bf16); on the meta device (standing in for a GPU:
    any device but the CPU) the window is built on the mask's device and the result stays there."""
    out_of_range = torch.tensor([[1.4, 1.6], [-0.4, -0.6]])
    assert tail_confidence(out_of_range, torch.ones(2, 2)).tolist() == [1.0, 0.0]
    half = tail_confidence(torch.tensor([[0.5, 0.5], [0.25, 0.25]], dtype=torch.bfloat16), torch.ones(2, 2))
    assert half.dtype == torch.bfloat16 and half.tolist() == [0.5, 0.25]
    on_meta = tail_confidence(torch.ones(2, 3, device="meta"), torch.ones(2, 3, device="meta"))
    assert on_meta.device.type == "meta" and on_meta.shape == (2,)


def test_echo_preset_is_table_5_with_the_authors_update_defaults():
    spec = resolve_method("echo")
    hp = spec["hyperparameters"]
    assert (hp["n_votes"], hp["num_generations"], hp["learning_rate"], hp["kl_beta"]) == (64, 32, 5e-7, 1e-3)
    # Table 5: a train batch of 5 prompts, PPO mini-batch 1 prompt: 5 optimizer steps per generation batch
    assert batch_layout(hp) == {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 32,
                                "generation_batch_size": 160}
    assert spec["update"] == {"rule": "echo", "alpha": 1.0, "beta": 1.0, "s_max": 2.0, "mult_coeff": 0.1,
                              "tail_window": 16, "confidence_topk": 5, "eps_min": 0.05, "eps_max": 0.2,
                              "kappa": 4.0, "use_adaptive_clip": True}
    assert spec["reward"] == "majority_vote" and spec["reward_params"] == {"unparsable": "no_reward"}
    assert resolve_method("mm-upt")["reward"] == "majority_vote" and "update" not in resolve_method("mm-upt")
    assert resolve_method("supervised-grpo")["reward"] == "gold"
    # math answers are discrete values: the mcq family's methods (evaluation/tasks.py MathTask.family)
    assert all(m in METHOD_NAMES and method_task(m) == "mcq" for m in ECHO_METHODS)
    # fewer samples than Table 5's 5 prompts: the generation batch shrinks to the steps they fill
    assert fit_to_samples(hp, 2)["generation_batch_size"] == 2 * 32
    assert fit_to_samples(hp, 20)["generation_batch_size"] == 160
    # ablations override the update rule (ECHO Table 4: w/o CA-Clip, w/o E-SC Adv); a wrong name is refused
    no_clip = resolve_method("echo", overrides={"update": {"use_adaptive_clip": False}})["update"]
    assert no_clip["use_adaptive_clip"] is False and no_clip["rule"] == "echo"
    with pytest.raises(KeyError, match="multcoeff"):
        resolve_method("echo", overrides={"update": {"multcoeff": 0.0}})
    with pytest.raises(KeyError, match="standard update"):
        resolve_method("mm-upt", overrides={"update": {"mult_coeff": 0.0}})


def test_majority_vote_on_math_answers_ignores_unparsable_votes():
    """ECHO's vote (ttrl_utils.py `_majority_vote`) drops outputs without an answer before counting: 3
    junk outputs of 5 do not win; "\\boxed{2}" and "2" agree once normalised."""
    reward = GroupReward("majority_vote", {"unparsable": "no_reward"}, num_generations=5, task=TASKS["math"])
    texts = ["so \\boxed{2}", "the answer is 2.", "junk", "junk", "\\boxed{3}"]
    assert reward(prompts=None, completions=_completions(texts), id=["x"] * 5, answer=["3"] * 5,
                  options=[[]] * 5) == [1, 1, 0, 0, 0]


def test_supervised_reward_is_the_gold_answer():
    """Binary reward against the normalised gold answer, whatever the majority says."""
    reward = GroupReward("gold", {}, num_generations=4, task=TASKS["math"])
    texts = ["\\boxed{3.50}", "Answer: 3.5", "\\boxed{4}", "no answer here"]
    assert reward(prompts=None, completions=_completions(texts), id=["x"] * 4, answer=["$3.5$"] * 4,
                  options=[[]] * 4) == [1, 1, 0, 0]
    assert reward.records[0]["rollout_accuracy"] == pytest.approx(0.5)


def _trainer(model, processor, tmp_path, update):
    hp = {**resolve_method("echo")["hyperparameters"], "num_generations": 2, "n_votes": 2, "generation_batch_size": 2,
          "micro_batch_size": 2, "max_completion_length": 3, "kl_beta": 0.0, "rollout_backend": "hf"}
    from datasets import Dataset

    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": "one"}]], "id": ["x"], "answer": ["1"]})
    return trainer_module.TestTimeGRPOTrainer(model=model, reward_funcs=[GroupReward("gold", {}, 2, TASKS["math"])],
                                    args=grpo_config(tmp_path, hp, seed=0), train_dataset=dataset,
                                    processing_class=processor, n_votes=2, forbidden_token_ids=[], update=update)


def _batch(processor, advantages):
    """Two text-only completions of 3 and 2 tokens (the second right-padded) after a 2-token prompt;
    the sampling policy's log-probs shifted by +-0.1 so that ratios leave a .05 trust region but not .2."""
    ids = processor.tokenizer(["look here", "one two three four"], add_special_tokens=False)["input_ids"]
    prompt = torch.tensor([ids[0][:2], ids[0][:2]])
    completion = torch.tensor([ids[1][:3], ids[1][:2] + [processor.tokenizer.pad_token_id]])
    completion_mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    return {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
            "completion_mask": completion_mask, "advantages": advantages, "num_items_in_batch": completion_mask.sum()}


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_echo_loss_with_a_0_and_a_fixed_clip_is_trls_grpo_loss(loss_type, tiny_model_dir, tmp_path):
    model, processor = load_model(str(tiny_model_dir), dtype="fp32")
    trainer = _trainer(model, processor, tmp_path, {"rule": "echo", "mult_coeff": 0.0})
    trainer.loss_type = loss_type
    model.eval()  # no accumulation scaling, no dropout: the two losses see the same forward
    base = _batch(processor, ADVANTAGES)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            model, torch.cat([base["prompt_ids"], base["completion_ids"]], 1),
            torch.cat([base["prompt_mask"], base["completion_mask"]], 1), 3)
    base["old_per_token_logps"] = logps + torch.tensor([[0.1, -0.1, 0.1], [-0.1, 0.1, 0.0]])
    shaped = hybrid_advantages(ADVANTAGES, ENTROPY, CONFIDENCE, MASK, mult_coeff=0.0)
    echo = {**base, "advantages": shaped, "clip_epsilon": torch.full((2,), 0.2)}
    standard = trainer_module.GRPOTrainer._compute_loss(trainer, model, base)
    assert trainer._compute_loss(model, echo).item() == pytest.approx(standard.item(), abs=1e-7)
    assert trainer.epsilon_low == trainer.epsilon_high == 0.2  # TRL's scalar is back after the call
    if loss_type == "grpo":
        # per-completion clip ranges: the batch loss is the mean of each completion's loss at its own eps
        echo["clip_epsilon"] = torch.tensor([0.05, 0.2])
        rows = []
        for i, eps in enumerate((0.05, 0.2)):
            trainer.epsilon_low = trainer.epsilon_high = eps
            rows.append(trainer_module.GRPOTrainer._compute_loss(trainer, model, {
                k: (v[i : i + 1] if torch.is_tensor(v) and v.dim() else v) for k, v in base.items()}).item())
        trainer.epsilon_low = trainer.epsilon_high = 0.2
        assert trainer._compute_loss(model, echo).item() == pytest.approx(sum(rows) / 2, abs=1e-6)
        assert sum(rows) / 2 != pytest.approx(standard.item(), abs=1e-6)  # the .05 range clipped something


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", ECHO_METHODS)
def test_one_step_of_echo_and_its_baselines_changes_the_weights(method, family, demo_data, tiny_model_dirs, tmp_path,
                                                                monkeypatch):
    """Two prompts generated at once, one optimizer step each (Table 5's layout in small): the second
    step is off-policy, where ECHO's clip ranges act."""
    clip_ranges = []

    def spy(*args, **kwargs):
        clip_ranges.append(grpo_adaptive_clip(*args, **kwargs))
        return clip_ranges[-1]

    grpo_adaptive_clip = trainer_module.adaptive_clip
    monkeypatch.setattr(trainer_module, "adaptive_clip", spy)
    model, processor = load_model(str(tiny_model_dirs[family]), dtype="fp32")
    samples = math_samples(demo_data)
    half_taught(model, processor, samples, demo_data, monkeypatch)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    spec = resolve_method(method, {**ONE_STEP, "n_votes": 16 if method != "supervised-grpo" else 8})
    log = adapt(model, processor, samples, demo_data, spec, tmp_path, seed=0, task=TASKS["math"])
    assert log.attrs["optimizer_steps"] == 2
    assert (log["reward_std"] > 0).all() and 0 < log["rollout_accuracy"].item() < 1
    assert any(not p.detach().equal(before[n]) for n, p in model.named_parameters())
    if method == "echo":
        assert len(clip_ranges) == 1 and clip_ranges[0].shape == (16,)
        # exact bounds, no tolerance: fp32 rounding is monotone, so 0.05 + 0.15 s with the sigmoid s in [0, 1]
        # (it saturates at exactly 0 and 1) lies between fl(0.05) and fl(0.05 + 0.15) = fl(0.2), the values compared
        assert ((clip_ranges[0] >= 0.05) & (clip_ranges[0] <= 0.2)).all()
    else:
        assert clip_ranges == []


def test_ttrl_bench_lists_the_new_methods(capsys):
    from ttrl_bench.cli import build_parser

    args = build_parser().parse_args(["methods", "list"])
    args.func(args)
    rows = {line.split()[0]: line.split()[1:4] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["echo"] == ["mcq", "majority_vote", "echo"]
    assert rows["mm-upt"] == ["mcq", "majority_vote", "grpo"]
    assert rows["supervised-grpo"] == ["mcq", "gold", "grpo"]
    assert set(rows) == set(METHOD_NAMES)


def test_two_tokens_whiten_to_plus_minus_one_over_root_two():
    """[1, 3]: mean 2, unbiased variance ((1 - 2)^2 + (3 - 2)^2) / (2 - 1) = 2, z = -+1 / sqrt(2 + 1e-8)."""
    z = masked_whiten(torch.tensor([[1.0, 3.0]]), torch.ones(1, 2))
    assert z.tolist()[0] == pytest.approx([-2 ** -0.5, 2 ** -0.5], abs=1e-7)


def test_one_token_is_refused_with_its_count():
    with pytest.raises(ValueError) as err:
        masked_whiten(torch.tensor([[5.0, 7.0]]), torch.tensor([[1.0, 0.0]]))
    assert str(err.value) == "masked_whiten needs at least 2 completion tokens, got 1"


def test_the_statistics_are_taken_in_float64_and_the_result_keeps_the_values_dtype():
    """float32 [10001, 10003]: the same -+0.7071 as [1, 3] (a shift changes no z), in float32. Summed in float32 the
    squares 100,020,001 + 100,060,009 would round, and squares - n mean^2 (the variance's numerator, 2) with them."""
    z = masked_whiten(torch.tensor([[10001.0, 10003.0]]), torch.ones(1, 2))
    assert z.dtype == torch.float32
    assert z.tolist()[0] == pytest.approx([-2 ** -0.5, 2 ** -0.5], abs=1e-6)


def test_a_score_past_s_max_is_clamped_from_above():
    """One completion of 4 tokens, entropy [0, 0, 0, 1] and confidence [1, 1, 1, 0]: both whiten to z = [-0.5, -0.5,
    -0.5, 1.5] (mean 0.25, unbiased variance 0.25), S = z(H) + z(1 - C) = [-1, -1, -1, 3], clamped at s_max 2 to
    [-1, -1, -1, 2]. A = 2, a = 0.1: 2 x (1 + 0.1 S) = [1.8, 1.8, 1.8, 2.4] (2.6 unclamped)."""
    out = hybrid_advantages(torch.tensor([2.0]), torch.tensor([[0.0, 0.0, 0.0, 1.0]]),
                            torch.tensor([[1.0, 1.0, 1.0, 0.0]]), torch.ones(1, 4), s_max=2.0, mult_coeff=0.1)
    assert out.tolist()[0] == pytest.approx([1.8, 1.8, 1.8, 2.4], abs=1e-6)
