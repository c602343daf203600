"""Per-sample VR-TTRL with one trainer per job (issue 23 finding 3): the trainer (with vLLM, its
colocated engine; with a KL term, its reference model) is built once and every sample starts as the
first did: the same weights, an empty AdamW state, the lr schedule at its first step, the same seed."""

import pandas as pd
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


# --- the per-sample loop with the model's work stood in for (fast: a 2 x 2 layer, no generation) ---


def _loop_setup(tmp_path, monkeypatch):
    """A 2 x 2 layer as the model; two 8 x 6 images (samples a and b, shown at their input sizes 5 and 4);
    greedy predictions and votes recorded, with the layer's weight each saw."""
    from PIL import Image

    from ttrl_bench.adaptation import per_sample

    for name in ("a.png", "b.png"):
        Image.new("RGB", (8, 6), (10, 20, 30)).save(tmp_path / name)
    samples = pd.DataFrame({"id": ["a", "b"], "image": ["a.png", "b.png"], "prompt": ["Pa", "Pb"],
                            "input_size": [5, 4]})
    layer = torch.nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    seen = []

    def greedy(model, processor, row, image, max_new_tokens):
        seen.append(("greedy", row["id"], image.size, max_new_tokens, model.weight.tolist()))
        return f"answer {row['id']}"

    def vote(model, processor, row, image, hp, reward_params, seed):
        seen.append(("vote", row["id"], image.size, hp["num_generations"], reward_params, seed))
        return f"vote {row['id']}"

    monkeypatch.setattr(per_sample, "predict_greedy", greedy)
    monkeypatch.setattr(per_sample, "consensus_vote", vote)
    return per_sample, samples, layer, seen


def _train(model, one, steps_times):
    """One 'adaptation': every weight + 1; the log rows and attrs grpo.adapt / adapt_baseline give."""
    with torch.no_grad():
        model.weight += 1.0
    log = pd.DataFrame({"step": [0, 1], "loss": [0.5, 0.25]})
    log.attrs.update(optimizer_steps=2, weights_changed=1.0, **steps_times)
    return log


def test_each_sample_adapts_from_the_base_weights_and_predicts_after_its_update(tmp_path, monkeypatch):
    """An Appendix C baseline (a preset with an `objective`): adapt_baseline per sample, on that sample's
    one-row manifest, with the job's snapshot as `before`. Each starts from the base weight (1, 2, 3, 4),
    predicts greedily after its update (2, 3, 4, 5) and is restored before the next. The images are resized
    to each sample's input size (5 x 5, 4 x 4). The log: both samples' 2 rows (0-3), each with its sample id,
    its 2 updates, 100% of the weights changed and a NaN step time (no GRPO trainer, no `step_times`)."""
    per_sample, samples, layer, seen = _loop_setup(tmp_path, monkeypatch)
    calls = []

    def baseline(model, processor, one, image_root, method, out_dir, seed, task=None, before=None):
        calls.append((one["id"].tolist(), image_root, out_dir, seed, type(task).__name__, before.values["weight"]
                      .tolist(), model.weight.tolist()))
        return _train(model, one, {})

    monkeypatch.setattr(per_sample, "adapt_baseline", baseline)
    method = {"objective": "tent", "hyperparameters": {}, "reward_params": {}}
    outputs, log, seconds = per_sample.adapt_each_sample(layer, "proc", samples, tmp_path, method, tmp_path / "o",
                                                         7, max_new_tokens=9)
    base, after = [[1.0, 2.0], [3.0, 4.0]], [[2.0, 3.0], [4.0, 5.0]]
    assert calls == [(["a"], tmp_path, tmp_path / "o", 7, "GroundingTask", base, base),
                     (["b"], tmp_path, tmp_path / "o", 7, "GroundingTask", base, base)]
    assert seen == [("greedy", "a", (5, 5), 9, after), ("greedy", "b", (4, 4), 9, after)]
    assert outputs == ["answer a", "answer b"] and len(seconds) == 2 and layer.weight.tolist() == base
    assert log.index.tolist() == [0, 1, 2, 3] and log["sample"].tolist() == ["a", "a", "b", "b"]
    assert log["sample_updates"].tolist() == [2] * 4 and log["weights_changed"].tolist() == [1.0] * 4
    assert log["sample_step_time_s"].isna().all()


def test_grpo_samples_share_one_adaptation_and_vote_only_never_updates(tmp_path, monkeypatch):
    """VR-TTRL's GRPO: one TestTimeAdaptation built on the first sample (model, processor, its manifest,
    the image root, method, out_dir, seed, the grounding task) and run on it; every later sample reuses it,
    run on its own manifest; the step time is the sum of TRL's step times (.5 + .25 = .75). With
    `updates` false (vote-only), the prediction is the consensus of the sample's rollouts, seeded seed +
    sample index (7, 8), and there is no log."""
    per_sample, samples, layer, seen = _loop_setup(tmp_path, monkeypatch)
    built, runs = [], []

    class Adaptation:
        def __init__(self, model, processor, one, image_root, method, out_dir, seed, task):
            built.append((one["id"].tolist(), image_root, out_dir, seed, type(task).__name__))
            self.model = model

        def run(self, one=None, image_root=None, before=None):
            runs.append((None if one is None else one["id"].tolist(), image_root, before is not None))
            return _train(self.model, one, {"step_times": [0.5, 0.25]})

    monkeypatch.setattr(per_sample, "TestTimeAdaptation", Adaptation)
    method = {"hyperparameters": {"num_generations": 4}, "reward_params": {"thresholds": "base"}}
    outputs, log, _ = per_sample.adapt_each_sample(layer, "proc", samples, tmp_path, method, tmp_path, 7, 9)
    assert built == [(["a"], tmp_path, tmp_path, 7, "GroundingTask")]
    assert runs == [(None, None, True), (["b"], tmp_path, True)]
    assert outputs == ["answer a", "answer b"] and log["sample_step_time_s"].tolist() == [0.75] * 4
    seen.clear()
    vote_only = {"hyperparameters": {"updates": False, "num_generations": 4}, "reward_params": {"thresholds": "base"}}
    outputs, log, seconds = per_sample.adapt_each_sample(layer, "proc", samples, tmp_path, vote_only, tmp_path, 7, 9)
    assert outputs == ["vote a", "vote b"] and log.empty and len(seconds) == 2
    assert seen == [("vote", "a", (5, 5), 4, {"thresholds": "base"}, 7), ("vote", "b", (4, 4), 4,
                                                                          {"thresholds": "base"}, 8)]
    assert len(built) == 1 and layer.weight.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_per_sample_predictions_keep_the_prompt_each_sample_was_given(scene_data, tiny_model_dir, tmp_path, monkeypatch):
    """Issue 53 item 8: `adapt-per-sample`'s predictions.parquet keeps each sample's text (`prompt_text`) and its
    chat-templated prompt (`chat_prompt`), as every `evaluate` job's does; the adaptation is stood in for (the
    job's files are what this pins)."""
    from ttrl_bench.adaptation import per_sample
    from ttrl_bench.cli import main
    from ttrl_bench.generation.hf import chat_prompt

    monkeypatch.setattr(per_sample, "adapt_each_sample", lambda model, processor, rows, *a, **k: (
        ["<answer>[]</answer>"] * len(rows), pd.DataFrame({"step": [0]}), [1.0] * len(rows)))
    assert main(["adapt-per-sample", "--method", "vr-ttrl", "--model-source", str(tiny_model_dir), "--model-name", "t",
                 "--dataset", "demo-digit-scenes", "--data", str(scene_data), "--eval-samples", "2",
                 "--adapt-out", str(tmp_path / "adapt"), "--out", str(tmp_path / "eval")]) == 0
    predictions = pd.read_parquet(tmp_path / "eval" / "predictions.parquet").set_index("id")
    _, processor = load_model(str(tiny_model_dir), dtype="fp32")
    asked = load_manifest(scene_data, "test").set_index("id").loc[predictions.index]
    assert len(asked) == 2
    assert list(predictions["prompt_text"]) == list(asked["prompt"])
    assert list(predictions["chat_prompt"]) == [chat_prompt(processor, p, s) for p, s in zip(asked["prompt"], asked["system"])]
    assert all(p.startswith("<|im_start|>system\nYou are a helpful assistant.") for p in predictions["chat_prompt"])



def test_the_shared_adaptation_is_built_with_the_jobs_model_processor_and_method(monkeypatch):
    """VR-TTRL's per-sample GRPO builds its one TestTimeAdaptation from the job's own model, processor and method
    (with the first sample's manifest, the image root, out_dir, seed and the grounding task), runs it on that
    sample, and runs the same one on the next sample's manifest."""
    from ttrl_bench.adaptation import per_sample

    built, runs = [], []

    class Adaptation:
        def __init__(self, *args):
            built.append(args)

        def run(self, *args, **kwargs):
            runs.append((args, kwargs))
            return "log"

    monkeypatch.setattr(per_sample, "TestTimeAdaptation", Adaptation)
    method = {"hyperparameters": {"num_generations": 4}, "reward": "vr_ttrl"}
    adapt_one = per_sample._adapter("model", "processor", "samples", "root", method, "out", 7)
    assert adapt_one("sample 0", "before 0") == "log"
    assert adapt_one("sample 1", "before 1") == "log"
    assert len(built) == 1 and built[0][:7] == ("model", "processor", "sample 0", "root", method, "out", 7)
    assert type(built[0][7]).__name__ == "GroundingTask"
    assert runs == [((), {"before": "before 0"}), (("sample 1", "root"), {"before": "before 1"})]


def test_a_vote_only_job_takes_no_weight_snapshot(tmp_path, monkeypatch):
    """Vote-only (`updates` false) changes no weight, so it keeps no host copy of the weights (7B: about 30 GB):
    WeightSnapshot, stood in by a recorder, is never built; each sample's answer is its consensus vote, seeded
    seed + index (3, 4), voted by the model and processor given, on the sample's row and image. Each sample's
    seconds lie between 0 and the whole call's wall time."""
    import time

    from PIL import Image

    from ttrl_bench.adaptation import per_sample

    Image.new("RGB", (8, 6)).save(tmp_path / "a.png")
    snapshots, votes = [], []
    monkeypatch.setattr(per_sample, "WeightSnapshot", lambda model: snapshots.append(model))

    def vote(model, processor, row, image, hp, params, seed):
        votes.append((model, processor, row["id"], image.size, hp["num_generations"], params, seed))
        return f"vote {seed}"

    monkeypatch.setattr(per_sample, "consensus_vote", vote)
    samples = pd.DataFrame({"id": ["a", "b"], "image": ["a.png", "a.png"], "prompt": ["Pa", "Pb"]})
    method = {"hyperparameters": {"updates": False, "num_generations": 4}, "reward_params": {"k": 1}}
    start = time.perf_counter()
    outputs, log, seconds = per_sample.adapt_each_sample("model", "processor", samples, tmp_path, method,
                                                         tmp_path, 3, 9)
    wall = time.perf_counter() - start
    assert (outputs, snapshots) == (["vote 3", "vote 4"], [])
    assert votes == [("model", "processor", "a", (8, 6), 4, {"k": 1}, 3),
                     ("model", "processor", "b", (8, 6), 4, {"k": 1}, 4)]
    assert len(seconds) == 2 and all(0 <= s <= wall for s in seconds)
    assert log.empty
