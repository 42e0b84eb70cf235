"""GT422: a loop over every parameter reads `.grad` of a layer `forward` never runs (grokfast's
gradient filter). Look-alikes stay silent and run; buggy twins in other spellings are reported on
their line and really raise on torch."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """\
import torch
import torch.nn as nn
torch.manual_seed(0)
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 6)
        self.spare = nn.Sequential(nn.Linear(6, 3), nn.ReLU())
        self.out = nn.Linear(6, 2)
    def forward(self, x):
        return self.out(torch.tanh(self.encoder(x)))
net = Tagger()
net(torch.randn(4, 6)).pow(2).mean().backward()
"""
SPARE_LINE = 8

LOOK_ALIKES = [
    # guarded on the grad itself
    """
    norms = [p.grad.norm() for p in net.parameters() if p.grad is not None]
    for name, p in net.named_parameters():
        if p.grad is None:
            continue
        p.grad.mul_(0.5)
    """,
    # a requires_grad test guards nothing here, but the read is of a layer that ran
    """
    for p in net.out.parameters():
        p.grad.data.clamp_(-1, 1)
    """,
    # the value of `.grad`, not a dereference
    """
    missing = [n for n, p in net.named_parameters() if p.grad is None]
    """,
]

TWINS = [
    ("""
    def clip_all(model, bound):
        for p in model.parameters():
            if p.requires_grad:
                p.grad.data.clamp_(-bound, bound)
    clip_all(net, 1.0)
    """, 4, AttributeError),
    ("""
    total = sum(p.grad.pow(2).sum() for p in net.parameters())
    """, 1, AttributeError),
    ("""
    for _, w in net.named_parameters():
        w.grad /= 2
    """, 2, TypeError),
]


def _found(body: str) -> list[tuple[int, str]]:
    src = PRELUDE + textwrap.dedent(body).lstrip("\n")
    offset = PRELUDE.count("\n")
    return [(f.line - offset, f.code) for f in check_source(src, "shape.py", select=["GT422"])]


def _run(body: str) -> None:
    exec(compile(PRELUDE + textwrap.dedent(body).lstrip("\n"), "shape.py", "exec"), {})


@pytest.mark.parametrize("body", LOOK_ALIKES)
def test_look_alike_is_silent_and_runs(body: str) -> None:
    assert _found(body) == []
    _run(body)


@pytest.mark.parametrize("body,line,error", TWINS)
def test_twin_is_reported_and_raises(body: str, line: int, error: type) -> None:
    assert _found(body) == [(line, "GT422")]
    with pytest.raises(error):
        _run(body)


def test_related_names_the_unused_layer() -> None:
    src = PRELUDE + textwrap.dedent(TWINS[0][0]).lstrip("\n")
    (f,) = check_source(src, "shape.py", select=["GT422"])
    assert [r.line for r in f.related] == [SPARE_LINE]


HEADS = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(5, 8)
        self.cls_head = nn.Linear(8, 3)
        self.box_head = nn.Linear(8, 4)
    def forward(self, x):
        f = torch.relu(self.trunk(x))
        return self.cls_head(f), self.box_head(f)
"""

DROPPED_LOOK_ALIKES = [
    # both outputs reach the loss
    """
    def train(net, x, y, boxes):
        logits, box = net(x)
        (F.cross_entropy(logits, y) + F.l1_loss(box, boxes)).backward()
        for p in net.parameters():
            p.grad.mul_(0.5)
    train(TwoHeads(), torch.randn(6, 5), torch.randint(0, 3, (6,)), torch.randn(6, 4))
    """,
    # the dropped head's parameters are skipped by a test of the grad
    """
    net = TwoHeads()
    logits, box = net(torch.randn(6, 5))
    F.cross_entropy(logits, torch.randint(0, 3, (6,))).backward()
    for p in net.parameters():
        if p.grad is not None:
            p.grad.mul_(0.5)
    """,
]

DROPPED_TWINS = [
    ("""
    def train(net, x, y):
        logits, box = net(x)
        F.cross_entropy(logits, y).backward()
        for name, p in net.named_parameters():
            p.grad.data.mul_(0.5)
    train(TwoHeads(), torch.randn(6, 5), torch.randint(0, 3, (6,)))
    """, 5, AttributeError),
    ("""
    net = TwoHeads()
    logits, box = net(torch.randn(6, 5))
    F.cross_entropy(logits, torch.randint(0, 3, (6,))).backward()
    norm = sum(float(p.grad.norm()) for p in net.parameters())
    """, 4, AttributeError),
]


def _found_heads(body: str) -> list[tuple[int, str]]:
    src = HEADS + textwrap.dedent(body).lstrip("\n")
    offset = HEADS.count("\n")
    return [(f.line - offset, f.code) for f in check_source(src, "heads.py", select=["GT422"])]


@pytest.mark.parametrize("body", DROPPED_LOOK_ALIKES)
def test_dropped_output_look_alike_is_silent_and_runs(body: str) -> None:
    assert _found_heads(body) == []
    exec(compile(HEADS + textwrap.dedent(body).lstrip("\n"), "heads.py", "exec"), {})


@pytest.mark.parametrize("body,line,error", DROPPED_TWINS)
def test_dropped_output_twin_is_reported_and_raises(body: str, line: int, error: type) -> None:
    assert _found_heads(body) == [(line, "GT422")]
    with pytest.raises(error):
        exec(compile(HEADS + textwrap.dedent(body).lstrip("\n"), "heads.py", "exec"), {})


def test_a_base_of_another_file_may_run_the_layer() -> None:
    """`class Net(BaseModel)`: the base's `forward`, in another file, may read `self.head`."""
    src = textwrap.dedent('''
        import torch.nn as nn
        from mylib.models import BaseModel
        class Net(BaseModel):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 2)
        model = Net()
        model(x).sum().backward()
        for p in model.parameters():
            p.grad.data.mul_(0.5)
        ''')
    assert check_source(src, "s.py", select=["GT422"]) == []
    assert len(check_source(src.replace("(BaseModel)", "(nn.Module)").replace(
        "from mylib.models import BaseModel\n", ""), "s.py", select=["GT422"])) == 1
