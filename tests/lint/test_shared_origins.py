"""The shared origins facts: a tracer per function, cached on the context, whose every query
walks with its own state, so an answer never depends on what was asked before (by the same
rule, another rule, or another return of the same helper). Same harness as
test_heldout_shapes.py: a look-alike that stays silent and runs, buggy twins in other
spellings reported on the given line that really fail on torch.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run, _source

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT202: every return of a helper hands out one value made under no_grad; the second
    # return was traced after the first had marked the value's binding as seen (one walk state
    # for all the returns), so it read as no source at all and the helper was missed
    "helper-returns-no-grad-value-twice": (Shape("""
        def features(net, x, frozen=True):
            if frozen:
                with torch.no_grad():
                    return net(x)
            return net(x)

        net = nn.Linear(4, 2)
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        F.mse_loss(features(net, x, frozen=False), y).backward()
        """, "GT202"), [Shape("""
        def features(net, x, flip=False):
            with torch.no_grad():
                h = net(x)
            if flip:
                return h
            return h

        net = nn.Linear(4, 2)
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        loss = F.mse_loss(features(net, x), y)
        loss.backward()
        """, "GT202", 2, "does not require grad"), Shape("""
        class Probe:
            def __init__(self, body):
                self.body = body

            def encode(self, x, cache=None):
                with torch.no_grad():
                    z = self.body(x)
                if cache is not None:
                    cache.append(z)
                    return z
                return z

            def step(self, x):
                loss = self.encode(x).pow(2).mean()
                loss.backward()

        Probe(nn.Linear(4, 2)).step(torch.randn(3, 4))
        """, "GT202", 6, "does not require grad")]),
    # GT505: the GT5 dependency graph follows a value through its tensor methods, `.t()`
    # included (it read `out.t()` as an object's method: the loss seemed to carry no graph)
    "kept-graph-through-transpose": (Shape("""
        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        history = []
        for x, y in [(torch.randn(3, 4), torch.randn(2, 3)) for _ in range(3)]:
            opt.zero_grad()
            out = model(x)
            loss = F.mse_loss(out.t(), y)
            loss.backward()
            opt.step()
            history.append(loss.item())
        """, "GT505", holds="isinstance(history[-1], float)"), [Shape("""
        model = nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        history = []
        for x, y in [(torch.randn(3, 4), torch.randn(2, 3)) for _ in range(3)]:
            opt.zero_grad()
            out = model(x)
            loss = F.mse_loss(out.t(), y)
            loss.backward()
            opt.step()
            history.append(loss)
        """, "GT505", 10, holds="history[0].grad_fn is not None"), Shape("""
        def fit(net, batches, optim):
            seen = []
            for xb, yb in batches:
                optim.zero_grad()
                pred = net(xb)
                err = (pred.t() - yb).pow(2).mean()
                err.backward()
                optim.step()
                seen.append(err)
            return seen

        net = nn.Linear(4, 2)
        seen = fit(net, [(torch.randn(3, 4), torch.randn(2, 3))] * 3,
                   torch.optim.SGD(net.parameters(), lr=0.1))
        """, "GT505", 9, holds="seen[0].grad_fn is not None")]),
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


def test_a_query_does_not_depend_on_earlier_ones() -> None:
    """GT204 (a full trace: which ops save an inference tensor) and GT201 (stops at the first
    live source) ask about the same backward call of one shared tracer, in either order: each
    rule alone gives what all the rules together give."""
    src = _source(Shape("""
        def train(model, teacher, x, y):
            with torch.inference_mode():
                t = teacher(x)
            with torch.no_grad():
                z = model(x)
            loss = F.mse_loss(z, y) + F.mse_loss(model(x) @ t, y)
            loss.backward()
        """, ""))
    alone = sorted((f.line, f.code) for code in ("GT201", "GT204")
                   for f in check_source(src, "q.py", select=[code]))
    together = sorted((f.line, f.code) for f in check_source(src, "q.py")
                      if f.code in ("GT201", "GT204"))
    assert together == alone == [(src.count("\n", 0, src.index("inference_mode")) + 1, "GT204")]
