"""Builders shared by the adaptation tests."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM


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
