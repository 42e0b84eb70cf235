"""Loss inputs of the wrong kind: GT758 widened (probabilities into kl_div / KLDivLoss, which wants
log-probabilities; a sigmoid into binary_cross_entropy_with_logits / BCEWithLogitsLoss, which wants
logits) and GT760 (a model's raw Linear/Conv output into binary_cross_entropy / BCELoss, which
wants probabilities). Each look-alike stays silent and trains; each buggy twin (other spellings
than the rule's examples) is reported on its line and shows the symptom on real torch.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # kl_div wants log-probabilities as its input (matchmaker KLDiv on a softmax)
    "kl-div-on-probabilities": (Shape("""
        student = nn.Linear(4, 3)
        opt = torch.optim.Adam(student.parameters(), lr=0.05)
        x = torch.randn(64, 4)
        target = torch.softmax(torch.randn(64, 3), dim=1)
        for _ in range(300):
            log_p = F.log_softmax(student(x), dim=1)
            div = F.kl_div(log_p, target, reduction="batchmean")
            opt.zero_grad()
            div.backward()
            opt.step()
        """, "GT758", holds="div.item() >= 0"), [Shape("""
        class Student(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 3)

            def forward(self, x):
                return self.body(x).softmax(dim=-1)

        student = Student()
        kd = nn.KLDivLoss(reduction="batchmean")
        opt = torch.optim.Adam(student.parameters(), lr=0.05)
        x = torch.randn(64, 4)
        target = torch.softmax(torch.randn(64, 3), dim=1)
        for _ in range(300):
            div = kd(student(x), target)
            opt.zero_grad()
            div.backward()
            opt.step()
        """, "GT758", 7, holds="div.item() < 0"), Shape("""
        def distill(net, x, teacher_probs):
            p = torch.softmax(net(x), 1)
            return F.kl_div(p, teacher_probs, reduction='sum') / x.shape[0]

        net = nn.Linear(4, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.5)
        x = torch.randn(64, 4)
        t = torch.softmax(torch.randn(64, 3), dim=1)
        for _ in range(200):
            loss = distill(net, x, t)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT758", 2, holds="loss.item() < 0")]),
    # binary_cross_entropy_with_logits applies the sigmoid itself
    "sigmoid-into-bce-with-logits": (Shape("""
        disc = nn.Linear(4, 1)
        opt = torch.optim.Adam(disc.parameters(), lr=0.1)
        x = torch.cat([torch.randn(32, 4) + 2, torch.randn(32, 4) - 2])
        y = torch.cat([torch.ones(32, 1), torch.zeros(32, 1)])
        crit = nn.BCEWithLogitsLoss()
        for _ in range(200):
            logit = disc(x)
            loss = crit(logit, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        prob = torch.sigmoid(disc(x))
        """, "GT758", holds="loss.item() < 0.05"), [Shape("""
        disc = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
        opt = torch.optim.Adam(disc.parameters(), lr=0.1)
        x = torch.cat([torch.randn(32, 4) + 2, torch.randn(32, 4) - 2])
        y = torch.cat([torch.ones(32, 1), torch.zeros(32, 1)])
        crit = nn.BCEWithLogitsLoss()
        for _ in range(200):
            loss = crit(disc(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT758", 1, holds="loss.item() > 0.3"), Shape("""
        class D(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                out = torch.sigmoid(self.fc(x))
                return out

        d = D()
        opt = torch.optim.Adam(d.parameters(), lr=0.1)
        x = torch.cat([torch.randn(32, 4) + 2, torch.randn(32, 4) - 2])
        y = torch.cat([torch.ones(32, 1), torch.zeros(32, 1)])
        for _ in range(200):
            loss = F.binary_cross_entropy_with_logits(d(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT758", 7, holds="loss.item() > 0.3")]),
    # binary_cross_entropy wants probabilities: a model ending in a Linear/Conv gives logits
    "logits-into-binary-cross-entropy": (Shape("""
        class Seg(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Conv2d(3, 4, 3, padding=1)
                self.score = nn.Conv2d(4, 2, 1)

            def forward(self, x):
                return self.score(torch.relu(self.body(x)))

        seg = Seg()
        crit = nn.BCELoss()
        x, t = torch.randn(2, 3, 8, 8), torch.randint(0, 2, (2, 2, 8, 8)).float()
        prob = torch.sigmoid(seg(x))
        loss = crit(prob, t)
        loss.backward()
        logit_loss = nn.BCEWithLogitsLoss()(seg(x), t)
        """, "GT760", holds="0 < loss.item() < 10"), [Shape("""
        class Seg(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Conv2d(3, 4, 3, padding=1)
                self.score = nn.Conv2d(4, 2, 1)

            def forward(self, x):
                h = torch.relu(self.body(x))
                return self.score(h)

        seg = Seg()
        x, t = torch.randn(2, 3, 8, 8), torch.randint(0, 2, (2, 2, 8, 8)).float()
        loss = F.binary_cross_entropy(seg(x), t)
        """, "GT760", 13, "between 0 and 1"), Shape("""
        clf = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        bce = nn.BCELoss()
        x, y = torch.randn(16, 4) * 5, torch.randint(0, 2, (16, 1)).float()
        pred = clf(x)
        loss = bce(pred, y)
        """, "GT760", 4, "between 0 and 1")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
