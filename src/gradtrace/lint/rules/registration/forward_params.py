"""GT445: a module makes a new `nn.Parameter` in `forward`, every call."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.facts import TENSOR_FACTORIES
from gradtrace.lint.analysis.local_leaves import kept_local, made_leaf
from gradtrace.lint.analysis.params import PARAMETER_CTORS
from gradtrace.lint.analysis.step_methods import per_step_methods
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration.construction import _forward_methods
from gradtrace.lint.nodes import child_nodes, of_types

# statements under which a construction is conditional (lazy initialisation on first call)
GUARDS = (ast.If, ast.Try, ast.IfExp)


def _unguarded_ctors(m: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context
                     ) -> Iterator[ast.Call]:
    """``nn.Parameter(...)`` calls that run on every call of ``m``: not under an ``if``/``try``
    (lazy initialisation), not in a nested function or lambda."""
    todo: list[ast.AST] = list(m.body)
    while todo:
        n = todo.pop(0)
        if isinstance(n, (*FUNCTION_TYPES, ast.Lambda, ast.ClassDef, *GUARDS)):
            continue
        if isinstance(n, (ast.While, ast.For, ast.AsyncFor)) and n.orelse:
            todo.extend(n.body)  # the else arm is conditional
            todo.append(getattr(n, "iter", None) or n.test)  # type: ignore[attr-defined]
            continue
        if isinstance(n, ast.Call) and (ctx.call_name(n) or "") in PARAMETER_CTORS \
                and not _frozen(n):
            yield n
        if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Attribute) and dotted(t.value) == "self" for t in n.targets) \
                and _grad_leaf(n.value, ctx):
            yield n.value  # type: ignore[misc]
            continue
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Name) and made_leaf(n.value, ctx) \
                and kept_local(n.targets[0].id, n, m, ctx):
            yield n.value  # a local leaf (NOTE [made leaves]): its gradient dies with the call
            continue
        todo.extend(child_nodes(n))


def _frozen(call: ast.Call) -> bool:
    """``Parameter(t, requires_grad=False)``: a constant in a Parameter's clothes (a mask made
    anew on each call), which no optimizer is meant to update."""
    rg = next((k.value for k in call.keywords if k.arg == "requires_grad"),
              call.args[1] if len(call.args) > 1 else None)
    return isinstance(rg, ast.Constant) and rg.value is False


def _grad_leaf(v: ast.expr, ctx: Context) -> bool:
    """``torch.zeros(..., requires_grad=True)`` / ``torch.randn(...).requires_grad_()``: a new
    leaf that requires grad."""
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and v.func.attr == "requires_grad_" and not v.keywords \
            and (not v.args or isinstance(v.args[0], ast.Constant) and v.args[0].value is True):
        v = v.func.value
        return isinstance(v, ast.Call) and (ctx.call_name(v) or "") in TENSOR_FACTORIES
    return isinstance(v, ast.Call) and (ctx.call_name(v) or "") in TENSOR_FACTORIES and any(
        k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in v.keywords)


def _called_under_guard(m: ast.FunctionDef | ast.AsyncFunctionDef,
                        methods: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> bool:
    """``m`` is a helper the forward chain calls (``self.add_key(...)``) only under an
    ``if``/``try`` of the calling method: what it builds is built conditionally, as a lazy
    initialisation in ``forward`` itself is (GRACE's codebook grows a key when no stored key
    is close; its editor builds the optimizer after that first call)."""
    if m.name == "forward":
        return False
    calls = [guarded for c in methods if c is not m for guarded in _self_calls(c.body, m.name)]
    return bool(calls) and all(calls)


def _self_calls(body: list, name: str, guarded: bool = False) -> Iterator[bool]:
    """For each ``self.<name>(...)`` in ``body`` (not in nested functions): under a guard?"""
    for n in body:
        if isinstance(n, (*FUNCTION_TYPES, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == name and dotted(n.func.value) == "self":
            yield guarded
        inner = guarded or isinstance(n, GUARDS)
        if isinstance(n, (ast.If, ast.IfExp)):
            yield from _self_calls([n.test], name, guarded)  # the test itself always runs
            yield from _self_calls([x for x in child_nodes(n) if x is not n.test], name, True)
            continue
        yield from _self_calls(list(child_nodes(n)), name, inner)


def _differentiates(call: ast.Call, ctx: Context) -> bool:
    """``cost.backward()`` or ``torch.autograd.grad(...)``: the call differentiates there."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "backward" \
        or ctx.call_name(call) == "torch.autograd.grad"


def _wrapped(call: ast.Call) -> ast.expr | None:
    return call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "data"), None)


class ParameterBuiltInForward(Rule):
    """A module builds a new `nn.Parameter` in `forward` (or a method `forward` calls), on
    every call.

    Why: `nn.Parameter(t)` makes a new leaf tensor. Built in `forward`, it is a different
    object at each call: the optimizer, built once over `model.parameters()`, holds the
    object of an earlier call (or none), so the one that receives the gradient is never
    stepped, and the next call replaces it again. When `t` is drawn at random the value is
    re-drawn every call and never trained (leaderj1001/Stand-Alone-Self-Attention#2); when
    `t` is computed (`nn.Parameter(self.gru(w)[0])`) the new leaf also cuts what computed
    it out of the graph, so those layers never get a gradient
    (pytorch_geometric_temporal#80; checked on torch 2.13). Create parameters once in
    `__init__` and only read them in `forward`; a computed weight stays a plain tensor
    (`F.linear(x, w)`) or goes through `torch.func.functional_call`.
    A method the training loop calls on the model at every step (`model.set_weights()` next
    to `backward()`: NOTE [per-step methods]) is the same as `forward`.
    A tensor made there with `requires_grad=True` and stored on `self` (`self.h0 =
    torch.zeros(n, requires_grad=True)`) is the same: a new leaf no optimizer holds; so is
    one kept in a local that never leaves the call (`w = make(torch.rand(5),
    requires_grad=True)` weighting the loss: HiMol#3; NOTE [made leaves]).
    Known limits: the class must be of this file and the file must train (build an optimizer
    or call `backward()`); a construction under an `if`/`try` (lazy initialisation on the first
    call) is left alone, and so is a module whose `forward` calls build an optimizer
    themselves (an explainer that trains its masks inside the call, after making them) or
    differentiate there (an attack that steps the Parameter it made by hand).
    """

    code = "GT445"
    needs_step = True  # NOTE [step files]
    gate_statements = True  # a class that defines `forward` holds the word
    name = "parameter-built-in-forward"
    message = ("`{call}` builds a new {what} on every call of `{method}`{how}: the "
               "optimizer holds an earlier object (or none), so this one is never updated; "
               "create it once in `__init__`{advice}")
    triggers = ("forward",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Bias(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.fc = nn.Linear(d, d)
                    self.d = d
                def forward(self, x):
                    self.b = nn.Parameter(torch.zeros(self.d))
                    return self.fc(x) + self.b
            model = Bias(4)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """, at=(9, 17)),
        Bad("""
            import torch
            from torch.nn import Parameter
            class Evolve(torch.nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.lin = torch.nn.Linear(d, d)
                    self.rnn = torch.nn.GRUCell(d, d)
                def forward(self, x):
                    w = self.rnn(self.lin.weight, self.lin.weight)
                    self.lin.weight = Parameter(w)
                    return self.lin(x)
            def train(model, x):
                model(x).sum().backward()
            """, at=(10, 26)),
        Good("""
            import torch
            import torch.nn as nn
            class LazyBias(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.b = None
                def forward(self, x):
                    if self.b is None:
                        self.b = nn.Parameter(torch.zeros(x.shape[-1]))
                    return x + self.b
                def reset(self, d):
                    self.b = nn.Parameter(torch.zeros(d))
            model = LazyBias()
            model(torch.zeros(2, 3))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """),
        Good("""
            import torch
            import torch.nn as nn
            class MaskExplainer(nn.Module):
                def forward(self, model, x):
                    self.mask = nn.Parameter(torch.ones(x.shape[-1]))
                    return self.fit(model, x)
                def fit(self, model, x):
                    opt = torch.optim.Adam(self.parameters(), lr=0.01)
                    for _ in range(10):
                        opt.zero_grad()
                        model(x * self.mask).sum().backward()
                        opt.step()
                    return self.mask.detach()
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions("optim", ".backward(") or not ctx.mentions("Parameter",
                                                                         "requires_grad"):
            return
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node or not cls.is_module:
            return
        methods = _forward_methods(cls)
        methods += [m for m in per_step_methods(ctx, cls) if m not in methods]
        if any((ctx.call_name(n) or "").startswith("torch.optim.") or _differentiates(n, ctx)
               for m in methods for n in of_types(m, (ast.Call,))):
            return  # the module trains itself in the call, its optimizer built after them,
            # or differentiates and updates what it made by hand (an attack's `forward`
            # makes `nn.Parameter(images)`, backwards its cost and steps it under no_grad)
        for m in methods:
            ctors = sorted(_unguarded_ctors(m, ctx), key=lambda c: (c.lineno, c.col_offset))
            if not ctors or _called_under_guard(m, methods):
                continue
            first = ctors[0]
            arg = _wrapped(first)
            computed = arg is not None and not (
                isinstance(arg, ast.Call) and (ctx.call_name(arg) or "") in TENSOR_FACTORIES) \
                and not isinstance(arg, ast.Constant)
            how = (f", around `{ctx.source(arg)}`, a new leaf that also cuts what computed it "
                   "from the graph") if computed else ""
            advice = " and use the computed tensor itself (not a Parameter)" if computed else ""
            rel = [Related(ctx.path, c.lineno, "another Parameter is built here on each call",
                           ctx.column(c)) for c in ctors[1:]]
            param = (ctx.call_name(first) or "") in PARAMETER_CTORS
            if not param:
                how, advice = "", ""
            yield self.report(first, ctx, related=rel, call=ctx.source(first.func) + "(...)",
                              method=m.name, how=how, advice=advice,
                              what="Parameter" if param else "leaf tensor that requires grad")
