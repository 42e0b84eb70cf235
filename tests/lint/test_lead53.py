"""Session 53's lead rules. GT222: the flag of `torch.set_grad_enabled(flag)` is false in every
run that reaches the backward of the loss computed under it (checked with real torch below: the
backward raises `element 0 of tensors does not require grad`)."""
from __future__ import annotations

import textwrap

import pytest
import torch
import torch.nn as nn

from gradtrace.lint import check_source


def _lines(src: str, code: str) -> list[int]:
    return [f.line for f in check_source(textwrap.dedent(src), "m.py") if f.code == code]


BAD = {
    "not_flag": ('''
        import torch

        def step(net, x, y, opt, train):
            with torch.set_grad_enabled(not train):
                loss = ((net(x) - y) ** 2).mean()
            if train:
                loss.backward()
                opt.step()
        ''', 5),
    "else_arm": ('''
        import torch

        def step(net, x, y, opt, stage):
            with torch.set_grad_enabled(stage == "eval"):
                loss = ((net(x) - y) ** 2).mean()
            if stage == "eval":
                return loss.item()
            else:
                loss.backward()
                opt.step()
        ''', 5),
    "in_tuple": ('''
        import torch

        def step(net, x, y, opt, mode):
            with torch.set_grad_enabled(mode in ("valid", "test")):
                loss = ((net(x) - y) ** 2).mean()
                if mode == "train":
                    loss.backward()
        ''', 5),
    "method_attribute": ('''
        import torch

        class Runner:
            def run(self, batch):
                with torch.set_grad_enabled(self.mode == "eval"):
                    loss = self.crit(self.model(batch[0]), batch[1])
                if self.mode == "train" and batch is not None:
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
        ''', 6),
}

GOOD = {
    "agreeing": '''
        import torch

        def step(net, x, y, opt, mode):
            with torch.set_grad_enabled(mode != "val"):
                loss = ((net(x) - y) ** 2).mean()
            if mode == "train":
                loss.backward()
        ''',
    "rebound_between": '''
        import torch

        def step(net, x, y, opt, mode):
            with torch.set_grad_enabled(mode == "val"):
                loss = ((net(x) - y) ** 2).mean()
            mode = "train"
            if mode == "train":
                loss.backward()
        ''',
    "unrelated_guard": '''
        import torch

        def step(net, x, y, opt, mode, i):
            with torch.set_grad_enabled(mode == "train"):
                loss = ((net(x) - y) ** 2).mean()
            if i % 2 == 0:
                loss.backward()
        ''',
    "loss_made_outside": '''
        import torch

        def step(net, x, y, opt, mode):
            loss = ((net(x) - y) ** 2).mean()
            with torch.set_grad_enabled(mode == "val"):
                probe = net(x)
            if mode == "train":
                loss.backward()
        ''',
    "or_keeps_it_on": '''
        import torch

        def step(net, x, y, opt, mode, finetune):
            with torch.set_grad_enabled(mode == "val" or finetune):
                loss = ((net(x) - y) ** 2).mean()
            if mode == "train":
                loss.backward()
        ''',
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_gt222_flag_false_where_backward_runs(name):
    src, line = BAD[name]
    assert _lines(src, "GT222") == [line]


@pytest.mark.parametrize("name", sorted(GOOD))
def test_gt222_silent_when_the_flag_can_be_true(name):
    assert _lines(GOOD[name], "GT222") == []


def test_gt222_buggy_twin_raises_on_torch():
    ns: dict = {}
    exec(textwrap.dedent(BAD["not_flag"][0]), ns)
    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="does not require grad"):
        ns["step"](net, torch.randn(4, 3), torch.randn(4, 1), opt, True)
    ns = {}
    exec(textwrap.dedent(GOOD["agreeing"]), ns)
    ns["step"](net, torch.randn(4, 3), torch.randn(4, 1), opt, "train")
    assert net.weight.grad is not None
