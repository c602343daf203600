"""Builders shared by the plan's tests."""

from __future__ import annotations

import yaml

from ttrl_bench.plan import Plan, validated
from ttrl_bench.plan.config import merge

from tests.support import REPO


def demo_plan(extra: str) -> Plan:
    """config/config.yaml with `extra` merged in, as `snakemake --configfile extra.yaml` does."""
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())
    return Plan(validated(merge(base, yaml.safe_load(extra))))
