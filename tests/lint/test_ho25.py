"""Session 31, ho25 (held-out batch 25): the facts widened for the batch's static misses and
its look-alike alarm. Each pattern has a silent look-alike and a buggy twin."""
import textwrap

from gradtrace.lint import check_source


def found(src, code):
    return [f.line for f in check_source(textwrap.dedent(src)) if f.code == code]


# NOTE [frozen local module]: a momentum encoder frozen where it is built carries no graph, so
# a second backward through a loss that reads its output frees nothing twice.
MOMENTUM = '''\
import copy
import torch

online = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
momentum_encoder = copy.deepcopy(online).requires_grad_(False)
opt = torch.optim.SGD(online.parameters(), lr=0.1)
for step in range(3):
    x0, x1 = torch.randn(8, 10), torch.randn(8, 10)
    z_a, z_b = online(x0), momentum_encoder(x1)
    loss = (z_a - z_b).pow(2).mean()
    probe = (online(x0) * z_b).sum()
    probe.backward()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_frozen_momentum_encoder_output_shared_by_two_backwards_is_silent():
    assert found(MOMENTUM, "GT509") == []


def test_frozen_on_its_own_line_is_silent():
    src = MOMENTUM.replace("momentum_encoder = copy.deepcopy(online).requires_grad_(False)\n",
                           "momentum_encoder = copy.deepcopy(online)\nmomentum_encoder.requires_grad_(False)\n")
    assert found(src, "GT509") == []


def test_trainable_momentum_encoder_output_shared_by_two_backwards_fires():
    src = MOMENTUM.replace(".requires_grad_(False)", "")
    assert found(src, "GT509") == [12]


def test_frozen_module_fed_a_live_value_still_carries_its_graph():
    src = MOMENTUM.replace("momentum_encoder(x1)", "momentum_encoder(online(x1))")
    assert found(src, "GT509") == [12]
