"""adaptation/weights.py: the host-memory weight snapshot (on a 2 x 2 linear layer, then across several
parameters and processes): what it copies, the changed fraction, restoring, where it is pinned."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ttrl_bench.adaptation.weights import WeightSnapshot, full_tensor

from tests.support.adaptation import linear_2x2


def test_weight_snapshot_copies_the_trainable_weights_measures_and_restores_them():
    """A 2 x 2 layer, its bias frozen. The snapshot holds the weight alone (with `trainable_only` False, the
    bias too), as a copy: changing the layer afterwards leaves it as it was. Then weight (1, 2, 3, 4) ->
    (1.001, 2, 3, 5) and bias (.5, -.5) -> (0, 0): 2 of the 4 trainable elements differ -> .5; cast to bf16
    (8 significant bits: 1.001 rounds to 1, 5 stays 5) 1 of 4 -> .25. The frozen bias never counts, even in
    the snapshot that holds it. Restoring brings back the weight (and, from the full snapshot, the bias)."""
    layer = linear_2x2()
    snap, full = WeightSnapshot(layer), WeightSnapshot(layer, trainable_only=False)
    assert snap.names == ["weight"] and list(snap.values) == ["weight"]
    assert full.names == ["weight", "bias"] and list(full.values) == ["weight", "bias"]
    assert snap.changed_fraction(layer) == 0.0
    with torch.no_grad():
        layer.weight[0, 0] += 1e-3
        layer.weight[1, 1] = 5.0
        layer.bias.zero_()
    assert snap.values["weight"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert full.values["bias"].tolist() == [0.5, -0.5]
    assert snap.changed_fraction(layer) == 0.5
    assert full.changed_fraction(layer) == 0.5
    assert snap.changed_fraction(layer, dtype=torch.bfloat16) == 0.25
    snap.restore(layer)
    assert layer.weight.tolist() == [[1.0, 2.0], [3.0, 4.0]] and layer.bias.tolist() == [0.0, 0.0]
    full.restore(layer)
    assert layer.bias.tolist() == [0.5, -0.5]


def test_weight_snapshot_of_nothing_trainable_changed_nothing():
    """No trainable element: the fraction is 0.0 (not 0 / 0); a parameter frozen after the snapshot is no
    longer counted (its change ignored), and a plain (unsharded) tensor is its own full tensor."""
    layer = linear_2x2()
    layer.weight.requires_grad_(False)
    assert WeightSnapshot(layer).names == [] and WeightSnapshot(layer).changed_fraction(layer) == 0.0
    layer.weight.requires_grad_(True)
    snap = WeightSnapshot(layer)
    layer.weight.requires_grad_(False)
    with torch.no_grad():
        layer.weight.zero_()
    assert snap.changed_fraction(layer) == 0.0
    assert full_tensor(layer.weight) is layer.weight



class _Three(torch.nn.Module):
    """Parameters a (frozen), b (4 values), c (4), d (4), in that order."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
        self.b = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0, 4.0]))
        self.c = torch.nn.Parameter(torch.tensor([1.0001, 5.0, 6.0, 7.0]))
        self.d = torch.nn.Parameter(torch.tensor([8.0, 9.0, 10.0, 11.0]))


def test_the_changed_fraction_sums_over_every_trainable_parameter_past_a_frozen_one():
    """Frozen a comes first; the snapshot still holds b, c and d. Then b gets 1 changed value, c 2 (one of them
    1.0001 -> 1.0002, which bf16 rounds both to 1.0), d 2: with all trainable, (1 + 2 + 2) / 12 = 5/12; cast to
    bf16, (1 + 1 + 2) / 12 = 1/3 (both sides cast: fp32 1.0001 itself differs from bf16 1.0); with c frozen after
    the snapshot, c is skipped and d, after it, still counts: (1 + 2) / 8 = 3/8."""
    from ttrl_bench.adaptation.weights import WeightSnapshot

    model = _Three()
    snap = WeightSnapshot(model)
    assert snap.names == ["b", "c", "d"]
    with torch.no_grad():
        model.b[0] = 0.0
        model.c[0], model.c[1] = 1.0002, 0.0
        model.d[2], model.d[3] = 0.0, 0.0
    assert snap.changed_fraction(model) == pytest.approx(5 / 12, abs=1e-15)
    assert snap.changed_fraction(model, torch.bfloat16) == pytest.approx(1 / 3, abs=1e-15)
    model.c.requires_grad_(False)
    assert snap.changed_fraction(model) == 3 / 8


def test_a_snapshot_is_pinned_where_cuda_is_and_the_fraction_comes_from_the_main_process(monkeypatch):
    """Where CUDA is present, the host copies are pinned (stood in: CUDA reported, pin_memory recorded). With two
    processes, the process that holds no copy takes the main process's fraction from broadcast_object_list (stood
    in: it answers [0.375]) after joining every parameter's gather; a single process never broadcasts."""
    from ttrl_bench.adaptation import weights

    pinned, broadcasts = [], []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(self) or self)
    monkeypatch.setattr(weights, "process_state", lambda: SimpleNamespace(num_processes=1, is_main_process=True))
    monkeypatch.setattr(weights, "broadcast_object_list", lambda objects: broadcasts.append(list(objects)) or [0.375])
    model = _Three()
    single = weights.WeightSnapshot(model)
    assert [p.tolist() for p in pinned] == [model.b.tolist(), model.c.tolist(), model.d.tolist()]
    assert [p is single.values[name] for p, name in zip(pinned, "bcd")] == [True] * 3
    assert single.changed_fraction(model) == 0.0 and broadcasts == []
    monkeypatch.setattr(weights, "process_state", lambda: SimpleNamespace(num_processes=2, is_main_process=False))
    other = weights.WeightSnapshot(model)
    assert other.values == {} and other.names == ["b", "c", "d"]
    gathered, gather = [], weights.full_tensor
    monkeypatch.setattr(weights, "full_tensor", lambda param: gathered.append(param.tolist()) or gather(param))
    assert other.changed_fraction(model) == 0.375
    # every process joins each parameter's gather (a collective under FSDP2), the one holding no copy included
    assert gathered == [model.b.tolist(), model.c.tolist(), model.d.tolist()]
    assert broadcasts == [[0.0]]  # it has counted nothing itself: 0 / 0 -> 0.0, replaced by the main's
