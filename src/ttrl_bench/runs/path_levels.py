"""A run's adaptation set and rerun protocol as one path level (results/eval/<model>/<method>/<train>/<target>/
<level>/seed<s>): written by the plan (plan/grid.py) and read back by the claims (results/claims.py), so it
sits below both."""

from __future__ import annotations


def protocol_name(n_samples, sampling: str, rerun: str = "clean") -> str:
    """The adaptation set and the rerun protocol (config `protocol`, plan/protocols.py) as a path level:
    n<samples>_<sampling>[_<rerun>], e.g. n20_random (clean, as before protocols existed) and
    n20_random_authors."""
    return f"n{n_samples}_{sampling}" + ("" if rerun == "clean" else f"_{rerun}")


def protocol_parts(protocol: str) -> tuple[str, str]:
    """The adaptation set of a path level: n20_random_authors -> ("20", "random"), nall_biased-4 -> ("all",
    "biased-4")."""
    n_samples, sampling = protocol[1:].split("_")[:2]
    return n_samples, sampling


def rerun_protocol(protocol: str) -> str:
    """The rerun protocol of a path level: n20_random -> "clean", n20_random_authors -> "authors"."""
    parts = protocol.split("_")
    return parts[2] if len(parts) > 2 else "clean"
