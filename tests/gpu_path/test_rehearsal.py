"""Rehearsal at real width on the CPU (issue 23): models of InternVL3-2B's and Qwen2.5-VL's published
shapes (widths, vocabularies, placeholder ids, image-token counts; models/real_width.py) with one
language and one vision layer, run through the project's own commands (`ttrl-bench adapt` under the
rules' 2-process `accelerate launch`, `adapt-per-sample`, `evaluate`; TTRV, ECHO, VR-TTRL). They check what the tiny models
cannot: real vocabulary sizes and placeholder ids (rollouts free of them: the trainer refuses any,
trainer.refuse_placeholders), the published image-token counts, a rollout group split across two
processes, dtypes end to end (fp32 master weights, a bf16 checkpoint and its config, bf16 evaluation).

The `rehearsal` tests take minutes: they are left out of the default `pytest` run and run by CI as a
step of their own (`.ci/run`: `pytest -m rehearsal`). Their sizes are cut where this CPU must:
- they compute in fp32 (TTRL_BENCH_AUTOCAST=none), not under bf16 autocast: this machine's CPU (AVX2,
  no AVX512-BF16) runs a bf16 backward's `grad @ W` through a reference GEMM at 0.24 GFLOPS against 33
  in fp32 (benchmarks/cpu_matmul.py, results in benchmarks/results/rehearsal.md); one bf16 TTRV round
  at the 3B width on a digit prompt was still in its backward after 3.5 CPU-minutes and was stopped.
  The autocast path itself is tested on the tiny models (tests/adaptation/test_per_sample.py);
- images at 448 px (one InternVL tile, 256 image tokens) for rollouts, not 896 px (5 tiles, 1,280
  tokens: checked through the processor in the fast test below);
- rollout counts and answer lengths cut (2 trained + 2 extra votes, 4 new tokens); every other
  hyper-parameter is the preset's.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from tests.support import REPO, free_ports
from ttrl_bench.datasets.prepare import load_manifest, prepare_test_subset
from ttrl_bench.models.real_width import build_real_width, published_layout_tokenizer
from ttrl_bench.runs.launch import launcher

INTERNVL3_2B = "OpenGVLab/InternVL3-2B-hf"
QWEN2_5_VL_7B = "Qwen/Qwen2.5-VL-7B-Instruct"
QWEN2_5_VL_3B = "Qwen/Qwen2.5-VL-3B-Instruct"
# The preset's hyper-parameters with the counts cut (module docstring): one prompt, a group of 2 trained
# rollouts + 2 extra votes (n_votes / num_generations = 2, TTRV's ratio), 4 new tokens.
CUT = {"n_votes": 4, "num_generations": 2, "generation_batch_size": 2, "micro_batch_size": 1,
       "max_completion_length": 4, "epochs": 1}


def _corpus(data: Path) -> list[str]:
    rows = load_manifest(data, "test").to_dict("records")
    return [r["prompt"] for r in rows] + [" ".join(map(str, r["options"])) for r in rows if r.get("options") is not None]


# CI runs the rehearsal alone, one test at a time (`-n 0`), on 2 cores: a job of one process computes on both
# (its 2-process launches keep one thread each), and so does the building of the real-width weights here.
CORES = min(2, os.cpu_count() or 1)


@pytest.fixture(autouse=True)
def _both_cores():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(CORES)
    yield
    torch.set_num_threads(before)


def _run(command: list[str], cwd: Path, **env) -> None:
    threads = {} if "launch" in command else {"TTRL_BENCH_THREADS": str(CORES)}
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=1200,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src"), **threads, **env})
    assert result.returncode == 0, f"{' '.join(command[:8])} ...\n{result.stderr[-4000:]}"


def _method_json(method: str, **hp) -> str:
    from ttrl_bench.adaptation.presets import resolve_method

    return json.dumps(resolve_method(method, None, {"hyperparameters": {**CUT, **hp}}))


def _checkpoint_dtypes(model_dir: Path) -> set[str]:
    from safetensors import safe_open

    dtypes = set()
    for shard in model_dir.glob("*.safetensors"):
        with safe_open(shard, "pt") as f:
            dtypes |= {str(f.get_slice(k).get_dtype()) for k in f.keys()}
    return dtypes


def test_published_layout_tokenizer_and_image_token_counts():
    """The rehearsal's tokenizers hold the published ids, and the real processors give the published
    image-token counts: InternVL3 at 896 px is 2x2 tiles + a thumbnail of 448 px, each (448/14/2)^2 =
    256 tokens: 1,280; Qwen2.5-VL at 896 px is (896/14)^2 patches merged 2x2: 1,024 (840 px: 900)."""
    from ttrl_bench.models.families import unsampleable_token_ids
    from ttrl_bench.models.tiny_families import chat_template, family
    from ttrl_bench.models.configs import model_config

    corpus = ["What digit is shown? Answer with the option's letter.", "A. seven B. three C. one D. nine"]
    counts = {}
    for source, sizes in ((INTERNVL3_2B, (896, 448)), (QWEN2_5_VL_7B, (896, 840))):
        config = model_config(source)
        spec = family(config.model_type)
        tokenizer = published_layout_tokenizer(corpus, config.model_type)
        processor = spec.processor(tokenizer, chat_template(spec.image_part), 448, True)
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": corpus[0]}]}]
        text = processor.apply_chat_template(messages, add_generation_prompt=True)
        for px in sizes:
            ids = processor(text=[text], images=[Image.new("RGB", (px, px))], return_tensors="pt")["input_ids"][0]
            counts[source, px] = int((ids == config.image_token_id).sum())
        assert tokenizer.decode(tokenizer.encode(corpus[0])) == corpus[0]
        counts[source, "forbidden"] = unsampleable_token_ids(config, tokenizer)
        counts[source, "length, eos, pad"] = len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id
    assert counts[INTERNVL3_2B, 896] == 1280 and counts[INTERNVL3_2B, 448] == 256
    assert counts[QWEN2_5_VL_7B, 896] == 1024 and counts[QWEN2_5_VL_7B, 840] == 900
    # InternVL3-2B: <IMG_CONTEXT> 151667, its 151,674 tokens fill its 151,674 embedding rows.
    # Qwen2.5-VL-7B: <|image_pad|> 151655, <|video_pad|> 151656, and rows 151665..152063 past its tokenizer.
    # Qwen2's <|im_end|> 151645 and <|endoftext|> 151643 in both; InternVL3-hf has 9 tokens more than Qwen2.5-VL
    assert counts[INTERNVL3_2B, "length, eos, pad"] == (151674, 151645, 151643)
    assert counts[QWEN2_5_VL_7B, "length, eos, pad"] == (151665, 151645, 151643)
    assert counts[INTERNVL3_2B, "forbidden"] == [151667]
    assert counts[QWEN2_5_VL_7B, "forbidden"] == [151655, 151656] + list(range(151665, 152064))


@pytest.mark.rehearsal
def test_internvl3_2b_width_ttrv_round_on_two_processes_then_greedy_evaluation(tmp_path):
    """A TTRV round of InternVL3-2B's width under the rules' 2-process launch, the group of 4 votes
    split 1 trained + 1 extra vote per process, then the saved checkpoint evaluated greedily."""
    data = prepare_test_subset("demo-digits", tmp_path / "demo-digits", keep=2, px=448)
    model = build_real_width(INTERNVL3_2B, tmp_path / "model", _corpus(data))
    adapted = tmp_path / "adapt"
    common = ["--model-name", "internvl3-2b", "--dataset", "demo-digits", "--data", str(data)]
    _run(launcher(2, port=free_ports()[0]).split() + [
        "adapt", "--model-source", str(model), "--method", "ttrv", "--n-adapt", "1", "--out", str(adapted),
        "--method-json", _method_json("ttrv"), *common], tmp_path, TTRL_BENCH_AUTOCAST="none")
    run = json.loads((adapted / "run.json").read_text())
    assert (run["processes"], run["optimizer_steps"], run["saved_dtype"]) == (2, 1, "bfloat16")
    assert run["precision"] == {"master": "float32", "compute": "float32"}  # TTRL_BENCH_AUTOCAST=none
    log = pd.read_parquet(adapted / "train_log.parquet")
    assert log["votes"].tolist() == [4] and log["completion_length"].tolist() == [4.0]
    # issue 23 finding 1: the checkpoint says what it holds, so evaluation loads it in bf16
    assert json.loads((adapted / "model" / "config.json").read_text())["dtype"] == "bfloat16"
    assert _checkpoint_dtypes(adapted / "model") == {"BF16"}
    _run([sys.executable, "-m", "ttrl_bench.cli", "evaluate", "--model-source", str(adapted / "model"),
          "--method", "ttrv", "--out", str(tmp_path / "eval"), "--backend", "hf", "--max-new-tokens", "4",
          "--eval-samples", "1",
          "--adapt-run", str(adapted / "run.json"), *common], tmp_path)
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert (metrics["n"], metrics["n_errors"], metrics["model_dtype"]) == (1, 0, "bfloat16")


@pytest.mark.rehearsal
def test_qwen2_5_vl_widths_echo_batch_per_sample_vr_ttrl_and_7b_greedy_evaluation(tmp_path):
    """Qwen2.5-VL's vocabulary (151,936 / 152,064 rows for 151,665 tokens: padding rows never sampled)
    and placeholder ids. At the 3B width, one ECHO generation batch on a digit and per-sample VR-TTRL on
    two scenes (one trainer for both, each from the base weights); at the 7B width (1.35 B parameters here: its fp32 weights, gradients and
    AdamW state, 22 GB, do not fit this machine) greedy evaluation in the checkpoint's bf16."""
    scenes = prepare_test_subset("demo-digit-scenes", tmp_path / "demo-digit-scenes", keep=2)
    digits = prepare_test_subset("demo-digits", tmp_path / "demo-digits", keep=1)
    corpus = _corpus(scenes) + _corpus(digits)
    model = build_real_width(QWEN2_5_VL_3B, tmp_path / "qwen3b", corpus)
    cli = [sys.executable, "-m", "ttrl_bench.cli"]
    # one ECHO generation batch: its token entropies and top-5 confidences over all 151,936 logits
    _run(cli + ["adapt", "--model-source", str(model), "--model-name", "qwen2.5-vl-3b", "--method", "echo",
                "--dataset", "demo-digits", "--data", str(digits), "--n-adapt", "1", "--out", str(tmp_path / "echo"),
                "--method-json", _method_json("echo")], tmp_path, TTRL_BENCH_AUTOCAST="none")
    run = json.loads((tmp_path / "echo" / "run.json").read_text())
    assert (run["optimizer_steps"], run["saved_dtype"]) == (1, "bfloat16")
    assert pd.read_parquet(tmp_path / "echo" / "train_log.parquet")["votes"].tolist() == [4]
    per_sample = tmp_path / "vr-ttrl"
    common = ["--dataset", "demo-digit-scenes", "--data", str(scenes), "--max-new-tokens", "4"]
    _run(cli + ["adapt-per-sample", "--model-source", str(model), "--model-name", "qwen2.5-vl-3b",
                "--method", "vr-ttrl", "--out", str(per_sample / "eval"), "--adapt-out", str(per_sample / "adapt"),
                "--method-json", _method_json("vr-ttrl", n_votes=2, micro_batch_size=2), *common], tmp_path,
         TTRL_BENCH_AUTOCAST="none")
    log = pd.read_parquet(per_sample / "adapt" / "train_log.parquet")
    assert log["sample"].nunique() == 2 and log["votes"].tolist() == [2, 2]
    assert log["sample_updates"].tolist() == [1, 1]
    run = json.loads((per_sample / "adapt" / "run.json").read_text())
    assert run["precision"] == {"master": "float32", "compute": "float32"}
    metrics = json.loads((per_sample / "eval" / "metrics.json").read_text())
    assert (metrics["n"], metrics["n_errors"]) == (2, 0)

    big = build_real_width(QWEN2_5_VL_7B, tmp_path / "qwen7b", corpus)
    _run(cli + ["evaluate", "--model-source", str(big), "--model-name", "qwen2.5-vl-7b", "--method", "zero-shot",
                "--out", str(tmp_path / "eval7b"), "--backend", "hf", "--eval-samples", "1", *common], tmp_path)
    metrics = json.loads((tmp_path / "eval7b" / "metrics.json").read_text())
    assert (metrics["n"], metrics["n_errors"], metrics["model_dtype"]) == (1, 0, "bfloat16")
