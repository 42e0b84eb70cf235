"""speed44: the file's nodes grouped by type once (NOTE [typed positions]) and a whole-tree
walk that builds the walk index once half its budget is spent (NOTE [whole-tree walk]).

Both change only when and how the walk index (NOTE [walk index]) is made, never what a walk
gives: the tests compare each answer with a plain walk, and the findings of real rules on a
file checked with the index built at once, never, and as the budget decides."""
from __future__ import annotations

import ast
import textwrap

import pytest

from gradtrace.lint import check_source, nodes
from gradtrace.lint.node_types import by_type, typed
from gradtrace.lint.nodes import begin_file, end_file, of_types

SOURCE = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    # a comment naming nn.Linear(4, 4) and loss.backward() is no node
    DOC = "a string naming torch.sigmoid(x) is one Constant"

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.gate = nn.Sigmoid()

        def forward(self, x):
            h = self.gate(self.fc(x))
            return [h * 2 for _ in range(2)][0]

    def train(model, loader, opt):
        for x, y in loader:
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
    ''')

TUPLES = [(ast.Call,), (ast.Name, ast.Attribute), (ast.stmt,), (ast.expr, ast.arguments),
          (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef), (ast.Constant,),
          (ast.Global,)]


def _plain(node: ast.AST) -> list[ast.AST]:
    return list(nodes._walk(node, None))


def test_groups_hold_each_node_once_by_its_exact_type_in_walk_order():
    order = _plain(ast.parse(SOURCE))
    groups = by_type(order)
    assert sorted(p for at in groups.values() for p in at) == list(range(len(order)))
    for t, at in groups.items():
        assert at == sorted(at) and all(type(order[p]) is t for p in at)
    assert len(groups[ast.ClassDef]) == 1 and len(groups[ast.FunctionDef]) == 3
    # the comment's words are no node; the string is one Constant, its words no Call
    calls = [ast.unparse(order[p].func) for p in groups[ast.Call]]
    assert "nn.Linear" in calls and "loss.backward" in calls and "torch.sigmoid" not in calls
    assert [order[p].value for p in groups[ast.Constant]].count(
        "a string naming torch.sigmoid(x) is one Constant") == 1


@pytest.mark.parametrize("types", TUPLES, ids=lambda t: "-".join(x.__name__ for x in t))
def test_typed_positions_are_those_of_a_pass_over_every_node(types):
    order = _plain(ast.parse(SOURCE))
    pos, found = typed(by_type(order), order, types)
    want = [i for i, n in enumerate(order) if isinstance(n, types)]
    assert pos == want and found == [order[i] for i in want]


def test_of_types_with_the_index_gives_every_subtree_as_a_plain_walk():
    tree = ast.parse(SOURCE)
    everything = _plain(tree)
    begin_file(tree, 0)
    try:
        for types in TUPLES:
            for n in everything:
                assert of_types(n, types) == [x for x in _plain(n) if isinstance(x, types)]
        assert nodes._FILE[0].spans is not None
    finally:
        end_file(tree)


def test_a_whole_tree_walk_builds_the_index_once_half_the_budget_is_spent():
    tree = ast.parse(SOURCE)
    fn = tree.body[-1]
    size = 4 * nodes.WALK_BUDGET_CHARS * len(_plain(tree))  # budget: 4x the tree's nodes
    begin_file(tree, size)
    try:
        state = nodes._FILE[0]
        assert of_types(tree, (ast.Call,)) == [x for x in _plain(tree) if isinstance(x, ast.Call)]
        assert state.spans is None  # with the whole budget left, walked plainly
        while state.budget > state.half:
            of_types(fn, (ast.Name,))  # parts of the tree: never the index on their own here
            assert state.spans is None
        assert of_types(tree, (ast.Call,)) == [x for x in _plain(tree) if isinstance(x, ast.Call)]
        assert state.spans is not None  # half spent: the whole-tree walk built it
        assert state.budget > 0
    finally:
        end_file(tree)


def test_walk_of_the_whole_tree_builds_it_too_and_gives_the_same_nodes():
    tree = ast.parse(SOURCE)
    begin_file(tree, 2 * nodes.WALK_BUDGET_CHARS * len(_plain(tree)))
    try:
        state = nodes._FILE[0]
        list(nodes.walk(tree))
        assert state.spans is None
        assert list(nodes.walk(tree)) == _plain(tree)  # budget now at or under half
        assert state.spans is not None
    finally:
        end_file(tree)


DENSE_BLOCK = '''
class Head{k}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.Sigmoid()

    def forward(self, x):
        p = self.act(self.fc(x))
        p[p < 0.1] = 0.0
        return p


def train{k}(model, loader, opt):
    for x, y in loader:
        opt.zero_grad()
        out = model(x)
        loss = F.mse_loss(out.detach(), y)
        loss.backward()
        opt.step()


def fit{k}(model, loader):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
'''


def _findings(source: str, chars: int | None) -> list[tuple[str, int]]:
    old = nodes.WALK_BUDGET_CHARS
    if chars is not None:
        nodes.WALK_BUDGET_CHARS = chars
    try:
        return sorted((f.code, f.line) for f in check_source(source))
    finally:
        nodes.WALK_BUDGET_CHARS = old


def test_findings_are_the_same_with_the_index_at_once_never_and_by_budget():
    """Buggy blocks (a write into a sigmoid's output, a detached prediction in the loss)
    repeated in one dense file: every block's findings, at its own lines, whether the walk
    index is built at the first walk (a budget of 0), never (a budget past any walk) or as the
    budget decides; the clean blocks (``fit``) silent in all three."""
    header = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
    source = header + "".join(DENSE_BLOCK.format(k=k) for k in range(6))
    default = _findings(source, None)
    assert _findings(source, 10 ** 9) == default  # budget 0: built at the first walk
    assert _findings(source, 1) == default  # one node per character: built late or never
    block = DENSE_BLOCK.count("\n")
    at = DENSE_BLOCK.splitlines().index  # (0-based in the block: +1 for its line)
    first = at("        p[p < 0.1] = 0.0") + 1 + header.count("\n")
    detach = at("        loss = F.mse_loss(out.detach(), y)") + 1 + header.count("\n")
    by_code: dict[str, list[int]] = {}
    for code, line in default:
        by_code.setdefault(code, []).append(line)
    assert by_code.get("GT602") == [first + k * block for k in range(6)]
    assert any(lines == [detach + k * block for k in range(6)] for lines in by_code.values())
    fit_lines = {at("def fit{k}(model, loader):") + 1 + header.count("\n") + k * block + d
                 for k in range(6) for d in range(7)}
    assert not fit_lines.intersection(line for _, line in default)
