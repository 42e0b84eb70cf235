"""Silent bugs of held-out batch 4 whose run looks like training (issue #13), each mechanism in
spellings other than the real-world case it came from, run on real torch.

Same harness as test_heldout_shapes.py: a look-alike that must stay silent and train, buggy
twins (two or more spellings) that must be reported on the given line and show the symptom.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT707: the closure of step(closure) never runs backward (from lbfgs_closure_*, fitgabor_*)
    "closure-without-backward": (Shape("""
        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=5)
        x, y = torch.randn(16, 3), torch.randn(16, 1)
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            return loss
        opt.step(closure)
        """, "GT707", holds="not torch.equal(net.weight, w0)"), [Shape("""
        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=5)
        x, y = torch.randn(16, 3), torch.randn(16, 1)
        def closure():
            opt.zero_grad()
            return (net(x) - y).pow(2).mean()
        opt.step(closure)
        """, "GT707", 7, holds="torch.equal(net.weight, w0)"), Shape("""
        class Solver:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.optim = torch.optim.LBFGS(self.net.parameters(), max_iter=5)

            def run(self, x, y):
                self.optim.zero_grad()
                err = F.l1_loss(self.net(x), y)
                err.backward()
                self.optim.step(lambda: err)

        s = Solver()
        s.run(torch.randn(16, 3), torch.randn(16, 1))
        """, "GT707", 10, holds="s.optim.state[s.optim._params[0]]['n_iter'] == 1")]),
    # GT708: an out-of-place tensor op as a statement (from dqn_tutorial_gradient_clamp_*)
    "tensor-op-result-discarded": (Shape("""
        net = nn.Linear(4, 2)
        (net(torch.randn(8, 4)) * 100).sum().backward()
        for p in net.parameters():
            p.grad.clamp_(-1, 1)
        """, "GT708", holds="all(p.grad.abs().max() <= 1 for p in net.parameters())"), [Shape("""
        net = nn.Linear(4, 2)
        (net(torch.randn(8, 4)) * 100).sum().backward()
        for p in net.parameters():
            torch.clamp(p.grad, min=-1.0, max=1.0)
        """, "GT708", 4, holds="any(p.grad.abs().max() > 1 for p in net.parameters())"),
        Shape("""
        def scale_grads(model, factor):
            for w in model.parameters():
                w.grad.data.mul(factor)

        net = nn.Linear(4, 2)
        net(torch.randn(8, 4)).sum().backward()
        before = net.bias.grad.clone()
        scale_grads(net, 0.0)
        """, "GT708", 3, holds="torch.equal(net.bias.grad, before)")]),
    # GT518 at the clear: the loss is divided by the count of the micro-batch loop, so the
    # clear inside it is what breaks the accumulation (from rae_zero_grad_inside_microbatch_loop)
    "clear-inside-accumulation-loop": (Shape("""
        net = nn.Linear(4, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batch, n_micro = torch.randn(8, 4), 4
        opt.zero_grad()
        for chunk in batch.chunk(n_micro):
            loss = net(chunk).pow(2).mean() / n_micro
            loss.backward()
        full = torch.autograd.grad(net(batch).pow(2).mean(), net.weight)[0]
        g = net.weight.grad.clone()
        opt.step()
        """, "GT518", holds="torch.allclose(g, full, atol=1e-6)"), [
        Shape("""
        net = nn.Linear(4, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batch, n_micro = torch.randn(8, 4), 4
        for chunk in batch.chunk(n_micro):
            opt.zero_grad(set_to_none=True)
            loss = net(chunk).pow(2).mean() / n_micro
            loss.backward()
        last = torch.autograd.grad(net(chunk).pow(2).mean() / n_micro, net.weight)[0]
        full = torch.autograd.grad(net(batch).pow(2).mean(), net.weight)[0]
        g = net.weight.grad.clone()
        opt.step()
        """, "GT518", 5, holds="torch.allclose(g, last) and not torch.allclose(g, full)"),
        Shape("""
        class Trainer:
            def __init__(self, accum):
                self.net, self.accum = nn.Linear(4, 1), accum
                self.optimizer = torch.optim.Adam(self.net.parameters())

            def step(self, xs):
                for i in range(self.accum):
                    self.optimizer.zero_grad()
                    (self.net(xs[i]).sum() / self.accum).backward()
                self.optimizer.step()

        Trainer(3).step(torch.randn(3, 2, 4))
        """, "GT518", 8)]),
    # GT512 in a function called once per pass: the remainder test reads its parameter
    # (from prediff_vae_zero_grad_outside_accumulation_branch)
    "clear-every-call-of-pass-function": (Shape("""
        def train_step(model, opt, x, step, every):
            loss = model(x).pow(2).mean() / every
            loss.backward()
            if step % every == every - 1:
                opt.step()
                opt.zero_grad()

        net = nn.Linear(4, 1)
        sgd = torch.optim.SGD(net.parameters(), lr=0.1)
        for k in range(4):
            train_step(net, sgd, torch.randn(2, 4), k, 2)
        """, "GT512"), [Shape("""
        def train_step(model, opt, x, step, every):
            opt.zero_grad()
            loss = model(x).pow(2).mean() / every
            loss.backward()
            if step % every == every - 1:
                opt.step()

        net = nn.Linear(4, 1)
        sgd = torch.optim.SGD(net.parameters(), lr=0.1)
        for k in range(4):
            train_step(net, sgd, torch.randn(2, 4), k, 2)
        """, "GT512", 2), Shape("""
        class Learner:
            def __init__(self):
                self.model = nn.Linear(4, 1)
                self.opt = torch.optim.Adam(self.model.parameters())
                self.k = 2

            def update(self, batch, it):
                self.opt.zero_grad(set_to_none=True)
                (self.model(batch).sum() / self.k).backward()
                if (it + 1) % self.k == 0:
                    self.opt.step()

        learner = Learner()
        for it in range(4):
            learner.update(torch.randn(2, 4), it)
        """, "GT512", 8)]),
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
