"""plan/samples.py: how many samples a job sees (the prepared split, the bundled sizes, a local copy's rows,
the protocol's layout samples). Expected values are read from the dataset registry and the files written in the test."""

from __future__ import annotations

import json
from types import SimpleNamespace


def test_split_size_reads_the_prepared_split_then_the_bundled_sizes(tmp_path):
    """Prepared: prep_stats.json's count of the registry's manifest split (geometry3k: ECHO's training set, its
    `train` split, 2,101 rows; 0 where the stats lack it). Before: the bundled sets' known sizes, 1,797 sklearn
    digits - 1,200 for training = 597 and 120 scenes; None for a Hub set."""
    from ttrl_bench.plan.samples import split_size

    plan = SimpleNamespace(results=str(tmp_path))
    assert (split_size(plan, "demo-digits"), split_size(plan, "demo-digit-scenes"), split_size(plan, "ai2d")) == (
        597, 120, None)
    for dataset, splits in (("geometry3k", {"train": 2101, "test": 601}), ("demo-digits", {"train": 1200})):
        (tmp_path / "data" / dataset).mkdir(parents=True)
        (tmp_path / "data" / dataset / "prep_stats.json").write_text(json.dumps({"splits": splits}))
    assert split_size(plan, "geometry3k") == 2101 and split_size(plan, "demo-digits") == 0


def test_local_rows_count_the_non_blank_lines_of_a_json_lines_copy(tmp_path):
    """A copy of 3 + 2 + 1 rows (one blank line skipped) in three .jsonl files (the default glob **/*.jsonl,
    sub-folders included): 6; only quiz.jsonl (the source's `files`): 3; CRPE's registry default crpe_relation.jsonl:
    1. None:
    no source, no path, a path that is no directory, another format, no file matched, or a matched file that is not
    JSON lines (CAPTURe's registry default real_metadata.json)."""
    from ttrl_bench.plan.samples import local_rows

    copy = tmp_path / "copy"
    (copy / "sub").mkdir(parents=True)
    (copy / "quiz.jsonl").write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3}\n')
    (copy / "sub" / "more.jsonl").write_text('{"a": 4}\n{"a": 5}')
    (copy / "crpe_relation.jsonl").write_text('{"a": 6}\n')
    (copy / "real_metadata.json").write_text('[{"a": 7}]')

    def rows(dataset, source):
        return local_rows(SimpleNamespace(config={"data": {"sources": {dataset: source}}}), dataset)

    assert rows("ai2d", {"path": str(copy)}) == (6, str(copy))  # quiz 3 + more 2 + crpe_relation 1
    assert rows("ai2d", {"path": str(copy), "format": "json", "files": "quiz.jsonl"}) == (3, str(copy))
    assert rows("crpe", {"path": str(copy)}) == (1, str(copy))
    assert rows("capture", {"path": str(copy)}) is None
    assert rows("ai2d", {"path": str(copy), "files": "*.parquet"}) is None
    assert rows("ai2d", {"path": str(copy), "format": "parquet"}) is None
    assert rows("ai2d", {"path": str(copy / "quiz.jsonl")}) is None
    assert rows("ai2d", {"path": None}) is None and rows("ai2d", None) is None


def test_layout_samples_are_one_per_sample_else_the_protocols_else_the_prepared_split(tmp_path):
    """adapt_per_sample: 1 (each adapt call sees one sample); n20_random: 20; nall_random: the prepared split's
    597 bundled digits, and None for a Hub set before preparation."""
    from ttrl_bench.plan.samples import layout_samples

    plan = SimpleNamespace(results=str(tmp_path))
    job = SimpleNamespace(rule="adapt", protocol="n20_random", dataset="demo-digits")
    assert layout_samples(plan, job) == 20
    assert layout_samples(plan, SimpleNamespace(**{**vars(job), "rule": "adapt_per_sample"})) == 1
    assert layout_samples(plan, SimpleNamespace(**{**vars(job), "protocol": "nall_random"})) == 597
    assert layout_samples(plan, SimpleNamespace(rule="adapt", protocol="nall_random_authors", dataset="ai2d")) is None
