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


def test_one_partition_takes_every_sequence_and_the_single_chunk_ranks_by_length():
    """k=1 is one partition of all the indices (each sorted item is its own one-partition state, spread 0; the
    merges only add them up); k=0 is refused. A single chunk of k=2 ([2, 1]: indices 0 and 1 of lengths 2 and 1)
    is listed largest first by length, index 0 (length 2) first, not by index."""
    assert balanced_partitions([3, 1, 2], 1) == [[0, 1, 2]]
    with pytest.raises(ValueError, match="^3 sequences do not split into 0 partitions of equal count$"):
        balanced_partitions([3, 1, 2], 0)
    assert balanced_partitions([2, 1], 2) == [[0], [1]]


def test_equal_spreads_merge_the_state_whose_largest_partition_is_larger():
    """seqlen_balancing.py:79-84: of two states of equal spread the one whose largest set ranks higher (sum, then
    size, then items) pops first. Lengths ascending (index = rank), k=3, chunks C1 {6,5,2} spread 4,
    C2 {11,10,7} spread 4, C3 {15,14,13} spread 2, C4 {21,19,18} spread 3.
    1. C2 and C1 tie on spread 4; C2's largest (11) beats C1's (6): C2 pops first. Merged 11+2=13, 10+5=15,
       7+6=13 -> M1 (15; 13 = {11,2}; 13 = {7,6}: equal sums and sizes, {11,2} first as its first item has the
       larger index 5 > 3), spread 2.
    2. C4 (spread 3) pops first. M1 and C3 tie on spread 2 and on their largest sum 15; M1's largest set has 2
       items, C3's 1: M1 pops (ranking by the middle set instead, C3's 14 > 13, would take C3). Merged
       21+{7,6}=34, 19+{11,2}=32, 18+{10,5}=33 -> M2 (34, 33, 32), spread 2.
    3. M2 (largest 34) with C3: 34+13=47, 33+14=47, 32+15=47, a perfect split. The three sums and sizes tie,
       so they are listed by their items in insertion order: first items 21 (index 11), 19 (10), 18 (9):
       {21,7,6,13} = [2, 3, 6, 11], {19,11,2,15} = [0, 5, 8, 10], {18,10,5,14} = [1, 4, 7, 9].
    Same result as the authors' get_seqlen_balanced_partitions on this input. Taking C3 at step 2 would give
    sums 48, 47, 46."""
    lengths = [2, 5, 6, 7, 10, 11, 13, 14, 15, 18, 19, 21]
    partitions = balanced_partitions(lengths, 3)
    assert partitions == [[2, 3, 6, 11], [0, 5, 8, 10], [1, 4, 7, 9]]
    assert [sum(lengths[i] for i in partition) for partition in partitions] == [47, 47, 47]


def test_verl_trained_votes_refuses_more_trained_than_votes_and_allows_all():
    """trained = votes_per_prompt keeps every vote, in partition order: the reorder [0, 1, 4, 6, 2, 3, 5, 7]
    gives prompt 1 positions 0, 2, 1, 3; 3 trained of 2 votes is refused even though 8 splits into groups of 2."""
    assert verl_trained_votes(LENGTHS, votes_per_prompt=4, trained=4, partitions=2) == [[0, 1, 2, 3], [0, 2, 1, 3]]
    with pytest.raises(ValueError, match="^8 votes are not whole groups of 2 with 3 trained$"):
        verl_trained_votes(LENGTHS, votes_per_prompt=2, trained=3, partitions=2)
    with pytest.raises(ValueError, match="^7 votes are not whole groups of 4 with 2 trained$"):
        verl_trained_votes(LENGTHS[:7], votes_per_prompt=4, trained=2, partitions=1)


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



def test_the_second_process_permutes_only_its_own_prompt_and_whole_prompts_are_required(monkeypatch):
    """Two processes, 4 samples each (1 prompt x 2 rows x 2 copies): process 1 (offset 4) holds prompt 1, whose
    trained votes over the gathered round are its positions 0 and 2 (as above), so its local order is
    trained_first_order([0, 2], 4, 2) = [0, 1, 2, 3], local indices (start 4 - 4 = 0). With 2 and 4 samples per
    process, process 1 starts at sample 2, mid-prompt: refused, naming samples 2..2+4-1 = 5."""
    import accelerate.utils

    trainer = SimpleNamespace(num_generations=2)
    monkeypatch.setattr(trainer_module, "process_state", lambda: SimpleNamespace(process_index=1))
    gathered = {1: [4, 4], 4: LENGTHS}
    monkeypatch.setattr(accelerate.utils, "gather_object", lambda values: gathered[len(values)])
    assert trainer_module.TestTimeGRPOTrainer._verl_vote_order(trainer, LENGTHS[4:], copies=2) == [0, 1, 2, 3]
    gathered = {1: [2, 4]}
    with pytest.raises(ValueError) as error:
        trainer_module.TestTimeGRPOTrainer._verl_vote_order(trainer, LENGTHS[2:6], copies=2)
    assert str(error.value) == (
        "trained_votes: verl needs each prompt's 4 votes on one process; this process holds samples 2..5: give each "
        "process whole prompts (generation_batch_size a multiple of num_generations x processes) or use `first`")
