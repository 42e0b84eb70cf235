"""General facts from held-out batch 50's misses (docs/triage/ho56.md).

- a call spread over lines raises on its first line, the line its traceback names: GT419 reports
  there (NOTE [raised at the call]; VAC_CSLR#42);
- a new leaf that requires grad kept in a local of `forward`, made by a factory, `Variable` or a
  function of the file given `requires_grad=True`, is new at every call and never trained
  (GT445; NOTE [made leaves]; HiMol#3);
- `torch.tensor(t)` in a helper copies the tensor requiring grad its caller passes, known
  through the callers' parameters and the file's helpers computing from theirs (GT151;
  NOTE [helper results that require grad]; fairseq#2789);
- a `torch.where`-guarded division whose numerator surely requires grad gets NaN gradients
  where the divisor is 0 (GT751; NOTE [divided graph]; pytorch#36923);
- a loop over a module's parameters re-registering each as `nn.Parameter(f(p))` (the call
  written inside, the loop over `dict(named_parameters()).items()`) un-freezes the frozen ones
  (GT409; NOTE [parameters re-wrapped]; torchtitan#3885).

Each entry: a look-alike that must stay silent and run, and buggy twins reported on the given
line; all run on real torch (tests/lint/shape_runner.py).
"""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
torch.manual_seed(0)
"""

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "module-given-to-optimizer-multiline": (Shape("""
        def build(net, wd):
            return torch.optim.RMSprop(
                net.parameters(),
                lr=0.01,
                weight_decay=wd)
        opt = build(nn.Sequential(nn.Linear(3, 2), nn.Tanh()), 1e-4)
        """, "GT419", holds="len(opt.param_groups[0]['params']) == 2"), [Shape("""
        encoder = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
        opt = torch.optim.RMSprop(
            encoder,
            lr=0.01,
            weight_decay=1e-4)
        """, "GT419", 2, (TypeError, "can only optimize Tensors")), Shape("""
        encoder = nn.Linear(3, 2)
        opt = torch.optim.Adam(
            [{"params": [encoder]},
             {"params": [torch.zeros(2, requires_grad=True)], "lr": 0.1}],
            lr=0.01)
        """, "GT419", 2, (TypeError, "can only optimize Tensors"))]),
    # the leaf leaves forward with the output and the caller reads its gradient (an input
    # perturbation): not a weight meant to train
    "local-leaf-in-forward": (Shape("""
        def as_var(t, grad=False):
            return Variable(t, requires_grad=grad)
        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
                self.mix = nn.Parameter(torch.zeros(2))
            def forward(self, x):
                delta = torch.zeros_like(x, requires_grad=True)
                plain = as_var(torch.ones(2))
                w = F.softmax(self.mix * plain, dim=0)
                return w[0] * self.fc(x + delta), delta
        m = Probe()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        out, delta = m(torch.ones(2, 3))
        out.sum().backward()
        opt.step()
        """, "GT445", holds="delta.grad is not None and len(list(m.parameters())) == 3"), [
        Shape("""
        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
            def forward(self, x):
                gate = torch.randn(3, requires_grad=True).to(x.device)
                return self.fc(x) * torch.sigmoid(gate)
        m = Gated()
        opt = torch.optim.Adam(m.parameters(), lr=0.1)
        m(torch.ones(2, 3)).sum().backward()
        opt.step()
        """, "GT445", 6, holds="len(list(m.parameters())) == 2"), Shape("""
        def as_var(t, grad=False):
            return Variable(t, requires_grad=grad)
        class Mix(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(3, 1)
                self.b = nn.Linear(3, 1)
            def forward(self, x):
                mix = as_var(torch.zeros(2), True)
                w = F.softmax(mix, dim=0)
                return w[0] * self.a(x) + w[1] * self.b(x)
        m = Mix()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        m(torch.ones(2, 3)).sum().backward()
        opt.step()
        """, "GT445", 9, holds="len(list(m.parameters())) == 4")]),
    # torch.as_tensor keeps the tensor, a copy kept for a log is not returned, a copy of data
    "passed-tensor-copied": (Shape("""
        t = torch.linspace(0.0, 1.0, 8)
        conv = nn.Conv1d(1, 2, 3)
        seen = []
        def wave(f):
            return torch.sin(f * t) * 0.5
        def feat(s):
            seen.append(torch.tensor(s))
            return conv(torch.as_tensor(s).view(1, 1, -1)).mean()
        def prior(s):
            return conv(torch.tensor(s).view(1, 1, -1)).mean()
        freq = torch.tensor(3.0, requires_grad=True)
        (feat(wave(freq)) + prior(torch.ones(8))).backward()
        """, "GT151", holds="freq.grad is not None"), [Shape("""
        t = torch.linspace(0.0, 1.0, 8)
        conv = nn.Conv1d(1, 2, 3)
        def wave(f):
            return torch.sin(f * t) * 0.5
        def feat(s):
            out = conv(torch.tensor(s).view(1, 1, -1))
            return out.mean()
        freq = torch.tensor(3.0, requires_grad=True)
        feat(wave(freq)).backward()
        """, "GT151", 6, holds="freq.grad is None and conv.weight.grad is not None"), Shape("""
        class Renderer:
            def __init__(self):
                self.net = nn.Linear(3, 1)
            def embed(self, v):
                return self.net(torch.tensor(v.unsqueeze(0)))
        def loss_of(r, angle):
            return (r.embed(angle * torch.ones(3)) ** 2).sum()
        r = Renderer()
        theta = torch.zeros(1, requires_grad=True)
        for _ in range(2):
            loss = loss_of(r, theta)
            loss.backward()
        """, "GT151", 5, holds="theta.grad is None")]),
    # a guarded division of counts (a metric) and one fed a safe divisor stay silent
    "where-guarded-division": (Shape("""
        def accuracy(pred, y, n):
            correct = (pred.argmax(-1) == y).float().sum(-1)
            return torch.where(n > 0, correct / n, torch.zeros_like(n))
        def per_mean(total, n):
            return torch.where(n > 0, total / n.clamp(min=1), total)
        lin = nn.Linear(2, 3)
        x = torch.ones(4, 2)
        n = torch.tensor([0.0, 1.0, 2.0, 3.0])
        out = lin(x)
        acc = accuracy(out.unsqueeze(1), torch.zeros(4, 1, dtype=torch.long), n)
        per_mean(out.sum(-1) * n, n).sum().backward()
        """, "GT751", holds="not torch.isnan(lin.weight.grad).any()"), [Shape("""
        w = torch.ones(3, requires_grad=True)
        d = torch.tensor([0.0, 1.0, 2.0])
        s = w * 2.0
        r = torch.where(d != 0, torch.div(s, d), s)
        r.sum().backward()
        """, "GT751", 4, holds="torch.isnan(w.grad).any()"), Shape("""
        class Norm(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 1)
            def forward(self, x, k):
                s = self.fc(x).squeeze(-1)
                return torch.where(k > 0, s.div(k), torch.zeros_like(s))
        m = Norm()
        m(torch.ones(3, 2), torch.tensor([0.0, 1.0, 2.0])).sum().backward()
        """, "GT751", 7, holds="torch.isnan(m.fc.weight.grad).any()")]),
    # re-wrapped with the old flag, or in a file that freezes nothing: silent
    "parameters-re-wrapped": (Shape("""
        def shard(t, world=1):
            return t.detach().clone()
        def replicate(model):
            for mod in model.modules():
                named = dict(mod.named_parameters(recurse=False))
                for key, w in named.items():
                    mod.register_parameter(key, nn.Parameter(shard(w, 1),
                                                             requires_grad=w.requires_grad))
            return model
        net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
        net[0].weight.requires_grad_(False)
        replicate(net)
        """, "GT409", holds="not net[0].weight.requires_grad"), [Shape("""
        def shard(t, world=1):
            return t.detach().clone()
        def replicate(model):
            for mod in model.modules():
                named = dict(mod.named_parameters(recurse=False))
                for key, w in named.items():
                    mod.register_parameter(key, nn.Parameter(shard(w, 1)))
            return model
        net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
        net[0].weight.requires_grad_(False)
        replicate(net)
        """, "GT409", 7, holds="net[0].weight.requires_grad"), Shape("""
        class Half(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(2, 2)
            def to_half(self):
                for n, p in list(self.body.named_parameters()):
                    setattr(self.body, n, nn.Parameter(torch.clone(p).half()))
                return self
        m = Half()
        m.body.bias.requires_grad = False
        m.to_half()
        """, "GT409", 7, holds="m.body.bias.requires_grad")]),
}


@pytest.mark.parametrize("name,i", [(n, i) for n in sorted(SHAPES)
                                    for i in range(len(SHAPES[n][1]) + 1)])
def test_shape(name: str, i: int) -> None:
    good, bads = SHAPES[name]
    judge(PRELUDE, good if i == 0 else bads[i - 1])
