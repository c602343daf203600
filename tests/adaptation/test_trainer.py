"""TestTimeGRPOTrainer's own methods on a bare instance (no model, no TRL construction), each against what
TRL or transformers would do in its place, worked by hand (issue 39, mutation testing: the tiny-VLM runs
that reach these methods are too slow for mutmut's selection, and its survivors showed what they leave
unpinned). A bare instance (object.__new__) is a real TestTimeGRPOTrainer, so the methods' super()
calls reach TRL's and transformers' own code; the parent's `_generate` is stood in for by a recorder."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import trl.trainer.grpo_trainer as trl_grpo_trainer
from trl import GRPOTrainer

from ttrl_bench.adaptation import placement
from ttrl_bench.adaptation import trainer as trainer_module
from ttrl_bench.adaptation.trainer import PlaceholderInRolloutError

from tests.support.adaptation import learning_rates  # the lr of each optimizer step under a schedule


def bare_trainer(**attrs) -> trainer_module.TestTimeGRPOTrainer:
    trainer = object.__new__(trainer_module.TestTimeGRPOTrainer)
    for name, value in attrs.items():
        setattr(trainer, name, value)
    return trainer


def scheduled(per: str, own_optimizer: bool):
    """create_scheduler(4 steps) of a trainer scheduling per `per` over a linear schedule without warm-up, a round
    being 2 micro-batches of 1 optimizer step each; (trainer, schedule, the lr of each of the 4 steps)."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    args = SimpleNamespace(lr_scheduler_type="linear", lr_scheduler_kwargs={}, warmup_steps=0, steps_per_generation=2,
                           gradient_accumulation_steps=1, get_warmup_steps=lambda steps: 0)
    trainer = bare_trainer(lr_schedule_per=per, lr_scheduler=None, optimizer=optimizer if own_optimizer else None,
                           num_iterations=1, args=args)
    schedule = trainer.create_scheduler(4, optimizer)
    return trainer, schedule, learning_rates(schedule, optimizer, 4)


def test_a_step_schedule_is_transformers_own_on_the_optimizer_it_is_handed():
    # the trainer's own optimizer unset: the schedule must drive the one it is handed (transformers hands the
    # unwrapped optimizer under SageMaker's fp16)
    trainer, schedule, rates = scheduled("step", own_optimizer=False)
    assert rates == [1.0, 0.75, 0.5, 0.25]  # linear decay over 4 steps: 1 - t / 4
    assert trainer.lr_scheduler is schedule and trainer._created_lr_scheduler is True


def test_a_round_schedule_holds_each_rounds_lr_and_is_made_once_per_training_run():
    trainer, schedule, rates = scheduled("round", own_optimizer=True)
    # 4 steps = 2 rounds of 2: linear over 2 rounds (1, 0.5), each held for its round's 2 steps
    assert rates == [1.0, 1.0, 0.5, 0.5]
    # transformers resets a scheduler it was told it created at the next train() (trainer.py
    # `_prepare_for_training`: `if self._created_lr_scheduler: self.lr_scheduler = None`), so a restarted run
    # (grpo.TestTimeAdaptation._start_over) schedules anew instead of going on from the last run's step
    assert trainer.lr_scheduler is schedule and trainer._created_lr_scheduler is True
    # within one run a scheduler already made is kept
    assert trainer.create_scheduler(4, trainer.optimizer) is schedule


def test_the_train_sampler_draws_the_dataset_it_is_handed_shuffled_by_data_seed_where_one_is_set():
    def drawn(data_seed, dataset=tuple(range(6))):
        trainer = bare_trainer(train_dataset=list(range(100)), num_generations=2, num_iterations=1,
                               shuffle_dataset=True,
                               args=SimpleNamespace(generation_batch_size=4, steps_per_generation=1, seed=0,
                                                    data_seed=data_seed))
        return list(trainer._get_train_sampler(list(dataset)))

    def expected(seed):
        # TRL's RepeatSampler: a permutation of the 6 samples from a generator seeded `seed`, batches of
        # 4 // 2 = 2 prompts, each prompt twice in a row (its group)
        order = torch.randperm(6, generator=torch.Generator().manual_seed(seed)).tolist()
        return [index for index in order for _ in range(2)]

    assert expected(0) != expected(1)  # the two seeds draw different orders
    # verl shuffles with seed 1 whatever the run's seed (data_seed); without one, TRL's run seed (0) draws
    assert drawn(1) == expected(1) and drawn(1) == drawn(1)
    assert drawn(None) == expected(0)
    assert len(drawn(1)) == 12  # the 6 samples handed over, not the trainer's 100


def parent_generate(outputs: dict, calls: list):
    """GRPOTrainer._generate's stand-in: records (prompts, num_generations) and returns outputs[len(prompts)]."""
    def generate(self, prompts):
        calls.append((list(prompts), self.num_generations))
        return outputs[len(prompts)]
    return generate


def rollouts(n: int, forbidden_at: int | None = None, tool_images: bool = False):
    """TRL's 8 per-round values for n samples: prompt i has i + 1 tokens, completion i is token 10 + i."""
    completion_ids = [[10 + i] for i in range(n)]
    if forbidden_at is not None:
        completion_ids[forbidden_at] = [10, 99]
    return ([[1] * (i + 1) for i in range(n)], completion_ids, [[1] for _ in range(n)],
            [[{"role": "assistant", "content": f"c{i}"}] for i in range(n)], [[-0.1 * i] for i in range(n)],
            {"per_sample": [f"x{i}" for i in range(n)], "short": ["s"], "scalar": 5},
            [f"img{i}" for i in range(n)], [f"tool{i}" for i in range(n)] if tool_images else None)


@pytest.mark.parametrize("training, n_votes", [(True, 2), (False, 4)])
def test_votes_equal_to_the_trained_rollouts_or_an_evaluation_round_are_trls_own_generation(training, n_votes,
                                                                                           monkeypatch):
    out, calls = rollouts(2), []
    monkeypatch.setattr(GRPOTrainer, "_generate", parent_generate({2: out}, calls))
    trainer = bare_trainer(model=SimpleNamespace(training=training), num_generations=2, n_votes=n_votes,
                           forbidden_token_ids={99}, trained_votes="first")
    assert trainer._generate_votes(["p", "p"]) is out
    assert calls == [(["p", "p"], 2)]
    # a placeholder that slipped past sampling is refused whichever path generated it
    monkeypatch.setattr(GRPOTrainer, "_generate", parent_generate({2: rollouts(2, forbidden_at=1)}, []))
    with pytest.raises(PlaceholderInRolloutError) as refused:
        trainer._generate_votes(["p", "p"])
    assert str(refused.value) == (
        "rollout 1 contains forbidden token id(s) [99] (image / video placeholders or ids past the tokenizer) although "
        "they are forbidden at sampling; the training forward would mismatch image features and tokens")


def test_each_trained_rollout_brings_its_extra_votes_from_the_same_generation(monkeypatch):
    calls = []
    monkeypatch.setattr(GRPOTrainer, "_generate", parent_generate({4: rollouts(4, tool_images=True)}, calls))
    trainer = bare_trainer(model=SimpleNamespace(training=True), num_generations=2, n_votes=4,
                           forbidden_token_ids={99}, trained_votes="first")
    prompt_ids, completion_ids, tool_mask, completions, logprobs, extra, images, tool_images = (
        trainer._generate_votes(["p", "p"]))
    # n_votes / num_generations = 2 copies of each prompt, sampled while TRL's num_generations says 2 (its vLLM
    # server mode samples a run of identical prompts at once), then put back
    assert calls == [(["p", "p", "p", "p"], 2)] and trainer.num_generations == 2
    # samples 0 and 2 (the first of each row) are trained, 1 and 3 only vote
    assert (prompt_ids, completion_ids, tool_mask) == ([[1], [1, 1, 1]], [[10], [12]], [[1], [1]])
    assert completions == [[{"role": "assistant", "content": "c0"}], [{"role": "assistant", "content": "c2"}]]
    assert logprobs == [[-0.0], [-0.2]] and images == ["img0", "img2"] and tool_images == ["tool0", "tool2"]
    assert extra == {"per_sample": ["x0", "x2"], "short": ["s"], "scalar": 5,
                     "extra_votes": [["c1"], ["c3"]], "extra_vote_ids": [[[11]], [[13]]]}
    monkeypatch.setattr(GRPOTrainer, "_generate", parent_generate({4: rollouts(4, forbidden_at=3)}, []))
    with pytest.raises(PlaceholderInRolloutError, match=r"rollout 3 "):  # an extra vote's placeholder too
        trainer._generate_votes(["p", "p"])


def test_verls_trained_votes_are_moved_to_the_front_of_their_rows_before_the_first_is_taken(monkeypatch):
    monkeypatch.setattr(GRPOTrainer, "_generate", parent_generate({4: rollouts(4)}, []))
    orders = []

    def vote_order(lengths, copies):  # vote_selection's choice stood in for: sample 1 trained in row 0, 3 in row 1
        orders.append((lengths, copies))
        return [1, 0, 3, 2]

    trainer = bare_trainer(model=SimpleNamespace(training=True), num_generations=2, n_votes=4,
                           forbidden_token_ids={99}, trained_votes="verl", _verl_vote_order=vote_order)
    prompt_ids, completion_ids, tool_mask, completions, logprobs, extra, images, tool_images = (
        trainer._generate_votes(["p", "p"]))
    # verl chooses by each sample's prompt + completion length: (i + 1) + 1
    assert orders == [([2, 3, 4, 5], 2)]
    assert (prompt_ids, completion_ids, tool_mask) == ([[1, 1], [1, 1, 1, 1]], [[11], [13]], [[1], [1]])
    assert completions == [[{"role": "assistant", "content": "c1"}], [{"role": "assistant", "content": "c3"}]]
    assert logprobs == [[-0.1], [-0.30000000000000004]] and images == ["img1", "img3"] and tool_images is None
    # per-sample extras follow the samples; a list of another length and a scalar are the round's own
    assert extra == {"per_sample": ["x1", "x3"], "short": ["s"], "scalar": 5,
                     "extra_votes": [["c0"], ["c2"]], "extra_vote_ids": [[[10]], [[12]]]}


def test_the_rewards_trl_computes_are_returned_and_kept_for_verls_advantages(monkeypatch):
    rewards = torch.tensor([[1.0], [0.0]])
    calls = []

    def parent(self, inputs, prompts, completions, completion_ids_list):
        calls.append((inputs, prompts, completions, completion_ids_list))
        return rewards

    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", parent)
    trainer = bare_trainer()
    assert trainer._calculate_rewards(["in"], ["p"], ["c"], [[7]]) is rewards
    assert calls == [(["in"], ["p"], ["c"], [[7]])] and trainer._gathered_rewards_per_func is rewards


@pytest.mark.parametrize("rule, training, replaced", [("verl", True, True), ("verl", False, False), ("trl", True, False)])
def test_verls_advantages_replace_trls_only_in_training_under_advantages_verl(rule, training, replaced, monkeypatch):
    trl_advantages = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions",
                        lambda self, inputs: {"advantages": trl_advantages.clone(), "inputs": inputs})
    # one group of 4 with rewards 1, 1, 1, 0: mean 0.75, unbiased std 0.5 (verl's (r - mean) / (std + 1e-6))
    trainer = bare_trainer(advantage_rule=rule, model=SimpleNamespace(training=training), update=None,
                           _gathered_rewards_per_func=torch.tensor([[1.0], [1.0], [1.0], [0.0]]),
                           reward_weights=torch.tensor([1.0]), num_generations=4,
                           accelerator=SimpleNamespace(process_index=0))
    output = trainer._generate_and_score_completions("batch")
    assert output["inputs"] == "batch"
    if not replaced:  # evaluation rounds and TRL's rule keep TRL's advantages
        assert output["advantages"].tolist() == trl_advantages.tolist()
        return
    assert output["advantages"].dtype == torch.float64  # in TRL's local dtype
    assert output["advantages"].tolist() == pytest.approx([0.25 / 0.500001] * 3 + [-0.75 / 0.500001], rel=1e-6)


@pytest.mark.parametrize("with_tool_mask, adaptive_clip", [(False, True), (True, False)])
def test_echos_update_gets_the_rounds_statistics_mask_and_parameters_and_sums_over_processes(with_tool_mask,
                                                                                            adaptive_clip, monkeypatch):
    """ECHO's branch wired by hand: the policy's entropies and confidences of this round (top-k from the update),
    the completion mask times TRL's tool mask (1 where TRL has none), the update's parameters, and a reduce that
    sums over processes (accelerate's reduce, "sum"); the clip ranges and their all-process mean when
    `use_adaptive_clip`. echo.py's own arithmetic is tested in tests/adaptation/test_echo.py; here it is stood in for."""
    completion_mask, tool_mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]]), torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    trl_output = {"advantages": torch.tensor([1.0, -1.0]), "completion_mask": completion_mask}
    if with_tool_mask:
        trl_output["tool_mask"] = tool_mask
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", lambda self, inputs: trl_output)
    entropy, confidence = torch.tensor([[0.1, 0.2], [0.3, 0.4]]), torch.tensor([[0.9, 0.8], [0.7, 0.6]])
    ranges = torch.tensor([0.1, 0.3], dtype=torch.float64)
    statistics, hybrid, clip, reduced = [], [], [], []

    def entropy_and_confidence(batch, top_k):
        statistics.append((batch, top_k))
        return entropy, confidence

    def hybrid_advantages(advantages, ent, conf, mask, alpha, beta, s_max, mult_coeff, reduce):
        hybrid.append((advantages.tolist(), ent, conf, mask.tolist(), alpha, beta, s_max, mult_coeff,
                       reduce(torch.tensor(3.0)).item()))
        return "token advantages"

    def clip_ranges(conf, mask, tail_window, eps_min, eps_max, kappa):
        clip.append((conf, mask.tolist(), tail_window, eps_min, eps_max, kappa))
        return ranges

    def reduce(tensor, reduction):  # two processes holding the same value
        reduced.append(reduction)
        return tensor * 2

    monkeypatch.setattr(trainer_module, "hybrid_advantages", hybrid_advantages)
    monkeypatch.setattr(trainer_module, "adaptive_clip", clip_ranges)
    update = {"confidence_topk": 5, "alpha": 0.5, "beta": 2.0, "s_max": 3.0, "mult_coeff": 0.1,
              "use_adaptive_clip": adaptive_clip, "tail_window": 8, "eps_min": 0.05, "eps_max": 0.25, "kappa": 4.0}
    metrics = {"train": {"echo/clip_epsilon": []}}
    trainer = bare_trainer(advantage_rule="trl", model=SimpleNamespace(training=True), update=update,
                           _entropy_and_confidence=entropy_and_confidence, _metrics=metrics,
                           accelerator=SimpleNamespace(reduce=reduce, gather=lambda t: torch.cat([t, t + 0.2])))
    output = trainer._generate_and_score_completions("batch")
    mask = [[1.0, 0.0], [1.0, 0.0]] if with_tool_mask else [[1.0, 1.0], [1.0, 0.0]]
    assert statistics == [(output, 5)] and output["advantages"] == "token advantages"
    assert hybrid == [([1.0, -1.0], entropy, confidence, mask, 0.5, 2.0, 3.0, 0.1, 6.0)] and reduced == ["sum"]
    if not adaptive_clip:
        assert "clip_epsilon" not in output and metrics["train"]["echo/clip_epsilon"] == []
        return
    assert clip == [(confidence, mask, 8, 0.05, 0.25, 4.0)] and output["clip_epsilon"] is ranges
    # the logged clip range is the mean over both processes' completions: (0.1 + 0.3 + 0.3 + 0.5) / 4
    assert metrics["train"]["echo/clip_epsilon"] == [pytest.approx(0.3)]


def test_a_round_of_fp32_master_weights_samples_in_one_bf16_autocast_region(monkeypatch):
    from ttrl_bench.generation.precision import AUTOCAST_ENV

    monkeypatch.setenv(AUTOCAST_ENV, "bf16")  # the GPU's default, asked for on the CPU
    seen = []

    def votes(prompts):
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return "rollouts"

    model = torch.nn.Linear(2, 2)  # fp32 weights
    model.device = torch.device("cpu")  # as transformers' models say where they are
    trainer = SimpleNamespace(model=model, use_vllm=False, _generate_votes=votes)
    assert trainer_module.TestTimeGRPOTrainer._generate(trainer, ["p"]) == "rollouts"
    assert seen == [(True, torch.bfloat16)] and not torch.is_autocast_enabled("cpu")


def test_a_generation_error_of_a_trainer_without_vllm_is_raised_as_it_is():
    def failing(prompts):
        raise KeyError("x")

    trainer = SimpleNamespace(model=torch.nn.Linear(1, 1).to(torch.bfloat16), _generate_votes=failing)  # no use_vllm
    with pytest.raises(KeyError, match="'x'"):
        trainer_module.TestTimeGRPOTrainer._generate(trainer, ["p"])


def constructed(monkeypatch, **settings):
    """TestTimeGRPOTrainer("model", ...) with GRPOTrainer.__init__ stood in for by a recorder of what it is handed,
    which also builds TRL's colocated vLLM engine as TRL would (max_num_seqs 8), the engine stood in for too."""
    handed, engines = [], []

    def trl_init(self, *args, **kwargs):
        handed.append((args, kwargs))
        trl_grpo_trainer.VLLMGeneration(max_num_seqs=8)

    monkeypatch.setattr(GRPOTrainer, "__init__", trl_init)
    monkeypatch.setattr(placement, "trl_VLLMGeneration", lambda **kwargs: engines.append(kwargs))
    trainer = trainer_module.TestTimeGRPOTrainer("model", args=SimpleNamespace(num_generations=2), n_votes=4,
                                                 forbidden_token_ids=[9, 7], **settings)
    return trainer, handed, engines


def test_the_trainer_keeps_each_setting_it_is_given_and_hands_trl_the_rest(monkeypatch):
    trainer, handed, engines = constructed(monkeypatch, lr_schedule_per="round", advantages="verl", kl_clamp=0.5,
                                           decay_every_parameter=True, token_confidence="sampled",
                                           trained_votes="verl", update={"rule": "echo", "alpha": 0.5})
    (args, kwargs), = handed
    assert args == ("model",) and list(kwargs) == ["args"]
    # the engine TRL builds holds n_votes / num_generations = 2 requests per trained rollout: 8 x 2, an int
    assert engines == [{"max_num_seqs": 16}] and type(engines[0]["max_num_seqs"]) is int
    assert (trainer.lr_schedule_per, trainer.advantage_rule, trainer.kl_clamp, trainer.decay_every_parameter,
            trainer.token_confidence, trainer.trained_votes) == ("round", "verl", 0.5, True, "sampled", "verl")
    assert (trainer.n_votes, trainer.forbidden_token_ids, trainer._gathered_rewards_per_func) == (4, {7, 9}, None)
    assert trainer.update["alpha"] == 0.5 and trainer.update["beta"] == 1.0 and "rule" not in trainer.update


@pytest.mark.parametrize("setting, message", [
    ({"lr_schedule_per": "epoch"}, "adaptation.hyperparameters.<task>.lr_schedule_per = 'epoch'; known: step, round"),
    ({"trained_votes": "last"}, "adaptation.hyperparameters.<task>.trained_votes = 'last'; known: first, verl"),
    ({"advantages": "ppo"}, "adaptation.hyperparameters.<task>.advantages = 'ppo'; known: trl, verl"),
    ({"kl_clamp": -1.0}, "adaptation.hyperparameters.<task>.kl_clamp = -1.0; a positive bound or null"),
    ({"token_confidence": "mean"}, "adaptation.hyperparameters.<task>.token_confidence = 'mean'; known: top_k, sampled"),
    ({"update": {"rule": "ppo"}}, "unknown update rule in {'rule': 'ppo'}; known: echo"),
    ({"update": {"alpha": 1.0}}, "unknown update rule in {'alpha': 1.0}; known: echo"),
])
def test_the_trainer_refuses_an_unknown_setting_by_its_key(setting, message, monkeypatch):
    with pytest.raises(ValueError) as refused:
        constructed(monkeypatch, **setting)
    assert str(refused.value) == message


def test_echos_clip_ranges_and_the_kl_clamp_reach_trls_loss_for_that_call_only(monkeypatch):
    seen = []

    def trl_loss(self, model, inputs):
        seen.append((model, inputs, self.epsilon_low, self.epsilon_high, self._kl_clamp_inputs))
        return "loss"

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", trl_loss)
    inputs = {"ref_per_token_logps": torch.zeros(2, 3), "clip_epsilon": torch.tensor([0.1, 0.3])}
    trainer = bare_trainer(kl_clamp=0.5, beta=1.0, epsilon_low=0.2, epsilon_high=0.28, _kl_clamp_inputs=None)
    assert trainer._compute_loss("model", inputs) == "loss"
    (model, handed, low, high, target), = seen
    # under kl_clamp TRL reads a copy of the inputs, the one whose reference the policy's forward rewrites
    assert model == "model" and handed is target and handed is not inputs and handed.keys() == inputs.keys()
    assert low.tolist() == [[pytest.approx(0.1)], [pytest.approx(0.3)]] and high is low  # (B, 1) per completion
    assert (trainer.epsilon_low, trainer.epsilon_high, trainer._kl_clamp_inputs) == (0.2, 0.28, None)
    # no clamp without a bound, without a KL term (beta 0) or without reference log-probs; fixed clip ranges kept
    for settings, batch in [({"kl_clamp": None}, inputs), ({"beta": 0.0}, inputs), ({}, {"x": 1})]:
        seen.clear()
        bare = bare_trainer(**{"kl_clamp": 0.5, "beta": 1.0, "epsilon_low": 0.2, "epsilon_high": 0.28,
                               "_kl_clamp_inputs": None, **settings})
        bare._compute_loss("model", batch)
        assert seen[0][1] is batch and seen[0][4] is None
    assert seen[0][2:4] == (0.2, 0.28)

    def failing(self, model, inputs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", failing)
    with pytest.raises(RuntimeError):
        trainer._compute_loss("model", inputs)
    assert (trainer.epsilon_low, trainer.epsilon_high, trainer._kl_clamp_inputs) == (0.2, 0.28, None)


def test_the_loss_forward_clamps_its_calls_reference_and_no_later_forward_does(monkeypatch):
    logps, calls = torch.tensor([[-1.0, -2.0]]), []

    def trl_forward(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        calls.append((model, input_ids, attention_mask, logits_to_keep, args, kwargs))
        return logps, "entropies"

    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", trl_forward)
    target = {"ref_per_token_logps": torch.tensor([[-1.0, -5.0]])}
    trainer = bare_trainer(kl_clamp=1.0, _kl_clamp_inputs=target)
    out = trainer._get_per_token_logps_and_entropies("m", "ids", "mask", 2, "extra", batch_size=3)
    assert out[0] is logps and out[1] == "entropies" and calls == [("m", "ids", "mask", 2, ("extra",), {"batch_size": 3})]
    # token 1: ref - logp = 0, k3 = 0 <= 1: the reference as is. Token 2: ref - logp = -3, k3 = e^-3 + 3 - 1 = 2.05
    # > 1: logp + d with e^d - d - 1 = 1, d < 0: d = -1.84141 (bisection by hand), so -2 - 1.84141
    assert target["ref_per_token_logps"].tolist() == [[-1.0, pytest.approx(-3.84141, abs=1e-5)]]
    assert trainer._kl_clamp_inputs is None
    trainer._get_per_token_logps_and_entropies("m", "ids", "mask", 2)  # a later forward leaves it alone
    assert target["ref_per_token_logps"].tolist() == [[-1.0, pytest.approx(-3.84141, abs=1e-5)]]


def test_verl_deals_a_rounds_rollouts_into_steps_as_consecutive_chunks_of_balanced_partitions():
    """Issue 53 item 3. 8 rollouts of 2 prompts (4 each), token lengths 5 1 7 3 2 8 4 6 (prompt 1 + completion
    mask), 2 optimizer steps of 2 micro-batches of 2. verl (ray_trainer.py:1182, seqlen_balancing.py with
    equal_size) balances them into 2 partitions: sorted (length, index) pairs taken 2 at a time, the two states
    of largest spread merged, largest first -> [0, 3, 4, 5] (5+3+2+8 = 18) and [1, 2, 6, 7] (1+7+4+6 = 18); each
    GPU's mini-batches are consecutive chunks of 2 (dp_actor.py:294-300): step 0 = [0, 3] + [1, 2], step 1 =
    [4, 5] + [6, 7]; the micro-batches are TRL's consecutive pairs of that order. Lists and 0-d tensors too."""
    from ttrl_bench.adaptation.vote_selection import verl_step_order

    assert verl_step_order([5, 1, 7, 3, 2, 8, 4, 6], 2, 2) == [0, 3, 1, 2, 4, 5, 6, 7]
    lengths = torch.tensor([5, 1, 7, 3, 2, 8, 4, 6])
    batch = {"id": torch.arange(8), "name": list("abcdefgh"), "prompt_mask": torch.ones(8, 1, dtype=torch.long),
             "completion_mask": (torch.arange(8).unsqueeze(0) < (lengths - 1).unsqueeze(1)).long(),
             "num_items": torch.tensor(8), "none": None}
    args = SimpleNamespace(steps_per_generation=4, gradient_accumulation_steps=2)
    trainer = bare_trainer(step_order="verl", model=SimpleNamespace(training=True), args=args, num_iterations=1,
                           num_generations=4, _step=0, _buffered_inputs=None)
    trainer._generate_and_score_completions = lambda generation_batch: generation_batch
    first = trainer._prepare_inputs(batch)
    assert [b["id"].tolist() for b in trainer._buffered_inputs] == [[0, 3], [1, 2], [4, 5], [6, 7]]
    assert first["name"] == ["a", "d"] and first["num_items"].item() == 8 and first["none"] is None
    with pytest.raises(ValueError, match="step_order verl: 8 rollouts in 2 partitions do not split into 3 steps"):
        verl_step_order([1] * 8, 2, 3)
    with pytest.raises(ValueError, match="step_order = 'sorted'; known: shuffled, verl"):
        trainer_module.TestTimeGRPOTrainer(n_votes=1, forbidden_token_ids=[], step_order="sorted", args=args)


def test_a_run_stops_after_its_rounds_with_the_whole_runs_schedule():
    """Issue 53 item 6: ECHO's GeoQA checkpoint is round 654 (standalone_inference.py:22). A round of their
    script is 8 optimizer steps (TRL: 32 micro-batches per generation batch, 4 per step), so training stops at
    the end of step 654 x 8 = 5,232 and not one step before; the schedule is not touched (transformers'
    max_steps stays the whole run's)."""
    from transformers import TrainerControl

    from ttrl_bench.adaptation.hyperparameters import rounds_for_dataset
    from ttrl_bench.adaptation.utils import StopAfterRounds

    args = SimpleNamespace(steps_per_generation=32, gradient_accumulation_steps=4)
    stop = StopAfterRounds(654)
    for step, stops in [(5231, False), (5232, True)]:
        control = TrainerControl()
        stop.on_step_end(args, SimpleNamespace(global_step=step, max_steps=5000 * 8), control)
        assert control.should_training_stop is stops
    assert rounds_for_dataset({"geoqa": 654}, "geoqa") == 654 and rounds_for_dataset({"geoqa": 654}, "x") is None
    assert rounds_for_dataset(None, "geoqa") is None
    with pytest.raises(ValueError, match="stop_after_rounds resolves to"):
        StopAfterRounds({"geoqa": 654})
