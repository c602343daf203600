"""Issue 39: adaptation/echo.py survivors of the sixth session's mutmut run, by hand-worked values.
masked_whiten at its bounds (2 tokens, the least it whitens; 1 refused by name) and in float64 (values 10001 and
10003, whose squares a float32 sum cannot hold: 10001^2 = 100,020,001 needs 27 bits); hybrid_advantages where S
reaches past s_max (the upper clamp)."""

from __future__ import annotations

import pytest
import torch

from ttrl_bench.adaptation.echo import hybrid_advantages, masked_whiten


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
