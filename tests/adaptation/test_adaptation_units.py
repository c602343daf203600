"""Small, model-free units of the adaptation package, pinned by hand where the other tests leave a gap
(issue 39, mutation testing): the MEMO loss with K != T != V, the answer-token mask at the answer's
edges, the host-memory weight snapshot on a 2 x 2 linear layer, and the Appendix C baselines' steps
around the model (pseudo-answer, loss, trainer) with the model's calls stood in for."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest
import torch
from PIL import Image

from ttrl_bench.adaptation import baselines, losses
from ttrl_bench.adaptation.weights import WeightSnapshot, full_tensor


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


def _linear() -> torch.nn.Linear:
    layer = torch.nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
        layer.bias.copy_(torch.tensor([0.5, -0.5]))
    layer.bias.requires_grad_(False)
    return layer


def test_weight_snapshot_copies_the_trainable_weights_measures_and_restores_them():
    """A 2 x 2 layer, its bias frozen. The snapshot holds the weight alone (with `trainable_only` False, the
    bias too), as a copy: changing the layer afterwards leaves it as it was. Then weight (1, 2, 3, 4) ->
    (1.001, 2, 3, 5) and bias (.5, -.5) -> (0, 0): 2 of the 4 trainable elements differ -> .5; cast to bf16
    (8 significant bits: 1.001 rounds to 1, 5 stays 5) 1 of 4 -> .25. The frozen bias never counts, even in
    the snapshot that holds it. Restoring brings back the weight (and, from the full snapshot, the bias)."""
    layer = _linear()
    snap, full = WeightSnapshot(layer), WeightSnapshot(layer, trainable_only=False)
    assert snap.names == ["weight"] and list(snap.values) == ["weight"]
    assert full.names == ["weight", "bias"] and list(full.values) == ["weight", "bias"]
    assert snap.changed_fraction(layer) == 0.0
    with torch.no_grad():
        layer.weight[0, 0] += 1e-3
        layer.weight[1, 1] = 5.0
        layer.bias.zero_()
    assert snap.values["weight"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert full.values["bias"].tolist() == [0.5, -0.5]
    assert snap.changed_fraction(layer) == 0.5
    assert full.changed_fraction(layer) == 0.5
    assert snap.changed_fraction(layer, dtype=torch.bfloat16) == 0.25
    snap.restore(layer)
    assert layer.weight.tolist() == [[1.0, 2.0], [3.0, 4.0]] and layer.bias.tolist() == [0.0, 0.0]
    full.restore(layer)
    assert layer.bias.tolist() == [0.5, -0.5]


def test_weight_snapshot_of_nothing_trainable_changed_nothing():
    """No trainable element: the fraction is 0.0 (not 0 / 0); a parameter frozen after the snapshot is no
    longer counted (its change ignored), and a plain (unsharded) tensor is its own full tensor."""
    layer = _linear()
    layer.weight.requires_grad_(False)
    assert WeightSnapshot(layer).names == [] and WeightSnapshot(layer).changed_fraction(layer) == 0.0
    layer.weight.requires_grad_(True)
    snap = WeightSnapshot(layer)
    layer.weight.requires_grad_(False)
    with torch.no_grad():
        layer.weight.zero_()
    assert snap.changed_fraction(layer) == 0.0
    assert full_tensor(layer.weight) is layer.weight


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
    layer = _linear()
    trainer = baselines.ObjectiveTrainer(layer, args=args, loss_fn=lambda m: m.weight.sum())
    assert trainer.model is layer and trainer.args is args
    assert trainer.compute_loss(layer, {"step": torch.tensor([0])}).item() == 10.0
    loss, outputs = trainer.compute_loss(layer, {}, return_outputs=True)
    assert loss.item() == 10.0 and outputs is None


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
