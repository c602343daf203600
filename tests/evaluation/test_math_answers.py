"""ECHO's math task: answer extraction and normal forms (evaluation/math_answers.py, after the
authors' standalone_inference.py and ttrl_math/math_normalize.py), the task's parse / gold / score
and its pass@k from sampled completions (Chen et al. 2021), worked out by hand."""

import json
from types import SimpleNamespace

import pandas as pd
import pytest
from PIL import Image

from ttrl_bench.cli.evaluation import _eval_sampling
from ttrl_bench.evaluation.evaluate import evaluate_model, write_evaluation
from ttrl_bench.evaluation.math_answers import answer_text, last_boxed, letters_of, normalize_math_answer
from ttrl_bench.evaluation.metrics import pass_at_k
from ttrl_bench.evaluation.tasks import MathTask, task_for
from ttrl_bench.rewards.voting import majority_vote


@pytest.mark.parametrize("n, c, k, expected", [
    (4, 1, 2, 0.5),   # 1 - C(3,2)/C(4,2) = 1 - 3/6
    (5, 2, 2, 0.7),   # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (4, 1, 1, 0.25),  # pass@1 = c / n
    (4, 3, 2, 1.0),   # n - c = 1 < k: every pair holds a correct one
    (1, 0, 1, 0.0),
])
def test_pass_at_k_unbiased_estimator(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize("text, expected", [
    ("so \\boxed{\\frac{3}{4}}.", "\\frac{3}{4}"),               # braces balanced
    ("first \\boxed{2}, then \\boxed{5}", "5"),                  # the last box
    ("The answer is 7.", "7"),                                   # no box: the stated answer
    ("Answer: x = 4\nbecause ...", "x = 4"),
    ("we get 3 and then 12", "12"),                              # else the last number
    ("no idea", None),
    ("\\boxed{\\frac{1}{2", "2"),  # cut off: no whole box, so the last number (standalone_inference.py too)
    ("The final answer is MAX.", "MAX"),                       # only the final period goes
    (None, None), ("   ", None),
])
def test_answer_text(text, expected):
    assert answer_text(text) == expected


@pytest.mark.parametrize("answer, expected", [
    ("\\frac{1}{2}", "0.5"), ("0.5", "0.5"), ("\\dfrac12", "0.5"), ("1/2", "0.5"), (".5", "0.5"),
    ("-\\frac{3}{4}", "-0.75"), ("3.50", "3.5"), ("1,000", "1000"), ("\\frac{1}{3}", "0.3333333333"),
    ("30^\\circ", "30"), ("30°", "30"), ("12 cm", "12"), ("5 \\text{ cm}", "5"), ("12 square units", "12"),
    ("x = 5", "5"), ("$7$", "7"), ("50\\%", "50"), ("2\\sqrt3", "2\\sqrt{3}"), ("\\text{Yes}", "yes"),
    ("\\left( 1, 2 \\right)", "(1,2)"), ("", None), (None, None),
])
def test_normal_forms(answer, expected):
    assert normalize_math_answer(answer) == expected


def test_option_letters_from_a_letter_an_option_text_or_several_letters():
    options = ["15", "30", "45", "60"]
    assert letters_of("B", options) == "B"
    assert letters_of("(C)", options) == "C"
    assert letters_of("B. 30", options) == "B"
    assert letters_of("\\text{D}", options) == "D"
    assert letters_of("30", options) == "B"          # the text of one option (check_correctness)
    assert letters_of("30^\\circ", options) == "B"   # ... in its normal form
    assert letters_of("C, A", options) == "A,C"      # LogicVista: sorted, comma-joined
    assert letters_of("E", options) is None          # no fifth option
    assert letters_of("Both", options) is None


def test_task_parse_gold_and_score():
    task = MathTask()
    mc = {"options": ["15", "30", "45"], "answer": "B"}
    assert task.parse("... so the angle is \\boxed{B}", mc) == "B"
    assert task.parse("... so the angle is \\boxed{30^\\circ}", mc) == "B"
    assert task.parse("The answer is (C).", mc) == "C"
    assert task.gold(mc) == "B"
    free = {"options": [], "answer": "\\frac{1}{2}"}
    assert task.gold(free) == "0.5"
    assert task.parse("x = \\boxed{0.5}", free) == "0.5"
    assert task.score(task.parse("\\boxed{0.50003}", free), task.gold(free)) == 1.0  # rel. tol. 1e-4
    assert task.score(task.parse("\\boxed{0.51}", free), task.gold(free)) == 0.0
    assert task.score(None, "0.5") == 0.0
    logic = {"options": ["a", "b", "c", "d"], "answer": "A,C"}
    assert task.score(task.parse("\\boxed{A, C}", logic), task.gold(logic)) == 1.0
    assert task.score(task.parse("\\boxed{A}", logic), task.gold(logic)) == 0.0


def test_parse_without_options_and_letters_only_extract_choice_reads():
    task = MathTask()
    # options None (or absent): the normal form of the answer (class docstring)
    assert task.parse("x = \\boxed{\\frac{1}{2}}", {"options": None, "answer": "0.5"}) == "0.5"
    assert task.parse("x = \\boxed{0.5}", {"answer": "0.5"}) == "0.5"
    # no box, no "answer is", no number (answer_text None): the letter as extract_choice reads it
    mc = {"options": ["15", "30", "45"], "answer": "B"}
    assert task.parse("I choose option B.", mc) == "B"
    assert task.parse("<think>the middle one</think><answer>B</answer>", mc) == "B"


def test_prediction_columns_of_greedy_and_sampled_answers():
    samples = pd.DataFrame([{"options": [], "answer": "\\frac{1}{2}"}, {"options": ["15", "30", "45"], "answer": "B"}])
    # sampled: gold "0.5" and "B"; q1 ["0.5" right, "3" wrong], q2 ["A" wrong, "B" right]
    assert MathTask().prediction_columns([["0.5", "3"], ["A", "B"]], samples) == {
        "parsed": ["0.5", "A"], "parsed_samples": [["0.5", "3"], ["A", "B"]], "gold": ["0.5", "B"],
        "n_samples": [2, 2], "n_correct": [1, 1], "correct": [True, False]}
    # greedy: one answer each, unparsable None
    assert MathTask().prediction_columns(["0.5", None], samples) == {
        "parsed": ["0.5", None], "parsed_samples": [["0.5"], [None]], "gold": ["0.5", "B"],
        "n_samples": [1, 1], "n_correct": [1, 0], "correct": [True, False]}


def test_pass_at_k_with_exactly_k_completions():
    frame = pd.DataFrame({"n_samples": [2, 2], "n_correct": [1, 0]})
    # pass@1 = (1/2 + 0) / 2; pass@2 = (1 + 0) / 2 (n - c = 1 < k = 2: the pair holds the right one)
    assert MathTask(pass_k=(2,)).metrics(frame) == {"pass@1": pytest.approx(25.0), "pass@2": pytest.approx(50.0)}


def test_the_majority_vote_pools_notations_of_one_value():
    task = MathTask()
    row = {"options": [], "answer": "0.5"}
    answers = [task.parse(t, row) for t in ["\\boxed{\\frac{1}{2}}", "\\boxed{0.5}", "\\boxed{1/2}", "\\boxed{3}"]]
    assert answers == ["0.5", "0.5", "0.5", "3"]
    assert majority_vote(answers) == [1.0, 1.0, 1.0, 0.0]


def test_math_datasets_have_the_math_task_and_pass_k():
    assert isinstance(task_for("mathvision-math"), MathTask) and task_for("geoqa").family == "mcq"
    assert task_for("mathvista-math", pass_k=(1, 4)).pass_k == (1, 4)


class FakeEngine:
    """Stands in for the vLLM engine (no `generate`): 4 sampled completions per prompt."""

    def __init__(self, outputs):
        self.outputs = outputs

    def __call__(self, processor, prompts, images, systems=None):
        return [self.outputs[p] for p in prompts]


def test_sampled_evaluation_writes_pass_at_k(tmp_path):
    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    samples = pd.DataFrame([
        {"id": "q1", "image": "a.png", "prompt": "p1", "options": [], "answer": "7"},
        {"id": "q2", "image": "a.png", "prompt": "p2", "options": ["1", "2"], "answer": "B"},
        {"id": "q3", "image": "missing.png", "prompt": "p3", "options": [], "answer": "1"},
    ])
    engine = FakeEngine({"p1": ["\\boxed{7}", "\\boxed{8}", "\\boxed{9}", "no answer"],  # c = 1
                         "p2": ["\\boxed{B}"] * 4})                                     # c = 4
    task = MathTask(pass_k=(2,))
    sampling = {"n": 4, "temperature": 0.6, "top_p": 0.95, "seed": 0}
    predictions = evaluate_model(engine, None, samples, tmp_path, task, 16, 8, sampling=sampling)
    assert list(predictions["n_correct"]) == [1, 4, 0] and list(predictions["n_samples"]) == [4, 4, 4]
    assert predictions["error"].notna().tolist() == [False, False, True]  # q3's image: 4 empty completions
    summary = write_evaluation(predictions, task, tmp_path / "out", {}, 1.0)
    # pass@1 = (1/4 + 4/4 + 0) / 3 = 5/12; pass@2 = (0.5 + 1 + 0) / 3 = 1/2 (1 - C(3,2)/C(4,2) = 0.5 for q1)
    assert summary["metric"] == "pass@1" and summary["value"] == pytest.approx(100 * 5 / 12)
    assert summary["metrics"]["pass@2"] == pytest.approx(50.0)
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["metrics"]["pass@2"] == pytest.approx(50.0)
    stored = pd.read_parquet(tmp_path / "out" / "predictions.parquet")
    assert list(stored.iloc[0]["raw_outputs"]) == engine.outputs["p1"]


def test_pass_at_k_needs_k_completions():
    frame = pd.DataFrame({"n_samples": [1], "n_correct": [1]})
    with pytest.raises(ValueError, match="pass@2 needs at least 2 completions"):
        MathTask(pass_k=(2,)).metrics(frame)


def test_cli_sampling_options_are_checked_before_any_work():
    args = SimpleNamespace(temperature=0.6, top_p=0.95, n_samples=4, pass_k=(1, 4), seed=3)
    assert _eval_sampling(args) == {"n": 4, "temperature": 0.6, "top_p": 0.95, "seed": 3}
    assert _eval_sampling(SimpleNamespace(temperature=0.0, n_samples=1, pass_k=(1,), seed=0)) is None  # greedy
    with pytest.raises(ValueError, match="need a sampling temperature"):
        _eval_sampling(SimpleNamespace(temperature=0.0, n_samples=4, pass_k=(1,), seed=0))
    with pytest.raises(ValueError, match="exceeds --n-samples"):
        _eval_sampling(SimpleNamespace(temperature=0.6, top_p=1.0, n_samples=2, pass_k=(4,), seed=0))


def test_hf_sampling_gives_n_completions_per_prompt_reproducibly(tiny_model_dir):
    from ttrl_bench.generation.hf import generate_sampled
    from ttrl_bench.models.loading import load_model

    model, processor = load_model(str(tiny_model_dir))
    images = [Image.new("RGB", (56, 56), "white")] * 2
    sampling = {"n": 3, "temperature": 1.0, "top_p": 1.0, "seed": 7}
    first = generate_sampled(model, processor, ["Which digit?", "Which number?"], images, 4, 2, sampling)
    assert [len(texts) for texts in first] == [3, 3] and all(isinstance(t, str) for ts in first for t in ts)
    assert generate_sampled(model, processor, ["Which digit?", "Which number?"], images, 4, 2, sampling) == first


def test_sampled_predictions_keep_every_completion_and_fail_only_when_none_parses():
    from ttrl_bench.evaluation.evaluate import predictions_frame

    samples = pd.DataFrame([{"id": "q1", "options": [], "answer": "7"}, {"id": "q2", "options": [], "answer": "1"}])
    frame = predictions_frame([["no", "\\boxed{7}"], ["none", "nothing"]], samples, MathTask())
    assert frame["raw_output"].tolist() == ["no", "none"]  # the first completion
    assert [list(r) for r in frame["raw_outputs"]] == [["no", "\\boxed{7}"], ["none", "nothing"]]
    assert frame["parse_failure"].tolist() == [False, True]


def test_last_boxed_by_hand():
    """The last \\boxed{} or \\fbox{}, braces balanced; "\\boxed 5": the text after "\\boxed " up to "$"
    (Hendrycks MATH's remove_boxed), stripped; "\\boxed {5} so": the braces' content."""
    assert last_boxed("\\fbox{1} then \\fbox{2}") == "2"
    assert last_boxed("\\fbox{7}") == "7"
    assert last_boxed("so \\boxed 5$") == "5"
    assert last_boxed("\\boxed 5 apples$ and") == "5 apples"
    assert last_boxed("\\boxed {5} so") == "5"
    assert last_boxed("\\boxed 2{,}500$") == "2{,}500"  # a brace after the first character is content
    # two blanks: Hendrycks' last_boxed_only_string keeps "\\boxed " + " {5}", remove_boxed drops
    # "\\boxed ": " {5}", stripped here (ECHO's verl/utils/reward_score/ttrl_math/math_utils.py)
    assert last_boxed("\\boxed  {5}") == "{5}"


def test_letters_of_strips_markup_and_checks_every_letter():
    """"**B**" (Markdown bold) names B; "X" is option A's text; "A, E" with four options names an
    option that does not exist: None."""
    options = ["7", "12", "3", "9"]
    assert letters_of("**B**", options) == "B"
    assert letters_of("X", ["X", "Y"]) == "A"
    assert letters_of("A, E", options) is None


@pytest.mark.parametrize("answer, expected", [
    # _fix_fracs (Hendrycks' MATH `_fix_fracs`): a brace right after the numerator's digit is the
    # denominator's ("\frac1{72}" -> \frac{1}{72} = 0.0138888..., 10 significant digits)
    ("\\frac1{72}", "0.01388888889"),
    ("\\frac12x", "\\frac{1}{2}x"),                        # the text after the two digits stays
    ("\\frac{1}{2}+\\frac34", "\\frac{1}{2}+\\frac{3}{4}"),  # a braced \frac, then the next one too
    # math delimiters: only an enclosing pair of $ goes; a lone "$" stays (Hendrycks drops only "\$")
    ("$X$", "x"),
    ("$5", "$5"),
    # Hendrycks' _strip_string: line breaks, "\!", "\\" -> "\", tfrac -> frac
    ("\\frac{1}\n{2}", "0.5"),
    ("x\\!+\\!1", "x+1"),
    ("\\\\frac{1}{2}", "0.5"),                             # a doubled backslash (escaped twice)
    ("\\tfrac{x}{2}", "\\frac{x}{2}"),
    # degrees: each spelling goes
    ("30^{\\circ}", "30"), ("30\\circ", "30"), ("30\\degree", "30"),
    # "\$", a bare "%", the thin spaces "\," and "\;" go
    ("\\$5", "5"), ("50%", "50"), ("1\\,000", "1000"), ("1\\;000", "1000"),
    # "\text{ " starts a unit (Hendrycks' _remove_right_units): everything before it stays
    ("2 \\pi \\text{ cm}", "2\\pi"),
    # " ." -> " 0.", "{." -> "{0.", a leading "." -> "0." (Hendrycks), on answers that are no number
    ("(1, .5)", "(1,0.5)"), ("\\frac{.5}{x}", "\\frac{0.5}{x}"), (".5\\pi", "0.5\\pi"),
    # "k = 5" -> "5" when the left side, blanks included, has at most two characters (Hendrycks'
    # _strip_string drops the blanks only afterwards): "AB=5" -> "5", "AB = 5" kept, lower-cased
    ("AB=5", "5"), ("AB = 5", "ab=5"), ("x+y = 3", "x+y=3"),
    # a final period goes, and only periods; LaTeX keeps its case (\Delta is not \delta)
    ("x^2.", "x^2"), ("MAX.", "max"), ("\\Delta", "\\Delta"),
])
def test_normal_form_rules_by_hand(answer, expected):
    assert normalize_math_answer(answer) == expected
