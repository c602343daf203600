import pytest

from ttrl_bench.evaluation.metrics import accuracy, mme_score, pass_at_k, smape_score


def test_accuracy_counts_unparsable_as_wrong():
    assert accuracy(["A", None, "C", "D"], ["A", "B", "C", "A"]) == 50.0


def test_accuracy_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="3 predictions but 2"):
        accuracy(["A", "B", "C"], ["A", "B"])
    with pytest.raises(ValueError, match="^accuracy of an empty set is undefined$"):
        accuracy([], [])


def test_smape_score_matches_capture_formula():
    """CAPTURe compute_smape.py `compute_mape`: per sample |v - g| / (|v| + |g|) * 100, an
    unparsable answer (-1 from `safe_string_to_int`) adds 100 and is counted; mean over all.
    errors: |3-4|/(3+4) = 1/7; exact -> 0; None -> 1; |0-2|/(0+2) = 1 (a zero count)
    sMAPE = (1/7 + 0 + 1 + 1) / 4 = 0.535714; score = 0.464286"""
    assert smape_score([3, 5, None, 0], [4, 5, 6, 2]) == pytest.approx(1 - (1 / 7 + 2) / 4)


def test_smape_negative_count_scores_like_the_unparsable_marker():
    # |-3 - 5| / (3 + 5) = 1: any negative count is as wrong as CAPTURe's -1
    assert smape_score([-3], [5]) == 0.0
    assert smape_score([-1], [5]) == smape_score([None], [5]) == 0.0


def test_smape_of_zero_against_zero_is_perfect():
    # the authors' 0 / 0 raises ZeroDivisionError; a right count of nothing scores 1 here
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


def test_empty_prediction_and_target_count_as_the_authors_evaluation():
    """VisionReasoner evaluation_segmentation.py `compute_iou`: union 0 -> (0, 0);
    calculate_iou_with_bbox.py: `iou = intersection / union if union > 0 else 0`, kept in the mean;
    cIoU `total_intersection / total_union if total_union > 0 else 0`.
    Samples (I, U): (4, 16) IoU .25; (0, 0) both empty; (0, 9) empty prediction (or unparsable:
    union = the gold mask) -> gIoU (.25 + 0 + 0) / 3, cIoU 4 / 25."""
    from ttrl_bench.evaluation.metrics import giou_ciou_from_counts

    assert giou_ciou_from_counts([4, 0, 0], [16, 0, 9]) == (pytest.approx(0.25 / 3), pytest.approx(4 / 25))
    assert giou_ciou_from_counts([0], [0]) == (0.0, 0.0)


def test_empty_mask_options_lisa_and_seg_zero_skip():
    """Departures: "one" = LISA (`acc_iou[union == 0] += 1.0`) -> gIoU (.25 + 1 + 0) / 3;
    "skip" = Seg-Zero evaluation.py (the bare `return 0` fails to unpack, the sample is dropped)
    -> gIoU (.25 + 0) / 2. cIoU 4 / 25 in both: the empty sample adds nothing to either sum."""
    from ttrl_bench.evaluation.metrics import giou_ciou_from_counts

    assert giou_ciou_from_counts([4, 0, 0], [16, 0, 9], "one") == (pytest.approx(1.25 / 3), pytest.approx(4 / 25))
    assert giou_ciou_from_counts([4, 0, 0], [16, 0, 9], "skip") == (pytest.approx(0.125), pytest.approx(4 / 25))
    assert giou_ciou_from_counts([0], [0], "one") == (1.0, 0.0)
    with pytest.raises(ValueError, match="^giou_ciou: every sample has an empty prediction and target, and empty=.skip. drops them all$"):
        giou_ciou_from_counts([0], [0], "skip")
    with pytest.raises(ValueError, match="evaluation.grounding.empty_mask_iou"):
        giou_ciou_from_counts([0], [0], "half")
    with pytest.raises(ValueError, match="giou_ciou: 1 intersections for 2 unions"):
        giou_ciou_from_counts([0], [0, 4])
    with pytest.raises(ValueError, match="giou_ciou: 0 intersections for 0 unions"):
        giou_ciou_from_counts([], [])


def test_giou_ciou_of_masks_passes_the_empty_option():
    import numpy as np

    from ttrl_bench.evaluation.metrics import giou_ciou

    empty = np.zeros((2, 2), bool)
    assert giou_ciou([empty], [empty], "one") == (1.0, 0.0)  # LISA: nothing to find, found


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


def test_smape_score_refuses_mismatched_or_empty_inputs():
    """Two predictions for one gold answer, or nothing at all: no score (the message counts both)."""
    with pytest.raises(ValueError, match="^smape_score: 2 predictions for 1 gold answers$"):
        smape_score([1, 2], [1])
    with pytest.raises(ValueError, match="^smape_score: 0 predictions for 0 gold answers$"):
        smape_score([], [])
