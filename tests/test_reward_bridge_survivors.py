"""Issue 39: adaptation/reward_bridge.py survivors of the sixth session's mutmut run (stopped unfinished: these
are the functions it reached), by hand-worked values: TRL's conversational completions read as text, the
per-process gather (one process: as is; more: each argument gathered, a dict per key, None kept), and the
per-group training-log statistics at their branches (unparsable pooled or never voting, object lists compared
key-order-free)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from test_adaptation import _completions  # TRL's conversational completions of the texts
from ttrl_bench.adaptation import reward_bridge
from ttrl_bench.adaptation.reward_bridge import GroupReward, completion_text


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
