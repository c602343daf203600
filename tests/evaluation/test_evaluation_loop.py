"""The evaluation loop and its files without a model: stand-ins record what `evaluate_model` hands
the generator (the vLLM engine's call, or transformers' greedy / sampled generation), so batching,
undecodable images, system prompts, sampling and metrics.json are checked in milliseconds
(tests/evaluation/test_evaluate.py runs the same loop on a tiny model; mutmut leaves those tests out for speed)."""

import json
import logging
import re

import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image

from ttrl_bench.evaluation import evaluate
from ttrl_bench.evaluation.tasks import MathTask, MCQTask

OPTIONS = ["cat", "dog", "fox", "owl"]


class Engine:
    """The vLLM engine's interface (no `generate`): answers each prompt with the letter it ends in."""

    def __init__(self, n=None):
        self.calls, self.n = [], n

    def __call__(self, processor, prompts, images, systems):
        self.calls.append({"processor": processor, "prompts": prompts, "sizes": [im.size for im in images],
                           "modes": {im.mode for im in images}, "systems": systems})
        return [p[-1] if self.n is None else [p[-1]] * self.n for p in prompts]


def samples_with_images(tmp_path, system=True):
    """5 samples, 2 px wide by (i + 1) px high so each image is recognisable; sample s2's file is
    not an image. Prompts end in the gold letter, so the stand-in answers every readable one right."""
    rows = []
    for i, letter in enumerate("ABCDA"):
        name = f"s{i}.png"
        if i == 2:
            (tmp_path / name).write_bytes(b"not a png")
        else:
            Image.new("L", (2, i + 1)).save(tmp_path / name)
        rows.append({"id": f"s{i}", "image": name, "prompt": f"q{i} {letter}", "options": OPTIONS, "answer": letter,
                     **({"system": f"sys{i}"} if system else {})})
    return pd.DataFrame(rows)


def test_evaluation_feeds_each_batch_its_rgb_images_and_system_prompts(tmp_path, monkeypatch):
    """Batches of 2: q1's image is missing (no generation, an empty output), q4 alone in its batch
    with a missing image gets no engine call at all. A model path goes to one vLLM engine built
    with the evaluation's settings and fed VLLM_CHUNK samples at a time."""
    from ttrl_bench.generation import vllm_offline

    Image.new("RGB", (8, 6)).save(tmp_path / "a.png")
    Image.new("L", (4, 4)).save(tmp_path / "g.png")  # greyscale: converted to RGB
    samples = pd.DataFrame([{"id": f"q{i}", "image": image, "prompt": f"p{i}", "system": f"s{i}",
                             "options": ["x", "y"], "answer": "A"}
                            for i, image in enumerate(["a.png", "none.png", "g.png", "a.png", "none.png"])])
    calls = []

    def engine(processor, prompts, images, systems=None):
        calls.append((processor, prompts, [(im.mode, im.size) for im in images], systems))
        return ["A"] * len(prompts)

    frame = evaluate.evaluate_model(engine, "proc", samples, tmp_path, MCQTask(), 16, batch_size=2)
    assert calls == [("proc", ["p0"], [("RGB", (8, 6))], ["s0"]),
                     ("proc", ["p2", "p3"], [("RGB", (4, 4)), ("RGB", (8, 6))], ["s2", "s3"])]
    assert frame["raw_output"].tolist() == ["A", "", "A", "A", ""]
    assert frame["id"].tolist() == ["q0", "q1", "q2", "q3", "q4"]
    assert "raw_outputs" not in frame  # greedy: one output per sample

    built = []

    class FakeVllm:
        def __init__(self, model_path, settings, max_new_tokens, sampling=None):
            built.append((model_path, settings, max_new_tokens, sampling))

        def __call__(self, processor, prompts, images, systems=None):
            return engine(processor, prompts, images, systems)

    monkeypatch.setattr(vllm_offline, "VllmGreedy", FakeVllm)
    monkeypatch.setattr(evaluate, "VLLM_CHUNK", 3)
    calls.clear()
    evaluate.evaluate_model("/models/x", "proc", samples, tmp_path, MCQTask(), 16, batch_size=2, vllm_settings={"tp": 1})
    assert built == [("/models/x", {"tp": 1}, 16, None)]
    assert [c[1] for c in calls] == [["p0", "p2"], ["p3"]]


def test_an_undecodable_image_gets_an_error_row_a_warning_and_the_progress_bar_counts_batches(tmp_path, caplog,
                                                                                             capsys):
    samples, engine = samples_with_images(tmp_path), Engine()
    with caplog.at_level(logging.WARNING, logger=evaluate.log.name):
        frame = evaluate.evaluate_model(engine, "PROC", samples, tmp_path, MCQTask(), max_new_tokens=8, batch_size=2)
    assert list(frame["raw_output"]) == ["A", "B", "", "D", "A"]
    assert list(frame["parse_failure"]) == [False, False, True, False, False]
    assert list(frame["correct"]) == [True, True, False, True, True]
    error = f"sample s2: image {tmp_path / 's2.png'} does not decode: "
    assert frame["error"][2].startswith(error) and frame["error"].isna().sum() == 4
    assert [r.getMessage()[: len(error)] for r in caplog.records] == [error]
    # the progress bar names the evaluation and counts batches: 3 of them
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert bar.startswith("greedy eval: 100%") and " 3/3 " in bar and re.search(r"(batch/s|s/batch)\]$", bar), bar


def test_no_system_column_means_no_system_prompts(tmp_path):
    engine = Engine()
    evaluate.evaluate_model(engine, None, samples_with_images(tmp_path, system=False), tmp_path, MCQTask(), 8, 10)
    assert [c["systems"] for c in engine.calls] == [None]


def test_sampled_evaluation_gives_an_undecodable_sample_n_empty_outputs(tmp_path, capsys):
    engine = Engine(n=3)
    frame = evaluate.evaluate_model(engine, None, samples_with_images(tmp_path), tmp_path, MathTask((1, 3)), 8, 10,
                                    sampling={"n": 3, "temperature": 0.6, "top_p": 0.95, "seed": 0})
    assert list(frame["raw_outputs"][2]) == ["", "", ""] and list(frame["raw_outputs"][3]) == ["D", "D", "D"]
    assert list(frame["parse_failure"]) == [False, False, True, False, False]
    assert list(frame["n_correct"]) == [3, 3, 0, 3, 3]
    assert "sampled eval: 100%" in capsys.readouterr().err


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        sampling = args[6] if isinstance(args[6], dict) else None  # generate_sampled(..., sampling, systems)
        return [["x"] * sampling["n"] if sampling else "x" for _ in args[2]]


@pytest.mark.parametrize("sampling", [None, {"n": 2, "temperature": 1.0, "top_p": 1.0, "seed": 3}])
def test_transformers_models_go_to_greedy_or_sampled_generation_with_every_setting(tmp_path, monkeypatch, sampling):
    greedy, sampled = Recorder(), Recorder()
    monkeypatch.setattr(evaluate, "generate_greedy", greedy)
    monkeypatch.setattr(evaluate, "generate_sampled", sampled)

    class HFModel:
        def generate(self):
            raise AssertionError("reached only through generate_greedy / generate_sampled")

    model, samples = HFModel(), samples_with_images(tmp_path)
    evaluate.evaluate_model(model, "PROC", samples, tmp_path, MathTask() if sampling else MCQTask(),
                            max_new_tokens=7, batch_size=10, sampling=sampling)
    (args, kwargs), = (sampled if sampling else greedy).calls
    assert not (greedy if sampling else sampled).calls
    prompts, systems = ["q0 A", "q1 B", "q3 D", "q4 A"], ["sys0", "sys1", "sys3", "sys4"]
    assert args[:3] == (model, "PROC", prompts) and [im.size for im in args[3]] == [(2, 1), (2, 2), (2, 4), (2, 5)]
    if sampling:
        assert args[4:] == (7, 10, sampling, systems) and kwargs == {}
    else:  # evaluate_model draws its own progress bar, so generate_greedy draws none
        assert args[4:] == (7, 10, systems) and kwargs == {"progress": False}


def predictions(error_column=True, index=None):
    frame = pd.DataFrame({"id": ["a", "b", "c", "d"], "raw_output": ["A", "x", "C", "D"],
                          "parse_failure": [False, True, False, False], "parsed": ["A", None, "C", "B"],
                          "gold": ["A", "B", "C", "D"], "correct": [True, False, True, False]}, index=index)
    if error_column:
        frame["error"] = [None, "sample b: image does not decode", None, None]
    return frame


def test_write_evaluation_summary_worked_by_hand(tmp_path, caplog):
    from pathlib import Path

    out = tmp_path / "runs" / "ttrv" / "eval"  # parents created
    with caplog.at_level(logging.INFO, logger=evaluate.log.name):
        summary = evaluate.write_evaluation(predictions(), MCQTask(), out, {"model": Path("/m/x")}, 1.5)
    # 2 of 4 correct; 1 of 4 unparsable; 1 error row
    expected = {"metric": "accuracy", "value": 50.0, "metrics": {"accuracy": 50.0, "unparsable_rate": 25.0},
                "n": 4, "n_unparsable": 1, "n_errors": 1, "eval_seconds": 1.5, "model": "/m/x"}
    text = (out / "metrics.json").read_text()
    assert json.loads(text) == expected and text.splitlines()[1] == '  "metric": "accuracy",'  # indent 2
    assert caplog.messages == ["accuracy 50.00 on 4 samples (1 unparsable)"]
    assert summary["n_errors"] == 1 and summary["model"] == Path("/m/x")
    # a rerun overwrites; a frame without an error column has no errors; the index is not a column
    again = evaluate.write_evaluation(predictions(error_column=False, index=[5, 7, 9, 11]), MCQTask(), out, {}, 2.0)
    assert again["n_errors"] == 0 and json.loads((out / "metrics.json").read_text())["eval_seconds"] == 2.0
    # DuckDB reads the file's columns as they are: a stored index would be one more ("__index_level_0__")
    assert pq.read_schema(out / "predictions.parquet").names == [
        "id", "raw_output", "parse_failure", "parsed", "gold", "correct"]


def test_timed_evaluation_hands_every_setting_to_one_vllm_engine_and_times_itself(tmp_path, monkeypatch):
    from ttrl_bench.generation import vllm_offline

    built = []

    class FakeVllm(Engine):
        def __init__(self, path, settings, max_new_tokens, sampling=None):
            super().__init__(n=sampling["n"])
            built.append((self, path, settings, max_new_tokens, sampling))

    monkeypatch.setattr(vllm_offline, "VllmGreedy", FakeVllm)
    sampling = {"n": 2, "temperature": 0.6, "top_p": 0.95, "seed": 0}
    summary = evaluate.timed_evaluation("/models/x", "PROC", samples_with_images(tmp_path), tmp_path, MathTask((1, 2)),
                                        tmp_path / "eval", {"run": "r1"}, max_new_tokens=9, batch_size=1,
                                        vllm_settings={"gpu_memory_utilization": 0.5}, sampling=sampling)
    (engine, *settings), = built
    assert settings == ["/models/x", {"gpu_memory_utilization": 0.5}, 9, sampling]
    assert [(c["processor"], len(c["prompts"])) for c in engine.calls] == [("PROC", 4)]  # one VLLM_CHUNK
    # 4 of 5 questions answered right by both completions: s2's image does not decode
    assert (summary["value"], summary["metrics"]["pass@2"], summary["n_errors"], summary["run"]) == (80.0, 80.0, 1, "r1")
    assert 0 < summary["eval_seconds"] < 60  # the stand-in answers in milliseconds
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text())["value"] == 80.0
    # a loaded model is fed batch_size samples at a time
    engine = Engine()
    evaluate.timed_evaluation(engine, "PROC", samples_with_images(tmp_path), tmp_path, MCQTask(), tmp_path / "eval",
                              {}, max_new_tokens=9, batch_size=4)
    assert [c["prompts"] for c in engine.calls] == [["q0 A", "q1 B", "q3 D"], ["q4 A"]]
