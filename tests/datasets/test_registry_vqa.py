"""The VQA entries of datasets/registry.py (MME, SEED-Bench, AI2D, CRPE, MathVista, MathVerse, RealWorldQA,
LogicVista, MathVision, CAPTURe). Every registry entry through its real loader: a tiny fixture with the source's columns and
types (a save_to_disk dataset, webdataset shards, an image folder, or JSON lines + files) is
prepared with `prepare_dataset` and checked against counts and prompts worked out by hand.

Fixture rows follow one pattern unless a test says otherwise: a good 64x48 image, a 1200x900
image (too large for TTRV's 1000x1000 limit) and bytes that are no image (unreadable)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import datasets
import pytest
from PIL import Image

from ttrl_bench.datasets.sources import DatasetSourceError

from tests.support.datasets import CORRUPT, GOOD, LARGE, STANDARD_DROPS, THREE_IMAGES, counts, prepare, save
from tests.support.datasets import LOGICVISTA_DIGITS, LOGICVISTA_INLINE, LOGICVISTA_IN_IMAGE, LOGICVISTA_SPAN, LOGICVISTA_TWO, MATHVERSE_Q, logicvista_copy


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
