"""GT529: a setting written into the dict `state_dict()` returns, a copy that nothing reads."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.training_loop._base import related_at


def _state_dict_call(e: ast.expr) -> ast.Call | None:
    """The ``x.state_dict()`` call at the bottom of ``x.state_dict()[k1][k2]...`` (or ``e``
    itself), None when ``e`` is not such a chain."""
    while isinstance(e, ast.Subscript):
        e = e.value
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "state_dict" and not e.args and not e.keywords:
        return e
    return None


def _key_write(target: ast.expr) -> bool:
    """``...['lr']``: a write of a string key, i.e. into a dict, not into a tensor's items."""
    return isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
        and isinstance(target.slice.value, str)


class WriteIntoStateDictCopy(Rule):
    """A key is written into the dict that `state_dict()` returns; the object is unchanged.

    Why: `optimizer.state_dict()` builds new dicts for its `param_groups` on every call, and
    `module.state_dict()` a new mapping of names to tensors: they are made to be saved. Writing
    `['lr']` into one of its groups, or a new entry into it, changes that copy only; the
    optimizer keeps stepping with the old learning rate (pytorch/examples#64), the module keeps
    its tensors. Nothing fails. Write into `optimizer.param_groups` (`for g in
    optimizer.param_groups: g['lr'] = lr`), or change a saved copy and hand it back with
    `load_state_dict`.
    Known limits: only writes made through the call itself (`opt.state_dict()[...][...] = v`,
    or a loop over `opt.state_dict()[...]` writing into its items); a copy bound to a name is
    left alone (it is usually loaded back). Item writes into a tensor of a module's state dict
    (`model.state_dict()['w'][0] = 0`) do reach the module and are not reported.
    """

    code = "GT529"
    name = "write-into-state-dict-copy"
    severity = "warning"
    message = ("`{what}` writes into the copy `{call}` returns: {owner} itself is unchanged, and "
               "nothing reads the copy; write into {into}")
    triggers = ("state_dict()",)
    # Each visitor reports only a statement that holds the ``x.state_dict()`` call itself (an
    # assignment target, an augmented target, a ``for`` loop's iterable: ``_state_dict_call``),
    # so its lines spell ``state_dict``: the engine may skip every other statement (ungated,
    # the ``visit_Assign`` made a file mentioning ``state_dict()`` walk every statement).
    gate_statements = True
    statement_triggers = ("state_dict",)
    examples = [
        Bad("""
            def adjust_learning_rate(optimizer, epoch, base_lr):
                for group in optimizer.state_dict()["param_groups"]:
                    group["lr"] = base_lr * 0.1 ** (epoch // 30)
            """, at=(2, 4)),
        Good("""
            def adjust_learning_rate(optimizer, epoch, base_lr):
                for group in optimizer.param_groups:
                    group["lr"] = base_lr * 0.1 ** (epoch // 30)
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        call = _state_dict_call(node.iter)
        if call is None or call is node.iter or not isinstance(node.target, ast.Name):
            return
        var = node.target.id
        for st in bfs_walk(node):
            targets = st.targets if isinstance(st, ast.Assign) else \
                [st.target] if isinstance(st, ast.AugAssign) else []
            for t in targets:
                if _key_write(t) and isinstance(t.value, ast.Name) and t.value.id == var:
                    yield self._report(node, t, call, ctx, related=(
                        related_at(ctx, st, f"`{ctx.source(t)}` is written here"),))
                    return

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        for t in node.targets:
            call = _state_dict_call(t)
            if call is not None and _key_write(t):
                yield self._report(node, t, call, ctx)
                return

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> Iterator[Finding]:
        call = _state_dict_call(node.target)
        if call is not None and _key_write(node.target):
            yield self._report(node, node.target, call, ctx)

    def _report(self, node: ast.stmt, target: ast.expr, call: ast.Call, ctx: Context,
                related: tuple = ()) -> Finding:
        assert isinstance(call.func, ast.Attribute)
        owner = ctx.source(call.func.value)
        group = ctx.source(node.iter) if isinstance(node, ast.For) else ""
        optimizer = "param_groups" in group or "param_groups" in ctx.source(target)
        return self.report(node, ctx, related=related, what=ctx.source(target)[:60],
                           call=ctx.source(call), owner=f"`{owner}`",
                           into=f"`{owner}.param_groups`" if optimizer else
                           f"a saved copy and pass it to `{owner}.load_state_dict`")
