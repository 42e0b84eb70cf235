"""speed53: exact cuts in the checker's hot facts. The calls of the file's ``nn`` module classes
come from one walk (NOTE [one walk for the module classes]): for every class, the same calls,
owners and order as the class's own walk; GT427 builds no scope for a function that never
spells ``requires_grad`` (NOTE [flag lines]), and still finds the freezer that does."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint import check_source
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rules.registration._callers import _calls_of_classes, class_calls

MODEL = textwrap.dedent('''
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, layers, width=4):
            super().__init__()
            self.layers = layers
            self.head = Head(width)

    class Head(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.fc = nn.Linear(width, 2)

    class Plain:
        def __init__(self, n):
            self.n = n

    def build(k, blocks=None):
        if k:
            blocks = [Block([nn.Linear(4, 4), Head(4)]), Block([Head(k)], k)]
        make = lambda: Block([Head(2)], width=Head(3).fc.in_features)
        return Plain(Block(list(blocks or [])), make())

    @staticmethod
    def deco(f=Head(5)):
        return [Block([h]) for h in (Head(6), Head(7))]

    NET = Block([Head(8), Block([Head(9)])])
    ''')


def test_module_class_calls_match_each_class_walk():
    tree = ast.parse(MODEL)
    ctx = FileChecker("<model>", MODEL, tree, []).ctx
    for cls in ("Block", "Head", "Plain", "Missing"):
        one = _calls_of_classes(ctx, frozenset((cls,)))  # the class's own walk
        alone = [(id(o), id(c)) for o, c in one.get(cls, [])]
        got = [(id(o), id(c)) for o, c in class_calls(ctx, cls)]
        assert got == (alone if cls != "Missing" else [])
    assert len(class_calls(ctx, "Head")) == 10 and len(class_calls(ctx, "Block")) == 7


FREEZE = textwrap.dedent('''
    import torch

    def freeze(m):
        for p in m.parameters():
            p.requires_grad = False

    def log(m):
        return sum(p.numel() for p in m.parameters())

    def train(model, loader):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            freeze(model)
            log(model)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    ''')


def test_freezer_found_through_its_flag_lines():
    assert [(f.code, f.line) for f in check_source(FREEZE, "t.py") if f.code == "GT427"] == [
        ("GT427", 6)]
    quiet = FREEZE.replace("p.requires_grad = False", "p.grad = None")
    assert not [f for f in check_source(quiet, "t.py") if f.code == "GT427"]
