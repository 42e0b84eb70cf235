"""The facts of docs/triage/recall39a.md (session 39). Each pair is a correct shape the checker
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

NO_GRAD_FN = (RuntimeError, "does not require grad")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT210 (NOTE [gradient reached through the callee]): an evaluation run under no_grad
    # calls a method that hands the embeddings to a probe fitted with its own optimizer.
    # Look-alike: the probe's fit turns grad back on around its loop
    "probe-fitted-inside-an-evaluation": (Shape("""
        class Probe:
            def fit(self, feats, labels, steps=3):
                clf = nn.Linear(feats.shape[1], 2)
                opt = torch.optim.SGD(clf.parameters(), lr=0.1)
                with torch.enable_grad():
                    for _ in range(steps):
                        opt.zero_grad()
                        err = F.cross_entropy(clf(feats), labels)
                        err.backward()
                        opt.step()
                return clf
        class Evaluation:
            def __init__(self, encoder):
                self.encoder = encoder
            def score(self, x, y):
                feats = self.encoder(x)
                clf = Probe().fit(feats, y)
                return (clf(feats).argmax(1) == y).float().mean()
        ev = Evaluation(nn.Linear(6, 4))
        with torch.no_grad():
            acc = ev.score(torch.randn(8, 6), torch.randint(0, 2, (8,)))
        """, "GT210", holds="0 <= float(acc) <= 1"), Shape("""
        class Probe:
            def fit(self, feats, labels, steps=3):
                clf = nn.Linear(feats.shape[1], 2)
                opt = torch.optim.SGD(clf.parameters(), lr=0.1)
                for _ in range(steps):
                    opt.zero_grad()
                    err = F.cross_entropy(clf(feats), labels)
                    err.backward()
                    opt.step()
                return clf
        class Evaluation:
            def __init__(self, encoder):
                self.encoder = encoder
            def score(self, x, y):
                feats = self.encoder(x)
                clf = Probe().fit(feats, y)
                return (clf(feats).argmax(1) == y).float().mean()
        ev = Evaluation(nn.Linear(6, 4))
        with torch.no_grad():
            acc = ev.score(torch.randn(8, 6), torch.randint(0, 2, (8,)))
        """, "GT210", line=16, raises=NO_GRAD_FN)),
    # The same fact in plain functions, the gradient two calls below the reported one
    # (a saliency map over a batch). Look-alike: the helper takes a flag the evaluation
    # passes as a constant, and differentiates only when it is set
    "saliency-two-calls-below-the-evaluation": (Shape("""
        def run_epoch(model, batches, train):
            total = 0.0
            for x, y in batches:
                loss = F.mse_loss(model(x), y)
                if train:
                    loss.backward()
                total += float(loss)
            return total
        def evaluate(model, batches):
            return run_epoch(model, batches, train=False)
        net = nn.Linear(3, 1)
        with torch.no_grad():
            err = evaluate(net, [(torch.randn(4, 3), torch.randn(4, 1))])
        """, "GT210", holds="err > 0"), Shape("""
        def saliency(model, x):
            x = x.clone().requires_grad_(True)
            score = model(x).max(dim=1).values.sum()
            score.backward()
            return x.grad.abs()
        def explain(model, images):
            return [saliency(model, img[None]) for img in images]
        def report(model, images):
            maps = explain(model, images)
            return torch.cat(maps).mean()
        net = nn.Sequential(nn.Linear(5, 3), nn.Tanh())
        with torch.no_grad():
            level = report(net, torch.randn(4, 5))
        """, "GT210", line=9, raises=NO_GRAD_FN)),
    # GT210 on a function decorated with `@torch.no_grad()`: its body runs as a `with` block
    # would, so an adversarial attack it calls cannot take its gradient. Look-alike: the
    # attack turns grad back on with its own decorator (the usual fix)
    "attack-called-by-a-no-grad-evaluation": (Shape("""
        @torch.enable_grad()
        def fgsm(model, x, y, eps=0.1):
            x = x.clone().requires_grad_(True)
            F.cross_entropy(model(x), y).backward()
            return (x + eps * x.grad.sign()).detach()
        @torch.no_grad()
        def robust_accuracy(model, x, y):
            adv = fgsm(model, x, y)
            return (model(adv).argmax(1) == y).float().mean()
        acc = robust_accuracy(nn.Linear(4, 3), torch.randn(6, 4), torch.randint(0, 3, (6,)))
        """, "GT210", holds="0 <= float(acc) <= 1"), Shape("""
        def fgsm(model, x, y, eps=0.1):
            x = x.clone().requires_grad_(True)
            F.cross_entropy(model(x), y).backward()
            return (x + eps * x.grad.sign()).detach()
        @torch.no_grad()
        def robust_accuracy(model, x, y):
            adv = fgsm(model, x, y)
            return (model(adv).argmax(1) == y).float().mean()
        acc = robust_accuracy(nn.Linear(4, 3), torch.randn(6, 4), torch.randint(0, 3, (6,)))
        """, "GT210", line=5, raises=NO_GRAD_FN)),
    # GT210, the value differentiated is handed in: the block computes the model's output and
    # gives it to a helper that backpropagates from it (a CAM extractor). Look-alike: only the
    # class index is picked under no_grad, the helper runs outside the block
    "helper-differentiates-an-output-made-under-no-grad": (Shape("""
        class GradCam:
            def __init__(self, layer):
                self.acts = None
                layer.register_forward_hook(self.keep)
            def keep(self, module, inp, out):
                self.acts = out
                out.retain_grad()
            def __call__(self, k, scores):
                scores[:, k].sum().backward()
                return (self.acts.grad.mean(0) * self.acts).sum(1)
        net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
        cam = GradCam(net[0])
        x = torch.randn(2, 4)
        scores = net(x)
        with torch.no_grad():
            k = int(scores.argmax(1)[0])
        heat = cam(k, scores)
        """, "GT210", holds="heat.shape == (2,)"), Shape("""
        def saliency_of(logits, k, inputs):
            logits[:, k].sum().backward()
            return inputs.grad.abs()
        net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
        x = torch.randn(2, 4, requires_grad=True)
        with torch.inference_mode():
            logits = net(x)
            sal = saliency_of(logits, 0, x)
        """, "GT210", line=6, raises=NO_GRAD_FN)),
    # GT121 (NOTE [hooks run in the backward's grad mode]): a tensor hook, a method of a
    # monitor object, builds a small graph from the incoming gradient and differentiates it.
    # Look-alike: the same hook computes and differentiates inside `torch.enable_grad()`
    "gradient-taken-in-a-tensor-hook": (Shape("""
        class Sharpness:
            def __init__(self):
                self.scale = torch.ones(1, requires_grad=True)
                self.seen = []
            def on_grad(self, g):
                with torch.enable_grad():
                    energy = (self.scale * g).pow(2).sum()
                    d, = torch.autograd.grad(energy, self.scale)
                self.seen.append(float(d))
        mon = Sharpness()
        net = nn.Linear(3, 2)
        h = net(torch.randn(4, 3))
        h.register_hook(mon.on_grad)
        h.sum().backward()
        """, "GT121", holds="len(mon.seen) == 1"), Shape("""
        class Sharpness:
            def __init__(self):
                self.scale = torch.ones(1, requires_grad=True)
                self.seen = []
            def on_grad(self, g):
                energy = (self.scale * g).pow(2).sum()
                d, = torch.autograd.grad(energy, self.scale)
                self.seen.append(float(d))
        mon = Sharpness()
        net = nn.Linear(3, 2)
        h = net(torch.randn(4, 3))
        h.register_hook(mon.on_grad)
        h.sum().backward()
        """, "GT121", line=6, raises=NO_GRAD_FN)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
