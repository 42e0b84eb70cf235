"""GT418: an empty `nn.ModuleList` (or `ParameterList`, `Sequential`) filled by item assignment."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import scope_nodes
from gradtrace.lint.rule import Bad, Good, Rule

LISTS = frozenset({"torch.nn.ModuleList", "torch.nn.ParameterList", "torch.nn.Sequential",
                   "torch.nn.modules.container.ModuleList",
                   "torch.nn.modules.container.ParameterList",
                   "torch.nn.modules.container.Sequential"})
GROW = frozenset({"append", "extend", "insert", "add_module", "register_module"})


def _empty_list(e: ast.AST, ctx: Context) -> bool:
    """``nn.ModuleList()`` / ``nn.ModuleList([])`` / ``nn.ParameterList()`` / ``nn.Sequential()``."""
    if not isinstance(e, ast.Call) or (ctx.qualified_name(e.func) or "") not in LISTS \
            or e.keywords:
        return False
    return not e.args or (len(e.args) == 1 and isinstance(e.args[0], (ast.List, ast.Tuple))
                          and not e.args[0].elts)


class ModuleListFilledByIndex(Rule):
    """An empty `nn.ModuleList` is filled by item assignment (`self.blocks[i] = Block()`).

    Why: like a Python list, `nn.ModuleList` (and `ParameterList`, `Sequential`) only
    replaces items that exist: `blocks[i] = ...` on an empty one raises `IndexError: index 0
    is out of range` when the model is built (a multi-exit network's blocks). Use
    `self.blocks.append(Block(...))`, or build the list at once:
    `nn.ModuleList([Block(...) for i in range(n)])`.
    Known limits: the empty container is made in the same function as the item assignment,
    and nothing in that function appends to it.
    """

    code = "GT418"
    name = "module-list-filled-by-index"
    message = ("`{target}` is an empty `{cls}` (line {line}) and nothing appends to it: "
               "`{stmt}` raises IndexError; append instead")
    triggers = ("ModuleList", "ParameterList", "Sequential")
    gate_statements = True
    examples = [
        Bad("""
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.blocks = nn.ModuleList()
                    for i in range(n):
                        self.blocks[i] = nn.Linear(4, 4)
            """, at=(8, 12)),
        Good("""
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.blocks = nn.ModuleList()
                    for i in range(n):
                        self.blocks.append(nn.Linear(4, 4))
                    self.blocks[0] = nn.Identity()
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        if len(node.targets) != 1 or not _empty_list(node.value, ctx):
            return
        target = dotted(node.targets[0])
        if target is None:
            return
        fn = ctx.function or ctx.tree
        grows, first = False, None
        for n in scope_nodes(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in GROW and dotted(n.func.value) == target:
                grows = True
                break
            if isinstance(n, ast.AugAssign) and dotted(n.target) == target:
                grows = True
                break
            if isinstance(n, (ast.Assign, ast.AugAssign)) and n is not node:
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if dotted(t) == target and n.lineno > node.lineno:
                        grows = True  # rebound: another container
                    if isinstance(t, ast.Subscript) and dotted(t.value) == target \
                            and n.lineno > node.lineno and (first is None
                                                            or n.lineno < first.lineno):
                        first = n
        if grows or first is None:
            return
        cls = (ctx.qualified_name(node.value.func) or "ModuleList").rpartition(".")[2]  # type: ignore[attr-defined]
        yield self.report(first, ctx, target=target, cls=cls, line=node.lineno,
                          stmt=ctx.source(first)[:50],
                          related=[Related(ctx.path, node.lineno, "the empty container is "
                                           "made here", ctx.column(node))])
