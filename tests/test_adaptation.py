"""GRPO adaptation through TRL on the tiny model (CPU), and the group-integrity guard."""

import math

import pytest

from ttrl_bench.adaptation.grpo import GroupReward, SplitGroupError, adapt
from ttrl_bench.adaptation.per_sample import adapt_each_sample
from ttrl_bench.adaptation.presets import METHOD_NAMES, is_per_sample, method_task, resolve_method
from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.datasets.sampling import select_adaptation_samples
from ttrl_bench.models.loading import load_model

TWO_STEPS = {"num_generations": 4, "max_completion_length": 3, "epochs": 1, "prompts_per_step": 1, "learning_rate": 1e-3}


def _completions(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


def test_group_reward_parses_and_scores_each_group():
    reward = GroupReward("majority_vote", {}, num_generations=4)
    options = [["zero", "one", "two", "three"]] * 8
    rewards = reward(
        prompts=None,
        completions=_completions(["A", "A", "B", "junk", "two", "C", "D", "C"]),
        id=["x"] * 4 + ["y"] * 4,
        options=options,
        answer=["A"] * 4 + ["D"] * 4,
    )
    # group x: majority A; group y: "two" is option C, so C wins 3 to 1
    assert rewards == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    record = reward.records[0]
    assert record["rollout_accuracy"] == pytest.approx((2 / 4 + 1 / 4) / 2)
    assert record["majority_fraction"] == pytest.approx((2 / 4 + 3 / 4) / 2)
    assert record["unparsable_fraction"] == pytest.approx((1 / 4 + 0) / 2)


def test_split_group_is_refused():
    reward = GroupReward("ttrv", {}, num_generations=4)
    with pytest.raises(SplitGroupError, match="mix prompts"):
        reward(prompts=None, completions=_completions(["A"] * 4), id=["x", "x", "y", "y"],
               options=[["a", "b", "c", "d"]] * 4, answer=["A"] * 4)
    with pytest.raises(SplitGroupError, match="multiple of N=4"):
        reward(prompts=None, completions=_completions(["A"] * 6), id=["x"] * 6,
               options=[["a", "b", "c", "d"]] * 6, answer=["A"] * 6)


def test_unknown_method_and_hyperparameter_are_named():
    with pytest.raises(KeyError, match="unknown method 'ttrv2'"):
        resolve_method("ttrv2")
    with pytest.raises(KeyError, match="learning_rat"):
        resolve_method("ttrv", {"learning_rat": 1.0})
    assert resolve_method("zero-shot") is None
    assert resolve_method("ttrv", {"num_generations": 4})["hyperparameters"]["num_generations"] == 4
    assert resolve_method("ttrv")["hyperparameters"]["learning_rate"] == 5e-7  # TTRV Appendix A


@pytest.mark.parametrize("method", [m for m in METHOD_NAMES if method_task(m) == "mcq"])
def test_two_grpo_steps_of_every_method(method, demo_data, tiny_model_dir, tmp_path):
    model, processor = load_model(str(tiny_model_dir))
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 2, seed=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    log = adapt(model, processor, samples, demo_data, resolve_method(method, TWO_STEPS), tmp_path, seed=0)
    assert list(log["step"]) == [0, 1]
    assert log[["reward_mean", "answer_entropy", "rollout_accuracy"]].notna().all().all()
    changed = any(not p.detach().equal(before[n]) for n, p in model.named_parameters())
    # A group whose rewards are all equal has zero advantages and leaves the weights alone.
    assert changed == (log["reward_std"] > 0).any()


def test_uncertainty_normalisation():
    from ttrl_bench.adaptation.grpo import normalise_uncertainty
    import math

    # log(100) = 4.6052: 2.3026 nats is half the maximum entropy of a 100-token vocabulary
    assert normalise_uncertainty([2.302585, 0.0], 100, "vocab") == pytest.approx([0.5, 0.0])
    assert normalise_uncertainty([1.0, 2.0, 3.0], 100, "minmax") == [0.0, 0.5, 1.0]
    assert normalise_uncertainty([1.0, 1.0], 100, "minmax") == [0.0, 0.0]
    assert normalise_uncertainty([math.log(100) * 2], 100, "vocab") == [1.0]
    with pytest.raises(ValueError, match="vocab"):
        normalise_uncertainty([1.0], 100, "zscore")


def test_completion_entropies_of_a_uniform_policy_are_log_v(tiny_model_dir, demo_data):
    """The entropy helper reads the right logits: check it against a policy whose outputs we control."""
    import torch
    from PIL import Image
    from ttrl_bench.adaptation.grpo import completion_entropies

    model, processor = load_model(str(tiny_model_dir))
    sample = load_manifest(demo_data, "test").iloc[0]
    image = Image.open(demo_data / sample["image"]).convert("RGB")
    vocab = model.config.get_text_config().vocab_size
    with torch.no_grad():
        model.lm_head.weight.zero_()  # tied to the embeddings: every logit 0 -> uniform
    model.config.tie_word_embeddings = True
    entropies = completion_entropies(model, processor, sample["prompt"], image, [[20, 21, 22], [30], []])
    assert entropies[:2] == pytest.approx([math.log(vocab)] * 2, rel=1e-5)
    assert entropies[2] == 0.0


ONE_ROUND = {"num_generations": 4, "max_completion_length": 24, "epochs": 1, "learning_rate": 1e-3, "kl_beta": 0.0}


@pytest.mark.parametrize("method", [m for m in METHOD_NAMES if is_per_sample(m)])
def test_per_sample_methods_predict_each_sample_and_restore_the_base_weights(method, scene_data, tiny_model_dir, tmp_path):
    model, processor = load_model(str(tiny_model_dir))
    base = {n: p.detach().clone() for n, p in model.state_dict().items()}
    samples = load_manifest(scene_data, "test").head(2)
    spec = resolve_method(method, ONE_ROUND)
    outputs, log, seconds = adapt_each_sample(model, processor, samples, scene_data, spec, tmp_path, seed=0,
                                              max_new_tokens=24)
    assert len(outputs) == len(seconds) == 2 and all(isinstance(o, str) for o in outputs)
    if spec["hyperparameters"]["updates"]:
        # one log row per generation round; single gen: 1 generation, 10 updates on it
        assert log.groupby("sample").size().tolist() == [1, 1]
        assert log["sample_updates"].tolist() == [spec["hyperparameters"]["updates_per_generation"]] * 2
    else:
        assert log.empty
    assert all(model.state_dict()[n].equal(p) for n, p in base.items())


def test_rollout_backend_choice_is_explicit():
    from ttrl_bench.adaptation.grpo import rollout_backend

    import importlib.util

    import torch

    assert rollout_backend("hf") == "hf"
    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        assert rollout_backend("auto") == "hf"
        with pytest.raises(ValueError, match="adaptation.rollout_backend is 'vllm'"):
            rollout_backend("vllm")
    with pytest.raises(ValueError, match="auto, hf or vllm"):
        rollout_backend("sglang")


def test_too_few_samples_for_a_step_is_a_clear_error(demo_data, tiny_model_dir, tmp_path):
    model, processor = load_model(str(tiny_model_dir))
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 2, seed=0)
    with pytest.raises(ValueError, match="prompts_per_step=8"):
        adapt(model, processor, samples, demo_data, resolve_method("ttrv"), tmp_path, seed=0)


def test_a_missing_local_model_is_named_before_any_download(tmp_path):
    from ttrl_bench.models.loading import resolve_model_source

    with pytest.raises(FileNotFoundError, match="models.<name>.source"):
        resolve_model_source("results/models/not-built")
    assert resolve_model_source("OpenGVLab/InternVL3-2B-hf") == "OpenGVLab/InternVL3-2B-hf"
    assert resolve_model_source(str(tmp_path)) == str(tmp_path)
