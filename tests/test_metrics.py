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


def test_giou_ciou_by_hand():
    import numpy as np

    from ttrl_bench.evaluation.metrics import giou_ciou

    # sample 1: pred 2x2 inside gt 4x4 -> I 4, U 16, IoU .25; sample 2: disjoint 1-px masks -> I 0, U 2
    p1, g1 = np.zeros((4, 4), bool), np.ones((4, 4), bool)
    p1[:2, :2] = True
    p2, g2 = np.zeros((2, 2), bool), np.zeros((2, 2), bool)
    p2[0, 0], g2[1, 1] = True, True
    giou, ciou = giou_ciou([p1, p2], [g1, g2])
    assert giou == pytest.approx((0.25 + 0.0) / 2)
    assert ciou == pytest.approx(4 / 18)


def test_empty_prediction_of_an_empty_target_is_perfect():
    from ttrl_bench.evaluation.metrics import giou_ciou_from_counts

    assert giou_ciou_from_counts([0], [0]) == (1.0, 1.0)
