"""adaptation/losses.py, model-free: the MEMO loss with K != T != V, the answer-token mask at the
answer's edges, Appendix C.1's SFT loss; each value worked by hand in the docstring."""

from __future__ import annotations

import re

import pytest
import torch

from ttrl_bench.adaptation import losses


def test_memo_loss_with_three_copies_two_positions_and_four_tokens():
    """K = 3 copies, T = 2 positions, V = 4 tokens (no two sizes equal, so no axis can stand in for
    another). Position 0 is masked out (copies that disagree completely: adds nothing). Position 1:
    p1 = (.7, .1, .1, .1), p2 = (.1, .7, .1, .1), p3 = (.1, .1, .7, .1), p_bar = (.3, .3, .3, .1).
    KL(p1 || p_bar) = .7 ln(.7 / .3) + 2 * .1 ln(.1 / .3) + .1 ln 1 = .7 * .847298 - .2 * 1.098612
    = .593109 - .219722 = .373386, the same for p2, p3 by symmetry: the mean over copies is .373386.
    H(p_bar) = -(3 * .3 ln .3 + .1 ln .1) = .9 * 1.203973 + .1 * 2.302585 = 1.083576 + .230259 = 1.313834
    (check: H(p1) = .7 * .356675 + .3 * 2.302585 = .940448, and 1.313834 - .940448 = .373386)."""
    junk = torch.tensor([[6.0, 0.0, 0.0, 0.0], [0.0, 6.0, 0.0, 0.0], [0.0, 0.0, 0.0, 6.0]])
    p = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.1, 0.1, 0.7, 0.1]])
    logits = torch.stack([junk, p.log()], dim=1)  # (K, T, V) = (3, 2, 4)
    mask = torch.tensor([0.0, 1.0])
    assert losses.memo_loss(logits, mask).item() == pytest.approx(0.373386, abs=1e-6)
    assert losses.memo_loss(logits, mask, form="kl_to_mean").item() == pytest.approx(0.373386, abs=1e-6)
    assert losses.memo_loss(logits, mask, "marginal_entropy").item() == pytest.approx(1.313834, abs=1e-6)
    message = "memo form must be one of ('kl_to_mean', 'marginal_entropy'), got 'augmix'"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        losses.memo_loss(logits, mask, "augmix")


def test_answer_token_mask_stops_at_the_stripped_answers_edges():
    """"<answer> [1] </answer>x": the answer is "[1]", characters 9-12 (the authors' regex strips the blanks
    around it). Tokens "<answer>" (0, 8), " " (8, 9), "[1]" (9, 12), " " (12, 13), "</answer>" (13, 22),
    "x" (22, 23): only (9, 12) overlaps [9, 12); the blank ending at 9 and the one starting at 12 only touch
    it. An empty answer ("<answer>  </answer>": span (10, 10)) is no answer: every token counts, and a
    text without an answer also gets every token (here three)."""
    offsets = [(0, 8), (8, 9), (9, 12), (12, 13), (13, 22), (22, 23)]
    assert losses.answer_token_mask("<answer> [1] </answer>x", offsets) == [0, 0, 1, 0, 0, 0]
    assert losses.answer_token_mask("<answer>  </answer>", [(0, 8), (8, 10), (10, 19)]) == [1, 1, 1]
    assert losses.answer_token_mask("no tags", [(0, 2), (2, 7), (7, 7)]) == [1, 1, 1]

def test_sft_loss_of_a_batch_of_two_sequences_reads_each_tokens_own_probability():
    """Appendix C.1's SFT objective on logits (B, T, V) = (2, 2, 3), every position p = (.5, .3, .2), targets
    [[0, 2], [1, 0]], all positions masked in: -(ln .5 + ln .2 + ln .3 + ln .5) = .693147 + 1.609438 + 1.203973
    + .693147 = 4.199705. The softmax is over the vocabulary (over the two positions it would be .5 each: 4 ln 2),
    one probability per token (not one per token and position pair: twice the sum)."""
    logits = torch.tensor([0.5, 0.3, 0.2]).log().expand(2, 2, 3)
    loss = losses.sft_loss(logits, torch.tensor([[0, 2], [1, 0]]), torch.ones(2, 2))
    assert loss.item() == pytest.approx(4.199705, abs=1e-5)
    half = losses.sft_loss(logits, torch.tensor([[0, 2], [1, 0]]), torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    assert half.item() == pytest.approx(2 * 0.693147, abs=1e-5)
