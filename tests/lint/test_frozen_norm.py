"""GT461: a part frozen by requires_grad holds BatchNorm layers that `model.train()` switches on.
Each case is also run on torch: in the buggy twins the frozen BatchNorm statistics move, in the
look-alikes they do not (or nothing is claimed: the layer is not visible, the part adapts on
purpose)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """\
import torch
import torch.nn as nn
torch.manual_seed(0)
loader = [(torch.randn(8, 3, 6, 6) + 1, torch.randint(0, 2, (8,))) for _ in range(3)]
"""


def _lines(body: str) -> tuple[list[int], str]:
    src = PRELUDE + textwrap.dedent(body)
    found = check_source(src, path="case.py", select=["GT461"])
    return [f.line for f in found], src


def _moved(src: str) -> bool:
    ns: dict = {}
    exec(compile(src, "case.py", "exec"), ns)
    return bool(ns["moved"])


def _marked(src: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if line.endswith("# HERE"))


BUGS = [
    # a Sequential's head trains, the rest frozen through a slice; train() in the loop
    """
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    for p in net[:-1].parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(net[-1].parameters(), lr=0.1)
    before = net[1].running_mean.clone()
    for x, y in loader:
        net.train()  # HERE
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    moved = not torch.equal(before, net[1].running_mean)
    """,
    # every parameter but the head's, by name; train() once before the loop, in a function
    """
    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU())
            self.fc = nn.Linear(8, 2)
        def forward(self, x):
            return self.fc(self.features(x).mean((2, 3)))
    def probe(model, opt):
        for name, p in model.named_parameters():
            if not name.startswith("fc"):
                p.requires_grad = False
        model.train()  # HERE
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    model = Probe()
    before = model.features[1].running_mean.clone()
    probe(model, torch.optim.SGD(model.fc.parameters(), lr=0.1))
    moved = not torch.equal(before, model.features[1].running_mean)
    """,
    # a helper freezes the backbone, handed to the classifier's constructor
    """
    def deactivate_requires_grad(m):
        for p in m.parameters():
            p.requires_grad = False
    class Classifier(nn.Module):
        def __init__(self, backbone):
            super().__init__()
            self.backbone = backbone
            self.head = nn.Linear(8, 2)
        def forward(self, x):
            return self.head(self.backbone(x).flatten(1))
    backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.AdaptiveAvgPool2d(1))
    deactivate_requires_grad(backbone)
    clf = Classifier(backbone)
    opt = torch.optim.SGD(clf.head.parameters(), lr=0.1)
    before = backbone[1].running_mean.clone()
    for epoch in range(2):
        clf.train()  # HERE
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(clf(x), y).backward()
            opt.step()
    moved = not torch.equal(before, backbone[1].running_mean)
    """,
    # the freeze aims at the norm layer itself: reported on the freeze
    """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.bn = nn.BatchNorm2d(8)
            self.fc = nn.Linear(8, 2)
        def forward(self, x):
            return self.fc(self.bn(self.conv(x)).mean((2, 3)))
    model = Net()
    model.bn.requires_grad_(False)  # HERE
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    before = model.bn.running_mean.clone()
    for epoch in range(2):
        model.train()
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    moved = not torch.equal(before, model.bn.running_mean)
    """,
    # freeze_bn written out without eval(): a loop picking the BatchNorm layers
    """
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.requires_grad = False  # HERE
            m.bias.requires_grad = False
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    before = model[1].running_mean.clone()
    for x, y in loader:
        model.train()
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    moved = not torch.equal(before, model[1].running_mean)
    """,
]

LOOK_ALIKES = [
    # the frozen part is put back in eval after train()
    """
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    for p in net[:-1].parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(net[-1].parameters(), lr=0.1)
    before = net[1].running_mean.clone()
    for x, y in loader:
        net.train()
        net[:-1].eval()
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    moved = not torch.equal(before, net[1].running_mean)
    """,
    # a freeze_bn method (eval inside) called after train()
    """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU())
            self.fc = nn.Linear(8, 2)
        def forward(self, x):
            return self.fc(self.features(x).mean((2, 3)))
        def freeze_bn(self):
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.eval()
    model = Net()
    for p in model.features.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(model.fc.parameters(), lr=0.1)
    before = model.features[1].running_mean.clone()
    for x, y in loader:
        model.train()
        model.freeze_bn()
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    moved = not torch.equal(before, model.features[1].running_mean)
    """,
    # BatchNorm without running statistics
    """
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8, track_running_stats=False),
                        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    for p in net[:-1].parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(net[-1].parameters(), lr=0.1)
    for x, y in loader:
        net.train()
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    moved = False
    """,
    # GroupNorm keeps no statistics
    """
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    for p in net[:-1].parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(net[-1].parameters(), lr=0.1)
    for x, y in loader:
        net.train()
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    moved = False
    """,
    # the class keeps its frozen part in eval through its own train()
    """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU())
            self.fc = nn.Linear(8, 2)
            for p in self.features.parameters():
                p.requires_grad = False
        def forward(self, x):
            return self.fc(self.features(x).mean((2, 3)))
        def train(self, mode=True):
            super().train(mode)
            self.features.eval()
            return self
    model = Net()
    for p in model.features.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(model.fc.parameters(), lr=0.1)
    before = model.features[1].running_mean.clone()
    for x, y in loader:
        model.train()
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    moved = not torch.equal(before, model.features[1].running_mean)
    """,
    # only forwards after train() (feature extraction, nothing trains here)
    """
    backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.AdaptiveAvgPool2d(1))
    model = nn.Sequential(backbone, nn.Flatten(), nn.Linear(8, 2))
    for p in model[0].parameters():
        p.requires_grad = False
    model.train()
    feats = [model(x) for x, _ in loader]
    moved = False
    """,
    # the whole model frozen: nothing trains, another rule's matter
    """
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    head = nn.Linear(2, 2)
    for p in net.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    for x, y in loader:
        net.train()
        opt.zero_grad()
        nn.functional.cross_entropy(head(net(x)), y).backward()
        opt.step()
    moved = False
    """,
    # train() on the frozen backbone alone: its statistics are asked to adapt
    """
    backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten())
    head = nn.Linear(8, 2)
    for p in backbone.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    for x, y in loader:
        backbone.train()
        opt.zero_grad()
        nn.functional.cross_entropy(head(backbone(x)), y).backward()
        opt.step()
    moved = False
    """,
]


@pytest.mark.parametrize("body", BUGS)
def test_frozen_norm_in_train_mode_reported_on_its_line(body):
    lines, src = _lines(body)
    assert lines == [_marked(src)]
    assert _moved(src)


@pytest.mark.parametrize("body", LOOK_ALIKES)
def test_look_alike_is_silent(body):
    lines, src = _lines(body)
    assert lines == []
    assert not _moved(src)
