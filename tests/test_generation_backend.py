"""Backend choice for rollouts and greedy evaluation: explicit, and an error naming the key."""

import pytest

from ttrl_bench.cli import main
from ttrl_bench.generation.backend import choose_backend, vllm_unavailable_reason

VLLM_CAN_RUN = vllm_unavailable_reason() is None


@pytest.mark.skipif(VLLM_CAN_RUN, reason="checks the refusal where vLLM cannot run (this machine: no GPU)")
def test_vllm_where_it_cannot_run_names_the_config_key(tmp_path, caplog):
    assert choose_backend("auto", "evaluation.backend") == "hf"
    with pytest.raises(ValueError, match="config key evaluation.backend is 'vllm'"):
        choose_backend("vllm", "evaluation.backend")
    # the evaluate command stops before loading anything, with the same message and exit code 1
    code = main(["evaluate", "--model-source", "x/y", "--model-name", "m", "--method", "zero-shot", "--dataset",
                 "demo-digits", "--data", str(tmp_path), "--out", str(tmp_path / "out"), "--backend", "vllm"])
    assert code == 1 and "evaluation.backend is 'vllm'" in caplog.text


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="evaluation.backend must be auto, hf or vllm"):
        choose_backend("sglang", "evaluation.backend")
