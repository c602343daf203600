"""adaptation/utils.py: the out-of-memory and vLLM messages, the progress log, the saved config's dtype and
saving the adapted weights (LoRA merged on the host), on stand-ins (a tiny Llama, a recording accelerator) so
that the file runs in seconds."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, Qwen2VLConfig

from ttrl_bench.adaptation.utils import (
    ProgressLog,
    out_of_memory_message,
    save_adapted,
    save_config_dtype,
    vllm_rollout_failure,
)

from tests.support.adaptation import tiny_llama


TAIL = ("keep gradient_checkpointing on, shorten max_completion_length, or give the job more GPUs "
        "(models.<name>.gpus).")


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
