"""GT425: parts taken out of the "rest" group by id and given to no other group."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call

PARAM_ITERS = ("parameters", "named_parameters")
# what, done to a part elsewhere in the file, says it is handled on purpose (another optimizer,
# a freeze, a load)
HANDLED = frozenset({"parameters", "named_parameters", "requires_grad_", "eval",
                     "load_state_dict", "apply", "train"})


def _id_parts(e: ast.AST) -> list[tuple[str, ast.AST]] | None:
    """``[(receiver, call)]`` for an id collection: ``set(map(id, A.parameters())) | ...``,
    ``list(map(id, A.parameters())) + ...``, ``{id(p) for p in A.parameters()}``; None when a
    term is anything else."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitOr, ast.Add)):
        left, right = _id_parts(e.left), _id_parts(e.right)
        return None if left is None or right is None else left + right
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) \
            and e.func.id in ("set", "list", "frozenset") and len(e.args) == 1:
        return _id_parts(e.args[0])
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "map" \
            and len(e.args) == 2 and isinstance(e.args[0], ast.Name) and e.args[0].id == "id":
        return _param_recv(e.args[1])
    if isinstance(e, (ast.SetComp, ast.ListComp)) and len(e.generators) == 1:
        g = e.generators[0]
        if isinstance(e.elt, ast.Call) and isinstance(e.elt.func, ast.Name) \
                and e.elt.func.id == "id" and isinstance(g.target, ast.Name) \
                and len(e.elt.args) == 1 and isinstance(e.elt.args[0], ast.Name) \
                and e.elt.args[0].id == g.target.id and not g.ifs:
            return _param_recv(g.iter)
    return None


def _param_recv(e: ast.AST) -> list[tuple[str, ast.AST]] | None:
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "parameters" and not e.args:
        r = dotted(e.func.value)
        if r:
            return [(r, e)]
    return None


def _rest_of(e: ast.AST, ids: str) -> str | None:
    """The whole model of ``[p for p in M.parameters() if id(p) not in ids]`` or
    ``filter(lambda p: id(p) not in ids, M.parameters())``."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "list" \
            and len(e.args) == 1:
        e = e.args[0]
    src: ast.AST | None = None
    test: ast.AST | None = None
    if isinstance(e, ast.ListComp) and len(e.generators) == 1 and len(e.generators[0].ifs) == 1:
        src, test = e.generators[0].iter, e.generators[0].ifs[0]
    elif isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "filter" \
            and len(e.args) == 2 and isinstance(e.args[0], ast.Lambda):
        src, test = e.args[1], e.args[0].body
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.NotIn) and dotted(test.comparators[0]) == ids
            and isinstance(test.left, ast.Call) and isinstance(test.left.func, ast.Name)
            and test.left.func.id == "id"):
        return None
    parts = _param_recv(src) if src is not None else None
    return parts[0][0] if parts else None


class ExcludedPartInNoGroup(Rule):
    """A part taken out of the "rest of the model" group by `id` is given to no other group:
    its parameters get gradients and never change.

    Why: the fine-tuning split `ignored = set(map(id, model.base.parameters())) | set(map(id,
    model.feat.parameters()))`, `rest = [p for p in model.parameters() if id(p) not in
    ignored]`, `SGD([{'params': model.base.parameters(), 'lr': 0.01}, {'params': rest}])`
    leaves `model.feat` out of both groups: it is excluded from `rest` and listed nowhere
    else, so it is trained by the loss and never stepped (HHL's `base_param_ids`; checked on
    torch 2.13). List every excluded part in a group of its own, or exclude only the parts
    that are listed.
    Known limits: the id collection, the rest and the groups must be in one function; a part
    on which the file calls `parameters()` elsewhere (another optimizer), `requires_grad_`,
    `eval()` or `load_state_dict` is taken as handled.
    """

    code = "GT425"
    name = "excluded-part-in-no-group"
    message = ("`{rest}` leaves out the parameters of `{part}` (excluded by id on line {line}), "
               "and no group of this optimizer holds them: they get gradients and never change")
    triggers = ("map(id", "id(p")
    examples = [
        Bad("""
            import torch
            base_ids = set(map(id, model.backbone.parameters())) | set(map(id, model.neck.parameters()))
            rest = [p for p in model.parameters() if id(p) not in base_ids]
            opt = torch.optim.SGD([
                {"params": model.backbone.parameters(), "lr": 0.01},
                {"params": rest}], lr=0.1)
            """, at=(6, 4)),
        Good("""
            import torch
            base_ids = set(map(id, model.backbone.parameters())) | set(map(id, model.neck.parameters()))
            rest = [p for p in model.parameters() if id(p) not in base_ids]
            opt = torch.optim.SGD([
                {"params": model.backbone.parameters(), "lr": 0.01},
                {"params": model.neck.parameters(), "lr": 0.01},
                {"params": rest}], lr=0.1)
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return
        parts = _id_parts(node.value)
        if not parts:
            return
        ids = node.targets[0].id
        scope = ctx.scope()
        fn = scope.node
        rest = min((st for st in walk(fn) if isinstance(st, ast.Assign) and len(st.targets) == 1
                    and isinstance(st.targets[0], ast.Name) and st.lineno > node.lineno
                    and _rest_of(st.value, ids)), key=lambda st: st.lineno, default=None)
        if rest is None:
            return
        rest_name = rest.targets[0].id  # type: ignore[attr-defined]
        group = self._group_of(fn, rest_name, rest.lineno, ctx)
        if group is None:
            return
        elem, holder = group
        given = {dotted(n.func.value) for n in walk(holder) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr in PARAM_ITERS}
        given |= {dotted(n) for n in walk(holder) if isinstance(n, (ast.Name, ast.Attribute))}
        mine = {id(c) for _, c in parts}
        for part, _ in parts:
            if part in given or self._handled(part, mine, ctx):
                continue
            yield self.report(elem, ctx, related=[Related(
                ctx.path, node.lineno, f"`{part}` is excluded here", ctx.column(node))],
                rest=rest_name, part=part, line=node.lineno)
            return

    @staticmethod
    def _group_of(fn: ast.AST, rest: str, after: int, ctx: Context
                  ) -> tuple[ast.AST, ast.AST] | None:
        """The group element that holds ``rest`` (a dict of a list literal, or the list) and
        the expression holding every group (the list; the optimizer call when ``rest`` is
        passed directly), when an optimizer of the function is built from it."""
        lists: dict[str, ast.List] = {}
        for st in sorted((n for n in walk(fn) if isinstance(n, (ast.Assign, ast.Return, ast.Expr))),
                         key=lambda n: n.lineno):
            if st.lineno <= after:
                continue
            if isinstance(st, ast.Assign) and isinstance(st.value, ast.List) \
                    and len(st.targets) == 1 \
                    and isinstance(st.targets[0], ast.Name):
                lists[st.targets[0].id] = st.value
            call = st.value
            if not (isinstance(call, ast.Call) and is_optimizer_call(call, ctx) and call.args):
                continue
            first = call.args[0]
            if isinstance(first, ast.Name) and first.id in lists:
                first = lists[first.id]
            if not isinstance(first, ast.List):
                continue
            for e in first.elts:
                if isinstance(e, ast.Dict) and any(
                        isinstance(k, ast.Constant) and k.value == "params"
                        and dotted(v) == rest for k, v in zip(e.keys, e.values)):
                    return e, first
        return None

    @staticmethod
    def _handled(part: str, mine: set[int], ctx: Context) -> bool:
        last = part.rpartition(".")[2]
        for n in walk(ctx.tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in HANDLED and id(n) not in mine \
                    and (dotted(n.func.value) or "").rpartition(".")[2] == last:
                return True
            if isinstance(n, ast.Attribute) and n.attr == "requires_grad" \
                    and (dotted(n.value) or "").rpartition(".")[2] == last:
                return True
        return False
