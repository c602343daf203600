"""transformers' greedy / sampled generation (generation/hf.py) and vLLM's offline engine
(generation/vllm_offline.py) against stand-ins, so each output's prompt is known: a prompt "pK" is
the token ids [K, K], and its j-th completion is the ids [10 K + j, 9], decoded "10K+j.9". A
completion of prompt 1 is "1j.9", of prompt 2 "2j.9": a group holding another prompt's completion
shows in the text (issue 39: pass@k must score each question's own samples).

transformers' `generate(..., num_return_sequences=n)` expands the batch with
`input_ids.repeat_interleave(n, dim=0)` (GenerationMixin._expand_inputs_for_generation): the rows are
prompt 0's n completions, then prompt 1's n, ...; the stand-in model returns them in that order."""

import sys
import types

import pytest
import torch

from ttrl_bench.generation import vllm_offline
from ttrl_bench.generation.hf import chat_messages, chat_prompt, generate_greedy, generate_sampled, generate_samples


class Batch(dict):
    """The processor's BatchFeature: `.to(device)` records the device."""

    moved_to = None

    def to(self, device):
        self.moved_to = device
        return self


class Processor:
    """Chat template "<system or ->|<text>"; "pK" tokenizes to [K, K]; decoding joins the ids with "."."""

    def __init__(self):
        self.templates, self.calls, self.batches, self.decode_kwargs = [], [], [], []

    def apply_chat_template(self, messages, **kwargs):
        self.templates.append((messages, kwargs))
        system = messages[0]["content"][0]["text"] if messages[0]["role"] == "system" else "-"
        return f"{system}|{messages[-1]['content'][1]['text']}"

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        batch = Batch(input_ids=torch.tensor([[int(t.split("|p")[1])] * 2 for t in kwargs["text"]]))
        self.batches.append(batch)
        return batch

    def batch_decode(self, rows, **kwargs):
        self.decode_kwargs.append(kwargs)
        return [".".join(str(int(t)) for t in row) for row in rows]


class Model:
    """`generate`: each prompt row's n completions in a row ([10 K + j, 9] after the prompt), as
    transformers orders them; records its keyword arguments, the torch seed and the autocast."""

    device = torch.device("cpu")

    def __init__(self, dtype=torch.bfloat16):
        self.weight = torch.zeros(1, dtype=dtype)
        self.calls = []

    def parameters(self):
        yield self.weight

    def generate(self, input_ids, **kwargs):
        self.calls.append({**kwargs, "seed": torch.initial_seed(), "autocast": torch.is_autocast_enabled("cpu")})
        n = kwargs.get("num_return_sequences", 1)
        return torch.tensor([row.tolist() + [int(row[0]) * 10 + j, 9] for row in input_ids for j in range(n)])


def test_chat_messages_put_the_system_turn_first_and_the_image_before_the_text():
    image = object()
    assert chat_messages("Q?") == [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Q?"}]}]
    assert chat_messages("Q?", "S", image) == [
        {"role": "system", "content": [{"type": "text", "text": "S"}]},
        {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "Q?"}]}]
    assert chat_messages("Q?", "")[0]["role"] == "user"  # an empty system prompt is no system turn
    processor = Processor()
    assert chat_prompt(processor, "p3", "S") == "S|p3"
    assert processor.templates == [(chat_messages("p3", "S"), {"add_generation_prompt": True})]


def test_sampled_completions_are_grouped_by_their_own_prompt():
    """Three prompts, batches of 2 (two prompts in the first batch), 3 completions each: prompt K's
    group is exactly "K0.9", "K1.9", "K2.9" (worked out from the stand-in's ids, not read back)."""
    model, processor = Model(), Processor()
    out = generate_sampled(model, processor, ["p1", "p2", "p3"], ["i1", "i2", "i3"], 5, 2,
                           {"n": 3, "temperature": 0.6, "top_p": 0.9, "top_k": 50, "seed": 11}, ["s1", None, "s3"])
    assert out == [["10.9", "11.9", "12.9"], ["20.9", "21.9", "22.9"], ["30.9", "31.9", "32.9"]]
    assert [c["text"] for c in processor.calls] == [["s1|p1", "-|p2"], ["s3|p3"]]
    assert processor.calls[0] == {"text": ["s1|p1", "-|p2"], "images": ["i1", "i2"], "return_tensors": "pt",
                                  "padding": True}
    assert processor.calls[1]["images"] == ["i3"]
    assert [b.moved_to for b in processor.batches] == [model.device] * 2
    assert processor.decode_kwargs == [{"skip_special_tokens": True}] * 2
    settings = {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 50, "num_return_sequences": 3,
                "max_new_tokens": 5, "seed": 11, "autocast": False}
    assert model.calls == [settings, settings]


def test_sampling_defaults_two_completions_one_batch():
    """No seed, top_p or top_k in the config: seed 0, top_p 1.0, top_k 0 (no cut); no system prompts.
    Two prompts of one batch, n = 2: rows 0-1 are prompt 4's, rows 2-3 prompt 5's."""
    model, processor = Model(), Processor()
    out = generate_sampled(model, processor, ["p4", "p5"], ["a", "b"], 7, 8, {"n": "2", "temperature": "1"})
    assert out == [["40.9", "41.9"], ["50.9", "51.9"]]
    assert [c["text"] for c in processor.calls] == [["-|p4", "-|p5"]]
    assert model.calls == [{"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "num_return_sequences": 2,
                            "max_new_tokens": 7, "seed": 0, "autocast": False}]
    torch.manual_seed(123)
    one_each = generate_sampled(model, processor, ["p4", "p5"], ["a", "b"], 7, 8,
                                {"n": 1, "temperature": 1, "top_k": None})
    assert one_each == [["40.9"], ["50.9"]]  # n = 1: one group per prompt still
    assert (model.calls[-1]["seed"], model.calls[-1]["top_k"]) == (0, 0)


def test_generation_runs_in_the_training_autocast(monkeypatch):
    """fp32 master weights under TTRL_BENCH_AUTOCAST=bf16: every generate call runs inside CPU autocast."""
    monkeypatch.setenv("TTRL_BENCH_AUTOCAST", "bf16")
    for generate in (lambda m: generate_greedy(m, Processor(), ["p1"], ["i"], 3, 1, progress=False),
                     lambda m: generate_sampled(m, Processor(), ["p1"], ["i"], 3, 1, {"n": 1, "temperature": 1.0}),
                     lambda m: generate_samples(m, Processor(), "p1", "i", 1, 1.0, 3)):
        model = Model(torch.float32)
        generate(model)
        assert model.calls[0]["autocast"] is True


def test_greedy_decodes_each_batch_after_its_prompt(capsys):
    """Batches of 2 over 3 prompts; each output is its own prompt's first completion "K0.9"."""
    model, processor = Model(), Processor()
    out = generate_greedy(model, processor, ["p1", "p2", "p3"], ["i1", "i2", "i3"], 4, 2, ["s1", None, "s3"],
                          progress=False)
    assert out == ["10.9", "20.9", "30.9"]
    assert processor.calls == [
        {"text": ["s1|p1", "-|p2"], "images": ["i1", "i2"], "return_tensors": "pt", "padding": True},
        {"text": ["s3|p3"], "images": ["i3"], "return_tensors": "pt", "padding": True}]
    assert [b.moved_to for b in processor.batches] == [model.device] * 2
    assert model.calls == [{"do_sample": False, "max_new_tokens": 4, "seed": model.calls[0]["seed"],
                            "autocast": False}] * 2
    assert processor.decode_kwargs == [{"skip_special_tokens": True}] * 2
    assert capsys.readouterr().err == ""  # progress=False: no bar
    assert generate_greedy(model, processor, ["p6"], ["i"], 4, 1) == ["60.9"]  # no systems; the bar by default
    err = capsys.readouterr().err
    assert err.startswith("\rgreedy eval: ") and "1/1" in err and "batch/s" in err


def test_samples_of_one_prompt():
    model, processor = Model(), Processor()
    assert generate_samples(model, processor, "p7", "img", 3, 0.8, 6, system="S") == ["70.9", "71.9", "72.9"]
    assert processor.calls == [{"text": ["S|p7"], "images": ["img"], "return_tensors": "pt"}]
    assert processor.batches[0].moved_to == model.device
    assert processor.decode_kwargs == [{"skip_special_tokens": True}]
    assert model.calls == [{"do_sample": True, "temperature": 0.8, "max_new_tokens": 6, "num_return_sequences": 3,
                            "top_k": 0, "top_p": 1.0, "seed": model.calls[0]["seed"], "autocast": False}]
    generate_samples(model, processor, "p7", "img", 1, 0.8, 6)
    assert processor.calls[-1]["text"] == ["-|p7"]


@pytest.fixture
def fake_vllm(monkeypatch):
    """A `vllm` module: `LLM` records its settings and answers request "…|pK" with n outputs whose
    token ids are (10 K + j, 9); `SamplingParams` keeps its keyword arguments."""
    module = types.ModuleType("vllm")

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class LLM:
        def __init__(self, **kwargs):
            self.kwargs, self.requests = kwargs, []

        def generate(self, requests, params):
            self.requests.append((requests, params.kwargs))
            n = params.kwargs.get("n", 1)
            prompt_numbers = [int(r["prompt"].split("|p")[1]) for r in requests]
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=(k * 10 + j, 9)) for j in range(n)])
                    for k in prompt_numbers]

    module.LLM, module.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def test_vllm_greedy_builds_one_engine_and_decodes_token_ids(fake_vllm):
    engine = vllm_offline.VllmGreedy("/m", {"max_num_seqs": 4}, 16, seed=5)
    assert engine.llm.kwargs == {"model": "/m", "max_model_len": 4096 + 16, "gpu_memory_utilization": 0.9,
                                 "enforce_eager": True, "dtype": "auto", "limit_mm_per_prompt": {"image": 1},
                                 "mm_processor_kwargs": None, "seed": 5, "max_num_seqs": 4}
    processor = Processor()
    assert engine(processor, ["p1", "p2"], ["i1", "i2"], ["S", None]) == ["10.9", "20.9"]
    (requests, params), = engine.llm.requests
    assert requests == [{"prompt": "S|p1", "multi_modal_data": {"image": "i1"}},
                        {"prompt": "-|p2", "multi_modal_data": {"image": "i2"}}]
    assert params == {"temperature": 0.0, "max_tokens": 16, "detokenize": False}
    assert processor.decode_kwargs == [{"skip_special_tokens": True}]
    assert engine(processor, ["p3"], ["i3"]) == ["30.9"]  # no systems
    assert engine.llm.requests[-1][0] == [{"prompt": "-|p3", "multi_modal_data": {"image": "i3"}}]
    assert vllm_offline.VllmGreedy("/m", None, 8).llm.kwargs["seed"] == 0


def test_vllm_sampling_groups_each_prompts_completions(fake_vllm):
    engine = vllm_offline.VllmGreedy("/m", None, 12, sampling={"n": "3", "temperature": "0.6", "top_p": 0.9,
                                                               "top_k": "50", "seed": 4})
    processor = Processor()
    assert engine(processor, ["p1", "p2"], ["i1", "i2"]) == [["10.9", "11.9", "12.9"], ["20.9", "21.9", "22.9"]]
    assert engine.llm.requests[0][1] == {"n": 3, "temperature": 0.6, "top_p": 0.9, "seed": 4, "max_tokens": 12,
                                         "detokenize": False, "top_k": 50}
    assert processor.decode_kwargs == [{"skip_special_tokens": True}] * 2
    # unset top_p / seed / top_k: 1.0, 0 and vLLM's own (no top_k argument)
    engine = vllm_offline.VllmGreedy("/m", None, 12, sampling={"n": 2, "temperature": 1.0, "top_k": 0})
    assert engine(processor, ["p5"], ["i5"]) == [["50.9", "51.9"]]
    assert engine.llm.requests[0][1] == {"n": 2, "temperature": 1.0, "top_p": 1.0, "seed": 0, "max_tokens": 12,
                                         "detokenize": False}
