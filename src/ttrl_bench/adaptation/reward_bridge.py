"""The reward bridge: a label-free group reward (answers -> rewards, rewards/registry.py) as the reward
function TRL's GRPOTrainer calls (`reward_funcs`). `GroupReward` cuts TRL's generation batch into each
prompt's group, parses the completions with the dataset's task, adds the task's format rewards, and
keeps the per-round training log; `completion_text` reads TRL's conversational completions."""

from __future__ import annotations

import json
import time

from accelerate.utils import gather_object

from ..evaluation.tasks import TASKS
from ..rewards.registry import get_reward
from ..rewards.voting import answer_entropy, majority_answer
from ..runs.processes import process_state
from .uncertainty import completion_entropies, completion_token_statistics, normalise_uncertainty


class SplitGroupError(RuntimeError):
    """The N completions of one prompt did not arrive together: group rewards would be wrong."""


def completion_text(completion) -> str:
    """TRL passes conversational completions as [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, list):
        return "".join(m["content"] if isinstance(m["content"], str) else "" for m in completion)
    return completion


def gathered(*values):
    """Each argument (a list, a dict of lists, or None) concatenated over all processes in process
    order; as is with one process."""
    if process_state().num_processes == 1:
        return values
    out = []
    for value in values:
        if isinstance(value, dict):
            out.append({k: gather_object(list(v)) for k, v in value.items()})
        else:
            out.append(None if value is None else gather_object(list(value)))
    return out


class GroupReward:
    """Adapts a group reward (answers -> rewards) to TRL's reward-function signature.

    TRL calls it with the whole generation batch, prompts repeated `num_generations` times in a
    row. It cuts the batch into groups, refuses a group whose ids differ (a split group), parses
    each completion with the dataset's task, adds the task's format rewards (VR-TTRL), and records
    per-step statistics for the training log. Where the trainer voted on more rollouts than it trains
    on, each trained row carries the extra votes sampled from its prompt next to it (`extra_votes` /
    `extra_vote_ids`): a group's votes are its trained completions, then their extras, gathered from
    every process; the reward sees every vote and returns the trained completions' rewards. The hidden labels are read for the
    log (TTRV Figure 1 curves), and for the reward only by the supervised baseline (`needs_gold`:
    GRPO with ground-truth labels, ECHO Table 12).
    """

    def __init__(self, name: str, params: dict, num_generations: int, task=None, micro_batch: int = 8,
                 reward_grid: bool = True):
        params = dict(params)
        # rewards rounded to multiples of 2^-16 (see _score); off under verl's advantages (`advantages: verl`),
        # which take the float32 rewards as they come, as verl's reward manager stores them
        self.reward_grid = reward_grid
        self.uncertainty_norm = params.pop("uncertainty", "vocab")
        self.reward = get_reward(name, **params)
        # the logged pseudo-label follows the reward's convention (rewards/registry.py Reward.unparsable)
        self.unparsable = getattr(self.reward, "unparsable", "answer")
        self.needs_uncertainty = getattr(self.reward, "needs_uncertainty", False)
        self.needs_texts = getattr(self.reward, "needs_texts", False)  # T3RL verifies the rollouts' text
        self.needs_gold = getattr(self.reward, "needs_gold", False)  # the supervised baseline (ECHO Table 12)
        self.needs_logprobs = getattr(self.reward, "needs_logprobs", False)  # the sampled tokens' log-probs
        self.verifications: list[dict] = []
        self.task = task or TASKS["recognition"]
        self.policy = None  # (model, processor), set by `adapt` for rewards that need uncertainty
        self.num_generations = num_generations
        self.micro_batch = micro_batch
        self.records: list[dict] = []
        self._last_time = time.perf_counter()
        self.__name__ = name  # TRL names the logged reward column after the function

    def _uncertainties(self, row: dict, ids: list[list[int]]) -> list[float]:
        model, processor = self.policy
        entropies = completion_entropies(model, processor, row["question"], row["image"], ids,
                                         system=row.get("system"), micro_batch=self.micro_batch)
        return normalise_uncertainty(entropies, model.config.get_text_config().vocab_size, self.uncertainty_norm)

    def _token_statistics(self, row: dict, ids: list[list[int]]) -> dict:
        """The policy's view of each vote, for a reward that declares `needs_logprobs`."""
        model, processor = self.policy
        logprobs, entropies = completion_token_statistics(model, processor, row["question"], row["image"], ids,
                                                          system=row.get("system"), micro_batch=self.micro_batch)
        return {"token_logprobs": logprobs, "token_entropies": entropies}

    def __call__(self, prompts, completions, completion_ids=None, trainer_state=None, extra_votes=None,
                 extra_vote_ids=None, **columns) -> list[float]:
        """Rewards of this process's completions. Under several processes a group may be split across
        them (per-sample VR-TTRL: one prompt's 8 rollouts on 2 GPUs), so every process scores the
        whole generation batch, gathered in process order as TRL lays it out, and keeps its slice
        (DARE's forward then runs on every process for every group: redundant, and what FSDP's
        collectives need). Images travel only where the reward's forward needs them."""
        skip = {"log_extra", "log_metric"} | (set() if self.needs_uncertainty or self.needs_logprobs else {"image"})
        keys = [k for k in columns if k not in skip]
        local = len(completions)
        texts, ids, votes, vote_id_lists, columns = gathered(
            [completion_text(c) for c in completions], completion_ids, extra_votes, extra_vote_ids, {k: columns[k] for k in keys})
        start = process_state().process_index * local
        return self._score(texts, ids, votes, vote_id_lists, columns, trainer_state)[start : start + local]

    def _score(self, texts, completion_ids, extra_votes, extra_vote_ids, columns, trainer_state) -> list[float]:
        n = self.num_generations
        if len(texts) % n:
            raise SplitGroupError(f"batch of {len(texts)} completions is not a multiple of N={n}")
        rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
        rewards, stats, lengths = [], [], []
        for start in range(0, len(texts), n):
            group_ids = {r["id"] for r in rows[start : start + n]}
            if len(group_ids) != 1:
                raise SplitGroupError(f"completions {start}..{start + n - 1} mix prompts {sorted(group_ids)}")
            row = rows[start]
            group = range(start, start + n)
            votes = texts[start : start + n] + [t for i in group for t in extra_votes[i]] if extra_votes else (
                texts[start : start + n])
            ids = (completion_ids or [[]] * len(texts))[start : start + n]
            ids = ids + [t for i in group for t in extra_vote_ids[i]] if extra_vote_ids else ids
            parsed = [self.task.parse(t, row) for t in votes]
            extra = {"uncertainties": self._uncertainties(row, ids)} if self.needs_uncertainty else {}
            if self.needs_logprobs:
                extra |= self._token_statistics(row, ids)
            if self.needs_texts:
                extra |= {"texts": votes, "options": row.get("options")}
            if self.needs_gold:
                extra |= {"gold": self.task.gold(row), "score": self.task.score}
            format_rewards = self.task.format_rewards(votes[:n], **self.reward.format_params)
            group_rewards = [r + f for r, f in zip(self.reward(parsed, **extra)[:n], format_rewards)]
            # TRL centres rewards on their float32 group mean, and 16 equal float32 values do not
            # always sum to exactly 16x (x + x + x rounds): a group of equal rewards (TTRV "w/o
            # frequency") got advantages of ~1e-4 instead of 0, which Adam turns into full steps.
            # On a 2^-16 grid every partial sum is exact, so equal rewards give advantages of 0.
            # verl's advantages (`advantages: verl`) skip the grid: there the unanimous group's rounding is verl's own.
            if self.reward_grid:
                group_rewards = [round(r * 2**16) / 2**16 for r in group_rewards]
            if self.needs_texts:  # T3RL: every verifier decision, per rollout
                step = trainer_state.global_step if trainer_state is not None else len(self.records)
                self.verifications += [{"step": step, "sample": row["id"], "rollout": i, "answer": str(a),
                                        "verified": d.verified, "reason": d.reason, "computed": d.computed}
                                       for i, (a, d) in enumerate(zip(parsed, self.reward.decisions))]
            rewards.extend(group_rewards)
            lengths.extend(map(len, ids))
            # how often each reward convention touched this group (rewards/registry.py)
            stats.append({**self._group_stats(parsed, group_rewards, self.task.gold(row)), **self.reward.last_stats})
        now = time.perf_counter()
        record = {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}
        mean = sum(rewards) / len(rewards)
        record["reward_std"] = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
        # VR-TTRL Figure 3 (reasoning length per step): mean completion length in tokens, over the votes
        record["completion_length"] = sum(lengths) / len(lengths) if completion_ids else float("nan")
        record["votes"] = len(parsed)
        record["step"] = trainer_state.global_step if trainer_state is not None else len(self.records)
        record["seconds"] = now - self._last_time
        self._last_time = now
        self.records.append(record)
        return rewards

    def _group_stats(self, parsed: list, group_rewards: list[float], gold) -> dict:
        """Reward mean over the trained completions; answer statistics over every vote."""
        n = len(parsed)
        hashable = [json.dumps(p, sort_keys=True) if isinstance(p, list) else p for p in parsed]
        voted = any(p is not None for p in parsed) or self.unparsable == "answer"
        label = majority_answer(hashable, self.unparsable)
        return {
            "reward_mean": sum(group_rewards) / len(group_rewards),
            "answer_entropy": answer_entropy(hashable),
            # the authors' train/majority_ratio: votes for the pseudo-label ("" included where it can win)
            "majority_fraction": sum(a == label for a in hashable) / n if voted else 0.0,
            # the authors' train/label_accuracy: is the pseudo-label correct ("" never is)
            "label_accuracy": float(self.task.score(parsed[hashable.index(label)], gold)) if label is not None else 0.0,
            "unparsable_fraction": sum(p is None for p in parsed) / n,
            "rollout_accuracy": sum(self.task.score(p, gold) for p in parsed) / n,
        }
