"""Layers a module class builds in ``__init__`` and never names again (GT422, GT450).

# NOTE [unused layers]
A learnable attribute (a layer with parameters, an ``nn.Parameter``) assigned in ``__init__``
whose name the file's code spells nowhere else, in a class whose bases are ``nn.Module`` or
classes of the file (a base of another file may run it), that does not reach its children
without naming them (``children()``, ``getattr``, ``parameters()``...), and not named in a
string (``getattr(self, 'head')``): ``forward`` never runs it, so its parameters are in
``model.parameters()`` but never get a ``.grad`` (verified on torch 2.13: ``p.grad`` stays None
after ``backward``). The name is counted in the file's code tokens, so a use in any method,
script line or subclass keeps the layer.
"""
from __future__ import annotations

import ast
import re
from collections import Counter

from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.analysis.modules import AttrInfo
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import is_parameter_call
from gradtrace.lint.rules.registration._modules import owns_params

# a class that reaches its submodules without naming them
DYNAMIC_RE = re.compile(r"\b(children|modules|named_children|named_modules|_modules|getattr|"
                        r"__dict__|parameters|named_parameters)\b")
# the same words with the word start tested after the match (:func:`_dynamic`): a pattern
# opening with `\b` has no first character to skip to, `re` tries it at every character
DYNAMIC_TAIL_RE = re.compile(r"(?:children|modules|named_children|named_modules|_modules|"
                             r"getattr|__dict__|parameters|named_parameters)\b")
WORD_RE = re.compile(r"\w+")  # the runs `\bname\b` bounds


def _dynamic(text: str) -> bool:
    """Whether ``DYNAMIC_RE.search(text)`` finds a word. A match of ``DYNAMIC_TAIL_RE``
    that does not start a word lies inside a run of word characters (every word is one),
    where no word starts either: the matches it passes over hold no word start."""
    for m in DYNAMIC_TAIL_RE.finditer(text):
        p = m.start()
        if p == 0 or not (text[p - 1].isalnum() or text[p - 1] == "_"):  # `\b` before
            return True
    return False


def _learnable(v: ast.AST | None, ctx: Context) -> bool:
    return v is not None and (owns_params(v, ctx) or is_parameter_call(v, ctx))


def _words(ctx: Context) -> Counter[str]:
    return ctx.memo("unused-layers-words", ctx.tree, lambda: Counter(WORD_RE.findall(ctx.code)))


def _bases_seen(node: ast.ClassDef, ctx: Context, seen: set[str]) -> bool:
    """Every base of the class is ``nn.Module`` or a class of this file whose bases are too: no
    ``forward`` of another file can read the attribute (``class Net(BaseModel)``)."""
    for b in node.bases:
        q = ctx.qualified_name(b) or ""
        if q in ("torch.nn.Module", "torch.nn.modules.module.Module"):
            continue
        name = b.id if isinstance(b, ast.Name) else None
        base = ctx.analysis.classes.get(name) if name else None
        if base is None or name in seen:
            return False
        seen.add(name)  # type: ignore[arg-type]
        if not _bases_seen(base.node, ctx, seen):
            return False
    return True


def unused_layers(cls: ClassInfo, ctx: Context) -> list[tuple[str, AttrInfo]]:
    """The learnable attributes of ``cls`` that ``forward`` never runs (NOTE [unused layers])."""
    def make() -> list[tuple[str, AttrInfo]]:
        text = "\n".join(ctx.code_lines[cls.node.lineno - 1:cls.node.end_lineno])
        if _dynamic(text) or not _bases_seen(cls.node, ctx, set()):
            return []
        words = _words(ctx)
        out = []
        for name, info in cls.attrs.items():
            if info.later or info.method.name != "__init__" or words[name] != 1 \
                    or f"'{name}'" in ctx.text or f'"{name}"' in ctx.text \
                    or not _learnable(cls.attrs[name].value, ctx):
                continue
            out.append((name, info))
        return out
    return ctx.memo("unused-layers", cls.node, make)


def never_named(cls: ast.ClassDef, attr: str, ctx: Context) -> bool:
    """``self.<attr>`` is assigned once and its name spelled nowhere else in the file, in a
    class with its own ``forward`` that reaches no child without naming it and no base of
    another file may read (NOTE [unused layers]): the container holds layers nothing runs, so
    registering them would only add weights that never get a gradient (GT401 stays silent)."""
    if not any(isinstance(f, FUNCTION_TYPES) and f.name == "forward" for f in cls.body):
        return False  # no forward here: a base whose subclasses may run the layers
    text = "\n".join(ctx.code_lines[cls.lineno - 1:cls.end_lineno])
    return _words(ctx)[attr] == 1 and f"'{attr}'" not in ctx.text \
        and f'"{attr}"' not in ctx.text and not _dynamic(text) and _bases_seen(cls, ctx, set())


def forward_returns(fwd: ast.AST, n: int) -> list[ast.Tuple] | None:
    """The ``return a, b`` tuples of ``forward`` (own returns), when every one has ``n``
    elements."""
    rets = [r for r in walk(fwd) if isinstance(r, ast.Return)
            and not any(r in walk(f) for f in walk(fwd) if isinstance(f, FUNCTION_TYPES)
                        and f is not fwd)]
    if not rets or not all(isinstance(r.value, ast.Tuple) and len(r.value.elts) == n
                           and not any(isinstance(e, ast.Starred) for e in r.value.elts)
                           for r in rets):
        return None
    return [r.value for r in rets]  # type: ignore[misc]


def output_layers(e: ast.AST, fwd: ast.AST, line: int, cls: ClassInfo, ctx: Context,
            seen: set[int] | None = None) -> set[str]:
    """The learnable ``self.<attr>`` an expression of ``forward`` is made from, through the
    forward's local names (every binding before ``line``: an over-approximation)."""
    seen = set() if seen is None else seen
    out: set[str] = set()
    scope = ctx.scope(fwd)
    for n in walk(e):
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id == "self" and n.attr in cls.attrs:
            out.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            for b in scope.bindings_before(n.id, line + 1):
                if b.value is not None and id(b.value) not in seen:
                    out |= output_layers(b.value, fwd, b.line, cls, ctx, seen)
    return {a for a in out if _learnable(cls.attrs[a].value, ctx)}


def dropped_output(st: ast.Assign, fn: ast.AST, cls: ClassInfo, ctx: Context,
                   blank: bool = False) -> tuple[str, str] | None:
    """``(name, attr)`` when ``a, b = model(x)`` (``st`` in ``fn``, ``model`` an instance of
    ``cls``) binds an output ``name`` that nothing in ``fn`` reads, made by the learnable layer
    ``self.<attr>`` that no other output uses: its parameters never get a gradient. ``blank``:
    an output bound to ``_`` counts too."""
    fwd = cls.methods.get("forward")
    names = [t.id for t in st.targets[0].elts]  # type: ignore[attr-defined]
    rets = forward_returns(fwd, len(names)) if fwd is not None else None
    if rets is None:
        return None
    loads = {n.id for s in ctx.scope(fn).stmts for n in walk(s) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Load)}
    for i, name in enumerate(names):
        if name.startswith("_") and not (blank and name == "_") or name in loads:
            continue
        own = set.union(*(output_layers(r.elts[i], fwd, r.lineno, cls, ctx) for r in rets))
        others = set().union(*(output_layers(e, fwd, r.lineno, cls, ctx)
                               for r in rets for j, e in enumerate(r.elts) if j != i))
        alone = sorted(own - others)
        if alone:
            return name, alone[0]
    return None


def tuple_call(st: ast.stmt) -> bool:
    """``a, b, c = f(x)``: one tuple of plain names bound from a call."""
    return isinstance(st, ast.Assign) and len(st.targets) == 1 \
        and isinstance(st.targets[0], ast.Tuple) and isinstance(st.value, ast.Call) \
        and all(isinstance(t, ast.Name) for t in st.targets[0].elts)


def nested_drop(cls: ClassInfo, ctx: Context) -> tuple[ast.Assign, str, str, str] | None:
    """``(st, name, sub, attr)`` when ``forward`` of ``cls`` runs its submodule ``self.<sub>``
    once, as ``a, _ = self.<sub>(x)``, and drops an output that only the learnable layer
    ``self.<attr>`` of the submodule's class makes, a layer that class alone names (BERT's
    pooler under a question-answering head: ``sequence_output, _ = self.bert(ids)``)."""
    fwd = cls.methods.get("forward")
    if fwd is None or "self" not in ctx.code:
        return None
    words = _words(ctx)
    for st in ctx.scope(fwd).stmts:
        if not tuple_call(st):
            continue
        f = st.value.func  # type: ignore[attr-defined]
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                and f.value.id == "self" and f.attr in cls.attrs):
            continue
        uses = sum(1 for n in walk(cls.node) if isinstance(n, ast.Attribute)
                   and n.attr == f.attr and isinstance(n.value, ast.Name)
                   and n.value.id == "self" and isinstance(n.ctx, ast.Load))
        k = ctx.analysis.kind_in(f, fwd, st.lineno)  # type: ignore[attr-defined]
        sub = ctx.analysis.classes.get(k.cls) if k is not None and k.cls else None
        if uses != 1 or sub is None or not sub.is_module or sub is cls:
            continue
        got = dropped_output(st, fwd, sub, ctx, blank=True)  # type: ignore[arg-type]
        if got is None:
            continue
        own = sum(1 for n in walk(sub.node) if isinstance(n, (ast.Attribute, ast.Name))
                  and getattr(n, "attr", getattr(n, "id", None)) == got[1])
        if words[got[1]] == own:  # named nowhere outside the submodule's class
            return st, got[0], f.attr, got[1]  # type: ignore[return-value]
    return None
