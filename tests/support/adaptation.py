"""Builders shared by the adaptation tests."""

import torch
from PIL import Image
from transformers import LlamaConfig, LlamaForCausalLM

from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.datasets.registry import DIGIT_NAMES
from ttrl_bench.datasets.sampling import select_adaptation_samples
from ttrl_bench.models import tiny


def linear_2x2() -> torch.nn.Linear:
    """A 2 x 2 linear layer with weight [[1, 2], [3, 4]] and a frozen bias [0.5, -0.5]."""
    layer = torch.nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
        layer.bias.copy_(torch.tensor([0.5, -0.5]))
    layer.bias.requires_grad_(False)
    return layer


def learning_rates(schedule, optimizer, steps: int) -> list[float]:
    """The lr of each of `steps` optimizer steps (the schedule stepped after each, as Trainer does)."""
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    return rates


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    """A one-layer Llama of 16 hidden units and 64 tokens (builds in milliseconds)."""
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, vocab_size=64))


def _completions(texts):
    """TRL's conversational completions of the texts: one assistant message each."""
    return [[{"role": "assistant", "content": t}] for t in texts]


def math_samples(demo_data):
    """Two demo digits as free-form math questions (no options) whose gold answer is the digit's numeral."""
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 2, seed=0).copy()
    samples["answer"] = [str(DIGIT_NAMES.index(label)) for label in samples["label"]]
    samples["options"] = [[] for _ in range(len(samples))]
    return samples


def half_taught(model, processor, samples, demo_data, monkeypatch):
    """The session's tiny models sample almost uniformly (entropy 6.28 nats, ln 600 = 6.40), so no rollout
    names the gold numeral and every reward is equal. 20 supervised steps at lr 5e-3 toward "<numeral><eos>"
    (the demo model's own warm start, models/tiny.py) make them give it in about 10 of 16 rollouts
    (measured on Qwen2.5-VL and InternVL: 10 and 11), so the rewards differ within a group."""
    monkeypatch.setattr(tiny, "warm_start_target", lambda row: row["answer"])
    tiny.warm_start(model, processor, samples.to_dict("records"),
                    lambda row: Image.open(demo_data / row["image"]).convert("RGB"), steps=20, lr=5e-3, seed=0)


ONE_STEP = {"num_generations": 8, "n_votes": 8, "max_completion_length": 3, "epochs": 1, "prompts_per_step": 1,
            "generation_batch_size": 16, "learning_rate": 1e-3, "micro_batch_size": 4, "kl_beta": 0.0,
            "warmup_ratio": 0.0, "temperature": 1.0}
