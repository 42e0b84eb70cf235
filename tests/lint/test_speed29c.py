"""speed29c: the function list found from the statement lists alone is bfs_walk's list of
defs, in its order, and the index-backed yes/no tests agree with the walks they replaced."""
import ast
import textwrap

from gradtrace.lint.def_order import breadth_first_defs
from gradtrace.lint.nodes import bfs_walk, of_types

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
CODE = textwrap.dedent('''
    import torch

    @deco(lambda: None)
    def outer(model, loader, opt):
        def first():
            def deepest():
                return 0
            return deepest
        for x, y in loader:
            try:
                def in_try():
                    return 1
            except RuntimeError:
                def in_handler():
                    return 2
            else:
                def in_else():
                    return 3
            finally:
                def in_finally():
                    return 4
            match x:
                case 1:
                    def in_case():
                        return 5
                case _:
                    pass
            while True:
                async def in_while():
                    return 6
            with ctx():
                class Inner:
                    def method(self):
                        def local():
                            return 7
                        return local
        if model:
            def in_if():
                return 8
        else:
            def in_orelse():
                return 9
        opt.step()
        return [v for v in loader]

    class Top:
        def a(self):
            return 1
        async def b(self):
            return 2

    def last():
        return 3
    ''')


def _walk_defs(tree: ast.AST) -> list[ast.AST]:
    return [n for n in bfs_walk(tree) if isinstance(n, DEFS)]


def test_breadth_first_defs_is_bfs_walks_order() -> None:
    tree = ast.parse(CODE)
    got = breadth_first_defs(tree)
    assert [f.name for f in got] == [f.name for f in _walk_defs(tree)]
    assert len(got) == 16 and all(a is b for a, b in zip(got, _walk_defs(tree)))
    for fn in got:  # a function as the tree: itself first, as bfs_walk
        assert breadth_first_defs(fn) == _walk_defs(fn)


def test_of_types_answers_as_the_walks() -> None:
    tree = ast.parse(CODE)
    for fn in _walk_defs(tree):
        calls = [n for n in bfs_walk(fn) if isinstance(n, ast.Call)]
        assert {id(n) for n in of_types(fn, (ast.Call,))} == {id(n) for n in calls}
        loops = (ast.For, ast.AsyncFor, ast.comprehension)
        assert bool(of_types(fn, loops)) == any(isinstance(n, loops) for n in bfs_walk(fn))
