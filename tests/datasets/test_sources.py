"""Every registry entry through its real loader: a tiny fixture with the source's columns and
types (a save_to_disk dataset, webdataset shards, an image folder, or JSON lines + files) is
prepared with `prepare_dataset` and checked against counts and prompts worked out by hand.

Fixture rows follow one pattern unless a test says otherwise: a good 64x48 image, a 1200x900
image (too large for TTRV's 1000x1000 limit) and bytes that are no image (unreadable)."""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from pycocotools import mask as mask_utils

from ttrl_bench.datasets import sources
from ttrl_bench.datasets.prepare import prepare_dataset
from ttrl_bench.datasets.readers import rows
from ttrl_bench.datasets.registry import REGISTRY
from ttrl_bench.datasets.sources import DatasetSourceError


def png(width=64, height=48, color=(200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="PNG")
    return buffer.getvalue()


GOOD, LARGE, CORRUPT = png(), png(1200, 900), b"this is not an image"
THREE_IMAGES = [GOOD, LARGE, CORRUPT]
STANDARD_DROPS = {"original": 3, "kept": 1, "dropped": {"too_large": 1, "unreadable": 1}}
GROUNDING_DROPS = {"original": 3, "kept": 2, "dropped": {"unreadable": 1}}  # VR-TTRL sets: no size filter


def save(tmp_path, columns: dict, features: dict) -> dict:
    """A save_to_disk copy with the given columns; images given as bytes."""
    for name, feature in features.items():
        if isinstance(feature, datasets.Image):
            columns[name] = [{"bytes": b, "path": None} if b is not None else None for b in columns[name]]
        elif isinstance(feature, datasets.List) and isinstance(feature.feature, datasets.Image):
            columns[name] = [[{"bytes": b, "path": None} for b in images] for images in columns[name]]
    path = tmp_path / "source"
    datasets.Dataset.from_dict(columns, features=datasets.Features(features)).save_to_disk(str(path))
    return {"path": str(path)}


def prepare(tmp_path, name: str, source: dict, seed: int = 0):
    stats = prepare_dataset(name, tmp_path / "prepared", seed, source=source)
    return stats, pd.read_parquet(tmp_path / "prepared" / "manifest.parquet")


def counts(stats: dict) -> dict:
    return {key: stats[key] for key in ("original", "kept", "dropped")}


# --- recognition -----------------------------------------------------------------------------

# the image extension of each clip-benchmark repository (registry evidence: jpg for the ImageNet
# variants made from files, webp, the converter's default, for the others)
WDS_ENTRIES = {"imagenet-v2": "webp", "imagenet-r": "jpg", "imagenet-sketch": "jpg", "imagenet-a": "jpg",
               "dtd": "webp", "resisc45": "webp"}
CLASSES = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead"]


def encoded(blob: bytes, ext: str) -> bytes:
    """An image re-encoded as a shard stores it (CLIP_benchmark PIL_to_bytes: lossless webp, or
    the source file's own jpg); bytes that are no image stay as they are."""
    try:
        image = Image.open(io.BytesIO(blob))
        image.load()
    except OSError:
        return blob
    buffer = io.BytesIO()
    image.save(buffer, **({"format": "WEBP", "lossless": True} if ext == "webp" else {"format": "JPEG"}))
    return buffer.getvalue()


def write_shard(path, samples, image_ext, first_index=0):
    """One webdataset shard as CLIP_benchmark's convert_dataset writes it: s%07d.<ext> + s%07d.cls."""
    with tarfile.open(path, "w") as tar:
        for i, (blob, label) in enumerate(samples, start=first_index):
            for ext, data in ((image_ext, encoded(blob, image_ext)), ("cls", str(label).encode())):
                info = tarfile.TarInfo(f"s{i:07d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def webdataset_copy(tmp_path, image_ext="jpg") -> dict:
    """A download of a clip-benchmark repository: test/0.tar + test/1.tar with test/nshards.txt "2",
    a train/ split beside it (wds_vtab-*), classnames.txt and the zero-shot templates at the root."""
    root = tmp_path / "wds"
    (root / "test").mkdir(parents=True)
    (root / "train").mkdir()
    (root / "classnames.txt").write_text("\n".join(CLASSES) + "\n")
    (root / "zeroshot_classification_templates.txt").write_text("a photo of a {c}.\n")
    write_shard(root / "test" / "0.tar", [(GOOD, 3), (LARGE, 0)], image_ext)
    write_shard(root / "test" / "1.tar", [(CORRUPT, 1)], image_ext, first_index=2)
    (root / "test" / "nshards.txt").write_text("2\n")
    write_shard(root / "train" / "0.tar", [(GOOD, 4)] * 5, image_ext)  # never read: the entries are test sets
    (root / "train" / "nshards.txt").write_text("1\n")
    return {"path": str(root)}


@pytest.mark.parametrize("name", WDS_ENTRIES)
def test_clip_benchmark_webdataset_entries(tmp_path, name):
    stats, manifest = prepare(tmp_path, name, webdataset_copy(tmp_path, WDS_ENTRIES[name]))
    assert counts(stats) == STANDARD_DROPS  # test/ only: 3 samples over 2 shards, not train/'s 5
    row = manifest.iloc[0]
    assert row["label"] == "tiger shark"  # cls 3 in classnames.txt order
    assert row["source_id"] == "s0000000"  # the shard key
    options = list(row["options"])
    assert len(set(options)) == 4 and options["ABCD".index(row["answer"])] == "tiger shark"
    what = "what texture it shows" if name == "dtd" else "what it shows"  # DTD's wording, Appendix C
    assert row["prompt"].startswith(f"Look at the given image and identify {what}. Choose the correct answer")
    assert row["prompt"].endswith("\nOptions:\n" + "\n".join(f"{l}. {o}" for l, o in zip("ABCD", options)) + ".")


def test_the_other_image_extension_is_read_too(tmp_path):
    stats, _ = prepare(tmp_path, "imagenet-r", webdataset_copy(tmp_path, "webp"))
    assert counts(stats) == STANDARD_DROPS


def test_the_fixture_shards_load_as_datasets_loads_the_repository(tmp_path):
    # datasets' webdataset builder names the columns by extension, decodes .cls to int, adds the key
    root = webdataset_copy(tmp_path, "webp")["path"]
    data = datasets.load_dataset("webdataset", data_files={"test": f"{root}/test/*.tar"}, split="test")
    assert sorted(data.column_names) == ["__key__", "__url__", "cls", "webp"]
    assert list(data["cls"]) == [3, 0, 1] and list(data["__key__"]) == ["s0000000", "s0000001", "s0000002"]


def test_a_shard_missing_from_nshards_is_named(tmp_path):
    source = webdataset_copy(tmp_path)
    (tmp_path / "wds" / "test" / "1.tar").unlink()
    with pytest.raises(DatasetSourceError, match=r"nshards\.txt says 2 shards, but .*test/1\.tar is missing"):
        prepare(tmp_path, "dtd", source)


def test_clip_benchmark_hub_loads_the_splits_shards_only(tmp_path, monkeypatch):
    # one shard + nshards.txt: datasets' module inference would pick "text" (a .tar/.txt tie goes to .txt)
    calls = []

    def fake_load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        raise RuntimeError("offline")

    monkeypatch.setattr(sources, "hub_usable", lambda: True)
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    with pytest.raises(DatasetSourceError, match=r"clip-benchmark/wds_imagenet-a .*data\.sources\.imagenet-a\.path"):
        prepare(tmp_path, "imagenet-a", None)
    assert calls == [(("clip-benchmark/wds_imagenet-a", None), {"split": "test", "data_files": {"test": "test/*.tar"}})]


def test_food101_class_names_come_from_the_class_label(tmp_path):
    names = ["apple_pie", "baby_back_ribs", "baklava", "beef_carpaccio", "beignets"]
    source = save(tmp_path, {"image": THREE_IMAGES, "label": [2, 0, 1]},
                  {"image": datasets.Image(), "label": datasets.ClassLabel(names=names)})
    stats, manifest = prepare(tmp_path, "food101", source)
    assert counts(stats) == STANDARD_DROPS
    assert manifest.iloc[0]["label"] == "baklava"
    assert set(manifest.iloc[0]["options"]) <= {"apple pie", "baby back ribs", "baklava", "beef carpaccio", "beignets"}


def test_imagenet_image_folder_with_wordnet_id_names(tmp_path):
    root = tmp_path / "imagenet-val"
    wnids = ["n01440764", "n01443537", "n01484850", "n01491361"]
    for wnid, blob in zip(wnids, [GOOD, LARGE, CORRUPT, GOOD]):
        (root / wnid).mkdir(parents=True)
        (root / wnid / f"ILSVRC2012_val_{wnid}.JPEG").write_bytes(blob)
    names = tmp_path / "imagenet_names.json"
    names.write_text(json.dumps(dict(zip(wnids, CLASSES))))
    stats, manifest = prepare(tmp_path, "imagenet", {"path": str(root), "class_names": str(names)})
    assert counts(stats) == {"original": 4, "kept": 2, "dropped": {"too_large": 1, "unreadable": 1}}
    assert list(manifest["label"]) == ["tench", "tiger shark"]


def test_missing_class_names_name_the_config_key(tmp_path):
    root = tmp_path / "folder"
    for wnid in ["n1", "n2"]:
        (root / wnid).mkdir(parents=True)
        (root / wnid / "a.png").write_bytes(GOOD)
    with pytest.raises(DatasetSourceError, match=r"data\.sources\.imagenet\.class_names"):
        prepare(tmp_path, "imagenet", {"path": str(root), "class_names": str(tmp_path / "absent.txt")})


# --- VQA -------------------------------------------------------------------------------------

INSTRUCTION_4 = ("Choose the correct answer from the options below and respond with only the corresponding "
                 "option letter (A, B, C, or D). Do not include any explanation or extra text.")


def test_mme_yes_no_becomes_two_options(tmp_path):
    question = "Is this photo taken in a place of home office? Please answer yes or no."
    # lmms-eval mme/utils.py groups an image's two questions by question_id ("<category>/<image>")
    ids = ["scene/Places365_val_00000001.jpg", "scene/Places365_val_00000002.jpg",
           "scene/Places365_val_00000003.jpg", "scene/Places365_val_00000001.jpg"]
    source = save(tmp_path, {"question_id": ids,
                             "image": THREE_IMAGES + [GOOD], "question": [question] * 4,
                             "answer": ["Yes", "No", "Yes", "No"], "category": ["scene"] * 4},
                  {"question_id": datasets.Value("string"), "image": datasets.Image(),
                   "question": datasets.Value("string"), "answer": datasets.Value("string"),
                   "category": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mme", source)
    assert counts(stats) == {"original": 4, "kept": 2, "dropped": {"too_large": 1, "unreadable": 1}}
    assert list(manifest["answer"]) == ["B", "A"]  # Yes -> B, No -> A
    assert list(manifest.iloc[0]["options"]) == ["No", "Yes"]
    assert manifest.iloc[0]["prompt"] == (
        question + " Please respond with only the corresponding option letter (A or B). Do not include any "
        "explanation or extra text. \nOptions:\nA. No\nB. Yes.")
    assert list(manifest["source_id"]) == [ids[0], ids[0]]  # MME asks two questions per image
    assert list(manifest["category"]) == ["scene", "scene"]  # kept for MME's official score
    assert manifest["id"].is_unique


def test_seed_bench_keeps_image_questions(tmp_path):
    source = save(tmp_path, {
        "answer": ["C", "A", "B", "D"], "choice_a": ["Red", "x", "x", "x"], "choice_b": ["None of the above", "y", "y", "y"],
        "choice_c": ["Brown", "z", "z", "z"], "choice_d": ["Tan", "w", "w", "w"], "data_id": ["1", "2", "3", "4"],
        "data_type": ["image", "image", "image", "video"], "question": ["What is the main color of the dress?"] * 4,
        "question_id": ["101", "102", "103", "104"], "question_type_id": [1, 1, 1, 10],
        "image": [[GOOD], [LARGE], [CORRUPT], [GOOD, GOOD]]},
        {"answer": datasets.Value("string"), **{f"choice_{c}": datasets.Value("string") for c in "abcd"},
         "data_id": datasets.Value("string"), "data_type": datasets.Value("string"),
         "question": datasets.Value("string"), "question_id": datasets.Value("string"),
         "question_type_id": datasets.Value("int64"), "image": datasets.List(datasets.Image())})
    stats, manifest = prepare(tmp_path, "seed-bench", source)
    assert counts(stats) == {"original": 4, "kept": 1,
                             "dropped": {"not_applicable": 1, "too_large": 1, "unreadable": 1}}
    row = manifest.iloc[0]
    assert row["answer"] == "C"
    assert row["prompt"] == ("What is the main color of the dress?\n" + INSTRUCTION_4 +
                             "\nOptions:\nA. Red\nB. None of the above\nC. Brown\nD. Tan")


def test_ai2d_answer_index_becomes_a_letter(tmp_path):
    source = save(tmp_path, {"question": ["What is the line that divides the two different plates?"] * 3,
                             "options": [["ground", "fault line", "dirt", "earthquake"]] * 3,
                             "answer": ["1", "0", "2"], "image": THREE_IMAGES},
                  {"question": datasets.Value("string"), "options": datasets.List(datasets.Value("string")),
                   "answer": datasets.Value("string"), "image": datasets.Image()})
    stats, manifest = prepare(tmp_path, "ai2d", source)
    assert counts(stats) == STANDARD_DROPS
    assert manifest.iloc[0]["answer"] == "B"
    assert manifest.iloc[0]["prompt"].endswith("\nOptions:\nA. ground\nB. fault line\nC. dirt\nD. earthquake")


CRPE_TEXT = ("What is the person in front of?\nA. The person is in front of the person.\nB. The person is in front "
             "of the tree.\nC. The person is in front of the mirror.\nD. The person is in front of the shelf.\n"
             "Answer with the option's letter from the given choices directly.")


def crpe_copy(tmp_path) -> Path:
    """A download of OpenGVLab/CRPE (crpe_relation.jsonl, crpe_exist.jsonl, the *_meta.jsonl files,
    abnormal_images/) with COCO val2017 placed as coco/val2017/: rows name either folder."""
    root = tmp_path / "crpe"
    (root / "coco" / "val2017").mkdir(parents=True)
    (root / "abnormal_images").mkdir()
    images = ["coco/val2017/000000000139.jpg", "abnormal_images/12.jpg", "coco/val2017/000000000285.jpg",
              "coco/val2017/000000000632.jpg"]
    lines = []
    for i, (image, blob) in enumerate(zip(images, THREE_IMAGES + [None])):
        if blob is not None:  # the fourth image was not placed
            (root / image).write_bytes(blob)
        lines.append(json.dumps({"question_id": i, "image": image, "text": CRPE_TEXT, "correct_option": "BACD"[i],
                                 "category": "predicate"}))
    (root / "crpe_relation.jsonl").write_text("\n".join(lines) + "\n")
    (root / "crpe_exist.jsonl").write_text(lines[0] + "\n")  # not read
    (root / "crpe_relation_meta.jsonl").write_text(lines[0] + "\n")  # not read (no CircularEval)
    return root


def test_crpe_jsonl_with_coco_and_abnormal_image_paths(tmp_path, caplog):
    root = crpe_copy(tmp_path)
    with caplog.at_level("WARNING"):
        stats, manifest = prepare(tmp_path, "crpe", {"path": str(root)})
    # the COCO image that is not there is counted, and its warning names the file
    assert counts(stats) == {"original": 4, "kept": 1, "dropped": {"no_image": 1, "too_large": 1, "unreadable": 1}}
    assert any("coco/val2017/000000000632.jpg" in r.getMessage() and "crpe-000003" in r.getMessage()
               for r in caplog.records)
    row = manifest.iloc[0]
    assert row["answer"] == "B" and list(row["options"])[1] == "The person is in front of the tree."
    assert row["source_id"] == "0"
    # TTRV Appendix C: the official text with "and do not include any explanation or extra text."
    assert row["prompt"] == CRPE_TEXT[:-1] + " and do not include any explanation or extra text."


def test_crpe_images_from_a_separate_coco_folder(tmp_path):
    root = crpe_copy(tmp_path)
    coco_root = tmp_path / "datasets"
    coco_root.mkdir()
    (root / "coco").rename(coco_root / "coco")  # COCO kept elsewhere, named by config `image_dir`
    (coco_root / "coco" / "val2017" / "000000000632.jpg").write_bytes(GOOD)
    stats, _ = prepare(tmp_path, "crpe", {"path": str(root), "image_dir": [".", str(coco_root)]})
    assert counts(stats) == {"original": 4, "kept": 2, "dropped": {"too_large": 1, "unreadable": 1}}


@pytest.mark.parametrize("name, files", [("crpe", "crpe_relation.jsonl, abnormal_images/"),
                                         ("capture", "real_metadata.json, real_dataset.zip")])
def test_file_repositories_name_what_to_download(tmp_path, name, files):
    # OpenGVLab/CRPE and atinp/CAPTURe hold files, no split: load_dataset(id, split="test") cannot read them
    with pytest.raises(DatasetSourceError, match=rf"download {re.escape(files)} .*`data\.sources\.{name}\.path`"):
        prepare(tmp_path, name, None)


def test_mathvista_choices_and_free_form(tmp_path):
    question = "If AB = AO, what is the degree measure of angle ABO?"
    source = save(tmp_path, {
        "pid": ["1", "2", "3", "4"], "question": [question, "What is the value of x?", question, question],
        "image": ["images/1.jpg"] * 4, "decoded_image": [GOOD, GOOD, LARGE, CORRUPT],
        "choices": [["15", "30", "45", "60", "90"], None, ["1", "2"], ["1", "2"]],
        "unit": [None] * 4, "precision": [None, 1.0, None, None], "answer": ["30", "3.5", "1", "2"],
        "question_type": ["multi_choice", "free_form", "multi_choice", "multi_choice"],
        "answer_type": ["text", "float", "text", "text"]},
        {"pid": datasets.Value("string"), "question": datasets.Value("string"), "image": datasets.Value("string"),
         "decoded_image": datasets.Image(), "choices": datasets.List(datasets.Value("string")),
         "unit": datasets.Value("string"), "precision": datasets.Value("float64"), "answer": datasets.Value("string"),
         "question_type": datasets.Value("string"), "answer_type": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mathvista", source)
    assert counts(stats) == {"original": 4, "kept": 2, "dropped": {"too_large": 1, "unreadable": 1}}
    assert list(manifest["answer"]) == ["B", "3.5"]
    assert manifest.iloc[0]["prompt"] == (
        "Hint: Please answer the question and provide the correct option letter, e.g., A, B, C, D, at the end."
        "\nDo not include any explanation or extra text.\nQuestion: " + question
        + "\nChoices:\n(A) 15\n(B) 30\n(C) 45\n(D) 60\n(E) 90")
    assert manifest.iloc[1]["prompt"].startswith("What is the value of x?\nAnswer the question with a single word")
    assert list(manifest.iloc[1]["options"]) == []


MATHVERSE_Q = ("What is the meaning of the highlighted segment?\nChoices:\nA:The turbine's center is 35 meters "
               "above the ground.\nB:The turbine completes a single cycle in 35 seconds.\nC:The length of the "
               "blade is 35 meters.\nD:The turbine has 35 blades.")


def test_mathverse_options_are_read_from_question_for_eval(tmp_path):
    source = save(tmp_path, {"sample_index": ["1", "2", "3"], "problem_index": ["1", "1", "1"],
                             "problem_version": ["Text Dominant"] * 3, "question": ["(no choices here)"] * 3,
                             "question_for_eval": [MATHVERSE_Q] * 3,
                             "image": THREE_IMAGES, "answer": ["A", "B", "C"],
                             "question_type": ["multi-choice"] * 3},
                  {"sample_index": datasets.Value("string"), "problem_index": datasets.Value("string"),
                   "problem_version": datasets.Value("string"), "question": datasets.Value("string"),
                   "question_for_eval": datasets.Value("string"), "image": datasets.Image(),
                   "answer": datasets.Value("string"),
                   "question_type": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mathverse", source)
    assert counts(stats) == STANDARD_DROPS
    row = manifest.iloc[0]
    assert row["answer"] == "A" and list(row["options"])[3] == "The turbine has 35 blades."
    assert row["prompt"] == ("Please directly answer the question and provide the correct option letter, e.g., "
                             "A, B, C, D.\nDo not include any explanation or extra text.\nQuestion: " + MATHVERSE_Q)


def test_realworldqa_is_resized_not_filtered(tmp_path):
    question = ("How many lanes are there on the left?\n\nOptions are: \nA. 4\nB. 3\nC. 2\nD. 5\n"
                "Please answer directly with only the letter of the correct option and nothing else.")
    source = save(tmp_path, {"image": THREE_IMAGES, "question": [question] * 3, "answer": ["B", "A", "D"]},
                  {"image": datasets.Image(), "question": datasets.Value("string"), "answer": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "realworldqa", source)
    assert counts(stats) == {"original": 3, "kept": 2, "dropped": {"unreadable": 1}}  # 1200x900 resized
    assert list(manifest["answer"]) == ["B", "A"]
    assert manifest.iloc[0]["prompt"] == question  # verbatim: the official prompt (Appendix C)
    for image in manifest["image"]:
        with Image.open(tmp_path / "prepared" / image) as im:
            assert im.size == (1000, 1000)


def test_realworldqa_open_ended_question(tmp_path):
    # lmms-eval realworldqa/utils.py: the gold is a letter, or an open-ended word or number ("Downhill")
    question = "Is the road going uphill or downhill? Please answer directly with a single word or number."
    source = save(tmp_path, {"image": [GOOD], "question": [question], "answer": ["Downhill"]},
                  {"image": datasets.Image(), "question": datasets.Value("string"), "answer": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "realworldqa", source)
    assert stats["kept"] == 1 and manifest.iloc[0]["answer"] == "Downhill"
    assert list(manifest.iloc[0]["options"]) == [] and manifest.iloc[0]["prompt"] == question


# LogicVista's questions as Yijia-Xiao/LogicVista data/dataset.json writes them: no option lines;
# options inline, or drawn in the image with the letters named in the question
LOGICVISTA_IN_IMAGE = "What choice (A, B, C, or D) should be in place of the question mark that fits the pattern?"
LOGICVISTA_INLINE = ("In 1996, total output from all fuels was 200TWh. If output for Nuclear in 2006 was twice that for "
                     "Coal in 1996, what was the output for Nuclear in 2006? Select from A, B, C, and D. (A) 140TWh "
                     "(B) 400TWh (C) 64TWh (D) 96TWh")
LOGICVISTA_SPAN = ("Which option from A-E should replace the question mark to follow the pattern present above the "
                   "separating line? (select from A-E)")
LOGICVISTA_TWO = "Which choices in the image (A-D) belong to the green category?"
LOGICVISTA_DIGITS = "Which is the correct answer according to the image? Select from 1-5"


def logicvista_copy(tmp_path, images, questions, answers) -> dict:
    n = len(questions)
    return save(tmp_path, {"question": questions, "answer": answers, "reasoning": ["because"] * n,
                           "image": images, "skill": [["inductive"]] * n, "id": [f"v1_{i}" for i in range(n)]},
                {"question": datasets.Value("string"), "answer": datasets.Value("string"),
                 "reasoning": datasets.Value("string"), "image": datasets.Image(),
                 "skill": datasets.List(datasets.Value("string")), "id": datasets.Value("string")})


def test_logicvista_options_in_the_question_or_the_image(tmp_path):
    questions = [LOGICVISTA_IN_IMAGE, LOGICVISTA_INLINE, LOGICVISTA_SPAN, LOGICVISTA_DIGITS, LOGICVISTA_TWO, "",
                 LOGICVISTA_IN_IMAGE, LOGICVISTA_IN_IMAGE]
    answers = ["C", "B", "E", "3", "A, C", "", "A", "B"]
    source = logicvista_copy(tmp_path, [GOOD] * 6 + [LARGE, CORRUPT], questions, answers)
    stats, manifest = prepare(tmp_path, "logicvista", source)
    # "A, C": several correct letters, which a one-letter answer cannot score; the empty row is bad
    assert counts(stats) == {"original": 8, "kept": 4,
                             "dropped": {"not_applicable": 1, "bad_row": 1, "too_large": 1, "unreadable": 1}}
    assert list(manifest["answer"]) == ["C", "B", "E", "3"]
    assert [list(o) for o in manifest["options"]] == [["A", "B", "C", "D"], ["140TWh", "400TWh", "64TWh", "96TWh"],
                                                      ["A", "B", "C", "D", "E"], []]
    assert manifest.iloc[0]["prompt"] == LOGICVISTA_IN_IMAGE + "\n" + INSTRUCTION_4
    assert manifest.iloc[2]["prompt"].endswith("option letter (A, B, C, D, or E). Do not include any explanation or "
                                               "extra text.")
    assert manifest.iloc[3]["prompt"].startswith(LOGICVISTA_DIGITS + "\nAnswer the question with a single word")


def test_mathvision_options_or_free_form(tmp_path):
    source = save(tmp_path, {"id": ["1", "2", "3", "4"], "question": ["Which figure?", "How many?", "q", "q"],
                             "options": [["1", "2", "3", "4", "5"], [], [], []], "image": ["images/1.jpg"] * 4,
                             "decoded_image": [GOOD, GOOD, LARGE, CORRUPT], "answer": ["C", "7", "1", "1"]},
                  {"id": datasets.Value("string"), "question": datasets.Value("string"),
                   "options": datasets.List(datasets.Value("string")), "image": datasets.Value("string"),
                   "decoded_image": datasets.Image(), "answer": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mathvision", source)
    assert counts(stats) == {"original": 4, "kept": 2, "dropped": {"too_large": 1, "unreadable": 1}}
    assert list(manifest["answer"]) == ["C", "7"]
    assert "(A, B, C, D, or E)" in manifest.iloc[0]["prompt"]


def capture_entries(n: int) -> list[dict]:
    """real_metadata.json's entries as atinpothiraj/CAPTURe writes them (a JSON array)."""
    return [{"image_file": f"{1455 + i}.jpg", "log_prob": -9.472212e-05, "density_map_sum": 63.00000762939453 + i,
             "ground_truth": 63 + i, "object": "keyboard keys", "bbox": {"x": 11, "y": 33, "width": 106, "height": 42}}
            for i in range(n)]


CAPTURE_PROMPT = (  # TTRV Appendix C
    "Count the exact number of keyboard keys in the image. Assume the pattern of keyboard keys continues behind "
    "any black box. Provide the total number of keyboard keys as if the black box were not there.\nPlease reason "
    "step by step, and put your final answer within \\boxed{}.")


def test_capture_metadata_array_and_extracted_zip(tmp_path):
    # atinp/CAPTURe: real_metadata.json + real_dataset.zip extracted (its folder is dataset/)
    root = tmp_path / "capture"
    (root / "dataset").mkdir(parents=True)
    entries = capture_entries(4)
    for entry, blob in zip(entries, THREE_IMAGES):  # the fourth image is not there
        (root / "dataset" / entry["image_file"]).write_bytes(blob)
    (root / "real_metadata.json").write_text(json.dumps(entries, indent=4))
    (root / "synthetic_metadata.json").write_text(json.dumps([{"image_file": "x.png", "dot_shape": "circle"}]))
    stats, manifest = prepare(tmp_path, "capture", {"path": str(root)})
    # the fourth entry names a file that is not there: counted, not lost
    assert counts(stats) == {"original": 4, "kept": 1, "dropped": {"no_image": 1, "too_large": 1, "unreadable": 1}}
    assert manifest.iloc[0]["answer"] == "63"
    assert manifest.iloc[0]["prompt"] == CAPTURE_PROMPT


def test_capture_reads_the_zip_itself_or_the_renamed_folder(tmp_path):
    import zipfile

    root = tmp_path / "capture"
    root.mkdir()
    entries = capture_entries(3)
    with zipfile.ZipFile(root / "real_dataset.zip", "w") as archive:  # members dataset/<image_file>
        for entry, blob in zip(entries, THREE_IMAGES):
            archive.writestr(f"dataset/{entry['image_file']}", blob)
    (root / "real_metadata.json").write_text(json.dumps(entries))
    stats, manifest = prepare(tmp_path, "capture", {"path": str(root)})
    assert counts(stats) == STANDARD_DROPS and list(manifest["answer"]) == ["63"]
    renamed = tmp_path / "renamed"
    (renamed / "real_dataset").mkdir(parents=True)  # the authors' README renames dataset/ to real_dataset/
    (renamed / "real_dataset" / "1455.jpg").write_bytes(GOOD)
    (renamed / "real_metadata.json").write_text(json.dumps(entries[:1]))
    stats, manifest = prepare(tmp_path / "again", "capture", {"path": str(renamed)})
    assert stats["kept"] == 1 and manifest.iloc[0]["answer"] == "63"


# --- math (ECHO) ------------------------------------------------------------------------------

# ECHO's prompt suffix (user683/ECHO verl/examples/ttrl_echo/Qwen2.5/geometry3k.sh data.suffix_prompt)
SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."
EASYR1 = {"images": datasets.List(datasets.Image()), "problem": datasets.Value("string"),
          "answer": datasets.Value("string")}


@pytest.mark.parametrize("name", ["geometry3k", "geoqa"])
def test_training_sets_in_easyr1_layout_are_train_rows_kept_whole(tmp_path, name):
    # hiyouga/geometry3k, WaltonFuture/GEOQA_R1V_Train_8K: images (a list), problem with "<image>", answer
    source = save(tmp_path, {"images": [[GOOD], [LARGE], [CORRUPT]],
                             "problem": ["<image>Find x. Round to the nearest tenth.", "<image>Find y.", "<image>q"],
                             "answer": ["3.5", "\\frac{1}{2}", "1"]}, dict(EASYR1))
    stats, manifest = prepare(tmp_path, name, source)
    # no 1000x1000 limit for ECHO's sets: the 1200x900 image stays
    assert counts(stats) == {"original": 3, "kept": 2, "dropped": {"unreadable": 1}}
    assert stats["splits"] == {"train": 2}  # a training set: adaptation reads its rows
    assert list(manifest["answer"]) == ["3.5", "\\frac{1}{2}"]
    assert list(manifest.iloc[0]["options"]) == []
    assert manifest.iloc[0]["prompt"] == "Find x. Round to the nearest tenth." + SUFFIX  # the image goes first


def test_geoqa_r1v_original_layout_reads_too(tmp_path):
    # leonardPKU/GEOQA_R1V_Train_8K: image, problem, solution "<answer> 145° </answer>"
    source = save(tmp_path, {"image": [GOOD], "problem": ["As shown in the figure, find angle 1."],
                             "solution": ["<answer> 145° </answer>"]},
                  {"image": datasets.Image(), "problem": datasets.Value("string"), "solution": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "geoqa", source)
    assert stats["kept"] == 1 and manifest.iloc[0]["answer"] == "145°"


def test_mathvision_math_lists_the_choices_as_echo_writes_them(tmp_path):
    source = save(tmp_path, {"id": ["1", "2", "3"], "question": ["<image1>Which figure?", "How many?", "q"],
                             "options": [["1", "2", "3", "4", "5"], [], ["a", "b"]], "image": ["images/1.jpg"] * 3,
                             "decoded_image": [GOOD, GOOD, GOOD], "answer": ["C", "7", "F"]},
                  {"id": datasets.Value("string"), "question": datasets.Value("string"),
                   "options": datasets.List(datasets.Value("string")), "image": datasets.Value("string"),
                   "decoded_image": datasets.Image(), "answer": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mathvision-math", source)
    # "F" is no letter of 2 options: counted as a bad row
    assert counts(stats) == {"original": 3, "kept": 2, "dropped": {"bad_row": 1}}
    assert list(manifest["answer"]) == ["C", "7"]
    # save_as_json.py: "<image1>" dropped, "\n\nChoices:\nA.1\n..." (--choices_add_letters)
    assert manifest.iloc[0]["prompt"] == "Which figure?\n\nChoices:\nA.1\nB.2\nC.3\nD.4\nE.5" + SUFFIX
    assert manifest.iloc[1]["prompt"] == "How many?" + SUFFIX


def test_mathvista_math_answer_text_becomes_a_letter(tmp_path):
    question = "If AB = AO, what is the degree measure of angle ABO?"
    source = save(tmp_path, {"pid": ["1", "2"], "question": [question, "What is the value of x?"],
                             "decoded_image": [GOOD, GOOD], "choices": [["15", "30", "45"], None],
                             "answer": ["30", "3.5"]},
                  {"pid": datasets.Value("string"), "question": datasets.Value("string"),
                   "decoded_image": datasets.Image(), "choices": datasets.List(datasets.Value("string")),
                   "answer": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mathvista-math", source)
    assert stats["kept"] == 2 and list(manifest["answer"]) == ["B", "3.5"]
    assert manifest.iloc[0]["prompt"] == question + "\n\nChoices:\nA.15\nB.30\nC.45" + SUFFIX


def test_mathverse_math_reads_the_choices_of_the_question(tmp_path):
    source = save(tmp_path, {"sample_index": ["1", "2"], "question_for_eval": [MATHVERSE_Q, "Find the area."],
                             "image": [GOOD, GOOD], "answer": ["B", "12"]},
                  {"sample_index": datasets.Value("string"), "question_for_eval": datasets.Value("string"),
                   "image": datasets.Image(), "answer": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, "mathverse-math", source)
    assert stats["kept"] == 2 and list(manifest["answer"]) == ["B", "12"]
    assert list(manifest.iloc[0]["options"])[1] == "The turbine completes a single cycle in 35 seconds."
    assert manifest.iloc[0]["prompt"] == MATHVERSE_Q + SUFFIX  # the question lists them already
    assert list(manifest.iloc[1]["options"]) == []


def test_logicvista_math_keeps_several_letter_answers(tmp_path):
    source = logicvista_copy(tmp_path, [GOOD] * 3, [LOGICVISTA_TWO, LOGICVISTA_INLINE, LOGICVISTA_DIGITS],
                             ["C, A", "B", "3"])
    stats, manifest = prepare(tmp_path, "logicvista-math", source)
    assert stats["kept"] == 3 and list(manifest["answer"]) == ["A,C", "B", "3"]  # sorted, comma-joined
    assert manifest.iloc[0]["prompt"] == LOGICVISTA_TWO + SUFFIX  # the question names them already


def test_a_bad_math_row_names_the_file_the_sample_and_the_field(tmp_path, caplog):
    source = save(tmp_path, {"images": [[GOOD], [GOOD]], "problem": ["<image>Find x.", "<image>Find y."],
                             "answer": ["3", "  "]}, dict(EASYR1))
    with caplog.at_level("WARNING"):
        stats, _ = prepare(tmp_path, "geometry3k", source)
    assert counts(stats) == {"original": 2, "kept": 1, "dropped": {"bad_row": 1}}
    warning = next(r.getMessage() for r in caplog.records if "geometry3k-000001" in r.getMessage())
    assert source["path"] in warning and "row 1" in warning and "field 'answer' (column 'answer') is empty" in warning


def test_a_math_source_without_the_answer_column_names_the_config_key(tmp_path):
    source = save(tmp_path, {"images": [[GOOD]], "problem": ["<image>Find x."], "label": ["3"]},
                  {"images": datasets.List(datasets.Image()), "problem": datasets.Value("string"),
                   "label": datasets.Value("string")})
    with pytest.raises(DatasetSourceError, match=r"no column 'answer' for field 'answer'.*data\.sources\.geometry3k\.fields\.answer"):
        prepare(tmp_path, "geometry3k", source)


# --- grounding and counting (VR-TTRL) ---------------------------------------------------------

REFCOCO_ENTRIES = ["refcoco", "refcoco-testA", "refcoco+", "refcoco+-testA", "refcocog", "refcocog-train"]


@pytest.mark.parametrize("name", REFCOCO_ENTRIES)
def test_refcoco_boxes_and_masks_in_original_pixels(tmp_path, name):
    polygon = [10.0, 20.0, 40.0, 20.0, 40.0, 60.0, 10.0, 60.0]
    source = save(tmp_path, {
        "question_id": ["1", "2", "3"], "image": THREE_IMAGES,
        "question": ["Please carefully observe the area circled in the image and come up with a caption."] * 3,
        "answer": [["man on the left", "guy in red"], ["dog"], ["cat"]], "segmentation": [polygon] * 3,
        "bbox": [[10.0, 20.0, 30.0, 40.0]] * 3, "iscrowd": [0] * 3, "file_name": ["a.jpg"] * 3},
        {"question_id": datasets.Value("string"), "image": datasets.Image(), "question": datasets.Value("string"),
         "answer": datasets.List(datasets.Value("string")), "segmentation": datasets.List(datasets.Value("float32")),
         "bbox": datasets.List(datasets.Value("float32")), "iscrowd": datasets.Value("int8"),
         "file_name": datasets.Value("string")})
    stats, manifest = prepare(tmp_path, name, source)
    # one sample per referring expression: 2 + 1 + 1; the 1200 x 900 image kept (no size filter for VR-TTRL's sets)
    assert counts(stats) == {"original": 4, "kept": 3, "dropped": {"unreadable": 1}}
    assert list(manifest["query"]) == ["man on the left", "guy in red", "dog"]
    row = manifest.iloc[0]
    assert [list(b) for b in row["boxes"]] == [[10, 20, 40, 60]]  # COCO [x, y, w, h] -> [x1, y1, x2, y2]
    assert [list(p) for p in row["points"]] == [[25, 40]]
    assert (row["width"], row["height"]) == (64, 48)
    rle = json.loads(row["mask"])
    assert rle["size"] == [48, 64]
    mask = mask_utils.decode({"size": rle["size"], "counts": rle["counts"].encode()})
    ys, xs = np.nonzero(mask)
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (10, 39, 20, 47)  # clipped at the 48 px edge
    assert row["prompt"].startswith('Please find "man on the left" with bboxs and points.')
    # a training split's rows are adapted on (VR-TTRL Table 11), never evaluated
    assert set(manifest["split"]) == {"train" if name.endswith("-train") else "test"}


@pytest.mark.parametrize("name", ["reasonseg", "reasonseg-test", "reasonseg-train"])
def test_reasonseg_mask_gives_the_box(tmp_path, name):
    mask = np.zeros((48, 64), dtype=bool)
    mask[5:15, 3:13] = True
    source = save(tmp_path, {"image": THREE_IMAGES, "text": ["the thing you sit on"] * 3,
                             "mask": [mask.tolist(), np.pad(mask, ((0, 852), (0, 1136))).tolist(), mask.tolist()],
                             "image_id": ["a", "b", "c"], "ann_id": ["1", "2", "3"],
                             "img_height": [48, 900, 48], "img_width": [64, 1200, 64]},
                  {"image": datasets.Image(), "text": datasets.Value("string"),
                   "mask": datasets.List(datasets.List(datasets.Value("bool"))),
                   "image_id": datasets.Value("string"), "ann_id": datasets.Value("string"),
                   "img_height": datasets.Value("int64"), "img_width": datasets.Value("int64")})
    stats, manifest = prepare(tmp_path, name, source)
    assert counts(stats) == GROUNDING_DROPS
    row = manifest.iloc[0]
    assert [list(b) for b in row["boxes"]] == [[3, 5, 13, 15]]
    rle = json.loads(row["mask"])
    assert mask_utils.area({"size": rle["size"], "counts": rle["counts"].encode()}) == 100
    assert set(manifest["split"]) == {"train" if name == "reasonseg-train" else "test"}


@pytest.mark.parametrize("name", ["pixmo-count", "pixmo-count-test"])
def test_pixmo_count_points_and_count(tmp_path, name):
    # allenai/pixmo-count's card: points is `sequence: {x, y}`, which datasets loads as a dict of
    # lists; a local copy adds the downloaded `image`; the eval splits' rows may carry no points
    source = save(tmp_path, {"image_url": ["http://x/1.jpg"] * 4, "image_sha256": ["a", "b", "c", "d"],
                             "count": [3, 1, 2, 4],
                             "points": [{"x": [10.0, 20.0, 30.0], "y": [5.0, 5.0, 5.0]}, {"x": [1.0], "y": [1.0]},
                                        {"x": [1.0, 2.0], "y": [1.0, 2.0]}, None],
                             "label": ["dog", "cat", "cow", "hen"], "image": THREE_IMAGES + [GOOD]},
                  {"image_url": datasets.Value("string"), "image_sha256": datasets.Value("string"),
                   "count": datasets.Value("int32"),
                   "points": datasets.Sequence({"x": datasets.Value("float32"), "y": datasets.Value("float32")}),
                   "label": datasets.Value("string"), "image": datasets.Image()})
    assert datasets.load_from_disk(source["path"])[0]["points"] == {"x": [10.0, 20.0, 30.0], "y": [5.0, 5.0, 5.0]}
    stats, manifest = prepare(tmp_path, name, source)
    assert counts(stats) == {"original": 4, "kept": 3, "dropped": {"unreadable": 1}}  # no size filter
    assert (manifest.iloc[0]["query"], manifest.iloc[0]["count"]) == ("dog", 3)
    assert [list(p) for p in manifest.iloc[0]["points"]] == [[10, 5], [20, 5], [30, 5]]  # pixels, as given
    assert (manifest.iloc[2]["query"], manifest.iloc[2]["count"], list(manifest.iloc[2]["points"])) == ("hen", 4, [])


def test_countbench_query_is_the_counted_noun(tmp_path):
    source = save(tmp_path, {"image": THREE_IMAGES, "text": ["Two dogs on a sofa"] * 3,
                             "question": ["How many dogs are in the image?"] * 3, "number": [2, 3, 4]},
                  {"image": datasets.Image(), "text": datasets.Value("string"), "question": datasets.Value("string"),
                   "number": datasets.Value("int64")})
    stats, manifest = prepare(tmp_path, "countbench", source)
    assert counts(stats) == GROUNDING_DROPS
    assert (manifest.iloc[0]["query"], manifest.iloc[0]["count"]) == ("dogs", 2)


# --- every entry is covered; offline and bad-input behaviour ---------------------------------

def test_the_scenes_training_split_is_its_600_scenes(tmp_path):
    """demo-digit-scenes-train (VR-TTRL Table 11's training split in config/cpu-methods.yaml): the scenes'
    manifest with its 600 train scenes (readers.bundled.SCENES_PER_SPLIT) beside the 120 test ones, each with a query."""
    from ttrl_bench.datasets.prepare import load_manifest

    prepare_dataset("demo-digit-scenes-train", tmp_path / "scenes-train", seed=0)
    manifest = load_manifest(tmp_path / "scenes-train")
    assert manifest["split"].value_counts().to_dict() == {"train": 600, "test": 120}
    assert len(load_manifest(tmp_path / "scenes-train", "train")) == 600 and manifest["prompt"].str.len().min() > 0


def test_every_registry_entry_has_a_fixture_test():
    """The rule, not a hand-kept list: every entry's name is quoted in a test module that prepares datasets from
    fixtures (calls `prepare(` or `prepare_dataset(`), so a new entry fails here until a test builds one in its
    layout (docs/extending.md, step 5)."""
    modules = [path.read_text() for path in Path(__file__).parents[1].rglob("*.py")]  # every test module; conftest.py builds the demo sets
    preparing = [text for text in modules if re.search(r"\bprepare(_dataset)?\(", text)]
    missing = [name for name in REGISTRY if not any(f'"{name}"' in text or f"'{name}'" in text for text in preparing)]
    assert missing == []


def test_offline_without_a_local_copy_names_the_hub_id_and_config_key(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "hub_reachable", lambda timeout=3.0: False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(DatasetSourceError, match=r"lmms-lab-encoder/MME.*`data\.sources\.mme\.path`"):
        prepare(tmp_path, "mme", None)
    with pytest.raises(DatasetSourceError, match=r"no Hub copy.*data\.sources\.imagenet\.path"):
        prepare(tmp_path, "imagenet", None)


def test_missing_local_copy_and_missing_column_are_named(tmp_path):
    with pytest.raises(DatasetSourceError, match=r"does not exist"):
        prepare(tmp_path, "ai2d", {"path": str(tmp_path / "nowhere")})
    source = save(tmp_path, {"image": [GOOD], "question": ["q"], "answer": ["Yes"], "category": ["OCR"]},
                  {"image": datasets.Image(), "question": datasets.Value("string"), "answer": datasets.Value("string"),
                   "category": datasets.Value("string")})
    with pytest.raises(DatasetSourceError, match=r"no column 'options' for field 'options'.*data\.sources\.ai2d\.fields\.options"):
        prepare(tmp_path, "ai2d", source)
    # the same copy works once the field is mapped... to a column that is there
    stats, _ = prepare(tmp_path, "mme", source)
    assert stats["kept"] == 1


def test_a_row_with_a_bad_answer_is_counted_not_fatal(tmp_path):
    source = save(tmp_path, {"image": [GOOD, GOOD], "question": ["q", "q"], "answer": ["Yes", "Maybe"],
                             "category": ["OCR", "OCR"]},
                  {"image": datasets.Image(), "question": datasets.Value("string"), "answer": datasets.Value("string"),
                   "category": datasets.Value("string")})
    stats, _ = prepare(tmp_path, "mme", source)
    assert counts(stats) == {"original": 2, "kept": 1, "dropped": {"bad_row": 1}}


def test_preparing_twice_gives_identical_bytes(tmp_path):
    source = webdataset_copy(tmp_path, "webp")
    prepare_dataset("dtd", tmp_path / "a", 0, source=source)
    prepare_dataset("dtd", tmp_path / "b", 0, source=source)
    prepare_dataset("dtd", tmp_path / "a", 0, source=source)  # again, over the first
    for name in ("manifest.parquet", "prep_stats.json", "images/dtd-000000.img"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_a_digit_answer_is_read_by_the_sources_answer_format():
    numeric = ["1", "2", "3", "4"]
    assert rows._letter_answer("1", numeric, "text") == "A"  # MathVista: the option itself
    assert rows._letter_answer("1", numeric, "index") == "B"  # AI2D: an index into the options
    assert rows._letter_answer("(C)", numeric, "letter") == "C"
    with pytest.raises(ValueError, match="not a valid letter"):
        rows._letter_answer("1", numeric, "letter")


def bomb_png(side=20000) -> bytes:
    """A valid side x side 1-bit black PNG (about 50 KB): 400M pixels, over PIL's bomb limit of
    2 x Image.MAX_IMAGE_PIXELS, so Image.open refuses it before reading a pixel."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    compressor, row = zlib.compressobj(9), b"\x00" * (1 + side // 8)  # filter byte + packed pixels
    body = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)  # 1 bit, greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def truncated_jpeg() -> bytes:
    """A 64x48 JPEG cut inside its scan data: the header (and so the size) reads fine, the pixels do not."""
    buffer = io.BytesIO()
    Image.effect_noise((64, 48), 64).convert("RGB").save(buffer, format="JPEG", quality=95)
    blob = buffer.getvalue()
    return blob[: len(blob) // 2]


def test_truncated_jpeg_and_decompression_bomb_are_counted_not_fatal(tmp_path):
    bomb, cut = bomb_png(), truncated_jpeg()
    with Image.open(io.BytesIO(cut)) as im:
        assert im.size == (64, 48)  # what the header-only resolution filter sees
    mme = {"question": datasets.Value("string"), "answer": datasets.Value("string"),
           "category": datasets.Value("string"), "image": datasets.Image()}
    source = save(tmp_path, {"image": [GOOD, cut, bomb], "question": ["q"] * 3, "answer": ["Yes"] * 3,
                             "category": ["OCR"] * 3}, mme)
    stats, manifest = prepare(tmp_path, "mme", source)
    assert counts(stats) == {"original": 3, "kept": 1, "dropped": {"too_large": 1, "unreadable": 1}}
    assert list(manifest["id"]) == ["mme-000000"]


def test_decompression_bomb_in_a_grounding_source_is_too_large(tmp_path):
    # the grounding readers read the image size before the filter does
    polygon = [10.0, 20.0, 40.0, 20.0, 40.0, 60.0, 10.0, 60.0]
    source = save(tmp_path, {"image": [GOOD, bomb_png(), truncated_jpeg()], "answer": [["dog"], ["cat"], ["cow"]],
                             "segmentation": [polygon] * 3, "bbox": [[10.0, 20.0, 30.0, 40.0]] * 3},
                  {"image": datasets.Image(), "answer": datasets.List(datasets.Value("string")),
                   "segmentation": datasets.List(datasets.Value("float32")),
                   "bbox": datasets.List(datasets.Value("float32"))})
    stats, manifest = prepare(tmp_path, "refcoco", source)
    assert counts(stats) == {"original": 3, "kept": 1, "dropped": {"too_large": 1, "unreadable": 1}}
    assert list(manifest["query"]) == ["dog"]


def test_every_registry_entry_names_the_evidence_for_its_layout():
    """Issue 33: where each layout was read (docs/dataset-evidence.md has the long form)."""
    assert [name for name, spec in REGISTRY.items() if len(spec.evidence) < 20] == []
