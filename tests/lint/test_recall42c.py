"""The facts of docs/triage/recall42c.md (session 42). Each pair is a correct shape the checker
must leave alone and a buggy twin it must report on its line, written in other names and shapes
than the real-world cases; every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # NOTE [method called on an instance]: a plain class of the file whose method takes
    # `sqrt(1 - c ** 2)`, run by a module's forward through an instance made there
    # (`arc = Arc(...)`, then `arc.chord()`): the method is differentiated where its instance
    # calls it. Look-alike: the same class, its method called only by a helper that runs
    # after the step on detached values (nothing differentiates it)
    "method-of-an-instance-made-in-forward": (Shape("""
        class Arc:
            def __init__(self, angle, radius):
                self.angle, self.radius = angle, radius
            def chord(self):
                c = torch.tanh(self.angle)
                return torch.sqrt(1 - c ** 2) * self.radius
        def preview(h):
            arc = Arc(h[:, :1], h[:, 1:])
            return arc.chord().tolist()
        proj = nn.Linear(3, 2)
        opt = torch.optim.SGD(proj.parameters(), lr=0.1)
        x = torch.randn(4, 3)
        loss = proj(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        points = preview(proj(x).detach())
        """, "GT753", holds="len(points) == 4"), Shape("""
        class Arc:
            def __init__(self, angle, radius):
                self.angle, self.radius = angle, radius
            def chord(self):
                c = torch.tanh(self.angle)
                return torch.sqrt(1 - c ** 2) * self.radius
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(3, 2)
            def forward(self, x):
                h = self.proj(x)
                arc = Arc(h[:, :1], h[:, 1:])
                return arc.chord()
        head = Head()
        with torch.no_grad():
            head.proj.bias[0] = 40.0
        head(torch.zeros(2, 3)).sum().backward()
        """, "GT753", line=6, holds="torch.isnan(head.proj.bias.grad).any()")),
    # The same through torch.distributions' reparameterised sample: `rsample` is where the
    # gradient flows (no inference name: NOTE [method called on an instance]), the sampler
    # kept on the module (`self.prior = Ring(...)` style is not needed: made in forward).
    # Look-alike: the root clamped at an epsilon
    "rsample-of-a-distribution-of-the-file": (Shape("""
        class Ring(torch.distributions.Distribution):
            has_rsample = True
            def __init__(self, mean, spread):
                self.centre, self.spread = mean, spread
                super().__init__(mean.size(), validate_args=False)
            def rsample(self, shape=torch.Size()):
                w = torch.tanh(self.spread)
                return torch.cat((w, torch.sqrt((1 - w ** 2).clamp(min=1e-6)) * self.centre), -1)
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                h = self.fc(x)
                return Ring(h[:, :1], h[:, 1:]).rsample()
        enc = Encoder()
        with torch.no_grad():
            enc.fc.bias[1] = 40.0
        enc(torch.zeros(3, 4)).sum().backward()
        """, "GT753", holds="torch.isfinite(enc.fc.bias.grad).all()"), Shape("""
        class Ring(torch.distributions.Distribution):
            has_rsample = True
            def __init__(self, mean, spread):
                self.centre, self.spread = mean, spread
                super().__init__(mean.size(), validate_args=False)
            def rsample(self, shape=torch.Size()):
                w = torch.tanh(self.spread)
                return torch.cat((w, torch.sqrt(1 - w ** 2) * self.centre), -1)
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                h = self.fc(x)
                q = Ring(h[:, :1], h[:, 1:])
                return q.rsample()
        enc = Encoder()
        with torch.no_grad():
            enc.fc.bias[1] = 40.0
        enc(torch.zeros(3, 4)).sum().backward()
        """, "GT753", line=8, holds="torch.isnan(enc.fc.bias.grad).any()")),
    # GT538 (NOTE in training_loop/repeated_grad.py): Jacobian rows taken one output at a time
    # from one forward made before the loop; the first `autograd.grad` frees the graph.
    # Look-alike: `retain_graph=True` on every pass but the last
    "jacobian-rows-over-one-forward": (Shape("""
        net = nn.Linear(3, 2)
        inp = torch.randn(5, 3)
        out = net(inp).tanh()
        rows = []
        for k in range(2):
            seed = torch.zeros_like(out)
            seed[:, k] = 1.0
            rows.append(torch.autograd.grad(out, net.weight, grad_outputs=seed, retain_graph=k < 1)[0])
        """, "GT538", holds="len(rows) == 2"), Shape("""
        net = nn.Linear(3, 2)
        inp = torch.randn(5, 3)
        out = net(inp).tanh()
        rows = []
        for k in range(2):
            seed = torch.zeros_like(out)
            seed[:, k] = 1.0
            rows.append(torch.autograd.grad(out, net.weight, grad_outputs=seed)[0])
        """, "GT538", line=8, raises=(RuntimeError, "second time"))),
    # In a method, the count an attribute: a saliency probe takes the input gradient of one
    # score once per "repeat". Look-alike: the score is recomputed on each pass
    "input-gradient-taken-once-per-repeat": (Shape("""
        class Probe:
            def __init__(self, student, repeats):
                self.student, self.repeats = student, repeats
            def saliency(self, batch):
                maps = []
                for _ in range(self.repeats):
                    score = self.student(batch).sigmoid().sum()
                    (g,) = torch.autograd.grad(score, batch)
                    maps.append(g)
                return maps
        p = Probe(nn.Linear(4, 1), repeats=3)
        maps = p.saliency(torch.randn(6, 4, requires_grad=True))
        """, "GT538", holds="len(maps) == 3"), Shape("""
        class Probe:
            def __init__(self, student, repeats):
                self.student, self.repeats = student, repeats
            def saliency(self, batch):
                maps = []
                score = self.student(batch).sigmoid().sum()
                for _ in range(self.repeats):
                    (g,) = torch.autograd.grad(score, batch)
                    maps.append(g)
                return maps
        p = Probe(nn.Linear(4, 1), repeats=3)
        maps = p.saliency(torch.randn(6, 4, requires_grad=True))
        """, "GT538", line=8, raises=(RuntimeError, "second time"))),
    # GT622 through the block itself (NOTE [block saves what it wrote]): a block adds an
    # offset into its input in place and hands it to its norm layer; one stem output goes to
    # two such blocks, and the second write changes what the first block's norm saved.
    # Look-alike: the block's forward writes its input but feeds it to no layer after
    "two-writing-blocks-on-one-tensor": (Shape("""
        class Stamp(nn.Module):
            def __init__(self):
                super().__init__()
                self.offset = nn.Parameter(torch.zeros(5))
            def forward(self, h):
                h += self.offset
                return h * 2.0
        stem = nn.Linear(3, 5)
        left = Stamp()
        right = Stamp()
        code = stem(torch.randn(4, 3))
        total = left(code).sum() + right(code).sum()
        total.backward()
        """, "GT622", holds="stem.weight.grad is not None"), Shape("""
        class Stamp(nn.Module):
            def __init__(self):
                super().__init__()
                self.offset = nn.Parameter(torch.zeros(5))
                self.norm = nn.LayerNorm(5)
            def forward(self, h):
                h += self.offset
                return self.norm(h)
        stem = nn.Linear(3, 5)
        left = Stamp()
        right = Stamp()
        code = stem(torch.randn(4, 3))
        total = left(code).sum() + right(code).sum()
        total.backward()
        """, "GT622", line=7, raises=(RuntimeError, "modified by an inplace operation"))),
    # GT753's `1 - c**2` when `c` is picked element by element by `torch.where` (the
    # safe-input idiom: each branch gets only the inputs valid for it), reached now that a
    # method called on an instance is differentiated. Look-alike: the where-picked input;
    # bug: the raw ratio, which reaches 1
    "root-of-one-minus-square-of-where-picked-input": (Shape("""
        class Lens(nn.Module):
            def __init__(self):
                super().__init__()
                self.log_r = nn.Parameter(torch.tensor(0.0))
            def bend(self, rho):
                u = rho / self.log_r.exp()
                inside = u < 1
                u_in = torch.where(inside, u, torch.full_like(u, 0.5))
                return torch.where(inside, torch.sqrt(1 - u_in ** 2), u)
        lens = Lens()
        lens.bend(torch.tensor([0.5, 1.0, 2.0])).sum().backward()
        """, "GT753", holds="torch.isfinite(lens.log_r.grad)"), Shape("""
        class Lens(nn.Module):
            def __init__(self):
                super().__init__()
                self.log_r = nn.Parameter(torch.tensor(0.0))
            def bend(self, rho):
                u = (rho / self.log_r.exp()).clamp(max=1.0)
                return torch.sqrt(1 - u ** 2)
        lens = Lens()
        lens.bend(torch.tensor([0.5, 1.0, 2.0])).sum().backward()
        """, "GT753", line=7, holds="not torch.isfinite(lens.log_r.grad)")),
    # NOTE [method called on an instance] follows only an instance made in the calling
    # function. Look-alike: a measuring tool kept on `self`, handed integer positions (from
    # `torch.where` over a mask: no graph) by `forward`, takes a root of their squared
    # differences; bug: the tool is made in `forward` from the layer's output
    "tool-kept-on-self-versus-made-in-forward": (Shape("""
        class Ruler:
            def __init__(self, pts=None):
                self.pts = pts
            def spans(self, pts=None):
                pts = self.pts if pts is None else pts
                return torch.sqrt(((pts[1:] - pts[:-1]) ** 2).sum(-1))
        class Finder(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(1, 1, 3, padding=1)
                self.ruler = Ruler()
            def forward(self, img):
                heat = self.conv(img)[0, 0]
                peaks = torch.stack(torch.where(heat > 0), -1).float()
                return heat.mean(), self.ruler.spans(peaks)
        finder = Finder()
        score, spans = finder(torch.randn(1, 1, 8, 8))
        score.backward()
        """, "GT753", holds="finder.conv.weight.grad is not None"), Shape("""
        class Ruler:
            def __init__(self, pts=None):
                self.pts = pts
            def spans(self, pts=None):
                pts = self.pts if pts is None else pts
                return torch.sqrt(((pts[1:] - pts[:-1]) ** 2).sum(-1))
        class Finder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)
            def forward(self, pts):
                moved = self.fc(pts)
                return Ruler(moved).spans()
        finder = Finder()
        finder(torch.zeros(4, 3)).sum().backward()
        """, "GT753", line=6, holds="torch.isnan(finder.fc.weight.grad).any()")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("twin", [0, 1], ids=["look-alike", "bug"])
def test_shape(name: str, twin: int) -> None:
    judge(PRELUDE, SHAPES[name][twin])
