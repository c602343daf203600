"""The `authors` protocol's evaluation side (issue 34): the TTRV authors' InternVL chat template, their
answer parser and grading, verl's mean@n, and the rescoring of stored generations under both parsers.

Expected values come from the authors' AI2D InternVL3-2B log (tests/data/ttrv_ai2d_log_excerpt.json: three
logged [prompt] / [response] blocks, Ray's prefixes stripped) and from their item lists, or are worked by hand."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from PIL import Image

from ttrl_bench.datasets import authors_items
from ttrl_bench.evaluation.extraction import authors_answer, authors_correct
from ttrl_bench.evaluation.metrics import verl_mean_at
from ttrl_bench.evaluation.tasks import MCQTask, rescored_metrics
from ttrl_bench.generation.hf import chat_prompt
from ttrl_bench.models.families import chat_template, family, use_chat_template
from ttrl_bench.models.tiny import train_tokenizer
from ttrl_bench.plan import load_config
from ttrl_bench.plan.protocols import SETTINGS, apply_protocol

LOG = json.loads((Path(__file__).parent / "data" / "ttrv_ai2d_log_excerpt.json").read_text())
IMAGE_RUN = re.compile(r"(<IMG_CONTEXT>)+")


def collapse(text: str) -> str:
    """Each run of image tokens as one marker, its length left out (it depends on the picture's tiles)."""
    return IMAGE_RUN.sub("<IMG_CONTEXT xN>", text)


def ai2d_item(item_id: str) -> dict:
    return next(item for item in authors_items.load_list("ai2d", "test") if str(item["id"]) == item_id)


@pytest.fixture(scope="module")
def internvl_processor():
    """A tiny InternVL (-hf) processor: its own BPE tokenizer over the log's text, the family's tiling."""
    corpus = [sample["prompt"] for sample in LOG["samples"]] * 4
    tokenizer = train_tokenizer(corpus, "internvl", vocab_size=400)
    return family("internvl").processor(tokenizer, chat_template(family("internvl").image_part), 56)


def test_the_authors_template_renders_the_logged_ai2d_prompt_byte_for_byte(internvl_processor):
    sample = LOG["samples"][0]  # item "0": "which of these define dairy item"
    items = pd.DataFrame([{"prompt": "ours", "authors_prompt": ai2d_item(sample["item_id"])["prompt"]}])
    text = authors_items.authors_texts(items)[0]
    assert use_chat_template(internvl_processor, SimpleNamespace(model_type="internvl"), "authors") == (
        "the TTRV authors' internvl template")
    rendered = chat_prompt(internvl_processor, text)
    ids = internvl_processor(text=[rendered], images=[Image.new("RGB", (112, 56))], return_tensors="pt")["input_ids"][0]
    ours = internvl_processor.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    logged = re.sub(r"<IMG_CONTEXT x\d+>", "<IMG_CONTEXT xN>", sample["prompt"])
    assert collapse(ours) == logged
    assert logged.startswith("<|im_start|>user<img><IMG_CONTEXT xN></img> \nwhich of these define dairy item\n")
    assert logged.endswith("D. a<|im_end|><|im_start|>assistant")


def test_the_checkpoint_template_is_kept_for_other_families_and_under_clean(internvl_processor):
    qwen = SimpleNamespace(chat_template="qwen's own")
    assert use_chat_template(qwen, SimpleNamespace(model_type="qwen2_5_vl"), "authors") == "qwen2_5_vl's own"
    assert qwen.chat_template == "qwen's own"
    with pytest.raises(ValueError, match="chat template must be one of model, authors"):
        use_chat_template(qwen, SimpleNamespace(model_type="qwen2_5_vl"), "chatml")


def test_the_authors_parser_on_their_logged_responses():
    """Items 0, 300 and 600 (gold B, C, C): " B. D" reads as D (the last standalone A-D), "." as "" (the
    stripped text, no letter), "\\nC. producer" as C; only the last is right, as their grading says."""
    parsed = [authors_answer(s["response"].removesuffix("<|im_end|>")) for s in LOG["samples"]]
    golds = [s["answer"] for s in LOG["samples"]]
    assert (parsed, golds) == (["D", "", "C"], ["B", "C", "C"])
    assert [authors_correct(p, g) for p, g in zip(parsed, golds)] == [False, False, True]
    # an unreadable output keeps its own text: two different ones are two different votes
    assert authors_answer("It is a leaf") == "A" and authors_answer("yes/") == "yes" and authors_answer(None) == ""
    # choice_parser ttrv: the same reading, an output that gives no letter a parse failure ("" is no letter)
    from ttrl_bench.evaluation.extraction import ttrv_choice

    assert [ttrv_choice(t, ["x", "y", "z", "w"]) for t in (" B. D", ".", "E", "it is a dog")] == ["D", None, None, "A"]
    task = MCQTask("authors")
    assert task.parse("a cat", {"options": []}) == "A" and task.parse("hmm.", {"options": ["x", "y"]}) == "hmm"


def test_verl_mean_at_groups_by_prompt_text():
    # a: [1, 0] -> 0.5 (a group of 2); b: [1] -> 1 (of 1); c: [0, 0, 1] -> 1/3 (of 3)
    means = verl_mean_at(["a", "a", "b", "c", "c", "c"], [100, 0, 100, 0, 0, 100])
    assert means == pytest.approx({1: 100.0, 2: 50.0, 3: 100 / 3})
    with pytest.raises(ValueError, match="2 prompts for 1 values"):
        verl_mean_at(["a", "b"], [1])


def test_mathverse_mean_at_1_scores_the_975_prompts_asked_once():
    """The authors' MathVerse list asks 975 prompt texts once and the rest 2, 3, 6, 9 or 15 times (counted
    from their test.json); their log's val-core is mean@15, the published cell its val-aux mean@1."""
    prompts = [item["prompt"] for item in authors_items.load_list("mathverse", "test")]
    sizes = Counter(Counter(prompts).values())
    assert sizes == {1: 975, 2: 191, 3: 98, 6: 4, 9: 1, 15: 1}
    once = {p for p, n in Counter(prompts).items() if n == 1}
    means = verl_mean_at(prompts, [100.0 if p in once else 0.0 for p in prompts])
    assert sorted(means) == [1, 2, 3, 6, 9, 15] and means[1] == 100.0 and means[15] == 0.0


def test_the_same_generations_rescored_under_both_parsers():
    """Four items; prompts p, p, q, r; gold B, B, C, A. Our parser: "The answer is (B)." -> B (right),
    "B" (right), "a dog" -> none of the options' text -> None (wrong), "A" (right): 75. The authors': "THE
    ANSWER IS (B)" has one standalone letter, B (right); "B" (right); "a dog" -> A (wrong);
    "A" (right): 75. mean@1 over q, r: (0 + 100) / 2 = 50; mean@2 over p: 100."""
    predictions = pd.DataFrame({
        "raw_output": ["The answer is (B).", "B", "a dog", "A"], "gold": ["B", "B", "C", "A"],
        "options": [["x", "y", "z", "w"]] * 4, "prompt_text": ["p", "p", "q", "r"]})
    assert rescored_metrics(predictions) == pytest.approx({
        "accuracy_robust_parser": 75.0, "accuracy_authors_parser": 75.0, "authors_mean@1": 50.0,
        "authors_mean@max": 100.0, "authors_max_group": 2.0})
    assert rescored_metrics(predictions.drop(columns="prompt_text")) == {}


def test_the_authors_protocol_sets_its_keys_and_a_config_key_wins():
    config = apply_protocol({"protocol": "authors", "evaluation": {"mcq": {"max_new_tokens": 16}}})
    assert config["evaluation"]["mcq"] == {"max_new_tokens": 16, "chat_template": "authors", "choice_parser": "authors"}
    assert config["adaptation"]["hyperparameters"]["mcq"]["answer_parser"] == "authors"
    assert apply_protocol({"protocol": "clean"}) == {"protocol": "clean"}
    with pytest.raises(ValueError, match="config key `protocol`: 'verl'"):
        apply_protocol({"protocol": "verl"})
    assert len({path for path, *_ in SETTINGS}) == len(SETTINGS)


def test_the_ttrv_config_runs_the_authors_protocol():
    config = load_config(Path(__file__).parents[1] / "config" / "ttrv.yaml")
    assert config["protocol"] == "authors" and config["data"]["items"] == "authors"
    assert config["evaluation"]["mcq"]["max_new_tokens"] == 1024  # every log's data.max_response_length
    assert config["evaluation"]["mcq"]["choice_parser"] == config["evaluation"]["mcq"]["chat_template"] == "authors"


def test_ttrl_bench_prompt_prints_the_exact_prompt_of_an_item(tiny_model_dirs, demo_data, tmp_path, capsys):
    """The tiny InternVL under the authors' protocol: their template, our item's text after " \\n" as their
    items have it, the 56 px digit as one 56 px tile of (56 / 14 / 2)^2 = 4 image tokens."""
    from ttrl_bench.cli import main
    from ttrl_bench.datasets.prepare import load_manifest

    (tmp_path / "results" / "data").mkdir(parents=True)
    (tmp_path / "results" / "data" / "demo-digits").symlink_to(demo_data)
    config = tmp_path / "authors.yaml"
    config.write_text(json.dumps({"protocol": "authors", "datasets": ["demo-digits"], "methods": ["zero-shot"],
                                  "models": {"tiny": {"source": str(tiny_model_dirs["internvl"])}}}))
    item = load_manifest(demo_data, "test").iloc[0]
    assert main(["prompt", str(config), "--dataset", "demo-digits", "--item", item["id"], "--model", "tiny",
                 "--results", str(tmp_path / "results")]) == 0
    printed = capsys.readouterr().out.rstrip("\n")
    assert printed == f"<|im_start|>user<img><IMG_CONTEXT>x4</img> \n{item['prompt']}<|im_end|><|im_start|>assistant"


def test_rescore_scores_stored_predictions_again_from_the_manifest(tmp_path):
    """Predictions stored before they kept their prompt text: the manifest gives it by id (the three items
    of the rescoring test above, in another order)."""
    from ttrl_bench.evaluation.evaluate import rescore

    manifest = pd.DataFrame({"id": ["s1", "s2", "s3", "s4"], "prompt": ["p", "p", "q", "r"],
                             "options": [["x", "y", "z", "w"]] * 4})
    pd.DataFrame({"id": ["s3", "s1", "s2", "s4"], "raw_output": ["a dog", "The answer is (B).", "B", "A"],
                  "gold": ["C", "B", "B", "A"]}).to_parquet(tmp_path / "predictions.parquet", index=False)
    (tmp_path / "metrics.json").write_text(json.dumps({"metric": "accuracy", "value": 75.0, "metrics": {"accuracy": 75.0}}))
    assert rescore(tmp_path, manifest)["authors_mean@1"] == 50.0
    stored = json.loads((tmp_path / "metrics.json").read_text())
    assert stored["value"] == 75.0 and stored["metrics"]["accuracy_authors_parser"] == 75.0
    with pytest.raises(ValueError, match="not in the manifest"):
        rescore(tmp_path, manifest[manifest["id"] != "s4"])


def test_the_protocols_doc_lists_every_setting():
    doc = (Path(__file__).parents[1] / "docs" / "protocols.md").read_text()
    assert [".".join(path) for path, *_ in SETTINGS if f"`{'.'.join(path)}`" not in doc] == []


def test_each_protocol_describes_its_settings_with_their_source():
    from ttrl_bench.plan.protocols import describe

    authors, clean = describe("authors"), describe("clean")
    assert len(authors) == len(clean) == len(SETTINGS)
    assert authors[0].startswith("evaluation.mcq.chat_template = authors: verl/utils/tokenizer.py hf_tokenizer")
    assert "evaluation.mcq.max_new_tokens = 1024: every log's data.max_response_length 1024" in " ".join(authors)
    assert "evaluation.mcq.max_new_tokens = the config's: the config's own budget" in " ".join(clean)
