"""speed51: one parent map per file (NOTE [one parent map]). The readers that kept their own
copy of the file's map, and the metric reads' per-function maps (NOTE [read only as
numbers]), read one shared map, built without generators: the same items, the same findings."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint import check_source
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.nodes import parent_map, walk

MIXED = textwrap.dedent('''
    import torch
    from torch import nn as tnn

    @torch.no_grad()
    def f(a: int, *args, b=-1, **kw) -> list[int]:
        global G
        x = [i ** 2 for i in range(a) if not i % 2]
        y = {k: v for k, v in kw.items()}
        z = lambda q, *, r=1: (q, r)
        with open("p") as fh, torch.enable_grad():
            x[0] += b if a < 2 <= b else -b
        try:
            del y["k"]
        except (KeyError, ValueError) as e:
            raise RuntimeError(f"{e!r:>4}") from e
        finally:
            pass
        match a:
            case [1, *rest] | {"k": 2}:
                return rest
            case tnn.Linear(in_features=3) if a:
                pass
        async def g():
            async for t in h():
                await t
        return [*x, *args]

    class C(tnn.Module, metaclass=type):
        w: torch.Tensor = torch.ones(1)

        def forward(self, x):
            return x @ self.w if (n := x.dim()) else -x[..., 1:2, ::3]
''')


def test_parent_map_is_the_generator_dict_item_for_item():
    """The same items in the same order as the comprehension over ``ast.iter_child_nodes``
    it replaces (the shared ``ctx``/``op`` leaves included: their entry is the last parent)."""
    tree = ast.parse(MIXED)
    old = {id(c): n for n in walk(tree) for c in ast.iter_child_nodes(n)}
    new = parent_map(tree)
    assert list(new) == list(old)
    assert all(new[k] is old[k] for k in old)
    fn = tree.body[2]
    assert isinstance(fn, ast.FunctionDef)
    assert list(parent_map(fn).items()) == list(
        {id(c): n for n in walk(fn) for c in ast.iter_child_nodes(n)}.items())


def test_one_map_for_the_file():
    """Every reader gets the one map of the file: built once."""
    tree = ast.parse(MIXED)
    ctx = FileChecker("<mixed>", MIXED, tree, []).ctx
    got = file_parents(ctx)
    assert got is file_parents(ctx)
    assert list(got) == list(parent_map(tree))


EPE = '''import torch
import torch.nn as nn


def endpoint_error(flow_pred, flow_gt):
    return torch.sum((flow_pred - flow_gt) ** 2, dim=1).sqrt()


class FlowLoss(nn.Module):
    def forward(self, flow_pred, flow_gt):
        loss = (flow_pred - flow_gt).abs().mean()
        epe = endpoint_error(flow_pred, flow_gt)
        return {ret}
'''
SCRIPT = '''import torch


def endpoint_error(flow_pred, flow_gt):
    return torch.sum((flow_pred - flow_gt) ** 2, dim=1).sqrt()


gt = torch.randn(2, 2, 3)
pred = torch.randn(2, 2, 3, requires_grad=True)
opt = torch.optim.SGD([pred], lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = (pred - gt).abs().mean()
    epe = endpoint_error(pred, gt)
    print((epe < 1).float().mean().item())
    {backward}.backward()
    opt.step()
'''


def _codes(src: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(src))


def test_metric_read_only_as_numbers_in_forward_is_silent():
    """Look-alike: the root of squared differences, read in a loss module's ``forward`` only
    through ``.item()`` and a comparison, through the file's map."""
    ret = 'loss, {"epe": epe.mean().item(), "1px": (epe < 1).float().mean().item()}'
    assert _codes(EPE.format(ret=ret)) == []


def test_metric_added_to_the_loss_in_forward_is_reported():
    """Twin: the same value also added to the loss: differentiated, GT753 at the root."""
    ret = 'loss + epe.mean(), {"1px": (epe < 1).float().mean().item()}'
    assert _codes(EPE.format(ret=ret)) == [("GT753", 6)]


def test_metric_read_at_module_level():
    """The caller is the module itself (its map was the whole file's): read only as numbers,
    silent; backpropagated through, GT753."""
    assert _codes(SCRIPT.format(backward="loss")) == []
    assert _codes(SCRIPT.format(backward="(loss + epe.mean())")) == [("GT753", 5)]
