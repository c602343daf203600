"""adaptation/reward_bridge.py, by hand-worked values: TRL's conversational completions read as text, the
per-process gather (one process: as is; more: each argument gathered, a dict per key, None kept), and the
per-group training-log statistics at their branches (unparsable pooled or never voting, object lists compared
key-order-free).

`GroupReward` (`__init__`, `_score`), through the reward TRL calls: DARE's
uncertainties (the bridge's defaults "vocab" and micro-batch 8, or its own "uncertainty" reward param; the policy's
forward, a stand-in, run on the group's row and every vote's ids, extras included) in DARE's rewards; T3RL's texts
and options (a rollout's claim checked against its option's text by the arithmetic verifier) and its verifier
records (step from the trainer or the records so far, sample, rollout, answer, decision), kept over calls;
VR-TTRL's format rewards added under the reward's non_repeat scope; the record's reward_std (population std over every
reward of the call), its seconds (a stand-in clock) and its nan length without completion ids."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from tests.support.adaptation import _completions  # TRL's conversational completions of the texts
from ttrl_bench.adaptation import reward_bridge
from ttrl_bench.adaptation.reward_bridge import GroupReward, completion_text
from transformers import Qwen2VLConfig
from ttrl_bench.adaptation.reward_bridge import SplitGroupError


def test_a_conversational_completion_joins_its_text_parts_and_drops_the_rest():
    assert completion_text([{"role": "assistant", "content": "(A"}, {"role": "assistant", "content": ")"}]) == "(A)"
    assert completion_text([{"role": "assistant", "content": "B"},
                            {"role": "assistant", "content": [{"type": "image"}]}]) == "B"
    assert completion_text("plain") == "plain"


def test_gathered_is_the_identity_on_one_process_and_gathers_each_argument_on_more(monkeypatch):
    values = ([1, 2], {"ids": (3,)}, None)
    monkeypatch.setattr(reward_bridge, "process_state", lambda: SimpleNamespace(num_processes=1))
    assert reward_bridge.gathered(*values) == values
    # two processes holding the same values: accelerate's gather_object concatenates them in process order
    monkeypatch.setattr(reward_bridge, "process_state", lambda: SimpleNamespace(num_processes=2))
    monkeypatch.setattr(reward_bridge, "gather_object", lambda items: items + items)
    assert reward_bridge.gathered(*values) == [[1, 2, 1, 2], {"ids": [3, 3]}, None]


KEYS = {"reward_mean", "answer_entropy", "majority_fraction", "label_accuracy", "unparsable_fraction",
        "rollout_accuracy"}


def test_group_statistics_with_the_unparsable_pooled_as_an_answer():
    """Votes A, A, B, unreadable; rewards 1, 1, 0, 0; gold A. Mean reward 2 / 4 = 0.5; entropy over {A: 2, B: 1,
    None: 1} = -(0.5 ln 0.5 + 2 x 0.25 ln 0.25) = 1.0397 nats; label A with 2 of 4 votes; it is right (1.0);
    1 of 4 unparsable; 2 of 4 rollouts right."""
    stats = GroupReward("majority_vote", {"unparsable": "answer"}, 4)._group_stats(["A", "A", "B", None],
                                                                                   [1.0, 1.0, 0.0, 0.0], "A")
    assert set(stats) == KEYS
    assert stats["reward_mean"] == 0.5
    assert stats["answer_entropy"] == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))
    assert (stats["majority_fraction"], stats["label_accuracy"]) == (0.5, 1.0)
    assert (stats["unparsable_fraction"], stats["rollout_accuracy"]) == (0.25, 0.5)


def test_a_group_of_unreadable_votes_elects_no_label_when_the_unparsable_gets_no_reward():
    """unparsable "no_reward" (ECHO, MM-UPT): nothing voted, so no pseudo-label: majority fraction and label
    accuracy 0, every rollout unparsable."""
    stats = GroupReward("majority_vote", {"unparsable": "no_reward"}, 2)._group_stats([None, None], [0.0, 0.0], "A")
    assert (stats["majority_fraction"], stats["label_accuracy"], stats["unparsable_fraction"]) == (0.0, 0.0, 1.0)


def test_object_lists_vote_as_one_answer_whatever_their_key_order():
    """Grounding answers are lists of objects: [{"b": 1, "a": 2}] and [{"a": 2, "b": 1}] are the same answer
    (2 of 3 votes) and the label; [{"a": 3}] the other. A stand-in task scores by equality with the gold."""
    same, other = [{"b": 1, "a": 2}], [{"a": 3}]
    task = SimpleNamespace(score=lambda parsed, gold: float(parsed == gold))
    stats = GroupReward("majority_vote", {"unparsable": "answer"}, 3, task=task)._group_stats(
        [same, [{"a": 2, "b": 1}], other], [1.0, 1.0, 0.0], [{"a": 2, "b": 1}])
    assert stats["majority_fraction"] == pytest.approx(2 / 3)
    assert (stats["label_accuracy"], stats["rollout_accuracy"]) == (1.0, pytest.approx(2 / 3))


def test_unreadable_votes_pooled_as_an_answer_elect_it():
    """unparsable "answer" (TTRV, the authors' "" answer): two unreadable votes are 2 of 2 for the unreadable
    label, which is never right."""
    stats = GroupReward("majority_vote", {"unparsable": "answer"}, 2)._group_stats([None, None], [1.0, 1.0], "A")
    assert (stats["majority_fraction"], stats["label_accuracy"]) == (1.0, 0.0)


def test_a_group_mixing_prompts_is_refused_with_its_completion_range():
    reward = GroupReward("majority_vote", {}, num_generations=2)
    with pytest.raises(reward_bridge.SplitGroupError) as err:
        reward(prompts=None, completions=_completions(["A", "A", "B", "C"]), id=["a", "a", "b", "c"],
               options=[["a", "b", "c", "d"]] * 4, answer=["B"] * 4)
    assert str(err.value) == "completions 2..3 mix prompts ['b', 'c']"


def test_each_group_votes_with_its_own_extra_votes_and_logs_lengths_and_the_trainers_step():
    """2 trained rollouts per prompt. Prompt x: A, A and the extra votes C, C, C, C of its rows: C wins 4 to 2, the
    A's get 0. Prompt y: B, B and no extras: 1 each (prompt x's extras are not y's). Lengths in tokens over every
    vote: x 2 + 1 + 4 x 4, y 3 + 2: 24 / 8 = 3.0. The record's step is the trainer's global_step (7)."""
    reward = GroupReward("majority_vote", {}, num_generations=2)
    rewards = reward(prompts=None, completions=_completions(["A", "A", "B", "B"]), id=["x", "x", "y", "y"],
                     options=[["a", "b", "c", "d"]] * 4, answer=["B"] * 4,
                     extra_votes=[["C", "C"], ["C", "C"], [], []],
                     extra_vote_ids=[[[9] * 4, [9] * 4], [[9] * 4, [9] * 4], [], []],
                     completion_ids=[[1, 2], [1], [1, 2, 3], [1, 2]], trainer_state=SimpleNamespace(global_step=7))
    assert rewards == [0.0, 0.0, 1.0, 1.0]
    (record,) = reward.records
    assert (record["step"], record["completion_length"], record["votes"]) == (7, 3.0, 2)


# --- _score's reward paths and the record -------------------------------------------------------------------

def _policy(vocab_size: int):
    """A stand-in policy for DARE's forward: only its text config's vocabulary size is read (for the "vocab"
    normalisation); the entropies come from the patched `completion_entropies`."""
    text_config = SimpleNamespace(vocab_size=vocab_size)
    return SimpleNamespace(config=SimpleNamespace(get_text_config=lambda: text_config)), object()


def test_dare_scores_every_vote_with_its_uncertainty_from_the_policys_forward_on_the_row(monkeypatch):
    """DARE (arXiv 2601.21804) with its defaults (alpha 0.5, tau 0.05) and the bridge's defaults (uncertainty
    "vocab", micro-batch 8). 2 trained rollouts A, B with one extra vote each (A, B): the votes A, B, A, B with
    ids [1, 2], [3], [4], [5, 6] (trained first, then the extras). The forward's entropies 0.5, 0.25, 0.5, 0.25
    x log 64 over log |V| = log 64 give u(A) = 0.5, u(B) = 0.25. Weights n / u: A 2 / 0.5 = 4, B 2 / 0.25 = 8, so
    p(A) = 4 / 12 = 1/3, p(B) = 2/3, both above tau. Bonus (1 - n / N')(1 - u): A 0.5 x 0.5 = 0.25, B 0.5 x 0.75 =
    0.375. Rewards 1/3 + 0.5 x 0.25 = 11/24 and 2/3 + 0.5 x 0.375 = 41/48 (to eps 1e-8 and the 2^-16 grid)."""
    calls = []

    def completion_entropies(*args, **kwargs):
        calls.append((args, kwargs))
        return [f * math.log(64) for f in (0.5, 0.25, 0.5, 0.25)]

    monkeypatch.setattr(reward_bridge, "completion_entropies", completion_entropies)
    reward = GroupReward("dare", {}, num_generations=2)
    reward.policy = model, processor = _policy(64)
    image = object()
    rewards = reward(prompts=None, completions=_completions(["A", "B"]), id=["x", "x"], question=["Which?"] * 2,
                     image=[image] * 2, options=[["a", "b", "c", "d"]] * 2, answer=["A"] * 2,
                     completion_ids=[[1, 2], [3]], extra_votes=[["A"], ["B"]], extra_vote_ids=[[[4]], [[5, 6]]])
    assert rewards == [pytest.approx(11 / 24, abs=2**-16), pytest.approx(41 / 48, abs=2**-16)]
    # the forward runs on the group's row (question, image, no system prompt) and every vote's ids
    assert calls == [((model, processor, "Which?", image, [[1, 2], [3], [4], [5, 6]]),
                      {"system": None, "micro_batch": 8})]


def test_dares_uncertainty_normalisation_is_the_bridges_param_not_the_rewards(monkeypatch):
    """reward_params {"uncertainty": "minmax"} is the bridge's (popped before DARE is built). Votes A, B with
    entropies 1 and 3 nats: minmax u(A) = 0, u(B) = 1. Weights 1 / 1e-8 and 1 / (1 + 1e-8): p(B) ~ 1e-8 < tau
    0.05, pruned (0); A alone, p 1, bonus (1 - 1 / 1)(1 - 0) = 0: reward 1. (Under "vocab", log 64 = 4.16 nats,
    u would be 0.24 and 0.72 and B would keep a share.)"""
    monkeypatch.setattr(reward_bridge, "completion_entropies", lambda *args, **kwargs: [1.0, 3.0])
    reward = GroupReward("dare", {"uncertainty": "minmax"}, num_generations=2)
    reward.policy = _policy(64)
    rewards = reward(prompts=None, completions=_completions(["A", "B"]), id=["x", "x"], question=["Which?"] * 2,
                     image=[object()] * 2, options=[["a", "b", "c", "d"]] * 2, answer=["A"] * 2,
                     completion_ids=[[1], [2]])
    assert rewards == [1.0, 0.0]


def _t3rl_call(reward, texts, ids, trainer_state=None):
    n = len(texts)
    return reward(prompts=None, completions=_completions(texts), id=ids, options=[["7", "12", "3", "9"]] * n,
                  answer=["B"] * n, trainer_state=trainer_state)


def test_t3rl_verifies_each_rollouts_text_against_its_options_text_and_logs_every_decision():
    """T3RL (arXiv 2603.02203) with the arithmetic verifier, omega 5, 3 rollouts per prompt, options 7, 12, 3, 9.
    Call 1, no trainer state (step = records so far, 0). Prompt x: A, A and "3 * 4 = 12, so the answer is (B).":
    its claim 3 * 4 = 12 holds (computed 12.0) and B's option text is "12", so it is verified: B's mass 5 beats
    A's 2, rewards 0, 0, 1. The A's claim nothing. Prompt y: C, C, D, nothing claimed: the plain vote, 1, 1, 0.
    Call 2 at the trainer's step 7 (1 record so far): prompt z, D, D and unreadable "junk" (answer None: "no
    answer"), rewards 1, 1, 0; its decisions follow call 1's."""
    reward = GroupReward("t3rl", {}, num_generations=3)
    claim = "3 * 4 = 12, so the answer is (B)."
    assert _t3rl_call(reward, ["A", "A", claim, "C", "C", "D"], ["x"] * 3 + ["y"] * 3) == [0.0, 0.0, 1.0,
                                                                                            1.0, 1.0, 0.0]
    assert _t3rl_call(reward, ["D", "D", "junk"], ["z"] * 3, SimpleNamespace(global_step=7)) == [1.0, 1.0, 0.0]

    def unclaimed(step, sample, rollout, answer):
        return {"step": step, "sample": sample, "rollout": rollout, "answer": answer, "verified": False,
                "reason": "no computation claimed", "computed": None}

    assert reward.verifications == [
        unclaimed(0, "x", 0, "A"), unclaimed(0, "x", 1, "A"),
        {"step": 0, "sample": "x", "rollout": 2, "answer": "B", "verified": True, "reason": "claims",
         "computed": "12.0"},
        unclaimed(0, "y", 0, "C"), unclaimed(0, "y", 1, "C"), unclaimed(0, "y", 2, "D"),
        unclaimed(7, "z", 0, "D"), unclaimed(7, "z", 1, "D"),
        {"step": 7, "sample": "z", "rollout": 2, "answer": "None", "verified": False, "reason": "no answer",
         "computed": None}]


GROUNDING_TEXT = ('<think>One cup. One cup. One cup.</think> <answer>[{"bbox_2d": [0, 0, 9, 9], "point_2d": [4, 4]}]'
                  '</answer>')


def test_grounding_rewards_add_the_format_rewards_under_the_rewards_non_repeat_scope():
    """VR-TTRL consensus with non_repeat "thinking" on two identical rollouts (GROUNDING_TEXT). Consensus: each
    answer against the other, same box and point (IoU 1 > 0.5, L1 0 < 10, distance 0 < 30, point (4, 4) inside
    its box): 3 of 3 tests, reward 3. Format: framed <think>...</think> <answer>...</answer> 1; one object with
    a 4-number box and a 2-number point 2 / 1 = 2; non-repeat over the thinking "One cup" x 3 (2 repeats) 0 (over
    the whole output it would be 1: the answer piece differs, 1 repeat). 3 + (1 + 2 + 0) = 6 each."""
    reward = GroupReward("vr_ttrl_consensus", {"non_repeat": "thinking"}, num_generations=2,
                         task=reward_bridge.TASKS["grounding"])
    rewards = reward(prompts=None, completions=_completions([GROUNDING_TEXT] * 2), id=["g", "g"],
                     boxes=[[[0, 0, 9, 9]]] * 2, points=[[[4, 4]]] * 2, width=[100] * 2, height=[100] * 2)
    assert rewards == [6.0, 6.0]


def test_the_logged_reward_std_is_the_population_std_over_every_reward_of_the_call():
    """Majority vote, 3 rollouts per prompt. x: A, A, B -> 1, 1, 0; y: C, C, C -> 1, 1, 1. Over all six rewards:
    mean 5/6, squared deviations 5 x (1/6)^2 + (5/6)^2 = 30/36, over 6: 5/36, std sqrt(5) / 6 = 0.3727 (the mean
    of the groups' own stds would be (sqrt(2) / 3 + 0) / 2 = 0.2357)."""
    reward = GroupReward("majority_vote", {}, num_generations=3)
    assert reward.__name__ == "majority_vote"  # TRL names the logged reward column after the function's __name__
    rewards = reward(prompts=None, completions=_completions(["A", "A", "B", "C", "C", "C"]), id=["x"] * 3 + ["y"] * 3,
                     options=[["a", "b", "c", "d"]] * 6, answer=["A"] * 6)
    assert rewards == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert reward.records[0]["reward_std"] == pytest.approx(math.sqrt(5) / 6)


def test_without_completion_ids_the_length_is_nan_and_seconds_run_from_the_previous_call(monkeypatch):
    """A stand-in clock reads 10.0 when the reward is built, 12.5 at the first call's end, 16.0 at the second's:
    seconds 2.5 and 3.5 (each from the previous reading). No completion ids: the length is unknown (nan)."""
    monkeypatch.setattr(reward_bridge, "time", SimpleNamespace(perf_counter=iter([10.0, 12.5, 16.0]).__next__))
    reward = GroupReward("majority_vote", {}, num_generations=2)
    for _ in range(2):
        reward(prompts=None, completions=_completions(["A", "B"]), id=["x", "x"], options=[["a", "b"]] * 2,
               answer=["A"] * 2)
    assert [r["seconds"] for r in reward.records] == [2.5, 3.5]
    assert math.isnan(reward.records[0]["completion_length"])


def test_t3rls_logged_pseudo_label_is_never_the_unreadable_answer():
    """T3RL's weighted vote never elects an unreadable answer, and the training log's pseudo-label follows it: x has
    three unreadable rollouts and two "(B)" (B correct, nothing claimed): rewards 0, 0, 0, 1, 1; the logged label is
    B, held by 2 of 5 votes (majority_fraction 0.4, not the unreadable's 3 of 5) and correct (label_accuracy 1)."""
    reward = GroupReward("t3rl", {}, num_generations=5)
    assert _t3rl_call(reward, ["junk", "junk", "junk", "(B)", "(B)"], ["x"] * 5) == [0.0, 0.0, 0.0, 1.0, 1.0]
    (record,) = reward.records
    assert (record["majority_fraction"], record["label_accuracy"], record["unparsable_fraction"]) == (0.4, 1.0, 0.6)



def test_dares_uncertainties_run_the_policy_on_the_prompts_question_image_and_system(monkeypatch):
    """The forward gets the row's question, image and system prompt, the group's completion ids and the
    reward's micro-batch; its entropies are divided by log |V| of the text config (a Qwen2-VL config whose
    text vocabulary is 64): log(64) / 2 -> 0.5, 2 log(64) -> 1 (clipped)."""
    calls = []

    def completion_entropies(*args, **kwargs):
        calls.append((args, kwargs))
        return [math.log(64) / 2, 2 * math.log(64)]

    monkeypatch.setattr(reward_bridge, "completion_entropies", completion_entropies)
    model = SimpleNamespace(config=Qwen2VLConfig(text_config={"vocab_size": 64}))
    processor, image = object(), object()
    fake = SimpleNamespace(policy=(model, processor), micro_batch=3, uncertainty_norm="vocab")
    row = {"question": "What is shown?", "image": image, "system": "Answer briefly."}
    assert GroupReward._uncertainties(fake, row, [[1, 2], [3]]) == pytest.approx([0.5, 1.0])
    assert calls == [((model, processor, "What is shown?", image, [[1, 2], [3]]),
                      {"system": "Answer briefly.", "micro_batch": 3})]


def test_a_reward_that_needs_logprobs_gets_every_votes_token_statistics_and_the_image(monkeypatch):
    """A `needs_logprobs` reward (docs/extending.md's hooks): the image column reaches the bridge's scoring (TRL's
    columns keep it), the forward runs on the row's question, image and system with the group's completion ids,
    and the reward is called with its token_logprobs and token_entropies as the forward returned them."""
    from ttrl_bench.rewards.registry import Reward

    calls, seen = [], []

    def completion_token_statistics(*args, **kwargs):
        calls.append((args, kwargs))
        return [[-0.5, -1.0], [0.0]], [[0.2, 0.3], [0.0]]

    def fn(answers, token_logprobs, token_entropies):
        seen.append((answers, token_logprobs, token_entropies))
        return [1.0, 0.0]

    monkeypatch.setattr(reward_bridge, "completion_token_statistics", completion_token_statistics)
    monkeypatch.setattr(reward_bridge, "get_reward", lambda name, **params: Reward(fn, needs_logprobs=True))
    bridge = GroupReward("sees_the_model", {}, num_generations=2, micro_batch=3)
    model, processor, image = object(), object(), object()
    bridge.policy = (model, processor)
    rewards = bridge(["p", "p"], ["A", "B"], completion_ids=[[1, 2], [3]], id=["s1", "s1"], answer=["A", "A"],
                     question=["What is shown?"] * 2, image=[image, image], system=["Answer briefly."] * 2,
                     options=[["one", "two"]] * 2)
    assert rewards == [1.0, 0.0]
    assert calls == [((model, processor, "What is shown?", image, [[1, 2], [3]]),
                      {"system": "Answer briefly.", "micro_batch": 3})]
    assert seen == [(["A", "B"], [[-0.5, -1.0], [0.0]], [[0.2, 0.3], [0.0]])]


def test_group_reward_parses_and_scores_each_group():
    reward = GroupReward("majority_vote", {}, num_generations=4)
    options = [["zero", "one", "two", "three"]] * 8
    rewards = reward(
        prompts=None,
        completions=_completions(["A", "A", "B", "junk", "two", "C", "D", "C"]),
        id=["x"] * 4 + ["y"] * 4,
        options=options,
        answer=["A"] * 4 + ["D"] * 4,
    )
    # group x: majority A; group y: "two" is option C, so C wins 3 to 1
    assert rewards == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    record = reward.records[0]
    assert record["rollout_accuracy"] == pytest.approx((2 / 4 + 1 / 4) / 2)
    assert record["majority_fraction"] == pytest.approx((2 / 4 + 3 / 4) / 2)
    assert record["unparsable_fraction"] == pytest.approx((1 / 4 + 0) / 2)
    # the majority answer is right in x (A, gold A), wrong in y (C, gold D): the authors' label_accuracy
    assert record["label_accuracy"] == pytest.approx((1 + 0) / 2)


@pytest.mark.parametrize("unparsable, majority, label_right", [
    # "junk", "7", "7?" are unparsable: with the authors' convention "" wins the vote 3 to 1 (ratio 3/4)
    # and is never right; with no_reward the label is A, the only parsed answer (1 of 4 votes), right
    ("answer", 3 / 4, 0.0),
    ("no_reward", 1 / 4, 1.0),
])
def test_logged_pseudo_label_follows_the_reward_convention(unparsable, majority, label_right):
    reward = GroupReward("majority_vote", {"unparsable": unparsable}, num_generations=4)
    reward(prompts=None, completions=_completions(["junk", "A", "7", "7?"]), id=["x"] * 4,
           options=[["zero", "one", "two", "three"]] * 4, answer=["A"] * 4)
    assert reward.records[0]["majority_fraction"] == pytest.approx(majority)
    assert reward.records[0]["label_accuracy"] == label_right


def test_dare_logs_its_pseudo_label_among_parsed_answers():
    """DARE gives unparsable answers no mass (voting.dare), so its logged pseudo-label is the majority of the
    parsed answers; TTRV's preset keeps the authors' convention, where "" may win the vote."""
    assert GroupReward("dare", {}, num_generations=4).unparsable == "no_reward"
    assert GroupReward("ttrv", {}, num_generations=4).unparsable == "answer"  # the authors' code


def test_split_group_is_refused():
    reward = GroupReward("ttrv", {}, num_generations=4)
    with pytest.raises(SplitGroupError, match="mix prompts"):
        reward(prompts=None, completions=_completions(["A"] * 4), id=["x", "x", "y", "y"],
               options=[["a", "b", "c", "d"]] * 4, answer=["A"] * 4)
    with pytest.raises(SplitGroupError, match="multiple of N=4"):
        reward(prompts=None, completions=_completions(["A"] * 6), id=["x"] * 6,
               options=[["a", "b", "c", "d"]] * 6, answer=["A"] * 6)


def test_the_reward_votes_on_every_rollout_and_rewards_the_trained_ones():
    """Vote on 8, train on the first 4 (TTRV logs: 32 / 16). Over the 8 votes B wins 5 to 3, so the
    trained A's get 0; voting on the 4 trained alone would have made A the label. Each trained row
    brings the one extra vote sampled from its prompt next to it (trainer._generate)."""
    reward = GroupReward("majority_vote", {}, num_generations=4)
    trained = ["A", "A", "A", "B"]
    rewards = reward(prompts=None, completions=_completions(trained), id=["x"] * 4,
                     options=[["a", "b", "c", "d"]] * 4, answer=["B"] * 4, extra_votes=[["B"]] * 4,
                     extra_vote_ids=[[[1]]] * 4, completion_ids=[[1]] * 4)
    assert rewards == [0.0, 0.0, 0.0, 1.0]
    assert reward.records[0]["votes"] == 8
    assert reward.records[0]["majority_fraction"] == pytest.approx(5 / 8)
    assert reward.records[0]["rollout_accuracy"] == pytest.approx(5 / 8)
    # group y: 4 trained B's and 4 extra C's tie; a tie goes to the answer seen first (TTRL's
    # Counter.most_common): the trained ones come first, so B is the label
    rewards = reward(prompts=None, completions=_completions(trained + ["B"] * 4), id=["x"] * 4 + ["y"] * 4,
                     options=[["a", "b", "c", "d"]] * 8, answer=["B"] * 8,
                     extra_votes=[["B"]] * 4 + [["C"]] * 4, extra_vote_ids=[[[1]]] * 8, completion_ids=[[1]] * 8)
    assert rewards == [0.0, 0.0, 0.0, 1.0] + [1.0] * 4


def test_group_rewards_sit_on_a_2_to_the_minus_16_grid():
    """TTRV with alpha = 0.75 on A A A B: p(A) = 3/4, H = -(3/4 ln 3/4 + 1/4 ln 1/4) = 0.562335 nats,
    r = p - 0.75 H = 0.328249 (A), -0.171751 (B); rounded to multiples of 2^-16: 21512 / 65536 and
    -11256 / 65536, so that TRL's float32 group mean of equal rewards is exact."""
    reward = GroupReward("ttrv", {}, num_generations=4)
    rewards = reward(prompts=None, completions=_completions(["A", "A", "A", "B"]), id=["x"] * 4,
                     options=[["a", "b", "c", "d"]] * 4, answer=["A"] * 4)
    assert rewards == [21512 / 65536] * 3 + [-11256 / 65536]
