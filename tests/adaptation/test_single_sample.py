"""adaptation/single_sample.py: the two answers taken from the model as it is (greedy, consensus vote),
generation stood in for."""

from __future__ import annotations

import torch


# --- single_sample.py: the two answers taken from the model as it is (generation stood in for) ---


def test_greedy_prediction_is_one_greedy_completion_with_the_samples_system_prompt(monkeypatch):
    """generate_greedy on the one prompt and image, up to `max_new_tokens`, batch 1, the row's system
    prompt (None without one), no progress bar; its one text is the prediction."""
    from ttrl_bench.adaptation import single_sample

    asked = []

    def greedy(model, processor, prompts, images, max_new_tokens, batch_size, systems=None, progress=True):
        asked.append((model, processor, prompts, images, max_new_tokens, batch_size, systems, progress))
        return ["the answer"]

    monkeypatch.setattr(single_sample, "generate_greedy", greedy)
    assert single_sample.predict_greedy("M", "P", {"prompt": "Q", "system": "S"}, "I", 12) == "the answer"
    assert single_sample.predict_greedy("M", "P", {"prompt": "Q"}, "I", 12) == "the answer"
    assert asked == [("M", "P", ["Q"], ["I"], 12, 1, ["S"], False), ("M", "P", ["Q"], ["I"], 12, 1, [None], False)]


def test_consensus_vote_answers_with_the_consensus_rollout(monkeypatch):
    """N = 3 rollouts sampled after seeding the global RNG with `seed` (temperature, length, system prompt
    from the method); each parsed (an unparsable one is None), the consensus taken with the method's
    thresholds ("strict": IoU .7, L1 5, point 15; VR-TTRL Table 9) and reward conventions (here
    pixel_iou False); the text of the rollout it picks (index 2 here) is the prediction."""
    from ttrl_bench.adaptation import single_sample
    from ttrl_bench.rewards import grounding

    box = '<answer>[{"bbox_2d": [1, 2, 3, 4]}]</answer>'
    texts = ["no answer", box, box + " "]
    asked = {}

    def samples(model, processor, prompt, image, n, temperature, max_new_tokens, system=None):
        asked["samples"] = (model, processor, prompt, image, n, temperature, max_new_tokens, system,
                            torch.initial_seed())
        return texts

    def consensus(answers, thresholds, anti=False, conventions=None):
        asked["consensus"] = (answers, thresholds, anti, conventions)
        return 2, [0.0, 1.0, 1.0]

    monkeypatch.setattr(single_sample, "generate_samples", samples)
    monkeypatch.setattr(grounding, "consensus", consensus)
    hp = {"num_generations": 3, "temperature": 0.6, "max_completion_length": 20}
    params = {"thresholds": "strict", "pixel_iou": False}
    assert single_sample.consensus_vote("M", "P", {"prompt": "Q", "system": "S"}, "I", hp, params, 11) == box + " "
    assert asked["samples"] == ("M", "P", "Q", "I", 3, 0.6, 20, "S", 11)
    answers, thresholds, anti, conventions = asked["consensus"]
    assert answers == [None, [{"bbox_2d": [1, 2, 3, 4]}], [{"bbox_2d": [1, 2, 3, 4]}]] and not anti
    assert (thresholds.iou, thresholds.l1, thresholds.point) == (0.7, 5, 15)
    assert conventions.pixel_iou is False and conventions.point_in_box is True
    single_sample.consensus_vote("M", "P", {"prompt": "Q"}, "I", hp, {}, 11)
    assert asked["samples"][7] is None and asked["consensus"][1].iou == 0.5  # base thresholds by default
