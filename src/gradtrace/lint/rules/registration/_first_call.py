"""Parameters a module creates behind a first-call flag (GT464's second form).

# NOTE [built behind a first-call flag]
Besides ``if self.net is None: self.net = nn.Linear(...)``, a module learns its input size at
its first call with a flag of its own: ``if not self._built: self._built = True; ...;
self._make_weights()``. The guard is a first-call guard when its test reads an attribute of
``self`` that the guarded block itself assigns (the block turns its own test off: it runs
once). What the block builds counts when it assigns ``self.<attr>`` a layer with parameters or
an ``nn.Parameter(...)``, directly or in a method of the class the block calls on ``self``
(anywhere in that method's body, which runs only from here). The statement named is the one in
the guarded block that builds (the call of the method, or the assignment): moving it into
``__init__`` (or building the optimizer after a first forward) is the fix. A method that runs
also from ``__init__`` builds there first: its parameters exist before any optimizer, so
nothing is said (LiquidNet's fixed cell calls its builder in the constructor).
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.registration._modules import owns_params

_PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _builds(value: ast.AST, ctx: Context) -> bool:
    """A layer with parameters or a new ``nn.Parameter``."""
    if isinstance(value, ast.Call) and (ctx.call_name(value) or "") in _PARAMETER:
        return True
    return owns_params(value, ctx)


def _built_attr(stmts: list[ast.stmt], ctx: Context) -> str | None:
    """The first ``self.<attr>`` the statements assign something that builds parameters."""
    for s in stmts:
        for n in walk(s):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and (t := dotted(n.targets[0])) and t.startswith("self.") \
                    and t.count(".") == 1 and _builds(n.value, ctx):
                return t[5:]
    return None


def _called_from_init(cls: ClassInfo, name: str) -> bool:
    init = cls.methods.get("__init__")
    return init is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr == name and dotted(n.func.value) == "self" for n in walk(init))


def flag_guarded_build(cls: ClassInfo, fns: list[ast.AST], ctx: Context
                       ) -> tuple[str, ast.stmt] | None:
    """``(attr, statement)`` for a statement of a first-call block (NOTE) in one of ``fns``
    (``forward`` and the methods it calls) that builds parameters, or None."""
    for fn in fns:
        for s in walk(fn):
            if not isinstance(s, ast.If):
                continue
            read = {d for n in walk(s.test) if (d := dotted(n)) and d.startswith("self.")
                    and d.count(".") == 1}
            if not read:
                continue
            assigned = {t for b in s.body for n in walk(b) if isinstance(n, ast.Assign)
                        for tgt in n.targets if (t := dotted(tgt))}
            if not read & assigned:
                continue  # not a block that turns its own test off
            for b in s.body:
                attr = _built_attr([b], ctx) if isinstance(b, ast.Assign) else None
                if attr is None and isinstance(b, ast.Expr) and isinstance(b.value, ast.Call) \
                        and isinstance(b.value.func, ast.Attribute) \
                        and dotted(b.value.func.value) == "self":
                    m = cls.methods.get(b.value.func.attr)
                    if m is not None and m is not fn \
                            and not _called_from_init(cls, b.value.func.attr):
                        attr = _built_attr(m.body, ctx)
                if attr is not None:
                    return attr, b
    return None
