"""The facts of docs/triage/recall40a.md (session 40). Each pair is a correct shape the checker
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
    # GT226 one call further (NOTE [cut inputs]): a prompt vector trained by its own optimizer
    # reaches the loss only through a module whose `forward` hands it to a `@torch.no_grad()`
    # method; the module's head still trains, so backward runs and the prompt never moves.
    # Look-alike: the grad-off method only scores the input on the side, and `forward`
    # returns the head's output on the input itself
    "prompt-cut-inside-the-module-forward": (Shape("""
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.frozen = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
            @torch.no_grad()
            def quality(self, h):
                return self.frozen(h).norm(dim=1, keepdim=True)
            def forward(self, h):
                q = self.quality(h)
                out = self.head(h)
                return out * q
        scorer = Scorer()
        prompt = torch.zeros(1, 4, requires_grad=True)
        opt = torch.optim.SGD([prompt, *scorer.head.parameters()], lr=0.5)
        for _ in range(2):
            tokens = torch.randn(3, 4)
            conditioned = tokens + prompt
            loss = scorer(conditioned).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT226", holds="prompt.grad is not None and float(prompt.abs().sum()) > 0"), Shape("""
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.frozen = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
            @torch.no_grad()
            def refine(self, h):
                return self.frozen(h)
            def forward(self, h):
                h = self.refine(h)
                out = self.head(h)
                return out
        scorer = Scorer()
        prompt = torch.zeros(1, 4, requires_grad=True)
        opt = torch.optim.SGD([prompt, *scorer.head.parameters()], lr=0.5)
        for _ in range(2):
            tokens = torch.randn(3, 4)
            conditioned = tokens + prompt
            loss = scorer(conditioned).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT226", line=6, holds="prompt.grad is None and float(prompt.abs().sum()) == 0")),
    # The same fact in another style: an attack method given the model as an argument, the
    # perturbation added to the images in a local name, the cut a `with torch.no_grad():`
    # block inside a preprocessing method the model's `forward` calls first. Look-alike: the
    # block computes a constant offset the forward adds, so the input itself stays live
    "perturbation-through-a-purifying-forward": (Shape("""
        class Purified(nn.Module):
            def __init__(self):
                super().__init__()
                self.smoother = nn.Conv1d(1, 1, 3, padding=1)
                self.classifier = nn.Linear(6, 3)
            def offset(self, x):
                with torch.no_grad():
                    shift = self.smoother(x).mean()
                return shift
            def forward(self, x):
                s = self.offset(x)
                return self.classifier((x - s).flatten(1))
        class Attack:
            def run(self, model, images, labels, steps=2):
                delta = torch.zeros_like(images, requires_grad=True)
                opt = torch.optim.Adam([delta], lr=0.1)
                for _ in range(steps):
                    adv = images + delta
                    loss = -F.cross_entropy(model(adv), labels)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                return images + delta
        x, y = torch.randn(2, 1, 6), torch.tensor([0, 2])
        out = Attack().run(Purified(), x, y)
        """, "GT226", holds="not torch.equal(out, x)"), Shape("""
        class Purified(nn.Module):
            def __init__(self):
                super().__init__()
                self.smoother = nn.Conv1d(1, 1, 3, padding=1)
                self.classifier = nn.Linear(6, 3)
            def purify(self, x):
                noisy = x + 0.1 * torch.randn_like(x)
                with torch.no_grad():
                    clean = self.smoother(noisy)
                return clean
            def forward(self, x):
                x = self.purify(x)
                return self.classifier(x.flatten(1))
        class Attack:
            def run(self, model, images, labels, steps=2):
                delta = torch.zeros_like(images, requires_grad=True)
                opt = torch.optim.Adam([delta], lr=0.1)
                for _ in range(steps):
                    adv = images + delta
                    loss = -F.cross_entropy(model(adv), labels)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                return images + delta
        x, y = torch.randn(2, 1, 6), torch.tensor([0, 2])
        out = Attack().run(Purified(), x, y)
        """, "GT226", line=8, holds="torch.equal(out, x)")),
    # GT210 at the module's own forward (NOTE [gradient taken in a module's forward]): a
    # test-time-adapted model minimises its prediction entropy with its own optimizer inside
    # `forward`; an accuracy helper runs it under `no_grad` two calls below. The line to
    # change is where `forward`'s gradient work starts. Look-alike: the forward turns grad
    # back on with its decorator, as test-time adaptation libraries do
    "entropy-adapted-forward-under-an-evaluation": (Shape("""
        class Adapted(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01)
            @torch.enable_grad()
            def forward(self, x):
                out = self.net(x)
                ent = -(out.softmax(1) * out.log_softmax(1)).sum(1).mean()
                ent.backward()
                self.opt.step()
                self.opt.zero_grad()
                return out.detach()
        def accuracy(model, batches):
            hits = 0
            for x, y in batches:
                hits += int((model(x).argmax(1) == y).sum())
            return hits
        with torch.no_grad():
            acc = accuracy(Adapted(nn.Linear(4, 3)), [(torch.randn(5, 4), torch.randint(0, 3, (5,)))])
        """, "GT210", holds="0 <= acc <= 5"), Shape("""
        class Adapted(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01)
            def forward(self, x):
                h = x.flatten(1)
                out = self.net(x)
                ent = -(out.softmax(1) * out.log_softmax(1)).sum(1).mean()
                ent.backward()
                self.opt.step()
                self.opt.zero_grad()
                return out.detach() + 0 * h.sum()
        def accuracy(model, batches):
            hits = 0
            for x, y in batches:
                hits += int((model(x).argmax(1) == y).sum())
            return hits
        with torch.no_grad():
            acc = accuracy(Adapted(nn.Linear(4, 3)), [(torch.randn(5, 4), torch.randint(0, 3, (5,)))])
        """, "GT210", line=8, raises=(RuntimeError, "does not require grad"))),
    # The same fact with the harness calling the model itself in its `no_grad` block, and the
    # adapted tensor a centroid table switched to `requires_grad_()` first. Look-alike: the
    # adaptation sits in a method the harness calls before its block
    "centroids-tuned-in-forward-under-a-no-grad-block": (Shape("""
        class Nearest(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
                self.centroids = torch.randn(3, 4)
            def adapt(self, xs, ys):
                self.centroids.requires_grad_()
                opt = torch.optim.Adam([self.centroids], lr=0.1)
                loss = F.cross_entropy(xs @ self.centroids.T, ys)
                loss.backward()
                opt.step()
            def forward(self, q):
                return (self.enc(q) @ self.centroids.T).argmax(1)
        m = Nearest()
        m.adapt(torch.randn(6, 4), torch.randint(0, 3, (6,)))
        with torch.no_grad():
            pred = m(torch.randn(2, 4))
        """, "GT210", holds="pred.shape == (2,)"), Shape("""
        class Nearest(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
                self.centroids = torch.randn(3, 4)
            def forward(self, q, xs, ys):
                feats = self.enc(q)
                self.centroids.requires_grad_()
                opt = torch.optim.Adam([self.centroids], lr=0.1)
                loss = F.cross_entropy(xs @ self.centroids.T, ys)
                loss.backward()
                opt.step()
                return (feats @ self.centroids.T).argmax(1)
        m = Nearest()
        with torch.no_grad():
            pred = m(torch.randn(2, 4), torch.randn(6, 4), torch.randint(0, 3, (6,)))
        """, "GT210", line=8, raises=(RuntimeError, "does not require grad"))),
    # GT107 through a type-dispatch helper (NOTE [type-dispatch helpers]): a utility that
    # detaches every tensor of a nested container is handed the training step's outputs,
    # the loss among them; the call is the line to change. Look-alike: only the logged
    # values go through the utility, the loss is returned beside them
    "loss-handed-to-a-recursive-detach-utility": (Shape("""
        def to_host(obj):
            if isinstance(obj, torch.Tensor):
                return obj.detach().cpu()
            if isinstance(obj, (list, tuple)):
                return type(obj)(to_host(v) for v in obj)
            return obj
        def train_step(net, x, y):
            logits = net(x)
            loss = F.cross_entropy(logits, y)
            return (loss, *to_host((logits, y)))
        net = nn.Linear(5, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(2):
            out = train_step(net, torch.randn(4, 5), torch.randint(0, 3, (4,)))
            opt.zero_grad()
            out[0].backward()
            opt.step()
        """, "GT107", holds="net.weight.grad is not None"), Shape("""
        def to_host(obj):
            if isinstance(obj, torch.Tensor):
                return obj.detach().cpu()
            if isinstance(obj, (list, tuple)):
                return type(obj)(to_host(v) for v in obj)
            return obj
        def train_step(net, x, y):
            logits = net(x)
            loss = F.cross_entropy(logits, y)
            return to_host((loss, logits, y))
        net = nn.Linear(5, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(2):
            out = train_step(net, torch.randn(4, 5), torch.randint(0, 3, (4,)))
            opt.zero_grad()
            out[0].backward()
            opt.step()
        """, "GT107", line=10, raises=(RuntimeError, "does not require grad"))),
    # The same fact as a method over dicts in a Lightning-style module, the release one call
    # below `training_step`. Look-alike: the step releases a copy for its log and returns
    # the live losses
    "losses-dict-released-by-a-method": (Shape("""
        class Task(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(3, 1)
                self.log_rows = []
            def _release(self, value):
                if isinstance(value, torch.Tensor):
                    return value.detach()
                if isinstance(value, dict):
                    return {k: self._release(v) for k, v in value.items()}
                return value
            def shared_step(self, pred, y):
                out = {"loss": F.mse_loss(pred, y), "pred": pred}
                self.log_rows.append(self._release(out))
                return out
            def training_step(self, batch, batch_idx):
                x, y = batch
                return self.shared_step(self.net(x), y)
        task = Task()
        opt = torch.optim.Adam(task.parameters())
        for i in range(2):
            res = task.training_step((torch.randn(4, 3), torch.randn(4, 1)), i)
            opt.zero_grad()
            res["loss"].backward()
            opt.step()
        """, "GT107", holds="task.net.weight.grad is not None"), Shape("""
        class Task(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(3, 1)
            def _release(self, value):
                if isinstance(value, torch.Tensor):
                    return value.detach()
                if isinstance(value, dict):
                    return {k: self._release(v) for k, v in value.items()}
                return value
            def shared_step(self, pred, y):
                return self._release({"loss": F.mse_loss(pred, y), "pred": pred})
            def training_step(self, batch, batch_idx):
                x, y = batch
                return self.shared_step(self.net(x), y)
        task = Task()
        opt = torch.optim.Adam(task.parameters())
        for i in range(2):
            res = task.training_step((torch.randn(4, 3), torch.randn(4, 1)), i)
            opt.zero_grad()
            res["loss"].backward()
            opt.step()
        """, "GT107", line=12, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
