"""envs/*.yaml must list exactly what pyproject.toml installs, so `--sdm conda` runs the same stack."""

import tomllib

import yaml

from conftest import REPO


def _pip_list(env_file):
    env = yaml.safe_load((REPO / "envs" / env_file).read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return sorted(pip)


def _pyproject():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_cpu_env_matches_pyproject():
    assert _pip_list("cpu.yaml") == sorted(_pyproject()["dependencies"])


def test_gpu_env_adds_the_gpu_extra():
    project = _pyproject()
    assert _pip_list("gpu.yaml") == sorted(project["dependencies"] + project["optional-dependencies"]["gpu"])
