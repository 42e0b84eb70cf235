"""GT415-GT416: assignments `nn.Module.__setattr__` rejects (raised outside autograd).

# NOTE [rejected assignments]
``Module.__setattr__`` refuses two things the code shows in one statement: a value that is not
an ``nn.Parameter`` (nor None) assigned to a name registered as a parameter (``TypeError:
cannot assign 'torch.FloatTensor' as parameter 'w'``; ``register_parameter`` says the same),
and a submodule or parameter assigned before ``super().__init__()`` made the registries
(``AttributeError: cannot assign module before Module.__init__() call``). A plain value assigned
before it is fine. "Not a Parameter" is decided from the value's code only: arithmetic, a
function of the torch namespace, a tensor method known to return a new tensor, ``.data``, a
number, or a value the analysis layer knows is a plain tensor (``torch.zeros(...)``, through
the file's helpers). ``.to()``/``.float()``/``.contiguous()``/``.flatten()`` may return the
Parameter itself and are never taken as plain.
"""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER, TENSOR
from gradtrace.lint.analysis.modules import DEFS
from gradtrace.lint.analysis.settings import exclusive_flags
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rules.registration._raw_copies import raw_copy_setattr

# tensor methods that always return a new tensor object (never the Parameter itself)
NEW_TENSOR_METHODS = frozenset({
    "softmax", "log_softmax", "sigmoid", "tanh", "relu", "exp", "log", "abs", "neg", "sqrt",
    "rsqrt", "pow", "clamp", "clip", "sum", "mean", "mul", "div", "add", "sub", "matmul",
    "mm", "view", "reshape", "squeeze", "unsqueeze", "transpose", "t", "permute", "expand",
    "repeat", "clone", "detach", "norm", "cumsum", "softplus", "transpose", "narrow",
    "index_select", "masked_fill", "where",
})
# namespaces whose lowercase functions return tensors (never a Parameter)
TENSOR_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.linalg", "torch.special",
                               "torch.fft"})
MAY_RETURN_INPUT = frozenset({"flatten", "atleast_1d", "atleast_2d", "atleast_3d",
                              "ravel", "squeeze", "broadcast_to"})
# moves that return the tensor itself when it is already there (a Parameter stays a Parameter)
SAME_OBJECT_MOVES = frozenset({"to", "float", "type", "contiguous", "cpu", "requires_grad_"})
REGISTRY_CALLS = frozenset({"register_buffer", "register_parameter", "add_module",
                            "register_module"})
_BEFORE = " before Module.__init__() call"
ERRORS = {"module": "cannot assign module" + _BEFORE,
          "parameters": "cannot assign parameters" + _BEFORE,
          "register_buffer": "cannot assign buffer" + _BEFORE,
          "register_parameter": "cannot assign parameter" + _BEFORE}


def plain_value(e: ast.AST, ctx: Context, where: ast.AST, params: frozenset[str] = frozenset(),
                depth: int = 0) -> bool:
    """Whether ``e`` is surely not an ``nn.Parameter`` nor None; ``params``: the ``self``
    attributes known to be tensors. See NOTE [rejected assignments]."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    if isinstance(e, ast.BinOp):
        return any(_tensorish(x, ctx, where, params) for x in (e.left, e.right))
    if isinstance(e, ast.Attribute) and e.attr == "data":
        return _tensorish(e.value, ctx, where, params)
    if isinstance(e, ast.Call):
        f = e.func
        q = ctx.call_name(e) or ""
        space, _, last = q.rpartition(".")
        if space in TENSOR_NAMESPACES and last[:1].islower() and last not in MAY_RETURN_INPUT \
                and not last.endswith("_") and e.args:
            return True
        if isinstance(f, ast.Attribute) and f.attr in NEW_TENSOR_METHODS and \
                not q.startswith("torch.") and _tensorish(f.value, ctx, where, params):
            return True
        fn = ctx.analysis.callee(e, where)
        if fn is not None and depth < 2:
            rets = [r.value for r in bfs_walk(fn) if isinstance(r, ast.Return)]
            if rets and all(r is not None and plain_value(r, ctx, fn, depth=depth + 1)
                            for r in rets):
                return True  # a helper of the file whose every return is plain
    k = ctx.analysis.kind_in(e, where, getattr(e, "lineno", 0))
    return k is not None and k.what == TENSOR


def _tensorish(e: ast.AST, ctx: Context, where: ast.AST, params: frozenset[str]) -> bool:
    """``e`` is a tensor: a registered parameter of the class, or a plain tensor value."""
    d = dotted(e)
    if d is not None and d.startswith("self.") and d[5:] in params:
        return True
    return plain_value(e, ctx, where, params)


def _registry_tampered(cls: ast.ClassDef) -> bool:
    """The class edits its registries by hand, deletes attributes or defines
    ``__setattr__`` (weight-norm style re-parametrisations): assignments are its business."""
    for n in bfs_walk(cls):
        if isinstance(n, ast.Delete) or isinstance(n, DEFS) and n.name == "__setattr__":
            return True
        if isinstance(n, ast.Attribute) and n.attr in ("_parameters", "_modules"):
            return True
        if isinstance(n, ast.Name) and n.id in ("setattr", "delattr"):
            return True
    return False


def unmoved(value: ast.Call) -> ast.Call:
    """``nn.Parameter(t)`` for ``nn.Parameter(t).to(**kw)`` / ``.float()`` / ``.cpu()``: a move
    to where the tensor already is (CPU, its own dtype) returns the Parameter itself, which the
    module then registers (NOTE [rejected assignments]); the value itself otherwise."""
    e = value
    while isinstance(e.func, ast.Attribute) and e.func.attr in SAME_OBJECT_MOVES \
            and isinstance(e.func.value, ast.Call):
        e = e.func.value
    return e


def _registered_params(init: ast.FunctionDef | ast.AsyncFunctionDef | None, ctx: Context
                       ) -> dict[str, list[ast.stmt]]:
    """Attributes ``__init__`` registers as parameters (``self.w = nn.Parameter(...)``,
    ``self.register_parameter("w", nn.Parameter(...))``), with every such statement in order
    (one per branch of an ``if``/``else`` that builds it differently)."""
    out: dict[str, list[ast.stmt]] = {}
    if init is None:
        return out
    for s in _early_statements(init.body):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and \
                isinstance(s.value, ast.Call):
            t = s.targets[0]
            call = unmoved(s.value)
            f = call.func
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                    t.value.id == "self" and \
                    (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) \
                    == "Parameter" and ctx.call_name(call) == "torch.nn.Parameter":
                out.setdefault(t.attr, []).append(s)
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            c = s.value
            if isinstance(c.func, ast.Attribute) and c.func.attr == "register_parameter" and \
                    dotted(c.func.value) == "self" and len(c.args) == 2 and \
                    isinstance(c.args[0], ast.Constant) and \
                    isinstance(c.args[0].value, str):
                k = ctx.analysis.kind_in(c.args[1], init, c.lineno)
                if k is not None and k.what == PARAMETER:
                    out.setdefault(c.args[0].value, []).append(s)
    return out


class PlainValueOverParameter(Rule):
    """A plain tensor (or number) is assigned where a module registered an `nn.Parameter`, or
    handed to `register_parameter`.

    Why: `nn.Module.__setattr__` accepts only an `nn.Parameter` or None for a name registered
    as a parameter, and `register_parameter` only those two: `self.w = F.softmax(self.w,
    dim=0)` raises `TypeError: cannot assign 'torch.FloatTensor' as parameter 'w'
    (torch.nn.Parameter or None expected)`, at the first forward (pytorch/pytorch#44022), and
    `register_parameter('w', torch.zeros(3))` raises when the model is built. Keep the
    computed value in a local (`w = F.softmax(self.w, dim=0)`), or wrap the tensor:
    `nn.Parameter(t)`.
    Known limits: the value must surely not be a Parameter (arithmetic, a torch function, a
    tensor method that returns a new tensor, `.data`, a tensor factory, a helper of the file
    returning one); a class that deletes attributes, edits `_parameters` or defines
    `__setattr__` is left alone. A weight-drop wrapper that copies each weight to
    `name + '_raw'` without deleting `name`, then `setattr(m, name, F.dropout(raw))`, is
    reported at the copy (NOTE [raw copy left registered]).
    """

    code = "GT415"
    name = "plain-value-over-parameter"
    gate_statements = True
    message = ("{what}: `nn.Module` accepts only an `nn.Parameter` or None there and raises "
               "`TypeError` ({why}); {remedy}")
    triggers = ("Parameter", "register_parameter")
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Mix(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.weights = nn.Parameter(torch.ones(n))
                def forward(self, layers):
                    self.weights = F.softmax(self.weights, dim=0)
                    return sum(w * h for w, h in zip(self.weights, layers))
            """, at=(9, 8)),
        Bad("""
            import torch
            import torch.nn as nn
            class DCT(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.register_parameter("weight", self.make_filter(n))
                def make_filter(self, n):
                    f = torch.zeros(n, n)
                    return f
            """, at=(6, 8)),
        Good("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Mix(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.weights = nn.Parameter(torch.ones(n))
                    self.register_parameter("bias", nn.Parameter(torch.zeros(n)))
                def forward(self, layers):
                    weights = F.softmax(self.weights, dim=0)
                    self.weights = nn.Parameter(self.weights.to(layers[0].device))
                    return sum(w * h for w, h in zip(weights, layers))
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        code = "\n".join(ctx.code_lines[node.lineno - 1:node.end_lineno])  # (no re-tokenizing)
        init = next((m for m in node.body if isinstance(m, DEFS) and m.name == "__init__"),
                    None)
        registered = _registered_params(init, ctx) if init is not None and \
            "Parameter" in code else {}
        if "register_parameter" not in code and not any(
                len(re.findall(r"self\.%s\s*=[^=]" % re.escape(n), code)) > 1
                for n in registered):
            return  # no parameter assigned twice, nothing handed to register_parameter
        info = ctx.analysis.classes.get(node.name)
        if info is None or not info.is_module or info.node is not node:
            return
        tampered: bool | None = None
        for m in info.methods.values():
            for s in bfs_walk(m):
                if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                    yield from self._register_call(s.value, m, ctx, node)
                    continue
                if not isinstance(s, ast.Assign) or len(s.targets) != 1:
                    continue
                t = s.targets[0]
                if not (isinstance(t, ast.Attribute) and dotted(t.value) == "self"):
                    continue
                reg = next((r for r in registered.get(t.attr, ()) if r is not s and not (
                    m.name == "__init__" and (s.lineno <= r.lineno or ctx.scope(m).exclusive(
                        r, s)) or m.name != "__init__" and init is not None and exclusive_flags(
                        node, r, init, s, m))), None)  # a registration on the way to ``s``
                if reg is None:
                    continue  # (`if flag: self.w = nn.Parameter(...)` / `else: self.w = 1.0`)
                if not plain_value(s.value, ctx, m, frozenset(registered)):
                    continue
                if tampered is None:
                    tampered = _registry_tampered(node)
                if tampered:
                    return
                rv = reg.value if isinstance(reg, ast.Assign) else None
                moved = isinstance(rv, ast.Call) and unmoved(rv) is not rv
                move = rv.func.attr if moved else ""  # type: ignore[union-attr]
                how = (f" (`.{move}(...)` at line {reg.lineno} returns the Parameter itself "
                       f"when it moves nothing: on CPU, in its own dtype)") if moved else ""
                yield self.report(s, ctx, related=(Related(
                    ctx.path, reg.lineno, f"`self.{t.attr}` is registered as a parameter here",
                    ctx.column(reg)),),
                    what=f"`self.{t.attr}` is a registered `nn.Parameter`{how} and this assigns "
                         f"it a plain value",
                    why=f"cannot assign '...' as parameter '{t.attr}'",
                    remedy=f"keep the result in a local name (`{t.attr} = "
                        f"{ctx.source(s.value)}`) and use that")

    def _register_call(self, c: ast.Call, m: ast.AST, ctx: Context, cls: ast.ClassDef
                       ) -> Iterator[Finding]:
        f = c.func
        if not (isinstance(f, ast.Attribute) and f.attr == "register_parameter"
                and len(c.args) >= 2):
            return
        put = raw_copy_setattr(c, m, cls, ctx, lambda e, w: plain_value(e, ctx, w))
        if put is not None:  # NOTE [raw copy left registered]
            slot = ctx.source(c.args[0].left)  # type: ignore[attr-defined]
            yield self.report(c, ctx, related=(Related(
                ctx.path, put.lineno, "a computed tensor is set on the original name here",
                ctx.column(put)),),
                what=f"this copies the parameter each `{slot}` names under a new name but "
                     f"leaves it registered, and line {put.lineno} sets a computed tensor on "
                     f"that name",
                why="cannot assign '...' as parameter",
                remedy=f"delete the original first (`del {ctx.source(f.value)}._parameters"
                       f"[{slot}]`)")
            return
        v = c.args[1]
        if plain_value(v, ctx, m):
            name = ctx.source(c.args[0])
            yield self.report(c, ctx, what=f"`register_parameter({name}, ...)` is given a "
                                           f"plain tensor, not an `nn.Parameter`",
                              why=f"cannot assign '...' object to parameter {name}",
                              remedy=f"wrap it: `nn.Parameter({ctx.source(v)})`")


def _super_init(s: ast.stmt, cls: ast.ClassDef) -> bool:
    """``super().__init__(...)``, ``super(C, self).__init__(...)``, ``Base.__init__(self, ...)``."""
    c = s.value if isinstance(s, ast.Expr) else None
    if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == "__init__"):
        return False
    recv = c.func.value
    if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and \
            recv.func.id == "super":
        return True
    base = dotted(recv)
    return base is not None and any(dotted(b) == base for b in cls.bases) and \
        bool(c.args) and dotted(c.args[0]) == "self"


def _surely_module(cls: ast.ClassDef, ctx: Context, depth: int) -> bool:
    """Every step from ``cls`` up to ``nn.Module`` is in this file (an imported base may be a
    template a code generator rewrites, as transformers' ``modular_*.py`` files are)."""
    if depth > 8:
        return False
    for b in cls.bases:
        q = ctx.qualified_name(b) or ""
        if q in ("torch.nn.Module", "torch.nn.modules.module.Module"):
            return True
        base = ctx.analysis.classes.get(dotted(b) or "")
        if base is not None and base.node is not cls and \
                _surely_module(base.node, ctx, depth + 1):
            return True
    return False


def _on_self(s: ast.stmt) -> bool:
    """``self.x = ...`` or ``self.register_*(...)``."""
    if isinstance(s, ast.Assign):
        return any(isinstance(t, ast.Attribute) and dotted(t.value) == "self" for t in s.targets)
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
        isinstance(s.value.func, ast.Attribute) and s.value.func.attr in REGISTRY_CALLS


def _early_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for s in body:
        if isinstance(s, (*DEFS, ast.ClassDef)):
            continue
        yield s
        for field in ("body", "orelse", "finalbody"):
            yield from _early_statements(getattr(s, field, None) or [])
        for h in getattr(s, "handlers", None) or []:
            yield from _early_statements(h.body)


class ModuleAttributeBeforeInit(Rule):
    """A submodule or parameter is assigned (or registered) on `self` before
    `super().__init__()`.

    Why: `nn.Module.__init__` creates the registries (`_modules`, `_parameters`,
    `_buffers`) that `__setattr__` fills; before it, assigning a module or a Parameter raises
    `AttributeError: cannot assign module before Module.__init__() call`
    (pyg-team/pytorch_geometric#681), and `register_buffer`/`register_parameter` raise the
    same for buffers and parameters. Plain values (numbers, flags) may be set before it. Call
    `super().__init__()` first.
    Known limits: the value must be known to be a module or a parameter (its constructor, or
    what every call of the class in this file passes for that argument), and the class must
    reach `nn.Module` through classes of this file (transformers' `modular_*.py` templates
    call an imported parent's `__init__` late on purpose: a generator inlines it).
    """

    code = "GT416"
    name = "module-attribute-before-init"
    gate_statements = True
    message = ("`{stmt}` runs before `{init}` (line {init_line}): the module's registries do "
               "not exist yet and `nn.Module` raises `AttributeError: {error}`; call `{init}` "
               "first")
    triggers = ("__init__",)
    examples = [
        Bad("""
            import torch.nn as nn
            class Base(nn.Module):
                def __init__(self, encoder):
                    super().__init__()
                    self.encoder = encoder
            class WithCritic(Base):
                def __init__(self, encoder, critic):
                    self.critic = critic
                    super().__init__(encoder)
            model = WithCritic(nn.Linear(4, 4), nn.Linear(4, 1))
            """, at=(8, 8)),
        Bad("""
            import torch
            import torch.nn as nn
            class Head(nn.Module):
                def __init__(self, n):
                    self.n = n
                    self.fc = nn.Linear(n, 1)
                    nn.Module.__init__(self)
            """, at=(6, 8)),
        Good("""
            import torch.nn as nn
            class WithCritic(nn.Module):
                def __init__(self, encoder, critic, depth=2):
                    self.depth = depth
                    self.name = "critic"
                    super().__init__()
                    self.critic = critic
            model = WithCritic(nn.Linear(4, 4), nn.Linear(4, 1))
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if node.name != "__init__" or not node.body or _super_init(node.body[0], _NO_CLASS):
            return
        cls = ctx.class_def
        if cls is None or cls.body is None:
            return
        k = next((i for i, s in enumerate(node.body) if _super_init(s, cls)), None)
        if not k or not any(_on_self(s) for s in _early_statements(node.body[:k])):
            return  # (a docstring, plain locals: nothing `__setattr__` sees)
        info = ctx.analysis.classes.get(cls.name)
        if info is None or not info.is_module or info.node is not cls or \
                "__setattr__" in info.methods or not _surely_module(cls, ctx, 0):
            return
        init = node.body[k]
        for s in _early_statements(node.body[:k]):
            what = self._rejected(s, node, ctx)
            if what:
                yield self.report(s, ctx, stmt=ctx.source(s).splitlines()[0].strip(),
                                  init=ctx.source(init.value.func) + "()",  # type: ignore[attr-defined]
                                  init_line=init.lineno, error=what)

    @staticmethod
    def _rejected(s: ast.stmt, fn: ast.FunctionDef, ctx: Context) -> str | None:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            f = s.value.func
            if isinstance(f, ast.Attribute) and f.attr in REGISTRY_CALLS and \
                    dotted(f.value) == "self":
                return ERRORS.get(f.attr, f"'{ctx.class_def.name}' object has no "
                                          "attribute '_modules'")
            return None
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
            return None
        t = s.targets[0]
        if not (isinstance(t, ast.Attribute) and dotted(t.value) == "self"):
            return None
        v = s.value
        k = ctx.analysis.kind_in(v, fn, s.lineno)  # a parameter: NOTE [parameter kinds]
        if k is None:
            return None
        return ERRORS["module"] if k.what == MODULE else (
            ERRORS["parameters"] if k.what == PARAMETER else None)


_NO_CLASS = ast.ClassDef(name="", bases=[], keywords=[], body=[], decorator_list=[])
