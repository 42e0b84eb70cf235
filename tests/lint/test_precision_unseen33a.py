"""Shapes that fired wrongly on the projects of docs/triage/unseen33a.md (session 33: computer
vision research code), each in another spelling than the project's and next to a buggy twin
that is still reported. The snippets run on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import sys
import types
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

# Lua torch's loader (PyTorch < 1.0) for the look-alike to run: its objects' `parameters()`
# returns the two lists (weights, gradWeights), as `torch.legacy.nn.Module.parameters` did
LUA = """
        _ws = [torch.ones(3, 4), torch.ones(3)]
        _lua = types.ModuleType("torch.utils.serialization")
        _lua.load_lua = lambda path: types.SimpleNamespace(
            parameters=lambda: (_ws, [torch.zeros_like(w) for w in _ws]))
        sys.modules["torch.utils.serialization"] = _lua
"""
SHAPES: dict[str, tuple[Shape, Shape]] = {
    # EnlightenGAN (util/util.py, MUNIT's `load_vgg16`): `vgglua = load_lua(path)` then
    # `zip(vgglua.parameters()[0], vgg.parameters())`: a Lua-torch object, whose `parameters()`
    # is a pair of lists, not nn.Module's generator. Twin: the weights indexed on the torch
    # model: 'generator' object is not subscriptable
    "parameters-of-a-lua-torch-model-indexed": (Shape(LUA + """
        from torch.utils.serialization import load_lua
        def copy_from_lua(path, net):
            lua_net = load_lua(path)
            for src, dst in zip(lua_net.parameters()[0], net.parameters()):
                dst.data[:] = src
            return net
        net = copy_from_lua("vgg16.t7", nn.Linear(4, 3))
        """, "GT449", holds="bool((net.weight == 1).all())"), Shape(LUA + """
        from torch.utils.serialization import load_lua
        def copy_from_lua(path, net):
            lua_net = load_lua(path)
            for src, dst in zip(lua_net.parameters()[0], net.parameters()[0]):
                dst.data[:] = src
            return net
        net = copy_from_lua("vgg16.t7", nn.Linear(4, 3))
        """, "GT449", line=10, raises=(TypeError, "not subscriptable"))),
    # EnlightenGAN (util/util.py): the same copy of `load_vgg16`, its import of `load_lua`
    # deleted with `torch.utils.serialization`: the call raises NameError, the binding never
    # holds anything, so nothing says it is an nn.Module. Twin: the source model built by a
    # function of the file (a torch model): indexing its `parameters()` raises TypeError
    "parameters-of-what-an-undefined-loader-returns": (Shape("""
        def copy_from_lua(path, net):
            lua_net = load_legacy(path)
            for src, dst in zip(lua_net.parameters()[0], net.parameters()):
                dst.data[:] = src
            return net
        try:
            copy_from_lua("vgg16.t7", nn.Linear(4, 3))
            failed = False
        except NameError:
            failed = True
        """, "GT449", holds="failed"), Shape("""
        def load_legacy(path):
            return nn.Linear(4, 3)
        def copy_from_lua(path, net):
            lua_net = load_legacy(path)
            for src, dst in zip(lua_net.parameters()[0], net.parameters()):
                dst.data[:] = src
            return net
        copy_from_lua("vgg16.t7", nn.Linear(4, 3))
        """, "GT449", line=5, raises=(TypeError, "not subscriptable"))),
    # PointGroup (lib/pointgroup_ops/functions/pointgroup_ops.py): a ball query Function
    # returns integer index tensors only, one of them rebound from a slice of itself
    # (`idx = idx[:n_active]`): no output requires grad, so its short backward never runs.
    # Twin: the Function also returns the gathered coordinates (float): backward runs and
    # raises 'incorrect number of gradients'
    "index-function-whose-output-is-a-slice-of-itself": (Shape("""
        class BallQuery(torch.autograd.Function):
            @staticmethod
            def forward(ctx, coords, offsets, radius, mean_active):
                n = coords.size(0)
                idx = torch.IntTensor(n * mean_active).zero_()
                start_len = torch.IntTensor(n, 2).zero_()
                idx = idx[:n]
                return idx, start_len
            @staticmethod
            def backward(ctx, a=None, b=None):
                return None, None
        x = torch.randn(4, 3, requires_grad=True)
        idx, _ = BallQuery.apply(x * 2, torch.zeros(2), 0.1, 2)
        x[idx.long()].sum().backward()
        """, "GT701", holds="x.grad is not None"), Shape("""
        class BallQuery(torch.autograd.Function):
            @staticmethod
            def forward(ctx, coords, offsets, radius, mean_active):
                n = coords.size(0)
                idx = torch.IntTensor(n * mean_active).zero_()
                idx = idx[:n]
                return idx, coords[idx.long()] * radius
            @staticmethod
            def backward(ctx, a=None, b=None):
                return None, b * 0.1
        x = torch.randn(4, 3, requires_grad=True)
        idx, near = BallQuery.apply(x * 2, torch.zeros(2), 0.1, 2)
        near.sum().backward()
        """, "GT701", line=10, raises=(RuntimeError, "incorrect number of gradients"))),
    # DBNet.pytorch (trainer/trainer.py): after the step, `for k, v in loss_dict.items():
    # loss_dict[k] = v.item()` turns every entry into a number (the store comes before the
    # `continue`), so `train_loss += loss_dict['loss']` adds a float. Twin: the `continue`
    # skips the store for 'loss': every step's graph is kept in the sum
    "loss-dict-entries-made-numbers-before-the-sum": (Shape("""
        def train_epoch(model, opt, batches):
            train_loss = 0.
            for x in batches:
                loss_dict = {'loss': model(x).pow(2).mean(), 'l1': model(x).abs().mean()}
                opt.zero_grad()
                loss_dict['loss'].backward()
                opt.step()
                for key, value in loss_dict.items():
                    loss_dict[key] = value.item()
                    if key == 'loss':
                        continue
                train_loss += loss_dict['loss']
            return train_loss / len(batches)
        m = nn.Linear(3, 1)
        out = train_epoch(m, torch.optim.SGD(m.parameters(), lr=0.1), [torch.randn(2, 3)] * 3)
        """, "GT505", holds="isinstance(out, float)"), Shape("""
        def train_epoch(model, opt, batches):
            train_loss = 0.
            for x in batches:
                loss_dict = {'loss': model(x).pow(2).mean(), 'l1': model(x).abs().mean()}
                opt.zero_grad()
                loss_dict['loss'].backward()
                opt.step()
                for key, value in loss_dict.items():
                    if key == 'loss':
                        continue
                    loss_dict[key] = value.item()
                train_loss += loss_dict['loss']
            return train_loss / len(batches)
        m = nn.Linear(3, 1)
        out = train_epoch(m, torch.optim.SGD(m.parameters(), lr=0.1), [torch.randn(2, 3)] * 3)
        """, "GT505", line=12, holds="out.grad_fn is not None")),
    # PointDSC (misc/eigen.py): a test matrix `np.abs(np.random.randn(n, n))` made a leaf
    # with `Variable(torch.from_numpy(m), requires_grad=True)` to compare gradients: a NumPy
    # factory's arguments are sizes, its array has no history, nothing is cut. Twin: the
    # matrix is the model's output taken through NumPy: no parameter gets a gradient
    "leaf-made-from-a-numpy-random-matrix": (Shape("""
        import numpy as np
        def eig_grad(n):
            m = np.abs(np.random.randn(n, n))
            m = m + m.T
            a = torch.autograd.Variable(torch.from_numpy(m), requires_grad=True)
            vals, vecs = torch.linalg.eigh(a)
            vals[-1].backward()
            return a.grad
        g = next(eig_grad(k) for k in [4])
        """, "GT106", holds="g is not None"), Shape("""
        import numpy as np
        def eig_grad(net, x):
            m = np.abs(net(x).detach().numpy())
            m = m + m.T
            a = torch.autograd.Variable(torch.from_numpy(m), requires_grad=True)
            vals, vecs = torch.linalg.eigh(a)
            vals[-1].backward()
            return net
        net = eig_grad(nn.Linear(4, 4), torch.randn(4, 4))
        """, "GT106", line=5, holds="net.weight.grad is None")),
    "numpy-random-matrix-through-numpy": (Shape("""
        import numpy as np
        def eig_grad(n):
            m = np.abs(np.random.randn(n, n))
            a = torch.tensor(m + m.T, requires_grad=True)
            vals, vecs = torch.linalg.eigh(a)
            vals[-1].backward()
            return a.grad
        g = next(eig_grad(k) for k in [4])
        """, "GT103", holds="g is not None"), Shape("""
        import numpy as np
        def eig_fit(net, x):
            m = np.abs(net(x).detach().numpy())
            a = torch.from_numpy(m + m.T)
            vals, vecs = torch.linalg.eigh(a)
            vals[-1].backward()
        eig_fit(nn.Linear(4, 4), torch.randn(4, 4))
        """, "GT103", line=3, raises=(RuntimeError, "does not require grad"))),
    # self-label (eval_resnet.py): `with torch.no_grad(): self.optimize_epoch(...,
    # is_validation=True)`, whose backward sits under `if is_validation is False:`: the call
    # picks the other arm. Twin: the training call (`is_validation=False`) under no_grad:
    # 'element 0 of tensors does not require grad'
    "validation-call-skips-the-backward-arm-by-an-is-test": (Shape("""
        def optimize_epoch(model, opt, loader, is_validation=False):
            for x in loader:
                loss = model(x).pow(2).mean()
                if is_validation is False:
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            return loss.item()
        m = nn.Linear(3, 1)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        with torch.no_grad():
            v = optimize_epoch(m, opt, [torch.randn(2, 3)], is_validation=True)
        """, "GT210", holds="isinstance(v, float)"), Shape("""
        def optimize_epoch(model, opt, loader, is_validation=False):
            for x in loader:
                loss = model(x).pow(2).mean()
                if is_validation is False:
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            return loss.item()
        m = nn.Linear(3, 1)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        with torch.no_grad():
            v = optimize_epoch(m, opt, [torch.randn(2, 3)], is_validation=False)
        """, "GT210", line=11, raises=(RuntimeError, "does not require grad"))),
}


@pytest.fixture(autouse=True)
def _real_serialization_module():
    """The Lua shapes put a stand-in `torch.utils.serialization` in `sys.modules`: put the real
    one back, or a later `torch.save` in this process fails to import its config."""
    import sys
    saved = sys.modules.get("torch.utils.serialization")
    yield
    if saved is None:
        sys.modules.pop("torch.utils.serialization", None)
    else:
        sys.modules["torch.utils.serialization"] = saved


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
