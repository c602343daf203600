"""VR-TTRL's single-sample protocol (VR-TTRL, Single-Sample Test-Time RL for VLMs, anonymous submission, Section 3, Appendix A): for every test
sample independently, start from the base weights, run E rounds of (generate N, reward, update),
predict greedily, restore the base weights. Weights are restored from a copy in host memory
(pinned where CUDA is present, so the GPU holds only the model, its gradients and optimizer state),
never reloaded from disk. The vote-only baseline runs the same rollouts and consensus with no update
and answers with the pseudo-label. Appendix C's baselines (presets with an `objective`,
baselines.py) run in the same loop with the same restore."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from ..datasets.preprocessing import open_model_view
from ..evaluation.tasks import GroundingTask
from .baselines import adapt_baseline
from .grpo import TestTimeAdaptation
from .single_sample import consensus_vote, predict_greedy
from .weights import WeightSnapshot


def _adapter(model, processor, samples: pd.DataFrame, image_root: Path, method: dict, out_dir: Path, seed: int):
    """`adapt(one-sample manifest, before)` for every sample of the job. VR-TTRL's GRPO: one
    TestTimeAdaptation (one trainer, engine and reference model) reused by every sample (issue 23
    finding 3). An Appendix C baseline (the preset's `objective`): its Trainer per sample (neither
    an engine nor a reference model to build)."""
    if "objective" in method:
        return lambda one, before: adapt_baseline(model, processor, one, image_root, method, out_dir, seed,
                                                  task=GroundingTask(), before=before)
    adaptation = None

    def run(one: pd.DataFrame, before: WeightSnapshot) -> pd.DataFrame:
        nonlocal adaptation
        if adaptation is None:
            adaptation = TestTimeAdaptation(model, processor, one, image_root, method, out_dir, seed, GroundingTask())
            return adaptation.run(before=before)
        return adaptation.run(one, image_root, before=before)

    return run


def adapt_each_sample(model, processor, samples: pd.DataFrame, image_root: Path, method: dict, out_dir: Path,
                      seed: int, max_new_tokens: int) -> tuple[list[str], pd.DataFrame, list[float]]:
    """(raw outputs, training log with a `sample` column, seconds per sample)."""
    updates = method["hyperparameters"].get("updates", True)
    base_weights = WeightSnapshot(model) if updates else None  # vote-only changes no weight: nothing to restore
    adapt_one = _adapter(model, processor, samples, image_root, method, out_dir, seed)
    outputs, logs, seconds = [], [], []
    for index, row in enumerate(tqdm(samples.to_dict("records"), desc="per-sample adaptation", unit="sample")):
        start = time.perf_counter()
        # resized to evaluation.grounding.input_size where the manifest has it (GroundingTask.view)
        image = open_model_view(Path(image_root) / row["image"], row.get("input_size"))
        if updates:
            train_log = adapt_one(samples.iloc[[index]], base_weights)
            logs.append(train_log.assign(sample=row["id"], sample_updates=train_log.attrs["optimizer_steps"],
                                         weights_changed=train_log.attrs["weights_changed"],
                                         # TRL's step_time; NaN for the Appendix C objectives (no GRPO trainer)
                                         sample_step_time_s=sum(train_log.attrs.get("step_times", [float("nan")]))))
            outputs.append(predict_greedy(model, processor, row, image, max_new_tokens))
            base_weights.restore(model)  # back to the base model for the next sample
        else:
            outputs.append(consensus_vote(model, processor, row, image, method["hyperparameters"],
                                          method["reward_params"], seed + index))
        seconds.append(time.perf_counter() - start)
    train_log = pd.concat(logs, ignore_index=True) if logs else pd.DataFrame()
    return outputs, train_log, seconds
