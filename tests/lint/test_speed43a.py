"""speed43a: the costly rules ask their own first question first (issue 12), with the
findings each must keep and a test that fails when the cheap path is undone.

- NOTE [stale optimizer first]: GT404's statement visitors ask whether the scope builds an
  optimizer before reading what a statement re-creates (a callee that may live in another file).
- NOTE [optimizer over no parameters call]: GT447 reads a function's optimizers only when its
  code spells ``parameters`` (in ASCII code).
"""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.rules.registration import identity, other_instance


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


# -- NOTE [optimizer over no parameters call] ---------------------------------------------------
OTHER = """
    import torch
    import torch.nn as nn

    def train(loader):
        net = nn.Linear(4, 2)
        model = nn.Linear(4, 2)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    def fit(loader, w):
        opt = torch.optim.Adam([w], lr=1e-3)
        for x, y in loader:
            opt.zero_grad()
            ((x @ w - y) ** 2).mean().backward()
            opt.step()
"""
SAME = OTHER.replace("Adam(net.parameters()", "Adam(model.parameters()")


@pytest.fixture
def builds_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The functions (or the module) whose optimizers GT447 reads."""
    seen: list[str] = []
    builds = other_instance.optimizer_builds

    def counted(scope):  # type: ignore[no-untyped-def]
        seen.append(getattr(scope.node, "name", "<module>"))
        return builds(scope)
    monkeypatch.setattr(other_instance, "optimizer_builds", counted)
    return seen


def test_other_instance_still_found(builds_read: list[str]) -> None:
    assert _found(OTHER, "GT447") == [("GT447", 8)]
    # `fit` never spells `parameters` (the module's lines are the file's: they do)
    assert builds_read == ["<module>", "train"]


def test_same_instance_silent() -> None:
    assert _found(SAME, "GT447") == []


def test_parameters_in_a_comment_or_string_only(builds_read: list[str]) -> None:
    src = OTHER.replace("net.parameters()", "[net.weight]  # net.parameters()")
    assert _found(src, "GT447") == []
    assert builds_read == []
    src = OTHER.replace("lr=1e-3)\n        for x, y in loader:\n            opt.zero_grad()\n"
                        "            ((x", "lr=1e-3, name='parameters')\n        for x, y in "
                        "loader:\n            opt.zero_grad()\n            ((x")
    assert "name='parameters'" in src
    _found(src, "GT447")
    assert "fit" not in builds_read


def test_non_ascii_code_reads_every_function(builds_read: list[str]) -> None:
    assert _found(OTHER + "\n    é = 1\n", "GT447") == [("GT447", 8)]
    assert sorted(builds_read) == ["<module>", "fit", "train"]
