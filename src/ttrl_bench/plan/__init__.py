"""The plan of a config: its jobs, their settings and requests, and the checks that stop a dry run.

`rules/common.smk` builds one `Plan` from Snakemake's config and keeps only glue; tests reach the
same logic as functions (no Snakemake).

Layer 7 of the plan (top): re-exports the layers' entry points (docs/DESIGN.md "The plan's layers").
"""

from . import checks
from .config import load_config, validated
from .grid import Job, Plan, Run
from .resources import Request, job_request

__all__ = ["checks", "Job", "Plan", "Request", "Run", "job_request", "load_config", "validated"]
