"""Evaluation: `evaluate` (step 3, a model scored on a dataset's test samples) and
`adapt-per-sample` (steps 2+3 in one job: VR-TTRL adapts on each sample it predicts)."""

from __future__ import annotations

import json
from pathlib import Path

from .common import (_n_adapt, adaptation_samples, add_method_json, add_run_args, log, method_spec,
                     run_identity)


def _evaluation_set(data_dir: Path, args):
    """The test samples a table row is scored on, the same for every method of a dataset:
    MCQ: the test split minus the adaptation samples (if excluded); grounding: `--eval-samples`
    seeded test samples (VR-TTRL: 200 per split), which per-sample methods also adapt on."""
    from ..datasets import authors_items
    from ..datasets.prepare import load_manifest
    from ..datasets.sampling import select_adaptation_samples
    from ..evaluation.tasks import MathTask, authors_math_prompts, task_for

    task = task_for(args.dataset, args.sam2, data_dir, args.empty_mask_iou, args.choice_parser, args.pass_k,
                    getattr(args, "input_size", None), getattr(args, "query_form", "as_given"),
                    getattr(args, "sam2_multimask", "best_score"), grader=getattr(args, "grader", "exact"))
    test = load_manifest(data_dir, "test")
    if getattr(args, "prompt", "training") == "authors" and isinstance(task, MathTask):
        test = authors_math_prompts(test)  # the ECHO authors' evaluation prompt (config evaluation.math.prompt)
    if getattr(args, "chat_template", "model") == "authors" and task.family == "mcq":
        test = test.assign(prompt=authors_items.authors_texts(test))  # the text their template receives
    if task.family == "mcq" and args.exclude_adaptation_samples:
        # the authors' adaptation items are rows of their own (other options for the same image): held out by image
        column = "source_id" if "item_id" in test else "id"
        held_out = set(adaptation_samples(data_dir, args.n_adapt, args.seed, args.sampling)[column])
        test = test[~test[column].isin(held_out)].reset_index(drop=True)
    if args.eval_samples != "all" and args.eval_samples > len(test):
        raise ValueError(f"--eval-samples {args.eval_samples} (config evaluation.{task.family}.samples): {args.dataset} "
                         f"has {len(test)} test samples to evaluate")
    if args.eval_samples != "all" and args.eval_samples < len(test):
        test = select_adaptation_samples(test, args.eval_samples, args.seed)
    if task.family == "grounding":  # the query's form and the image size the model is shown (VR-TTRL)
        test = task.view(test)
    if getattr(args, "min_image_side", None):  # the ECHO authors' evaluation enlarges small images (decode_image)
        test = test.assign(min_side=args.min_image_side)
    return test, task


def _items_of(data_dir: Path) -> str:
    """Whose test items a prepared dataset holds: "ttrv-authors" (their item lists) or "ours"."""
    stats = Path(data_dir) / "prep_stats.json"
    return json.loads(stats.read_text()).get("items", "ours") if stats.exists() else "ours"


def _eval_provenance(args, train_dataset: str, adapt_meta: dict) -> dict:
    """The run's identity and provenance for metrics.json; `items` (whose test items) stays out of the hash."""
    from ..runs.provenance import provenance

    extra = run_identity(args, train_dataset, args.dataset)
    params = {**extra, "adapt_config_hash": adapt_meta.get("config_hash"), "max_new_tokens": args.max_new_tokens,
              "eval_samples": args.eval_samples, "exclude_adaptation_samples": args.exclude_adaptation_samples}
    sampling = _eval_sampling(args)
    if sampling:  # greedy runs keep their hash
        params["sampling"] = sampling
    return {**extra, "adapt_seconds": adapt_meta.get("adapt_seconds"), **({"sampling": sampling} if sampling else {}),
            "items": _items_of(Path(args.data)), "protocol": getattr(args, "protocol", "clean"), **provenance(params)}


def _eval_sampling(args) -> dict | None:
    """Sampled evaluation ({n, temperature, top_p, seed}) for a temperature above 0, else None
    (greedy). ECHO's pass@k (config evaluation.math)."""
    if args.temperature <= 0:
        if args.n_samples != 1 or max(args.pass_k) > 1:
            raise ValueError(f"--n-samples {args.n_samples} / --pass-k {args.pass_k} need a sampling temperature "
                             "(config evaluation.math.temperature > 0): greedy decoding gives one completion")
        return None
    if max(args.pass_k) > args.n_samples:
        raise ValueError(f"--pass-k {max(args.pass_k)} exceeds --n-samples {args.n_samples} (config "
                         "evaluation.math.pass_k / n_samples): pass@k needs k <= n completions")
    top_k = getattr(args, "top_k", None)  # only where set: the other runs keep their hash
    return {"n": args.n_samples, "temperature": args.temperature, "top_p": args.top_p, "seed": args.seed,
            **({"top_k": top_k} if top_k else {})}


def cmd_evaluate(args) -> None:
    from ..evaluation.evaluate import timed_evaluation
    from ..generation.backend import choose_backend
    from ..generation.vllm_settings import bounded_settings
    from ..models.families import bound_processor, image_size_bound, use_chat_template
    from ..models.loading import checkpoint_dtype, load_model, resolve_model_source

    backend = choose_backend(args.backend, "evaluation.backend")  # before any work
    if args.adapt_run and not Path(args.model_source).exists():
        raise FileNotFoundError(
            f"adapted weights {args.model_source} are gone: Snakemake deletes them once evaluated (temp()). Set config "
            "`adaptation.keep_adapted_weights: true` and rerun snakemake (it adapts again and keeps them) to rerun "
            "this evaluation by hand")
    if args.adapt_run:
        from ..models.saved import missing_files

        missing = missing_files(Path(args.model_source))
        if missing:  # a kill while the adaptation saved them, or while Snakemake deleted them
            raise RuntimeError(
                f"adapted weights {args.model_source} are incomplete (missing {', '.join(missing[:3])}"
                f"{', ...' if len(missing) > 3 else ''}): a run was killed while saving or deleting them. Delete "
                f"the directory (rm -r {args.model_source}) and rerun snakemake: it adapts again")
    data_dir = Path(args.data)
    sampling = _eval_sampling(args)  # before any work
    samples, task = _evaluation_set(data_dir, args)
    adapt_meta = json.loads(Path(args.adapt_run).read_text()) if args.adapt_run else {}
    extra = _eval_provenance(args, args.train_dataset, adapt_meta)
    if backend == "vllm":
        from transformers import AutoConfig, AutoProcessor

        model = resolve_model_source(args.model_source)  # vLLM loads the weights itself
        processor, config = AutoProcessor.from_pretrained(model), AutoConfig.from_pretrained(model)
        dtype = checkpoint_dtype(args.model_source)  # vLLM's dtype "auto" reads config.json as HF does
    else:
        model, processor = load_model(args.model_source)
        dtype, config = model.dtype, model.config
    extra["chat_template"] = use_chat_template(processor, config, args.chat_template)
    # one image bound for both backends (models/families.py), and the prompt budget each item is checked against
    settings, extra["image_size_bound"] = bounded_settings(json.loads(args.vllm_settings),
                                                           image_size_bound(config, args.protocol))
    bound_processor(processor, extra["image_size_bound"])
    # the precision the row was computed in: an adapted row and its zero-shot row must agree (issue 23 finding 1)
    extra["model_dtype"] = str(dtype).removeprefix("torch.")
    timed_evaluation(model, processor, samples, data_dir, task, Path(args.out), extra, args.max_new_tokens,
                     args.batch_size, settings, sampling, settings["max_prompt_tokens"])


def cmd_adapt_per_sample(args) -> None:
    """VR-TTRL: adapt on each evaluation sample and predict it, in one job (no weights saved)."""
    from ..runs.processes import process_state
    from ..adaptation.per_sample import adapt_each_sample
    from ..evaluation.evaluate import predictions_frame, with_prompts, write_evaluation
    from ..generation.precision import adaptation_precision
    from ..models.loading import load_model
    from ..runs.provenance import provenance
    from ..adaptation.prompt_budget import bounded_rollouts

    method = method_spec(args)
    data_dir, adapt_out = Path(args.data), Path(args.adapt_out)
    samples, task = _evaluation_set(data_dir, args)
    model, processor = load_model(args.model_source, dtype="fp32")  # master weights, whatever is stored
    log.info("per-sample %s on %d samples of %s", args.method, len(samples), args.dataset)
    # a sample over the prompt budget is an error row, the others adapt and predict
    method, fits, errors = bounded_rollouts(model.config, processor, method, samples, data_dir, args.protocol)
    outputs, train_log, seconds = adapt_each_sample(model, processor, fits, data_dir, method, adapt_out,
                                                    args.seed, args.max_new_tokens)
    done = dict(zip(fits["id"], outputs))
    if not process_state().is_main_process:
        return  # one process writes the job's files
    adapt_out.mkdir(parents=True, exist_ok=True)
    train_log.to_parquet(adapt_out / "train_log.parquet", index=False)
    meta = {**run_identity(args, args.dataset, args.dataset), "adapt_seconds": sum(seconds),
            "over_budget": errors,  # samples not adapted (as cmd_adapt's): prompt over the budget, or image bad
            "seconds_per_sample": sum(seconds) / len(seconds), "precision": adaptation_precision(model),
            **provenance({"method": method, "model_source": args.model_source, "seed": args.seed})}
    (adapt_out / "run.json").write_text(json.dumps(meta, indent=2, default=str))
    extra = {**_eval_provenance(args, args.dataset, meta), "seconds_per_sample": meta["seconds_per_sample"]}
    outputs = [done.get(i, "") for i in samples["id"]]
    predictions = with_prompts(predictions_frame(outputs, samples, task, [errors.get(i) for i in samples["id"]]),
                               processor, samples)
    write_evaluation(predictions, task, Path(args.out), extra, sum(seconds))


def _add_eval_args(p) -> None:
    """The options `evaluate` and `adapt-per-sample` share: what is scored, and how."""
    p.add_argument("--exclude-adaptation-samples", action="store_true",
                   help="score MCQ sets without their adaptation samples (config evaluation.exclude_adaptation_samples)")
    p.add_argument("--eval-samples", type=_n_adapt, default="all", help="test samples scored (seeded)")
    p.add_argument("--max-new-tokens", type=int, default=6,
                   help="longest answer generated (config evaluation.<task>.max_new_tokens)")
    p.add_argument("--sam2", help="SAM2 checkpoint directory: grounding masks from the predicted boxes and points")
    p.add_argument("--empty-mask-iou", choices=["zero", "one", "skip"], default="zero",
                   help="gIoU of a both-empty sample (config evaluation.grounding.empty_mask_iou)")
    p.add_argument("--sam2-multimask", choices=["best_score", "single"], default="best_score",
                   help="SAM2's three candidates and the best-scored one, or one mask (evaluation.grounding.sam2_multimask)")
    p.add_argument("--input-size", type=int, help="grounding: the square side the image is resized to, answers "
                   "scaled back (config evaluation.grounding.input_size; VisionReasoner's 840)")
    p.add_argument("--query-form", choices=["as_given", "visionreasoner"], default="as_given",
                   help="grounding: the query as given or lower-cased and stripped (evaluation.grounding.query_form)")
    p.add_argument("--choice-parser", choices=["robust", "ttrv", "authors"], default="robust",
                   help="how option letters are read (config evaluation.mcq.choice_parser)")
    p.add_argument("--chat-template", choices=["model", "authors"], default="model",
                   help="the checkpoint's chat template or the TTRV authors' (config evaluation.mcq.chat_template)")
    p.add_argument("--protocol", choices=["clean", "authors"], default="clean",
                   help="the config's protocol, recorded with the scores for the tables (config protocol)")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="sampling temperature; 0 = greedy (config evaluation.math.temperature)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (config evaluation.math.top_p)")
    p.add_argument("--n-samples", type=int, default=1, help="completions per question (config evaluation.math.n_samples)")
    p.add_argument("--pass-k", type=lambda v: tuple(int(k) for k in v.split(",")), default=(1,),
                   help="comma-separated k of pass@k (config evaluation.math.pass_k)")
    p.add_argument("--top-k", type=int, default=None,
                   help="top-k sampling; unset = none (config evaluation.math.top_k)")
    p.add_argument("--prompt", choices=["training", "authors"], default="training",
                   help="math items: the training prompt or the ECHO authors' evaluation prompt (config "
                        "evaluation.math.prompt)")
    p.add_argument("--min-image-side", type=int, default=None,
                   help="a shorter image side enlarged to this many pixels (config evaluation.math.min_image_side)")
    p.add_argument("--grader", choices=["exact", "lenient"], default="exact",
                   help="math answers: our exact normal forms or the ECHO authors' lenient grading (config "
                        "evaluation.math.grader)")


def _add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="step 3: greedy evaluation on a dataset's test split")
    add_run_args(p, "--dataset")
    _add_eval_args(p)
    p.add_argument("--train-dataset", default="none", help="dataset the model was adapted on")
    p.add_argument("--adapt-run", help="run.json of the adaptation job, for its timing and hash")
    p.add_argument("--batch-size", type=int, default=64, help="prompts per generation batch (config evaluation.batch_size)")
    p.add_argument("--backend", choices=["auto", "hf", "vllm"], default="auto",
                   help="greedy decoding through vLLM or transformers (config evaluation.backend)")
    p.add_argument("--vllm-settings", default="{}", help="vLLM engine settings as JSON (config evaluation.vllm)")
    p.set_defaults(func=cmd_evaluate)


def _add_adapt_per_sample(sub) -> None:
    p = sub.add_parser("adapt-per-sample", help="steps 2+3 for VR-TTRL: adapt on each sample, predict it, restore")
    add_run_args(p, "--dataset")
    _add_eval_args(p)
    add_method_json(p)
    p.add_argument("--adapt-out", required=True, help="where the training log and run.json go")
    p.set_defaults(func=cmd_adapt_per_sample)


PARSERS = {"evaluate": _add_evaluate, "adapt-per-sample": _add_adapt_per_sample}
