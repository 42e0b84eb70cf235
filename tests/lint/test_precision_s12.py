"""Shapes that fired wrongly on the projects of docs/triage/unseen12.md (session 12:
Image_Segmentation, adversarial_robustness_pytorch, dreamerv3-torch, data-efficient-gans,
Chinese-Text-Classification-Pytorch, ffjord; and s4 of the second batch), each in another
spelling than the project's and next to a buggy twin that is still reported. Every snippet
runs on real torch.

Code "of another file" is a module the prelude puts in ``sys.modules`` from a string: the
checker sees only its import, as it sees a project's ``from metrics import *``."""
from __future__ import annotations

import warnings

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import sys
import types
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
_elsewhere = types.ModuleType("elsewhere")
exec("""
import torch
import torch.nn.functional as F
def overlap_score(prob, mask):
    hit = (prob > 0.5) == (mask > 0.5)
    return float(hit.sum()) / float(hit.numel())
def soft_dice_loss(prob, mask):
    return 1 - 2 * (prob * mask).sum() / (prob.sum() + mask.sum() + 1e-6)
def paired_objective(net, x, y, opt):
    opt.zero_grad()
    return F.mse_loss(net(x), y)
class StepBase:
    def plain_objective(self, x, y):
        self.opt.zero_grad()
        self.cleared += 1
        return F.mse_loss(self.net(x), y)
""", _elsewhere.__dict__)
sys.modules["elsewhere"] = _elsewhere
'''
BAD_ORDER = (RuntimeError, "modified by an inplace operation")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Image_Segmentation's `solver.py` (`from evaluation import *`, then `acc +=
    # get_accuracy(SR, GT)` in the validation loop) and adversarial_robustness_pytorch's
    # `acc += accuracy(y, out)`: a metric of another file that returns a Python float from
    # comparisons; whether it keeps the graph is that file's business. Twin: a loss of
    # another file (spelled as one) is summed over the batches with its graph
    "metric-of-another-file-summed-in-an-eval-loop": (Shape("""
        from elsewhere import *
        def score(model, val_loader):
            model.eval()
            total = 0.0
            for x, mask in val_loader:
                prob = torch.sigmoid(model(x))
                total += overlap_score(prob, mask)
            return total / len(val_loader)
        result = score(nn.Linear(4, 4), [(torch.randn(2, 4), torch.rand(2, 4)) for _ in range(3)])
        """, "GT505", holds="isinstance(result, float)"), Shape("""
        from elsewhere import soft_dice_loss
        def score(model, val_loader):
            model.eval()
            total = 0.0
            for x, mask in val_loader:
                prob = torch.sigmoid(model(x))
                total += soft_dice_loss(prob, mask)
            return total / len(val_loader)
        result = score(nn.Linear(4, 4), [(torch.randn(2, 4), torch.rand(2, 4)) for _ in range(3)])
        """, "GT505", 7, holds="result.grad_fn is not None")),
    # ffjord's `train_cnf.py`: `optimizer = Adam(model.parameters())`, then `model =
    # torch.nn.DataParallel(model).cuda()`: the wrapper holds the same module and moving it
    # keeps its Parameter objects. Twin: a new module is wrapped and moved; the optimizer
    # still steps the old one
    "model-wrapped-then-moved-after-the-optimizer": (Shape("""
        body = nn.Linear(4, 2)
        opt = torch.optim.SGD(body.parameters(), lr=0.1)
        if torch.get_num_threads() > 0:
            body = nn.DataParallel(body).to("cpu")
        before = body.module.weight.detach().clone()
        for _ in range(2):
            opt.zero_grad()
            body(torch.randn(3, 4)).sum().backward()
            opt.step()
        """, "GT404", holds="not torch.equal(before, body.module.weight)"), Shape("""
        body = nn.Linear(4, 2)
        opt = torch.optim.SGD(body.parameters(), lr=0.1)
        if torch.get_num_threads() > 0:
            body = nn.DataParallel(nn.Linear(4, 2)).to("cpu")
        before = body.module.weight.detach().clone()
        for _ in range(2):
            opt.zero_grad()
            body(torch.randn(3, 4)).sum().backward()
            opt.step()
        """, "GT404", 4, holds="torch.equal(before, body.module.weight)")),
    # dreamerv3-torch's `ConvDecoder.forward`: `if self._cnn_sigmoid: mean = F.sigmoid(mean)`
    # / `else: mean += 0.5`: the in-place add never runs on the sigmoid's output. Twin: the
    # add follows the `if`, and with the sigmoid on backward raises
    "sigmoid-in-one-arm-inplace-add-in-the-other": (Shape("""
        class Head(nn.Module):
            def __init__(self, squash):
                super().__init__()
                self.squash = squash
                self.proj = nn.Linear(4, 6)
            def forward(self, x):
                out = self.proj(x).reshape(2, 3, 2).permute(0, 2, 1)
                if self.squash:
                    out = F.sigmoid(out)
                else:
                    out += 0.5
                return out
        for flag in (True, False):
            Head(flag)(torch.randn(2, 4)).sum().backward()
        """, "GT602"), Shape("""
        class Head(nn.Module):
            def __init__(self, squash):
                super().__init__()
                self.squash = squash
                self.proj = nn.Linear(4, 6)
            def forward(self, x):
                out = self.proj(x).reshape(2, 3, 2).permute(0, 2, 1)
                if self.squash:
                    out = F.sigmoid(out)
                out += 0.5
                return out
        for flag in (False, True):
            Head(flag)(torch.randn(2, 4)).sum().backward()
        """, "GT602", 10, raises=BAD_ORDER)),
    # data-efficient-gans' `AugmentPipe`: `self.register_buffer('p', torch.ones([]))`, then
    # `1 - torch.sqrt((1 - self.rotate * self.p).clamp(0, 1))`: a buffer and a float
    # setting, no gradient reaches the sqrt. Twin: the probability is a learnable Parameter;
    # at p = 1 its gradient is not finite
    "buffer-under-a-clamped-sqrt": (Shape("""
        class Jitter(nn.Module):
            def __init__(self, spin=1.0):
                super().__init__()
                self.register_buffer("chance", torch.ones([]))
                self.spin   = float(spin)   # aligned, as the project writes it
            def forward(self, x):
                keep = 1 - torch.sqrt((1 - self.spin * self.chance).clamp(0, 1))
                return x * keep
        x = torch.randn(2, 3, requires_grad=True)
        Jitter()(x).sum().backward()
        """, "GT753", holds="torch.isfinite(x.grad).all()"), Shape("""
        class Jitter(nn.Module):
            def __init__(self, spin=1.0):
                super().__init__()
                self.chance = nn.Parameter(torch.ones([]))
                self.spin = float(spin)
            def forward(self, x):
                keep = 1 - torch.sqrt((1 - self.spin * self.chance).clamp(0, 1))
                return x * keep
        j = Jitter()
        j(torch.randn(2, 3)).sum().backward()
        """, "GT753", 7, holds="not torch.isfinite(j.chance.grad)")),
    # Chinese-Text-Classification-Pytorch's `Positional_Encoding.forward`: `x +
    # nn.Parameter(self.pe, requires_grad=False).to(self.device)`: an operand, used on the
    # spot; nothing is meant to register it. Twin: the moved Parameter is kept on the module
    # and never reaches `named_parameters()`
    "parameter-wrapped-as-an-operand": (Shape("""
        class Table(nn.Module):
            def __init__(self):
                super().__init__()
                self.rows = torch.randn(3, 4)
            def forward(self, x):
                return x + nn.Parameter(self.rows, requires_grad=False).to(torch.float64)
        out = Table()(torch.randn(3, 4, dtype=torch.float64))
        """, "GT403", holds="out.dtype == torch.float64"), Shape("""
        class Table(nn.Module):
            def __init__(self):
                super().__init__()
                self.rows = nn.Parameter(torch.randn(3, 4)).to(torch.float64)
            def forward(self, x):
                return x + self.rows
        t = Table()
        out = t(torch.randn(3, 4, dtype=torch.float64))
        """, "GT403", 4, holds="len(list(t.parameters())) == 0")),
    # adversarial_robustness_pytorch's `WATrainer(Trainer).train`: `loss, m =
    # self.standard_loss(x, y)` (inherited from the base class of another file, which
    # clears `self.optimizer`) or `self.trades_loss(x, y)` (a method of the file that hands
    # `self.optimizer` to a function of another file that clears it). Twin: the class has
    # its own objective, which clears nothing; the gradients of both batches add up
    "clearing-in-an-inherited-method": (Shape("""
        from elsewhere import StepBase, paired_objective
        class AvgTrainer(StepBase):
            def __init__(self):
                self.net = nn.Linear(4, 2)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.0)
                self.cleared = 0
            def fit(self, batches, paired=False):
                for x, y in batches:
                    if paired:
                        loss = self.paired(x, y)
                    else:
                        loss = self.plain_objective(x, y)
                    loss.backward()
                    self.opt.step()
            def paired(self, x, y):
                return paired_objective(self.net, x, y, self.opt)
        t = AvgTrainer()
        xy = (torch.randn(3, 4), torch.randn(3, 2))
        t.fit([xy, xy])
        one = t.net.weight.grad.clone()
        t.fit([xy, xy], paired=True)
        """, "GT501", holds="torch.allclose(t.net.weight.grad, one)"), Shape("""
        class AvgTrainer:
            def __init__(self):
                self.net = nn.Linear(4, 2)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.0)
            def fit(self, batches):
                for x, y in batches:
                    loss = self.plain_objective(x, y)
                    loss.backward()
                    self.opt.step()
            def plain_objective(self, x, y):
                return F.mse_loss(self.net(x), y)
        t = AvgTrainer()
        xy = (torch.randn(3, 4), torch.randn(3, 2))
        t.fit([xy])
        one = t.net.weight.grad.clone()
        t.fit([xy])
        """, "GT501", 8, holds="torch.allclose(t.net.weight.grad, 2 * one)")),
    # s4's `train_speech_commands.py` (second batch): `if args.lr_scheduler == 'plateau':
    # lr_scheduler = ReduceLROnPlateau(...)` / `else: ... StepLR(...)`, then `if
    # args.lr_scheduler == 'step': lr_scheduler.step()`: the bare step only runs on the StepLR.
    # Twin: the bare step is guarded by `!= 'step'`, which the plateau run passes (raises)
    "plateau-and-epoch-scheduler-chosen-by-one-setting": (Shape("""
        def fit(policy, epochs=3):
            net = nn.Linear(2, 1)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            if policy == "plateau":
                sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
            else:
                sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            for epoch in range(epochs):
                opt.zero_grad()
                loss = net(torch.randn(4, 2)).pow(2).mean()
                loss.backward()
                opt.step()
                if policy == "step":
                    sched.step()
                if policy == "plateau":
                    sched.step(loss.item())
            return opt.param_groups[0]["lr"]
        rates = [fit("plateau"), fit("step")]
        """, "GT531", holds="rates[1] == 0.1 * 0.5 ** 3"), Shape("""
        def fit(policy, epochs=3):
            net = nn.Linear(2, 1)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            if policy == "plateau":
                sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
            else:
                sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            for epoch in range(epochs):
                opt.zero_grad()
                loss = net(torch.randn(4, 2)).pow(2).mean()
                loss.backward()
                opt.step()
                if policy != "step":
                    sched.step()
            return opt.param_groups[0]["lr"]
        rates = [fit("plateau")]
        """, "GT531", 14, raises=(TypeError, "metrics"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_duplicate_in_one_group_says_what_pytorch_does() -> None:
    """Popular-RL-Algorithms' `Adam(list(self.parameters()) + list(self.sdt.parameters()))`:
    one group, so PyTorch warns (it does not raise) and steps the shared parameters twice;
    across two groups it raises."""
    src = ("import torch\nimport torch.nn as nn\nnet = nn.Sequential()\n"
           "net.head = nn.Linear(2, 1)\n"
           "opt = torch.optim.SGD(list(net.parameters()) + list(net.head.parameters()), lr=1.0)\n"
           "two = [{'params': net.parameters()}, {'params': net.head.parameters()}]\n"
           "opt2 = torch.optim.SGD(two, lr=1.0)\n")
    found = sorted((f.line, f.message) for f in check_source(src, "dup.py", select=["GT435"]))
    assert [ln for ln, _ in found] == [5, 6]
    assert "in one group PyTorch only warns and every step updates them twice" in found[0][1]
    assert "PyTorch raises when a parameter is in two groups" in found[1][1]
    net = torch.nn.Sequential()
    net.head = torch.nn.Linear(2, 1)
    w = net.head.weight.detach().clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = torch.optim.SGD(list(net.parameters()) + list(net.head.parameters()), lr=1.0)
    assert any("duplicate parameters" in str(c.message) for c in caught)
    net.head.weight.grad = torch.ones_like(w)
    net.head.bias.grad = torch.ones(1)
    opt.step()
    assert torch.allclose(net.head.weight.detach(), w - 2.0)
    with pytest.raises(ValueError, match="more than one parameter group"):
        torch.optim.SGD([{"params": net.parameters()}, {"params": net.head.parameters()}])
