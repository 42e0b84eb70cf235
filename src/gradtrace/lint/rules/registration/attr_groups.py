"""GT424: parameter groups gathered by attribute name (`.weight`, `.bias`) over a model's
modules miss a Parameter held under another name."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call

MODULE_ITERS = frozenset({"modules", "named_modules"})
# whole reads that see every parameter: the groups are not built from attribute names only
WHOLE = frozenset({"parameters", "named_parameters", "state_dict", "_parameters", "__dict__",
                   "children", "named_children"})
# torch layers whose parameters are not named `weight`/`bias` (the rule's known limits)
OTHER_NAMES = {
    "torch.nn.MultiheadAttention": "in_proj_weight",
    "torch.nn.TransformerEncoderLayer": "in_proj_weight",
    "torch.nn.TransformerDecoderLayer": "in_proj_weight",
    "torch.nn.Transformer": "in_proj_weight",
    "torch.nn.TransformerEncoder": "in_proj_weight",
    "torch.nn.TransformerDecoder": "in_proj_weight",
    "torch.nn.LSTM": "weight_ih_l0", "torch.nn.GRU": "weight_ih_l0", "torch.nn.RNN": "weight_ih_l0",
    "torch.nn.LSTMCell": "weight_ih", "torch.nn.GRUCell": "weight_ih",
    "torch.nn.RNNCell": "weight_ih",
}


def _made_frozen(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Call) and any(
        k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in value.keywords)


def _loop_var(node: ast.For) -> str | None:
    t = node.target
    if isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[1], ast.Name):
        return t.elts[1].id
    return t.id if isinstance(t, ast.Name) else None


def _appended(node: ast.For, var: str) -> tuple[dict[str, set[str]], bool]:
    """``{list: {attr}}`` for ``L.append(var.attr)`` in the loop, and whether the loop reads the
    module another way (``var.parameters()``, ``getattr(var, ...)``, ``var`` passed whole)."""
    out: dict[str, set[str]] = {}
    for n in walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("append", "extend") and len(n.args) == 1:
            a = n.args[0]
            lst = dotted(n.func.value)
            if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) \
                    and a.value.id == var and lst:
                out.setdefault(lst, set()).add(a.attr)
    for n in walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in WHOLE \
                    and isinstance(f.value, ast.Name) and f.value.id == var:
                return out, True
            if isinstance(f, ast.Name) and f.id in ("getattr", "vars") and n.args \
                    and isinstance(n.args[0], ast.Name) and n.args[0].id == var and not (
                        len(n.args) >= 2 and isinstance(n.args[1], ast.Constant)
                        and isinstance(n.args[1].value, str)):
                return out, True  # `getattr(v, name)`: any attribute
            if isinstance(f, ast.Attribute) and f.attr in ("append", "extend", "add") \
                    and any(isinstance(a, ast.Name) and a.id == var for a in n.args):
                return out, True
        if isinstance(n, ast.Attribute) and n.attr in WHOLE and isinstance(n.value, ast.Name) \
                and n.value.id == var:
            return out, True
    return out, False


def _reachable(cls: ClassInfo, ctx: Context) -> list[tuple[ClassInfo | None, ast.Call]]:
    """The file classes and torch layers that ``cls``'s ``__init__`` builds, transitively:
    ``(file class or None, the building call)``."""
    classes = ctx.analysis.classes
    seen: set[str] = set()
    out: list[tuple[ClassInfo | None, ast.Call]] = []
    todo = [cls]
    while todo:
        c = todo.pop()
        for k in c.lineage():
            if k.name in seen:
                continue
            seen.add(k.name)
            init = k.methods.get("__init__")
            if init is None:
                continue
            for n in walk(init):
                if not isinstance(n, ast.Call):
                    continue
                if isinstance(n.func, ast.Name) and n.func.id in classes:
                    sub = classes[n.func.id]
                    if sub.is_module:
                        out.append((sub, n))
                        todo.append(sub)
                elif (ctx.call_name(n) or "") in OTHER_NAMES:
                    out.append((None, n))
    return out


def _own_params(cls: ClassInfo, ctx: Context) -> dict[str, ast.stmt]:
    """Trainable ``nn.Parameter`` attributes ``cls``'s ``__init__`` makes (bases included)."""
    out: dict[str, ast.stmt] = {}
    for c in cls.lineage():
        for name, info in c.attrs.items():
            if name in out or info.later or info.method.name != "__init__":
                continue
            k = c.attr_kind(name)
            if k is not None and k.what == PARAMETER and not _made_frozen(info.value):
                out[name] = info.stmt
    return out


class ParamGroupsByAttributeMissParameter(Rule):
    """Parameter groups gathered by attribute name over a model's modules (`v.weight`,
    `v.bias`) leave out a Parameter held under another name: it gets gradients and never
    changes.

    Why: the YOLOv5-style loop `for k, v in model.named_modules(): ... pg1.append(v.weight)`
    hands the optimizer only the tensors called `weight` and `bias`. A module of the model that
    holds `self.pos_emb = nn.Parameter(...)`, an `nn.MultiheadAttention` or a transformer layer
    (`in_proj_weight`), or a recurrent layer (`weight_ih_l0`) is in no group: its parameters
    get gradients at every step and stay at their initial values, silently (checked on torch
    2.13; multispectral-object-detection#77). Append those attributes too, or gather the groups
    with `v.named_parameters(recurse=False)`.
    Known limits: the model must be a module class of the file (its `__init__` is read, through
    the file's classes it builds); the loop must read the modules only through attribute
    appends; a function that also reads `parameters()`/`named_parameters()` is left alone.
    """

    code = "GT424"
    name = "param-groups-by-attribute-miss-parameter"
    message = ("these parameter groups take only {attrs} of each module of `{model}`, but "
               "`{owner}.{missing}` (line {line}) is a parameter under another name: it is in no "
               "group, gets gradients and never changes")
    triggers = ("modules(",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)
                    self.scale = nn.Parameter(torch.ones(8))
                def forward(self, x):
                    return self.fc(x) * self.scale
            model = Net()
            decay, no_decay = [], []
            for v in model.modules():
                if isinstance(v, nn.Linear):
                    decay.append(v.weight)
                    no_decay.append(v.bias)
            opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4},
                                   {"params": no_decay}], lr=0.1)
            """, at=(16, 0)),
        Good("""
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)
                    self.scale = nn.Parameter(torch.ones(8))
                def forward(self, x):
                    return self.fc(x) * self.scale
            model = Net()
            decay, no_decay = [], []
            for v in model.modules():
                for name, p in v.named_parameters(recurse=False):
                    (decay if name == "weight" else no_decay).append(p)
            opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4},
                                   {"params": no_decay}], lr=0.1)
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in MODULE_ITERS and not it.args):
            return
        model = dotted(it.func.value)
        var = _loop_var(node)
        if model is None or var is None:
            return
        lists, other = _appended(node, var)
        if other or not lists:
            return
        attrs = set().union(*lists.values())
        scope = ctx.scope()
        fn = scope.node
        for n in walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in ("parameters", "named_parameters") and n is not it:
                return
        build = self._optimizer(fn, set(lists), node, ctx)
        if build is None:
            return
        cls = self._model_class(model, node, ctx)
        if cls is None:
            return
        for sub, call in [(cls, None), *_reachable(cls, ctx)]:
            if sub is None:
                q = ctx.call_name(call) or ""
                missing = OTHER_NAMES[q]
                if missing in attrs or (missing.startswith("in_proj") and
                                        "q_proj_weight" in attrs):
                    continue
                owner, where = q.rpartition(".")[2], call
            else:
                params = {a: s for a, s in _own_params(sub, ctx).items() if a not in attrs}
                if not params:
                    continue
                missing, where = next(iter(params.items()))
                owner = sub.name
            yield self.report(build, ctx, related=[Related(
                ctx.path, where.lineno, f"`{missing}` of `{owner}` is made here",
                ctx.column(where))],
                attrs=", ".join(f"`.{a}`" for a in sorted(attrs)), model=cls.name,
                owner=owner, missing=missing, line=where.lineno)
            return

    @staticmethod
    def _optimizer(fn: ast.AST, lists: set[str], loop: ast.For, ctx: Context
                   ) -> ast.stmt | None:
        """The statement after the loop that builds an optimizer from the gathered lists."""
        found = [st for st in walk(fn) if isinstance(st, (ast.Assign, ast.Expr, ast.Return))
                 and st.lineno > loop.lineno and isinstance(st.value, ast.Call)
                 and is_optimizer_call(st.value, ctx) and any(
                     dotted(n) in lists for n in walk(st.value) if isinstance(n, ast.Name))]
        return min(found, key=lambda st: st.lineno, default=None)

    @staticmethod
    def _model_class(model: str, node: ast.AST, ctx: Context) -> ClassInfo | None:
        classes = ctx.analysis.classes
        scope = ctx.scope()
        if model == "self":
            own = ctx.analysis.class_of(scope.node)
            return own if own is not None and own.is_module else None
        if "." in model:
            return None
        k = ctx.analysis.kind(ast.Name(id=model), scope, node.lineno)
        if k is not None and k.what == MODULE and k.cls in classes:
            c = classes[k.cls]  # type: ignore[index]
            return c if c.is_module else None
        return None
