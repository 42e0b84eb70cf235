"""The shared binding resolution (``analysis.reach``) and the helpers the GT2 sources follow.

The three tracers (GT1 origins, GT2 sources, GT5 graph-carrying bindings) read bindings,
binding values, grad-off modes and the file's functions through one module. The GT2 sources
find the function a call runs as GT1 does (the analysis layer's ``local_callee``): a method
called as ``self.f(...)`` is the one of the caller's own class, and a helper defined under a
top-level ``try``/``if`` is followed. Same harness as test_heldout_shapes.py: a look-alike that
stays silent and runs, buggy twins in other spellings reported on the given line that really
fail on torch.
"""
from __future__ import annotations

import ast
import textwrap

import pytest
from test_heldout_shapes import Shape, _found, _run

from gradtrace.lint.analysis.reach import (
    decorated_off, defs_by_name, disables_grad, off_mode, reaching, value_of)
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports

torch = pytest.importorskip("torch")


def _ctx(src: str) -> Context:
    src = textwrap.dedent(src)
    tree = ast.parse(src)
    imports = Imports()
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            imports.add(s)
    return Context("r.py", src, tree, imports)


SRC = '''
import torch

def train(model, x, flag):
    out = model(x)
    if flag:
        out = out * 2
    a, b = out, x
    c, d = pair(x)
    with torch.inference_mode():
        e = model(x)
    return out.sum() + a + c + e


def pair(x):
    return x, x


try:
    from fast import pair
except ImportError:
    def pair(x):
        return x, -x


@torch.no_grad()
def frozen(x):
    return x
'''


def test_reaching_with_and_without_a_use() -> None:
    ctx = _ctx(SRC)
    fn = ctx.tree.body[1]
    scope = ctx.scope(fn)
    ret = fn.body[-1]
    # the `if` may not run: both bindings of `out` reach the return, the latest first
    assert [b.line for b in reaching(scope, "out", ret.lineno, ret)] == [7, 5]
    # without a use: the straight-line reading, the last binding only (NOTE [binding policy])
    assert [b.line for b in reaching(scope, "out", ret.lineno)] == [7]
    # an attribute chain resolves through its longest bound prefix when asked; `self` is
    # never one
    assert [b.line for b in reaching(scope, "out.logits", ret.lineno, prefix=True)] == [7]
    assert reaching(scope, "out.logits", ret.lineno) == []
    assert reaching(scope, "self.x", ret.lineno, prefix=True) == []


def test_value_of_a_binding() -> None:
    ctx = _ctx(SRC)
    scope = ctx.scope(ctx.tree.body[1])
    paired = scope.bindings["a"][0]
    assert ast.unparse(value_of(paired)) == "out"  # the paired element
    unpacked = scope.bindings["c"][0]
    assert ast.unparse(value_of(unpacked)) == "pair(x)"  # the whole right side


def test_grad_off_mode_and_decorators() -> None:
    ctx = _ctx(SRC)
    fn = ctx.tree.body[1]
    scope = ctx.scope(fn)
    e = scope.bindings["e"][0]
    assert e.no_grad and off_mode(scope.grad_off_at(e.stmt), ctx) == "inference"
    frozen = ctx.tree.body[-1]
    assert decorated_off(frozen, ctx) and not decorated_off(fn, ctx)
    assert disables_grad(frozen.decorator_list[0], ctx)
    assert off_mode(frozen.decorator_list[0], ctx) == "off"


def test_every_function_by_name() -> None:
    ctx = _ctx(SRC)
    assert [f.lineno for f in defs_by_name(ctx)["pair"]] == [15, 22]


SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT505: an evaluation function counts as run with grad off where its caller turns grad
    # off by meaning (`reach.disables_grad`, one arm of a conditional context too), not where
    # the caller's code merely spells `inference_mode`: `inference_mode(False)` leaves grad on,
    # and the collected losses keep their graphs
    "evaluation-called-under-a-grad-mode": (Shape("""
        import contextlib
        def evaluate(model, val_loader):
            model.eval()
            losses = []
            for x, y in val_loader:
                losses.append(F.mse_loss(model(x), y))
            return sum(losses) / len(losses)
        model = nn.Linear(4, 2)
        val_loader = [(torch.randn(3, 4), torch.randn(3, 2)) for _ in range(3)]
        train = False
        with torch.no_grad() if not train else contextlib.nullcontext():
            val = evaluate(model, val_loader)
        """, "GT505", holds="val.grad_fn is None"), [Shape("""
        def evaluate(model, val_loader):
            model.eval()
            losses = []
            for x, y in val_loader:
                losses.append(F.mse_loss(model(x), y))
            return sum(losses) / len(losses)
        model = nn.Linear(4, 2)
        val_loader = [(torch.randn(3, 4), torch.randn(3, 2)) for _ in range(3)]
        with torch.inference_mode(False):
            val = evaluate(model, val_loader)
        """, "GT505", 5, holds="val.grad_fn is not None")]),
    # GT506: a helper whose `return` sits in a `with torch.no_grad():` block hands back a
    # tuple without history (the one `returns_off`, which GT5 read only from a decorator and
    # alarmed on); the twin computes the same statistics with grad on, and the carried
    # value's graph is freed by the first backward
    "tuple-returned-inside-a-no-grad-block": (Shape("""
        class Learner:
            def __init__(self):
                self.net = nn.Linear(4, 3)
                self.opt = torch.optim.Adam(self.net.parameters())
            def stats(self, logits, level, hist):
                with torch.no_grad():
                    probs = logits.softmax(1)
                    level = probs.max(1)[0].mean() if level is None else 0.99 * level + 0.01 * probs.max(1)[0].mean()
                    hist = probs.mean(0) if hist is None else 0.99 * hist + 0.01 * probs.mean(0)
                    return level, hist
            def fit(self, batches):
                level, hist = None, None
                for x in batches:
                    logits = self.net(x)
                    level, hist = self.stats(logits, level, hist)
                    loss = (logits.softmax(1) * hist).sum(1).mean() * level
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                return hist
        hist = Learner().fit([torch.randn(6, 4) for _ in range(3)])
        """, "GT506", holds="hist.grad_fn is None"), [Shape("""
        def stats(logits, level):
            probs = logits.softmax(1)
            level = probs.max(1)[0].mean() if level is None else 0.9 * level + 0.1 * probs.max(1)[0].mean()
            return level, probs.mean(0)
        net = nn.Linear(4, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        level = None
        for x in [torch.randn(6, 4) for _ in range(3)]:
            logits = net(x)
            level, hist = stats(logits, level)
            loss = (logits.softmax(1) * hist).sum(1).mean() * level
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT506", 10, "backward through the graph a second time")]),
    # GT202: `self.features(x)` runs the caller's own class's method, trainable here; another
    # class of the file has a no_grad method of the same name (the GT2 sources took the first
    # class's method for any `self.features`, and reported a loss that trains)
    "self-method-of-the-callers-class": (Shape("""
        class Frozen:
            def __init__(self, net):
                self.net = net

            @torch.no_grad()
            def features(self, x):
                return self.net(x)


        class Tuned:
            def __init__(self, net):
                self.net = net

            def features(self, x):
                return self.net(x)

            def step(self, x, y):
                loss = F.mse_loss(self.features(x), y)
                loss.backward()

        Tuned(nn.Linear(4, 2)).step(torch.randn(3, 4), torch.randn(3, 2))
        """, "GT202"), [Shape("""
        class Tuned:
            def __init__(self, net):
                self.net = net

            def features(self, x):
                return self.net(x)


        class Frozen:
            def __init__(self, net):
                self.net = net

            @torch.no_grad()
            def features(self, x):
                return self.net(x)

            def step(self, x, y):
                loss = F.mse_loss(self.features(x), y)
                loss.backward()

        Frozen(nn.Linear(4, 2)).step(torch.randn(3, 4), torch.randn(3, 2))
        """, "GT202", 13, "does not require grad")]),
    # GT202: a fallback helper defined under a top-level `try` is the function the call runs
    "helper-defined-under-try": (Shape("""
        try:
            from fastfeatures import features
        except ImportError:
            def features(net, x):
                return net(x)

        net = nn.Linear(4, 2)
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        F.mse_loss(features(net, x), y).backward()
        """, "GT202"), [Shape("""
        try:
            from fastfeatures import features
        except ImportError:
            def features(net, x):
                with torch.no_grad():
                    return net(x)

        net = nn.Linear(4, 2)
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        F.mse_loss(features(net, x), y).backward()
        """, "GT202", 5, "does not require grad")]),
    # GT107: one spelling of a model for every tracer (``vocabulary.model_spelling``): the
    # input GT1 sees fed to `self.classifier` is the model's input, upstream of its
    # parameters, so `mse(out.detach(), x)` keeps no path from the model (GT1 spelled models
    # with a narrower pattern of its own, without `classifier` or `head`, and missed it)
    "input-fed-to-a-model-spelled-classifier": (Shape("""
        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.classifier = nn.Linear(4, 4)

            def step(self, x):
                out = self.classifier(x)
                loss = F.mse_loss(out, x.detach())
                loss.backward()

        Probe().step(torch.randn(3, 4))
        """, "GT107"), [Shape("""
        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.classifier = nn.Linear(4, 4)

            def step(self, x):
                out = self.classifier(x)
                loss = F.mse_loss(out.detach(), x)
                loss.backward()

        Probe().step(torch.randn(3, 4))
        """, "GT107", 8, "does not require grad"), Shape("""
        def fit(head, inputs):
            logits = head(inputs)
            err = (logits.detach() - inputs).pow(2).mean()
            err.backward()

        fit(nn.Linear(4, 4), torch.randn(3, 4))
        """, "GT107", 3, "does not require grad")]),
    # GT204: the GT2 sources recognise a model call as GT5 does (``analysis.model_calls``):
    # `encoder(feats)` with `encoder` a script global built by a helper runs a module that
    # saves its input, an inference tensor (the GT2 sources only knew modules by their bound
    # kind, and read this call as an unknown function of its arguments)
    "inference-tensor-into-a-model-from-a-builder": (Shape("""
        def build_encoder():
            return nn.Linear(4, 2)

        encoder = build_encoder()

        def step(x, y):
            with torch.inference_mode():
                feats = x * 2
            feats = feats.clone()
            loss = F.mse_loss(encoder(feats), y)
            loss.backward()

        step(torch.randn(3, 4), torch.randn(3, 2))
        """, "GT204"), [Shape("""
        def build_encoder():
            return nn.Linear(4, 2)

        encoder = build_encoder()

        def step(x, y):
            with torch.inference_mode():
                feats = x * 2
            loss = F.mse_loss(encoder(feats), y)
            loss.backward()

        step(torch.randn(3, 4), torch.randn(3, 2))
        """, "GT204", 7, "Inference tensors cannot be saved"), Shape("""
        class VAE(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def encode(self, x):
                return self.fc(x)

        def load_vae():
            return VAE()

        vae = load_vae()
        with torch.inference_mode():
            cached = torch.randn(3, 4) + 1
        z = vae.encode(cached)
        z.pow(2).mean().backward()
        """, "GT204", 13, "Inference tensors cannot be saved")]),
    # GT108: one recogniser of the indices of a (values, indices) pair for GT1 and GT5
    # (``cuts.unpacks_indices``): `sort()` returns the pair without a `dim` too (GT1 asked for
    # an argument, GT5 did not)
    "indices-of-a-sort-without-dim": (Shape("""
        model = nn.Linear(4, 3)
        out = model(torch.randn(5, 4))
        vals, order = out.sort()
        loss = (vals * 0.1).mean()
        loss.backward()
        """, "GT108"), [Shape("""
        model = nn.Linear(4, 3)
        out = model(torch.randn(5, 4))
        vals, order = out.sort()
        loss = (order.float() * 0.1).mean()
        loss.backward()
        """, "GT108", 3, "does not require grad"), Shape("""
        net = nn.Linear(4, 3)
        scores = net(torch.randn(5, 4))
        _, ranks = torch.sort(scores)
        ranks.float().sum().backward()
        """, "GT108", 3, "does not require grad")]),
    # GT201: one table of torch.nn.functional losses (``cuts.is_functional_loss``) for GT1, GT2
    # and GT5: `binary_cross_entropy_with_logits` takes the prediction first, so an unknown
    # target does not hide a prediction made under no_grad (GT2 read it as any torch op)
    "bce-with-logits-prediction-first": (Shape("""
        def step(model, teacher, x):
            with torch.no_grad():
                target = torch.sigmoid(teacher(x))
            loss = F.binary_cross_entropy_with_logits(model(x), target)
            loss.backward()

        step(nn.Linear(4, 1), nn.Linear(4, 1), torch.randn(3, 4))
        """, "GT201"), [Shape("""
        def step(model, x, target):
            with torch.no_grad():
                logits = model(x)
            loss = F.binary_cross_entropy_with_logits(logits, target)
            loss.backward()

        step(nn.Linear(4, 1), torch.randn(3, 4), torch.rand(3, 1))
        """, "GT201", 2, "does not require grad"), Shape("""
        from torch.nn.functional import binary_cross_entropy_with_logits as bce_logits

        def fit(net, inputs, labels):
            with torch.set_grad_enabled(False):
                scores = net(inputs)
            bce_logits(scores, labels).backward()

        fit(nn.Linear(4, 1), torch.randn(3, 4), torch.rand(3, 1))
        """, "GT201", 4, "does not require grad")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)


def test_no_grad_conditional_names_the_forward() -> None:
    """GT201 on `out = model(x) if not flip else model(x.flip(0))` under no_grad names a
    forward, not the condition (the test of an `if` expression only picks an arm)."""
    from gradtrace.lint import check_source
    src = textwrap.dedent("""
        import torch
        import torch.nn.functional as F

        def train(model, x, y, flip):
            with torch.no_grad():
                out = model(x) if not flip else model(x.flip(0))
            loss = F.mse_loss(out, y)
            loss.backward()
        """)
    found = check_source(src, "t.py", select=["GT201"])
    assert [(f.line, f.code) for f in found] == [(6, "GT201")]
    assert "`model(x)` is computed under" in found[0].message
