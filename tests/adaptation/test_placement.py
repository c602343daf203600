"""adaptation/placement.py: the KL reference's loading and sharding (bf16 on the process's own GPU, FSDP2's
per-block sharding with fakes for FSDP and the mesh, FSDP1 left to TRL) and TRL's construction overrides."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

from ttrl_bench.adaptation import placement


# --- placement.py: the KL reference's loading and sharding, vLLM's engine size ---------------------------------

def test_the_reference_loads_in_bf16_on_the_processs_own_gpu():
    """GPU: bf16, device_map the process's device ("cuda:1" on the second), not TRL's "auto"; CPU: TRL's defaults."""
    assert placement.reference_init_kwargs(True, torch.device("cuda", 1)) == {"dtype": torch.bfloat16, "device_map": "cuda:1"}
    assert placement.reference_init_kwargs(False, torch.device("cpu")) is None


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)


class _Model(torch.nn.Module):
    """A block as the first child (modules()[1]), a non-block, then two blocks inside a ModuleList."""
    _no_split_modules = ["_Block"]

    def __init__(self):
        super().__init__()
        self.first = _Block()
        self.embed = torch.nn.Embedding(3, 2)
        self.layers = torch.nn.ModuleList([_Block(), _Block()])


def _fsdp_fakes(monkeypatch, fsdp_version, mixed_precision=None, mesh=None):
    """Records fully_shard's and TRL prepare_fsdp's calls instead of sharding (no process group on the CPU)."""
    calls = {"shard": [], "prepare": []}
    monkeypatch.setattr("torch.distributed.fsdp.fully_shard", lambda module, **kw: calls["shard"].append((module, kw)))
    monkeypatch.setattr(placement, "trl_prepare_fsdp", lambda model, acc: calls["prepare"].append((model, acc)) or "root")
    plugin = SimpleNamespace(fsdp_version=fsdp_version, reshard_after_forward=True, cpu_offload="offload-policy",
                             mixed_precision_policy=mixed_precision)
    accelerator = SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin),
                                  parallelism_config=SimpleNamespace(fsdp_dim_names=("dp_shard",)))
    if mesh is not None:
        accelerator.torch_device_mesh = mesh
    return calls, accelerator


def test_fsdp2_shards_each_transformer_block_of_the_reference_before_trls_root_call(monkeypatch):
    """The model's 3 `_Block`s (the first child included), each with accelerate's plugin settings, in module order;
    the embedding and the list are left to TRL's root call, which gets the model and the accelerator and whose
    result is returned. No mixed-precision policy in the plugin: FSDP2's default MixedPrecisionPolicy(); no device
    mesh on the accelerator: mesh None."""
    model = _Model()
    calls, accelerator = _fsdp_fakes(monkeypatch, 2)
    assert placement.shard_reference_per_block(model, accelerator) == "root"
    expected = {"reshard_after_forward": True, "offload_policy": "offload-policy", "mp_policy": MixedPrecisionPolicy(),
                "mesh": None}
    assert calls["shard"] == [(model.first, expected), (model.layers[0], expected), (model.layers[1], expected)]
    assert calls["prepare"] == [(model, accelerator)]


def test_fsdp2_block_sharding_takes_the_plugins_precision_and_the_fsdp_submesh(monkeypatch):
    """With a policy in the plugin and a device mesh, each block gets that policy and mesh[("dp_shard",)] (the FSDP
    dimensions of accelerate's parallelism config), as TRL shards the root (trl models/utils.py:328-334)."""
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    mesh = {("dp_shard",): "fsdp-submesh"}
    calls, accelerator = _fsdp_fakes(monkeypatch, 2, mixed_precision=policy, mesh=mesh)
    placement.shard_reference_per_block(_Model(), accelerator)
    assert [(kw["mp_policy"], kw["mesh"]) for _, kw in calls["shard"]] == [(policy, "fsdp-submesh")] * 3


def test_fsdp1_and_a_model_without_blocks_leave_the_reference_to_trl(monkeypatch):
    """FSDP1 (accelerate's older plugin) wraps by its own policy: no block sharded here, TRL's call alone. A model
    naming no `_no_split_modules` (None) has no blocks: only TRL's root call."""
    calls, accelerator = _fsdp_fakes(monkeypatch, 1)
    model = _Model()
    assert placement.shard_reference_per_block(model, accelerator) == "root"
    assert calls == {"shard": [], "prepare": [(model, accelerator)]}
    calls, accelerator = _fsdp_fakes(monkeypatch, 2)
    plain = _Model()
    plain._no_split_modules = None
    placement.shard_reference_per_block(plain, accelerator)
    assert calls == {"shard": [], "prepare": [(plain, accelerator)]}


def test_trl_construction_overrides_swap_trls_names_and_restore_them(monkeypatch):
    """Inside: TRL's grpo_trainer calls shard_reference_per_block and a vLLM engine whose max_num_seqs is TRL's
    times the votes per trained rollout (TTRV 32 / 16 = 2: 64 -> 128; ECHO 64 / 32 = 2); None stays None (TRL's
    own default). After, also after an error: TRL's own names again."""
    import trl.trainer.grpo_trainer as grpo_trainer

    engines = []
    monkeypatch.setattr(placement, "trl_VLLMGeneration", lambda *a, **kw: engines.append((a, kw)) or "engine")
    saved = grpo_trainer.prepare_fsdp, grpo_trainer.VLLMGeneration
    with placement.trl_construction_overrides(2):
        assert grpo_trainer.prepare_fsdp is placement.shard_reference_per_block
        assert grpo_trainer.VLLMGeneration("model", max_num_seqs=64, gpu_memory_utilization=0.3) == "engine"
        grpo_trainer.VLLMGeneration("model")
    assert engines == [(("model",), {"max_num_seqs": 128, "gpu_memory_utilization": 0.3}),
                       (("model",), {"max_num_seqs": None})]
    assert (grpo_trainer.prepare_fsdp, grpo_trainer.VLLMGeneration) == saved
    with pytest.raises(RuntimeError, match="boom"), placement.trl_construction_overrides(4):
        raise RuntimeError("boom")
    assert (grpo_trainer.prepare_fsdp, grpo_trainer.VLLMGeneration) == saved
