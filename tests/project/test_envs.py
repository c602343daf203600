"""envs/*.yaml must list exactly what pyproject.toml installs, so `--sdm conda` runs the same stack;
the `gpu` extra must be installable: its pins agree with vLLM's own Requires-Dist (a committed
snapshot, envs/vllm-<version>.requires-dist.txt) and its vLLM lies in the range the installed TRL
supports."""

import inspect
import re
import tomllib

import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support import REPO


def _pip_list(env_file):
    env = yaml.safe_load((REPO / "envs" / env_file).read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return sorted(pip)


def _pyproject():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _gpu_requirements() -> dict[str, list[Requirement]]:
    """Every requirement of the GPU install (base + `gpu` extra), by normalised name."""
    project = _pyproject()
    by_name: dict[str, list[Requirement]] = {}
    for line in project["dependencies"] + project["optional-dependencies"]["gpu"]:
        req = Requirement(line)
        by_name.setdefault(req.name.lower().replace("_", "-"), []).append(req)
    return by_name


def _pinned(reqs: list[Requirement]) -> Version | None:
    pins = [Version(s.version) for r in reqs for s in r.specifier if s.operator == "=="]
    return pins[0] if pins else None


def _vllm_pin() -> Version:
    return _pinned(_gpu_requirements()["vllm"])


def _vllm_requires_dist() -> list[Requirement]:
    """The snapshot's requirements that apply on the GPU nodes (Linux x86_64, Python 3.11, no extra)."""
    snapshot = REPO / "envs" / f"vllm-{_vllm_pin()}.requires-dist.txt"
    env = {**default_environment(), "platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux",
           "python_version": "3.11", "python_full_version": "3.11.7", "extra": ""}
    reqs = [Requirement(line.removeprefix("Requires-Dist:").strip())
            for line in snapshot.read_text().splitlines() if line.startswith("Requires-Dist:")]
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def test_cpu_env_matches_pyproject():
    assert _pip_list("cpu.yaml") == sorted(_pyproject()["dependencies"])


def test_gpu_env_adds_the_gpu_extra():
    project = _pyproject()
    assert _pip_list("gpu.yaml") == sorted(project["dependencies"] + project["optional-dependencies"]["gpu"])


def test_vllm_snapshot_says_how_it_was_made():
    text = (REPO / "envs" / f"vllm-{_vllm_pin()}.requires-dist.txt").read_text()
    assert f"pip download --no-deps vllm=={_vllm_pin()}" in text and f"vllm-{_vllm_pin()}.dist-info/METADATA" in text


def test_gpu_pins_satisfy_vllms_requires_dist():
    """Every package the project pins exactly for the GPU stack is a version vLLM accepts, and every
    other requirement the project states for it admits that version."""
    ours = _gpu_requirements()
    checked = {}
    for theirs in _vllm_requires_dist():
        name = theirs.name.lower().replace("_", "-")
        if name not in ours:
            continue
        pin = _pinned(ours[name])
        if pin is None:  # a range of ours: vLLM's must admit the largest version it names (the full check: resolution)
            upper = max(Version(s.version) for r in ours[name] for s in r.specifier)
            assert theirs.specifier.contains(upper, prereleases=True) or not theirs.specifier, (name, theirs)
            continue
        assert theirs.specifier.contains(pin, prereleases=True), f"vLLM {_vllm_pin()} needs {theirs}, gpu pins {pin}"
        for r in ours[name]:
            assert r.specifier.contains(pin, prereleases=True), f"{r} (pyproject) excludes the gpu pin {name}=={pin}"
        checked[name] = str(pin)
    # the stack that issue 14 found unresolvable: torch / torchvision / transformers are all covered
    assert checked["torch"] == "2.11.0" and checked["torchvision"] == "0.26.0" and checked["transformers"] == "5.23.0"


def test_gpu_pins_the_torch_stack_vllm_pins():
    """vLLM pins torch / torchvision / torchaudio exactly: the extra names the same three, so the
    GPU stack's torch differs from the CPU default explicitly, not by the resolver's choice."""
    theirs = {r.name: r for r in _vllm_requires_dist()}
    ours = _gpu_requirements()
    for name in ("torch", "torchvision", "torchaudio"):
        (spec,) = theirs[name].specifier
        assert spec.operator == "==" and _pinned(ours[name]) == Version(spec.version), name


def test_vllm_pin_inside_trls_supported_range():
    """TRL warns outside the vLLM versions it supports (trl/import_utils.py, is_vllm_available)."""
    from trl import import_utils

    source = inspect.getsource(import_utils.is_vllm_available)
    low, high = re.search(r'Version\("([\d.]+)"\)\s*<=\s*_vllm_base_version\s*<=\s*Version\("([\d.]+)"\)', source).groups()
    assert Version(low) <= _vllm_pin() <= Version(high), f"vLLM {_vllm_pin()} outside TRL's {low}..{high}"


def _resolution(kind: str) -> dict[str, Version]:
    lines = (REPO / "envs" / f"{kind}-resolution.txt").read_text().splitlines()
    return {name.lower().replace("_", "-"): Version(v) for name, v in
            (line.split("==") for line in lines if line and not line.startswith("#"))}


def test_pip_resolved_the_gpu_set_to_these_pins():
    """pip's full resolution of base + `gpu` (a dry run against the package index, snapshot in
    envs/gpu-resolution.txt) satisfies every requirement pyproject.toml states."""
    resolved = _resolution("gpu")
    for name, reqs in _gpu_requirements().items():
        for r in reqs:
            assert r.specifier.contains(resolved[name], prereleases=True), f"{r} vs resolved {resolved[name]}"
    assert resolved["vllm"] == _vllm_pin()


def test_cpu_default_resolves_to_the_ranges_upper_bounds():
    """The ranges that let the `gpu` extra resolve leave the CPU install where it was: pip picks
    their upper bounds (envs/cpu-resolution.txt)."""
    resolved = _resolution("cpu")
    for line in _pyproject()["dependencies"]:
        req = Requirement(line)
        name = req.name.lower().replace("_", "-")
        assert req.specifier.contains(resolved[name], prereleases=True), f"{req} vs resolved {resolved[name]}"
        upper = [Version(s.version) for s in req.specifier if s.operator == "<="]
        if upper:
            assert resolved[name] == upper[0], f"{req}: the CPU default resolved to {resolved[name]}"
    assert "vllm" not in resolved
