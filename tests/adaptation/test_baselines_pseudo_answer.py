"""adaptation/baselines.py, the Appendix C baselines' steps around the model with the model's calls stood in
for: the pseudo-answer (greedy or consensus, MEMO's augmented copies), the objective loss under each copy and
the objective trainer. (test_baselines.py runs them on tiny models.)"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from PIL import Image

from ttrl_bench.adaptation import baselines

from tests.support.adaptation import linear_2x2


# --- Appendix C baselines (adaptation/baselines.py): the pseudo-answer and the loss around the model ---

ANSWER = "<answer>[1]</answer>"  # tokens "<answer>" (0, 8), "[1]" (8, 11), "</answer>" (11, 20): ids 10, 11, 12


class _Tokenizer:
    def __init__(self):
        self.asked = []

    def __call__(self, text, **kwargs):
        self.asked.append((text, kwargs))
        assert text == ANSWER
        return {"input_ids": [10, 11, 12], "offset_mapping": [[0, 8], [8, 11], [11, 20]]}


class _Model:
    def __init__(self, eos):
        self.generation_config = SimpleNamespace(eos_token_id=eos)
        self.evaluated = False

    def eval(self):
        self.evaluated = True


def test_the_pseudo_answer_ends_with_the_first_end_of_turn_and_masks_the_answer():
    """The completion's ids plus the end of turn (the first of a list, as generate stops at: [99, 98] -> 99),
    tokenised without special tokens, with offsets. Tent and MEMO count the answer's tokens alone: "[1]"
    (8, 11) inside [8, 11), the tags and the end of turn (an empty span at 20) outside -> 0, 1, 0, 0; SFT
    counts all four."""
    processor = SimpleNamespace(tokenizer=_Tokenizer())
    assert baselines.end_of_turn_id(_Model([99, 98])) == 99 and baselines.end_of_turn_id(_Model(7)) == 7
    assert baselines.tokenised(processor, ANSWER, 99, answer_only=True) == ([10, 11, 12, 99], [0, 1, 0, 0])
    assert baselines.tokenised(processor, ANSWER, 99, answer_only=False) == ([10, 11, 12, 99], [1, 1, 1, 1])
    assert processor.tokenizer.asked[0][1] == {"add_special_tokens": False, "return_offsets_mapping": True}


def test_pseudo_answer_takes_the_greedy_or_the_consensus_answer_and_memos_augmented_copies(monkeypatch):
    """C.1: the greedy answer (generated up to `max_new_tokens`) or VR-TTRL's consensus (the method's
    hyper-parameters, reward parameters and seed) from the model in eval mode; Tent and MEMO mask the
    answer's tokens (0, 1, 0, 0), SFT every token; MEMO's images are the K = 2 seeded augmentations of the
    image (augmented_copies(image, 2, seed 5)), the others the image itself."""
    asked = {}

    def greedy(model, processor, row, image, max_new_tokens):
        asked["greedy"] = (model, processor, row, image, max_new_tokens)
        return ANSWER

    def vote(model, processor, row, image, hp, reward_params, seed):
        asked["vote"] = (model, processor, row, image, hp, reward_params, seed)
        return ANSWER

    monkeypatch.setattr(baselines, "predict_greedy", greedy)
    monkeypatch.setattr(baselines, "consensus_vote", vote)
    model, processor, row = _Model([99]), SimpleNamespace(tokenizer=_Tokenizer()), {"prompt": "P"}
    image = Image.new("RGB", (16, 12), (200, 30, 30))
    image.paste((10, 200, 10), (0, 0, 8, 12))
    hp = {"augmentations": 2, "num_generations": 4}
    tent = baselines.pseudo_answer(model, processor, row, image, {"objective": "tent", "hyperparameters": hp}, 5, 24)
    assert model.evaluated and asked["greedy"] == (model, processor, row, image, 24) and "vote" not in asked
    assert (tent.text, tent.ids, tent.mask, tent.images) == (ANSWER, [10, 11, 12, 99], [0, 1, 0, 0], [image])
    memo = baselines.pseudo_answer(model, processor, row, image, {"objective": "memo", "hyperparameters": hp}, 5, 24)
    assert memo.mask == [0, 1, 0, 0] and len(memo.images) == 2
    assert [c.tobytes() for c in memo.images] == [c.tobytes() for c in baselines.augmented_copies(image, 2, 5)]
    sft = {"objective": "sft", "pseudo_label": "consensus", "hyperparameters": hp,
           "reward_params": {"thresholds": "base"}}
    answer = baselines.pseudo_answer(model, processor, row, image, sft, 5, 24)
    assert asked["vote"] == (model, processor, row, image, hp, {"thresholds": "base"}, 5)
    assert (answer.ids, answer.mask, answer.images) == ([10, 11, 12, 99], [1, 1, 1, 1], [image])


def test_objective_loss_scores_the_pseudo_answer_under_each_copy(monkeypatch):
    """One forward of every copy (the prompt, the system prompt, the copies' images, the answer's ids once
    per copy), then the method's loss (vocabulary of 2, answer ids 0, 1):
    Tent, mask (1, 0): position 0 uniform -> ln 2 = .693147 (position 1 not counted).
    MEMO, 2 copies p = (.8, .2) and (.2, .8) at position 0, mask (1, 0): KL to the mean .192745 (the hand
    computation of test_baselines.py), MEMO's marginal entropy (hyper-parameter memo_form) ln 2 = .693147.
    SFT, mask (1, 1): -ln .8 - ln .5 = .223144 + .693147 = .916291.
    On the meta device (standing in for a GPU) the mask and the targets follow the logits there."""
    asked = []
    ln = math.log
    logits = {"tent": torch.tensor([[[0.0, 0.0], [ln(0.9), ln(0.1)]]]),
              "memo": torch.tensor([[[ln(0.8), ln(0.2)], [5.0, -5.0]], [[ln(0.2), ln(0.8)], [-5.0, 5.0]]]),
              "sft": torch.tensor([[[ln(0.8), ln(0.2)], [ln(0.5), ln(0.5)]]])}

    def forward(model, processor, prompt, images, ids, system=None):
        asked.append((model, processor, prompt, images, ids, system))
        return logits[current]

    monkeypatch.setattr(baselines, "completion_logits", forward)
    row = {"prompt": "P", "system": "S"}
    one, two = ["img"], ["a", "b"]
    current = "tent"
    loss = baselines.objective_loss("M", "Pr", row, baselines.PseudoAnswer("t", [0, 1], [1, 0], one),
                                    {"objective": "tent", "hyperparameters": {}})
    assert loss.item() == pytest.approx(0.693147, abs=1e-6)
    assert asked[-1] == ("M", "Pr", "P", one, [[0, 1]], "S")
    current = "memo"
    memo = baselines.PseudoAnswer("t", [0, 1], [1, 0], two)
    assert baselines.objective_loss("M", "Pr", row, memo, {"objective": "memo", "hyperparameters": {}}).item() == \
        pytest.approx(0.192745, abs=1e-6)
    assert asked[-1] == ("M", "Pr", "P", two, [[0, 1], [0, 1]], "S")
    marginal = {"objective": "memo", "hyperparameters": {"memo_form": "marginal_entropy"}}
    assert baselines.objective_loss("M", "Pr", row, memo, marginal).item() == pytest.approx(0.693147, abs=1e-6)
    current = "sft"
    sft = baselines.PseudoAnswer("t", [0, 1], [1, 1], one)
    assert baselines.objective_loss("M", "Pr", row, sft, {"objective": "sft", "hyperparameters": {}}).item() == \
        pytest.approx(0.916291, abs=1e-6)
    for current in ("tent", "sft"):
        logits[current] = logits[current].to("meta")
        on_meta = baselines.objective_loss("M", "Pr", row, baselines.PseudoAnswer("t", [0, 1], [1, 1], one),
                                           {"objective": current, "hyperparameters": {}})
        assert on_meta.device.type == "meta"


def test_objective_trainer_hands_the_model_to_the_loss(tmp_path):
    """K = `epochs` steps of batch 1 on the one sample, in `out_dir`/trainer, no progress bar, the seed and
    the optimizer settings of the method (lr 5e-7, weight decay .01). The trainer keeps the model and the
    arguments it is given and its loss is `loss_fn(model)`: for the 2 x 2 layer, 1 + 2 + 3 + 4 = 10; with
    `return_outputs` the pair (loss, None)."""
    args = baselines.training_arguments(tmp_path, {"epochs": 3, "learning_rate": 5e-7, "weight_decay": 1e-2}, 4)
    assert (args.output_dir, args.per_device_train_batch_size, args.max_steps) == (str(tmp_path / "trainer"), 1, 3)
    assert (args.disable_tqdm, args.seed, args.learning_rate, args.weight_decay) == (True, 4, 5e-7, 1e-2)
    layer = linear_2x2()
    trainer = baselines.ObjectiveTrainer(layer, args=args, loss_fn=lambda m: m.weight.sum())
    assert trainer.model is layer and trainer.args is args
    assert trainer.compute_loss(layer, {"step": torch.tensor([0])}).item() == 10.0
    loss, outputs = trainer.compute_loss(layer, {}, return_outputs=True)
    assert loss.item() == 10.0 and outputs is None
