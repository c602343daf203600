"""The adaptation run's helpers that only the tiny-VLM tests reached (issue 39, mutation testing): the
out-of-memory and vLLM messages, the saved config's dtype, saving the adapted weights (LoRA merged
on the host), verl's group advantages, and the trainer's / adaptation's small methods, each called on
stand-ins (a tiny Llama, SimpleNamespace trainers) so that the whole file runs in seconds."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2VLConfig

from trl import GRPOTrainer

from ttrl_bench.adaptation import grpo, reward_bridge
from ttrl_bench.adaptation import trainer as trainer_module
from ttrl_bench.adaptation.reward_bridge import GroupReward
from ttrl_bench.adaptation.utils import (
    ProgressLog,
    out_of_memory_message,
    save_adapted,
    save_config_dtype,
    vllm_rollout_failure,
)
from ttrl_bench.adaptation.verl_update import verl_group_advantages

TAIL = ("keep gradient_checkpointing on, shorten max_completion_length, or give the job more GPUs "
        "(models.<name>.gpus).")


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    """A one-layer Llama of 16 hidden units and 64 tokens (builds in milliseconds)."""
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, vocab_size=64))


# --- utils.py: messages ---------------------------------------------------------------------------------------

def test_the_out_of_memory_message_names_the_gpu_its_memory_and_the_batch_sizes(monkeypatch):
    """On a GPU: 50,000 x 44,100 = 2,205,000,000 parameters (a meta tensor: no memory) / 1e9 = 2.205, whose
    float64 is 2.2050000000000000710 and prints as 2.21 (/ (1e9 + 1) would give 2.2049999978 -> 2.20); total
    memory 80 x 2^30 bytes -> 80 GiB; the micro-batch 2 and generation batch 16 as set (not num_generations 8)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (5 * 2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "NVIDIA H100 80GB HBM3")
    model = torch.nn.Linear(50_000, 44_100, bias=False, device="meta")
    err = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    hp = {"num_generations": 8, "micro_batch_size": 2, "generation_batch_size": 16}
    assert out_of_memory_message(model, hp, err) == (
        "out of GPU memory adapting a 2.21B-parameter model on NVIDIA H100 80GB HBM3 (80 GiB): CUDA out of memory. "
        "Tried to allocate 2.00 GiB\nLower adaptation.hyperparameters.<task>.micro_batch_size (now 2) or "
        "generation_batch_size (now 16), " + TAIL)


def test_the_out_of_memory_message_without_a_gpu_falls_back_to_num_generations(monkeypatch):
    """Without CUDA the device is "this device" with 0 GiB, and no CUDA call is made; a model of 10 x 10 + 10 =
    110 parameters is 0.00B; micro_batch_size null and generation_batch_size unset both read num_generations, 8."""
    def no_cuda():
        raise AssertionError("a CUDA query without CUDA")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "mem_get_info", no_cuda)
    monkeypatch.setattr(torch.cuda, "get_device_name", no_cuda)
    hp = {"num_generations": 8, "micro_batch_size": None}
    assert out_of_memory_message(torch.nn.Linear(10, 10), hp, RuntimeError("boom")) == (
        "out of GPU memory adapting a 0.00B-parameter model on this device (0 GiB): boom\nLower "
        "adaptation.hyperparameters.<task>.micro_batch_size (now 8) or generation_batch_size (now 8), " + TAIL)


def test_the_vllm_rollout_failure_names_the_error_and_the_hf_backend():
    """The way round a failed vLLM rollout, word for word, with the error's type and text."""
    err = vllm_rollout_failure(ValueError("engine died"))
    assert isinstance(err, RuntimeError)
    assert str(err) == ("vLLM rollouts failed (ValueError: engine died); set adaptation.rollout_backend: hf "
                        "(transformers' generate, slower, the path the CPU tests run) and rerun")


def test_the_progress_log_keeps_losses_learning_rates_and_step_times_and_logs_one_line_per_log(caplog):
    """One optimizer step at lr 5e-7 (the first parameter group's; a second group at 0 is not it), then TRL's log of
    that step: loss and step_time kept as floats, and one line of the float entries rounded to 4 places (0.123456
    -> 0.1235, 0.98765 -> 0.9877; the integer epoch left out). A log without loss or step_time (the run's summary)
    adds to neither list but is logged; an empty or missing log is neither kept nor logged."""
    caplog.set_level(logging.INFO, logger="ttrl_bench.adaptation.utils")
    progress, state = ProgressLog(), SimpleNamespace(global_step=3, max_steps=10)
    progress.on_optimizer_step(None, state, None, optimizer=SimpleNamespace(param_groups=[{"lr": 5e-7}, {"lr": 0.0}]))
    progress.on_log(None, state, None, logs={"loss": 0.123456, "step_time": 12.5, "epoch": 1, "grad_norm": 0.98765})
    progress.on_log(None, state, None, logs={"train_runtime": 100.0})
    progress.on_log(None, state, None, logs={})
    progress.on_log(None, state, None, logs=None)
    assert (progress.learning_rates, progress.losses, progress.step_times) == ([5e-7], [0.123456], [12.5])
    assert [r.getMessage() for r in caplog.records if r.name == "ttrl_bench.adaptation.utils"] == [
        "step 3/10 {'loss': 0.1235, 'step_time': 12.5, 'grad_norm': 0.9877}", "step 3/10 {'train_runtime': 100.0}"]


# --- utils.py: saving -----------------------------------------------------------------------------------------

def test_the_saved_config_says_the_tensors_dtype_in_every_sub_config_and_the_live_one_is_untouched(tmp_path):
    """A Qwen2-VL config (sub-configs vision_config and text_config) whose live dtype is float32 (master
    weights) saved for bfloat16 tensors: config.json says bfloat16 at the top and in both sub-configs, while the
    live config and its sub-configs still say float32 (a deep copy; a shallow one shares the sub-configs)."""
    config = Qwen2VLConfig()
    config.dtype = config.vision_config.dtype = config.text_config.dtype = torch.float32
    save_config_dtype(config, tmp_path, torch.bfloat16)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert (saved["dtype"], saved["vision_config"]["dtype"], saved["text_config"]["dtype"]) == ("bfloat16",) * 3
    assert (config.dtype, config.vision_config.dtype, config.text_config.dtype) == (torch.float32,) * 3


class RecordingAccelerator:
    """accelerate's Accelerator as save_adapted uses it, on the main process: `get_state_dict` returns the
    gathered state (here a copy of the model's, with `overrides` in place of the live values, as FSDP shards
    gathered on the host differ from what this process holds), and every call is recorded."""

    def __init__(self, overrides: dict | None = None):
        self.overrides, self.calls, self.is_main_process = overrides or {}, [], True

    def get_state_dict(self, model):
        self.calls.append(("get_state_dict", model))
        return {k: self.overrides.get(k, v).clone() for k, v in model.state_dict().items()}

    def unwrap_model(self, model):
        self.calls.append(("unwrap_model", model))
        return model

    def wait_for_everyone(self):
        self.calls.append(("wait_for_everyone",))


def test_save_adapted_writes_the_gathered_weights_in_the_checkpoints_dtype(tmp_path):
    """A full (not LoRA) model in fp32: the gathered state (its embedding table replaced by 0.25 everywhere,
    exactly representable in bf16) is what is saved, cast to bf16; config.json says bfloat16; the processor is
    saved to the same folder; every process waits for the others at the end."""
    model = tiny_llama()
    gathered = torch.full_like(model.model.embed_tokens.weight, 0.25)
    accelerator = RecordingAccelerator({"model.embed_tokens.weight": gathered})
    saved_processors = []
    processor = SimpleNamespace(save_pretrained=saved_processors.append)
    save_adapted(SimpleNamespace(accelerator=accelerator, model=model), processor, tmp_path, torch.bfloat16)
    weights = load_file(tmp_path / "model.safetensors")
    assert {t.dtype for t in weights.values()} == {torch.bfloat16}
    assert torch.equal(weights["model.embed_tokens.weight"], torch.full((64, 16), 0.25, dtype=torch.bfloat16))
    assert torch.equal(weights["model.layers.0.self_attn.q_proj.weight"],
                       model.model.layers[0].self_attn.q_proj.weight.detach().to(torch.bfloat16))
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "bfloat16"
    assert saved_processors == [tmp_path]
    assert accelerator.calls == [("get_state_dict", model), ("unwrap_model", model), ("wait_for_everyone",)]



def test_the_saved_weights_record_comes_last_and_tells_a_half_deleted_directory(tmp_path):
    """save_adapted's record (models/saved.py) lists every file it wrote with its size: a whole directory
    misses nothing; one file gone (Snakemake's temp() removal unlinks them one by one), one cut short, or
    the record itself gone, and what is missing is named."""
    from ttrl_bench.models.saved import RECORD, missing_files

    model = tiny_llama()
    accelerator = RecordingAccelerator({})
    processor = SimpleNamespace(save_pretrained=lambda out: (out / "tokenizer.json").write_text("{}"))
    save_adapted(SimpleNamespace(accelerator=accelerator, model=model), processor, tmp_path, torch.bfloat16)
    listed = json.loads((tmp_path / RECORD).read_text())["files"]
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(listed)  # the processor's too: it came last
    assert listed["tokenizer.json"] == 2 and missing_files(tmp_path) == []
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "tokenizer.json").write_text("{")
    assert sorted(missing_files(tmp_path)) == ["model.safetensors", "tokenizer.json"]
    (tmp_path / RECORD).unlink()
    assert missing_files(tmp_path) == [RECORD]

def test_a_lora_run_saves_its_gathered_adapter_and_the_base_with_it_merged_on_the_host(tmp_path, monkeypatch):
    """LoRA r=2, alpha=4 on q_proj of a tiny Llama loaded from tmp_path/base. The live adapter's B is still 0 (as
    on a process holding shards); the gathered state's B is 0.01 x (1..32) as a 16 x 2 matrix. Saved: that B in
    out/lora_adapter, and the base reloaded on the CPU in fp32 (load_model's arguments recorded; a stand-in that
    loads a text-only Llama, as the project's load_model loads image-text models only) with the adapter merged:
    q_proj = W + (alpha / r) B A = W + 2 B A, in bf16, with no LoRA tensor left."""
    base_dir = tmp_path / "base"
    tiny_llama().save_pretrained(base_dir)
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32),
                           LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
    prefix = "base_model.model.model.layers.0.self_attn.q_proj."
    B = 0.01 * torch.arange(1, 33, dtype=torch.float32).reshape(16, 2)
    A = model.state_dict()[prefix + "lora_A.default.weight"].detach().clone()
    W = model.state_dict()[prefix + "base_layer.weight"].detach().clone()
    assert not model.state_dict()[prefix + "lora_B.default.weight"].any()  # peft starts B at 0

    loads = []

    def load_model(source, device=None, dtype="auto"):
        loads.append((str(source), device, dtype))
        torch_dtype = {"auto": "auto", "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
        return AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype).to(device or "cpu").eval(), None

    monkeypatch.setattr("ttrl_bench.models.loading.load_model", load_model)
    accelerator = RecordingAccelerator({prefix + "lora_B.default.weight": B})
    out = tmp_path / "out"
    save_adapted(SimpleNamespace(accelerator=accelerator, model=model), SimpleNamespace(save_pretrained=lambda p: None),
                 out, torch.bfloat16)

    assert loads == [(str(base_dir), "cpu", "fp32")]
    adapter = load_file(out / "lora_adapter" / "adapter_model.safetensors")
    assert torch.equal(adapter[prefix + "lora_B.weight"], B)
    assert torch.equal(adapter[prefix + "lora_A.weight"], A)
    weights = load_file(out / "model.safetensors")
    assert not [k for k in weights if "lora" in k]
    assert torch.equal(weights["model.layers.0.self_attn.q_proj.weight"], (W + 2 * B @ A).to(torch.bfloat16))
    assert not torch.equal((W + 2 * B @ A).to(torch.bfloat16), W.to(torch.bfloat16))  # the merge shows
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"


# --- verl_update.py --------------------------------------------------------------------------------------------

def test_verls_group_advantages_of_a_last_group_of_two_in_float32():
    """float64 rewards [1, 0, 0 | 1, 0.5], groups of 3: the last group has two rewards and is a group (mean and
    unbiased std), not a single. Group 1: mean 1/3, deviations 2/3, -1/3, -1/3, variance (4/9 + 1/9 + 1/9) / 2 =
    1/3, std 0.5773503; group 2: mean 0.75, deviations +-0.25, variance 0.125 / 1, std 0.3535534; each divided by
    (std + 1e-6). Computed and returned in float32 on the input's device."""
    ours = verl_group_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5], dtype=torch.float64), 3)
    assert ours.dtype == torch.float32 and ours.device == torch.device("cpu")
    s1, s2 = math.sqrt(1 / 3) + 1e-6, math.sqrt(0.125) + 1e-6
    assert ours.tolist() == pytest.approx([2 / 3 / s1, -1 / 3 / s1, -1 / 3 / s1, 0.25 / s2, -0.25 / s2], rel=1e-6)


# --- trainer.py ------------------------------------------------------------------------------------------------

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


# --- reward_bridge.py ------------------------------------------------------------------------------------------

def test_dares_uncertainties_run_the_policy_on_the_prompts_question_image_and_system(monkeypatch):
    """The forward gets the row's question, image and system prompt, the group's completion ids and the
    reward's micro-batch; its entropies are divided by log |V| of the text config (a Qwen2-VL config whose
    text vocabulary is 64): log(64) / 2 -> 0.5, 2 log(64) -> 1 (clipped)."""
    calls = []

    def completion_entropies(*args, **kwargs):
        calls.append((args, kwargs))
        return [math.log(64) / 2, 2 * math.log(64)]

    monkeypatch.setattr(reward_bridge, "completion_entropies", completion_entropies)
    model = SimpleNamespace(config=Qwen2VLConfig(text_config={"vocab_size": 64}))
    processor, image = object(), object()
    fake = SimpleNamespace(policy=(model, processor), micro_batch=3, uncertainty_norm="vocab")
    row = {"question": "What is shown?", "image": image, "system": "Answer briefly."}
    assert GroupReward._uncertainties(fake, row, [[1, 2], [3]]) == pytest.approx([0.5, 1.0])
    assert calls == [((model, processor, "What is shown?", image, [[1, 2], [3]]),
                      {"system": "Answer briefly.", "micro_batch": 3})]


def test_a_reward_that_needs_logprobs_gets_every_votes_token_statistics_and_the_image(monkeypatch):
    """A `needs_logprobs` reward (docs/extending.md's hooks): the image column reaches the bridge's scoring (TRL's
    columns keep it), the forward runs on the row's question, image and system with the group's completion ids,
    and the reward is called with its token_logprobs and token_entropies as the forward returned them."""
    from ttrl_bench.rewards.registry import Reward

    calls, seen = [], []

    def completion_token_statistics(*args, **kwargs):
        calls.append((args, kwargs))
        return [[-0.5, -1.0], [0.0]], [[0.2, 0.3], [0.0]]

    def fn(answers, token_logprobs, token_entropies):
        seen.append((answers, token_logprobs, token_entropies))
        return [1.0, 0.0]

    monkeypatch.setattr(reward_bridge, "completion_token_statistics", completion_token_statistics)
    monkeypatch.setattr(reward_bridge, "get_reward", lambda name, **params: Reward(fn, needs_logprobs=True))
    bridge = GroupReward("sees_the_model", {}, num_generations=2, micro_batch=3)
    model, processor, image = object(), object(), object()
    bridge.policy = (model, processor)
    rewards = bridge(["p", "p"], ["A", "B"], completion_ids=[[1, 2], [3]], id=["s1", "s1"], answer=["A", "A"],
                     question=["What is shown?"] * 2, image=[image, image], system=["Answer briefly."] * 2,
                     options=[["one", "two"]] * 2)
    assert rewards == [1.0, 0.0]
    assert calls == [((model, processor, "What is shown?", image, [[1, 2], [3]]),
                      {"system": "Answer briefly.", "micro_batch": 3})]
    assert seen == [(["A", "B"], [[-0.5, -1.0], [0.0]], [[0.2, 0.3], [0.0]])]


# --- grpo.py ---------------------------------------------------------------------------------------------------

def test_starting_over_resets_the_trainer_as_a_new_one_would_be(tmp_path):
    """`_start_over` on a trainer after a run: the new manifest's prompts (the image under image_root), the
    optimizer's state emptied (the optimizer kept), step 0 and no buffered inputs, vLLM's loaded step -1 (reload
    at the first generation), a new reward (the reward function TRL calls, with the policy set) and empty logs."""
    Image.new("RGB", (8, 8), "red").save(tmp_path / "a.png")
    manifest = pd.DataFrame({"id": ["s1"], "prompt": ["Name the colour."], "image": ["a.png"], "answer": ["red"]})
    optimizer = SimpleNamespace(state={"w": {"exp_avg": 1.0}})
    old = SimpleNamespace(policy=("old", "policy"))
    trainer = SimpleNamespace(train_dataset=None, optimizer=optimizer, _step=12, _buffered_inputs=[{"x": 1}],
                              use_vllm=True, _last_loaded_step=12, reward_funcs=[old])
    progress = ProgressLog()
    progress.losses, progress.learning_rates, progress.step_times = [0.1], [1e-6], [2.0]
    new = SimpleNamespace(policy=None)
    fake = SimpleNamespace(trainer=trainer, reward=old, new_reward=lambda: new, model="model", processor="processor",
                           progress=progress)
    grpo.TestTimeAdaptation._start_over(fake, manifest, tmp_path)
    row = trainer.train_dataset[0]
    assert row["prompt"] == [{"role": "user", "content": "Name the colour."}] and row["id"] == "s1"
    assert row["image"].size == (8, 8) and row["image"].getpixel((0, 0)) == (255, 0, 0)
    assert trainer.optimizer is optimizer and optimizer.state == {}
    assert (trainer._step, trainer._buffered_inputs, trainer._last_loaded_step) == (0, None, -1)
    assert fake.reward is new and trainer.reward_funcs == [new] and new.policy == ("model", "processor")
    assert (progress.losses, progress.learning_rates, progress.step_times) == ([], [], [])


def test_auto_rolls_out_through_hf_generate_until_vllm_rollouts_have_a_gpu_run(monkeypatch):
    """`auto` is HF generate even where vLLM could run (the stand-in says it could): docs/gpu-runs.md records colocated
    vLLM rollouts 5 of 20 steps on the last H100, none complete; `vllm` is the one setting that asks for them. The
    reason is the job's log line."""
    from ttrl_bench.adaptation.config import rollout_backend_and_reason

    from ttrl_bench.adaptation import config

    asked = []  # choose_backend answering that vLLM could run, recording what it was asked
    monkeypatch.setattr(config, "choose_backend", lambda choice, key: asked.append((choice, key)) or "vllm")
    backend, why = rollout_backend_and_reason("auto")
    assert backend == "hf" and "docs/gpu-runs.md" in why and "adaptation.rollout_backend: vllm" in why
    assert rollout_backend_and_reason("vllm") == ("vllm", "adaptation.rollout_backend: vllm")
    assert asked == [("auto", "adaptation.rollout_backend"), ("vllm", "adaptation.rollout_backend")]
