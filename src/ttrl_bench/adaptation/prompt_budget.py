"""Adaptation's prompt budget: the protocol's image bound given to the processor, then every sample's prompt
counted before the trainer sees one (generation/budget.py); a sample over the budget is left out and named,
as verl's filter_overlong_prompts leaves it out in the TTRV and ECHO authors' runs. Its image is decoded as
evaluation decodes it (datasets/preprocessing.py decode_image); one that does not decode is left out and named
too, as evaluation makes it an error row."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..datasets.preprocessing import decode_image
from ..generation.budget import within_budget
from ..generation.vllm_settings import prompt_budget
from ..models.families import bound_processor, image_size_bound

log = logging.getLogger(__name__)


def over_budget_samples(processor, samples: pd.DataFrame, image_root: Path, max_prompt_tokens: int | None,
                        key: str) -> dict[str, str]:
    """{sample id: why} for the samples whose prompt exceeds `max_prompt_tokens` (config `key`) or whose image
    does not decode: adaptation drops them before its rollouts, as verl's filter_overlong_prompts does in the
    TTRV and ECHO authors' runs (their logs' data.filter_overlong_prompts: True; ECHO geometry3k.sh:48), and
    they are error rows."""
    errors = {}
    for sample in samples.to_dict("records"):
        _, error = within_budget(processor, sample, decode_image(image_root, sample), max_prompt_tokens, key)
        if error:
            log.warning("%s", error)
            errors[sample["id"]] = error
    return errors


def bounded_rollouts(config, processor, method: dict, samples, image_root: Path, protocol: str | None = None):
    """(method with its `image_size_bound`, the samples whose prompts fit, {id: why} of those left out): the
    protocol's image bound given to the processor (and through the method to vLLM's rollouts), then the
    prompt budget applied to every sample before the trainer sees one (generation/budget.py), and a sample whose
    image does not decode left out too."""
    size = image_size_bound(config, protocol or method.get("protocol", "clean"))
    bound_processor(processor, size)
    errors = over_budget_samples(processor, samples, image_root, prompt_budget(method.get("vllm")), "adaptation.vllm")
    if errors and len(errors) == len(samples):
        raise ValueError(f"every adaptation sample is left out (its prompt exceeds adaptation.vllm.max_prompt_tokens "
                         f"or its image does not decode): {next(iter(errors.values()))}")
    return {**method, "image_size_bound": size}, samples[~samples["id"].isin(list(errors))], errors
