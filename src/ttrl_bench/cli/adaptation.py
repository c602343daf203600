"""Adaptation: `adapt` (step 2, test-time RL on a dataset's samples, the adapted weights saved)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .common import adaptation_samples, add_method_json, add_run_args, log, method_spec, run_identity


def cmd_adapt(args) -> None:
    from ..adaptation.grpo import adapt
    from ..datasets import authors_items
    from ..datasets.registry import get_dataset
    from ..evaluation.tasks import task_for
    from ..generation.precision import adaptation_precision
    from ..models.families import use_chat_template
    from ..models.loading import checkpoint_dtype, load_model
    from ..adaptation.prompt_budget import bounded_rollouts
    from ..runs.kill_points import kill_point
    from ..runs.processes import process_state
    from ..runs.provenance import provenance

    method = method_spec(args)
    hp = method.get("hyperparameters", {})
    out = Path(args.out)
    split = get_dataset(args.dataset).manifest_split
    samples = adaptation_samples(Path(args.data), args.n_adapt, args.seed, args.sampling, split)
    task = task_for(args.dataset, choice_parser=hp.get("answer_parser", "robust"))  # the votes' parser
    if hp.get("chat_template", "model") == "authors" and task.family == "mcq":
        samples = samples.assign(prompt=authors_items.authors_texts(samples))
    log.info("adapting %s with %s on %d %s samples of %s", args.model_name, args.method, len(samples), split,
             args.dataset)
    stored = checkpoint_dtype(args.model_source)
    model, processor = load_model(args.model_source, dtype="fp32")  # master weights, whatever is stored
    log.info("chat template: %s", use_chat_template(processor, model.config, hp.get("chat_template", "model")))
    method, samples, over_budget = bounded_rollouts(model.config, processor, method, samples, Path(args.data))
    start = time.perf_counter()
    train_log = adapt(model, processor, samples, Path(args.data), method, out, args.seed, task=task,
                      save_dtype=stored, save_to=out / "model")
    seconds = time.perf_counter() - start
    if not process_state().is_main_process:
        return  # one process writes the job's files
    train_log.to_parquet(out / "train_log.parquet", index=False)
    if train_log.attrs["verifications"]:  # T3RL: the verifier's decision on every rollout
        import pandas as pd

        pd.DataFrame(train_log.attrs["verifications"]).to_parquet(out / "verifications.parquet", index=False)
    kill_point("adapt-outputs")  # tests/workflow/test_resume.py: a kill between the job's outputs
    meta = {
        **run_identity(args, args.dataset, args.dataset),
        "adapt_seconds": seconds,
        "adapt_sample_ids": list(samples["id"]),
        "image_size_bound": method["image_size_bound"],
        "over_budget": over_budget,  # samples left out: prompt over adaptation.vllm.max_prompt_tokens, or image bad
        "optimizer_steps": train_log.attrs["optimizer_steps"],
        "skipped_steps": train_log.attrs["skipped_steps"],  # non-finite gradient norms, not applied
        "losses": train_log.attrs["losses"],
        "learning_rates": train_log.attrs["learning_rates"],  # per optimizer step (verl logs actor/lr per round)
        "rollout_temperature": train_log.attrs["temperature"],
        "processes": process_state().num_processes,
        "weights_changed": train_log.attrs["weights_changed"],
        "weights_changed_saved": train_log.attrs["weights_changed_saved"],
        "saved_dtype": str(stored).removeprefix("torch."),
        "precision": adaptation_precision(model),
        **provenance({"method": method, "model_source": args.model_source, "n_adapt": args.n_adapt,
                      "sampling": args.sampling, "seed": args.seed}),
    }
    (out / "run.json").write_text(json.dumps(meta, indent=2, default=str))
    log.info("adapted in %.1f s", seconds)


def _add_adapt(sub) -> None:
    p = sub.add_parser("adapt", help="step 2: test-time RL with GRPO on a dataset's test prompts")
    add_run_args(p, "--dataset")
    add_method_json(p)
    p.set_defaults(func=cmd_adapt)


PARSERS = {"adapt": _add_adapt}
