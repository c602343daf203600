"""One image bound per model and protocol for both backends, and the prompt budget per item
(models/families.py image_size_bound, generation/budget.py, evaluation/evaluate.py, adaptation/prompt_budget.py).

Qwen2.5-VL's real processor bounds (its preprocessor_config.json: min_pixels 3136, max_pixels 12845056, patch 14,
merge 2) put a 2592x1944 photo at 6,417 image tokens: smart_resize rounds each side to 28 px squares, 1944 ->
69 x 28, 2592 -> 93 x 28, 69 x 93 = 6,417 (and 1700x2200: 61 x 79 = 4,819), past the 4,096-token prompt
budget. vLLM then refused the whole request list; these tests run the real processor under HF and under a
stand-in vLLM engine that refuses as vLLM does."""

import sys
import types
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from PIL import Image

from ttrl_bench.evaluation import evaluate
from ttrl_bench.evaluation.tasks import MCQTask
from ttrl_bench.generation.budget import over_budget, prompt_tokens
from ttrl_bench.generation.hf import chat_prompt
from ttrl_bench.generation.vllm_settings import bounded_settings, collapse_prompts_before_generate
from ttrl_bench.models.families import bound_processor, image_size_bound, max_image_tokens
from ttrl_bench.models.tiny import train_tokenizer
from ttrl_bench.models.tiny_families import chat_template, family

QWEN25 = SimpleNamespace(model_type="qwen2_5_vl", vision_config=SimpleNamespace(patch_size=14, spatial_merge_size=2))
CHECKPOINT_SIZE = {"shortest_edge": 3136, "longest_edge": 12845056}  # Qwen2.5-VL-7B-Instruct's preprocessor_config
BIG, PAGE = (2592, 1944), (1700, 2200)


@pytest.fixture
def qwen_processor():
    """A Qwen2.5-VL processor (transformers' classes, our tiny tokenizer) with the checkpoint's own bounds."""
    tokenizer = train_tokenizer(["which option is right", "answer with a letter"], "qwen2_5_vl", vocab_size=300)
    spec = family("qwen2_5_vl")
    processor = spec.processor(tokenizer, chat_template(spec.image_part), 56, True)
    processor.image_processor.size = dict(CHECKPOINT_SIZE)
    return processor


def test_the_bound_per_family_and_protocol_worked_by_hand():
    """authors: 4 to 16,384 tokens of 28 x 28 px (verl qwen_vl.py:33-34), the checkpoint's own; clean: 3,072 x 784."""
    assert image_size_bound(QWEN25, "authors") == CHECKPOINT_SIZE
    assert image_size_bound(QWEN25, "clean") == {"shortest_edge": 3136, "longest_edge": 2408448}
    qwen3 = SimpleNamespace(model_type="qwen3_vl", vision_config=SimpleNamespace(patch_size=16, spatial_merge_size=2))
    assert image_size_bound(qwen3, "clean") == {"shortest_edge": 4 * 1024, "longest_edge": 3072 * 1024}
    internvl = SimpleNamespace(model_type="internvl", vision_config=SimpleNamespace(patch_size=14))
    assert image_size_bound(internvl, "authors") == {}  # 12 tiles + thumbnail bound its tokens
    assert (max_image_tokens(QWEN25, "authors"), max_image_tokens(internvl, "clean")) == (16384, 13 * 256 + 2)
    with pytest.raises(ValueError, match="unknown protocol 'ours'"):
        image_size_bound(QWEN25, "ours")


def test_token_counts_under_the_checkpoint_bounds_are_the_processors_expansion(qwen_processor):
    for size, image_tokens in [(BIG, 6417), (PAGE, 4819), ((100, 80), 12)]:  # 100x80 -> 84 x 112 px: 3 x 4
        image = Image.new("RGB", size)
        total, counted = prompt_tokens(qwen_processor, "which option is right", image, "answer with a letter")
        expanded = qwen_processor(text=[chat_prompt(qwen_processor, "which option is right", "answer with a letter")],
                                  images=[image], return_tensors="pt")["input_ids"]
        assert (counted, total) == (image_tokens, expanded.shape[1])


def _samples(tmp_path):
    Image.new("RGB", BIG).save(tmp_path / "big.png")
    Image.new("RGB", (100, 80)).save(tmp_path / "small.png")
    return pd.DataFrame([{"id": "big", "image": "big.png", "prompt": "which option is right", "options": ["a", "b"],
                          "answer": "A"},
                         {"id": "small", "image": "small.png", "prompt": "which option is right",
                          "options": ["a", "b"], "answer": "A"}])


class FakeLLM:
    """vllm.LLM as far as this path uses it: the HF processor with mm_processor_kwargs expands each request,
    and one prompt over max_model_len refuses the whole list (vLLM's message)."""

    seen = []

    def __init__(self, model, max_model_len, mm_processor_kwargs=None, **kwargs):
        self.max_model_len, self.kwargs = max_model_len, mm_processor_kwargs or {}

    def generate(self, requests, params):
        processor = FakeLLM.processor
        grids = [processor.image_processor(images=[r["multi_modal_data"]["image"]], return_tensors="pt",
                                           **self.kwargs)["image_grid_thw"][0].tolist() for r in requests]
        lengths = [len(processor.tokenizer(r["prompt"])["input_ids"]) - 1 + t * h * w // 4 for r, (t, h, w) in
                   zip(requests, grids)]
        for n in lengths:
            if n > self.max_model_len:
                raise ValueError(f"The decoder prompt (length {n}) is longer than the maximum model length of "
                                 f"{self.max_model_len}.")
        FakeLLM.seen.append(grids)
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[0])]) for _ in requests]


@pytest.fixture
def fake_vllm(monkeypatch, qwen_processor):
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.processor, FakeLLM.seen = qwen_processor, []
    return FakeLLM


class FakeHF:
    """A transformers model as generate_greedy uses it: records the image grids it was given."""

    device = torch.device("cpu")

    def __init__(self):
        self.grids = []

    def generate(self, input_ids, image_grid_thw, **kwargs):
        self.grids.append(image_grid_thw.tolist())
        return torch.cat([input_ids, torch.zeros(len(input_ids), 1, dtype=input_ids.dtype)], dim=1)


def _prompt_of_big(processor) -> int:
    """6,417 image tokens in place of the chat prompt's one placeholder token."""
    return 6417 + len(processor.tokenizer(chat_prompt(processor, "which option is right"))["input_ids"]) - 1


def _bounded(processor, protocol):
    settings, size = bounded_settings({}, image_size_bound(QWEN25, protocol))
    bound_processor(processor, size)
    return settings


def test_a_2592x1944_image_without_the_check_kills_the_whole_vllm_request_list(tmp_path, fake_vllm, qwen_processor):
    """The failure as the issue found it: no budget check, the checkpoint's bounds, the job dies."""
    settings = _bounded(qwen_processor, "authors")
    length = _prompt_of_big(qwen_processor)
    with pytest.raises(ValueError, match=rf"decoder prompt \(length {length}\) is longer than the maximum model length"):
        evaluate.evaluate_model("/m", qwen_processor, _samples(tmp_path), tmp_path, MCQTask(), 8, 2, settings)


@pytest.mark.parametrize("backend", ["hf", "vllm"])
def test_over_budget_is_an_error_row_under_authors_and_bounded_tokens_under_clean(tmp_path, fake_vllm, qwen_processor,
                                                                                  backend):
    """authors (the checkpoint's bound): the 2592x1944 image is an error row naming the item and its tokens,
    the small one is answered (its prompt: 6,417 tokens for one placeholder); clean: both run, the big one at 96 x 128 patches = 3,072 tokens (1944 x 2592 scaled by
    sqrt(5,038,848 / 2,408,448) is 1344 x 1792 px), the same grid in both backends."""
    for protocol, grid, errors in [("authors", None, 1), ("clean", [1, 96, 128], 0)]:
        settings = _bounded(qwen_processor, protocol)
        hf = FakeHF()
        model = hf if backend == "hf" else "/m"
        frame = evaluate.evaluate_model(model, qwen_processor, _samples(tmp_path), tmp_path, MCQTask(), 8, 2, settings,
                                        max_prompt_tokens=settings["max_prompt_tokens"])
        assert frame["error"].notna().sum() == errors
        seen = hf.grids[0] if backend == "hf" else fake_vllm.seen[-1]
        if grid is None:
            assert frame["error"][0] == (f"sample big: prompt of {_prompt_of_big(qwen_processor)} tokens (6417 image tokens, image 2592x1944) "
                                         "exceeds the prompt budget of 4096 (evaluation.vllm.max_prompt_tokens)")
            assert seen == [[1, 6, 8]]  # only the small image was sent: 84 x 112 px
        else:
            assert seen == [grid, [1, 6, 8]]


def test_the_config_s_own_size_wins_and_reaches_both_backends(qwen_processor):
    settings, size = bounded_settings({"mm_processor_kwargs": {"size": {"longest_edge": 784 * 100}}},
                                      image_size_bound(QWEN25, "clean"))
    assert size == settings["mm_processor_kwargs"]["size"] == {"longest_edge": 78400}
    bound_processor(qwen_processor, size)
    assert qwen_processor.image_processor.size["longest_edge"] == 78400
    assert over_budget(qwen_processor, "x", "q", Image.new("RGB", BIG), None, "k") is None  # no budget: no check


def test_rollout_prompts_over_budget_are_left_out_by_name(tmp_path, qwen_processor):
    """Adaptation drops an over-budget sample before the trainer sees it (verl's filter_overlong_prompts in the
    authors' runs) and names it; the method carries the bound to vLLM's rollouts; all over budget is refused."""
    from ttrl_bench.adaptation.prompt_budget import bounded_rollouts

    samples = _samples(tmp_path)
    method, fits, errors = bounded_rollouts(QWEN25, qwen_processor, {"vllm": {}}, samples, tmp_path, "authors")
    assert (list(fits["id"]), method["image_size_bound"]) == (["small"], CHECKPOINT_SIZE)
    assert list(errors) == ["big"] and f"prompt of {_prompt_of_big(qwen_processor)} tokens" in errors["big"] and "adaptation.vllm" in errors["big"]
    _, fits, errors = bounded_rollouts(QWEN25, qwen_processor, {"vllm": {}, "protocol": "clean"}, samples, tmp_path)
    assert (len(fits), errors) == (2, {})
    with pytest.raises(ValueError, match="every adaptation sample is left out.*exceeds the prompt budget"):
        bounded_rollouts(QWEN25, qwen_processor, {"vllm": {}}, samples.head(1), tmp_path, "authors")


def test_colocated_rollouts_give_vllm_the_bound_per_request():
    sent = []
    llm = SimpleNamespace(generate=lambda prompts, *a, **k: sent.extend(prompts))
    collapse_prompts_before_generate(llm, 9, size={"longest_edge": 784})
    llm.generate([{"prompt_token_ids": [1, 9, 9, 2], "multi_modal_data": {"image": "im"}}])
    assert sent == [{"prompt_token_ids": [1, 9, 2], "multi_modal_data": {"image": "im"},
                     "mm_processor_kwargs": {"size": {"longest_edge": 784}}}]


def test_the_prompt_filter_decodes_each_image_as_evaluation_does(tmp_path, qwen_processor):
    """The filter counts the image evaluation would send (decode_image): a 20x40 image with min_side 100 (the
    ECHO authors' enlargement) is counted at 100x100 -> smart_resize 112x112 = 4 x 4 = 16 image tokens, not at
    20x40 (-> 56x84 = 2 x 3 = 6). With a budget of the chat text plus 12 image tokens, it is over; the 100x80
    image (84 x 112 px, 3 x 4 = 12) fits. A truncated PNG is named, not raised, with evaluation's reason."""
    from ttrl_bench.adaptation.prompt_budget import over_budget_samples

    Image.new("RGB", (20, 40)).save(tmp_path / "tiny.png")
    Image.new("RGB", (100, 80)).save(tmp_path / "small.png")
    Image.linear_gradient("L").save(tmp_path / "whole.png")
    (tmp_path / "broken.png").write_bytes((tmp_path / "whole.png").read_bytes()[:200])  # cut inside its pixels
    samples = pd.DataFrame([{"id": i, "image": f"{i}.png", "prompt": "which option is right", "options": ["a", "b"],
                             "answer": "A", "min_side": side} for i, side in [("tiny", 100), ("broken", None),
                                                                            ("small", None)]])
    text = len(qwen_processor.tokenizer(chat_prompt(qwen_processor, "which option is right"))["input_ids"]) - 1
    budget = text + 12
    errors = over_budget_samples(qwen_processor, samples, tmp_path, budget, "adaptation.vllm")
    assert list(errors) == ["tiny", "broken"]
    assert errors["tiny"] == (f"sample tiny: prompt of {text + 16} tokens (16 image tokens, image 100x100) exceeds "
                              f"the prompt budget of {budget} (adaptation.vllm.max_prompt_tokens)")
    assert errors["broken"].startswith(f"sample broken: image {tmp_path / 'broken.png'} does not decode: ")
    # counted at 20x40 (no min_side), the tiny image fits: 6 image tokens
    unenlarged = over_budget_samples(qwen_processor, samples.drop(columns="min_side"), tmp_path, budget, "k")
    assert list(unenlarged) == ["broken"]
    # evaluation's error rows for the same samples: the same decoded images, the same reasons
    frame = evaluate.evaluate_model(FakeHF(), qwen_processor, samples, tmp_path, MCQTask(), 8, 2,
                                    max_prompt_tokens=budget)
    assert frame["error"][1] == errors["broken"]
    assert frame["error"][0] == errors["tiny"].replace("adaptation.vllm", "evaluation.vllm")
    assert pd.isna(frame["error"][2])  # answered
