"""Small source shapes the loss-path tracer recognises (no tracing here)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# calls whose result is a (values, indices) pair when given a dim
PAIR_METHODS = frozenset({"max", "min", "topk", "sort", "kthvalue", "mode", "median"})
# methods that keep the cut chain (``x.detach().cpu().numpy()`` is one cut)
PEEL = frozenset({"detach", "cpu", "cuda", "to", "clone", "contiguous", "float", "double",
                  "half", "squeeze", "view", "reshape", "flatten", "data"})


def asks_grad(e: ast.Call) -> bool:
    """``requires_grad=<anything but False>`` among the keywords."""
    return any(k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant)
                                                 and k.value.value is False) for k in e.keywords)


def unpacks_indices(s: ast.Assign, name: str, ctx: Context) -> bool:
    """``_, preds = torch.max(out, 1)`` / ``v, idx = out.topk(k)``: ``name`` is the indices."""
    v = s.value
    if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Tuple) or \
            len(s.targets[0].elts) != 2 or not isinstance(v, ast.Call):
        return False
    second = s.targets[0].elts[1]
    if not (isinstance(second, ast.Name) and second.id == name):
        return False
    f = v.func
    qual = ctx.qualified_name(f) or ""
    if qual.startswith("torch.") and qual.rpartition(".")[2] in PAIR_METHODS:
        return len(v.args) >= 2 or any(k.arg == "dim" for k in v.keywords)
    if isinstance(f, ast.Attribute) and f.attr in PAIR_METHODS and not qual.startswith("torch."):
        return bool(v.args) or any(k.arg in ("dim", "k") for k in v.keywords)
    return False


def pair_source(v: ast.expr) -> ast.expr:
    """``out`` in ``torch.max(out, 1)`` and in ``out.max(1)``."""
    assert isinstance(v, ast.Call)
    f = v.func
    if isinstance(f, ast.Attribute) and dotted(f.value) != "torch" or not v.args:
        return f.value if isinstance(f, ast.Attribute) else v
    return v.args[0]


def peel(e: ast.expr) -> ast.expr:
    """The value under a chain of cut/copy methods: ``out`` for ``out.detach().cpu()``."""
    while True:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                e.func.attr in PEEL:
            e = e.func.value
        elif isinstance(e, ast.Attribute) and e.attr == "data":
            e = e.value
        else:
            return e


def is_torch_loss(qual: str | None) -> bool:
    """``torch.nn.<Something>Loss``."""
    return bool(qual) and qual.startswith("torch.nn.") and qual.endswith("Loss")  # type: ignore


def is_loss_class(cls: ast.ClassDef | None, ctx: Context) -> bool:
    """A class named like a loss (``FocalLoss``, ``Criterion``) or deriving from a torch loss
    class (``torch.nn.modules.loss._Loss``, ``nn.MSELoss``): its ``forward`` returns a loss."""
    if cls is None:
        return False
    return cls.name.lower().endswith(("loss", "criterion")) or any(
        is_torch_loss(ctx.qualified_name(b)) for b in cls.bases)


def self_assignments(cls: ast.ClassDef | None, name: str, ctx: Context) -> list[ast.expr | None]:
    """Values assigned to ``self.<attr>`` anywhere in the methods of ``cls``."""
    if cls is None:
        return []
    # cached per file: a module-level cache would keep whole class subtrees alive (NOTE [gc])
    found = ctx.memo("gt1-self-assignments", cls, lambda: _attribute_assignments(cls))
    return list(found.get(name, ()))


def _attribute_assignments(cls: ast.ClassDef) -> dict[str, tuple[ast.expr, ...]]:
    """``{"self.x": (value, ...)}`` for every attribute assignment in ``cls`` (one walk)."""
    out: dict[str, list[ast.expr]] = {}
    for n in _statements(cls.body):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute):
                    name = dotted(t)
                    if name is not None:
                        out.setdefault(name, []).append(n.value)
    return {k: tuple(v) for k, v in out.items()}


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement under ``body``, nested blocks included (expressions are not walked)."""
    stack = list(reversed(body))
    while stack:
        s = stack.pop()
        yield s
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(s, field, None)
            if isinstance(sub, list):
                stack.extend(x for x in reversed(sub) if isinstance(x, ast.stmt))
        for h in getattr(s, "handlers", ()):
            stack.extend(reversed(h.body))
        for c in getattr(s, "cases", ()):
            stack.extend(reversed(c.body))


def constant_default_args(cls: ast.ClassDef | None) -> set[str]:
    """Arguments of the methods of ``cls`` whose default is a number (hyper-parameters)."""
    out: set[str] = set()
    for f in cls.body if cls is not None else ():
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = f.args
            pos = [*a.posonlyargs, *a.args]
            pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults),
                     *zip(a.kwonlyargs, a.kw_defaults)]
            out.update(arg.arg for arg, d in pairs if isinstance(d, ast.Constant)
                       and isinstance(d.value, (int, float)) and not isinstance(d.value, bool))
    return out
