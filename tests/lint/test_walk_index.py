"""The file's walk index (NOTE [walk index]): the same nodes in the same order as a plain walk."""
from __future__ import annotations

import ast

from gradtrace.lint import nodes
from gradtrace.lint.nodes import begin_file, end_file, of_types, walk

SOURCE = '''
import torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
    def forward(self, x, *, scale=2.0):
        if x.sum() > 0 and scale != 1:
            y = [self.fc(t) for t in x if t is not None]
        else:
            y = {k: v for k, v in enumerate(x)}
        with torch.no_grad():
            z = lambda a: a ** 2
        match y:
            case [first, *rest]:
                return first
        return y
def train(model, loader, opt):
    for x, t in loader:
        opt.zero_grad()
        try:
            loss = (model(x) - t).pow(2).mean()
        except ValueError as e:
            raise RuntimeError(f"bad {e!r}") from e
        finally:
            pass
        loss.backward()
        opt.step()
'''


def _plain(node: ast.AST) -> list[ast.AST]:
    return list(nodes._walk(node, None))


def test_indexed_walks_give_every_subtree_in_the_plain_order():
    tree = ast.parse(SOURCE)
    everything = _plain(tree)
    begin_file(tree, 0)  # no budget: the index is built on the first walk
    try:
        for n in everything:
            assert list(walk(n)) == _plain(n)
        assert nodes._FILE[0].spans is not None
        for types in ((ast.Call,), (ast.Name, ast.Attribute), (ast.stmt,)):
            for n in everything:
                assert of_types(n, types) == [x for x in _plain(n) if isinstance(x, types)]
    finally:
        end_file(tree)
    assert nodes._FILE[0] is None


def test_nodes_of_another_tree_are_walked_plainly():
    tree, other = ast.parse(SOURCE), ast.parse(SOURCE)
    begin_file(tree, 0)
    try:
        list(walk(tree))
        for n in _plain(other):
            assert list(walk(n)) == _plain(n)
            assert of_types(n, (ast.Call,)) == [x for x in _plain(n) if isinstance(x, ast.Call)]
    finally:
        end_file(tree)


def test_the_index_waits_for_the_budget():
    tree = ast.parse(SOURCE)
    begin_file(tree, len(SOURCE))
    try:
        fn = tree.body[2]
        list(walk(fn))
        assert nodes._FILE[0].spans is None  # a walk of one function: no index yet
        for _ in range(10):
            list(walk(tree))
        assert list(walk(fn)) == _plain(fn)
        assert nodes._FILE[0].spans is not None
    finally:
        end_file(tree)


def test_ending_another_file_keeps_the_current_index():
    tree, other = ast.parse(SOURCE), ast.parse(SOURCE)
    begin_file(tree, 0)
    end_file(other)
    assert nodes._FILE[0] is not None and nodes._FILE[0].tree is tree
    end_file(tree)


LEAF_SOURCE = SOURCE + '''
from . import models as m, data
global_count: int = 0
def outer():
    global global_count
    x = 1
    def inner():
        nonlocal x
        x += 1
    print(f"{x!r:>{global_count}}", x if x else -x, not x, x < 2 <= 3)
    async def co():
        async for a in b:
            async with c as d:
                await d
        return [y async for y in b]
    match x:
        case None | True:
            pass
        case {"k": 1, **rest}:
            pass
        case Point(x=0, y=yy) as p:
            pass
    try:
        pass
    except ValueError as eg:
        pass
    del x
    assert x, "msg"
    yield from (i for i in range(3))
'''


def test_leaf_fields_hide_no_node():
    """NOTE [leaf fields]: leaving out the fields typed as names, numbers and constants
    changes no walk: the nodes of ``ast.walk`` (``ctx``/``op`` leaves aside), in each
    walk's own order."""
    tree = ast.parse(LEAF_SOURCE)
    everything = list(ast.walk(tree))
    ops = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop)
    assert {id(n) for n in _plain(tree)} == {id(n) for n in everything
                                             if not isinstance(n, ops)}
    assert [id(n) for n in nodes.bfs_walk(tree)] == [id(n) for n in everything]
    for n in everything:
        assert nodes.child_nodes(n) == list(ast.iter_child_nodes(n))
    assert nodes.child_fields(ast.Name) == () and nodes.child_fields(ast.Constant) == ()
    assert nodes.child_fields(ast.Attribute) == ("value",)
    # statements(): every statement, in the order of a walk of the bodies alone
    want = [n for n in everything if isinstance(n, ast.stmt)]
    assert sorted(map(id, nodes.statements(tree))) == sorted(map(id, want))
    assert [type(s).__name__ for s in nodes.statements(tree)][:3] == [
        "Import", "ClassDef", "FunctionDef"]


def test_scope_nodes_on_lines_are_scope_nodes_of_those_lines_in_order():
    """``scope_nodes_on`` leaves out only what lies off the lines: for every scope of the
    source and several line sets (none, one, two, all, every other), the nodes with a position
    on the lines are those of ``scope_nodes``, in the same order."""
    tree = ast.parse(SOURCE)
    n_lines = len(SOURCE.splitlines())
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]
    line_sets = [[], [8], [9, 14], list(range(1, n_lines + 1)), list(range(1, n_lines + 1, 2))]

    def on(found: list[ast.AST], lines: list[int]) -> list[int]:
        return [id(n) for n in found if hasattr(n, "lineno")
                and nodes.holds_line(lines, n.lineno, n.end_lineno or n.lineno)]
    for fn in scopes:
        for lines in line_sets:
            got = list(nodes.scope_nodes_on(fn, lines))
            assert on(got, lines) == on(list(nodes.scope_nodes(fn)), lines)
            assert len(got) <= len(list(nodes.scope_nodes(fn)))
    assert list(nodes.scope_nodes_on(tree, [])) == [] or all(
        not isinstance(n, ast.stmt) for n in nodes.scope_nodes_on(tree, []))
