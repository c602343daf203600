"""GRPO adaptation through TRL on a tiny model of every family (CPU): two steps of every method, per-sample
methods restoring the base weights, the batch layout, the vote split, LoRA, bf16 checkpoints, placeholder tokens,
the frozen vision tower and the KL reference's placement. (The reward and its group-integrity guard are in
test_reward_bridge.py.)"""

import pytest

from ttrl_bench.adaptation.grpo import adapt
from ttrl_bench.adaptation.layout import batch_layout, fit_to_samples
from ttrl_bench.adaptation.per_sample import adapt_each_sample
from ttrl_bench.adaptation.presets import METHOD_NAMES, PRESETS, is_per_sample, method_task, resolve_method
from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.datasets.sampling import select_adaptation_samples
from ttrl_bench.models.loading import load_model
from ttrl_bench.models.tiny_families import FAMILIES  # every family the configs use: each runs every method


TWO_STEPS = {"num_generations": 4, "n_votes": 4, "max_completion_length": 3, "epochs": 1, "prompts_per_step": 1,
             "learning_rate": 1e-3, "micro_batch_size": 2, "kl_beta": 0.0, "weight_decay": 0.0, "warmup_ratio": 0.0,
             "generation_batch_size": None}  # one generation round per step (ECHO's preset generates 5 steps at once)


@pytest.mark.parametrize("family", FAMILIES)
# the ttrv-<k>-epochs[-8-prompts] presets are "ttrv" with other epochs and rounds, which TWO_STEPS overrides
@pytest.mark.parametrize("method", [m for m in METHOD_NAMES if method_task(m) == "mcq" and "-epochs" not in m])
def test_two_grpo_steps_of_every_method(method, family, demo_data, tiny_model_dirs, tmp_path):
    model, processor = load_model(str(tiny_model_dirs[family]), dtype="fp32")
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 2, seed=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    log = adapt(model, processor, samples, demo_data, resolve_method(method, TWO_STEPS), tmp_path, seed=0)
    assert list(log["step"]) == [0, 1]
    assert log[["reward_mean", "answer_entropy", "rollout_accuracy"]].notna().all().all()
    changed = any(not p.detach().equal(before[n]) for n, p in model.named_parameters())
    # A group whose rewards are all equal has zero advantages and leaves the weights alone.
    assert changed == (log["reward_std"] > 0).any()


ONE_ROUND = {"num_generations": 4, "max_completion_length": 24, "epochs": 1, "learning_rate": 1e-3, "kl_beta": 0.0}


@pytest.mark.parametrize("family", FAMILIES)
# GRPO per sample; Appendix C's baselines (an `objective`) are tests/adaptation/test_baselines.py's
@pytest.mark.parametrize("method", [m for m in METHOD_NAMES if is_per_sample(m) and "objective" not in PRESETS[m]])
def test_per_sample_methods_predict_each_sample_and_restore_the_base_weights(method, family, scene_data,
                                                                             tiny_model_dirs, tmp_path):
    model, processor = load_model(str(tiny_model_dirs[family]), dtype="fp32")
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
    from ttrl_bench.adaptation.config import rollout_backend

    import importlib.util

    import torch

    assert rollout_backend("hf") == "hf"
    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        assert rollout_backend("auto") == "hf"
        with pytest.raises(ValueError, match="adaptation.rollout_backend is 'vllm'"):
            rollout_backend("vllm")
    with pytest.raises(ValueError, match="auto, hf or vllm"):
        rollout_backend("sglang")


def test_one_optimizer_step_is_the_presets_batch_in_micro_batches():
    """TTRV authors' logs (verl): one optimizer step per prompt's 16 trained rollouts, 2 per forward/backward
    -> 8 accumulation steps; a round of 4 prompts x 16 generated at once."""
    hp = resolve_method("ttrv")["hyperparameters"]
    assert (hp["prompts_per_step"], hp["num_generations"], hp["n_votes"]) == (1, 16, 32)
    assert batch_layout(hp) == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 8,
                                "generation_batch_size": 64}
    # 4 GPUs (issue 13): 16 / (2 x 4) = 2 accumulation steps; each process generates one group
    assert batch_layout(hp, num_processes=4) == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2,
                                                 "generation_batch_size": 64}
    # TTRV Appendix A: 8 prompts x 32 rollouts = 256 per step; all generated at once if asked
    appendix = resolve_method("ttrv-appendix-a", {"generation_batch_size": 256})["hyperparameters"]
    assert batch_layout(appendix) == {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 64,
                                      "generation_batch_size": 256}
    # VR-TTRL on 4 GPUs: 8 rollouts of one prompt, 2 per process, so micro-batches of 2
    vr = resolve_method("vr-ttrl")["hyperparameters"]
    assert batch_layout(vr, num_processes=4) == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
                                                 "generation_batch_size": 8}
    with pytest.raises(ValueError, match="micro_batch_size 5"):
        batch_layout({**hp, "micro_batch_size": 5})
    with pytest.raises(ValueError, match="generation_batch_size = 24"):
        batch_layout({**hp, "generation_batch_size": 24})


def test_fewer_samples_than_a_step_fill_one_step():
    """TTRV Table 6 adapts on one sample: a step holds the samples there are, a round the steps they fill."""
    hp = resolve_method("ttrv-appendix-a")["hyperparameters"]
    assert fit_to_samples(hp, 1)["prompts_per_step"] == 1
    assert fit_to_samples(hp, 20)["prompts_per_step"] == 8
    ttrv = resolve_method("ttrv")["hyperparameters"]
    assert fit_to_samples(ttrv, 1)["generation_batch_size"] == 16
    assert fit_to_samples(ttrv, 20)["generation_batch_size"] == 64


@pytest.mark.parametrize("family", FAMILIES)
def test_vote_split_runs_through_trl(family, demo_data, tiny_model_dirs, tmp_path):
    """8 rollouts vote, 4 are trained on, through the trainer's own generation path."""
    model, processor = load_model(str(tiny_model_dirs[family]), dtype="fp32")
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 2, seed=0)
    log = adapt(model, processor, samples, demo_data, resolve_method("ttrv", {**TWO_STEPS, "n_votes": 8}), tmp_path,
                seed=0)
    assert list(log["votes"]) == [8, 8] and log.attrs["optimizer_steps"] == 2


def test_a_lora_run_saves_its_adapter_and_the_base_with_it_merged(demo_data, tiny_model_dir, tmp_path):
    """ECHO's GeoQA checkpoint is a LoRA adapter (hyperparameter `lora`): TRL trains the adapter, the job saves
    it in lora_adapter/ and the base checkpoint with it merged. Worked by hand from the saved tensors: a
    targeted weight is W + (alpha / r) B A (peft's LoRA), every other weight is the base's, bit for bit."""
    import torch
    from safetensors.torch import load_file

    from ttrl_bench.adaptation.hyperparameters import lora_for_dataset

    lora = lora_for_dataset({"rank": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"], "datasets": ["demo"]},
                            "demo")
    assert lora == {"rank": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    model, processor = load_model(str(tiny_model_dir), dtype="fp32")
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 2, seed=0)
    spec = resolve_method("random-reward", {**TWO_STEPS, "learning_rate": 1e-2, "num_generations": 8, "n_votes": 8,
                                            "micro_batch_size": 8, "lora": lora})
    adapted = tmp_path / "adapted"
    log = adapt(model, processor, samples, demo_data, spec, tmp_path, seed=0, save_dtype=torch.float32,
                save_to=adapted)
    assert log.attrs["optimizer_steps"] == 2 and log.attrs["weights_changed"] > 0.4  # the adapter's B left zero
    adapter = load_file(str(adapted / "lora_adapter" / "adapter_model.safetensors"))
    merged = {n: p.detach() for n, p in load_model(str(adapted), dtype="fp32")[0].named_parameters()}
    assert set(merged) == set(base)  # the base's names: no adapter left in the merged checkpoint
    targeted = [n for n in base if n.endswith(("q_proj.weight", "v_proj.weight"))]
    assert targeted
    for name in targeted:
        stem = "base_model.model." + name[: -len(".weight")]
        a, b = adapter[f"{stem}.lora_A.weight"], adapter[f"{stem}.lora_B.weight"]
        assert a.shape[0] == 4 and b.abs().sum() > 0
        torch.testing.assert_close(merged[name], base[name] + (8 / 4) * b @ a)
    assert all(merged[n].equal(base[n]) for n in base if n not in targeted)


def test_lora_applies_to_its_training_sets_only():
    from ttrl_bench.adaptation.config import lora_config
    from ttrl_bench.adaptation.hyperparameters import lora_for_dataset

    lora = {"rank": 128, "alpha": 128, "target_modules": "all-linear", "datasets": ["geoqa"]}
    assert lora_for_dataset(lora, "geometry3k") is None and lora_for_dataset(None, "geoqa") is None
    config = lora_config(lora_for_dataset(lora, "geoqa"))  # ECHO's GeoQA: geometry3k.sh:108-109, ppo_trainer.yaml:119
    assert (config.r, config.lora_alpha, config.target_modules, config.bias) == (128, 128, "all-linear", "none")
    with pytest.raises(ValueError, match="resolved per training set"):
        lora_config(lora)
    with pytest.raises(ValueError, match="needs rank, alpha and datasets"):
        lora_for_dataset({"rank": 8, "datasets": ["geoqa"]}, "geoqa")


def test_a_bf16_checkpoint_adapted_at_the_papers_lr_changes_its_weights(demo_data, tiny_model_dir, tmp_path):
    """gpu-probe.md: a bf16 checkpoint trained in bf16 at lr 5e-7 changed 0.26% of its weights (the
    update is far below bf16's resolution: ~1e-4 at 0.02). Loaded as fp32 master weights, 2 AdamW
    steps move every weight with a gradient by ~lr each, which fp32 resolves (~2e-9 at 0.02)."""
    import torch

    from ttrl_bench.models.loading import checkpoint_dtype

    stored = tmp_path / "bf16"
    model, processor = load_model(str(tiny_model_dir))
    model.to(torch.bfloat16).save_pretrained(stored)
    processor.save_pretrained(stored)
    assert checkpoint_dtype(str(stored)) == torch.bfloat16
    model, processor = load_model(str(stored), dtype="fp32")
    assert all(p.dtype == torch.float32 for p in model.parameters())
    samples = select_adaptation_samples(load_manifest(demo_data, "test"), 2, seed=0)
    # random reward: nonzero advantages whatever the tiny model answers (seeded)
    spec = resolve_method("random-reward", {**TWO_STEPS, "learning_rate": 5e-7, "num_generations": 8, "n_votes": 8,
                                            "micro_batch_size": 8})
    adapted = tmp_path / "adapted"
    log = adapt(model, processor, samples, demo_data, spec, tmp_path, seed=0, save_dtype=torch.bfloat16,
                save_to=adapted)
    assert log.attrs["optimizer_steps"] == 2 and (log["reward_std"] > 0).all()
    # issue 23 finding 1: the saved config says what the tensors hold (save_pretrained writes the fp32
    # master model's dtype), so evaluation's dtype="auto" loads the adapted checkpoint in bf16 as it
    # loads the zero-shot one: both rows of a delta run in the same precision
    import json

    from safetensors import safe_open

    assert json.loads((adapted / "config.json").read_text())["dtype"] == "bfloat16"
    with safe_open(str(adapted / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
    assert load_model(str(adapted))[0].dtype == load_model(str(stored))[0].dtype == torch.bfloat16
    assert checkpoint_dtype(str(adapted)) == torch.bfloat16
    assert log.attrs["weights_changed"] >= 0.90
    # what a bf16 checkpoint keeps of a 2-step update at 5e-7: rounding flips only weights that sit
    # within ~1e-6 of a bf16 rounding boundary, a small share
    assert log.attrs["weights_changed_saved"] < 0.10


def test_placeholder_tokens_are_forbidden_and_refused(tiny_model_dirs, tmp_path):
    """Tiny tokenizers list the ChatML tokens first: Qwen2.5-VL's <|image_pad|> is id 5 and
    <|video_pad|> 6; InternVL's <IMG_CONTEXT> is 5 (its config has no video token)."""
    from ttrl_bench.adaptation.config import grpo_config
    from ttrl_bench.adaptation.trainer import PlaceholderInRolloutError, refuse_placeholders
    from ttrl_bench.models.families import placeholder_token_ids
    from transformers import AutoConfig

    assert placeholder_token_ids(AutoConfig.from_pretrained(tiny_model_dirs["qwen2_5_vl"])) == [5, 6]
    assert placeholder_token_ids(AutoConfig.from_pretrained(tiny_model_dirs["internvl"])) == [5]
    from ttrl_bench.adaptation.config import forbidden_token_kwargs
    from ttrl_bench.models.families import image_span_token_ids

    hp = {**resolve_method("ttrv")["hyperparameters"], "rollout_backend": "hf"}
    sampling = forbidden_token_kwargs("hf", [5, 6, 9], 9)
    assert grpo_config(tmp_path, hp, 0, sampling).generation_kwargs == {"suppress_tokens": [5, 6, 9]}
    # vLLM: every other id of a 9-token tokenizer is allowed; 9 (past the tokenizer) is never sampled
    assert forbidden_token_kwargs("vllm", [5, 6, 9], 9) == {"allowed_token_ids": [0, 1, 2, 3, 4, 7, 8]}
    # InternVL's processor wraps the placeholder run in <img> (3) </img> (4); Qwen2.5-VL's adds nothing
    _, qwen = load_model(str(tiny_model_dirs["qwen2_5_vl"]))
    _, internvl = load_model(str(tiny_model_dirs["internvl"]))
    assert image_span_token_ids(qwen) is None and image_span_token_ids(internvl) == (3, 4)
    refuse_placeholders([[7, 8], [9]], {5, 6})
    with pytest.raises(PlaceholderInRolloutError, match=r"rollout 1 .*\[6\]"):
        refuse_placeholders([[7, 8], [9, 6, 2]], {5, 6})


# Per family: the vision tower's parameters, and the adapter's among them (Qwen-VL's patch merger, Qwen3-VL's
# DeepStack mergers too; InternVL's multi_modal_projector lies outside its tower).
TOWER_PREFIX = {"qwen2_5_vl": "model.visual.", "internvl": "model.vision_tower.", "qwen3_vl": "model.visual."}
ADAPTER_PREFIXES = {"qwen2_5_vl": ("model.visual.merger.",), "internvl": (),
                    "qwen3_vl": ("model.visual.merger.", "model.visual.deepstack_merger_list.")}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("setting", [True, False, "authors"])
def test_vision_encoder_is_frozen_and_its_adapter_trains(family, setting, tiny_model_dirs):
    """freeze_vision True: VR-TTRL Appendix C.1's subset, "language-side and adapter parameters, with the vision
    encoder frozen"; "authors": the TTRV authors' fsdp_workers.py:236-243 freezes InternVL's encoder only."""
    from ttrl_bench.adaptation.grpo import freeze_vision_tower

    model, _ = load_model(str(tiny_model_dirs[family]))
    freeze_vision_tower(model, setting)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    tower = {n for n, _ in model.named_parameters() if n.startswith(TOWER_PREFIX[family])}
    adapter = {n for n in tower if n.startswith(ADAPTER_PREFIXES[family])}
    expected = tower - adapter if setting is True or (setting == "authors" and family == "internvl") else set()
    assert frozen == expected
    assert adapter or family == "internvl"  # the adapter's names exist where the family keeps it in the tower
    if family == "internvl":  # its projector trains under every setting
        assert all(p.requires_grad for n, p in model.named_parameters() if "multi_modal_projector" in n)


def test_freeze_vision_refuses_an_unknown_setting(tiny_model_dir):
    from ttrl_bench.adaptation.grpo import freeze_vision_tower

    model, _ = load_model(str(tiny_model_dir))
    with pytest.raises(ValueError, match="freeze_vision must be true, false or 'authors', got 'encoder'"):
        freeze_vision_tower(model, "encoder")


def test_a_missing_local_model_is_named_before_any_download(tmp_path):
    from ttrl_bench.models.loading import resolve_model_source

    with pytest.raises(FileNotFoundError, match="models.<name>.source"):
        resolve_model_source("results/models/not-built")
    assert resolve_model_source("OpenGVLab/InternVL3-2B-hf") == "OpenGVLab/InternVL3-2B-hf"
    assert resolve_model_source(str(tmp_path)) == str(tmp_path)


def test_the_kl_reference_loads_on_the_process_own_gpu(tmp_path):
    """Issue 23 finding 6: under FSDP TRL would load the reference with device_map="auto" (spread over
    every GPU of the node by every process); it gets bf16 on this process's GPU. On the CPU: TRL's own
    default (device_map None, the policy's dtype)."""
    import torch

    from ttrl_bench.adaptation.config import grpo_config
    from ttrl_bench.adaptation.placement import reference_init_kwargs

    assert reference_init_kwargs(True, torch.device("cuda", 3)) == {"dtype": torch.bfloat16, "device_map": "cuda:3"}
    assert reference_init_kwargs(False, torch.device("cpu")) is None
    assert grpo_config(tmp_path, {**resolve_method("ttrv")["hyperparameters"], "rollout_backend": "hf"}, 0
                       ).model_init_kwargs is None


REFERENCE_SHARDING_SCRIPT = """
import json, sys, types
import torch, torch.distributed as dist
from accelerate.utils import FullyShardedDataParallelPlugin
from torch.distributed.fsdp import FSDPModule
from trl.models.utils import prepare_fsdp
from ttrl_bench.adaptation.placement import shard_reference_per_block
from ttrl_bench.models.loading import load_model
dist.init_process_group("gloo")
accelerator = types.SimpleNamespace(state=types.SimpleNamespace(fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2)),
                                    device=torch.device("cpu"), torch_device_mesh=None)
ids = torch.tensor([[5, 9, 12, 7, 3]])
result = {}
for name, prepare in (("trl", prepare_fsdp), ("ours", shard_reference_per_block)):
    model, _ = load_model(sys.argv[1], dtype="fp32")
    with torch.no_grad():
        whole = model(input_ids=ids).logits
    blocks = [m for m in list(model.modules())[1:] if type(m).__name__ in model._no_split_modules]
    prepare(model, accelerator)
    with torch.no_grad():
        sharded = model(input_ids=ids).logits
    result[name] = {"blocks": len(blocks), "sharded_blocks": sum(isinstance(m, FSDPModule) for m in blocks),
                    "root": isinstance(model, FSDPModule), "same_logits": torch.allclose(whole, sharded, atol=1e-6)}
open(f"reference-{dist.get_rank()}.json", "w").write(json.dumps(result))
dist.destroy_process_group()
"""


@pytest.mark.workflow
def test_the_kl_reference_is_sharded_per_block_under_fsdp2(tiny_model_dir, tmp_path):
    """Issue 23 finding 6: TRL's prepare_fsdp shards the reference as one unit (every forward gathers the
    whole model); ours shards each transformer block first, as the policy is, then the root. FSDP2 itself
    on 2 CPU processes over gloo (accelerate runs FSDP on GPUs only): the tiny Qwen2.5-VL's 2 language
    and 2 vision blocks, the logits unchanged by sharding."""
    import json
    import subprocess
    import sys

    from tests.support import free_ports

    script = tmp_path / "shard.py"
    script.write_text(REFERENCE_SHARDING_SCRIPT)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                           str(free_ports()[0]), str(script), str(tiny_model_dir)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        result = json.loads((tmp_path / f"reference-{rank}.json").read_text())
        assert result["trl"] == {"blocks": 4, "sharded_blocks": 0, "root": True, "same_logits": True}
        assert result["ours"] == {"blocks": 4, "sharded_blocks": 4, "root": True, "same_logits": True}


def test_the_trainer_is_built_with_per_block_reference_sharding_and_a_vote_sized_engine(monkeypatch):
    """Finding 6's sharding and finding 7's engine size replace TRL's only while the trainer is built: TTRV's
    32 votes per 16 trained rollouts double TRL's max_num_seqs (16 x 1 x 4 = 64 trained rollouts of a
    4-step generation batch -> 128 requests decoded at once); TRL's own names come back afterwards."""
    import trl.trainer.grpo_trainer as trl_grpo_trainer
    from trl.generation.vllm_generation import VLLMGeneration
    from trl.models.utils import prepare_fsdp

    from ttrl_bench.adaptation import placement

    built = []
    monkeypatch.setattr(placement, "trl_VLLMGeneration", lambda **kwargs: built.append(kwargs))
    with placement.trl_construction_overrides(32 // 16):
        assert trl_grpo_trainer.prepare_fsdp is placement.shard_reference_per_block
        trl_grpo_trainer.VLLMGeneration(model=None, max_num_seqs=16 * 1 * 4, temperature=1.0)
    assert built == [{"model": None, "max_num_seqs": 128, "temperature": 1.0}]
    monkeypatch.undo()
    assert trl_grpo_trainer.prepare_fsdp is prepare_fsdp and trl_grpo_trainer.VLLMGeneration is VLLMGeneration


def test_batch_layout_refuses_a_generation_batch_that_neither_divides_nor_fills_a_step():
    """4 rollouts x 3 prompts = 12 completions per step; a generation batch of 8 is a multiple of N = 4
    and of the micro-batch 4, but 12 and 8 do not divide each other; 6 is no multiple of N."""
    hp = {"num_generations": 4, "prompts_per_step": 3, "micro_batch_size": 4}
    assert batch_layout({**hp, "generation_batch_size": 12})["gradient_accumulation_steps"] == 3
    with pytest.raises(ValueError, match="divide or be divided"):
        batch_layout({**hp, "generation_batch_size": 8})
    with pytest.raises(ValueError, match="multiple of num_generations 4"):
        batch_layout({**hp, "micro_batch_size": 2, "generation_batch_size": 6})


def test_a_failing_vllm_rollout_names_the_hf_backend():
    """A vLLM rollout's error (here a KeyError from inside the engine) says to set rollout_backend: hf; the
    project's own refusals (ValueError) pass unchanged, and without vLLM nothing is rewrapped."""
    from types import SimpleNamespace

    import torch

    from ttrl_bench.adaptation.trainer import TestTimeGRPOTrainer

    def failing(error):
        def generate(prompts):
            raise error
        return generate

    model = torch.nn.Linear(1, 1).to(torch.bfloat16)  # not fp32 master weights: no autocast region
    engine = SimpleNamespace(model=model, use_vllm=True, _generate_votes=failing(KeyError("multi_modal_data")))
    with pytest.raises(RuntimeError, match=r"vLLM rollouts failed \(KeyError: 'multi_modal_data'\); set "
                                           r"adaptation.rollout_backend: hf"):
        TestTimeGRPOTrainer._generate(engine, ["p"])
    engine._generate_votes = failing(ValueError("trained_votes: verl needs"))
    with pytest.raises(ValueError, match="trained_votes"):
        TestTimeGRPOTrainer._generate(engine, ["p"])
    hf = SimpleNamespace(model=model, use_vllm=False, _generate_votes=failing(KeyError("x")))
    with pytest.raises(KeyError):
        TestTimeGRPOTrainer._generate(hf, ["p"])
