"""ECHO's `authors` protocol (issue 35, ECHO half): the authors' code (user683/ECHO @6f7b311) where it and
the paper differ. Every expected value is worked by hand from the authors' formulas or read from their code:
the adaptive clip under the sampled token's probability (dp_actor.py:387-390, core_algos.py:213-304), their
lenient grader (standalone_inference.py:86-122), their boxed-only votes (ttrl_utils.py:106-119), their
evaluation prompt (standalone_inference.py:190-201) and config/echo.yaml planned under `authors`."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from ttrl_bench.adaptation.echo import LogitStatistics, adaptive_clip, check_token_confidence, token_statistics
from ttrl_bench.datasets.preprocessing import math_prompt
from ttrl_bench.evaluation.math_answers import (AUTHORS_EVAL_SYSTEM, authors_answer_text, boxed_answer,
                                                lenient_correct)
from ttrl_bench.evaluation.tasks import MathTask, authors_math_prompts, task_for
from ttrl_bench.rewards.voting import majority_vote

REPO = Path(__file__).parents[2]
V = 8  # vocabulary of the hand-worked logits


def logits_for(sampled: list[float], tokens: list[int]) -> torch.Tensor:
    """(1, T, V) log-probabilities: at position t the token `tokens[t]` has probability `sampled[t]` and
    the 7 others share the rest equally."""
    rows = []
    for p, token in zip(sampled, tokens):
        probs = torch.full((V,), (1.0 - p) / (V - 1), dtype=torch.float64)
        probs[token] = p
        rows.append(probs.log())
    return torch.stack(rows).unsqueeze(0)


# Two completions, right-padded to 3 tokens. A: sampled-token probabilities 0.9, 0.6, 0.3; B: 0.8, 0.8, then
# padding (whose made-up 0.1 must not count).
SAMPLED = [[0.9, 0.6, 0.3], [0.8, 0.8, 0.1]]
TOKENS = [[2, 5, 0], [1, 1, 3]]
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])


def confidences(kind: str) -> torch.Tensor:
    logits = torch.cat([logits_for(s, t) for s, t in zip(SAMPLED, TOKENS)])
    return token_statistics(logits, torch.tensor(TOKENS), top_k=5, confidence=kind)[2]


def test_adaptive_clip_under_the_sampled_token_confidence():
    """core_algos.py:213-229 C_tail = mean over the last min(16, length) tokens; :298-303
    eps = 0.05 + 0.15 sigmoid(4 (1 - C_tail)).
    A: C_tail = (0.9 + 0.6 + 0.3) / 3 = 0.6, eps = 0.05 + 0.15 sigmoid(1.6) = 0.05 + 0.15 x 0.8320184 = 0.1748028;
    B: C_tail = 0.8, eps = 0.05 + 0.15 sigmoid(0.8) = 0.05 + 0.15 x 0.6899745 = 0.1534962."""
    conf = confidences("sampled")
    assert conf[0].tolist() == pytest.approx([0.9, 0.6, 0.3])
    assert conf[1, :2].tolist() == pytest.approx([0.8, 0.8])
    eps = adaptive_clip(conf, MASK, tail_window=16, eps_min=0.05, eps_max=0.2, kappa=4.0)
    assert eps.tolist() == pytest.approx([0.1748028, 0.1534962], abs=1e-6)


def test_the_papers_top5_confidence_keeps_the_clip_near_its_maximum():
    """The same tokens under the paper's top-5 mean (dp_actor.py:280-286): at a position whose sampled token
    has probability p and 7 others (1 - p) / 7 each, the top 5 are p and four of the others:
    C = (p + 4 (1 - p) / 7) / 5, i.e. 0.1914286, 0.1657143, 0.14 for A (mean 0.1657143) and 0.1828571 for B.
    eps_A = 0.05 + 0.15 sigmoid(4 x 0.8342857) = 0.1948522, eps_B = 0.05 + 0.15 sigmoid(4 x 0.8171429) = 0.1945002.
    Five probabilities sum to at most 1, so C <= 0.2 and eps >= 0.05 + 0.15 sigmoid(3.2) = 0.1941251."""
    conf = confidences("top_k")
    assert conf[0].tolist() == pytest.approx([0.1914286, 0.1657143, 0.14], abs=1e-6)
    eps = adaptive_clip(conf, MASK)
    assert eps.tolist() == pytest.approx([0.1948522, 0.1945002], abs=1e-6)
    torch.manual_seed(0)
    any_logits = torch.randn(4, 6, 50) * 5
    top5 = token_statistics(any_logits, torch.zeros(4, 6, dtype=torch.long), confidence="top_k")[2]
    assert float(top5.max()) <= 0.2 + 1e-7
    assert float(adaptive_clip(top5, torch.ones(4, 6)).min()) >= 0.1941251 - 1e-6
    # the sampled token's probability reaches 1: eps down to 0.05 + 0.15 x sigmoid(0) = 0.125
    assert adaptive_clip(torch.ones(1, 3), torch.ones(1, 3)).item() == pytest.approx(0.125)


def test_the_trainers_logit_pass_returns_the_chosen_confidence():
    """LogitStatistics (the trainer's stand-in for TRL's per-token pass) keeps the sampled token's probability
    under "sampled": a stand-in model whose logits at position t predict token t + 1."""
    logits = logits_for([0.9, 0.6, 0.3], [2, 5, 0])  # predicts completion tokens 2, 5, 0

    class Model:
        def __call__(self, input_ids, logits_to_keep, **_):
            # positions: prompt token, then the 3 completion tokens; the last position's logits are cut
            full = torch.cat([logits[0], torch.zeros(1, V, dtype=logits.dtype)]).unsqueeze(0)
            return type("Out", (), {"logits": full[:, -logits_to_keep:]})()

    stats = LogitStatistics(Model(), logits_to_keep=3, temperature=1.0, top_k=5, confidence="sampled")
    out = stats(input_ids=torch.tensor([[7, 2, 5, 0]]))
    assert torch.exp(out.log_probs[0]).tolist() == pytest.approx([0.9, 0.6, 0.3])
    assert stats.confidence[0][0].tolist() == pytest.approx([0.9, 0.6, 0.3])
    with pytest.raises(ValueError, match="token_confidence = 'top5'; known: top_k, sampled"):
        check_token_confidence("top5")


@pytest.mark.parametrize("pred, gold, expected", [
    ("3", "2\\sqrt{3}", True),     # 3 is one of the gold's numbers (standalone_inference.py:104-107)
    ("2", "2\\sqrt{3}", True),     # and so is 2
    ("4", "2\\sqrt{3}", False),
    ("2\\sqrt{3}", "2\\sqrt{3}", True),
    ("B", "B", True),
    ("b", "B", True),              # pred.strip().upper() (:98)
    ("B", "B.30", True),           # the gold's first character (:100-103)
    ("B", "Bob", True),            # ... whatever the gold says
    ("C", "B.30", False),
    ("30", "B.30", True),          # 30 is a number of the gold string
    ("E", "E", True),              # equal normal forms come first (:90-95)
    ("E", "Elephant", False),      # the first-character rule covers A-D only
    ("0.5", "\\frac{1}{2}", True),
    ("", "3", False), (None, "3", False), ("3", None, False),
])
def test_the_authors_lenient_grader(pred, gold, expected):
    assert lenient_correct(pred, gold) is expected


def test_the_lenient_and_exact_graders_on_the_same_completions():
    """The task under grader "lenient" grades the raw gold string; "exact" (ours) compares normal forms."""
    free = {"answer": "2\\sqrt{3}", "options": None}
    lettered = {"answer": "B", "options": ["3", "4"]}
    lenient, exact = MathTask(grader="lenient"), MathTask()
    assert lenient.score(lenient.parse("so x = \\boxed{3}", free), lenient.gold(free)) == 1.0
    assert exact.score(exact.parse("so x = \\boxed{3}", free), exact.gold(free)) == 0.0
    assert lenient.score(lenient.parse("\\boxed{B}", lettered), lenient.gold(lettered)) == 1.0
    # their extraction: no box, no yes / no, not a lone letter: the last number, "4", which is not "B"
    assert lenient.score(lenient.parse("B is 3 and A is 4", lettered), lenient.gold(lettered)) == 0.0
    assert task_for("mathvision-math", grader="lenient").grader == "lenient"


@pytest.mark.parametrize("text, expected", [
    ("so \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
    ("Yes, it is.", "Yes"), ("no way", "No"),          # an output starting with yes / no
    (" b. ", "B"), ("C)", "C"),                         # a lone option letter
    ("x = 3, y = 4.5", "4.5"),                          # else the last number (-?\\d+\\.?\\d*)
    ("\\boxed{\\frac{1}{2", "2"),                        # a box cut off: its last number
    ("\\boxed 5", "5"), ("zzz", ""), ("", ""), (None, ""),
    ("nothing fits", "No"),  # lowered.startswith("no") (standalone_inference.py:69): their quirk, kept
])
def test_the_authors_extraction(text, expected):
    assert authors_answer_text(text) == expected


def test_only_boxed_answers_vote():
    """ttrl_utils.py:106-119: the answers of whole boxes are counted (5 twice, 6 once), the label is 5;
    ttrl_math compute_score gives an unboxed rollout 0 (no_reward). Our fallback chain reads 5 from the
    stated and the trailing answers too, so four more rollouts agree with the label."""
    rollouts = ["so \\boxed{5}", "the answer is 5", "\\boxed{6}", "it is 5", "\\boxed{5}.", "cut off \\boxed{5"]
    row = {"answer": "5", "options": None}
    boxed = task_for("geometry3k", choice_parser="boxed")
    assert boxed.boxed_only
    votes = [boxed.parse(text, row) for text in rollouts]
    assert votes == ["5", None, "6", None, "5", None]
    assert majority_vote(votes, unparsable="no_reward") == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    ours = [MathTask().parse(text, row) for text in rollouts]
    assert majority_vote(ours, unparsable="no_reward") == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert boxed_answer("\\fbox{5}") is None and boxed_answer("\\boxed{}") == ""


def test_boxed_votes_on_an_option_question():
    """A boxed option text maps to its letter; a boxed value that is no option votes as itself (their
    string count); an unboxed letter does not vote."""
    row = {"answer": "B", "options": ["30", "60"]}
    boxed = MathTask(answer_parser="boxed")
    assert [boxed.parse(t, row) for t in ["\\boxed{B}", "\\boxed{60}", "\\boxed{45}", "The answer is (B)."]] == [
        "B", "B", "45", None]


@pytest.mark.parametrize("text", ["", "   ", "\\boxed{", "}}}{{\\boxed", "\x00\\boxed{\\boxed{}", "9" * 400,
                                  "\\boxed{" * 50, "\\boxed{9" + "9" * 400 + "}"])
def test_degenerate_outputs_never_raise(text):
    for row in ({"answer": "2\\sqrt{3}", "options": None}, {"answer": "B", "options": ["3", "9"]}):
        for task in (MathTask(grader="lenient"), MathTask(answer_parser="boxed"), MathTask()):
            assert task.score(task.parse(text, row), task.gold(row)) in (0.0, 1.0)
    assert lenient_correct(authors_answer_text(text), "2\\sqrt{3}") in (True, False)


def test_the_authors_evaluation_prompt_rendered():
    """standalone_inference.py:190-207: their system turn, then the image and the item's text (their
    test.json `prompt`: question and choices, data/save_as_json.py:164-169), without training's reasoning
    suffix, through the model's template. Rendered by a tiny Qwen2.5-VL processor whose ChatML template
    lays out system / user / assistant turns as Qwen2.5-VL's own does."""
    from ttrl_bench.generation.hf import chat_prompt
    from ttrl_bench.models.tiny_families import chat_template, family
    from ttrl_bench.models.tiny import train_tokenizer

    items = pd.DataFrame({"id": ["q1"], "prompt": [math_prompt("Find x.", ["3", "4"])], "answer": ["B"]})
    assert items["prompt"][0] == ("Find x.\n\nChoices:\nA.3\nB.4\nPlease reason step by step, and put your final "
                                  "answer within \\boxed{}.")
    asked = authors_math_prompts(items)
    assert asked["prompt"][0] == "Find x.\n\nChoices:\nA.3\nB.4"
    assert AUTHORS_EVAL_SYSTEM == ("Please directly answer the question and provide the correct option letter and  "
                                   "put your answer within \\boxed{}.")  # standalone_inference.py:190, verbatim
    qwen = family("qwen2_5_vl")
    processor = qwen.processor(train_tokenizer(["Find x."], "qwen2_5_vl", vocab_size=300),
                               chat_template(qwen.image_part), 56)
    assert chat_prompt(processor, asked["prompt"][0], asked["system"][0]) == (
        "<|im_start|>system\nPlease directly answer the question and provide the correct option letter and  put "
        "your answer within \\boxed{}.<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
        "Find x.\n\nChoices:\nA.3\nB.4<|im_end|>\n<|im_start|>assistant\n")
    assert items["prompt"][0].endswith("\\boxed{}.")  # the items themselves are untouched


def test_the_echo_config_plans_the_authors_protocol(tmp_path):
    """config/echo.yaml's published cells under `authors`: their evaluation (standalone_inference.py:33-40),
    their script's batch and votes (geometry3k.sh:26-30), verl's loss and update; `clean` gives the
    paper's Table 5 back."""
    from ttrl_bench.adaptation.layout import plan_batch_layout
    from ttrl_bench.plan import load_config
    from ttrl_bench.plan.grid import Plan

    config = load_config(REPO / "config" / "echo.yaml")
    assert config["protocol"] == "authors"
    plan = Plan(config)
    for method in ("echo", "mm-upt"):
        hp = plan.method_specs[method]["hyperparameters"]
        assert {k: hp[k] for k in ("n_votes", "num_generations", "generation_batch_size", "micro_batch_size",
                                   "loss_type", "dual_clip", "token_confidence", "answer_parser", "chat_template",
                                   "kl_clamp", "trl_vllm_is_correction", "bias_corrected_kl", "advantages",
                                   "decay_every_parameter", "lr_schedule_per", "data_seed")} == {
            "n_votes": 32, "num_generations": 32, "generation_batch_size": 256, "micro_batch_size": 2,
            "loss_type": "bnpo", "dual_clip": 3.0, "token_confidence": "sampled", "answer_parser": "boxed",
            "chat_template": "model", "kl_clamp": 10.0, "trl_vllm_is_correction": False,
            "bias_corrected_kl": False, "advantages": "verl", "decay_every_parameter": True,
            "lr_schedule_per": "round", "data_seed": 1}
    # 8 prompts x 32 rollouts a round, one prompt's 32 a step: on 4 GPUs 32 / (2 x 4) = 4 micro-batches each
    assert plan_batch_layout(plan.method_specs["echo"]["hyperparameters"], 4, 2101) == {
        "per_device_train_batch_size": 2, "gradient_accumulation_steps": 4, "generation_batch_size": 256}
    run = next(r for r in plan.runs if r.target == "mathvision-math")
    flags = plan.eval_flags("mathvision-math", run.protocol).split()
    pairs = dict(zip(flags[::2], flags[1::2]))
    assert {k: pairs[k] for k in ("--max-new-tokens", "--prompt", "--grader", "--top-k", "--temperature", "--top-p",
                                  "--protocol", "--min-image-side")} == {
        "--max-new-tokens": "2048", "--prompt": "authors", "--grader": "lenient", "--top-k": "50",
        "--temperature": "0.7", "--top-p": "0.9", "--protocol": "authors", "--min-image-side": "28"}

    clean_file = tmp_path / "clean.yaml"
    clean_file.write_text("protocol: clean\n")
    clean = Plan(load_config(REPO / "config" / "echo.yaml", clean_file))
    hp = clean.method_specs["echo"]["hyperparameters"]
    assert (hp["n_votes"], hp["generation_batch_size"], hp["micro_batch_size"], hp.get("token_confidence", "top_k"),
            hp.get("answer_parser", "robust"), hp.get("loss_type", "dapo")) == (64, 160, 1, "top_k", "robust", "dapo")
    run = next(r for r in clean.runs if r.target == "mathvision-math")
    flags = clean.eval_flags("mathvision-math", run.protocol)
    assert "--max-new-tokens 3072" in flags and "--temperature 0.6 --top-p 0.95" in flags
    assert "--prompt training" in flags and "--grader exact" in flags and "--top-k" not in flags
    assert "--min-image-side" not in flags and clean.method_specs["echo"]["hyperparameters"].get("data_seed") is None


def test_the_authors_evaluation_enlarges_a_side_under_28_px(tmp_path):
    """Issue 53 item 6. standalone_inference.py:163-169: width, height = max(w, 28), max(h, 28) when either is
    under 28, PIL's BICUBIC resize; 187: applied to every image. A 20 x 40 image becomes 28 x 40 (the long side
    kept), exactly PIL's bicubic resize to (28, 40); a 28 x 30 one and any image without `min_side` stay as
    they are."""
    from PIL import Image

    from ttrl_bench.evaluation.evaluate import decode_image

    small = Image.new("RGB", (20, 40))
    small.putdata([(x * 12, y * 6, (x + y) % 256) for y in range(40) for x in range(20)])
    small.save(tmp_path / "small.png")
    Image.new("RGB", (28, 30), (9, 9, 9)).save(tmp_path / "edge.png")
    image, error = decode_image(tmp_path, {"id": "s", "image": "small.png", "min_side": 28})
    assert error is None and image.size == (28, 40)
    assert list(image.getdata()) == list(small.resize((28, 40), Image.BICUBIC).getdata())
    assert decode_image(tmp_path, {"id": "e", "image": "edge.png", "min_side": 28})[0].size == (28, 30)
    assert decode_image(tmp_path, {"id": "s", "image": "small.png"})[0].size == (20, 40)


def test_the_cli_samples_with_top_k_only_where_set():
    """evaluation.math.top_k reaches the sampling settings (and so the run's hash) only where set."""
    from types import SimpleNamespace

    from ttrl_bench.cli.evaluation import _eval_sampling

    args = SimpleNamespace(temperature=0.7, top_p=0.9, n_samples=1, pass_k=(1,), seed=0, top_k=None)
    assert _eval_sampling(args) == {"n": 1, "temperature": 0.7, "top_p": 0.9, "seed": 0}
    args.top_k = 50
    assert _eval_sampling(args) == {"n": 1, "temperature": 0.7, "top_p": 0.9, "seed": 0, "top_k": 50}
    assert math.isclose(0.05 + 0.15 / (1 + math.exp(-3.2)), 0.1941251, abs_tol=1e-7)  # the docstring's bound


def test_one_echo_step_under_the_authors_update_uses_the_sampled_confidence(demo_data, tiny_model_dirs, tmp_path,
                                                                           monkeypatch):
    """One ECHO round on the tiny Qwen2.5-VL with the authors' update keys (the math layer of echo.yaml under
    `authors`, the boxed-only votes aside: the tiny model never boxes, so every reward would be 0). The
    confidences that reach the clip are sampled-token probabilities: some exceed 0.2, which a top-5 mean never
    can; the clip ranges follow from them by core_algos.py:298-303."""
    from tests.support.adaptation import ONE_STEP, half_taught, math_samples

    from ttrl_bench.adaptation import trainer as trainer_module
    from ttrl_bench.adaptation.grpo import adapt
    from ttrl_bench.adaptation.presets import resolve_method
    from ttrl_bench.evaluation.tasks import TASKS
    from ttrl_bench.models.loading import load_model
    from ttrl_bench.plan import load_config

    seen = []
    original = trainer_module.adaptive_clip

    def spy(confidence, mask, *args, **kwargs):
        seen.append((confidence.detach().clone(), mask.detach().clone(), original(confidence, mask, *args, **kwargs)))
        return seen[-1][2]

    monkeypatch.setattr(trainer_module, "adaptive_clip", spy)
    authors = dict(load_config(REPO / "config" / "echo.yaml")["adaptation"]["hyperparameters"]["math"])
    authors.pop("answer_parser")
    authors.pop("lora")  # GeoQA's adapter, resolved per training set by the plan: a Geometry3k job has none
    authors.pop("stop_after_rounds")  # GeoQA's 654 rounds, resolved alike
    layer = {**authors, **ONE_STEP, "n_votes": 8, "micro_batch_size": 2, "generation_batch_size": 16,
             "rollout_backend": "hf"}
    spec = resolve_method("echo", layer)
    assert spec["hyperparameters"]["token_confidence"] == "sampled" and spec["hyperparameters"]["loss_type"] == "bnpo"
    model, processor = load_model(str(tiny_model_dirs["qwen2_5_vl"]), dtype="fp32")
    samples = math_samples(demo_data)
    half_taught(model, processor, samples, demo_data, monkeypatch)
    log = adapt(model, processor, samples, demo_data, spec, tmp_path, seed=0, task=TASKS["math"])
    assert log.attrs["optimizer_steps"] == 2
    confidence, mask, eps = seen[0]
    valid = confidence[mask.bool()]
    # <= 1 exactly: exp of a log-softmax, which is <= 0 in fp32 too (x - max - log(sum), the sum >= 1); > 0: a
    # sampled token's probability is far above fp32's underflow (exp(-103))
    assert float(valid.max()) > 0.2 and float(valid.min()) > 0.0 and float(valid.max()) <= 1.0
    lengths = mask.sum(1)
    c_tail = (confidence * mask).sum(1) / lengths  # completions of at most 3 tokens: the tail is all of them
    expected = 0.05 + 0.15 * torch.sigmoid(4.0 * (1.0 - c_tail))
    assert eps.tolist() == pytest.approx(expected.tolist(), abs=1e-6)


def test_an_authors_evaluation_asks_their_prompt_and_grades_leniently(tmp_path):
    """The evaluation loop under `authors`: the engine is given their system turn and the item's text without
    the reasoning suffix; one completion per question graded by their check_correctness. By hand: q1 (gold
    2\\sqrt{3}) answered "3", right under theirs, wrong under ours; q2 (gold B) answered \\boxed{B}, right under
    both; q3 (gold 7) answered "I think 8", wrong under both: pass@1 = 2/3 (theirs) and 1/3 (ours)."""
    from PIL import Image

    from ttrl_bench.evaluation.evaluate import evaluate_model, write_evaluation

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    items = pd.DataFrame([
        {"id": "q1", "image": "a.png", "prompt": math_prompt("Find AB.", []), "options": [], "answer": "2\\sqrt{3}"},
        {"id": "q2", "image": "a.png", "prompt": math_prompt("Which?", ["3", "4"]), "options": ["3", "4"],
         "answer": "B"},
        {"id": "q3", "image": "a.png", "prompt": math_prompt("How many?", []), "options": [], "answer": "7"},
    ])
    answers = {"Find AB.": ["AB = 3"], "Which?\n\nChoices:\nA.3\nB.4": ["\\boxed{B}"], "How many?": ["I think 8"]}
    asked = []

    def engine(processor, prompts, images, systems=None):
        asked.extend(zip(prompts, systems))
        return [answers[p] for p in prompts]

    sampling = {"n": 1, "temperature": 0.7, "top_p": 0.9, "top_k": 50, "seed": 0}
    theirs = evaluate_model(engine, None, authors_math_prompts(items), tmp_path, MathTask(grader="lenient"), 2048, 8,
                            sampling=sampling)
    assert asked == [(p, AUTHORS_EVAL_SYSTEM) for p in answers]
    assert write_evaluation(theirs, MathTask(), tmp_path / "theirs", {}, 1.0)["value"] == pytest.approx(200 / 3)
    ours = evaluate_model(lambda processor, prompts, images, systems=None: [answers[p.removesuffix(
        "\nPlease reason step by step, and put your final answer within \\boxed{}.")] for p in prompts], None, items,
        tmp_path, MathTask(), 3072, 8, sampling=sampling)
    assert write_evaluation(ours, MathTask(), tmp_path / "ours", {}, 1.0)["value"] == pytest.approx(100 / 3)


def test_hf_sampling_honours_top_k(tiny_model_dir):
    """top_k 1 keeps only the most likely token: every sampled completion is the greedy one."""
    from PIL import Image

    from ttrl_bench.generation.hf import generate_greedy, generate_sampled
    from ttrl_bench.models.loading import load_model

    model, processor = load_model(str(tiny_model_dir))
    images = [Image.new("RGB", (56, 56), "white")]
    greedy = generate_greedy(model, processor, ["Which digit?"], images, 4, 1, progress=False)
    sampled = generate_sampled(model, processor, ["Which digit?"], images, 4, 1,
                               {"n": 3, "temperature": 1.5, "top_p": 1.0, "top_k": 1, "seed": 7})
    assert sampled == [[greedy[0]] * 3]
