"""adaptation/uncertainty.py: DARE's uncertainty normalisation and the completion entropies (log V under a
uniform policy; each completion token scored by its own prefix) on the tiny model of every family."""

import math

import pytest

from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.models.loading import load_model
from ttrl_bench.models.tiny_families import FAMILIES  # every family the configs use: each runs every method


def test_uncertainty_normalisation():
    from ttrl_bench.adaptation.uncertainty import normalise_uncertainty
    import math

    # log(100) = 4.6052: 2.3026 nats is half the maximum entropy of a 100-token vocabulary
    assert normalise_uncertainty([2.302585, 0.0], 100, "vocab") == pytest.approx([0.5, 0.0])
    assert normalise_uncertainty([1.0, 2.0, 3.0], 100, "minmax") == [0.0, 0.5, 1.0]
    assert normalise_uncertainty([1.0, 1.0], 100, "minmax") == [0.0, 0.0]
    assert normalise_uncertainty([math.log(100) * 2], 100, "vocab") == [1.0]
    with pytest.raises(ValueError, match="vocab"):
        normalise_uncertainty([1.0], 100, "zscore")


@pytest.mark.parametrize("family", FAMILIES)
def test_completion_entropies_of_a_uniform_policy_are_log_v(family, tiny_model_dirs, scene_data):
    """The entropy helper reads the right logits: check it against a policy whose outputs we control.
    A scene image is 4 InternVL tiles + a thumbnail: the forward must take the processor's fields as
    they are (DARE crashed on InternVL when they were rebuilt by hand, gpu-probe.md)."""
    import torch
    from PIL import Image
    from ttrl_bench.adaptation.uncertainty import completion_entropies

    model, processor = load_model(str(tiny_model_dirs[family]))
    sample = load_manifest(scene_data, "test").iloc[0]
    image = Image.open(scene_data / sample["image"]).convert("RGB")
    vocab = model.config.get_text_config().vocab_size
    with torch.no_grad():
        model.lm_head.weight.zero_()  # tied to the embeddings: every logit 0 -> uniform
    model.config.tie_word_embeddings = True
    entropies = completion_entropies(model, processor, sample["prompt"], image, [[20, 21, 22], [30], []], micro_batch=2)
    assert entropies[:2] == pytest.approx([math.log(vocab)] * 2, rel=1e-5)
    assert entropies[2] == 0.0


@pytest.mark.parametrize("family", FAMILIES)
def test_completion_entropies_score_each_completion_token_by_its_own_prefix(family, tiny_model_dirs, demo_data):
    """Against a plain forward of prompt + one completion, computed by hand: same entropies, and the same
    log-probability of each sampled token (`needs_logprobs` rewards), whatever the micro-batch and the
    padding of the other completions."""
    import torch
    from PIL import Image
    from ttrl_bench.adaptation.uncertainty import completion_entropies, completion_token_statistics
    from ttrl_bench.generation.hf import chat_prompt

    model, processor = load_model(str(tiny_model_dirs[family]))
    sample = load_manifest(demo_data, "test").iloc[0]
    image = Image.open(demo_data / sample["image"]).convert("RGB")
    completions = [[20, 21, 22, 23], [30, 31]]
    expected, expected_logprobs, expected_tokens = [], [], []
    for ids in completions:
        inputs = processor(text=[chat_prompt(processor, sample["prompt"])], images=[image], return_tensors="pt")
        p = inputs["input_ids"].shape[1]
        full = torch.cat([inputs.pop("input_ids"), torch.tensor([ids])], dim=1)
        inputs = {k: torch.cat([v, torch.ones(1, len(ids), dtype=v.dtype) if k == "attention_mask" else
                                torch.zeros(1, len(ids), dtype=v.dtype)], 1) if v.shape[:2] == (1, p) and
                  not v.is_floating_point() else v for k, v in inputs.items()}
        with torch.no_grad():
            logp = model(input_ids=full, **inputs).logits[0, p - 1 : p - 1 + len(ids)].float().log_softmax(-1)
        expected.append(float(-(logp.exp() * logp).sum(-1).mean()))
        expected_tokens.append((-(logp.exp() * logp).sum(-1)).tolist())
        expected_logprobs.append([float(logp[t, token]) for t, token in enumerate(ids)])
    for micro_batch in (1, 2):
        got = completion_entropies(model, processor, sample["prompt"], image, completions, micro_batch=micro_batch)
        assert got == pytest.approx(expected, rel=1e-4)
        logprobs, entropies = completion_token_statistics(model, processor, sample["prompt"], image,
                                                          completions + [[]], micro_batch=micro_batch)
        assert [len(x) for x in logprobs] == [4, 2, 0] and entropies[2] == []
        for got_lp, want_lp, got_h, want_h in zip(logprobs, expected_logprobs, entropies, expected_tokens):
            assert got_lp == pytest.approx(want_lp, rel=1e-4, abs=1e-5) and got_h == pytest.approx(want_h, rel=1e-4)
