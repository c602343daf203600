"""Which test samples a method adapts on (TTRV Appendix A: 20 random test samples by default;
Table 9: 500; ablation: 1). Every method and the zero-shot row see the same selection, so the
evaluation set is identical across a table's rows."""

from __future__ import annotations

import pandas as pd


def select_adaptation_samples(test: pd.DataFrame, n: int | str, seed: int, strategy: str = "random") -> pd.DataFrame:
    """`n` samples of `test` (or all of them for n="all"), drawn with `seed`.

    strategy "random": uniform without replacement. "biased-<k>": only from the k classes that
    come first in a seeded shuffle (TTRV's biased-sampling protocol), uniform within them.
    """
    if n == "all":
        return test.reset_index(drop=True)
    n = int(n)
    if n > len(test):
        raise ValueError(f"asked for {n} adaptation samples but the test split has {len(test)}")
    pool = test
    if strategy.startswith("biased-"):
        k = int(strategy.split("-", 1)[1])
        classes = pd.Series(sorted(test["label"].unique())).sample(frac=1.0, random_state=seed)
        pool = test[test["label"].isin(set(classes[:k]))]
        if len(pool) < n:
            raise ValueError(f"biased sampling: {k} classes hold {len(pool)} samples, fewer than n={n}")
    elif strategy != "random":
        raise ValueError(f"sampling strategy must be 'random' or 'biased-<k>', got {strategy!r}")
    return pool.sample(n=n, random_state=seed).sort_values("id").reset_index(drop=True)
