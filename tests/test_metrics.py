import pytest

from ttrl_bench.evaluation.metrics import accuracy, mme_score, pass_at_k, smape_score


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


def test_pass_at_k_by_hand():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # c / n
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2) / C(5,2)
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(3, 2, 2) == 1.0  # fewer than k wrong samples: some draw always passes
    with pytest.raises(ValueError, match="pass@k"):
        pass_at_k(3, 4, 1)


def test_mme_score_is_acc_plus_acc_plus_per_subtask():
    # OCR: image a both right, image b one of two -> acc 75, acc+ 50 -> 125
    # code_reasoning: image c one of two -> acc 50, acc+ 0 -> 50
    scores = mme_score(["OCR"] * 4 + ["code_reasoning"] * 2, ["a", "a", "b", "b", "c", "c"],
                       [True, True, True, False, False, True])
    assert scores == {"mme_perception": 125.0, "mme_cognition": 50.0, "mme_total": 175.0}
    with pytest.raises(ValueError, match="unknown MME subtask"):
        mme_score(["ocr"], ["a"], [True])
