"""VR-TTRL Appendix C baselines (Tent, MEMO, SFT on greedy / consensus pseudo-labels) and Table 11's
offline variant: the losses by hand, and one sample of each on the tiny model of every family."""

import math
from types import SimpleNamespace

import pytest
import torch

from ttrl_bench.adaptation import baselines, losses
from ttrl_bench.adaptation.baselines import adapt_baseline, augmented_copies, objective_loss, pseudo_answer
from ttrl_bench.adaptation.grpo import adapt
from ttrl_bench.adaptation.per_sample import adapt_each_sample
from ttrl_bench.adaptation.presets import PRESETS, is_per_sample, resolve_method
from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.models.tiny_families import FAMILIES  # every family the configs use: each runs every method
from ttrl_bench.models.loading import load_model
import warnings
import pandas as pd

BASELINES = [m for m, p in PRESETS.items() if p and "objective" in p]
# CPU-sized: 2 steps at a large lr, short pseudo-answers, 2 augmentations, 4 rollouts
SMALL = {"epochs": 2, "learning_rate": 1e-3, "max_completion_length": 24}
SMALL_EXTRA = {"memo": {"augmentations": 2}, "sft-majority-pseudo-label": {"num_generations": 4}}


def _log(p):
    return math.log(p)


def test_the_four_baselines_and_the_offline_variant_are_presets():
    assert BASELINES == ["tent", "memo", "sft-greedy-pseudo-label", "sft-majority-pseudo-label"]
    assert all(is_per_sample(m) for m in BASELINES)
    assert not is_per_sample("offline-train-split")
    # Appendix C.1: the same trainable subset as VR-TTRL (vision encoder frozen); K = 5 steps and
    # the optimizer settings are VR-TTRL's (Appendix A: lr 5e-7, weight decay 1e-2, clip 1.0)
    for method in BASELINES:
        hp = resolve_method(method)["hyperparameters"]
        assert (hp["freeze_vision"], hp["trainable"], hp["epochs"]) == (True, "language", 5)
        assert (hp["learning_rate"], hp["weight_decay"], hp["max_grad_norm"]) == (5e-7, 1e-2, 1.0)
    majority = resolve_method("sft-majority-pseudo-label")
    assert (majority["hyperparameters"]["num_generations"], majority["hyperparameters"]["temperature"]) == (8, 0.6)
    assert majority["reward_params"]["thresholds"] == "base"
    offline = resolve_method("offline-train-split")
    assert offline["reward"] == "vr_ttrl_consensus" and offline["hyperparameters"]["kl_beta"] == 1e-2


def test_tent_loss_sums_the_answer_tokens_entropies():
    # Vocabulary of 3. Position 0: logits 0, 0, 0 -> uniform, H = ln 3 = 1.098612 nats.
    # Position 1: p = (1/2, 1/4, 1/4), H = 1/2 ln 2 + 2 * 1/4 ln 4 = 0.346574 + 0.693147 = 1.039721.
    # Position 2: p = (0.98, 0.01, 0.01), H = 0.98 * 0.020203 + 2 * 0.01 * 4.605170 = 0.019799 + 0.092103
    #   = 0.111902, outside the answer (mask 0): not counted.
    # Sum over the answer: 1.098612 + 1.039721 = 2.138333.
    logits = torch.tensor([[0.0, 0.0, 0.0], [_log(0.5), _log(0.25), _log(0.25)], [_log(0.98), _log(0.01), _log(0.01)]])
    assert losses.tent_loss(logits, torch.tensor([1.0, 1.0, 0.0])).item() == pytest.approx(2.138333, abs=1e-6)
    assert losses.token_entropy(logits)[2].item() == pytest.approx(0.111902, abs=1e-6)


def test_memo_loss_over_two_augmentations_by_hand():
    # Vocabulary of 2, one answer token. Augmentation 1: p1 = (0.8, 0.2); augmentation 2: p2 = (0.2, 0.8).
    # p_bar = (0.5, 0.5).
    # KL(p1 || p_bar) = 0.8 ln(0.8 / 0.5) + 0.2 ln(0.2 / 0.5) = 0.8 * 0.470004 + 0.2 * (-0.916291)
    #                 = 0.376003 - 0.183258 = 0.192745; KL(p2 || p_bar) the same by symmetry.
    # VR-TTRL C.1: (1/2)(0.192745 + 0.192745) = 0.192745.
    # MEMO's marginal entropy: H(p_bar) = ln 2 = 0.693147
    # (check: H(p_bar) - mean H(p_k) = 0.693147 - 0.500402 = 0.192745).
    # A second position, masked out, where the copies disagree completely, adds nothing.
    logits = torch.tensor([[[_log(0.8), _log(0.2)], [10.0, -10.0]],
                           [[_log(0.2), _log(0.8)], [-10.0, 10.0]]])
    mask = torch.tensor([1.0, 0.0])
    assert losses.memo_loss(logits, mask).item() == pytest.approx(0.192745, abs=1e-6)
    assert losses.memo_loss(logits, mask, "marginal_entropy").item() == pytest.approx(0.693147, abs=1e-6)
    # identical copies agree with their mean: no inconsistency
    same = torch.tensor([[[_log(0.8), _log(0.2)]], [[_log(0.8), _log(0.2)]]])
    assert losses.memo_loss(same, torch.tensor([1.0])).item() == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="memo form"):
        losses.memo_loss(logits, mask, "augmix")


def test_sft_loss_counts_only_the_pseudo_label_tokens():
    # Vocabulary of 2; positions 0-1 are the prompt (mask 0), 2-3 the pseudo-label (mask 1).
    # Targets 0, 1, 0, 1. Prompt: p(target) = 0.2 and 0.5 (would add 1.609438 + 0.693147).
    # Label: p(0) = 0.8 -> -ln 0.8 = 0.223144; p(1) = 0.5 -> -ln 0.5 = 0.693147.
    # Loss = 0.223144 + 0.693147 = 0.916291 (= -ln 0.4).
    logits = torch.tensor([[_log(0.2), _log(0.8)], [_log(0.5), _log(0.5)], [_log(0.8), _log(0.2)], [0.0, 0.0]])
    targets = torch.tensor([0, 1, 0, 1])
    assert losses.sft_loss(logits, targets, torch.tensor([0.0, 0.0, 1.0, 1.0])).item() == pytest.approx(0.916291, abs=1e-6)
    assert losses.sft_loss(logits, targets, torch.ones(4)).item() == pytest.approx(0.916291 + 1.609438 + 0.693147, abs=1e-5)


def test_answer_tokens_are_those_inside_the_answer_tags():
    text = "<think>a cat</think><answer>[1]</answer>"
    # hand-made token spans: "<think>" "a cat" "</think>" "<answer>" "[1" "]</" "answer>"
    offsets = [(0, 7), (7, 12), (12, 20), (20, 28), (28, 30), (30, 33), (33, 40)]
    # the JSON "[1]" is characters 28-31: "[1" and "]</" (which straddles the closing tag) count
    assert losses.answer_token_mask(text, offsets) == [0, 0, 0, 0, 1, 1, 0]
    # the end of turn (an empty span at the end) is not part of the answer
    assert losses.answer_token_mask(text, offsets + [(40, 40)])[-1] == 0
    # no answer: everything the model said is the answer, its end of turn included
    assert losses.answer_token_mask("a cat", [(0, 1), (1, 5), (5, 5)]) == [1, 1, 1]


def test_augmentations_are_seeded_and_keep_the_image_size():
    from PIL import Image

    image = Image.new("RGB", (40, 30), (200, 30, 30))
    image.paste((10, 200, 10), (0, 0, 20, 30))
    first, again, other = (augmented_copies(image, 3, seed) for seed in (0, 0, 1))
    assert all(c.size == (40, 30) for c in first)
    assert [c.tobytes() for c in first] == [c.tobytes() for c in again]
    assert [c.tobytes() for c in first] != [c.tobytes() for c in other]
    assert len({c.tobytes() for c in first}) == 3  # K different copies


@pytest.mark.parametrize("family", FAMILIES)
def test_sft_loss_through_the_model_is_the_pseudo_labels_nll_alone(family, tiny_model_dirs, scene_data):
    """The baseline's loss against a plain forward of prompt + pseudo-label: the prompt's tokens
    never count."""
    from PIL import Image
    from ttrl_bench.generation.hf import chat_prompt

    model, processor = load_model(str(tiny_model_dirs[family]), dtype="fp32")
    row = load_manifest(scene_data, "test").iloc[0].to_dict()
    image = Image.open(scene_data / row["image"]).convert("RGB")
    method = resolve_method("sft-greedy-pseudo-label", SMALL)
    answer = pseudo_answer(model, processor, row, image, method, seed=0, max_new_tokens=24)
    assert answer.ids[-1] == model.generation_config.eos_token_id or answer.ids[-1] in model.generation_config.eos_token_id
    inputs = processor(text=[chat_prompt(processor, row["prompt"], row["system"])], images=[image], return_tensors="pt")
    p = inputs["input_ids"].shape[1]
    full = torch.cat([inputs.pop("input_ids"), torch.tensor([answer.ids])], dim=1)
    n = len(answer.ids)
    inputs = {k: torch.cat([v, torch.ones(1, n, dtype=v.dtype) if k == "attention_mask" else
                            torch.zeros(1, n, dtype=v.dtype)], 1) if v.shape[:2] == (1, p) and
              not v.is_floating_point() else v for k, v in inputs.items()}
    with torch.no_grad():
        logp = model(input_ids=full, **inputs).logits[0].float().log_softmax(-1)
        expected = -sum(float(logp[p - 1 + t, token]) for t, token in enumerate(answer.ids))
        got = objective_loss(model, processor, row, answer, method).item()
    assert got == pytest.approx(expected, rel=1e-4)


def _rounding_below_zero(method: str, model) -> float:
    """How far below 0 a baseline's loss (>= 0 in exact arithmetic) can be computed in fp32 (losses.py).
    Tent's -p log p and SFT's -log p are signed exactly (log_softmax <= 0, exp >= 0): 0. MEMO's
    KL(p_k || p_bar) = sum_v p_v (log p_v - log p_bar_v) is a difference of two fp32 logs (issue 52 saw
    -1.17e-9 on one machine): each log carries ~2 eps (|log| + 1) of rounding, weighted by p_v that sum to 1
    with sum_v p_v |log p_v| = H(p) <= log V and |log p_bar_v| <= |log p_v| + log K; the fp32 sum over V adds
    (log2 V) eps of sum |terms| <= 2 log V + log K. Per answer token: eps (2 + log2 V)(2 log V + log K + 2),
    times at most max_completion_length + 1 answer tokens (the end token counts)."""
    if method != "memo":
        return 0.0
    eps, vocab = torch.finfo(torch.float32).eps, model.config.get_text_config().vocab_size
    k = SMALL_EXTRA["memo"]["augmentations"]
    per_token = eps * (2 + math.log2(vocab)) * (2 * math.log(vocab) + math.log(k) + 2)
    return (SMALL["max_completion_length"] + 1) * per_token


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", BASELINES)
def test_each_baseline_changes_the_weights_and_restores_them_after_the_sample(method, family, scene_data,
                                                                              tiny_model_dirs, tmp_path):
    model, processor = load_model(str(tiny_model_dirs[family]), dtype="fp32")
    base = {n: p.detach().clone() for n, p in model.state_dict().items()}
    samples = load_manifest(scene_data, "test").head(1)
    spec = resolve_method(method, {**SMALL, **SMALL_EXTRA.get(method, {})})
    outputs, log, seconds = adapt_each_sample(model, processor, samples, scene_data, spec, tmp_path, seed=0,
                                              max_new_tokens=24)
    assert len(outputs) == len(seconds) == 1 and isinstance(outputs[0], str)
    assert log["step"].tolist() == [0, 1] and log["sample_updates"].tolist() == [2, 2]  # K = 2 steps
    assert (log["weights_changed"] > 0).all()  # the steps moved the weights during the sample
    assert log["loss"].notna().all() and (log["loss"] >= -_rounding_below_zero(method, model)).all()
    assert all(model.state_dict()[n].equal(p) for n, p in base.items())  # and the sample left none behind


@pytest.mark.parametrize("steps", [1, 2])
def test_tent_norm_option_updates_only_normalisation_layers(steps, tiny_model_dirs, scene_data, tmp_path, monkeypatch):
    model, processor = load_model(str(tiny_model_dirs["qwen2_5_vl"]), dtype="fp32")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    spec = resolve_method("tent", {**SMALL, "epochs": steps, "trainable": "norm"})
    answers = []
    monkeypatch.setattr(baselines, "pseudo_answer", lambda *a: answers.append(pseudo_answer(*a)) or answers[-1])
    clock = iter([10.0, 16.0])  # adapt_baseline reads the clock before the pseudo-answer and after training
    monkeypatch.setattr(baselines, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    log = adapt_baseline(model, processor, load_manifest(scene_data, "test").head(1), scene_data, spec, tmp_path, seed=0)
    changed = {n for n, p in model.named_parameters() if not p.detach().equal(before[n])}
    assert log.attrs["optimizer_steps"] == steps and changed
    # each step's row names the pseudo-label's length in tokens (its end included), the tokens Tent's loss reads and
    # the seconds a step took: (16 - 10) / 1 step = 6, / 2 steps = 3
    (answer,) = answers
    assert log["pseudo_label_tokens"].tolist() == [len(answer.ids)] * steps
    assert log["loss_tokens"].tolist() == [sum(answer.mask)] * steps
    assert log["seconds"].tolist() == [{1: 6.0, 2: 3.0}[steps]] * steps
    assert log.attrs["losses"] == log["loss"].tolist() and len(log.attrs["losses"]) == steps
    assert (log.attrs["verifications"], log.attrs["weights_changed_saved"]) == ([], None)
    assert log.attrs["weights_changed"] > 0
    assert all("norm" in n and "visual" not in n for n in changed), sorted(changed)


@pytest.mark.parametrize("family", FAMILIES)
def test_offline_variant_trains_one_step_on_the_training_split(family, scene_data, tiny_model_dirs, tmp_path):
    from ttrl_bench.cli.common import adaptation_samples as _adaptation_samples
    from ttrl_bench.datasets.registry import get_dataset
    from ttrl_bench.evaluation.tasks import GroundingTask

    model, processor = load_model(str(tiny_model_dirs[family]), dtype="fp32")
    spec = resolve_method("offline-train-split", {"num_generations": 4, "max_completion_length": 24, "epochs": 1,
                                                  "learning_rate": 1e-3, "micro_batch_size": 2})
    # a registry training set (reasonseg-train) names the split its samples are drawn from
    samples = _adaptation_samples(scene_data, 1, 0, "random", get_dataset("reasonseg-train").manifest_split)
    train_ids = set(load_manifest(scene_data, "train")["id"])
    assert set(samples["id"]) <= train_ids and not set(samples["id"]) & set(load_manifest(scene_data, "test")["id"])
    log = adapt(model, processor, samples, scene_data, spec, tmp_path, seed=0, task=GroundingTask())
    assert log.attrs["optimizer_steps"] == 1 and list(log["step"]) == [0]
    assert log["reward_mean"].notna().all()



def test_memos_augmentations_run_silently_and_never_touch_the_gpus_random_state(monkeypatch):
    """augmented_copies forks only the CPU generator (devices=[]): with two (stand-in) CUDA devices, the GPUs' RNG
    state is never read, so no CUDA context is made on every GPU of a multi-GPU node, and torch's "you have 2
    available devices" warning is not raised. The PIL crop always antialiases: torchvision warns only when told
    antialias=False, which the function does not do. The global CPU RNG is left as it was."""
    from PIL import Image

    def no_gpu(*args):
        raise AssertionError("a GPU's RNG state was read")

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state", no_gpu)
    monkeypatch.setattr(torch.cuda, "set_rng_state", no_gpu)
    monkeypatch.setattr(torch.random, "_fork_rng_warned_already", False)
    image = Image.new("RGB", (24, 16), (90, 140, 200))
    state = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copies = baselines.augmented_copies(image, 2, 0)
    assert [c.size for c in copies] == [(24, 16), (24, 16)]
    assert torch.equal(torch.get_rng_state(), state)


def test_memos_colour_jitter_scales_brightness_contrast_and_saturation_by_0_6_to_1_4(monkeypatch):
    """C.1 names "random crop/flip/color jitter" without strengths; ours: brightness, contrast and saturation
    factors uniform in [1 - 0.4, 1 + 0.4] (torchvision's ColorJitter(0.4, 0.4, 0.4)). On a uniform grey image
    (128) contrast and saturation blend with the image's own grey, so only brightness acts: each copy is 128 x f,
    f in [0.6, 1.4], i.e. in [76.8, 179.2]; 40 seeded copies spread over most of it (a factor range of
    [0, 2.4] would leave it). The jitter's own arguments are checked through a recording wrapper."""
    from PIL import Image
    from torchvision.transforms import v2

    made = []
    real = v2.ColorJitter

    def recording(**kwargs):
        made.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(v2, "ColorJitter", recording)
    grey = Image.new("RGB", (8, 8), (128, 128, 128))
    values = [c.getpixel((0, 0)) for c in baselines.augmented_copies(grey, 40, 3)]
    assert made == [{"brightness": 0.4, "contrast": 0.4, "saturation": 0.4}]
    assert all(r == g == b for r, g, b in values)
    levels = [r for r, _, _ in values]
    assert 76 <= min(levels) < 90 and 166 < max(levels) <= 180

def test_select_trainable_freezes_the_tower_on_request_and_trains_norms_outside_it():
    """InternVL3-2B cut to one 128-wide text layer (tests/plan/test_cost.py's tiny config, meta device). freeze_vision true:
    every vision-tower parameter frozen (InternVL's adapter, the projector, sits outside the tower and trains), the
    rest trainable; the default (false) trains everything. trainable "norm" (Tent's choice): the norms outside the
    tower alone: the projector's LayerNorm over 64 x 2 x 2 = 256 pixel-shuffled features (weight and bias, 512)
    and the text layer's two RMSNorms and the final one, 3 x 128: 896. Another value is refused by name."""
    from tests.support.plan import tiny_internvl_config
    from transformers import AutoModelForImageTextToText

    from ttrl_bench.models.families import vision_tower

    def tiny():
        with torch.device("meta"):
            return AutoModelForImageTextToText.from_config(tiny_internvl_config())

    def trainable(model):
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    model = tiny()
    total, tower = sum(p.numel() for p in model.parameters()), sum(p.numel() for p in vision_tower(model).parameters())
    baselines.select_trainable(model, {"freeze_vision": True})
    assert not any(p.requires_grad for p in vision_tower(model).parameters())
    assert trainable(model) == total - tower
    model = tiny()
    baselines.select_trainable(model, {})
    assert trainable(model) == total
    model = tiny()
    baselines.select_trainable(model, {"trainable": "norm"})
    assert trainable(model) == 2 * 256 + 3 * 128 == 896
    with pytest.raises(ValueError, match="trainable must be 'language' or 'norm', got 'all'"):
        baselines.select_trainable(tiny(), {"trainable": "all"})


def test_a_baseline_refuses_a_manifest_of_more_than_one_sample_by_count():
    """Appendix C.1's baselines adapt on one test sample at a time: two rows are refused before any model work."""
    with pytest.raises(ValueError) as err:
        baselines.adapt_baseline(None, None, pd.DataFrame({"id": ["a", "b"]}), None, {}, None, seed=0)
    assert str(err.value) == "Appendix C baselines adapt on one sample at a time, got 2"


def test_a_baseline_opens_the_image_at_the_rows_input_size_and_answers_as_long_as_a_rollout(monkeypatch, tmp_path):
    """adapt_baseline's first two steps, the rest stopped: the sample's image is opened under the image root at the
    row's input_size (GroundingTask.view's: VR-TTRL's 840 px), or at none where the manifest has no such column,
    and the pseudo-answer is generated with up to max_completion_length new tokens (as long as VR-TTRL's rollouts)."""
    from pathlib import Path

    class Stop(Exception):
        pass

    seen = []
    monkeypatch.setattr(baselines, "open_model_view", lambda path, size: seen.append((path, size)) or "view")

    def pseudo_answer(model, processor, row, image, method, seed, max_new_tokens):
        seen.append((row["id"], image, seed, max_new_tokens))
        raise Stop

    monkeypatch.setattr(baselines, "pseudo_answer", pseudo_answer)
    method = {"hyperparameters": {"max_completion_length": 2048}}
    for manifest, size in ((pd.DataFrame({"id": ["s"], "image": ["img/1.png"], "input_size": [840]}), 840),
                           (pd.DataFrame({"id": ["s"], "image": ["img/1.png"]}), None)):
        seen.clear()
        with pytest.raises(Stop):
            baselines.adapt_baseline(None, None, manifest, Path("/data"), method, tmp_path, seed=3)
        assert seen == [(Path("/data/img/1.png"), size), ("s", "view", 3, 2048)]


def test_each_baseline_objective_scores_the_pseudo_answer_with_its_own_loss(monkeypatch):
    """objective_loss on stand-in logits of the one copy: 2 answer positions over 2 tokens, both with probabilities
    (1/4, 3/4) (logits 0 and ln 3); pseudo-answer ids [1, 0], mask [1, 0] (the second position not counted).
    Tent: the first position's entropy, -(1/4 ln 1/4 + 3/4 ln 3/4) = 0.5623; SFT: -ln p(1) = -ln 3/4 = 0.2877."""
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, math.log(3.0)]]])
    monkeypatch.setattr(baselines, "completion_logits", lambda *a, **k: logits)
    answer = baselines.PseudoAnswer("B", [1, 0], [1, 0], ["image"])
    row = {"prompt": "p"}
    tent = baselines.objective_loss(None, None, row, answer, {"objective": "tent"})
    sft = baselines.objective_loss(None, None, row, answer, {"objective": "sft"})
    assert tent.item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))
    assert sft.item() == pytest.approx(-math.log(0.75))
