"""Shared fixtures: the demo dataset and a barely-trained tiny Qwen2.5-VL, built once per session."""

from pathlib import Path

import pytest
import torch
from PIL import Image

from ttrl_bench.datasets.prepare import load_manifest, prepare_dataset
from ttrl_bench.models.tiny import build_demo_model

# One torch thread in the test process, as in every job (cli.pin_numerics): the same numbers whether
# pytest runs one worker or one per core, and workers that do not fight over the cores.
torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the `workflow` tests (minutes each) first, the seconds-long ones after (a stable sort:
    any shuffled order kept within each part): xdist hands each worker the next test in this order, and a
    minutes-long test handed out last kept one worker busy alone at the end of the run (longest first)."""
    if hasattr(config, "workerinput"):  # a worker: with `-n 0` the order is left as collected or shuffled
        items.sort(key=lambda item: item.get_closest_marker("workflow") is None)


@pytest.fixture
def join_one_process_group(tmp_path):
    """Joins a one-process gloo group when called, as a launched job's process is in one; a test that failed
    leaves no group in this worker."""
    import torch.distributed as dist

    yield lambda: dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "demo-digits"
    prepare_dataset("demo-digits", out, seed=0)
    return out


@pytest.fixture(scope="session")
def scene_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "demo-digit-scenes"
    prepare_dataset("demo-digit-scenes", out, seed=0)
    return out


def _tiny(demo_data, scene_data, out: Path, family: str) -> Path:
    rows = [{**r, "root": root} for root in (demo_data, scene_data) for r in load_manifest(root, "train").to_dict("records")]
    build_demo_model(out, rows, lambda r: Image.open(r["root"] / r["image"]).convert("RGB"), steps=5, seed=0,
                     family=family)
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(demo_data, scene_data, tmp_path_factory) -> Path:
    """Tiny Qwen2.5-VL trained 5 steps per task: it answers in the right shape, mostly wrongly."""
    return _tiny(demo_data, scene_data, tmp_path_factory.mktemp("models") / "tiny", "qwen2_5_vl")


@pytest.fixture(scope="session")
def tiny_model_dirs(tiny_model_dir, demo_data, scene_data, tmp_path_factory) -> dict[str, Path]:
    """One tiny model of every family the paper configs use (config/*.yaml): Qwen2.5-VL (VR-TTRL,
    ECHO), Qwen3-VL (ECHO Table 2) and InternVL "-hf" (TTRV), each built as the demo model is."""
    internvl = _tiny(demo_data, scene_data, tmp_path_factory.mktemp("models") / "tiny-internvl", "internvl")
    qwen3_vl = _tiny(demo_data, scene_data, tmp_path_factory.mktemp("models") / "tiny-qwen3-vl", "qwen3_vl")
    return {"qwen2_5_vl": tiny_model_dir, "internvl": internvl, "qwen3_vl": qwen3_vl}
