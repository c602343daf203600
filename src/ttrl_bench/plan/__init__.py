"""The plan of a config: its jobs, their settings and requests, and the checks that stop a dry run.

`rules/common.smk` builds one `Plan` from Snakemake's config and keeps only glue; tests reach the
same logic as functions (no Snakemake).

Layer 7 of the plan (top): re-exports the layers' entry points (docs/DESIGN.md "The plan's layers"), each
imported when first read: `ttrl_bench.plan.cards` (the CLI's parser) then loads without the grid, its
presets and torch (issue 57's profile: 5-15 s at the start of every job).
"""

from importlib import import_module

# each entry point's module (`checks`: the module itself)
_HOMES = {"checks": "checks", "load_config": "config", "validated": "config", "Job": "grid", "Plan": "grid",
          "Run": "grid", "Request": "resources", "job_request": "resources"}
__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:  # a submodule (`from ttrl_bench.plan import cost`): the import system loads it
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = import_module(f"{__name__}.{_HOMES[name]}")
    return module if name == "checks" else getattr(module, name)
