"""A frozen feature extractor left in train mode under a trained linear head (NOTE [probe
statistics], GT841): named at the ``.train()`` that switched the frozen normalisation layers on;
look-alikes (the backbone put back in eval mode, a detector's frozen first stage under trained
convolutions, a backbone without running statistics) stay silent. Real torch, in-process."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

def batches(n):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(8, 3, 6, 6, generator=g) + 1.0, torch.randint(0, 4, (8,), generator=g))
            for _ in range(n)]

def backbone():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten())
"""

BUGS = {
    # a trainer method switches the wrapped model on through an attribute chain
    "trainer_method_attribute_receiver": """
class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = backbone()
        self.classifier = nn.Linear(8, 4)

    def forward(self, x):
        return self.classifier(self.encoder(x))

class Trainer:
    def __init__(self, model):
        self.model = model
        self.model.encoder.requires_grad_(False)
        self.opt = torch.optim.SGD(model.classifier.parameters(), lr=0.1)

    def epoch(self, data):
        self.model.train()  # C
        for x, y in data:
            self.opt.zero_grad()
            F.cross_entropy(self.model(x), y).backward()
            self.opt.step()

trainer = Trainer(Probe())
for _ in range(2):
    trainer.epoch(batches(2))
""",
    # a helper function freezes by named_parameters, train(True) in a train function
    "train_true_in_function": """
def freeze_all_but_head(model):
    for name, p in model.named_parameters():
        if not name.startswith("2."):
            p.requires_grad = False

def train_one_epoch(net, opt, data):
    net.train(True)  # C
    for x, y in data:
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

net = nn.Sequential(backbone(), nn.Dropout(0.1), nn.Linear(8, 4))
freeze_all_but_head(net)
opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=1e-3)
train_one_epoch(net, opt, batches(3))
""",
}

LOOKALIKES = {
    # the frozen backbone is put back in eval mode after every train()
    "backbone_back_in_eval": """
feats, head = backbone(), nn.Linear(8, 4)
feats.requires_grad_(False)
model = nn.Sequential(feats, head)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
for x, y in batches(3):
    model.train()
    feats.eval()
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
    # a detector's first stage frozen, convolutions trained after it (statistics adapt on
    # purpose)
    "frozen_stage_under_trained_convolutions": """
stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
model = nn.Sequential(stem, nn.Conv2d(8, 4, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
for p in stem.parameters():
    p.requires_grad_(False)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
model.train()
for x, y in batches(3):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
    # train() called on the frozen part itself: its statistics are asked to adapt
    "train_called_on_the_frozen_part": """
feats, head = backbone(), nn.Linear(8, 4)
for p in feats.parameters():
    p.requires_grad_(False)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
for x, y in batches(3):
    feats.train()
    head.train()
    opt.zero_grad()
    F.cross_entropy(head(feats(x)), y).backward()
    opt.step()
""",
    # a frozen backbone without running statistics: nothing moves
    "backbone_without_running_statistics": """
feats = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8, track_running_stats=False),
                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
head = nn.Linear(8, 4)
for p in feats.parameters():
    p.requires_grad = False
model = nn.Sequential(feats, head)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
model.train()
for x, y in batches(3):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
}


def _line(src: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_train_call_named_first(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT841", _line(src)), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and "GT841" not in res.codes(), res.findings
