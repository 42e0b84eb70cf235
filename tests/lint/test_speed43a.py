"""speed43a: the costly rules ask their own first question first (issue 12), with the
findings each must keep and a test that fails when the cheap path is undone.

- NOTE [stale optimizer first]: GT404's statement visitors ask whether the scope builds an
  optimizer before reading what a statement re-creates (a callee that may live in another file).
"""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.rules.registration import identity


def _found(src: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(textwrap.dedent(src), select=[code])]


# -- NOTE [stale optimizer first] ---------------------------------------------------------------
NET = """
    import copy
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)

        def grow(self, n):
            self.emb = nn.Embedding(n, 4)

    model = Net()
"""
STALE = NET + """
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.grow(20)
    model = copy.deepcopy(model)
    for x in data:
        model(x).sum().backward()
        opt.step()
"""
# the look-alike: the same re-creations before the optimizer is built
FRESH = NET + """
    model.grow(20)
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in data:
        model(x).sum().backward()
        opt.step()
"""
# no optimizer in the scope at all (the file still says `optim`: it imports it)
NO_OPTIMIZER = NET + """
    import torch.optim
    model.grow(20)
    model = copy.deepcopy(model)
"""


def test_stale_optimizer_still_found() -> None:
    assert _found(STALE, "GT404") == [("GT404", 12), ("GT404", 18)]


def test_fresh_optimizer_silent() -> None:
    assert _found(FRESH, "GT404") == []


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """What GT404 reads of a statement (and its line): the callee's replaced submodules, the
    new object (``visit_ClassDef`` reads the methods' own assignments: lines up to 14)."""
    seen: list[tuple[str, int]] = []
    replaces, new_object = identity.replaces_submodules_of, \
        identity.ModelRecreatedAfterOptimizer._new_object

    def counted_replaces(*a, **k):  # type: ignore[no-untyped-def]
        seen.append(("replaces", a[0].lineno))
        return replaces(*a, **k)

    def counted_new(self, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(("new", a[0].lineno))
        return new_object(self, *a, **k)
    monkeypatch.setattr(identity, "replaces_submodules_of", counted_replaces)
    monkeypatch.setattr(identity.ModelRecreatedAfterOptimizer, "_new_object", counted_new)
    return seen


def test_no_optimizer_no_statement_read(asked: list[tuple[str, int]]) -> None:
    assert _found(NO_OPTIMIZER, "GT404") == []
    assert [a for a in asked if a[1] > 14] == []


def test_optimizer_statements_read(asked: list[tuple[str, int]]) -> None:
    assert _found(STALE, "GT404") == [("GT404", 12), ("GT404", 18)]
    assert ("replaces", 17) in asked and ("new", 18) in asked
