"""ttrl-bench benchmarks: each prints a table and writes a CSV under benchmarks/results/.

    python benchmarks/run.py            # full sizes (minutes on a laptop CPU)
    python benchmarks/run.py --quick    # seconds; CI runs this so the scripts cannot rot
    python benchmarks/run.py --only preprocessing restore

Ratios are measured side by side in one run; absolute numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
# TTRL_BENCH_BENCHMARK_OUT: another results folder (the tests write to a temporary one)
OUT = Path(os.environ.get("TTRL_BENCH_BENCHMARK_OUT", ROOT / "benchmarks" / "results"))


def timed(fn, repeat: int = 3) -> float:
    """Best of `repeat` wall times (s): the least disturbed by other load on a shared machine."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_preprocessing(quick: bool) -> pd.DataFrame:
    """Resolution filter reading the header only vs decoding the image; MCQ conversion."""
    from PIL import Image

    from ttrl_bench.datasets.preprocessing import mcq_options, recognition_prompt, resolution_verdict, sample_rng

    n = 20 if quick else 200
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        paths = []
        for i in range(n):  # photo-like noise so JPEG decoding does real work; half are > 1000 px
            side = (1200, 900) if i % 2 else (800, 600)
            path = Path(tmp) / f"{i}.jpg"
            Image.fromarray(rng.integers(0, 255, (side[1], side[0], 3), dtype=np.uint8)).save(path, quality=90)
            paths.append(path)

        def decode_all():
            for p in paths:
                with Image.open(p) as im:
                    im.load()
                    _ = im.size[0] > 1000 or im.size[1] > 1000

        header = timed(lambda: [resolution_verdict(p) for p in paths])
        decode = timed(decode_all)
        rows.append({"benchmark": "resolution filter, header only", "items": n, "seconds": header, "items_per_s": n / header})
        rows.append({"benchmark": "resolution filter, full decode", "items": n, "seconds": decode, "items_per_s": n / decode})
        rows.append({"benchmark": "ratio decode / header", "items": n, "seconds": decode / header, "items_per_s": float("nan")})
    classes = [f"class {i}" for i in range(1000)]
    m = 2000 if quick else 50000
    mcq = timed(lambda: [recognition_prompt(mcq_options(classes[i % 1000], classes, sample_rng(0, "imagenet", str(i)))[0])
                         for i in range(m)], repeat=1)
    rows.append({"benchmark": "MCQ conversion (1000 classes)", "items": m, "seconds": mcq, "items_per_s": m / mcq})
    return pd.DataFrame(rows)


def _demo_model(tmp: Path):
    from PIL import Image

    from ttrl_bench.datasets.prepare import load_manifest, prepare_dataset
    from ttrl_bench.models.tiny import build_demo_model

    data = tmp / "demo-digits"
    prepare_dataset("demo-digits", data, seed=0)
    rows = load_manifest(data, "train").to_dict("records")
    build_demo_model(tmp / "model", rows, lambda r: Image.open(data / r["image"]).convert("RGB"), steps=1)
    return data, tmp / "model"


def bench_restore(quick: bool) -> pd.DataFrame:
    """VR-TTRL restores the base weights after every sample: from a copy in memory vs reloading
    the checkpoint from disk. Tiny demo model, and a larger random Qwen2.5-VL unless --quick."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    from ttrl_bench.models.tiny import build_tiny, train_tokenizer

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        _, tiny_dir = _demo_model(Path(tmp))
        sizes = [("tiny demo", tiny_dir)]
        if not quick:  # ~60M parameters: hidden 768, 8 text layers, random weights
            tok = train_tokenizer(["a b c"] * 10)
            big, _ = build_tiny(tok, hidden=768, text_layers=8)
            big.save_pretrained(Path(tmp) / "big")
            shutil.copytree(tiny_dir, Path(tmp) / "big", dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.safetensors", "config.json"))
            sizes.append(("random 768x8", Path(tmp) / "big"))
        for label, path in sizes:
            model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path)
            params = sum(p.numel() for p in model.parameters())
            base = {k: v.detach().clone() for k, v in model.state_dict().items()}
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.01)  # as after an update
            memory = timed(lambda: model.load_state_dict(base))
            disk = timed(lambda: Qwen2_5_VLForConditionalGeneration.from_pretrained(path))
            rows.append({"model": label, "parameters": params, "restore_memory_s": memory, "reload_disk_s": disk,
                         "ratio_disk_over_memory": disk / memory})
    return pd.DataFrame(rows)


def bench_generation_and_adaptation(quick: bool) -> pd.DataFrame:
    """Rollouts (N = 8, 32) and greedy evaluation with HF generate, and GRPO steps, on the tiny
    model on this CPU. vLLM and real model sizes need a GPU machine (not measured here)."""
    from PIL import Image

    from ttrl_bench.adaptation.grpo import adapt
    from ttrl_bench.adaptation.presets import resolve_method
    from ttrl_bench.datasets.prepare import load_manifest
    from ttrl_bench.datasets.sampling import select_adaptation_samples
    from ttrl_bench.generation.hf import generate_greedy, generate_samples
    from ttrl_bench.models.loading import load_model

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data, model_dir = _demo_model(Path(tmp))
        model, processor = load_model(str(model_dir))
        test = load_manifest(data, "test").head(64 if quick else 512)
        images = [Image.open(data / p).convert("RGB") for p in test["image"]]
        for n in (8, 32):
            t = timed(lambda: generate_samples(model, processor, test["prompt"][0], images[0], n, 1.0, 6), repeat=2)
            rows.append({"benchmark": f"rollouts N={n} (HF, 6 tokens)", "items": n, "seconds": t, "items_per_s": n / t})
        t = timed(lambda: generate_greedy(model, processor, list(test["prompt"]), images, 6, 64, progress=False), repeat=1)
        rows.append({"benchmark": "greedy eval (HF, batch 64)", "items": len(test), "seconds": t, "items_per_s": len(test) / t})
        samples = select_adaptation_samples(load_manifest(data, "test"), 2 if quick else 20, seed=0)
        method = resolve_method("ttrv", {"num_generations": 8, "max_completion_length": 6, "epochs": 1,
                                         "learning_rate": 1e-5, "prompts_per_step": 1})
        start = time.perf_counter()
        log = adapt(model, processor, samples, data, method, Path(tmp) / "adapt", seed=0)
        t = time.perf_counter() - start
        rows.append({"benchmark": f"TTRV adaptation, {len(samples)} samples x N=8", "items": len(log), "seconds": t,
                     "items_per_s": len(log) / t})
    return pd.DataFrame(rows)


def bench_store(quick: bool) -> pd.DataFrame:
    """DuckDB ingest of synthetic prediction rows, and rendering the Table 1 layout from it."""
    from ttrl_bench.results.store import ingest, query
    from ttrl_bench.results.tables import method_table, to_markdown

    n = 20_000 if quick else 1_000_000
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        eval_dir = Path(tmp) / "eval"
        eval_dir.mkdir()
        rng = np.random.default_rng(0)
        letters = np.array(list("ABCD"))
        parsed, gold = letters[rng.integers(0, 4, n)], letters[rng.integers(0, 4, n)]
        pd.DataFrame({"id": [f"s{i}" for i in range(n)], "raw_output": parsed, "parse_failure": False,
                      "parsed": parsed, "gold": gold, "correct": parsed == gold}).to_parquet(eval_dir / "predictions.parquet")
        metrics = {"run_id": "m/zero-shot/none/d/seed0", "model": "m", "method": "zero-shot", "train_dataset": "none",
                   "target_dataset": "d", "n_adapt": 20, "sampling": "random", "seed": 0, "metric": "accuracy",
                   "value": float((parsed == gold).mean() * 100), "metrics": {"accuracy": 25.0}, "n": n, "n_unparsable": 0,
                   "eval_seconds": 0.0, "config_hash": "x", "git_revision": "x", "versions": {}}
        (eval_dir / "metrics.json").write_text(json.dumps(metrics))
        db = Path(tmp) / "b.duckdb"
        t = timed(lambda: ingest(db, [eval_dir], [], []), repeat=1)
        rows.append({"benchmark": "DuckDB ingest, prediction rows", "items": n, "seconds": t, "items_per_s": n / t})
        t = timed(lambda: to_markdown(method_table(query(db, "SELECT * FROM runs"))))
        rows.append({"benchmark": "render Table 1 layout", "items": 1, "seconds": t, "items_per_s": 1 / t})
    return pd.DataFrame(rows)


def bench_dataset_reader(quick: bool) -> pd.DataFrame:
    """Preparing a Hub-style dataset (save_to_disk copy, JPEG Image column): our reader keeps the
    source's bytes (Image(decode=False)) and reads headers, vs decoding each image through the
    datasets Image feature and re-encoding it as PNG."""
    import datasets
    from PIL import Image

    from ttrl_bench.datasets.prepare import prepare_dataset

    n = 40 if quick else 1000
    names = [f"class_{i}" for i in range(10)]
    rng = np.random.default_rng(0)
    blobs = []
    for i in range(n):  # photo-like noise, 512x384, so decoding and encoding do real work
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (384, 512, 3), dtype=np.uint8)).save(buffer, format="JPEG", quality=90)
        blobs.append({"bytes": buffer.getvalue(), "path": None})
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "food101"
        features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=names)})
        datasets.Dataset.from_dict({"image": blobs, "label": [i % 10 for i in range(n)]},
                                   features=features).save_to_disk(str(copy))

        def decode_and_reencode():
            out = Path(tmp) / "naive"
            out.mkdir(exist_ok=True)
            for i, row in enumerate(datasets.load_from_disk(str(copy))):
                image = row["image"]  # decoded by the Image feature
                _ = image.size[0] > 1000 or image.size[1] > 1000
                image.save(out / f"{i}.png")

        ours = timed(lambda: prepare_dataset("food101", Path(tmp) / "ours", 0, source={"path": str(copy)}), repeat=1)
        naive = timed(decode_and_reencode, repeat=1)
    return pd.DataFrame([
        {"benchmark": "prepare: source bytes + header (ours)", "items": n, "seconds": ours, "items_per_s": n / ours},
        {"benchmark": "decode + re-encode PNG", "items": n, "seconds": naive, "items_per_s": n / naive},
        {"benchmark": "ratio naive / ours", "items": n, "seconds": naive / ours, "items_per_s": float("nan")},
    ])


# Runs in a fresh interpreter per size: the peak resident memory (VmHWM) is reset once the model is
# loaded, so what is measured is evaluation alone.
EVAL_MEMORY_CHILD = """
import json, sys
from pathlib import Path
import pandas as pd
from ttrl_bench.evaluation.evaluate import decode_image, evaluate_model
from ttrl_bench.evaluation.tasks import MCQTask
from ttrl_bench.models.loading import load_model

data, model_dir, n, mode = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
model, processor = load_model(model_dir)
samples = pd.read_parquet(data / "manifest.parquet").head(n)

def status(key):
    line = next(l for l in open("/proc/self/status") if l.startswith(key))
    return int(line.split()[1]) / 1024

Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
before = status("VmRSS")
held = [decode_image(data, s)[0] for s in samples.to_dict("records")] if mode == "decode all first" else None
evaluate_model(model, processor, samples, data, MCQTask(), max_new_tokens=2, batch_size=16)
print(json.dumps({"rss_before_mb": before, "peak_rss_mb": status("VmHWM")}))
"""


def bench_evaluation_memory(quick: bool) -> pd.DataFrame:
    """Peak host memory of greedy evaluation against the test set's size: streamed (ours: one
    batch of 16 decoded at a time) vs every image decoded first (what evaluation did before).
    640x480 images (about ImageNet's size, 0.9 MB decoded), the tiny demo model (the processor
    shrinks the images, so generation costs little and decoded images dominate)."""
    from PIL import Image

    sizes = (16, 64) if quick else (128, 512, 2048)
    modes = ("streamed",) if quick else ("streamed", "decode all first")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data, model_dir = _demo_model(Path(tmp))
        rng = np.random.default_rng(0)
        images = data / "eval-memory"
        images.mkdir()
        for i in range(16):  # smooth photo-like images, cycled: small files, full-size decodes
            small = rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)
            Image.fromarray(small).resize((640, 480), Image.Resampling.BICUBIC).save(images / f"{i}.jpg", quality=90)
        test = pd.read_parquet(data / "manifest.parquet").query("split == 'test'")
        rows_needed = max(sizes)
        manifest = pd.concat([test] * (rows_needed // len(test) + 1), ignore_index=True).head(rows_needed)
        manifest["id"] = [f"s{i:05d}" for i in range(rows_needed)]
        manifest["image"] = [f"eval-memory/{i % 16}.jpg" for i in range(rows_needed)]
        manifest.to_parquet(data / "manifest.parquet", index=False)
        for mode in modes:
            for n in sizes:
                out = subprocess.run([sys.executable, "-c", EVAL_MEMORY_CHILD, str(data), str(model_dir), str(n), mode],
                                     capture_output=True, text=True, check=True).stdout
                measured = json.loads(out.strip().splitlines()[-1])
                rows.append({"evaluation": mode, "samples": n, **measured,
                             "growth_mb": measured["peak_rss_mb"] - measured["rss_before_mb"], "machine": _machine()})
    return pd.DataFrame(rows)


def _machine() -> str:
    import torch

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{platform.machine()} {platform.system()}, {os.cpu_count()} cores, {memory:.0f} GiB, {gpu}"


def bench_workflow(quick: bool) -> pd.DataFrame:
    """Dry-run time of each full-paper config against its DAG size."""
    rows = []
    configs = ["config/config.yaml"] if quick else ["config/config.yaml", "config/ttrv.yaml", "config/vr-ttrl.yaml", "config/dare.yaml"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("Snakefile", "rules", "config", "workflow", "profiles", "envs", "src"):
            src = ROOT / name
            (shutil.copytree if src.is_dir() else shutil.copy)(src, Path(tmp) / name)
        for config in configs:
            start = time.perf_counter()
            # the papers' models are Hub ids: HF_HUB_OFFLINE=1 skips the dry run's Hub probe
            out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", config, "--replace-workflow-config"],
                                 cwd=tmp, capture_output=True, text=True, check=True,
                                 env={**os.environ, "HF_HUB_OFFLINE": "1"}).stdout
            t = time.perf_counter() - start
            jobs = int(out.split("Job stats:", 1)[1].split("total", 1)[1].split()[0])
            rows.append({"config": config, "jobs": jobs, "dry_run_s": t})
    return pd.DataFrame(rows)


BENCHMARKS = {
    "preprocessing": bench_preprocessing,
    "dataset_reader": bench_dataset_reader,
    "restore": bench_restore,
    "generation": bench_generation_and_adaptation,
    "store": bench_store,
    "evaluation_memory": bench_evaluation_memory,
    "workflow": bench_workflow,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), default=list(BENCHMARKS))
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}"
          f"{' (quick mode)' if args.quick else ''}")
    for name in args.only:
        table = BENCHMARKS[name](args.quick)
        table.to_csv(OUT / f"{name}{'-quick' if args.quick else ''}.csv", index=False)
        print(f"\n## {name}\n")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
