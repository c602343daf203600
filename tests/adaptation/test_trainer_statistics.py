"""adaptation/trainer.py, what the trainer computes beside TRL's loss, on stand-ins (a recording policy, a
SimpleNamespace trainer): verl's advantages sliced to this process's completions, ECHO's token entropy and
confidence on the completion tokens, and each chunk's own image inputs in ECHO's statistics forward."""

from __future__ import annotations

import contextlib
import functools
import math
from types import SimpleNamespace

import pytest
import torch
from trl import GRPOTrainer

from ttrl_bench.adaptation import trainer as trainer_module

from tests.support.adaptation import tiny_llama


def test_the_trainers_verl_advantages_weigh_skip_nan_and_slice_this_processs_completions():
    """Two processes of 2 completions, one prompt of 4 (num_generations 4) split across them; two reward
    functions of weights 1 and 0.5, the second NaN where it does not apply (TRL's convention, nansum skips it):
    rows [1, 0], [0, 2], [1, nan], [0, nan] -> rewards 1, 0 + 2 x 0.5 = 1, 1, 0. Mean 0.75, deviations 0.25 (x3)
    and -0.75, unbiased variance (3 x 0.0625 + 0.5625) / 3 = 0.25, std 0.5: process 1 holds rows 2 and 3,
    0.25 / (0.5 + 1e-6) and -0.75 / (0.5 + 1e-6)."""
    fake = SimpleNamespace(
        _gathered_rewards_per_func=torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, math.nan], [0.0, math.nan]]),
        reward_weights=torch.tensor([1.0, 0.5]), num_generations=4, accelerator=SimpleNamespace(process_index=1))
    verl_advantages = trainer_module.TestTimeGRPOTrainer._verl_advantages
    assert verl_advantages(fake, 2).tolist() == pytest.approx([0.25 / (0.5 + 1e-6), -0.75 / (0.5 + 1e-6)], rel=1e-6)
    fake.accelerator.process_index = 0
    assert verl_advantages(fake, 2).tolist() == pytest.approx([0.25 / (0.5 + 1e-6)] * 2, rel=1e-6)


class RecordingPolicy(torch.nn.Module):
    """The policy as `_entropy_and_confidence` sees it: a tiny Llama that records each forward's inputs (the
    image inputs TRL slices per chunk included) and the gradient-checkpointing switches."""

    def __init__(self):
        super().__init__()
        self.lm, self.calls, self.switches = tiny_llama(), [], []
        self.is_gradient_checkpointing = True

    def gradient_checkpointing_disable(self):
        self.switches.append("off")
        self.is_gradient_checkpointing = False

    def gradient_checkpointing_enable(self, kwargs=None):
        self.switches.append(("on", kwargs))
        self.is_gradient_checkpointing = True

    def forward(self, input_ids, attention_mask, logits_to_keep, **images):
        self.calls.append({"input_ids": input_ids, "checkpointing": self.is_gradient_checkpointing,
                           "grad": torch.is_grad_enabled(), **images})
        return self.lm(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep)


def fake_grpo_trainer(policy, confidence: str, batch_size: int = 1, temperature: float = 0.7):
    """A stand-in `self` with what `_entropy_and_confidence` and TRL's own `_get_per_token_logps_and_entropies`
    (GRPOTrainer's, bound to it; the subclass's override only adds the KL clamp, off here) read."""
    fake = SimpleNamespace(model=policy, temperature=temperature, token_confidence=confidence,
                           args=SimpleNamespace(gradient_checkpointing_kwargs={"use_reentrant": False},
                                                per_device_train_batch_size=batch_size),
                           accelerator=SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True))
    fake._get_per_token_logps_and_entropies = functools.partial(
        GRPOTrainer._get_per_token_logps_and_entropies, fake)
    return fake


@pytest.mark.parametrize("confidence", ["top_k", "sampled"])
def test_echos_token_entropy_and_confidence_are_the_policys_on_the_completion_tokens(confidence):
    """Two prompts of 3 tokens with completions of 4, micro-batches of 1 (per_device_train_batch_size): position
    p's logits (/ temperature 0.7) predict token p + 1, so completion token t is scored by the logits at 2 + t
    of one whole forward. Entropy -sum p log p; confidence the mean probability of the top 3 tokens (ECHO's
    top-k, dp_actor.py `_compute_topk_confidence`) or of the sampled token. Two forwards of one row each, with
    gradient checkpointing off and no gradient, switched back on with the trainer's kwargs."""
    policy = RecordingPolicy()
    prompts, completions = torch.tensor([[5, 6, 7], [8, 9, 10]]), torch.tensor([[11, 12, 13, 14], [15, 16, 17, 18]])
    batch = {"prompt_ids": prompts, "completion_ids": completions, "prompt_mask": torch.ones(2, 3, dtype=torch.long),
             "completion_mask": torch.ones(2, 4, dtype=torch.long)}
    fake = fake_grpo_trainer(policy, confidence)
    entropy, confidence_out = trainer_module.TestTimeGRPOTrainer._entropy_and_confidence(fake, batch, 3)
    with torch.no_grad():
        logits = policy.lm(input_ids=torch.cat([prompts, completions], dim=1)).logits[:, 2:6] / 0.7
    logp = torch.log_softmax(logits, dim=-1)
    assert entropy.shape == confidence_out.shape == (2, 4)
    assert torch.allclose(entropy, -(logp.exp() * logp).sum(-1), atol=1e-5)
    expected = (logp.gather(-1, completions.unsqueeze(-1)).squeeze(-1).exp() if confidence == "sampled"
                else logp.exp().sort(-1, descending=True).values[..., :3].mean(-1))
    assert torch.allclose(confidence_out, expected, atol=1e-5)
    assert [c["input_ids"].tolist() for c in policy.calls] == [[[5, 6, 7, 11, 12, 13, 14]],
                                                               [[8, 9, 10, 15, 16, 17, 18]]]
    assert [(c["checkpointing"], c["grad"]) for c in policy.calls] == [(False, False)] * 2
    assert policy.switches == ["off", ("on", {"use_reentrant": False})]


def _images(calls, keys):
    return [{k: c[k].tolist() if torch.is_tensor(c[k]) else c[k] for k in keys} for c in calls]


# Image inputs of two samples (one image each), as four families lay them out, and what TRL hands each
# one-sample chunk: Qwen-VL's patch rows (prod(t, h, w) per image: 1 x 1 x 2 = 2 rows, then 1 x 2 x 2 = 4);
# Gemma's per-image position ids; LFM2-VL's tiles (2 and 1) with their masks and shapes; InternVL's tiles (1, 2).
IMAGE_LAYOUTS = {
    "grid": ({"pixel_values": torch.arange(6.0).unsqueeze(1), "image_grid_thw": torch.tensor([[1, 1, 2], [1, 2, 2]]),
              "num_images": [1, 1], "pixel_attention_mask": torch.tensor([[1, 0], [1, 1]]),
              "image_sizes": torch.tensor([[28, 56], [56, 56]]), "token_type_ids": torch.tensor([[0] * 7, [1] * 7]),
              "mm_token_type_ids": torch.tensor([[2] * 7, [3] * 7])},
             [{"pixel_values": [[0.0], [1.0]], "image_grid_thw": [[1, 1, 2]], "pixel_attention_mask": [[1, 0]],
               "image_sizes": [[28, 56]], "token_type_ids": [[0] * 7], "mm_token_type_ids": [[2] * 7]},
              {"pixel_values": [[2.0], [3.0], [4.0], [5.0]], "image_grid_thw": [[1, 2, 2]],
               "pixel_attention_mask": [[1, 1]], "image_sizes": [[56, 56]], "token_type_ids": [[1] * 7],
               "mm_token_type_ids": [[3] * 7]}]),
    "positions": ({"pixel_values": torch.tensor([[0.0], [1.0]]), "image_position_ids": torch.tensor([[4], [9]]),
                   "num_images": [1, 1]},
                  [{"pixel_values": [[0.0]], "image_position_ids": [[4]]},
                   {"pixel_values": [[1.0]], "image_position_ids": [[9]]}]),
    "spatial": ({"pixel_values": torch.arange(3.0).unsqueeze(1), "num_tiles": [2, 1],
                 "pixel_attention_mask": torch.tensor([[1], [0], [1]]),
                 "spatial_shapes": torch.tensor([[1, 1], [1, 2], [2, 2]])},
                [{"pixel_values": [[0.0], [1.0]], "pixel_attention_mask": [[1], [0]],
                  "spatial_shapes": [[1, 1], [1, 2]]},
                 {"pixel_values": [[2.0]], "pixel_attention_mask": [[1]], "spatial_shapes": [[2, 2]]}]),
    "tiles": ({"pixel_values": torch.arange(3.0).unsqueeze(1), "num_tiles": [1, 2]},
              [{"pixel_values": [[0.0]]}, {"pixel_values": [[1.0], [2.0]]}]),
}


@pytest.mark.parametrize("layout", IMAGE_LAYOUTS)
def test_echos_statistics_forward_gets_each_chunks_own_image_inputs(layout):
    """Every image input of the batch reaches TRL's chunking by its own name: each one-sample forward receives
    that sample's slice (worked out per layout in IMAGE_LAYOUTS), and no image input it was not given."""
    images, expected = IMAGE_LAYOUTS[layout]
    policy = RecordingPolicy()
    batch = {"prompt_ids": torch.tensor([[5, 6, 7], [8, 9, 10]]), "completion_ids": torch.tensor([[11] * 4, [12] * 4]),
             "prompt_mask": torch.ones(2, 3, dtype=torch.long), "completion_mask": torch.ones(2, 4, dtype=torch.long),
             **images}
    trainer_module.TestTimeGRPOTrainer._entropy_and_confidence(fake_grpo_trainer(policy, "top_k"), batch, 3)
    assert [set(c) - {"input_ids", "checkpointing", "grad"} for c in policy.calls] == [set(e) for e in expected]
    assert _images(policy.calls, expected[0]) == expected
