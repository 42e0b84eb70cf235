"""Facts carried across a function or a class of the file (issue 12, docs/triage/xfn.md).

For each widening a buggy twin that fires on its ``# BUG`` line(s) and, run on torch, shows the
bug (the in-place error, or collected tensors that still require grad), and a silent look-alike
that runs clean:
- GT505 through a helper's return tuple (NOTE [helper results]): the caller keeps a term of the
  loss it backpropagates, unpacked from the same call (Lofi's ``compute_loss``);
- GT602 on an in-place layer that follows, in one ``nn.Sequential``, a layer whose output is
  saved (a library activation, or a block of the file ending in one: VQA's in-place Dropout);
- GT602 on a write chained on a module call's result inside a loop over every block of an
  ``nn.ModuleList`` (``enumerate``), one block ending in a ReLU (Zero-Restore's ``unsqueeze_``).
"""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

MODIFIED = "modified by an inplace operation"

# name -> (code on the lines marked `# BUG`, or None for a look-alike; source). Each source
# leaves `kept`, the list it collected, in its namespace.
KEPT = {
    "helper-loss-terms-bug": ("GT505", """
import torch
from torch import nn

model = nn.Linear(4, 3)
ce = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)]


def compute_loss(x, y):
    out = model(x)
    loss_ce = ce(out, y)
    loss_reg = out.pow(2).mean() * 1e-3
    total = loss_ce + loss_reg
    return total, loss_ce, loss_reg


kept = []
for epoch in range(2):
    for x, y in batches:
        loss, loss_ce, loss_reg = compute_loss(x, y)
        kept.append(loss_ce)  # BUG
        opt.zero_grad()
        loss.backward()
        opt.step()
"""),
    "helper-method-term-bug": ("GT505", """
import torch
from torch import nn


class Trainer:
    def __init__(self):
        self.model = nn.Linear(4, 3)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def losses(self, x, y):
        logits = self.model(x)
        nll = nn.functional.cross_entropy(logits, y)
        return nll * 2.0, nll

    def fit(self, batches):
        kept = []
        for x, y in batches:
            loss, nll = self.losses(x, y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            kept.append(nll)  # BUG
        return kept


kept = Trainer().fit([(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)])
"""),
    "helper-accuracy-ok": (None, """
import torch
from torch import nn

model = nn.Linear(4, 3)
ce = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)]


def compute_loss(x, y):
    out = model(x)
    loss = ce(out, y)
    acc = (out.argmax(1) == y).float().mean()
    return loss, acc


kept = []
for epoch in range(2):
    for x, y in batches:
        loss, acc = compute_loss(x, y)
        kept.append(acc)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""),
    "helper-detached-term-ok": (None, """
import torch
from torch import nn

model = nn.Linear(4, 3)
ce = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)]


def compute_loss(x, y):
    out = model(x)
    loss_ce = ce(out, y)
    loss_reg = out.pow(2).mean() * 1e-3
    total = loss_ce + loss_reg
    return total, loss_ce.detach(), loss_reg.item()


kept = []
for epoch in range(2):
    for x, y in batches:
        loss, loss_ce, loss_reg = compute_loss(x, y)
        kept.append(loss_ce)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""),
    "helper-under-no-grad-ok": (None, """
import torch
from torch import nn

model = nn.Linear(4, 3)
ce = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(3)]


def compute_loss(x, y):
    out = model(x)
    return ce(out, y), out.pow(2).mean()


def monitor(x, y):
    with torch.no_grad():
        out = model(x)
        return ce(out, y), out.abs().mean()


kept = []
for x, y in batches:
    loss, _ = compute_loss(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    val, size = monitor(x, y)
    kept.append(size)
"""),
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_kept_across_helper(name: str) -> None:
    code, src = KEPT[name]
    want = [(code, i + 1) for i, s in enumerate(src.splitlines()) if s.endswith("# BUG")]
    got = [(f.code, f.line) for f in check_source(src, "snippet.py") if f.code == "GT505"]
    assert got == want
    scope: dict[str, object] = {"__name__": "snippet"}
    exec(compile(src, "snippet.py", "exec"), scope)  # noqa: S102 - the snippet is the test
    kept = scope["kept"]
    assert len(kept) >= 3  # type: ignore[arg-type]
    live = [t.requires_grad for t in kept if isinstance(t, torch.Tensor)]  # type: ignore
    assert any(live) is (code is not None)


# name -> (code on the line marked `# BUG`, or None; source): run on torch, the twin raises the
# in-place error at backward and the look-alike runs.
INPLACE = {
    "seq-dropout-after-relu-bug": ("GT602", """
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self, d, h, k, dropout):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(d, h),
            nn.ReLU(),
            nn.Dropout(dropout, inplace=True),  # BUG
            nn.Linear(h, k),
        )

    def forward(self, x):
        return self.main(x)


model = Classifier(6, 8, 3, 0.5)
model(torch.randn(4, 6)).sum().backward()
"""),
    "seq-dropout-after-block-of-file-bug": ("GT602", """
import torch
from torch import nn


class FCNet(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(d, h), nn.ReLU())

    def forward(self, x):
        return self.main(x)


head = nn.Sequential(FCNet(6, 8), nn.Dropout(p=0.3, inplace=True), nn.Linear(8, 2))  # BUG
head(torch.randn(4, 6)).sum().backward()
"""),
    "seq-relu-inplace-after-sigmoid-bug": ("GT602", """
import torch
from torch import nn

gate = nn.Sequential(nn.Linear(6, 6), nn.Sigmoid(), nn.ReLU(inplace=True))  # BUG
gate(torch.randn(4, 6)).sum().backward()
"""),
    "seq-dropout-after-gelu-ok": (None, """
import torch
from torch import nn

mlp = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Dropout(0.5, inplace=True), nn.Linear(8, 2))
mlp(torch.randn(4, 6)).sum().backward()
"""),
    "seq-dropout-zero-ok": (None, """
import torch
from torch import nn

mlp = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.0, inplace=True), nn.Linear(8, 2))
mlp(torch.randn(4, 6)).sum().backward()
"""),
    "seq-leaky-out-of-place-ok": (None, """
import torch
from torch import nn

disc = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Dropout(0.25, inplace=True),
                     nn.Linear(8, 1))
disc(torch.randn(4, 6)).sum().backward()
"""),
    "seq-forward-only-ok": (None, """
import torch
from torch import nn

block = nn.Sequential(nn.Linear(4, 2), nn.ReLU(), nn.ReLU(inplace=True)).eval()
print(block(torch.rand(4, 4)))
"""),
    "chained-write-in-block-loop-bug": ("GT602", """
import torch
from torch import nn


class InConv(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU())

    def forward(self, x):
        return self.conv(x)


class SK(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        shared = InConv(c)
        self.convs = nn.ModuleList([shared, nn.Sequential(nn.AvgPool2d(2), shared,
                                                          nn.Upsample(scale_factor=2))])

    def forward(self, x):
        for i, conv in enumerate(self.convs):
            fea = conv(x).unsqueeze_(dim=1)  # BUG
            feas = fea if i == 0 else torch.cat([feas, fea], dim=1)
        return feas.sum(dim=1)


model = SK()
model(torch.rand(1, 1, 8, 8)).mean().backward()
"""),
    "chained-view-in-block-loop-ok": (None, """
import torch
from torch import nn


class InConv(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU())

    def forward(self, x):
        return self.conv(x)


class SK(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        shared = InConv(c)
        self.convs = nn.ModuleList([shared, nn.Sequential(nn.AvgPool2d(2), shared,
                                                          nn.Upsample(scale_factor=2))])

    def forward(self, x):
        for i, conv in enumerate(self.convs):
            fea = conv(x).unsqueeze(dim=1)
            feas = fea if i == 0 else torch.cat([feas, fea], dim=1)
        return feas.sum(dim=1)


model = SK()
model(torch.rand(1, 1, 8, 8)).mean().backward()
"""),
    "write-after-block-loop-ok": (None, """
import torch
from torch import nn


class Stack(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(c, c), nn.ReLU()),
                                     nn.Linear(c, c)])

    def forward(self, x):
        for blk in self.blocks:
            out = blk(x)
            x = out
        out.mul_(2.0)
        return out


model = Stack()
model(torch.rand(3, 4)).sum().backward()
"""),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_across_class(name: str) -> None:
    code, src = INPLACE[name]
    want = [(code, i + 1) for i, s in enumerate(src.splitlines()) if s.endswith("# BUG")]
    got = [(f.code, f.line) for f in check_source(src, "snippet.py")
           if f.code in ("GT602", "GT603", "GT605")]
    assert got == want
    scope: dict[str, object] = {"__name__": "snippet"}
    if code is None:
        exec(compile(src, "snippet.py", "exec"), scope)  # noqa: S102 - the snippet is the test
    else:
        with pytest.raises(RuntimeError, match=MODIFIED):
            exec(compile(src, "snippet.py", "exec"), scope)  # noqa: S102


# GT758 across classes (NOTE [module outputs]): the probabilities come out of a model's forward
# as one element of a tuple, and reach the logits loss through a loss class or function of the
# file. Each source leaves `loss` and `reference` (the same loss taken on the logits): the twin's
# differ, the look-alike's are equal.
PROBS = {
    "tuple-element-into-loss-class-bug": ("GT758", """
import torch
import torch.nn as nn
import torch.nn.functional as F


class EdgeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fuse = nn.Conv2d(3, 1, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        cs = self.fuse(x)
        edge_out = self.sigmoid(cs)  # BUG
        return edge_out, cs


class EdgeLoss(nn.Module):
    def bce2d(self, input, target):
        log_p = input.transpose(1, 2).contiguous().view(1, -1)
        target_t = target.transpose(1, 2).contiguous().view(1, -1)
        return F.binary_cross_entropy_with_logits(log_p, target_t)

    def forward(self, edgein, edgemask):
        return 20 * self.bce2d(edgein, edgemask)


torch.manual_seed(0)
net = EdgeNet()
criterion = EdgeLoss()
x, edge = torch.randn(2, 3, 8, 8), (torch.rand(2, 1, 8, 8) > 0.8).float()
edge_out, cs = net(x)
loss = criterion(edge_out, edge)
reference = criterion(cs, edge)
"""),
    "probs-into-loss-function-bug": ("GT758", """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)).squeeze(-1)  # BUG


def edge_loss(pred, y):
    return F.binary_cross_entropy_with_logits(pred.view(-1), y.view(-1))


torch.manual_seed(0)
model = Scorer()
x, y = torch.randn(8, 6), torch.randint(0, 2, (8,)).float()
loss = edge_loss(model(x), y)
reference = edge_loss(model.fc(x).squeeze(-1), y)
"""),
    "logits-element-into-loss-class-ok": (None, """
import torch
import torch.nn as nn
import torch.nn.functional as F


class EdgeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fuse = nn.Conv2d(3, 1, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        cs = self.fuse(x)
        edge_out = self.sigmoid(cs)
        return cs, edge_out


class EdgeLoss(nn.Module):
    def bce2d(self, input, target):
        log_p = input.transpose(1, 2).contiguous().view(1, -1)
        target_t = target.transpose(1, 2).contiguous().view(1, -1)
        return F.binary_cross_entropy_with_logits(log_p, target_t)

    def forward(self, edgein, edgemask):
        return 20 * self.bce2d(edgein, edgemask)


torch.manual_seed(0)
net = EdgeNet()
criterion = EdgeLoss()
x, edge = torch.randn(2, 3, 8, 8), (torch.rand(2, 1, 8, 8) > 0.8).float()
cs, edge_out = net(x)
loss = criterion(cs, edge)
reference = criterion(net.fuse(x), edge)
"""),
    "loss-class-takes-logit-of-probs-ok": (None, """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)).squeeze(-1)


class ProbLoss(nn.Module):
    def forward(self, probs, y):
        probs = torch.logit(probs, eps=1e-6)
        return F.binary_cross_entropy_with_logits(probs, y)


torch.manual_seed(0)
model, criterion = Scorer(), ProbLoss()
x, y = torch.randn(8, 6), torch.randint(0, 2, (8,)).float()
loss = criterion(model(x), y)
reference = F.binary_cross_entropy_with_logits(model.fc(x).squeeze(-1), y)
"""),
}


@pytest.mark.parametrize("name", sorted(PROBS))
def test_probabilities_across_class(name: str) -> None:
    code, src = PROBS[name]
    want = [(code, i + 1) for i, s in enumerate(src.splitlines()) if s.endswith("# BUG")]
    got = [(f.code, f.line) for f in check_source(src, "snippet.py") if f.code == "GT758"]
    assert got == want
    scope: dict[str, object] = {"__name__": "snippet"}
    exec(compile(src, "snippet.py", "exec"), scope)  # noqa: S102 - the snippet is the test
    same = torch.isclose(scope["loss"], scope["reference"], atol=1e-4).item()  # type: ignore
    assert same is (code is None)
