"""The facts widened by recall35 (docs/triage/recall35.md), each as a buggy twin that is
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
SCALAR_ONLY = (RuntimeError, "grad can be implicitly created only for scalar outputs")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT715 (NOTE [parameter ranks]): the batch reaches a method as its argument, and a
    # one-feature head on a 2-d batch still gives one value per sample. The look-alike hands
    # the method one sample (a 1-d vector): the head's output has one element.
    "one-feature-head-on-a-batch-argument": (Shape("""
        class Probe:
            def __init__(self, body, head):
                self.body, self.head = body, head
            def saliency(self, z):
                z = z.detach().requires_grad_(True)
                score = self.head(self.body(z))
                return torch.autograd.grad(score, z)[0]
        probe = Probe(nn.Sequential(nn.Linear(5, 8), nn.ReLU()), nn.Linear(8, 1))
        probe.saliency(torch.randn(4, 5))
        """, "GT715", line=7, raises=SCALAR_ONLY), Shape("""
        class Probe:
            def __init__(self, body, head):
                self.body, self.head = body, head
            def saliency(self, z):
                z = z.detach().requires_grad_(True)
                score = self.head(self.body(z))
                return torch.autograd.grad(score, z)[0]
        probe = Probe(nn.Sequential(nn.Linear(5, 8), nn.ReLU()), nn.Linear(8, 1))
        g = probe.saliency(torch.randn(5))
        """, "GT715", holds="g.shape == (5,)")),
    # GT715: the same head on a value network's batch, read through a helper's return. The
    # look-alike makes a batch of one here (`state.unsqueeze(0)`): the head's output has
    # one element, and backward needs no gradient (NOTE [ranks]: ``Rank.single``).
    "one-feature-head-on-a-batch-of-one": (Shape("""
        trunk = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
        value_head = nn.Linear(16, 1)
        def value(states):
            return value_head(trunk(states))
        states = torch.randn(6, 4)
        v = value(states)
        v.backward()
        """, "GT715", line=4, raises=SCALAR_ONLY), Shape("""
        trunk = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
        value_head = nn.Linear(16, 1)
        def value(states):
            return value_head(trunk(states))
        state = torch.randn(4)
        v = value(state.unsqueeze(0))
        v.backward()
        """, "GT715", holds="value_head.weight.grad is not None")),
    # GT715: per-token log-probabilities (`gather(...).squeeze(-1)`, summed over the last
    # dim) reach a loss module as arguments; its `forward` returns the per-pair losses in a
    # tuple, unpacked by the caller and handed to a helper's `backward`. The finding is on
    # the loss's return. The look-alike reduces the losses there.
    "per-pair-losses-through-arguments": (Shape("""
        def sequence_logps(logits, labels):
            per_token = torch.gather(logits.log_softmax(-1), 2, labels.unsqueeze(2)).squeeze(2)
            return per_token.sum(-1)
        class PairLoss(nn.Module):
            def forward(self, good, bad):
                margins = good - bad
                return -F.logsigmoid(margins), margins.detach()
        def apply_grads(loss, opt):
            loss.backward()
            opt.step()
        lm = nn.Linear(6, 10)
        opt = torch.optim.SGD(lm.parameters(), lr=0.1)
        crit = PairLoss()
        ids = torch.randint(0, 10, (4, 7))
        logps = sequence_logps(lm(torch.randn(4, 7, 6)), ids)
        loss, margin = crit(logps[:2], logps[2:])
        apply_grads(loss, opt)
        """, "GT715", line=7, raises=SCALAR_ONLY), Shape("""
        def sequence_logps(logits, labels):
            per_token = torch.gather(logits.log_softmax(-1), 2, labels.unsqueeze(2)).squeeze(2)
            return per_token.sum(-1)
        class PairLoss(nn.Module):
            def forward(self, good, bad):
                margins = good - bad
                return -F.logsigmoid(margins).mean(), margins.detach()
        def apply_grads(loss, opt):
            loss.backward()
            opt.step()
        lm = nn.Linear(6, 10)
        opt = torch.optim.SGD(lm.parameters(), lr=0.1)
        crit = PairLoss()
        ids = torch.randint(0, 10, (4, 7))
        logps = sequence_logps(lm(torch.randn(4, 7, 6)), ids)
        loss, margin = crit(logps[:2], logps[2:])
        apply_grads(loss, opt)
        """, "GT715", holds="lm.weight.grad is not None")),
    # GT715: a cosine loss per sample from a helper whose arguments come from a module's
    # forward over batches of a literal list (a loop target). The look-alike feeds single
    # vectors: the sum over the last dim leaves one value.
    "per-sample-cosine-loss-from-a-helper": (Shape("""
        def cosine_loss(p, z):
            p, z = F.normalize(p, dim=-1), F.normalize(z, dim=-1)
            return 1 - (p * z).sum(dim=-1)
        class Siamese(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
            def forward(self, a, b):
                return cosine_loss(self.enc(a), self.enc(b).detach())
        net = Siamese()
        for x in [torch.randn(6, 8), torch.randn(6, 8)]:
            loss = net(x, x + 0.1)
            loss.backward()
        """, "GT715", line=3, raises=SCALAR_ONLY), Shape("""
        def cosine_loss(p, z):
            p, z = F.normalize(p, dim=-1), F.normalize(z, dim=-1)
            return 1 - (p * z).sum(dim=-1)
        class Siamese(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
            def forward(self, a, b):
                return cosine_loss(self.enc(a), self.enc(b).detach())
        net = Siamese()
        for x in [torch.randn(8), torch.randn(8)]:
            loss = net(x, x + 0.1)
            loss.backward()
        """, "GT715", holds="net.enc[0].weight.grad is not None")),
    # GT206: a helper returns a first-order Taylor step built on a Jacobian taken without
    # create_graph (torch.autograd.functional), and the caller backpropagates it: the
    # Jacobian's own derivative is lost. The look-alike passes create_graph=True: a gets the
    # extra g''(a) (x - a) term.
    "jacobian-in-a-returned-term": (Shape("""
        def cube(t):
            return t ** 3
        def linearized(x, a):
            slope = torch.autograd.functional.jacobian(cube, a)
            return cube(a) + slope * (x - a)
        a = torch.ones(1, requires_grad=True)
        loss = ((linearized(torch.zeros(1), a) - 0.5) ** 2).sum() / 2
        loss.backward()
        """, "GT206", line=4, holds="a.grad.item() == 0.0"), Shape("""
        def cube(t):
            return t ** 3
        def linearized(x, a):
            slope = torch.autograd.functional.jacobian(cube, a, create_graph=True)
            return cube(a) + slope * (x - a)
        a = torch.ones(1, requires_grad=True)
        loss = ((linearized(torch.zeros(1), a) - 0.5) ** 2).sum() / 2
        loss.backward()
        """, "GT206", holds="a.grad.item() == 15.0")),
    # GT206: a gradient-norm penalty from a helper not named like one, added to the loss in
    # the training loop: without create_graph it trains nothing. The look-alike computes the
    # helper's value once, before the loop, from a reference model: a fixed target the loop
    # matches (the caller's backward runs in a loop the call is not in).
    "gradient-term-from-a-helper-in-the-loop": (Shape("""
        def grad_norm_term(net, x):
            x = x.clone().requires_grad_(True)
            g = torch.autograd.grad(net(x).sum(), x)[0]
            return ((g.norm(2, dim=1) - 1) ** 2).mean()
        net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x in [torch.randn(5, 3), torch.randn(5, 3)]:
            penalty = grad_norm_term(net, x)
            loss = net(x).mean() + 10.0 * penalty
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT206", line=3, holds="not penalty.requires_grad"), Shape("""
        def input_slopes(net, x):
            x = x.clone().requires_grad_(True)
            g = torch.autograd.grad(net(x).sum(), x)[0]
            return g.abs()
        teacher = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        student = nn.Sequential(nn.Linear(3, 3))
        opt = torch.optim.SGD(student.parameters(), lr=0.1)
        x = torch.randn(5, 3)
        target = input_slopes(teacher, x)
        for _ in range(2):
            loss = ((student(x) - target) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT206", holds="student[0].weight.grad is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_jacobian_create_graph_by_position_silent() -> None:
    """`jacobian(f, a, True)` passes create_graph by position (its third parameter)."""
    judge(PRELUDE, Shape("""
        def cube(t):
            return t ** 3
        def linearized(x, a):
            slope = torch.autograd.functional.jacobian(cube, a, True)
            return cube(a) + slope * (x - a)
        a = torch.ones(1, requires_grad=True)
        loss = ((linearized(torch.zeros(1), a) - 0.5) ** 2).sum() / 2
        loss.backward()
        """, "GT206", holds="a.grad.item() == 15.0"))
