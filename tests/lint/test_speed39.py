"""speed39: four exact cuts of the rules' cost, each with the finding it must keep and the
look-alike it must stay silent on, plus a test that fails when the cheap path is undone.

- GT602/GT603 `_writes_into` takes the plain aliases (`acc = out`) of a method from one
  pass (`_moves`), not from a scan of the later statements per module-result binding;
- GT516 `_globals` is a set difference (a union per module name before);
- GT502 asks `unobserved_training` last, only when it would report;
- GT622 reads no `forward` whose code spells no in-place write (NOTE [write spelling]).
"""
from __future__ import annotations

import ast
import textwrap

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.rules.inplace import _class_writes, block_input
from gradtrace.lint.rules.training_loop import zero_grad


def _found(src: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(textwrap.dedent(src), select=[code])]


# -- GT603: a running sum that starts as a ReLU block's output (NOTE [accumulator alias]) ------
ALIAS = """
    import torch.nn as nn

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(4, 4), nn.ReLU())
                                         for _ in range(3)])

        def forward(self, x):
            acc = None
            for i, blk in enumerate(self.blocks):
                h = blk(x)
                if i == 0:
                    acc = h
                else:
                    acc += h
            return acc
    """


def test_alias_of_module_result_written_is_reported() -> None:
    assert _found(ALIAS, "GT603") == [("GT603", 17)]


def test_alias_of_another_name_is_silent() -> None:
    # `acc = x` aliases the input, not the block's output: nothing saved is written
    assert _found(ALIAS.replace("acc = h", "acc = x"), "GT603") == []


def test_alias_rebound_out_of_place_is_silent() -> None:
    assert _found(ALIAS.replace("acc += h", "acc = acc + h"), "GT603") == []


def test_moves_lists_only_aliases_into_written_names() -> None:
    fn = ast.parse(textwrap.dedent("""
        def f(x):
            a = x
            b = x
            b += 1
            c = c
            d = x.y
        """)).body[0]
    stmts = list(fn.body)
    # `a` is never written in place, `c = c` names itself, `d = x.y` is no plain name
    assert _class_writes._moves(stmts, {"b": [2], "c": [], "d": []}) == [(1, "x", "b")]


# -- GT516: the module-level names a function reads as globals ------------------------------
def test_globals_is_module_names_minus_params_and_locals() -> None:
    from gradtrace.lint.context import Context
    from gradtrace.lint.names import Imports
    from gradtrace.lint.rules.training_loop._modes import _globals
    src = textwrap.dedent("""
        import torch
        model = torch.nn.Linear(2, 2)
        data = 1
        opt = None
        def train(data):
            opt = 2
            model.train()
            return data, opt
        """)
    tree = ast.parse(src)
    ctx = Context("t.py", src, tree, Imports())
    fn = tree.body[-1]
    glob = _globals(ctx, fn)  # membership only (speed40: no set per function)
    assert {n for n in ("model", "train", "data", "opt", "torch", "x") if n in glob} \
        == {"model", "train"}  # not `data`, `opt`


# -- GT502: the dear "unobserved training" test asked last -----------------------------------
OUTSIDE = """
    def fit(model, optimizer, loader, criterion):
        for epoch in range(10):
            optimizer.zero_grad()
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
    """
INSIDE = """
    def fit(model, optimizer, loader, criterion):
        for epoch in range(10):
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
    """
BENCH = """
    import torch

    def bench():
        net = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x = torch.ones(2, 4)
        opt.zero_grad()
        for _ in range(10):
            out = net(x)
            loss = out.sum()
            loss.backward()
            opt.step()
    """


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = zero_grad.unobserved_training

    def counting(ctx, fn, opt):  # type: ignore[no-untyped-def]
        calls.append(opt)
        return real(ctx, fn, opt)
    monkeypatch.setattr(zero_grad, "unobserved_training", counting)
    return calls


def test_clearing_outside_the_loop_is_reported(asked: list[str]) -> None:
    assert _found(OUTSIDE, "GT502") == [("GT502", 4)]
    assert asked == ["optimizer"]  # asked once, for the loop it reports


def test_clearing_inside_the_loop_never_asks_the_dear_test(asked: list[str]) -> None:
    assert _found(INSIDE, "GT502") == []
    assert asked == []  # fails if `unobserved_training` is asked before the cheap tests


def test_unobserved_benchmark_stays_silent(asked: list[str]) -> None:
    assert _found(BENCH, "GT502") == []
    assert asked == ["opt"]


# -- GT622: a forward that spells no in-place write is not read -------------------------------
WRITER = """
    import torch.nn as nn

    class Shift(nn.Module):
        def forward(self, x):
            out = x
            out[:, 0] = 0.0
            return out

    class Plain(nn.Module):
        def forward(self, x):
            out = x * 2
            return out

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.shift = Shift()
            self.plain = Plain()

        def forward(self, x):
            a = self.fc(x)
            return a + self.shift(x) + self.plain(x)
    """


def test_block_writing_its_input_is_reported() -> None:
    assert _found(WRITER, "GT622") == [("GT622", 6)]


def test_unspelt_forward_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    real = block_input.block_write

    def counting(fn):  # type: ignore[no-untyped-def]
        read.append(fn.name + str(fn.lineno))
        return real(fn)
    monkeypatch.setattr(block_input, "block_write", counting)
    assert _found(WRITER, "GT622") == [("GT622", 6)]
    # Shift's forward (line 5) spells `] =`; Plain's (line 11) and Net's (line 21) spell no
    # write: fails if the text gate is dropped
    assert read == ["forward5"]
