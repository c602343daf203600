"""Greedy evaluation streams images batch by batch, and a sample whose image does not decode
becomes an error row naming the sample and the file, without ending the job."""

import json
import shutil

import pytest

from ttrl_bench.datasets.prepare import load_manifest
from ttrl_bench.evaluation import evaluate
from ttrl_bench.evaluation.tasks import MCQTask
from ttrl_bench.models.loading import load_model


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(str(tiny_model_dir))


@pytest.fixture
def five_samples(demo_data, tmp_path):
    """Five demo test samples in a copy of their images, the third one cut off mid-file."""
    samples = load_manifest(demo_data, "test").head(5)
    for path in samples["image"]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(demo_data / path, tmp_path / path)
    broken = tmp_path / samples["image"][2]
    broken.write_bytes(broken.read_bytes()[:100])  # header intact, pixel data gone
    return samples, tmp_path


def test_an_image_that_does_not_decode_is_an_error_row(tiny, five_samples, tmp_path):
    (model, processor), (samples, root) = tiny, five_samples
    frame = evaluate.evaluate_model(model, processor, samples, root, MCQTask(), max_new_tokens=6, batch_size=2)
    broken_id, broken_file = samples["id"][2], str(root / samples["image"][2])
    assert frame["id"].tolist() == samples["id"].tolist()
    error = frame["error"][2]
    assert broken_id in error and broken_file in error and "truncated" in error
    assert frame["raw_output"][2] == "" and frame["parse_failure"][2] and not frame["correct"][2]
    assert frame["error"].isna().sum() == 4
    # the other samples' outputs are those of an evaluation without the broken one
    good = samples.drop(index=2).reset_index(drop=True)
    alone = evaluate.evaluate_model(model, processor, good, root, MCQTask(), max_new_tokens=6, batch_size=1)
    by_one = evaluate.evaluate_model(model, processor, samples, root, MCQTask(), max_new_tokens=6, batch_size=1)
    assert by_one.drop(index=2)["raw_output"].tolist() == alone["raw_output"].tolist()
    summary = evaluate.write_evaluation(frame, MCQTask(), tmp_path / "out", {}, 1.0)
    assert summary["n"] == 5 and summary["n_errors"] == 1
    assert json.loads((tmp_path / "out/metrics.json").read_text())["n_errors"] == 1


def test_images_are_decoded_one_batch_at_a_time(tiny, five_samples, monkeypatch):
    """Each batch is generated before the next one is decoded: never more than `batch_size`
    decoded images alive, whatever the number of samples."""
    (model, processor), (samples, root) = tiny, five_samples
    events = []
    decode, generate = evaluate.decode_image, evaluate._generate
    monkeypatch.setattr(evaluate, "decode_image", lambda *a: events.append("decode") or decode(*a))
    monkeypatch.setattr(evaluate, "_generate", lambda m, p, prompts, *a: events.append(len(prompts)) or generate(m, p, prompts, *a))
    evaluate.evaluate_model(model, processor, samples, root, MCQTask(), max_new_tokens=2, batch_size=2)
    # batches [0, 1], [2 (broken), 3], [4]: the broken image leaves one sample to generate
    assert events == ["decode", "decode", 2, "decode", "decode", 1, "decode", 1]


def test_adaptation_decodes_images_when_a_batch_is_read(five_samples):
    from ttrl_bench.adaptation.grpo import adaptation_dataset

    samples, root = five_samples
    dataset = adaptation_dataset(samples, root)
    # what the dataset holds: the files' paths, not decoded images
    assert dataset.data.column("image").to_pylist() == [str(root / p) for p in samples["image"]]
    first = dataset[0]
    assert first["id"] == samples["id"][0] and first["image"].size == (56, 56) and first["image"].mode == "RGB"
    with pytest.raises(ValueError, match=rf"{samples['id'][2]}: image {root / samples['image'][2]} does not decode"):
        dataset[2]
