"""The TTRV authors' own items (Akshit21112002/TTRV @b9cf778, verl/data): shipped as they wrote them,
prepared into manifests from copies in the datasets' real layouts, and their adaptation lists used as is.

Expected values are read from the authors' files (their first items, quoted below) or counted by hand."""

from __future__ import annotations

import io
import json
import logging
import lzma
from pathlib import Path

import datasets
import pandas as pd
import pytest
from PIL import Image

from ttrl_bench.cli.common import adaptation_samples as _adaptation_samples
from ttrl_bench.datasets import authors_items
from ttrl_bench.datasets.authors_items import AuthorsItemsError, item_options, item_text
from ttrl_bench.datasets.prepare import prepare_dataset


def jpeg(color=(120, 60, 30), size=(8, 8)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="JPEG")
    return buffer.getvalue()


def official_copy(root, dataset: str, lists=("test", "adapt-20", "adapt-500")) -> set[str]:
    """A local copy in the dataset's official layout holding every image the authors' lists name."""
    tail = authors_items.LOCATORS[dataset].tail
    names = {authors_items.path_tail(item["image_path"], tail)
             for name in lists for item in authors_items.load_list(dataset, name)}
    blob = jpeg()
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(blob)
    return names


def test_git_blob_ids_worked_by_hand():
    # `printf 'hello\n' | git hash-object --stdin` and git's empty blob
    assert authors_items.git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert authors_items.git_blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def test_every_shipped_list_is_the_authors_file_and_the_four_large_ones_are_named():
    sizes = {}
    for dataset, block in authors_items.INDEX["datasets"].items():
        for name, entry in block["lists"].items():
            if "file" in entry:  # load_list checks the git blob id of the pinned commit's file
                sizes[dataset, name] = len(authors_items.load_list(dataset, name))
    # counts in the authors' files (TTRV issue text: DTD 5,640, RESISC45 4,500, MathVista 490, MathVerse 1,699)
    assert sizes["dtd", "test"] == 5640 and sizes["resisc45", "test"] == 4500
    assert sizes["mathvista", "test"] == 490 and sizes["mathverse", "test"] == 1699
    assert sizes["ai2d", "adapt-20"] == sizes["imagenet-a", "adapt-20"] == 20
    assert sizes["dtd", "adapt-500"] == 470 and sizes["imagenet-a", "adapt-single"] == 4
    unshipped = {d for d, block in authors_items.INDEX["datasets"].items() if "file" not in block["lists"]["test"]}
    assert unshipped == {"imagenet", "imagenet-r", "imagenet-sketch", "imagenet-v2"}
    assert (authors_items.DATA_DIR / "LICENSE").read_text().startswith("MIT License")


def test_a_changed_list_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TTRL_BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = authors_items.list_path("imagenet-r", "test")
    with pytest.raises(AuthorsItemsError, match=r"verl/data/imagenet_r_20/test.json.*ttrl-bench fetch CONFIG"):
        authors_items.load_list("imagenet-r", "test")
    path.parent.mkdir(parents=True)
    path.write_text("[]")
    with pytest.raises(AuthorsItemsError, match="3be8c5207f284b5135c0b601fab89ab824ea7f20"):
        authors_items.load_list("imagenet-r", "test")


def test_options_and_text_of_the_authors_prompts():
    dtd = authors_items.load_list("dtd", "test")[0]  # id "0", dtd/images/bumpy/bumpy_0092.jpg, answer C
    assert item_options(dtd["prompt"]) == ["polka-dotted", "knitted", "bumpy", "woven"]
    assert item_text(dtd["prompt"]).startswith("Look at the given image and identify what texture it shows.")
    mme = authors_items.load_list("mme", "test")[0]  # "Options:\nA. No \nB. Yes."
    assert item_options(mme["prompt"]) == ["No", "Yes"]
    mathvista = authors_items.load_list("mathvista", "test")[0]  # "(A) 135°" ... "(D) 150°"
    assert item_options(mathvista["prompt"]) == ["135°", "140°", "145°", "150°"]
    mathverse = authors_items.load_list("mathverse", "test")[0]  # "A:40°" ... "D:140°"
    assert item_options(mathverse["prompt"]) == ["40°", "60°", "120°", "140°"]


@pytest.fixture(scope="module")
def dtd_prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("dtd")
    official_copy(root / "dtd", "dtd")
    out = root / "prepared"
    stats = prepare_dataset("dtd", out, seed=0, source={"path": str(root / "dtd")}, items="authors")
    return root, out, stats, pd.read_parquet(out / "manifest.parquet")


def test_dtd_from_its_official_layout_is_the_authors_5640_items(dtd_prepared):
    _, out, stats, manifest = dtd_prepared
    test = manifest[manifest["split"] == "test"]
    assert stats["items"] == "ttrv-authors" and stats["kept"] == 5640
    assert stats["splits"] == {"adapt-20": 20, "adapt-500": 470, "test": 5640}
    authors = authors_items.load_list("dtd", "test")
    assert list(test["item_id"]) == [str(item["id"]) for item in authors]
    assert list(test["authors_prompt"]) == [item["prompt"] for item in authors]
    assert list(test["answer"]) == [item["answer"] for item in authors]
    first = test.iloc[0]
    assert (first["id"], first["source_id"], first["answer"], first["label"]) == (
        "dtd-0", "dtd/images/bumpy/bumpy_0092.jpg", "C", "bumpy")
    assert list(first["options"]) == ["polka-dotted", "knitted", "bumpy", "woven"]
    assert (out / first["image"]).read_bytes() == jpeg()


def test_the_20_adaptation_samples_are_the_authors_train_json_for_every_seed(dtd_prepared):
    _, out, _, _ = dtd_prepared
    train = authors_items.load_list("dtd", "adapt-20")  # first: id "120", flecked_0099.jpg, answer B
    for seed in (0, 3):
        samples = _adaptation_samples(out, 20, seed, "random")
        assert list(samples["item_id"]) == [str(item["id"]) for item in train]
        assert list(samples["authors_prompt"]) == [item["prompt"] for item in train]
    assert samples.iloc[0]["source_id"] == "dtd/images/flecked/flecked_0099.jpg" and samples.iloc[0]["answer"] == "B"
    assert len(_adaptation_samples(out, 500, 0, "random")) == 470  # their "500" list of DTD holds 470


def test_a_run_the_authors_shipped_no_list_for_draws_from_their_test_items(dtd_prepared, caplog):
    _, out, _, manifest = dtd_prepared
    with caplog.at_level(logging.WARNING):
        samples = _adaptation_samples(out, 1, 0, "random")
    assert "ship no list of 1 adaptation samples" in caplog.text and "seeded draw" in caplog.text
    assert len(samples) == 1 and samples.iloc[0]["split"] == "test"


def test_a_missing_image_stops_preparation_naming_the_items_and_the_count(tmp_path):
    root = tmp_path / "dtd"
    official_copy(root, "dtd")
    (root / "images/bumpy/bumpy_0092.jpg").unlink()  # test item "0"; no adaptation list uses it
    with pytest.raises(AuthorsItemsError) as err:
        prepare_dataset("dtd", tmp_path / "out", 0, source={"path": str(root)}, items="authors")
    message = str(err.value)
    assert "1 of the TTRV authors' 6130 items have no image" in message  # 5,640 + 20 + 470
    assert "test item 0: dtd/images/bumpy/bumpy_0092.jpg" in message
    assert not (tmp_path / "out" / "manifest.parquet").exists()


def test_without_a_local_copy_the_official_layout_and_the_config_key_are_named(tmp_path):
    with pytest.raises(AuthorsItemsError, match=r"images/<class>/<class>_<nnnn>.jpg.*data.sources.dtd.path"):
        prepare_dataset("dtd", tmp_path / "out", 0, items="authors")


def test_imagenet_a_lists_20_biased_and_single(tmp_path):
    root = tmp_path / "imagenet-a"
    official_copy(root, "imagenet-a", ("test", "adapt-20", "adapt-500", "adapt-biased-20", "adapt-single"))
    out = tmp_path / "prepared"
    stats = prepare_dataset("imagenet-a", out, 0, source={"path": str(root)}, items="authors")
    assert stats["kept"] == 7467
    samples = _adaptation_samples(out, 20, 0, "random")
    assert list(samples["item_id"]) == [str(i["id"]) for i in authors_items.load_list("imagenet-a", "adapt-20")]
    # train item "0": koala (n01882714) as C of accordion / shovel / koala / toaster
    assert (samples.iloc[0]["label"], list(samples.iloc[0]["options"])) == ("koala", ["accordion", "shovel", "koala", "toaster"])
    biased = _adaptation_samples(out, 20, 0, "biased-4")  # 4 classes x 5 images
    assert biased["source_id"].str.split("/").str[1].value_counts().to_dict() == {
        "n02787622": 5, "n07760859": 5, "n02233338": 5, "n02672831": 5}
    single = _adaptation_samples(out, 1, 0, "random")  # their file repeats item "1" four times
    assert list(single["item_id"]) == ["1"] and single.iloc[0]["label"] == "banjo"


MATHVISTA_FEATURES = datasets.Features({
    "pid": datasets.Value("string"), "question": datasets.Value("string"), "image": datasets.Value("string"),
    "decoded_image": datasets.Image(), "choices": datasets.List(datasets.Value("string")),
    "unit": datasets.Value("string"), "precision": datasets.Value("float64"), "answer": datasets.Value("string"),
    "question_type": datasets.Value("string"), "answer_type": datasets.Value("string"),
    "metadata": {"category": datasets.Value("string"), "context": datasets.Value("string"),
                 "grade": datasets.Value("string"), "img_height": datasets.Value("int64"),
                 "img_width": datasets.Value("int64"), "language": datasets.Value("string"),
                 "skills": datasets.List(datasets.Value("string")), "source": datasets.Value("string"),
                 "split": datasets.Value("string"), "task": datasets.Value("string")},
    "query": datasets.Value("string"),
})


def test_mathvista_from_the_hub_layout_finds_the_490_items_by_their_image(tmp_path):
    """AI4Math/MathVista testmini (card at d32e834; lmms-eval tasks/mathvista/utils.py reads `decoded_image`):
    1,000 rows, pid "1".."1000", `image` "images/<pid>.jpg", the picture in `decoded_image`, `metadata` a struct.
    The authors' 490 items are multiple choice: their rows hold the choices and the answer as option text
    (from the item's prompt and letter); the other rows are free-form, choices None. Each row's picture here
    is coloured by its pid so the match can be checked."""
    pids = [str(p) for p in range(1, 1001)]
    theirs = {Path(item["image_path"]).stem: item for item in authors_items.load_list("mathvista", "test")}
    choices = [item_options(theirs[p]["prompt"]) if p in theirs else None for p in pids]
    answers = [c["ABCDEF".index(theirs[p]["answer"])] if c else "1" for p, c in zip(pids, choices)]
    metadata = {"category": "math-targeted-vqa", "context": "geometry diagram", "grade": "high school",
                "img_height": 8, "img_width": 8, "language": "english", "skills": ["geometry reasoning"],
                "source": "GeoQA+", "split": "testmini", "task": "geometry problem solving"}
    rows = {"pid": pids, "question": [f"question {p}" for p in pids], "image": [f"images/{p}.jpg" for p in pids],
            "decoded_image": [{"bytes": jpeg((int(p) % 256, int(p) // 256, 0)), "path": None} for p in pids],
            "choices": choices, "unit": [None] * 1000, "precision": [None] * 1000, "answer": answers,
            "question_type": ["multi_choice" if c else "free_form" for c in choices],
            "answer_type": ["text" if c else "integer" for c in choices], "metadata": [metadata] * 1000,
            "query": [""] * 1000}
    path = tmp_path / "mathvista"
    datasets.Dataset.from_dict(rows, features=MATHVISTA_FEATURES).save_to_disk(str(path))
    out = tmp_path / "prepared"
    stats = prepare_dataset("mathvista", out, 0, source={"path": str(path)}, items="authors")
    assert stats["kept"] == 490 and stats["splits"]["adapt-20"] == 20
    manifest = pd.read_parquet(out / "manifest.parquet")
    first = manifest.iloc[0]  # item "0": mathvista/data/images/3.jpg, answer C of (A) 135° ... (D) 150°
    assert (first["source_id"], first["answer"], first["label"]) == ("mathvista/data/images/3.jpg", "C", "145°")
    assert (out / first["image"]).read_bytes() == jpeg((3, 0, 0))
    last = manifest[manifest["split"] == "test"].iloc[-1]  # the authors' last test item: images/998.jpg
    assert (out / last["image"]).read_bytes() == jpeg((998 % 256, 998 // 256, 0))


def test_ai2d_items_find_their_rows_by_question_and_options(tmp_path):
    """lmms-lab/ai2d's layout (question, options, answer as an index string, image); the authors renamed
    the files (images_1/image_0.jpg), so the row is the one whose question and options the item has."""
    items = {item["image_path"]: item for name in ("test", "adapt-20", "adapt-500")
             for item in authors_items.load_list("ai2d", name)}
    rows = {"question": [], "options": [], "answer": [], "image": []}
    for index, item in enumerate(items.values()):
        question = item["prompt"].split("<image> \n", 1)[1].split("\nChoose the correct answer", 1)[0]
        options = item_options(item["prompt"])
        rows["question"].append(question)
        rows["options"].append(options)
        rows["answer"].append(str("ABCD".index(item["answer"])))
        rows["image"].append({"bytes": jpeg((index % 256, index // 256, 7)), "path": None})
    path = tmp_path / "ai2d"
    features = datasets.Features({"question": datasets.Value("string"), "options": datasets.List(datasets.Value("string")),
                                  "answer": datasets.Value("string"), "image": datasets.Image()})
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(path))
    out = tmp_path / "prepared"
    prepare_dataset("ai2d", out, 0, source={"path": str(path)}, items="authors")
    samples = _adaptation_samples(out, 20, 0, "random")
    train = authors_items.load_list("ai2d", "adapt-20")  # first: id "1211", images_1/image_1360.jpg
    assert list(samples["item_id"]) == [str(i["id"]) for i in train]
    row = list(items).index(train[0]["image_path"])
    assert (out / samples.iloc[0]["image"]).read_bytes() == jpeg((row % 256, row // 256, 7))


def test_shipped_lists_are_xz_of_the_authors_bytes():
    entry = authors_items.INDEX["datasets"]["mathvista"]["lists"]["test"]
    data = lzma.decompress((authors_items.DATA_DIR / entry["file"]).read_bytes())
    assert authors_items.git_blob_id(data) == entry["git_blob"] and len(json.loads(data)) == 490


class _Response(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_fetch_keeps_a_large_list_only_when_its_git_blob_id_matches(tmp_path, monkeypatch):
    import urllib.request

    monkeypatch.setenv("TTRL_BENCH_CACHE", str(tmp_path))
    urls = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: urls.append(url) or _Response(b"[]"))
    with pytest.raises(AuthorsItemsError, match="nothing was kept"):
        authors_items.fetch_list("imagenet-r")
    assert urls == ["https://raw.githubusercontent.com/Akshit21112002/TTRV/b9cf778a998d06604ab7c613b01fdf8d65e53964/"
                    "verl/data/imagenet_r_20/test.json"]
    assert not authors_items.list_path("imagenet-r", "test").exists()
    entry = authors_items.INDEX["datasets"]["imagenet-r"]["lists"]["test"]
    monkeypatch.setitem(entry, "git_blob", authors_items.git_blob_id(b"[]"))  # a stand-in for the real file
    assert authors_items.fetch_list("imagenet-r") == authors_items.list_path("imagenet-r", "test")
    assert authors_items.load_list("imagenet-r", "test") == []


def test_the_preflight_names_the_unfetched_lists_and_the_local_copies_the_authors_items_need(tmp_path, monkeypatch):
    from ttrl_bench.plan.preflight import needs

    monkeypatch.setenv("TTRL_BENCH_CACHE", str(tmp_path))
    config = {"data": {"items": "authors", "sources": {"dtd": {"path": str(tmp_path)}}}, "models": {}}
    wanted, problems = needs(config, [], ["imagenet-r", "dtd", "mathvista", "food101"], tmp_path / "results")
    assert [(n.kind, n.name) for n in wanted] == [("items", "imagenet-r"), ("dataset", "mathvista"), ("dataset", "food101")]
    assert len(problems) == 2 and "`data.sources.imagenet-r.path` is not set" in problems[0]
    assert "<wnid>/<file>.jpg (imagenet-r.tar: folder imagenet-r/)" in problems[0]
    # dtd's copy is empty: every one of the 5,640 distinct images its shipped lists name is missing
    assert problems[1].startswith(f"config key `data.sources.dtd.path`: 5640 of the 5640 images the TTRV authors' "
                                  f"dtd items need are not in {tmp_path}")
    ours = needs({**config, "data": {"items": "ours", "sources": {}}}, [], ["imagenet-r", "dtd"], tmp_path / "results")
    assert [n.repo for n in ours[0]] == ["clip-benchmark/wds_imagenet-r", "clip-benchmark/wds_vtab-dtd"] and not ours[1]


def test_mme_items_find_their_image_by_question_id(tmp_path):
    """lmms-lab(-encoder)/MME's layout (lmms-eval tasks/mme/utils.py): question_id "<category>/<file>", shared by
    an image's two questions, image, question, answer Yes/No, category. Their path MME/images/<question_id>."""
    items = [item for name in ("test", "adapt-20", "adapt-500") for item in authors_items.load_list("mme", name)]
    ids = sorted({authors_items.path_tail(item["image_path"], 2) for item in items})
    rows = {"question_id": [q for q in ids for _ in range(2)], "question": ["Is it? Please answer yes or no."] * 2 * len(ids),
            "answer": ["Yes", "No"] * len(ids), "category": [q.split("/")[0] for q in ids for _ in range(2)],
            "image": [{"bytes": jpeg((i % 256, i // 256, 9)), "path": None} for i in range(len(ids)) for _ in range(2)]}
    path = tmp_path / "mme"
    datasets.Dataset.from_dict(rows, features=datasets.Features({
        "question_id": datasets.Value("string"), "question": datasets.Value("string"), "answer": datasets.Value("string"),
        "category": datasets.Value("string"), "image": datasets.Image()})).save_to_disk(str(path))
    out = tmp_path / "prepared"
    assert prepare_dataset("mme", out, 0, source={"path": str(path)}, items="authors")["kept"] == 1576
    first = pd.read_parquet(out / "manifest.parquet").iloc[0]  # item 0: code_reasoning/0020.png, "A. No / B. Yes."
    assert (first["category"], first["answer"], list(first["options"])) == ("code_reasoning", "B", ["No", "Yes"])
    index = ids.index("code_reasoning/0020.png")
    assert (out / first["image"]).read_bytes() == jpeg((index % 256, index // 256, 9))


def realworldqa_colour(n: int) -> tuple[int, int, int]:
    return (n * 67) % 256, (n * 151) % 256, 5  # row 0 (0, 0, 5), row 1 (67, 151, 5): told apart after JPEG


def realworldqa_copy(tmp_path, questions: list[str]) -> dict:
    """lmms-lab(-encoder)/RealWorldQA's layout: 765 rows of image, question, answer."""
    path = tmp_path / "realworldqa"
    datasets.Dataset.from_dict(
        {"image": [{"bytes": jpeg(realworldqa_colour(n)), "path": None} for n in range(765)], "question": questions,
         "answer": ["A"] * 765},
        features=datasets.Features({"image": datasets.Image(), "question": datasets.Value("string"),
                                    "answer": datasets.Value("string")})).save_to_disk(str(path))
    return {"path": str(path)}


def test_realworldqa_items_are_rows_by_file_number_their_questions_checked(tmp_path):
    """Their images/<n>.png is row n of 765, each prompt "<image> \\n" + that row's question; a copy in
    another row order stops preparation naming the item (resized to 1000 x 1000, TTRV Appendix B)."""
    by_row = {int(Path(i["image_path"]).stem): i["prompt"].split("<image> \n", 1)[1]
              for i in authors_items.load_list("realworldqa", "test")}
    questions = [by_row[n] for n in range(765)]
    out = tmp_path / "prepared"
    assert prepare_dataset("realworldqa", out, 0, source=realworldqa_copy(tmp_path, questions), items="authors")["kept"] == 765
    first = pd.read_parquet(out / "manifest.parquet").iloc[0]  # item 0: images/0.png, "In which direction ..."
    with Image.open(out / first["image"]) as image:
        pixel = image.convert("RGB").getpixel((500, 500))
    assert image.size == (1000, 1000) and max(abs(a - b) for a, b in zip(pixel, realworldqa_colour(0))) <= 8
    shuffled = tmp_path / "shuffled"
    shuffled.mkdir()
    with pytest.raises(AuthorsItemsError, match=r"is row 0 by its file name, but that row's question"):
        prepare_dataset("realworldqa", tmp_path / "out2", 0, source=realworldqa_copy(shuffled, questions[1:] + questions[:1]),
                        items="authors")


def test_seed_bench_items_find_their_image_by_data_id(tmp_path):
    """lmms-lab(-encoder)/SEED-Bench's layout (lmms-eval tasks/seedbench/utils.py): data_id (the release's bare
    file name, "1454426_2591111986"; the authors' path adds ".jpeg"), question, choice_a..d, answer letter,
    data_type, image a list (the first is the question's). Their list asks some different images the same
    question with the same options (items 3771 and another: rows 67 and 818 here), so only data_id tells
    them apart. A video row is never an image of theirs."""
    items = {i["image_path"]: i for name in ("test", "adapt-20", "adapt-500")
             for i in authors_items.load_list("seed-bench", name)}
    columns = ("data_id", "question", "choice_a", "choice_b", "choice_c", "choice_d", "answer", "data_type", "image")
    rows = {k: [] for k in columns}
    for index, item in enumerate([*items.values(), None]):
        video = item is None
        item = item or next(iter(items.values()))
        options = item_options(item["prompt"])
        for key, option in zip(("choice_a", "choice_b", "choice_c", "choice_d"), options):
            rows[key].append(option)
        rows["data_id"].append("v_0001.mp4" if video else Path(item["image_path"]).stem)
        rows["question"].append(item["prompt"].split("<image> \n", 1)[1].split("\nChoose the correct answer", 1)[0])
        rows["answer"].append(item["answer"])
        rows["data_type"].append("video" if video else "image")
        rows["image"].append([{"bytes": jpeg((255, 255, 255) if video else (index % 256, index // 256, 3)), "path": None}])
    path = tmp_path / "seed"
    datasets.Dataset.from_dict(rows, features=datasets.Features(
        {**{k: datasets.Value("string") for k in columns[:-1]}, "image": datasets.List(datasets.Image())})
    ).save_to_disk(str(path))
    out = tmp_path / "prepared"
    assert prepare_dataset("seed-bench", out, 0, source={"path": str(path)}, items="authors")["kept"] == 3881
    manifest = pd.read_parquet(out / "manifest.parquet")
    for image_path in ("seed/SEED-Bench-image/385985_2787485096.jpeg",  # item 0: the fishing rod
                       "seed/SEED-Bench-image/109627_2224685155.jpeg"):  # item 3771
        index = list(items).index(authors_items.AUTHORS_ROOT + image_path)
        image = manifest.loc[manifest["source_id"] == image_path, "image"].iloc[0]
        assert (out / image).read_bytes() == jpeg((index % 256, index // 256, 3))
