"""Which of a prompt's votes are trained on: the first sampled (ours, an unbiased draw) or the ones verl's
token balancing puts first (`trained_votes: verl`, the TTRV authors' runs).

In the TTRV authors' verl fork (Akshit21112002/TTRV @b9cf778) a round's rollouts, prompt-major, are reordered
before the reward so that each GPU gets a similar number of tokens (ray_trainer.py:974-989 `_balance_batch`,
`trainer.balance_batch` true in every log): the sequences' lengths (prompt + response tokens, the attention
mask's sum) are cut into `world_size` partitions of equal count by the largest differencing method
(Karmarkar-Karp; seqlen_balancing.py:24-128 with equal_size, partitions listed largest first, each in index
order, :177). A stable sort by the prompt's dataset index (ray_trainer.py:1140-1141) regroups each prompt's
votes in that order, and `_select_top_k_per_prompt` (:991-1000, called at :1160) keeps the first
n_samples_per_prompt of each prompt: the votes in the first-listed partitions. The reward has seen all of them
(reward_manager/ttrl.py:129-162). The authors' world size equals their prompts per round in every log
(n_gpus_per_node = train_batch_size), which is what `trained_votes` uses.
"""

from __future__ import annotations

TRAINED_VOTES = ("first", "verl")
# How a round's trained rollouts are dealt into its optimizer steps: TRL's shuffle, or verl's (`verl_step_order`)
STEP_ORDERS = ("shuffled", "verl")


def _set_key(items: list[tuple[int, int]]) -> tuple:
    """A partition's rank in verl's ordering: its token sum, then its size, then its (index, length) items in
    the order they were added (the order matters only to break ties between equal sums and sizes)."""
    return sum(length for _, length in items), len(items), items


def balanced_partitions(lengths: list[int], k: int) -> list[list[int]]:
    """`lengths` cut into `k` partitions of equal count with balanced sums by the largest differencing method
    with equal sizes, as verl's `get_seqlen_balanced_partitions(lengths, k, equal_size=True)`: the items sorted
    by (length, index) and taken k at a time, each chunk a state of k one-item partitions; repeatedly the two
    states of largest spread (ties: the larger largest partition) merge, the first's largest partition with the
    second's smallest and so on; the last state's partitions, largest first, each as sorted indices."""
    if k < 1 or len(lengths) % k:
        raise ValueError(f"{len(lengths)} sequences do not split into {k} partitions of equal count")
    ordered = sorted((length, index) for index, length in enumerate(lengths))
    states = []  # each state: its k partitions, largest first, each a list of (index, length) in insertion order
    for start in range(0, len(ordered), k):
        chunk = [[(index, length)] for length, index in ordered[start : start + k]]
        states.append(sorted(chunk, key=_set_key, reverse=True))

    def priority(state):
        return _set_key(state[0])[0] - _set_key(state[-1])[0], _set_key(state[0])

    while len(states) > 1:
        first = max(states, key=priority)
        states.remove(first)
        second = max(states, key=priority)
        states.remove(second)
        merged = [first[i] + second[k - 1 - i] for i in range(k)]
        states.append(sorted(merged, key=_set_key, reverse=True))
    return [sorted(index for index, _ in partition) for partition in states[0]]


def verl_trained_votes(lengths: list[int], votes_per_prompt: int, trained: int, partitions: int) -> list[list[int]]:
    """For each prompt of a round (lengths prompt-major, `votes_per_prompt` each), the positions among its own
    votes of the `trained` ones verl keeps: its votes in the order of the balanced partitions (first-listed
    partition first, index order inside one), the first `trained`."""
    if votes_per_prompt < trained or len(lengths) % votes_per_prompt:
        raise ValueError(f"{len(lengths)} votes are not whole groups of {votes_per_prompt} with {trained} trained")
    order = [index for partition in balanced_partitions(lengths, partitions) for index in partition]
    chosen: list[list[int]] = [[] for _ in range(len(lengths) // votes_per_prompt)]
    for index in order:  # the stable sort by prompt keeps this order within each prompt
        prompt, position = divmod(index, votes_per_prompt)
        if len(chosen[prompt]) < trained:
            chosen[prompt].append(position)
    return chosen


def trained_first_order(trained_positions: list[int], votes_per_prompt: int, copies: int) -> list[int]:
    """A permutation of one prompt's votes that puts a trained one first in each of its rows of `copies` samples
    (the layout TestTimeGRPOTrainer trains: the first sample of each row, the others only vote), the remaining
    votes after them in their order."""
    rest = [p for p in range(votes_per_prompt) if p not in set(trained_positions)]
    order = []
    for row, position in enumerate(trained_positions):
        order += [position, *rest[row * (copies - 1) : (row + 1) * (copies - 1)]]
    return order


def verl_step_order(lengths: list[int], partitions: int, steps: int) -> list[int]:
    """A round's trained rollouts (lengths in TRL's order) in the order whose consecutive chunks are verl's
    optimizer steps: after the reward verl balances the batch again into `partitions` (its world size, one per
    prompt in every TTRV and ECHO script: TTRV ray_trainer.py:1182, ECHO ray_trainer.py:1247-1248), each GPU takes
    its partition and its mini-batches are consecutive chunks of it (dp_actor.py:294-300 `batch.split`), so step
    s holds chunk s of every partition, the first-listed partition first. Each chunk's micro-batches follow in it."""
    if partitions < 1 or len(lengths) % partitions or (len(lengths) // partitions) % steps:
        raise ValueError(f"step_order verl: {len(lengths)} rollouts in {partitions} partitions do not split into "
                         f"{steps} steps of equal chunks; use step_order shuffled or whole prompts per step")
    chunk = len(lengths) // partitions // steps
    parts = balanced_partitions(lengths, partitions)
    return [i for s in range(steps) for part in parts for i in part[s * chunk : (s + 1) * chunk]]
