"""GPU benchmark at the papers' model sizes (issue 12): random-weight models built offline with
transformers' own classes and the published checkpoints' dimensions, driven through the project's
own adaptation, per-sample and evaluation code.

    python benchmarks/gpu.py                  # on a GPU: InternVL3-2B, InternVL3-8B, Qwen2.5-VL-7B sizes
    python benchmarks/gpu.py --models internvl3-2b --methods ttrv dare
    python benchmarks/gpu.py --tiny           # the same code paths on tiny models (CPU; CI runs it)

A 7-8B model's training state (~150 GB) does not fit one 80 GB GPU: run those sizes as the adapt
rule does, under FSDP2 with CPU offload on one GPU (or over 4 GPUs without), e.g.

    accelerate launch --num_processes 1 --num_machines 1 --use_fsdp --fsdp_version 2 \
        --fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP --fsdp_state_dict_type FULL_STATE_DICT \
        --fsdp_offload_params true benchmarks/gpu.py --models qwen2.5-vl-7b

Per model, method and answer length it prints: seconds per optimizer step (TRL's own step_time), TTRV adaptation wall time (20 samples,
2 epochs at the authors'-run settings: 4 prompts x 16 trained of 32 voted rollouts), VR-TTRL seconds
per update and per sample (1 sample x 5 rounds x 8 rollouts), greedy evaluation samples/s, peak GPU
memory, and the share of trainable weights the adaptation changed (fp32 master weights, and what a
bf16 checkpoint keeps). Each (model, method) runs in a process of its own (run_job_process): its
peaks (allocated and reserved) owe nothing to the previous job, and a job that fails (out of
memory) loses its own row alone, written with the error. Rows go to
benchmarks/results/gpu-<device>.csv as each job finishes, with the rollout backend, the colocated
engine's settings and the precision. Beside each measured peak stands the plan's prediction
(plan/cost.py, one GPU): each GPU run is a new calibration point for plan/data/calibration.csv, and a
job predicted not to fit the GPU is not run, its row saying why (under `accelerate launch` the
one-GPU prediction is not the job's, so nothing is skipped there).

Random weights measure speed, memory and code paths, never accuracy. They never stop generating
on their own, so every answer is as long as its cap: each adaptation runs at a realistic answer
length, 16 new tokens for MCQ (the TTRV authors' logs average 5.4) and 128 for VR-TTRL's
<think>/<answer> JSON, and at the papers' 1,024-token budget (`--answer-tokens` to choose); 6 for
greedy MCQ evaluation. The models are the published configs at full depth (models/real_width.py):
a small BPE tokenizer laid out as the published one, its special tokens at the checkpoints' ids and
its length theirs, so the placeholders and the embedding rows past the tokenizer (never sampled) are
the real ones.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
# TTRL_BENCH_BENCHMARK_OUT: another results folder (the tests write to a temporary one)
OUT = Path(os.environ.get("TTRL_BENCH_BENCHMARK_OUT", ROOT / "benchmarks" / "results"))

# The published checkpoints whose shapes (config.json: models/data/model_configs.json) the real-size models
# take, at full depth, with a tokenizer in the published layout (models/real_width.py).
PLAN_SOURCES = {"internvl3-2b": "OpenGVLab/InternVL3-2B-hf", "internvl3-8b": "OpenGVLab/InternVL3-8B-hf",
                "qwen2.5-vl-3b": "Qwen/Qwen2.5-VL-3B-Instruct", "qwen2.5-vl-7b": "Qwen/Qwen2.5-VL-7B-Instruct"}
TINY = {"tiny-internvl": "internvl", "tiny-qwen2.5-vl": "qwen2_5_vl"}  # name -> family
METHODS = ("ttrv", "dare", "vr-ttrl", "greedy-eval", "vllm-agreement")
# Which methods a model's paper runs: TTRV on InternVL, VR-TTRL on Qwen2.5-VL; DARE on both.
DEFAULT_METHODS = {"internvl": ("ttrv", "dare"), "qwen2_5_vl": ("dare", "vr-ttrl")}


# TTRL_BENCH_MODELS: where built models are kept and reused by later calls on the same machine (gpu_check.sh sets
# it); unset, each run builds its models in its own temporary folder
MODELS = os.environ.get("TTRL_BENCH_MODELS")


def build_model(name: str, corpus: list[str], out: Path, real: bool) -> Path:
    """The model's folder: built now, or under TTRL_BENCH_MODELS the one an earlier call built (its `built` marker
    is written last, so a build cut short is built again)."""
    from ttrl_bench.models.real_width import build_real_width
    from ttrl_bench.models.tiny import build_tiny, train_tokenizer

    if MODELS:
        out = Path(MODELS) / name
        if (out / "built").exists():
            print(f"== {name}: reusing {out}", flush=True)
            return out
    if real:  # published widths, depths, vocabulary and placeholder ids; stored in bf16 as the checkpoints are
        build_real_width(PLAN_SOURCES[name], out, corpus, text_layers=None)
    else:
        family = TINY[name]
        model, processor = build_tiny(train_tokenizer(corpus, family), family)
        model.to(torch.bfloat16).save_pretrained(out)
        processor.save_pretrained(out)
    (out / "built").write_text(f"{name}\n")
    return out


def model_family(name: str) -> str:
    from ttrl_bench.models.configs import model_config

    return model_config(PLAN_SOURCES[name]).model_type if name in PLAN_SOURCES else TINY[name]


def prepare_data(tmp: Path, px: int | None, keep: int) -> tuple[Path, Path]:
    """The demo sets cut to their first `keep` test samples, images upscaled to `px` (docs/gpu-runs.md:
    digits at 896 px, scenes at 840 px; None keeps the demo's sizes)."""
    from ttrl_bench.datasets.prepare import prepare_test_subset

    return (prepare_test_subset("demo-digits", tmp / "demo-digits", keep, px),
            prepare_test_subset("demo-digit-scenes", tmp / "demo-digit-scenes", keep, px and 840))


def peak_gb() -> float:
    return torch.cuda.max_memory_allocated() / 1e9 if torch.cuda.is_available() else float("nan")


def peak_reserved_gb() -> float:
    """What the caching allocator held at its peak (allocated + cached blocks): what the GPU must have."""
    return torch.cuda.max_memory_reserved() / 1e9 if torch.cuda.is_available() else float("nan")


def reset_peak() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def run_adaptation(model_dir: Path, data: Path, method: str, hp: dict, tmp: Path, n_samples: int = 20) -> dict:
    from ttrl_bench.adaptation.grpo import adapt
    from ttrl_bench.adaptation.presets import resolve_method
    from ttrl_bench.datasets.prepare import load_manifest
    from ttrl_bench.datasets.sampling import select_adaptation_samples
    from ttrl_bench.models.loading import checkpoint_dtype, load_model

    model, processor = load_model(str(model_dir), dtype="fp32")
    samples = select_adaptation_samples(load_manifest(data, "test"), n_samples, seed=0)
    reset_peak()
    start = time.perf_counter()
    log = adapt(model, processor, samples, data, resolve_method(method, hp), tmp / method, seed=0,
                save_dtype=checkpoint_dtype(str(model_dir)))
    seconds = time.perf_counter() - start
    steps = log.attrs["optimizer_steps"]
    # s_per_step: TRL's own step_time (generation + update of each optimizer step); adapt_s also holds
    # the trainer's construction and the checkpoint's save
    return {"optimizer_steps": steps, "adapt_s": seconds, "s_per_step": mean(log.attrs["step_times"]),
            "peak_gpu_gb": peak_gb(), "peak_reserved_gb": peak_reserved_gb(),
            "weights_changed": log.attrs["weights_changed"],
            "weights_changed_bf16": log.attrs["weights_changed_saved"]}


def run_per_sample(model_dir: Path, scenes: Path, hp: dict, tmp: Path, n_samples: int = 1) -> dict:
    from ttrl_bench.adaptation.per_sample import adapt_each_sample
    from ttrl_bench.adaptation.presets import resolve_method
    from ttrl_bench.datasets.prepare import load_manifest
    from ttrl_bench.models.loading import load_model

    model, processor = load_model(str(model_dir), dtype="fp32")
    samples = load_manifest(scenes, "test").head(n_samples)
    reset_peak()
    _, log, seconds = adapt_each_sample(model, processor, samples, scenes, resolve_method("vr-ttrl", hp), tmp / "vr",
                                        seed=0, max_new_tokens=hp["max_completion_length"])
    updates = int(log["sample_updates"].sum())
    step_seconds = log.groupby("sample")["sample_step_time_s"].first().sum()  # TRL's step_time, summed
    return {"optimizer_steps": updates, "adapt_s": sum(seconds), "s_per_step": step_seconds / max(1, updates),
            "s_per_sample": sum(seconds) / len(seconds), "peak_gpu_gb": peak_gb(),
            "peak_reserved_gb": peak_reserved_gb(),
            "weights_changed": float(log["weights_changed"].mean())}


def run_evaluation(model_dir: Path, data: Path, n: int, batch: int) -> dict:
    from ttrl_bench.datasets.prepare import load_manifest
    from ttrl_bench.generation.hf import generate_greedy
    from ttrl_bench.models.loading import load_model

    model, processor = load_model(str(model_dir))  # the checkpoint's dtype (bf16), as evaluation runs
    rows = load_manifest(data, "test").head(n)
    images = [Image.open(data / p).convert("RGB") for p in rows["image"]]
    reset_peak()
    start = time.perf_counter()
    generate_greedy(model, processor, list(rows["prompt"]), images, 6, batch, progress=False)
    seconds = time.perf_counter() - start
    return {"eval_samples": n, "eval_samples_per_s": n / seconds, "peak_gpu_gb": peak_gb(),
            "peak_reserved_gb": peak_reserved_gb()}


def run_vllm_agreement(model_dir: Path, data: Path, n: int) -> dict:
    """vLLM's greedy answers beside transformers' on the same `n` items (issue 40 part 2): how many agree
    exactly, in bf16 both (a few may differ where two tokens' logits tie within bf16's rounding)."""
    from transformers import AutoProcessor

    from ttrl_bench.datasets.prepare import load_manifest
    from ttrl_bench.generation.hf import generate_greedy
    from ttrl_bench.generation.vllm_offline import VllmGreedy
    from ttrl_bench.models.loading import load_model

    rows = load_manifest(data, "test").head(n)
    images = [Image.open(data / p).convert("RGB") for p in rows["image"]]
    model, processor = load_model(str(model_dir))
    hf = generate_greedy(model, processor, list(rows["prompt"]), images, 6, 8, progress=False)
    del model
    reset_peak()  # the engine's memory owes nothing to the HF model's
    start = time.perf_counter()
    engine = VllmGreedy(str(model_dir), None, 6)
    vllm = engine(AutoProcessor.from_pretrained(str(model_dir)), list(rows["prompt"]), images, None)
    seconds = time.perf_counter() - start
    return {"eval_samples": n, "vllm_agree": sum(a == b for a, b in zip(hf, vllm)), "vllm_engine_and_eval_s": seconds}


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def predicted_peak_gb(name: str, family: str, method: str, hp: dict) -> float:
    """The plan's calibrated peak of one training forward + backward of this job on one GPU
    (plan/cost.py), written beside the measured one so each GPU run is a calibration point; NaN for
    the tiny models, whose configs the plan does not ship."""
    from ttrl_bench.adaptation.presets import resolve_method
    from ttrl_bench.models.families import IMAGE_TOKENS  # 896 px: 4 tiles + thumbnail; 840 px scenes
    from ttrl_bench.plan.cost import predict_for_benchmark

    if name not in PLAN_SOURCES:
        return float("nan")
    h = resolve_method(method, hp)["hyperparameters"]
    return predict_for_benchmark(PLAN_SOURCES[name], sequences=h["micro_batch_size"],
                                 new_tokens=h["max_completion_length"], image_tokens=IMAGE_TOKENS[family],
                                 fp32_master=True, trainable_vision=not h.get("freeze_vision", True))


def skip_reason(predicted_gb: float, device_gb: float | None) -> str | None:
    """Why a job is not run: its predicted peak exceeds the GPU (under FSDP the plan would split it;
    run those sizes under `accelerate launch`, see above)."""
    if device_gb is not None and predicted_gb > device_gb:
        return f"skipped: predicted peak {predicted_gb:.1f} GB > the GPU's {device_gb:.1f} GB (plan/cost.py)"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny models, few steps: the code paths on a CPU")
    parser.add_argument("--models", nargs="+", help="models, each optionally with its own methods: internvl3-2b:ttrv,dare")
    parser.add_argument("--methods", nargs="+", choices=METHODS)
    parser.add_argument("--adapt-samples", type=int, default=20,
                        help="samples a TTRV / DARE job adapts on (4 with --epochs 1: one round of the ttrv preset)")
    parser.add_argument("--epochs", type=int, help="epochs of the TTRV / DARE jobs (default: the preset's, 2)")
    parser.add_argument("--per-sample", type=int, nargs=2, metavar=("SAMPLES", "UPDATES"), default=(1, 5),
                        help="VR-TTRL: samples adapted on and updates per sample (default 1 sample x 5 updates)")
    parser.add_argument("--csv-tag", default="", help="a suffix of the results file: gpu-<device><-tag>.csv")
    parser.add_argument("--rollout-backend", choices=["auto", "hf", "vllm"], default="auto",
                        help="the adaptation jobs' rollouts: transformers' generate (hf) or TRL's colocated vLLM")
    parser.add_argument("--eval-samples", type=int, default=256)
    parser.add_argument("--answer-tokens", type=int, nargs="+",
                        help="answer lengths (max new tokens) of the adaptation jobs; default 16 (MCQ: the TTRV "
                             "logs average 5.4) / 128 (VR-TTRL) and the papers' 1,024-token budget")
    parser.add_argument("--build-only", action="store_true",
                        help="build the models (under TTRL_BENCH_MODELS, for later calls) and run no job")
    parser.add_argument("--job", help=argparse.SUPPRESS)  # internal: one (model, method) in its own process
    args = parser.parse_args()
    if args.job:
        run_job(json.loads(args.job))
        return 0
    wanted = {m.split(":")[0]: (m.split(":")[1].split(",") if ":" in m else None)
              for m in args.models or list(TINY if args.tiny else PLAN_SOURCES)}
    models = list(wanted)
    device = re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name().lower()) if torch.cuda.is_available() else "cpu"
    # one process's GPU; under `accelerate launch` with FSDP the plan's one-GPU prediction is not the job's
    sharded = int(os.environ.get("WORLD_SIZE", "1")) > 1 or os.environ.get("FSDP_OFFLOAD_PARAMS") == "true"
    device_gb = (torch.cuda.get_device_properties(0).total_memory / 1e9
                 if torch.cuda.is_available() and not sharded else None)
    # The authors'-run settings (presets.py), answers capped; tiny: 2 steps and short answers.
    mcq = {"max_completion_length": 16} if not args.tiny else {
        "max_completion_length": 4, "num_generations": 4, "n_votes": 8, "prompts_per_step": 2, "epochs": 1,
        "micro_batch_size": 2, "generation_batch_size": 2 * 4}  # a round = a step: 20 samples, 10 steps
    if args.epochs:
        mcq = {**mcq, "epochs": args.epochs}
    mcq = {**mcq, "rollout_backend": args.rollout_backend}
    samples_per_scene, updates = args.per_sample
    grounding = {"max_completion_length": 128, "epochs": updates, "num_generations": 8} if not args.tiny else {
        "max_completion_length": 16, "epochs": 1, "num_generations": 4, "micro_batch_size": 2}
    tag = ("-tiny" if args.tiny else "") + (f"-{args.csv_tag}" if args.csv_tag else "")
    csv = OUT / f"gpu-{device}{tag}.csv"
    OUT.mkdir(parents=True, exist_ok=True)
    csv.unlink(missing_ok=True)  # this run's rows, each appended as its process finishes
    failed = 0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        n_eval = 16 if args.tiny else args.eval_samples
        digits, scenes = prepare_data(tmp, None if args.tiny else 896, keep=max(n_eval, 20))
        corpus = list(pd.read_parquet(digits / "manifest.parquet")["prompt"])
        for name in models:
            family = model_family(name)
            start = time.perf_counter()
            model_dir = build_model(name, corpus, tmp / name, real=not args.tiny)
            print(f"== {name}: ready in {time.perf_counter() - start:.1f} s", flush=True)
            if args.build_only:
                continue
            # one job per method and answer length: random weights never stop generating, so each length
            # is the memory and time of answers that long
            jobs = []
            # model:methods names a model's jobs exactly; otherwise its methods and a greedy evaluation
            methods = wanted[name] or [*(args.methods or DEFAULT_METHODS[family]), "greedy-eval"]
            for method in (m for m in methods if m not in ("greedy-eval", "vllm-agreement")):
                hp = grounding if method == "vr-ttrl" else mcq
                lengths = args.answer_tokens or [hp["max_completion_length"]] + ([] if args.tiny else [1024])
                jobs += [{"method": method, "hp": {**hp, "max_completion_length": n},
                          "samples": samples_per_scene if method == "vr-ttrl" else args.adapt_samples} for n in lengths]
            if "greedy-eval" in methods:
                jobs.append({"method": "greedy-eval", "n": n_eval, "batch": 8 if args.tiny else 32})
            if "vllm-agreement" in methods:
                jobs.append({"method": "vllm-agreement", "n": 20})
            for job in jobs:
                tokens = job.get("hp", {}).get("max_completion_length")
                print(f"== {name} {job['method']} {tokens or ''}", flush=True)
                job.update(device=device, model=name, model_dir=str(model_dir), digits=str(digits),
                           scenes=str(scenes), tmp=str(tmp), csv=str(csv), answer_tokens=tokens)
                if tokens:
                    job["predicted_peak_gb"] = predicted_peak_gb(name, family, job["method"], job["hp"])
                    reason = skip_reason(job["predicted_peak_gb"], device_gb)
                    if reason:
                        print(reason, flush=True)
                        append_row(str(csv), {**row_key(job), "error": reason})
                        continue
                failed += not run_job_process(job)
    if args.build_only:
        return 0
    table = pd.read_csv(csv)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 1 if failed else 0


def run_job_process(job: dict) -> bool:
    """One (model, method) in a process of its own: its peaks owe nothing to the previous job's
    leftovers, and an out-of-memory failure loses that row alone (written with the error)."""
    done = subprocess.run([sys.executable, __file__, "--job", json.dumps(job)], capture_output=True, text=True)
    if done.returncode:
        error = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        print(done.stderr[-3000:], file=sys.stderr)
        append_row(job["csv"], {**row_key(job), "error": error[:300]})
    return not done.returncode


def row_key(job: dict) -> dict:
    """The columns that name a job's row, the plan's prediction among them."""
    return {"device": job["device"], "model": job["model"], "method": job["method"],
            "answer_tokens": job.get("answer_tokens"), "predicted_peak_gb": job.get("predicted_peak_gb")}


def append_row(csv: str, row: dict) -> None:
    """The table so far plus `row` (rows differ in columns: adaptation, per-sample, evaluation)."""
    path = Path(csv)
    table = pd.concat([pd.read_csv(path), pd.DataFrame([row])]) if path.exists() else pd.DataFrame([row])
    table.to_csv(path, index=False)


def backend_used(job: dict) -> str:
    """The generation backend the job ran: greedy evaluation here is transformers' generate; rollouts
    follow `rollout_backend` (auto: vLLM on a CUDA GPU where installed)."""
    from ttrl_bench.generation.backend import choose_backend

    if job["method"] in ("greedy-eval", "vllm-agreement"):
        return "hf" if job["method"] == "greedy-eval" else "vllm"
    return choose_backend(job["hp"].get("rollout_backend", "auto"), "rollout_backend")


def vllm_engine_settings(job: dict) -> dict:
    """The colocated engine's GRPOConfig settings (config `adaptation.vllm` defaults) where vLLM ran."""
    from ttrl_bench.generation.vllm_settings import grpo_vllm_kwargs

    if backend_used(job) != "vllm" or "hp" not in job:  # the agreement job's engine is evaluation's
        return {}
    return grpo_vllm_kwargs(None, job["hp"]["max_completion_length"])


def run_job(job: dict) -> None:
    """The child process: one job's measurements, with the backend and precision it ran in."""
    from ttrl_bench.generation.precision import bf16_autocast

    tmp = Path(job["tmp"]) / job["method"]
    if job["method"] == "greedy-eval":
        result = run_evaluation(Path(job["model_dir"]), Path(job["digits"]), job["n"], job["batch"])
    elif job["method"] == "vllm-agreement":
        result = run_vllm_agreement(Path(job["model_dir"]), Path(job["digits"]), job["n"])
    elif job["method"] == "vr-ttrl":
        result = run_per_sample(Path(job["model_dir"]), Path(job["scenes"]), job["hp"], tmp, job["samples"])
    else:
        result = run_adaptation(Path(job["model_dir"]), Path(job["digits"]), job["method"], job["hp"], tmp,
                                job["samples"])
    import transformers
    import trl

    card = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    append_row(job["csv"], {**row_key(job), **result, "rollout_backend": backend_used(job),
                            "vllm_settings": json.dumps(vllm_engine_settings(job)),
                            "bf16_autocast": bf16_autocast(), "card": card, "torch": torch.__version__,
                            "transformers": transformers.__version__, "trl": trl.__version__})


if __name__ == "__main__":
    sys.exit(main())
