"""runtime40: GT895 (NOTE [unfrozen after the last step]) on real torch, one process, a few
steps, tiny models. The buggy twins: an encoder unfrozen from the training loop by a test on
the epoch counter that passes only after the last epoch's steps (inline in a function, and in
a scheduler object's method called from a `while` loop); both are named at the `if`. The
look-alikes stay silent: the same schedule one epoch earlier (the part trains), a
`requires_grad_(True)` that restores the model after the loop, parameters frozen around an
evaluation at the end of every epoch (they trained before), and parameters switched on only
around each step (a step follows every switch; NOTE [idle steps]'s ground). A lazy module
frozen and unfrozen before its first forward runs unchanged."""
from __future__ import annotations

import runpy

import pytest

torch = pytest.importorskip("torch")

PROGRAM = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def batches(n=3):
    return [(torch.randn(5, 6), torch.randn(5, 1)) for _ in range(n)]


def fit(thaw_after, epochs=2):
    torch.manual_seed(0)
    net = Net()
    net.encoder.requires_grad_(False)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    before = net.encoder[0].weight.detach().clone()
    for epoch in range(epochs):
        for x, y in batches():
            loss = nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch + 1 >= thaw_after:  # INLINE
            net.encoder.requires_grad_(True)
    return not torch.equal(before, net.encoder[0].weight)


class Thaw:
    def __init__(self, module, at_step):
        self.module, self.at_step, self.done = module, at_step, False

    def __call__(self, step):
        if step > self.at_step and not self.done:  # METHOD
            for p in self.module.parameters():
                p.requires_grad = True
            self.done = True


def fit_steps(at_step, total=6):
    torch.manual_seed(0)
    net = Net()
    for p in net.encoder.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    thaw = Thaw(net.encoder, at_step)
    step = 0
    while step < total:
        x, y = batches(1)[0]
        loss = nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        thaw(step)


def head_then_restore(restore=True):
    torch.manual_seed(0)
    net = Net()
    net.encoder.requires_grad_(False)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in batches():
        loss = nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    finish(net, restore)  # after the loop: not a schedule


def finish(net, restore):
    if restore:  # for whoever loads the model next
        net.requires_grad_(True)


def frozen_for_eval(epochs=2):
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for epoch in range(epochs):
        for x, y in batches():
            loss = nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.requires_grad_(False)
        with torch.no_grad():
            net(torch.randn(2, 6))
        if epoch < epochs:
            net.requires_grad_(True)


def toggled_around_step(steps=4):
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(steps):
        x, y = batches(1)[0]
        loss = nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        net.encoder.requires_grad_(True)  # on only around the step: a step follows each
        opt.step()
        net.encoder.requires_grad_(False)


def lazy_thawed():
    torch.manual_seed(0)
    net = nn.Sequential(nn.LazyLinear(4), nn.Tanh(), nn.Linear(4, 1))
    for flag in (False, True):  # requires_grad_() refuses an UninitializedParameter
        for p in net[0].parameters():
            p.requires_grad = flag
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(2):
        loss = net(torch.randn(3, 5)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net[0].weight.shape
"""


def _load(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM, encoding="utf-8")
    lines = PROGRAM.splitlines()
    mark = {m: next(i for i, t in enumerate(lines, 1) if t.endswith(f"# {m}"))
            for m in ("INLINE", "METHOD")}
    return runpy.run_path(str(path)), mark


def _gt895(tr):
    return [f for f in tr.findings if f.code == "GT895"]


@pytest.mark.parametrize("thaw_after", [2, 1])
def test_unfreeze_scheduled_after_the_last_epoch(tmp_path, thaw_after: int) -> None:
    import gradtrace

    ns, mark = _load(tmp_path)
    with gradtrace.trace() as tr:
        trained = ns["fit"](thaw_after)
    found = _gt895(tr)
    if thaw_after == 1:  # the look-alike: unfrozen after epoch 0, trained in epoch 1
        assert trained and not found, [f.message for f in found]
        return
    assert not trained  # the effect is real: the encoder never moved
    assert found and found[0].line == mark["INLINE"], [(f.line, f.message) for f in found]
    assert "encoder.0.weight" in found[0].message


@pytest.mark.parametrize("at_step", [5, 2])
def test_unfreeze_in_a_method_called_from_a_while_loop(tmp_path, at_step: int) -> None:
    import gradtrace

    ns, mark = _load(tmp_path)
    with gradtrace.trace() as tr:
        ns["fit_steps"](at_step)
    found = _gt895(tr)
    if at_step == 2:
        assert not found, [f.message for f in found]
    else:
        assert found and found[0].line == mark["METHOD"], [(f.line, f.message) for f in found]


@pytest.mark.parametrize("name", ["head_then_restore", "frozen_for_eval", "toggled_around_step"])
def test_restores_and_eval_freezes_are_silent(tmp_path, name: str) -> None:
    import gradtrace

    ns, _ = _load(tmp_path)
    with gradtrace.trace() as tr:
        ns[name]()
    assert not _gt895(tr), [f.message for f in _gt895(tr)]


def test_lazy_module_thawed_before_its_first_forward(tmp_path) -> None:
    import gradtrace

    ns, _ = _load(tmp_path)
    with gradtrace.trace() as tr:
        shape = ns["lazy_thawed"]()
    assert tuple(shape) == (4, 5)
    assert not _gt895(tr), [f.message for f in _gt895(tr)]


# the loop in a trainer library (its frames are not the user's): the user's epoch-end hook
TRAINER = """
def fit(module, opt, data, epochs):
    for epoch in range(epochs):
        for x, y in data:
            loss = module.loss(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        module.on_epoch_end(epoch)
"""

HOOKED = """
import torch
import torch.nn as nn
import {lib} as lib


class Module(nn.Module):
    def __init__(self, unfreeze_at):
        super().__init__()
        self.encoder, self.head = nn.Linear(6, 8), nn.Linear(8, 1)
        self.unfreeze_at = unfreeze_at
        self.encoder.requires_grad_(False)

    def loss(self, x, y):
        return nn.functional.mse_loss(self.head(torch.tanh(self.encoder(x))), y)

    def on_epoch_end(self, epoch):
        if epoch == self.unfreeze_at:  # HOOK
            self.encoder.requires_grad_(True)


def main(unfreeze_at):
    torch.manual_seed(0)
    module = Module(unfreeze_at)
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    data = [(torch.randn(4, 6), torch.randn(4, 1)) for _ in range(3)]
    lib.fit(module, opt, data, epochs=2)
"""


@pytest.mark.parametrize("unfreeze_at", [1, 0])
def test_unfreeze_in_a_hook_a_trainer_library_calls(tmp_path, monkeypatch, unfreeze_at) -> None:
    import os
    import sys

    import gradtrace
    from gradtrace.runtime import frames

    lib_dir = tmp_path / "site-packages"
    lib_dir.mkdir()
    name = f"runtime40_trainer_{unfreeze_at}"
    (lib_dir / f"{name}.py").write_text(TRAINER, encoding="utf-8")
    monkeypatch.syspath_prepend(str(lib_dir))
    path = tmp_path / "hooked.py"
    path.write_text(HOOKED.format(lib=name), encoding="utf-8")
    line = next(i for i, t in enumerate(HOOKED.splitlines(), 1) if t.endswith("# HOOK"))
    ns = runpy.run_path(str(path))
    tr = gradtrace.trace()  # its construction reads the library folders: add the fake one
    monkeypatch.setattr(frames, "INTERNAL_PREFIXES",
                        frames.INTERNAL_PREFIXES + (str(lib_dir) + os.sep,))
    try:
        with tr:
            ns["main"](unfreeze_at)
    finally:
        sys.modules.pop(name, None)
    found = _gt895(tr)
    if unfreeze_at == 0:  # unfrozen after epoch 0: trained in epoch 1
        assert not found, [f.message for f in found]
    else:
        assert [(f.path.endswith("hooked.py"), f.line) for f in found] == [(True, line)], \
            [(f.path, f.line, f.message) for f in found]
