"""Which votes are trained under `trained_votes: verl` (adaptation/vote_selection.py): verl's token-balanced
reorder of a round (TTRV authors' fork, ray_trainer.py:974-1000 and 1140-1160; seqlen_balancing.py:24-128).
The expected partitions are worked by hand below; the implementation was also compared with the authors'
seqlen_balancing.py on 3,000 random rounds (k 2, 4, 8; lengths with many ties): no difference."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ttrl_bench.adaptation import trainer as trainer_module
from ttrl_bench.adaptation.vote_selection import balanced_partitions, trained_first_order, verl_trained_votes

# Two prompts x 4 votes (prompt-major), two partitions (two prompts per round).
LENGTHS = [10, 14, 11, 20, 12, 13, 30, 15]


def test_the_balanced_partitions_worked_by_hand():
    """Sorted by (length, index) and taken two at a time: {11,10} {13,12} {15,14} {30,20}, spreads 1 1 1 10.
    The largest spread (30,20) merges with the next (spread 1, largest top: 15,14): 30+14=44 and 20+15=35;
    that (spread 9) with (13,12): 44+12=56, 35+13=48; that (spread 8) with (11,10): 56+10=66, 48+11=59.
    Partitions, largest first, as sorted indices: {30,14,12,10} = [6, 1, 4, 0], {20,15,13,11} = [3, 7, 5, 2]."""
    assert balanced_partitions(LENGTHS, 2) == [[0, 1, 4, 6], [2, 3, 5, 7]]
    assert balanced_partitions([5, 5, 5, 5], 4) == [[3], [2], [1], [0]]  # ties: the larger index ranks first
    with pytest.raises(ValueError, match="7 sequences do not split into 2"):
        balanced_partitions(LENGTHS[:7], 2)


def test_verl_trains_each_prompts_votes_in_the_first_listed_partitions():
    """Reordered [0, 1, 4, 6, 2, 3, 5, 7], regrouped by prompt: prompt 0 [0, 1, 2, 3], prompt 1 [4, 6, 5, 7];
    the first 2 of each: prompt 0's votes 0 and 1, prompt 1's votes 0 and 2 (lengths 12 and 30, not 12 and 13)."""
    assert verl_trained_votes(LENGTHS, votes_per_prompt=4, trained=2, partitions=2) == [[0, 1], [0, 2]]


def test_the_trained_votes_lead_their_rows():
    """Rows of 2 samples, the first trained: trained [0, 2] of 4 -> rows (0, 1) (2, 3); trained [1, 3] -> (1, 0) (3, 2)."""
    assert trained_first_order([0, 2], 4, 2) == [0, 1, 2, 3]
    assert trained_first_order([1, 3], 4, 2) == [1, 0, 3, 2]
    assert trained_first_order([3], 4, 4) == [3, 0, 1, 2]


def test_the_trainer_permutes_a_round_so_verls_choice_is_trained():
    """TestTimeGRPOTrainer trains the first sample of each row of `copies`: with 2 rows x 2 copies per prompt,
    prompt 0's order becomes [0, 2, 1, 3] (trained 0 and 1) and prompt 1's stays [4, 5, 6, 7] (trained 4 and 6):
    the trained samples have lengths 10, 14, 12, 30."""
    trainer = SimpleNamespace(num_generations=2)
    order = trainer_module.TestTimeGRPOTrainer._verl_vote_order(trainer, LENGTHS, copies=2)
    assert order == [0, 2, 1, 3, 4, 5, 6, 7]
    assert [LENGTHS[order[i]] for i in range(0, 8, 2)] == [10, 14, 12, 30]

