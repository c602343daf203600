"""Per-sample VR-TTRL with one trainer per job (issue 23 finding 3): the trainer (with vLLM, its
colocated engine; with a KL term, its reference model) is built once and every sample starts as the
first did: the same weights, an empty AdamW state, the lr schedule at its first step, the same seed."""

import torch

from ttrl_bench.adaptation import grpo
from ttrl_bench.adaptation import trainer as trainer_module
from ttrl_bench.adaptation.per_sample import adapt_each_sample
from ttrl_bench.adaptation.presets import resolve_method
from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.evaluation.tasks import GroundingTask
from ttrl_bench.models.loading import load_model

# 2 optimizer steps per sample (2 epochs of one prompt), so the cosine schedule has moved by the end
HP = {"num_generations": 4, "max_completion_length": 12, "epochs": 2, "learning_rate": 1e-3, "kl_beta": 0.0,
      "micro_batch_size": 4}


def _weights(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_one_trainer_adapts_every_sample_from_the_same_start(scene_data, tiny_model_dir, tmp_path, monkeypatch):
    """3 samples: one trainer built; each train() begins from the base weights bit for bit, with no
    AdamW state and the schedule's first lr; and the third sample ends exactly where a trainer built
    for it alone ends (the same weights after 2 steps: optimizer, schedule and seed all reset)."""
    built, starts, ends = [], [], []
    init, train = trainer_module.TestTimeGRPOTrainer.__init__, trainer_module.TestTimeGRPOTrainer.train

    def counting_init(self, *args, **kwargs):
        built.append(1)
        init(self, *args, **kwargs)

    def recording_train(self, *args, **kwargs):
        state = len(self.optimizer.state) if self.optimizer is not None else 0
        starts.append((_weights(self.model), state))
        out = train(self, *args, **kwargs)
        ends.append((_weights(self.model), [h["learning_rate"] for h in self.state.log_history if "learning_rate" in h]))
        return out

    monkeypatch.setattr(trainer_module.TestTimeGRPOTrainer, "__init__", counting_init)
    monkeypatch.setattr(trainer_module.TestTimeGRPOTrainer, "train", recording_train)
    samples = load_manifest(scene_data, "test").head(3)
    # seeded random rewards: nonzero advantages, so the update depends on the rollouts sampled (the seed)
    spec = {**resolve_method("vr-ttrl", HP), "reward": "random", "reward_params": {"seed": 0}}
    model, processor = load_model(str(tiny_model_dir), dtype="fp32")
    base = _weights(model)
    outputs, log, _ = adapt_each_sample(model, processor, samples, scene_data, spec, tmp_path / "loop", seed=0,
                                        max_new_tokens=12)
    assert len(built) == 1 and len(outputs) == 3 and list(log["sample_updates"].unique()) == [2]
    assert (log["reward_std"] > 0).all()
    for weights, optimizer_state in starts:
        assert optimizer_state == 0 and all(torch.equal(weights[n], base[n]) for n in base)
    assert ends[0][1] == ends[1][1] == ends[2][1] and ends[0][1][0] != ends[0][1][1]  # the schedule restarts
    assert not all(torch.equal(ends[2][0][n], base[n]) for n in base)  # the sample moved the weights

    fresh, processor = load_model(str(tiny_model_dir), dtype="fp32")
    grpo.adapt(fresh, processor, samples.iloc[[2]], scene_data, spec, tmp_path / "alone", seed=0, task=GroundingTask())
    assert len(built) == 2
    assert all(torch.equal(ends[3][0][n], ends[2][0][n]) for n in base)


def test_every_generation_of_a_run_has_one_precision(scene_data, tiny_model_dir, tmp_path, monkeypatch):
    """Appendix C's consensus baseline on 2 samples under bf16 autocast (on the CPU:
    TTRL_BENCH_AUTOCAST=bf16, the GPU's code path): sample 1's pseudo-label rollouts come before any
    Trainer, sample 2's after the first one wrapped `forward` in autocast; every forward, those
    rollouts and the training steps alike, computes the logits in bf16."""
    monkeypatch.setenv("TTRL_BENCH_AUTOCAST", "bf16")
    model, processor = load_model(str(tiny_model_dir), dtype="fp32")
    dtypes = []
    model.lm_head.register_forward_hook(lambda module, args, out: dtypes.append(out.dtype))
    spec = resolve_method("sft-majority-pseudo-label", {"num_generations": 2, "max_completion_length": 8,
                                                        "epochs": 1, "learning_rate": 1e-3})
    adapt_each_sample(model, processor, load_manifest(scene_data, "test").head(2), scene_data, spec, tmp_path,
                      seed=0, max_new_tokens=8)
    assert len(dtypes) > 4 and set(dtypes) == {torch.bfloat16}
    assert next(model.parameters()).dtype == torch.float32  # the master weights stay fp32


def test_one_autocast_region_casts_the_weights_once_per_round(tiny_model_dir, monkeypatch):
    """Issue 23 finding 7. accelerate wraps `forward` in autocast, entered and left at every decoded
    token, so generation re-casts every fp32 weight per token; inside one region (generation_precision,
    around each rollout round) autocast's cache keeps the bf16 copies for the round. The tiny model's
    text side has 2 layers x (7 linear weights + 3 q/k/v biases) + the tied head = 21 tensors: 21 fewer
    fp32->bf16 casts per decoded token."""
    from PIL import Image
    from torch.utils._python_dispatch import TorchDispatchMode

    from ttrl_bench.generation.hf import chat_prompt
    from ttrl_bench.generation.precision import generation_precision

    class Casts(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.ops.aten._to_copy.default and kwargs.get("dtype") == torch.bfloat16:
                Casts.n += args[0].dtype == torch.float32
            return func(*args, **kwargs)

    monkeypatch.setenv("TTRL_BENCH_AUTOCAST", "bf16")
    model, processor = load_model(str(tiny_model_dir), dtype="fp32")
    model.forward = torch.autocast("cpu", dtype=torch.bfloat16)(model.forward)  # as accelerate.prepare does
    batch = processor(text=[chat_prompt(processor, "Which digit?")], images=[Image.new("RGB", (56, 56))],
                      return_tensors="pt")

    def casts_per_token(region) -> int:
        counts = []
        for tokens in (3, 5):
            Casts.n = 0
            with torch.no_grad(), Casts(), region():
                model.generate(**batch, do_sample=False, max_new_tokens=tokens, min_new_tokens=tokens)
            counts.append(Casts.n)
        return (counts[1] - counts[0]) // 2

    import contextlib

    assert casts_per_token(contextlib.nullcontext) - casts_per_token(lambda: generation_precision(model)) == 21
