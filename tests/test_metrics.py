import pytest

from ttrl_bench.evaluation.metrics import accuracy, smape_score


def test_accuracy_counts_unparsable_as_wrong():
    assert accuracy(["A", None, "C", "D"], ["A", "B", "C", "A"]) == 50.0


def test_accuracy_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="3 predictions but 2"):
        accuracy(["A", "B", "C"], ["A", "B"])


def test_smape_score_matches_capture_formula():
    # errors: |3-4|/(3+4) = 1/7; exact -> 0; None -> 1; |0-2|/(0+2) = 1
    # sMAPE = (1/7 + 0 + 1 + 1) / 4 = 0.535714; score = 0.464286
    assert smape_score([3, 5, None, 0], [4, 5, 6, 2]) == pytest.approx(1 - (1 / 7 + 2) / 4)


def test_smape_of_zero_against_zero_is_perfect():
    assert smape_score([0], [0]) == 1.0
