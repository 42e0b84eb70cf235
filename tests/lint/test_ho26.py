"""The facts widened for held-out batch 26 (docs/triage/ho26.md), each as a buggy twin that is
reported on its line and a silent look-alike, in other spellings than the cases'. Every snippet
runs on real torch, and ``holds`` checks what the finding claims."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT462: groups grown into a local list with `append` (SiamCAR used `+=`): `gate` left out
    "groups-grown-by-append": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.gate = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
            def forward(self, x):
                return self.head(self.body(x) * torch.sigmoid(self.gate(x)))
        def build(model):
            groups = []
            groups.append({"params": model.body.parameters(), "lr": 0.1})
            groups.append({"params": model.head.parameters()})
            return torch.optim.SGD(groups, lr=0.1)
        net = Net()
        before = net.gate.weight.detach().clone()
        opt = build(net)
        for _ in range(2):
            opt.zero_grad()
            net(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        """, "GT462", line=13, holds="torch.equal(before, net.gate.weight) and "
                                      "net.gate.weight.grad is not None"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.gate = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
            def forward(self, x):
                return self.head(self.body(x) * torch.sigmoid(self.gate(x)))
        def build(model):
            groups = []
            groups.append({"params": model.body.parameters(), "lr": 0.1})
            groups += [{"params": model.gate.parameters()}, {"params": model.head.parameters()}]
            return torch.optim.SGD(groups, lr=0.1)
        net = Net()
        before = net.gate.weight.detach().clone()
        opt = build(net)
        opt.zero_grad()
        net(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
        """, "GT462", holds="not torch.equal(before, net.gate.weight)")),
    # GT518 through methods: `accumulate` clears and backwards, `apply` steps, the caller loops
    # over chunks and applies once; look-alike: the clear moved after the step
    "clearing-method-per-pass": (Shape("""
        class Learner:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
            def accumulate(self, x, y):
                loss = F.mse_loss(self.net(x), y)
                self.opt.zero_grad()
                loss.backward()
            def apply(self):
                self.opt.step()
        net = nn.Linear(3, 1)
        learner = Learner(net)
        xs, ys = torch.randn(4, 2, 3), torch.randn(4, 2, 1)
        for x, y in zip(xs, ys):
            learner.accumulate(x, y)
        learner.apply()
        last = torch.autograd.grad(F.mse_loss(net(xs[-1]), ys[-1]), net.weight)[0]
        """, "GT518", line=7), Shape("""
        class Learner:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
            def accumulate(self, x, y):
                loss = F.mse_loss(self.net(x), y)
                loss.backward()
            def apply(self):
                self.opt.step()
                self.opt.zero_grad()
        net = nn.Linear(3, 1)
        learner = Learner(net)
        xs, ys = torch.randn(4, 2, 3), torch.randn(4, 2, 1)
        for x, y in zip(xs, ys):
            learner.accumulate(x, y)
        learner.apply()
        """, "GT518")),
    # GT409 through a loop over the parameters: each re-wrapped with `setattr` after a cast
    "parameters-rewrapped": (Shape("""
        def recast(module):
            for name, p in list(module.named_parameters(recurse=False)):
                t = p.detach().double()
                setattr(module, name, nn.Parameter(t))
        lin = nn.Linear(3, 2)
        lin.bias.requires_grad_(False)
        recast(lin)
        """, "GT409", line=4, holds="lin.bias.requires_grad"), Shape("""
        def recast(module):
            for name, p in list(module.named_parameters(recurse=False)):
                t = p.detach().double()
                setattr(module, name, nn.Parameter(t, requires_grad=p.requires_grad))
        lin = nn.Linear(3, 2)
        lin.bias.requires_grad_(False)
        recast(lin)
        """, "GT409", holds="not lin.bias.requires_grad")),
    # GT119: a merged kernel made a Parameter of the layer it then runs; look-alike: the layer
    # run functionally with the merged kernel
    "parameter-made-mid-forward": (Shape("""
        class Mixer:
            def mix(self, conv, alphas, x):
                parts = [conv.weight * alphas[0]]
                parts.append(conv.weight.flip(-1) * alphas[1])
                merged = sum(parts)
                conv.weight = nn.Parameter(merged)
                out = conv(x)
                return out
        conv = nn.Conv1d(2, 2, 3, padding=1)
        alphas = nn.Parameter(torch.ones(2))
        Mixer().mix(conv, alphas, torch.randn(1, 2, 5)).sum().backward()
        """, "GT119", line=6, holds="alphas.grad is None"), Shape("""
        class Mixer:
            def mix(self, conv, alphas, x):
                parts = [conv.weight * alphas[0]]
                parts.append(conv.weight.flip(-1) * alphas[1])
                merged = sum(parts)
                out = F.conv1d(x, merged, conv.bias, padding=1)
                return out
        conv = nn.Conv1d(2, 2, 3, padding=1)
        alphas = nn.Parameter(torch.ones(2))
        Mixer().mix(conv, alphas, torch.randn(1, 2, 5)).sum().backward()
        """, "GT119", holds="alphas.grad is not None")),
    # GT105: a layer's weight read through `.data` as a query (the layer also run live);
    # look-alike: the `.data` read only picks indices
    "layer-weight-data-in-forward": (Shape("""
        class Attend(nn.Module):
            def __init__(self):
                super().__init__()
                self.proto = nn.Linear(4, 3)
            def forward(self, x, label):
                q = self.proto.weight.data[label]
                score = (x * q).sum(-1).softmax(0)
                return self.proto((score.unsqueeze(-1) * x).sum(0, keepdim=True))
        m = Attend()
        x, label = torch.randn(5, 4), torch.tensor(1)
        m(x, label).sum().backward()
        q = m.proto.weight[label]
        s = (x * q).sum(-1).softmax(0)
        full = torch.autograd.grad(m.proto((s.unsqueeze(-1) * x).sum(0, keepdim=True)).sum(),
                                   m.proto.weight)[0]
        """, "GT105", line=6, holds="not torch.allclose(full, m.proto.weight.grad)"), Shape("""
        class Attend(nn.Module):
            def __init__(self):
                super().__init__()
                self.proto = nn.Linear(4, 3)
            def forward(self, x):
                d = (x.unsqueeze(1) - self.proto.weight.data).pow(2).sum(-1)
                idx = d.argmin(1)
                return self.proto(x)[torch.arange(len(x)), idx]
        m = Attend()
        m(torch.randn(5, 4)).sum().backward()
        """, "GT105", holds="m.proto.weight.grad is not None")),
    # GT616: the rank read into a name first, the gradients as one tensor per rank; the
    # look-alike sums them over the ranks before the slice. (Two ranks are needed to see the
    # drop: the case lightly_gather_layer_backward_keeps_only_local_gradient proves it with two
    # gloo ranks; here the classes are only defined.)
    "gather-backward-keeps-local-gradient": (Shape("""
        import torch.distributed as dist
        class AllGather(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                bufs = [torch.empty_like(x) for _ in range(dist.get_world_size())]
                dist.all_gather(bufs, x)
                return torch.cat(bufs)
            @staticmethod
            def backward(ctx, grad):
                rank = dist.get_rank()
                return grad.chunk(dist.get_world_size())[rank]
        """, "GT616", line=11), Shape("""
        import torch.distributed as dist
        class AllGather(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                bufs = [torch.empty_like(x) for _ in range(dist.get_world_size())]
                dist.all_gather(bufs, x)
                return tuple(bufs)
            @staticmethod
            def backward(ctx, *grads):
                rank = dist.get_rank()
                summed = torch.stack(grads)
                dist.all_reduce(summed)
                return summed[rank]
        """, "GT616")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])



GATHER_RUN = '''
import sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class GatherLocal(torch.autograd.Function):  # the bug: this rank's slice alone
    @staticmethod
    def forward(ctx, x):
        bufs = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(bufs, x)
        return torch.cat(bufs)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size())[dist.get_rank()]


class GatherSum(GatherLocal):  # the fix: summed over the ranks first
    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad.chunk(dist.get_world_size())[dist.get_rank()]


def rank(r, world, path, out):
    dist.init_process_group("gloo", init_method="file://" + path, rank=r, world_size=world)
    got = []
    for fn in (GatherLocal, GatherSum):
        torch.manual_seed(0)
        w = torch.randn(3, requires_grad=True)
        x = torch.randn(2, 3)[r] * w
        g = fn.apply(x.unsqueeze(0))
        (g[r] * g.sum(0)).sum().backward()  # this rank's row against every rank's: local
        dist.all_reduce(w.grad)  # what DDP does (a sum here, the mean's scale aside)
        got.append(w.grad)
    if r == 0:
        torch.save(got, out)
    dist.destroy_process_group()


if __name__ == "__main__":  # forked: torch imported once, not in two fresh interpreters
    mp.start_processes(rank, args=(2, sys.argv[1], sys.argv[2]), nprocs=2, start_method="fork")
'''


def test_gather_backward_drops_the_other_ranks_gradient(tmp_path, forked):
    """GT616's claim on two gloo ranks: the gradient summed over the ranks in backward equals
    the gradient of the sum of the ranks' losses in one process; the local slice alone does
    not. The script runs in a process forked from the rank server (tests/conftest.py
    ``forked``: torch already imported), and forks its two ranks."""
    torch.manual_seed(0)
    w = torch.randn(3, requires_grad=True)
    xs = torch.randn(2, 3) * w
    sum((xs[r] * xs.sum(0)).sum() for r in range(2)).backward()
    script, out = tmp_path / "gather.py", tmp_path / "grads.pt"
    script.write_text(GATHER_RUN, encoding="utf-8")
    log = tmp_path / "output.txt"
    codes = forked({"argv": [str(script), str(tmp_path / "store"), str(out)],
                    "cwd": str(tmp_path), "env": {}, "out": str(log), "world": 1,
                    "timeout": 300, "script": True})
    assert codes == [0], log.read_text() if log.exists() else codes
    local, summed = torch.load(out)
    assert torch.allclose(summed, w.grad, atol=1e-5)
    assert not torch.allclose(local, w.grad, atol=1e-3)
