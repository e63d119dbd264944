"""`weight_versions.version` moves with every way a notebook changes a weight, and with nothing that only reads one:
neither a forward nor accelerate giving an offloaded module a new `meta` parameter around one."""

from __future__ import annotations

import torch
from torch import nn

from mha_viz_models.loading.weight_versions import of, version


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))


def test_reading_leaves_it_and_every_change_moves_it():
    net = _net()
    start = version(net)
    net(torch.randn(3, 4)).sum().backward()  # a forward and a backward read the weights (grads are not weights)
    _ = net[0].weight.detach().T.reshape(-1).clone()
    assert version(net) == start
    changes = [
        lambda: net[0].weight.mul_(2),
        lambda: net[2].bias.__setitem__(1, 0.0),
        lambda: net.load_state_dict(_net().state_dict()),
        lambda: setattr(net[0].weight, "data", torch.zeros(4, 4)),  # other memory, the same parameter
        lambda: setattr(net[2], "weight", nn.Parameter(torch.ones(2, 4))),  # another parameter
    ]
    seen = [start]
    for change in changes:
        with torch.no_grad():
            change()
        now = version(net)
        assert now not in seen, change
        seen.append(now)
    assert version(net[1]) == ()  # a module without weights


def test_an_offloaded_weight_counts_by_its_shape():
    net = _net()
    net[0].weight = nn.Parameter(torch.empty(4, 4, device="meta"))  # what accelerate leaves between forwards
    start = version(net)
    net[0].weight = nn.Parameter(torch.empty(4, 4, device="meta"))  # and gives again after each
    assert version(net) == start
    net[0].weight = nn.Parameter(torch.empty(2, 4, device="meta"))
    assert version(net) != start
    assert of([net[0].weight, net[0].bias])[0] == (2, 4)
