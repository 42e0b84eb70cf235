"""GT529: writes into the copy `state_dict()` returns. The twins and look-alikes run on real
torch too: the write is lost exactly where the rule says so."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

SRC = textwrap.dedent("""
    import torch
    import torch.nn as nn

    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def decay(o, f):
        for pg in o.state_dict()['param_groups']:
            pg['lr'] *= f

    class Runner:
        def __init__(self):
            self.optim = torch.optim.Adam(net.parameters(), lr=0.1)
        def warm(self, lr):
            self.optim.state_dict()['param_groups'][0]['lr'] = lr

    decay(opt, 0.5)
    Runner().warm(0.3)
    net.state_dict()['bias'] = torch.zeros(1)
    """).lstrip("\n")

LOOK_ALIKES = textwrap.dedent("""
    import torch
    import torch.nn as nn

    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    net.state_dict()['weight'][0, 0] = 0.0
    for pg in opt.param_groups:
        pg['lr'] = 0.01
    sd = opt.state_dict()
    sd['param_groups'][0]['lr'] = 0.5
    opt.load_state_dict(sd)
    for pg in opt.state_dict()['param_groups']:
        print(pg['lr'])
    lr_now = opt.state_dict()['param_groups'][0]['lr']
    """).lstrip("\n")


def test_writes_into_the_copy_are_reported_at_their_lines():
    found = [(f.code, f.line) for f in check_source(SRC, select=["GT529"])]
    assert found == [("GT529", 8), ("GT529", 15), ("GT529", 19)]


def test_the_writes_are_lost_on_real_torch():
    ns: dict = {}
    exec(compile(SRC, "<gt529>", "exec"), ns)
    assert ns["opt"].param_groups[0]["lr"] == 0.1
    assert float(ns["net"].bias.abs().sum()) > 0


def test_look_alikes_are_silent_and_take_effect():
    assert check_source(LOOK_ALIKES, select=["GT529"]) == []
    ns: dict = {}
    exec(compile(LOOK_ALIKES, "<gt529-ok>", "exec"), ns)
    assert ns["opt"].param_groups[0]["lr"] == 0.5 and ns["lr_now"] == 0.5
    assert float(ns["net"].weight[0, 0]) == 0.0
