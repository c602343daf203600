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
import yaml
from PIL import Image

from ttrl_bench.datasets import authors_items
from ttrl_bench.evaluation.extraction import authors_answer, authors_correct
from ttrl_bench.evaluation.metrics import verl_mean_at
from ttrl_bench.evaluation.tasks import MCQTask, rescored_metrics
from ttrl_bench.generation.hf import chat_prompt
from ttrl_bench.models.families import use_chat_template
from ttrl_bench.models.tiny import train_tokenizer
from ttrl_bench.models.tiny_families import chat_template, family
from ttrl_bench.plan import load_config
from ttrl_bench.plan.protocols import SETTINGS, apply_protocol

LOG = json.loads((Path(__file__).parents[1] / "data" / "ttrv_ai2d_log_excerpt.json").read_text())
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
    # issue 53 item 9: their reward decodes with special tokens kept (reward_manager/ttrl.py:79
    # skip_special_tokens=False), so "." reaches lines 602-611 as ".<|im_end|>": no final "." to strip, no
    # standalone letter (the D of END is inside a word), so the answer is "<|im_end|>" where ours reads "": both wrong
    kept = [authors_answer(s["response"]) for s in LOG["samples"]]
    assert kept == ["D", "<|im_end|>", "C"]
    assert [authors_correct(p, g) for p, g in zip(kept, golds)] == [False, False, True]
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
    config = load_config(Path(__file__).parents[2] / "config" / "ttrv.yaml")
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
    # the same item under the other protocol of the config: the checkpoint's ChatML, our text as prepared
    assert main(["prompt", str(config), "--dataset", "demo-digits", "--item", item["id"], "--model", "tiny",
                 "--results", str(tmp_path / "results"), "--protocol", "clean"]) == 0
    printed = capsys.readouterr().out.rstrip("\n")
    assert printed == f"<|im_start|>user\n<img><IMG_CONTEXT>x4</img>\n{item['prompt']}<|im_end|>\n<|im_start|>assistant"


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
    doc = (Path(__file__).parents[2] / "docs" / "protocols.md").read_text()
    assert [".".join(path) for path, *_ in SETTINGS if f"`{'.'.join(path)}`" not in doc] == []


def test_each_protocol_describes_its_settings_with_their_source():
    from ttrl_bench.plan.protocols import describe

    authors, clean = describe("authors"), describe("clean")
    assert len(authors) == len(clean) == len(SETTINGS)
    assert authors[0].startswith("evaluation.mcq.chat_template = authors: verl/utils/tokenizer.py hf_tokenizer")
    assert "evaluation.mcq.max_new_tokens = 1024: every log's data.max_response_length 1024" in " ".join(authors)
    assert "evaluation.mcq.max_new_tokens = the config's: the config's own budget" in " ".join(clean)


def test_an_unknown_protocol_is_named_with_the_known_ones():
    """PROTOCOL_NAMES in their order (clean first); the protocol is checked before the schema (plan/config.py
    `validated` applies it first), so a config file's typo reads the same."""
    from ttrl_bench.plan import validated

    with pytest.raises(ValueError) as err:
        apply_protocol({"protocol": "author"})
    assert str(err.value) == "config key `protocol`: 'author'; known: clean, authors"
    with pytest.raises(ValueError) as err:
        validated({"protocol": "verl"})
    assert str(err.value) == "config key `protocol`: 'verl'; known: clean, authors"


def test_describe_keeps_the_named_task_sections_and_prints_the_configs_own_values():
    """What `ttrl-bench plan` prints per protocol (cli/planning.py: the config's sections, the config's values).
    A setting belongs to the section that holds its key: evaluation.<section>.<key>,
    adaptation.hyperparameters.<section>.<key>. Counted in SETTINGS by hand: mcq 3 evaluation + 10 adaptation
    keys = 15; math 7 + 18 = 25; grounding 4 evaluation + 1 adaptation keys, in SETTINGS' order. Under clean a setting prints our
    value where SETTINGS has one (query_form: as_given), else "the config's"; a value the config sets (512 tokens)
    replaces either, with the protocol's reason kept; keys the config lacks keep the protocol's value."""
    from ttrl_bench.plan.protocols import describe

    assert describe("clean", {"evaluation": {"grounding": {"max_new_tokens": 512}}}, {"grounding"}) == [
        "evaluation.grounding.sam2 = the config's: no SAM2 unless the config names one: box masks, box_giou / "
        "box_ciou, our own metrics, never in a published mask cell",
        "evaluation.grounding.input_size = the config's: the image at its own size, as the model's processor takes it",
        "evaluation.grounding.query_form = as_given: the dataset's query verbatim",
        "evaluation.grounding.max_new_tokens = 512: the rollouts' budget (VR-TTRL presets' max_completion_length); "
        "the paper states none for evaluation",
        "adaptation.hyperparameters.grounding.max_completion_length = 1024: TTRV's 1,024, the VR-TTRL presets' "
        "(a budget the paper does not contradict)",
    ]
    assert len(describe("authors", None, {"mcq"})) == 15 and len(describe("clean", None, {"math"})) == 25
    assert len(describe("authors", None, {"mcq", "math"})) == 40 and describe("authors", None, set()) == []
    # a key or a config level is no section: nothing of either path shape is kept for it
    assert describe("authors", None, {"hyperparameters", "chat_template", "max_new_tokens", "evaluation"}) == []
    authors = describe("authors", {"evaluation": {"mcq": {"max_new_tokens": 16}}, "adaptation": {}}, {"mcq"})
    assert authors[:5] == [
        "evaluation.mcq.chat_template = authors: verl/utils/tokenizer.py hf_tokenizer: InternVL's template without "
        "newlines or system turn",
        "adaptation.hyperparameters.mcq.chat_template = authors: the same template in training",
        "evaluation.mcq.choice_parser = authors: qwen_math_parser.py choice_answer_clean_gpqa (auto_extract 'gpqa'), "
        "graded by qwen_eval.py qwen_reward_fn_gpqa",
        "adaptation.hyperparameters.mcq.answer_parser = authors: ttt_metrics.py test_time_train_metrics: votes are "
        "auto_extract's answers, an unreadable output's text included",
        "evaluation.mcq.max_new_tokens = 16: every log's data.max_response_length 1024, the validation's greedy budget",
    ]
    clean = describe("clean", None, {"mcq"})
    assert clean[0] == "evaluation.mcq.chat_template = model: the checkpoint's own template, the one it was tuned with"


# --- both protocols in one config (experiments.<e>.protocols) -------------------------------------------------


def test_a_path_level_names_the_adaptation_set_and_the_protocol():
    from ttrl_bench.runs.path_levels import protocol_name, protocol_parts, rerun_protocol

    assert protocol_name(20, "random") == "n20_random"  # clean: the paths from before protocols existed
    assert protocol_name(500, "biased-4", "authors") == "n500_biased-4_authors"
    assert protocol_parts("n500_biased-4_authors") == ("500", "biased-4")
    assert protocol_parts("nall_random") == ("all", "random")
    assert (rerun_protocol("n20_random"), rerun_protocol("n20_random_authors")) == ("clean", "authors")


def test_the_ttrv_config_runs_its_two_epoch_block_under_both_protocols():
    """`two_epochs_every_cell: protocols: [authors, clean]`: each of its jobs twice, zero-shot included, each
    with its protocol's evaluation and update; the logged blocks under the config's protocol only."""
    from ttrl_bench.plan.grid import Plan

    plan = Plan(load_config("config/ttrv.yaml"))
    ai2d = {r.protocol for r in plan.runs if r.model == "internvl3-2b" and r.target == "ai2d" and r.method == "ttrv"}
    assert ai2d == {"n20_random", "n20_random_authors"}
    zero_shot = {r.protocol for r in plan.runs if r.model == "internvl3-2b" and r.target == "ai2d" and r.method == "zero-shot"}
    assert zero_shot == {"n20_random", "n20_random_authors"}
    logged = {r.protocol for r in plan.runs if r.method == "ttrv-20-epochs"}
    assert logged == {"n20_random_authors"}
    # evaluation: the authors' 1,024 tokens, template and parser; clean: the schema's 6, the model's, ours
    assert plan.eval_flags("ai2d", "n20_random_authors") == (
        "--max-new-tokens 1024 --eval-samples all --choice-parser authors --chat-template authors --protocol authors")
    assert plan.eval_flags("ai2d", "n20_random") == (
        "--max-new-tokens 6 --eval-samples all --choice-parser robust --chat-template model --protocol clean")
    authors = plan.method_settings("ttrv", "n20_random_authors")["hyperparameters"]
    clean = plan.method_settings("ttrv", "n20_random")["hyperparameters"]
    assert (authors["advantages"], authors["kl_clamp"], authors["answer_parser"]) == ("verl", 10.0, "authors")
    assert authors["trl_vllm_is_correction"] is False and authors["bias_corrected_kl"] is False
    assert clean.get("advantages", "trl") == "trl" and clean.get("kl_clamp") is None
    assert clean.get("answer_parser", "robust") == "robust" and clean.get("trl_vllm_is_correction", True) is True


def test_a_key_the_config_sets_itself_holds_in_every_protocol():
    """variant(): a key left at its own protocol's value takes the other protocol's; one set to another value
    by the config keeps it (here 16 evaluation tokens under both), in either direction."""
    from ttrl_bench.plan.config import merge, validated, variant

    base = yaml.safe_load(Path("config/ttrv.yaml").read_text())
    config = validated(merge(base, {"evaluation": {"mcq": {"max_new_tokens": 16}}}))
    clean = variant(config, "clean")
    assert clean["evaluation"]["mcq"]["max_new_tokens"] == 16  # set by hand: kept
    assert clean["evaluation"]["mcq"]["chat_template"] == "model" and clean["evaluation"]["mcq"]["choice_parser"] == "robust"
    assert "kl_clamp" not in clean["adaptation"]["hyperparameters"].get("mcq", {})
    demo = validated(yaml.safe_load(Path("config/config.yaml").read_text()))
    authors = variant(demo, "authors")
    assert authors["evaluation"]["mcq"]["max_new_tokens"] == 1024 and authors["evaluation"]["mcq"]["chat_template"] == "authors"
    assert authors["adaptation"]["hyperparameters"]["mcq"]["advantages"] == "verl"
    assert demo["protocol"] == "clean" and demo["evaluation"]["mcq"]["max_new_tokens"] == 6  # the config untouched


def test_both_protocols_side_by_side_and_the_published_cells_from_the_configs(tmp_path):
    """Two runs of one cell (InternVL3-2B zero-shot on ImageNet-A, 200 items), one per protocol: the published
    cell (67.92) is filled by the config's protocol's run only, Table 1's layout comes once per protocol, and
    the "Both protocols" table gives authors - clean = 70.5 - 62.0 = 8.5."""
    from ttrl_bench.cli import main
    from ttrl_bench.results.store import ingest

    dirs = []
    for protocol, value in (("authors", 70.5), ("clean", 62.0)):
        run_id = f"m2b/zero-shot/none/imagenet-a/n20_random{'_authors' if protocol == 'authors' else ''}/seed0"
        d = tmp_path / "eval" / run_id
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({
            "run_id": run_id, "model": "m2b", "method": "zero-shot", "train_dataset": "none",
            "target_dataset": "imagenet-a", "n_adapt": 20, "sampling": "random", "seed": 0, "metric": "accuracy",
            "value": value, "n": 200, "n_unparsable": 0, "eval_seconds": 1.0, "config_hash": protocol,
            "git_revision": "r", "versions": {}, "items": "ttrv-authors", "protocol": protocol,
            "metrics": {"accuracy": value}}))
        pd.DataFrame({"id": ["a"], "output": ["x"]}).to_parquet(d / "predictions.parquet")
        dirs.append(d)
    db = tmp_path / "b.duckdb"
    ingest(db, dirs, [], [])
    out = tmp_path / "t"
    names = ["--model-names", json.dumps({"m2b": "InternVL3-2B"}), "--dataset-names", json.dumps({"imagenet-a": "ImageNet-A"})]
    assert main(["render-tables", "--db", str(db), "--out-dir", str(out), *names, "--protocol", "authors"]) == 0
    cells = pd.read_csv(out / "ttrv_table1.csv")
    cell = cells[(cells["model"] == "InternVL3-2B") & (cells["method"] == "zero-shot") & (cells["dataset"] == "ImageNet-A")]
    assert cell[["paper_value", "ours", "protocol"]].values.tolist() == [[67.92, 70.5, "authors"]]
    layout = (out / "ttrv_table1_layout.md").read_text()
    assert layout.index("protocol authors)") < layout.index("protocol clean)")
    assert "| m2b | zero-shot | imagenet-a | 70.50 | 62.00 | 8.50 |" in layout  # our names, as the rescoring table
    assert main(["render-tables", "--db", str(db), "--out-dir", str(out), *names]) == 0  # a clean config's tables
    cells = pd.read_csv(out / "ttrv_table1.csv")
    assert cells.loc[(cells["model"] == "InternVL3-2B") & (cells["method"] == "zero-shot")
                     & (cells["dataset"] == "ImageNet-A"), "ours"].tolist() == [62.0]


# --- the authors' InternViT drop path (models/families.py) ------------------------------------------------------


def test_the_authors_drop_path_drops_whole_vision_branches_in_the_training_forward_only():
    """Rate 1.0 over 2 vision layers: layer 0's rate is 0 (linspace), layer 1's is 1, so in the training forward
    layer 1's attention and MLP branches vanish, which is layer 1 with lambda_1 = lambda_2 = 0; without gradients
    (verl's old and reference log-probs) or in eval mode, nothing drops."""
    import copy

    import torch

    from ttrl_bench.models.families import add_vision_drop_path, vision_tower
    from ttrl_bench.models.tiny import TILE_PX, build_tiny

    torch.manual_seed(0)
    model, _ = build_tiny(train_tokenizer(["a b c"], "internvl", vocab_size=300), "internvl",
                          sizes={"vision": {"num_hidden_layers": 2}})
    plain, branchless = copy.deepcopy(model), copy.deepcopy(model)
    for lam in (vision_tower(branchless).encoder.layer[1].lambda_1, vision_tower(branchless).encoder.layer[1].lambda_2):
        lam.data.zero_()
    assert add_vision_drop_path(model, 1.0) == 2
    pixels = torch.randn(3, 3, TILE_PX, TILE_PX)

    def features(m, train=True, grad=True):
        m.train(train)
        with torch.set_grad_enabled(grad):
            return vision_tower(m)(pixel_values=pixels).last_hidden_state

    assert torch.allclose(features(model), features(branchless), atol=1e-6)
    assert not torch.allclose(features(plain), features(branchless), atol=1e-4)  # the branch mattered
    assert torch.equal(features(model, grad=False), features(plain, grad=False))
    assert torch.equal(features(model, train=False), features(plain, train=False))


def test_each_model_gets_its_original_checkpoints_drop_path_rate():
    """Their logs: 0.1 for InternVL3-2B and -8B, 0.0 for InternVL2.5-4B; InternViT's per-layer rates for 24 layers
    rise from 0 to 0.1 in steps of 0.1 / 23; the clean protocol adds none."""
    from ttrl_bench.models.families import drop_path_rates, original_vision_drop_path
    from ttrl_bench.plan.grid import Job, Plan
    from ttrl_bench.plan.resources import job_method_settings

    assert original_vision_drop_path("OpenGVLab/InternVL3-2B-hf") == 0.1
    assert original_vision_drop_path("OpenGVLab/InternVL2_5-4B") == 0.0
    assert original_vision_drop_path("Qwen/Qwen2.5-VL-3B-Instruct") == 0.0
    rates = drop_path_rates(24, 0.1)
    assert rates[0] == 0.0 and rates[23] == pytest.approx(0.1) and rates[1] == pytest.approx(0.1 / 23)
    plan = Plan(load_config("config/ttrv.yaml"))

    def rate(model, protocol):
        job = Job("adapt", model, "ttrv", "ai2d", None, protocol, 0)
        return job_method_settings(plan, job)["hyperparameters"].get("vision_drop_path")

    assert rate("internvl3-2b", "n20_random_authors") == 0.1
    assert rate("internvl2.5-4b", "n20_random_authors") == 0.0
    assert rate("internvl3-2b", "n20_random") is None
