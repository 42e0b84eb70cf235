"""static28a (issue 13 parts 2-3): mechanisms from the graph_breaks, grad_mode, graph_lifetime,
registration and distributed misses, each with a silent look-alike that runs and buggy twins in
other spellings (a script, a function, a method), reported on the line a maintainer changes,
run on real torch."""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT505, mechanism: a training step backpropagates its loss and returns it undetached; the
    # loop calling it sums (or collects) the result into an accumulator that outlives the loop,
    # so every step's graph nodes stay reachable (the sum's grad_fn chains them). Reported on
    # the `return` (the fix: `return loss.detach()`).
    "step-returns-backpropagated-loss-summed-by-caller": (Shape("""
        def train_batch(net, opt, x, y):
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            opt.step()
            return loss

        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        running = 0.0
        for _ in range(3):
            running += train_batch(net, opt, torch.randn(4, 3), torch.randn(4, 1)).item()
        """, "GT505", holds="isinstance(running, float)"), [Shape("""
        def train_batch(net, opt, x, y):
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            opt.step()
            return loss

        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        running = 0.0
        for _ in range(3):
            running += train_batch(net, opt, torch.randn(4, 3), torch.randn(4, 1))
        """, "GT505", 6, holds="running.grad_fn is not None"), Shape("""
        class Learner:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.Adam(net.parameters())
                self.history = []

            def update(self, batch):
                x, y = batch
                self.opt.zero_grad()
                err = (self.net(x) - y).abs().mean()
                err.backward()
                self.opt.step()
                return err

            def fit(self, batches):
                for batch in batches:
                    out = self.update(batch)
                    self.history.append(out)
                return self.history

        learner = Learner(nn.Linear(3, 1))
        hist = learner.fit([(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
        """, "GT505", 13, holds="all(h.grad_fn is not None for h in hist)"), Shape("""
        class Runner:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

            def train_step(self, x, y):
                self.opt.zero_grad()
                loss = F.mse_loss(self.net(x), y)
                loss.backward()
                self.opt.step()
                return {"loss": loss, "n": len(x)}

            def epoch(self, batches):
                total = 0.0
                for x, y in batches:
                    out = self.train_step(x, y)
                    total += out["loss"] * out["n"]
                return total

        total = Runner(nn.Linear(3, 1)).epoch([(torch.randn(4, 3), torch.randn(4, 1))] * 3)
        """, "GT505", 11, holds="total.grad_fn is not None")]),
    "step-returns-detached-loss": (Shape("""
        class Learner:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.Adam(net.parameters())

            def update(self, x, y):
                self.opt.zero_grad()
                err = (self.net(x) - y).abs().mean()
                err.backward()
                self.opt.step()
                return err.detach()

            def fit(self, batches):
                total = torch.zeros(())
                for x, y in batches:
                    total += self.update(x, y)
                return total

        total = Learner(nn.Linear(3, 1)).fit([(torch.randn(4, 3), torch.randn(4, 1))] * 3)
        """, "GT505", holds="total.grad_fn is None"), [Shape("""
        class Learner:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.Adam(net.parameters())

            def update(self, x, y):
                self.opt.zero_grad()
                err = (self.net(x) - y).abs().mean()
                err.backward()
                self.opt.step()
                return err

            def fit(self, batches):
                total = torch.zeros(())
                for x, y in batches:
                    total = total + self.update(x, y) * len(x)
                return total

        total = Learner(nn.Linear(3, 1)).fit([(torch.randn(4, 3), torch.randn(4, 1))] * 3)
        """, "GT505", 11, holds="total.grad_fn is not None"), Shape("""
        def one_step(model, optimizer, batch):
            loss = model(batch).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss

        model = nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        losses = []
        for batch in [torch.randn(4, 3) for _ in range(3)]:
            losses.append(one_step(model, optimizer, batch))
        """, "GT505", 6, holds="losses[0].grad_fn is not None")]),
    # GT505, mechanism: the step backpropagates `loss` and hands back the criterion's other
    # result, terms of that loss (a dict literal of them, or one term); the calling loop sums
    # them into totals that outlive it: every step's graph stays reachable. Reported on the
    # accumulation. A criterion whose dict holds `.item()` numbers is silent.
    "step-returns-terms-of-backpropagated-loss": (Shape("""
        def criterion(pred, y):
            fit = (pred - y).pow(2).mean()
            reg = pred.abs().mean()
            return fit + 0.1 * reg, {"fit": fit.item(), "reg": reg.item()}

        def train_batch(net, opt, x, y):
            opt.zero_grad()
            loss, parts = criterion(net(x), y)
            loss.backward()
            opt.step()
            return parts

        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sums = {"fit": 0.0, "reg": 0.0}
        for _ in range(3):
            parts = train_batch(net, opt, torch.randn(4, 3), torch.randn(4, 1))
            for k, v in parts.items():
                sums[k] += v
        """, "GT505", holds="isinstance(sums['fit'], float)"), [Shape("""
        def criterion(pred, y):
            fit = (pred - y).pow(2).mean()
            reg = pred.abs().mean()
            return fit + 0.1 * reg, {"fit": fit, "reg": reg}

        def train_batch(net, opt, x, y):
            opt.zero_grad()
            loss, parts = criterion(net(x), y)
            loss.backward()
            opt.step()
            return parts

        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sums = {"fit": 0.0, "reg": 0.0}
        for _ in range(3):
            parts = train_batch(net, opt, torch.randn(4, 3), torch.randn(4, 1))
            for k, v in parts.items():
                sums[k] += v
        """, "GT505", 19, holds="sums['fit'].grad_fn is not None"), Shape("""
        class Criterion(nn.Module):
            def forward(self, logits, target):
                ce = F.cross_entropy(logits, target)
                ent = -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1).mean()
                return ce - 0.01 * ent, ce

        class Agent:
            def __init__(self, net):
                self.net, self.crit = net, Criterion()
                self.opt = torch.optim.Adam(net.parameters())

            def learn(self, x, t):
                self.opt.zero_grad()
                total, ce = self.crit(self.net(x), t)
                total.backward()
                self.opt.step()
                return ce

            def epoch(self, batches):
                ce_sum = 0
                for x, t in batches:
                    ce_sum += self.learn(x, t) * len(x)
                return ce_sum

        agent = Agent(nn.Linear(3, 4))
        ce_sum = agent.epoch([(torch.randn(5, 3), torch.randint(0, 4, (5,))) for _ in range(3)])
        """, "GT505", 22, holds="ce_sum.grad_fn is not None")]),
    "terms-summed-per-step-only": (Shape("""
        def criterion(pred, y):
            fit = (pred - y).pow(2).mean()
            reg = pred.abs().mean()
            return fit + 0.1 * reg, {"fit": fit, "reg": reg}

        class Loop:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
                self.log = []

            def train_batch(self, x, y):
                self.opt.zero_grad()
                loss, parts = criterion(self.net(x), y)
                loss.backward()
                self.opt.step()
                return parts

            def run(self, batches):
                for x, y in batches:
                    parts = self.train_batch(x, y)
                    step_sum = 0.0
                    for v in parts.values():
                        step_sum += v
                    self.log.append(step_sum.item())

        loop = Loop(nn.Linear(3, 1))
        loop.run([(torch.randn(4, 3), torch.randn(4, 1))] * 3)
        """, "GT505", holds="isinstance(loop.log[0], float)"), [Shape("""
        def criterion(pred, y):
            fit = (pred - y).pow(2).mean()
            reg = pred.abs().mean()
            return fit + 0.1 * reg, {"fit": fit, "reg": reg}

        class Loop:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

            def train_batch(self, x, y):
                self.opt.zero_grad()
                loss, parts = criterion(self.net(x), y)
                loss.backward()
                self.opt.step()
                return parts

            def run(self, batches):
                epoch_sum = 0.0
                for x, y in batches:
                    parts = self.train_batch(x, y)
                    for v in parts.values():
                        epoch_sum = epoch_sum + v
                return epoch_sum

        total = Loop(nn.Linear(3, 1)).run([(torch.randn(4, 3), torch.randn(4, 1))] * 3)
        """, "GT505", 23, holds="total.grad_fn is not None"), Shape("""
        def criterion(pred, y):
            fit = (pred - y).pow(2).mean()
            reg = pred.abs().mean()
            terms = {"fit": fit, "reg": reg}
            return fit + 0.1 * reg, terms

        def train_batch(net, opt, x, y):
            opt.zero_grad()
            loss, parts = criterion(net(x), y)
            loss.backward()
            opt.step()
            return parts

        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        history = []
        for _ in range(3):
            parts = train_batch(net, opt, torch.randn(4, 3), torch.randn(4, 1))
            for v in parts.values():
                history.append(v)
        """, "GT505", 20, holds="history[0].grad_fn is not None")]),
    # GT226, mechanism: a tensor the optimizer trains is read only as the argument of a
    # function that computes what it returns with grad off (decorated, or every return made in
    # a `with torch.no_grad():` block); backward runs through the other trained weights, and
    # the tensor's .grad stays None. Reported on the decorator / the `with`.
    "optimized-tensor-read-only-through-grad-off-helper": (Shape("""
        class Prompter:
            def __init__(self, table):
                self.table = table

            @torch.no_grad()
            def describe(self, ids):
                return self.table(ids).mean(0)

            def condition(self, emb):
                return torch.tanh(emb) * 2.0

        def tune(prompter, head, steps):
            emb = torch.zeros(1, 4, requires_grad=True)
            opt = torch.optim.SGD([emb] + list(head.parameters()), lr=0.1)
            for _ in range(steps):
                ctx = prompter.describe(torch.tensor([1, 2]))
                loss = head(prompter.condition(emb) + ctx).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return emb

        emb = tune(Prompter(nn.Embedding(5, 4)), nn.Linear(4, 1), 2)
        """, "GT226", holds="emb.grad is not None"), [Shape("""
        class Tuner:
            def __init__(self, head):
                self.head = head

            def condition(self, emb):
                with torch.no_grad():
                    out = torch.tanh(emb) * 2.0
                return out

            def tune(self, steps):
                emb = torch.zeros(1, 4, requires_grad=True)
                opt = torch.optim.SGD([emb] + list(self.head.parameters()), lr=0.1)
                for _ in range(steps):
                    loss = self.head(self.condition(emb)).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                return emb

        emb = Tuner(nn.Linear(4, 1)).tune(2)
        """, "GT226", 6, holds="emb.grad is None"), Shape("""
        @torch.no_grad()
        def render(latent, scale=1.0):
            return latent.sigmoid() * scale

        critic = nn.Linear(3, 1)
        latent = nn.Parameter(torch.randn(2, 3))
        optim = torch.optim.Adam(params=[latent, *critic.parameters()], lr=1e-2)
        for _ in range(2):
            score = critic(render(latent, scale=2.0)).mean()
            optim.zero_grad()
            score.backward()
            optim.step()
            print(latent.grad)
        """, "GT226", 1, holds="latent.grad is None")]),
    "optimized-tensor-projected-under-no-grad": (Shape("""
        @torch.no_grad()
        def project(delta, eps):
            delta.clamp_(-eps, eps)
            return delta

        @torch.no_grad()
        def noisy(delta):
            return delta + 0.01 * torch.randn_like(delta)

        net = nn.Linear(3, 2)
        delta = torch.zeros(4, 3, requires_grad=True)
        opt = torch.optim.SGD([delta], lr=0.1)
        x, y = torch.randn(4, 3), torch.randint(0, 2, (4,))
        for _ in range(2):
            loss = -F.cross_entropy(net(x + delta), y) + noisy(delta).sum() * 0.0
            opt.zero_grad()
            loss.backward()
            opt.step()
            project(delta, 0.1)
        """, "GT226", holds="delta.grad is not None"), [Shape("""
        def adversary(net, x, y, eps):
            delta = torch.zeros_like(x, requires_grad=True)
            opt = torch.optim.SGD([delta], lr=0.1)
            for _ in range(2):
                loss = -F.cross_entropy(net(perturb(x, delta)), y) + 0.1 * net.weight.sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return delta

        @torch.no_grad()
        def perturb(x, delta):
            return x + delta

        net = nn.Linear(3, 2)
        delta = adversary(net, torch.randn(4, 3), torch.randint(0, 2, (4,)), 0.1)
        """, "GT226", 11, holds="delta.grad is None"), Shape("""
        @torch.no_grad()
        def perturb(x, delta):
            return x + delta

        net = nn.Linear(3, 2)
        delta = torch.zeros(4, 3, requires_grad=True)
        opt = torch.optim.SGD([delta], lr=0.1)
        x, y = torch.randn(4, 3), torch.randint(0, 2, (4,))
        for _ in range(2):
            loss = -F.cross_entropy(net(perturb(x, delta)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT226", 1, holds="delta.grad is None")]),
    "optimized-attribute-of-plain-class-read-only-through-grad-off-method": (Shape("""
        class Inverter:
            def __init__(self, head):
                self.head = head
                self.token = nn.Parameter(torch.zeros(1, 4))
                self.opt = torch.optim.Adam([self.token, *head.parameters()], lr=0.1)

            @torch.no_grad()
            def embed(self, token):
                return token.repeat(2, 1)

            def step(self):
                out = self.head(self.embed(self.token) + self.token)
                loss = out.pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return self.token.grad

        g = Inverter(nn.Linear(4, 1)).step()
        """, "GT226", holds="g is not None"), [Shape("""
        class Inverter:
            def __init__(self, head):
                self.head = head
                self.token = nn.Parameter(torch.zeros(1, 4))
                self.opt = torch.optim.Adam([self.token, *head.parameters()], lr=0.1)

            @torch.no_grad()
            def embed(self, token):
                return token.repeat(2, 1)

            def step(self):
                loss = self.head(self.embed(self.token)).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                print(self.token.grad)
                return self.token.grad

        g = Inverter(nn.Linear(4, 1)).step()
        """, "GT226", 7, holds="g is None"), Shape("""
        def expand(code, n):
            with torch.no_grad():
                grid = code.unsqueeze(0).expand(n, -1).clone()
            return grid

        class Search:
            def __init__(self, scorer):
                self.scorer = scorer
                self.code = torch.randn(3, requires_grad=True)
                self.optimizer = torch.optim.SGD(params=[self.code, *scorer.parameters()], lr=0.1)

            def run(self, steps):
                for _ in range(steps):
                    value = self.scorer(expand(self.code, 5)).sum()
                    self.optimizer.zero_grad()
                    value.backward()
                    self.optimizer.step()
                return self.code

        code = Search(nn.Linear(3, 1)).run(2)
        """, "GT226", 2, holds="code.grad is None")]),
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


def test_closure_read_keeps_grad_off_helper_silent() -> None:
    """GT226: the trained tensor is also read live inside an LBFGS closure (a nested function):
    it gets its gradient there, the grad-off helper only renders it."""
    good = Shape("""
        @torch.no_grad()
        def show(z):
            return z.sigmoid() * 255

        head = nn.Linear(3, 1)
        z = torch.randn(2, 3, requires_grad=True)
        opt = torch.optim.LBFGS([z], max_iter=2)

        def closure():
            opt.zero_grad()
            loss = head(z).sum()
            loss.backward()
            return loss

        for _ in range(2):
            opt.step(closure)
            img = show(z)
        final = head(show(z)).sum()
        final.backward()
        """, "GT226", holds="z.grad is not None")
    assert _found(good) == []
    _run(good)
