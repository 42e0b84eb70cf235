"""speed29a: the shared statement and function lists that replaced per-rule walks give the same
nodes in the same order as the walks they replaced."""
import ast
import textwrap

from gradtrace.lint import nodes
from gradtrace.lint.nodes import bfs_walk, function_scopes, scope_nodes, scope_statements

CODE = textwrap.dedent('''
    def train(model, loader, opt):
        for x, y in loader:
            try:
                loss = model(x).sum()
            except RuntimeError:
                return None
            else:
                if loss > 0:
                    loss.backward()
            finally:
                opt.zero_grad()
            match x:
                case 1:
                    return loss
                case _:
                    pass
            f = lambda v: v + 1
            class Inner:
                def step(self):
                    return 2
            def helper():
                return 3
            with ctx():
                while True:
                    return (yield loss)
        return loss

    async def run():
        async for b in stream():
            return b
    ''')

STMTS = (ast.stmt, ast.excepthandler, ast.match_case)


def test_scope_statements_are_scope_nodes_statements_in_order():
    tree = ast.parse(CODE)
    for fn in [tree, *(n for n in ast.walk(tree) if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        want = [n for n in scope_nodes(fn) if isinstance(n, STMTS)]
        got = scope_statements(fn)
        assert [id(n) for n in got] == [id(n) for n in want]
    train = tree.body[0]
    returns = [n.lineno for n in scope_statements(train) if isinstance(n, ast.Return)]
    assert sorted(returns) == [7, 15, 26, 27]  # not the nested def's, class's returns


def test_function_scopes_same_list_with_and_without_the_file_state():
    tree = ast.parse(CODE)
    want = [tree, *(n for n in bfs_walk(tree) if isinstance(
        n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    assert list(function_scopes(tree)) == want
    nodes.begin_file(tree, len(CODE))
    try:
        first = list(function_scopes(tree))
        again = function_scopes(tree)
        assert first == want and list(again) == want
        other = ast.parse("def f():\n    pass\n")  # another tree: walked, not the file's list
        assert [type(n) for n in function_scopes(other)] == [ast.Module, ast.FunctionDef]
    finally:
        nodes.end_file(tree)
