"""Facts that carry across calls (session 15, helper "staticgen"; docs/triage/staticgen.md).

- the grad-off extent (NOTE [grad-off extent]): a function that a `no_grad`/`inference_mode`
  block (or a decorated function) runs, directly or through helpers, `self`/instance methods,
  module forwards and containers of the file's module classes, runs with grad off; a value it
  computes has no graph: GT217 at `retain_grad()`/`register_hook` on it.

- which mode a model is in when an evaluation runs it: a function of the file that loops,
  trains nothing and runs a model with dropout or batch norm with grad off, where neither it
  nor any of its callers switches modes: GT540 at the call that runs the model.

- which submodules reach what `forward` returns only through a cut (NOTE [forward cuts]):
  `.detach()`, `.data`, `argmax`/comparisons/`.long()`, a value computed under `no_grad`
  inside `forward` or a method it runs: GT115 at the cut (under `no_grad`: at the first call
  of a submodule that loses its graph there, or at the block for a value entering it or when
  all the block runs is cut: probes53) when
  nothing else in the file uses the submodule or parameter.

Each entry: a look-alike that must stay silent and run, and buggy twins in other spellings
reported on the given line; all run on real torch (tests/lint/shape_runner.py).
"""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""
HOOK = (RuntimeError, "register a hook on a tensor that doesn't require gradient")
RETAIN = (RuntimeError, "can't retain_grad on Tensor that has requires_grad=False")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT217: the hook or retain_grad sits in code that an evaluation runs with grad off
    "graph-op-in-no-grad-extent": (Shape("""
        class Tap(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.saved = None
            def keep(self, g):
                self.saved = g
            def forward(self, x):
                h = self.fc(x)
                if h.requires_grad:
                    h.register_hook(self.keep)
                self.fc.weight.register_hook(self.keep)
                return h
        net = Tap()
        with torch.no_grad():
            net(torch.randn(2, 4))
        """, "GT217"), [
        # a trainer's shared step, run by `evaluate` under set_grad_enabled(False)
        Shape("""
            class Backbone(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv1d(2, 3, 1)
                def forward(self, x):
                    return self.conv(x).relu()
            class Runner:
                def __init__(self, backbone):
                    self.backbone = backbone
                    self.grads = []
                def shared_step(self, batch):
                    feats = self.backbone(batch)
                    feats.register_hook(self.grads.append)
                    return feats.mean()
                def evaluate(self, batches):
                    with torch.set_grad_enabled(False):
                        return [self.shared_step(b) for b in batches]
            Runner(Backbone()).evaluate([torch.randn(1, 2, 5)])
            """, "GT217", 13, raises=HOOK),
        # a method of a plain object called in the block, given the model
        Shape("""
            class Probe:
                def record(self, net, x):
                    act = net(x) * 2
                    act.retain_grad()
                    return act
            probe = Probe()
            model = nn.Linear(3, 3)
            with torch.no_grad():
                probe.record(model, torch.randn(2, 3))
            """, "GT217", 4, raises=RETAIN),
        # two calls down: forward -> self.attend -> a module-level tap
        Shape("""
            def tap(t, store):
                t.register_hook(store.append)
                return t
            class Attn(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.qk = nn.Linear(4, 4)
                    self.store = []
                def attend(self, x):
                    w = torch.softmax(self.qk(x) @ x.t(), dim=-1)
                    return tap(w, self.store) @ x
                def forward(self, x):
                    return self.attend(x)
            attn = Attn()
            with torch.inference_mode():
                out = attn(torch.randn(3, 4))
            """, "GT217", 2, raises=HOOK),
        # the blocks of a Sequential built from a module class of the file
        Shape("""
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)
                def forward(self, x):
                    y = self.lin(x).tanh()
                    y.retain_grad()
                    return y
            class Stack(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.Sequential(*[Block() for _ in range(2)])
                def forward(self, x):
                    return self.blocks(x)
            @torch.no_grad()
            def predict(m, x):
                return m(x).argmax(-1)
            predict(Stack(), torch.randn(2, 4))
            """, "GT217", 7, raises=RETAIN),
    ]),
    # GT217 look-alike: a probe that turns grad back on and makes its own leaf
    "graph-op-under-enable-grad": (Shape("""
        def saliency(model, x):
            with torch.enable_grad():
                x = x.detach().requires_grad_()
                out = model(x)
                out.retain_grad()
                out.sum().backward()
            return x.grad.abs()
        model = nn.Linear(3, 2)
        with torch.no_grad():
            s = saliency(model, torch.randn(2, 3))
        """, "GT217"), []),
    # GT217 look-alike: only the training path runs the method with the hook
    "graph-op-only-on-training-path": (Shape("""
        class Trainer:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            def train_step(self, x):
                out = self.net(x)
                out.register_hook(lambda g: g.clamp(-1, 1))
                self.opt.zero_grad()
                out.pow(2).mean().backward()
                self.opt.step()
            def eval_step(self, x):
                with torch.no_grad():
                    return self.net(x).mean()
        t = Trainer()
        t.train_step(torch.randn(4, 3))
        t.eval_step(torch.randn(4, 3))
        """, "GT217"), []),
    # GT540: the evaluation runs the model in train mode
    "evaluation-after-eval": (Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        @torch.no_grad()
        def evaluate(model, batches):
            return sum(model(x).argmax(1).eq(y).sum().item() for x, y in batches)
        data = [(torch.randn(6, 4), torch.randint(0, 2, (6,))) for _ in range(2)]
        for x, y in data:
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            opt.step()
        net.eval()
        acc = evaluate(net, data)
        mean = net[1].running_mean.clone()
        evaluate(net, data)
        """, "GT540", holds="torch.equal(mean, net[1].running_mean)"), [
        # a decorated evaluation given the model by its one caller
        Shape("""
            net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            @torch.no_grad()
            def evaluate(model, batches):
                return sum(model(x).argmax(1).eq(y).sum().item() for x, y in batches)
            data = [(torch.randn(6, 4), torch.randint(0, 2, (6,))) for _ in range(2)]
            for x, y in data:
                opt.zero_grad()
                F.cross_entropy(net(x), y).backward()
                opt.step()
            mean = net[1].running_mean.clone()
            acc = evaluate(net, data)
            """, "GT540", 5, holds="not torch.equal(mean, net[1].running_mean)"),
        # an evaluator object holding a module class of the file with dropout
        Shape("""
            class Clf(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 16)
                    self.drop = nn.Dropout(0.5)
                    self.out = nn.Linear(16, 3)
                def forward(self, x):
                    return self.out(self.drop(self.body(x).relu()))
            class Evaluator:
                def __init__(self, clf, batches):
                    self.clf, self.batches = clf, batches
                def run(self):
                    outs = []
                    for xb in self.batches:
                        with torch.inference_mode():
                            outs.append(self.clf(xb))
                    return outs
            clf = Clf()
            opt = torch.optim.Adam(clf.parameters())
            loss = clf(torch.randn(5, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            a, b = Evaluator(clf, [torch.ones(2, 4)]).run(), Evaluator(clf, [torch.ones(2, 4)]).run()
            """, "GT540", 16, holds="not torch.equal(a[0], b[0])"),
    ]),
    # GT540 look-alike: a GAN-style step runs the generator under no_grad while it trains
    "no-grad-generator-in-training-step": (Shape("""
        G = nn.Sequential(nn.Linear(2, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
        D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
        opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
        def d_step(batches):
            for real in batches:
                with torch.no_grad():
                    fake = G(torch.randn(4, 2))
                opt_d.zero_grad()
                (D(fake).mean() - D(real).mean()).backward()
                opt_d.step()
        d_step([torch.randn(4, 2)])
        """, "GT540"), []),
    # GT540 look-alike: a caller two levels up puts the model in eval mode
    "evaluation-eval-two-callers-up": (Shape("""
        class Runner:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def fit(self, x):
                self.model(x).sum().backward()
                self.opt.step()
            def eval_step(self, xs):
                out = []
                for x in xs:
                    with torch.no_grad():
                        out.append(self.model(x))
                return out
            def evaluate(self, xs):
                return self.eval_step(xs)
            def run(self, xs):
                self.fit(xs[0])
                self.model.eval()
                return self.evaluate(xs)
        r = Runner()
        a = r.run([torch.ones(2, 4)])
        b = r.run([torch.ones(2, 4)])
        """, "GT540", holds="not r.model.training"), []),
    # GT540 look-alike: the evaluation switches modes through a flag
    "evaluation-switches-with-flag": (Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.Linear(8, 2))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        def run_epoch(batches, training):
            net.train(mode=training)
            with torch.set_grad_enabled(training):
                return [net(x) for x in batches]
        def validate(batches):
            out = []
            with torch.no_grad():
                for x in batches:
                    out.append(net(x))
            return out
        def fit(batches):
            run_epoch(batches, False)
            validate(batches)
        x = torch.randn(3, 4)
        net(x).sum().backward()
        opt.step()
        fit([x])
        """, "GT540"), []),
    # GT115: the only path from a submodule to the outputs is cut inside forward
    "forward-keeps-submodule-live": (Shape("""
        class VQ(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 3)
                self.codebook = nn.Embedding(5, 3)
            def forward(self, x):
                z = self.enc(x)
                idx = torch.cdist(z, self.codebook.weight).argmin(-1)
                q = self.codebook(idx)
                out = z + (q - z).detach()
                return out, (q - z.detach()).pow(2).mean()
        m = VQ()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        out, vq_loss = m(torch.randn(6, 4))
        (out.pow(2).mean() + vq_loss).backward()
        """, "GT115", holds="m.codebook.weight.grad is not None"), [
        # a context encoder run under no_grad inside forward
        Shape("""
            class Fuse(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.ctx_enc = nn.Linear(4, 4)
                    self.head = nn.Linear(8, 1)
                def forward(self, x):
                    with torch.no_grad():
                        c = self.ctx_enc(x).tanh()
                    return self.head(torch.cat([x, c], dim=-1))
            net = Fuse()
            opt = torch.optim.Adam(net.parameters())
            net(torch.randn(3, 4)).sum().backward()
            """, "GT115", 7, holds="net.ctx_enc.weight.grad is None"),  # the block: all it runs is cut
        # an index picked by argmax of a scorer
        Shape("""
            class Router(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scorer = nn.Linear(4, 6)
                    self.table = nn.Embedding(6, 2)
                def forward(self, h):
                    choice = self.scorer(h).argmax(dim=-1)
                    return self.table(choice)
            r = Router()
            opt = torch.optim.SGD(r.parameters(), lr=0.1)
            r(torch.randn(5, 4)).sum().backward()
            """, "GT115", 7, holds="r.scorer.weight.grad is None"),
        # `.data` of a projection, collected in a list
        Shape("""
            class Mix(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(3, 3)
                    self.out = nn.Linear(3, 3)
                def forward(self, xs):
                    parts = []
                    for x in xs:
                        parts.append(self.proj(x).data)
                    return self.out(torch.stack(parts).sum(0))
            mix = Mix()
            opt = torch.optim.SGD(mix.parameters(), lr=0.1)
            mix([torch.randn(2, 3), torch.randn(2, 3)]).sum().backward()
            """, "GT115", 9, holds="mix.proj.weight.grad is None"),
    ]),
    # GT115 look-alike: the detached submodule is frozen on purpose in __init__
    "forward-cut-of-frozen-submodule": (Shape("""
        class Student(nn.Module):
            def __init__(self):
                super().__init__()
                self.teacher = nn.Linear(4, 4)
                self.teacher.requires_grad_(False)
                self.student = nn.Linear(4, 4)
            def forward(self, x):
                t = self.teacher(x).detach()
                return (self.student(x) - t).pow(2).mean()
        s = Student()
        opt = torch.optim.SGD(s.parameters(), lr=0.1)
        s(torch.randn(2, 4)).backward()
        """, "GT115"), []),
    # GT115 look-alike: another method trains the submodule the forward detaches
    "forward-cut-trained-elsewhere": (Shape("""
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.value = nn.Linear(4, 1)
                self.policy = nn.Linear(4, 2)
            def forward(self, s):
                baseline = self.value(s).detach()
                return self.policy(s).log_softmax(-1)[:, 0] * (1.0 - baseline.squeeze(-1))
            def value_loss(self, s, ret):
                return (self.value(s).squeeze(-1) - ret).pow(2).mean()
        c = Critic()
        opt = torch.optim.Adam(c.parameters())
        s = torch.randn(3, 4)
        (c(s).mean() + c.value_loss(s, torch.zeros(3))).backward()
        """, "GT115", holds="c.value.weight.grad is not None"), []),
}


@pytest.mark.parametrize("key,which", [(k, i) for k, (_, twins) in SHAPES.items()
                                       for i in range(-1, len(twins))])
def test_shape(key: str, which: int) -> None:
    good, twins = SHAPES[key]
    judge(PRELUDE, good if which < 0 else twins[which])
