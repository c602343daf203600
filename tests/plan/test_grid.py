"""plan/grid.py: the job grid's evaluation flags (SAM2's multimask, several pass@k) reaching the evaluation
command. (The grid's jobs counted by hand are in test_plan.py and test_jobs.py.)"""

from __future__ import annotations

from tests.support.plan import demo_plan


def test_sam2_multimask_and_several_pass_k_reach_the_evaluation_command(tmp_path, monkeypatch):
    """eval_flags passes evaluation.grounding.sam2_multimask where set (`single`: the schema's null default
    sends none) and joins evaluation.math.pass_k with commas (the CLI splits it there). Grounding: the demo's
    64 tokens, 8 samples, empty_mask_iou zero (test_plan.py's demo flags) then --sam2-multimask single.
    Math (mathvista-math in the demo grid): the schema's math defaults (workflow/schemas/config.schema.yaml:
    max_new_tokens 3072 l.315, samples all l.321, temperature 0.6 l.326, top_p 0.95 l.335, prompt training,
    grader exact), n_samples 4 and pass_k [1, 4] from the config."""
    monkeypatch.chdir(tmp_path)
    plan = demo_plan("evaluation: {grounding: {sam2_multimask: single}}")
    assert plan.eval_flags("demo-digit-scenes", "n20_random") == (
        "--max-new-tokens 64 --eval-samples 8 --exclude-adaptation-samples --empty-mask-iou zero "
        "--sam2-multimask single --protocol clean")
    plan = demo_plan("datasets: [demo-digits, mathvista-math]\nevaluation: {math: {n_samples: 4, pass_k: [1, 4]}}")
    assert plan.eval_flags("mathvista-math", "n20_random") == (
        "--max-new-tokens 3072 --eval-samples all --exclude-adaptation-samples --prompt training --grader exact "
        "--protocol clean --temperature 0.6 --top-p 0.95 --n-samples 4 --pass-k 1,4")
