"""runtime39: GT894 (NOTE [values swapped under a saved graph]) on real torch, one process, a
few steps, tiny models. The buggy twins: values swapped into a conv weight through `.data` for
a forward and put back before the gradient (named at the swap), and a weight rewritten through
`.data` between forward and backward (named at the write). The look-alikes stay silent: the
restore after the backward, the same write on a Linear (addmm saved a view of the old storage:
the gradient is right), and plain SGD written with `p.data = p.data - lr * p.grad`. An in-place
mask through `w.data` between forward and backward is named; the same mask after backward is not."""
from __future__ import annotations

import runpy

import pytest

torch = pytest.importorskip("torch")

PROGRAM = """
import torch
import torch.nn as nn


class Standardized:
    def __init__(self, layer):
        self.layer, self.kept = layer, None

    def __enter__(self):
        w = self.layer.weight
        self.kept = w.data
        w.data = (w.data - w.data.mean()) / (w.data.std() + 1e-5)  # SWAP
        return self.layer

    def __exit__(self, *exc):
        self.layer.weight.data = self.kept  # RESTORE


def swapped(restore_late):
    torch.manual_seed(0)
    conv = nn.Conv1d(2, 3, 3)
    x = torch.randn(4, 2, 9, requires_grad=True)
    opt = torch.optim.SGD(conv.parameters(), lr=0.01)
    for _ in range(2):
        opt.zero_grad()
        if restore_late:
            ctx = Standardized(conv)
            out = ctx.__enter__()(x)
            out.pow(2).mean().backward()
            ctx.__exit__(None, None, None)
        else:
            with Standardized(conv) as layer:
                out = layer(x)
            out.pow(2).mean().backward()
        opt.step()
    return x.grad


def rewritten(kind):
    torch.manual_seed(0)
    layer = nn.Conv1d(2, 3, 3) if kind == "conv" else nn.Linear(12, 3)
    x = torch.randn(4, 2, 6, requires_grad=True)
    inp = x if kind == "conv" else x.flatten(1)
    out = layer(inp)
    layer.weight.data = layer.weight.data.clamp(-0.05, 0.05)  # WRITE
    out.sum().backward()
    return x.grad


def masked(when):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2))
    mask = (torch.rand(5, 6) > 0.5).float()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(8, 6, requires_grad=True)
        loss = net(x).pow(2).mean()
        opt.zero_grad()
        if when == "before":
            net[0].weight.data.mul_(mask)  # MASK
        elif when == "no_grad" and step == 0:  # before any step: the plain no_grad write path
            with torch.no_grad():
                net[0].weight.data.mul_(mask)  # NOGRADMASK
        loss.backward()
        if when == "after":
            net[0].weight.data.mul_(mask)
        opt.step()
    return x.grad


def plain_sgd():
    torch.manual_seed(0)
    conv = nn.Conv1d(2, 3, 3)
    for _ in range(3):
        loss = conv(torch.randn(4, 2, 9)).pow(2).mean()
        conv.zero_grad()
        loss.backward()
        for p in conv.parameters():
            p.data = p.data - 0.1 * p.grad
"""


def _load(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM, encoding="utf-8")
    lines = PROGRAM.splitlines()
    mark = {m: next(i for i, t in enumerate(lines, 1) if t.endswith(f"# {m}"))
            for m in ("SWAP", "RESTORE", "WRITE", "MASK", "NOGRADMASK")}
    return runpy.run_path(str(path)), mark


def _gt894(tr):
    return [f for f in tr.findings if f.code == "GT894"]


@pytest.mark.parametrize("restore_late", [False, True])
def test_swap_restored_before_the_gradient(tmp_path, restore_late: bool) -> None:
    import gradtrace

    ns, mark = _load(tmp_path)
    with gradtrace.trace() as tr:
        grad = ns["swapped"](restore_late)
    found = _gt894(tr)
    if restore_late:  # the look-alike: the gradient is taken before the values go back
        assert not found, [f.message for f in found]
        return
    assert found and found[0].line == mark["SWAP"], [(f.line, f.message) for f in found]
    assert [r.line for r in found[0].related] == [mark["RESTORE"]]
    # the effect is real: the input gradient differs from the one of the standardized forward
    assert not torch.allclose(grad, ns["swapped"](True))


@pytest.mark.parametrize("kind", ["conv", "linear"])
def test_weight_rewritten_between_forward_and_backward(tmp_path, kind: str) -> None:
    import gradtrace

    ns, mark = _load(tmp_path)
    with gradtrace.trace() as tr:
        grad = ns["rewritten"](kind)
    found = _gt894(tr)
    if kind == "linear":  # addmm saved w.t(), a view of the old storage: the gradient holds
        assert not found, [f.message for f in found]
        torch.manual_seed(0)
        layer = torch.nn.Linear(12, 3)
        x = torch.randn(4, 2, 6, requires_grad=True)
        layer(x.flatten(1)).sum().backward()
        assert torch.allclose(grad, x.grad)
        return
    assert found and found[0].line == mark["WRITE"], [(f.line, f.message) for f in found]
    assert not found[0].related


@pytest.mark.parametrize("when", ["before", "after", "no_grad"])
def test_mask_written_through_data_alias(tmp_path, when: str) -> None:
    """An in-place write into `w.data` reaches the view `w.t()` that addmm saved (the alias
    has its own version counter, so nothing fails): named when it comes between forward and
    backward; the usual order (mask after backward, before the step) is silent."""
    import gradtrace

    ns, mark = _load(tmp_path)
    with gradtrace.trace() as tr:
        ns["masked"](when)
    found = _gt894(tr)
    if when == "after":
        assert not found, [f.message for f in found]
    else:  # before the backward, with grad on or inside a no_grad block
        line = mark["NOGRADMASK" if when == "no_grad" else "MASK"]
        assert found and found[0].line == line, [(f.line, f.message) for f in found]
        assert "in-place write through `.data`" in found[0].message


def test_sgd_through_data_after_backward_is_silent(tmp_path) -> None:
    import gradtrace

    ns, _ = _load(tmp_path)
    with gradtrace.trace() as tr:
        ns["plain_sgd"]()
    assert not _gt894(tr), [f.message for f in _gt894(tr)]


# NOTE [grad off in a caller] with the backward() inside an installed library: the project's
# call into the library is named, not the project function above it.
LIBRARY = """
import torch


def plan(start, goal, iters=3):
    traj = start.expand(4, -1).clone().requires_grad_(True)
    for _ in range(iters):
        cost = ((traj - goal) ** 2).sum()
        cost.backward()
        with torch.no_grad():
            traj -= 0.1 * traj.grad
            traj.grad = None
    return traj.detach()


def warmup(n):
    return plan(torch.zeros(n), torch.ones(n))
"""

ROLLOUT = """
import torch
import torch.nn as nn
import {lib} as lib


class Env:
    def reset(self):
        self.state = lib.warmup(3)  # CALL
        return self.state[-1]


def episode(env, policy):
    obs = env.reset()
    return policy(obs)


def local_warmup(n):
    traj = torch.zeros(4, n, requires_grad=True)
    ((traj - 1) ** 2).sum().backward()  # LOCAL
    return traj


def local_episode():
    traj = local_warmup(3)  # LOCALCALL
    return traj


def main(local):
    policy = nn.Linear(3, 3)
    with torch.no_grad():
        return local_episode() if local else episode(Env(), policy)
"""


@pytest.mark.parametrize("local", [False, True])
def test_backward_in_a_library_under_a_caller_no_grad(tmp_path, monkeypatch, local: bool) -> None:
    import sys

    import gradtrace

    lib_dir = tmp_path / "site-packages"
    lib_dir.mkdir()
    name = f"runtime39_planner_{'a' if local else 'b'}"
    (lib_dir / f"{name}.py").write_text(LIBRARY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(lib_dir))
    path = tmp_path / "rollout.py"
    path.write_text(ROLLOUT.format(lib=name), encoding="utf-8")
    lines = ROLLOUT.splitlines()
    mark = {m: next(i for i, t in enumerate(lines, 1) if t.endswith(f"# {m}"))
            for m in ("CALL", "LOCALCALL")}
    ns = runpy.run_path(str(path))
    try:
        with pytest.raises(RuntimeError) as info:
            with gradtrace.trace():
                ns["main"](local)
    finally:
        sys.modules.pop(name, None)
    found = getattr(info.value, "__gradtrace__", None) or []
    assert found, "no diagnosis"
    first = found[0]
    # the library's backward: the project's call into it; a project backward: the call of the
    # function holding it (the rule as before)
    want = mark["LOCALCALL"] if local else mark["CALL"]
    assert (first.path.endswith("rollout.py"), first.line) == (True, want), \
        [(f.code, f.path, f.line, f.message) for f in found]


def test_lazy_module_materialised_under_trace() -> None:
    """A lazy layer materialises its UninitializedParameter with `self.data = ...` at its first
    call: the `.data` setter's check must not read the uninitialised shape (it raises)."""
    import gradtrace
    import torch.nn as nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.LazyLinear(1))
    with gradtrace.trace() as tr:
        out = net(torch.randn(2, 3, 8, 8))
        out.mean().backward()
    assert tuple(net[2].weight.shape) == (1, 144)
    assert net[2].weight.grad is not None
    assert [f.code for f in tr.findings] == []
