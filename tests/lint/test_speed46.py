"""speed46: the calls of a file's classes found in one walk per file (NOTE [class call index])."""
from __future__ import annotations

import ast
import textwrap

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.analysis.calls import BODY_FIELDS, ascii_code, holding, word_lines
from gradtrace.lint.analysis.class_calls import class_call_index
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import child_fields, children
from gradtrace.lint.rules.registration._callers import class_calls

STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case, ast.Module)


def _one_class_walk(ctx, cls):  # the walk per class before speed46, kept as the reference
    out = []
    if cls not in ctx.analysis.classes:
        return out
    lines = word_lines(ctx, (cls,)) if ascii_code(ctx) else None
    stack = [(ctx.tree, ctx.tree)]
    while stack:
        owner, n = stack.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == cls:
            out.append((owner, n))
        inner = n if isinstance(n, FUNCTION_TYPES) else owner
        if lines is None or not isinstance(n, STATEMENTS):
            stack.extend((inner, c) for c in children(n))
            continue
        for f in child_fields(type(n)):
            v = getattr(n, f, None)
            if f in BODY_FIELDS:
                stack.extend((inner, c) for c in holding(ctx, n, f, lines))
            elif v.__class__ is list:
                stack.extend((inner, c) for c in v if isinstance(c, ast.AST))
            elif isinstance(v, ast.AST):
                stack.append((inner, v))
    return out


CALLS = textwrap.dedent('''\
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc = nn.Linear(d, d)

    class Pair(nn.Module):
        def __init__(self, a, b):
            super().__init__()
            self.a, self.b = a, b

    @register(Block(1))
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = Pair(Block(2), Block(3))
            def inner():
                return Block(4)
            self.q = [inner() for _ in range(2)]

    NET = Net()
    if True:
        try:
            BLOCK = Block(5)
        except ValueError:
            PAIR = Pair(Block(6), None)
    ''')


def _ctx(src):
    tree = ast.parse(src)
    return FileChecker("<t>", src, tree, [], None).ctx


@pytest.mark.parametrize("src", [CALLS, CALLS.replace("BLOCK =", "BLOCK\u00e9 =")],
                         ids=["ascii", "not-ascii"])
def test_index_is_the_walk_per_class(src):
    """Same (owner, call) pairs, same order, for every class; non-ASCII code: the whole tree."""
    ctx, ref = _ctx(src), _ctx(src)
    got = class_call_index(ctx)
    for cls in ("Block", "Pair", "Net"):
        want = _one_class_walk(ref, cls)
        assert [(type(o).__name__, c.lineno, c.col_offset) for o, c in got[cls]] == [
            (type(o).__name__, c.lineno, c.col_offset) for o, c in want]
    assert [c.lineno for _, c in got["Block"]] == [27, 25, 13, 19, 17, 17]
    assert [type(o).__name__ for o, _ in got["Block"]] == [
        "Module", "Module", "Module", "FunctionDef", "FunctionDef", "FunctionDef"]
    assert [c.args[0].value for _, c in got["Block"] if c.lineno == 17] == [3, 2]
    assert class_calls(ctx, "Pair") == got["Pair"] and class_calls(ctx, "Missing") == []
    assert class_call_index(ctx) is got  # once per file


MERGE = textwrap.dedent('''\
    import torch.nn as nn


    class Merge(nn.Module):
        def __init__(self, layers):
            super().__init__()
            self.layers = layers

        def forward(self, x):
            return sum(layer(x) for layer in self.layers)


    class Head(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, 1)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = Head(4)
            self.merge = Merge(LAYERS)

        def forward(self, x):
            return self.head(self.merge(x))


    class Twin(nn.Module):
        def __init__(self):
            super().__init__()
            self.merge = Merge(OTHER)
    ''')


def _gt401(layers, other="nn.ModuleList()"):
    found = check_source(MERGE.replace("LAYERS", layers).replace("OTHER", other),
                         select=["GT401"])
    return [(f.code, f.line, [r.line for r in f.related]) for f in found]


def test_gt401_through_the_index_buggy_twin():
    """A plain list of layers handed to a module class that stores it: GT401 on the store,
    the call that made the layers related (the walk's first call that passes them)."""
    assert _gt401("[nn.Linear(4, 3), nn.Linear(4, 3)]") == [("GT401", 7, [23])]
    both = "[nn.Linear(4, 3)]"
    assert _gt401(both, other=both) == [("GT401", 7, [32])]  # the walk meets Twin's first


@pytest.mark.parametrize("layers", ["nn.ModuleList([nn.Linear(4, 3), nn.Linear(4, 3)])",
                                    "[nn.ReLU(), nn.GELU()]"])
def test_gt401_through_the_index_silent_look_alike(layers):
    """Registered layers, or layers without parameters: nothing to say."""
    assert _gt401(layers) == []
