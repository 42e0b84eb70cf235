"""GT471: a param group carries a number under a key that torch.optim and the file never read."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import scope_nodes
from gradtrace.lint.rule import Bad, Good, Rule

# every key a torch.optim optimizer keeps in a param group (the union of their `defaults`,
# read from torch 2.13, `tests/lint/test_static24b.py` checks it), plus the keys torch's
# schedulers and `add_param_group` write: a group key outside it is read by no torch code
OPTIM_GROUP_KEYS = frozenset({
    "params", "param_names", "initial_lr", "lr", "weight_decay", "momentum", "dampening",
    "nesterov", "maximize", "foreach", "differentiable", "fused", "capturable", "betas", "eps",
    "amsgrad", "alpha", "centered", "lr_decay", "initial_accumulator_value", "rho", "lambd",
    "t0", "etas", "step_sizes", "max_iter", "max_eval", "tolerance_grad", "tolerance_change",
    "history_size", "line_search_fn", "momentum_decay", "decoupled_weight_decay", "d",
    "beta2_decay", "ns_coefficients", "ns_steps", "adjust_lr_fn",
})


def _is_torch_optimizer(call: ast.Call, ctx: Context) -> bool:
    """``torch.optim.SGD(...)`` or ``getattr(torch.optim, name)(...)``."""
    f = call.func
    if isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == "getattr" \
            and f.args and ctx.qualified_name(f.args[0]) == "torch.optim":
        return True
    q = ctx.qualified_name(f) or ""
    return q.startswith("torch.optim.") and q.count(".") == 2 and q[12:13].isupper()


def _float_valued(e: ast.expr, fn: ast.AST) -> bool:
    """A float constant, or a local name every assignment of which is one."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, float)
    if isinstance(e, ast.UnaryOp):
        return _float_valued(e.operand, fn)
    if isinstance(e, ast.Name):
        values = [n.value for n in scope_nodes(fn) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == e.id for t in n.targets)]
        written = any(isinstance(n, (ast.For, ast.AugAssign, ast.AnnAssign, ast.With))
                      and any(isinstance(t, ast.Name) and t.id == e.id
                              for t in ast.walk(getattr(n, "target", None) or n))
                      for n in scope_nodes(fn) if not isinstance(n, ast.Assign))
        return bool(values) and not written and all(
            isinstance(v, ast.Constant) and isinstance(v.value, float) for v in values)
    return False


def _group_dicts(groups: ast.expr, fn: ast.AST) -> list[ast.Dict]:
    """The dict literals making up the optimizer's first argument: a list literal, or the
    list literals and ``append``/``extend`` of the local name holding them."""
    if isinstance(groups, (ast.List, ast.Tuple)):
        return [e for e in groups.elts if isinstance(e, ast.Dict)]
    if not isinstance(groups, ast.Name):
        return []
    name, out = groups.id, []
    for n in scope_nodes(fn):
        got: ast.expr | None = None
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                             for t in n.targets):
            got = n.value
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) \
                and n.target.id == name:
            got = n.value
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == name \
                and n.func.attr in ("append", "extend") and n.args:
            got = n.args[0]
            if n.func.attr == "append":
                got = ast.List(elts=[got], ctx=ast.Load())
        if isinstance(got, (ast.List, ast.Tuple)):
            out += [e for e in got.elts if isinstance(e, ast.Dict)]
    return out


def _params_dict(d: ast.Dict) -> bool:
    return any(isinstance(k, ast.Constant) and k.value == "params" for k in d.keys)


def _string_uses(ctx: Context) -> dict[str, int]:
    """How often each string constant appears in the file outside the keys of param-group
    dicts (a read: ``g["lr_mult"]``, ``g.get("lr_mult")``, a comparison)."""
    def make() -> dict[str, int]:
        keys: set[int] = set()
        out: dict[str, int] = {}
        for n in ast.walk(ctx.tree):
            if isinstance(n, ast.Dict) and _params_dict(n):
                keys.update(id(k) for k in n.keys if k is not None)
        for n in ast.walk(ctx.tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in keys:
                out[n.value] = out.get(n.value, 0) + 1
        return out
    return ctx.memo("gt471-strings", ctx.tree, make)


def _escapes(call: ast.Call, fn: ast.AST, ctx: Context) -> bool:
    """Whether the optimizer made by ``call`` may reach code of another file: it is kept on an
    object, handed to a call, or returned by a function whose callers do either (or that the
    file never calls)."""
    names: set[str] = set()
    returned = False
    for n in scope_nodes(fn):
        if isinstance(n, ast.Assign) and n.value is call:
            if not all(isinstance(t, ast.Name) for t in n.targets):
                return True
            names.update(t.id for t in n.targets)  # type: ignore[attr-defined]
        elif isinstance(n, ast.Return) and n.value is call:
            returned = True
    for n in scope_nodes(fn):
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Name) and n.value.id in names:
            returned = True
    if returned:
        fname = getattr(fn, "name", None)
        if fname is None:
            return True
        sites = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Call) and isinstance(n.value.func, (ast.Name, ast.Attribute))
                 and (getattr(n.value.func, "id", None) or getattr(n.value.func, "attr", None)) == fname]
        if not sites or any(not all(isinstance(t, ast.Name) for t in s.targets) for s in sites):
            return True
        names.update(t.id for s in sites for t in s.targets)  # type: ignore[attr-defined]
    elif not names:
        return True
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Call) and n is not call and any(
                isinstance(x, ast.Name) and x.id in names
                for x in [*n.args, *(k.value for k in n.keywords)]):
            return True
    return False


class ParamGroupKeyNeverRead(Rule):
    """A param group holds a number under a key (`"lr_mul": 0.1`) that torch.optim ignores
    and nothing in the file reads: the intended per-group setting is never applied.

    Why: an optimizer keeps every key of a param-group dict, but its `step()` reads only its
    own options (`lr`, `weight_decay`, `momentum`, `betas`, ...). A multiplier such as
    `lr_mul`/`lr_mult`/`decay_mult` only works if code reads it back
    (`g["lr"] = base_lr * g["lr_mul"]` in a scheduler); without that, every group trains with
    the optimizer's default (verified on torch 2.13: a group with `"lr_mul": 0.1` keeps
    `lr=0.01` and moves as far as the others). Put the value in `lr` itself
    (`{"params": p, "lr": base_lr * 0.1}`), or read the key where the learning rate is set.
    Known limits: the groups are dict literals in the optimizer's argument or in the local
    list handed to it (`append`, `+=`); the value is a float (a constant, or a local name
    only ever given float constants); the optimizer is stepped in this file and handed to no
    other code (a scheduler of another file may read the key), and no string constant of the
    file repeats the key.
    """

    code = "GT471"
    name = "param-group-key-never-read"
    message = ("torch.optim never reads the param-group key `{key}` and nothing in this file "
               "does: this group trains with the optimizer's default; set `lr`/`weight_decay` "
               "of the group instead")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            groups = [{"params": model.backbone.parameters(), "lr_scale": 0.1},
                      {"params": model.head.parameters()}]
            opt = torch.optim.SGD(groups, lr=0.01)
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
            """, at=(2, 10)),
        Good("""
            import torch
            groups = [{"params": model.backbone.parameters(), "lr_scale": 0.1},
                      {"params": model.head.parameters(), "lr_scale": 1.0}]
            opt = torch.optim.SGD(groups, lr=0.01)
            for g in opt.param_groups:
                g["lr"] = 0.01 * g["lr_scale"]
            """),
        Good("""
            import torch
            groups = [{"params": model.backbone.parameters(), "lr": 0.001},
                      {"params": model.head.parameters(), "name": "head"}]
            opt = torch.optim.SGD(groups, lr=0.01)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not node.args and not any(k.arg == "params" for k in node.keywords):
            return
        if not _is_torch_optimizer(node, ctx):
            return
        groups = node.args[0] if node.args else next(
            k.value for k in node.keywords if k.arg == "params")
        fn = ctx.function or ctx.tree
        found: list[tuple[ast.Dict, str]] = []
        for d in _group_dicts(groups, fn):
            if not _params_dict(d):
                continue
            for k, v in zip(d.keys, d.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) \
                        and k.value not in OPTIM_GROUP_KEYS and _float_valued(v, fn) \
                        and not _string_uses(ctx).get(k.value):
                    found.append((d, k.value))
                    break
        if not found or _escapes(node, fn, ctx):
            return
        d, key = found[0]
        yield self.report(d, ctx, key=key)
