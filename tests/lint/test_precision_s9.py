"""Shapes that fired wrongly on the gate corpora rebuilt in session 9 (super-gradients'
RepVGG blocks, pytorch-widedeep's Bayesian layers), each in another spelling than the
project's and next to a buggy twin that is still reported. Every snippet runs on real torch."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""
SECOND_TIME = (RuntimeError, "Trying to backward through the graph a second time")
ELEMENT0 = (RuntimeError, "does not require grad")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # a learnable gate on one branch of the constructor, a plain number on the other: the two
    # assignments never both run (GT415)
    "parameter-or-number-by-flag": (Shape("""
        class Block(nn.Module):
            def __init__(self, learn_gate):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                if learn_gate:
                    self.gate = nn.Parameter(torch.full((1,), 0.5))
                elif learn_gate is None:
                    self.gate = None
                else:
                    self.gate = 0.5
            def forward(self, x):
                return self.gate * self.lin(x) + x
        Block(True)(torch.randn(2, 3)).sum().backward()
        Block(False)(torch.randn(2, 3)).sum().backward()
        """, "GT415"), Shape("""
        class Block(nn.Module):
            def __init__(self, learn_gate):
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self.gate = nn.Parameter(torch.full((1,), 0.5))
                if not learn_gate:
                    self.gate = 0.5
            def forward(self, x):
                return self.gate * self.lin(x) + x
        Block(False)
        """, "GT415", 7, (TypeError, "cannot assign"))),
    # a helper object built in __init__ keeps the Parameters and computes from them on each
    # call: nothing is computed at construction (GT521)
    "object-keeping-parameters": (Shape("""
        class Reparam:
            def __init__(self, loc, log_scale):
                self.loc, self.log_scale = loc, log_scale
            def draw(self):
                return self.loc + self.log_scale.exp() * torch.randn_like(self.loc)
        class Noisy(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.loc = nn.Parameter(torch.zeros(n))
                self.log_scale = nn.Parameter(torch.zeros(n))
                self.dist = Reparam(self.loc, self.log_scale)
            def forward(self, x):
                return x * self.dist.draw()
        m = Noisy(3)
        for _ in range(2):
            m(torch.randn(2, 3)).sum().backward()
        """, "GT521", holds="m.loc.grad is not None"), Shape("""
        class Noisy(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.loc = nn.Parameter(torch.zeros(n))
                self.log_scale = nn.Parameter(torch.zeros(n))
                self.scale = self.log_scale.exp() + F.softplus(self.loc)
            def forward(self, x):
                return x * self.scale
        m = Noisy(3)
        for _ in range(2):
            m(torch.randn(2, 3)).sum().backward()
        """, "GT521", 6, SECOND_TIME)),
}

# module constants read by a helper (NOTE [module constants]): the targets of a regression
# script built by a helper from a module-level tensor carry no graph, so a detached prediction
# is the loss's only way to the model (pytorch/examples' regression with a bug injected)
RECALL: dict[str, tuple[Shape, Shape]] = {
    "helper-reads-module-tensor": (Shape("""
        SCALE = nn.Parameter(torch.ones(1, 1))
        def batch(n=8):
            x = torch.randn(n, 3)
            return x, x.sum(1, keepdim=True) * SCALE
        net = nn.Linear(3, 1)
        for _ in range(2):
            x, y = batch()
            net.zero_grad()
            loss = F.mse_loss(net(x).detach(), y)
            loss.backward()
        """, "GT107", holds="SCALE.grad is not None and net.weight.grad is None"), Shape("""
        COEF = torch.randn(3, 1) * 2
        BIAS = 0.5
        def batch(n=8):
            x = torch.randn(n, 3)
            return x, x.mm(COEF) + BIAS
        net = nn.Linear(3, 1)
        for _ in range(2):
            x, y = batch()
            net.zero_grad()
            loss = F.mse_loss(net(x).detach(), y)
            loss.backward()
        """, "GT107", 10, ELEMENT0)),
    # a module-level name rebound at run time (`global`) is not followed
    "module-name-rebound-global": (Shape("""
        COEF = torch.randn(3, 1)
        def learn_targets():
            global COEF
            COEF = nn.Parameter(COEF)
        def batch(n=8):
            x = torch.randn(n, 3)
            return x, x.mm(COEF)
        learn_targets()
        net = nn.Linear(3, 1)
        x, y = batch()
        loss = F.mse_loss(net(x).detach(), y)
        loss.backward()
        """, "GT107", holds="COEF.grad is not None"), Shape("""
        COEF = torch.randn(3, 1)
        def batch(n=8):
            x = torch.randn(n, 3)
            return x, x.mm(COEF)
        net = nn.Linear(3, 1)
        x, y = batch()
        loss = F.mse_loss(net(x).detach(), y)
        loss.backward()
        """, "GT107", 7, ELEMENT0)),
}
SHAPES.update(RECALL)

# two losses returned by one helper of the file: they share a graph only if the helper built
# them from a common graph-carrying value (GT509; garage's SAC critic objective)
SHAPES["helper-returns-two-losses"] = (Shape("""
    class Critics:
        def __init__(self):
            self.q1, self.q2, self.target = nn.Linear(3, 1), nn.Linear(3, 1), nn.Linear(3, 1)
            self.opt1 = torch.optim.SGD(self.q1.parameters(), 0.1)
            self.opt2 = torch.optim.SGD(self.q2.parameters(), 0.1)
        def _critic_terms(self, s, r):
            with torch.no_grad():
                y = r + 0.9 * self.target(s)
            first = F.mse_loss(self.q1(s), y)
            second = F.mse_loss(self.q2(s), y)
            return first, second
        def update(self, s, r):
            l1, l2 = self._critic_terms(s, r)
            self.opt1.zero_grad()
            l1.backward()
            self.opt1.step()
            self.opt2.zero_grad()
            l2.backward()
            self.opt2.step()
    c = Critics()
    c.update(torch.randn(4, 3), torch.randn(4, 1))
    """, "GT509", holds="c.q2.weight.grad is not None"), Shape("""
    class Critics:
        def __init__(self):
            self.body, self.q1, self.q2 = nn.Linear(3, 3), nn.Linear(3, 1), nn.Linear(3, 1)
            self.opt1 = torch.optim.SGD(self.q1.parameters(), 0.1)
            self.opt2 = torch.optim.SGD(self.q2.parameters(), 0.1)
        def _critic_terms(self, s, r):
            h = torch.tanh(self.body(s))
            first = F.mse_loss(self.q1(h), r)
            second = F.mse_loss(self.q2(h), r)
            return first, second
        def update(self, s, r):
            l1, l2 = self._critic_terms(s, r)
            self.opt1.zero_grad()
            l1.backward()
            self.opt1.step()
            self.opt2.zero_grad()
            l2.backward()
            self.opt2.step()
    c = Critics()
    c.update(torch.randn(4, 3), torch.randn(4, 1))
    """, "GT509", 14, SECOND_TIME))

# the generators' optimizers held in a dict under computed keys: their step after the
# generator's backward is a step GT522 cannot name, so it cannot say nothing takes that
# gradient (pyod's MO-GAAL); with no step after it, the discriminator's gradient is erased
SHAPES["unnamed-optimizer-steps-later-loss"] = (Shape("""
    D = nn.Linear(3, 1)
    gens = {f"g{i}": nn.Linear(2, 3) for i in range(2)}
    opts = {f"opt_g{i}": torch.optim.SGD(gens[f"g{i}"].parameters(), 0.1) for i in range(2)}
    opt_d = torch.optim.SGD(D.parameters(), 0.1)
    for step in range(2):
        D.zero_grad()
        d_loss = F.softplus(-D(torch.randn(4, 3))).mean()
        d_loss.backward()
        opt_d.step()
        for i in range(2):
            opts["opt_g" + str(i)].zero_grad()
            g_loss = F.softplus(-D(gens["g" + str(i)](torch.randn(4, 2)))).mean()
            g_loss.backward()
            opts["opt_g" + str(i)].step()
    """, "GT522", holds="gens['g1'].weight.grad is not None"), Shape("""
    D = nn.Linear(3, 1)
    gen = nn.Linear(2, 3)
    opt_d = torch.optim.SGD(D.parameters(), 0.1)
    for step in range(2):
        D.zero_grad()
        d_loss = F.softplus(-D(torch.randn(4, 3))).mean()
        d_loss.backward()
        opt_d.step()
        aux = F.softplus(-D(gen(torch.randn(4, 2)).detach())).mean()
        aux.backward()
    """, "GT522", 8, holds="D.weight.grad is not None"))

# a "loss" helper that smooths a history it is given (NumPy in, NumPy out): what its argument
# holds is unknown, so NumPy on it is no cut (neuralprophet's lr finder, GT103)
SHAPES["numpy-helper-on-an-argument"] = (Shape("""
    import numpy as np
    def ema_loss(history, beta=0.9):
        out = np.zeros_like(history)
        out[0] = history[0]
        for i in range(1, len(history)):
            out[i] = out[i - 1] * beta + (1 - beta) * history[i]
        return out
    net = nn.Linear(3, 1)
    seen = []
    for _ in range(3):
        loss = net(torch.randn(4, 3)).pow(2).mean()
        loss.backward()
        seen.append(loss.item())
    curve = ema_loss(seen)
    """, "GT103", holds="len(curve) == 3"), Shape("""
    import numpy as np
    def heads_loss(outs, y):
        per_head = [F.mse_loss(o, y) for o in outs]
        return np.mean(per_head)
    net = nn.Linear(3, 1)
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    heads_loss([net(x), net(x) * 2], y).backward()
    """, "GT103", 4, (RuntimeError, "requires grad")))

# an optimizer that differentiates the closure's loss itself (a Newton-CG step, deepxde's
# NNCG) wants the loss without backward(); GT707 speaks only of torch.optim's closures
SHAPES["closure-for-own-optimizer"] = (Shape("""
    class GradientDescentOnLoss(torch.optim.Optimizer):
        def __init__(self, params, lr):
            super().__init__(params, {"lr": lr})
        def step(self, closure):
            loss = closure()
            ps = [p for g in self.param_groups for p in g["params"]]
            grads = torch.autograd.grad(loss, ps)
            with torch.no_grad():
                for p, g in zip(ps, grads):
                    p -= self.defaults["lr"] * g
            return loss
    net = nn.Linear(3, 1)
    before = net.weight.detach().clone()
    opt = GradientDescentOnLoss(net.parameters(), 0.1)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    def closure():
        opt.zero_grad()
        return F.mse_loss(net(x), y)
    opt.step(closure)
    """, "GT707", holds="not torch.equal(before, net.weight)"), Shape("""
    net = nn.Linear(3, 1)
    before = net.weight.detach().clone()
    opt = torch.optim.LBFGS(net.parameters(), lr=0.1)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    def closure():
        opt.zero_grad()
        return F.mse_loss(net(x), y)
    opt.step(closure)
    """, "GT707", 7, holds="torch.equal(before, net.weight)"))

# a helper called without arguments that makes its batch from factories and module
# constants hands the loss data, no graph: a forward under no_grad is then the loss's only
# way to the model (GT201; pytorch/examples' regression with its forward under no_grad)
SHAPES["no-argument-data-helper"] = (Shape("""
    W = torch.randn(3, 1) * 2
    def sample():
        x = torch.randn(8, 3)
        return x, x.mm(W)
    net = nn.Linear(3, 1)
    def pred_of_fresh_batch():
        return net(torch.randn(8, 3))
    for _ in range(2):
        x, y = sample()
        net.zero_grad()
        with torch.no_grad():
            baseline = net(x)
        loss = F.mse_loss(net(x), y) + F.mse_loss(pred_of_fresh_batch(), baseline)
        loss.backward()
    """, "GT201", holds="net.weight.grad is not None"), Shape("""
    W = torch.randn(3, 1) * 2
    def sample():
        x = torch.randn(8, 3)
        return x, x.mm(W)
    net = nn.Linear(3, 1)
    for _ in range(2):
        x, y = sample()
        net.zero_grad()
        with torch.no_grad():
            pred = net(x)
        loss = F.mse_loss(pred, y)
        loss.backward()
    """, "GT201", 9, ELEMENT0))


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", ["look-alike", "twin"])
def test_shape(name: str, which: str) -> None:
    judge(PRELUDE, SHAPES[name][0 if which == "look-alike" else 1])


def test_imported_class_given_parameters_is_not_a_computation() -> None:
    """A class imported from another package is opaque: it may keep its arguments (GT521
    stays silent) while a torch function of the same Parameter is still reported."""
    src = """
import torch
import torch.nn as nn
from samplers.posterior import Posterior

class Layer(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.mu = nn.Parameter(torch.zeros(n))
        self.post = Posterior(self.mu)
        self.sd = torch.exp(self.mu)
    def forward(self, x):
        return x * self.post.sample() * self.sd
"""
    assert [(f.code, f.line) for f in check_source(src, "m.py", select=["GT521"])] == \
        [("GT521", 11)]


def test_sine_of_a_cosine_clamped_inside_the_unit_interval() -> None:
    """`sqrt(1 - c**2)` of a cosine clamped strictly inside (-1, 1) never takes sqrt(0)
    (speechbrain's AAM softmax); clamped to exactly +-1 it still can (GT753)."""
    src = """
import torch
import torch.nn as nn

class Margin(nn.Module):
    def forward(self, logits, eps=1e-6):
        c = logits.float().clamp(-1 + eps, 1 - eps)
        inside = torch.sqrt(1.0 - c ** 2)
        c2 = torch.clamp(logits, -0.9999, 0.9999)
        inside2 = (1 - c2.pow(2)).sqrt()
        edge = logits.clamp(-1, 1)
        at_bound = torch.sqrt(1.0 - torch.pow(edge, 2))
        return inside + inside2 + at_bound
"""
    assert [(f.code, f.line) for f in check_source(src, "m.py", select=["GT753"])] == \
        [("GT753", 12)]


def test_closure_for_an_optimizer_of_another_library() -> None:
    """An optimizer built by another library's factory: GT707 cannot say what its step reads
    (the torch.optim one beside it is still reported)."""
    src = """
import torch
from solvers import make_optimizer
net = torch.nn.Linear(3, 1)
newton = make_optimizer("nncg", net.parameters())
lbfgs = torch.optim.LBFGS(net.parameters())
x, y = torch.randn(8, 3), torch.randn(8, 1)
def own():
    newton.zero_grad()
    return ((net(x) - y) ** 2).mean()
def theirs():
    lbfgs.zero_grad()
    return ((net(x) - y) ** 2).mean()
newton.step(own)
lbfgs.step(theirs)
"""
    assert [(f.code, f.line) for f in check_source(src, "m.py", select=["GT707"])] == \
        [("GT707", 13)]
