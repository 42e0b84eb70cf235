"""GT444: layers built by a module class that never become attributes of the module.

# NOTE [layers never bound]
``parameters()`` sees what ``__init__`` assigns on ``self``. Two code shapes build layers that
never get there, and both show the same way: the optimizer gets an empty (or short) list, and
``forward`` reads an attribute nothing assigned.
- No constructor: a direct ``nn.Module`` subclass defines no ``__init__``, so
  ``nn.Module.__init__`` runs; its layers are assigned in another method that nothing in the
  file calls (``def _init_(self):``, ``def __int__(self):``, a ``build()`` no one calls)
  while a method reads them. Said at that method. A public method of a class the file never
  builds is left alone: the files that build it (a mixin) may call it.
- Locals instead of attributes: ``__init__`` binds a layer to a local name that is never read
  again (the layer is thrown away), while a method calls ``self.<attr>(...)`` that no
  statement of the class (or of its bases in the file) assigns. Said at the first such local.
Classes with ``setattr``/``add_module``/``__getattr__``, or with a base from another file
(which could assign anything), are left alone.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.analysis.module_api import MODULE_METHODS, ROOT_BASES as _ROOT_BASES
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import bfs_walk, of_types, statements
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._modules import owns_params

_DYNAMIC = frozenset({"setattr", "add_module", "register_module", "register_parameter",
                      "__setattr__", "__getattr__", "__dict__", "update", "load_state_dict"})


def _self_attr(n: ast.AST) -> str | None:
    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
        return n.attr
    return None


def _stored(cls: ast.ClassDef) -> set[str] | None:
    """Every ``self.<attr>`` stored anywhere in the class, plus its class-level names and
    methods; None when the class sets attributes dynamically."""
    out: set[str] = set()
    for s in cls.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(s.name)
        elif isinstance(s, (ast.Assign, ast.AnnAssign)):
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                out.update(x.id for x in bfs_walk(t) if isinstance(x, ast.Name))
    for n in bfs_walk(cls):
        a = _self_attr(n)
        if a is not None and not isinstance(n.ctx, ast.Load):  # type: ignore[attr-defined]
            out.add(a)
        if isinstance(n, ast.Attribute) and n.attr in _DYNAMIC or \
                isinstance(n, ast.Name) and n.id in _DYNAMIC:
            return None
        if isinstance(n, ast.FunctionDef) and n.name in _DYNAMIC:
            return None
    return out


def _known_bases(cls: ast.ClassDef, ctx: Context, out: set[str], depth: int = 0) -> bool:
    """Add what the in-file bases store to ``out``; False if a base could store anything."""
    for b in cls.bases:
        q = ctx.qualified_name(b) or ""
        if q in _ROOT_BASES:
            continue
        info = ctx.analysis.classes.get(q) if isinstance(b, ast.Name) else None
        if info is None or depth > 5:
            return False
        got = _stored(info.node)
        if got is None or not _known_bases(info.node, ctx, out, depth + 1):
            return False
        out |= got
    return True


def _reads(cls: ast.ClassDef, skip: ast.AST | None) -> dict[str, ast.Attribute]:
    """``self.<attr>`` loads in the methods of ``cls`` other than ``skip``, first of each."""
    out: dict[str, ast.Attribute] = {}
    for m in cls.body:
        if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) or m is skip:
            continue
        for n in bfs_walk(m):
            a = _self_attr(n)
            if a is not None and isinstance(n.ctx, ast.Load):  # type: ignore[attr-defined]
                out.setdefault(a, n)  # type: ignore[arg-type]
    return out


class LayersNeverBound(Rule):
    """A module class builds its layers where `parameters()` never sees them: in a method
    that is not `__init__` and that nothing calls, or bound to local names in `__init__`.

    Why: `nn.Module` registers a layer when it is assigned to an attribute of `self`. A class
    with `def _init_(self):` (or `__int__`) has no constructor of its own, so `Model()` runs
    `nn.Module.__init__` and has no layers: `optim.SGD(model.parameters())` raises `optimizer
    got an empty parameter list` (pytorch forums, cmc-csci181 homework #7). Layers bound to
    locals (`self_fc = nn.Linear(...)`) are thrown away when `__init__` returns, and `forward`
    fails on `self.fc` (Lightning #2282).
    Known limits: the class must derive from `nn.Module` (or classes of the same file that
    do); a
    class that sets attributes through `setattr`/`add_module`/`__getattr__` is left alone.
    """

    code = "GT444"
    gate_statements = True
    name = "layers-never-bound"
    message = "{detail}"
    triggers = ("class",)
    examples = [
        Bad("""
            import torch.nn as nn
            class Tagger(nn.Module):
                def __int__(self, n):
                    super().__int__()
                    self.emb = nn.Embedding(n, 8)
                    self.out = nn.Linear(8, 2)
                def forward(self, x):
                    return self.out(self.emb(x))
            model = Tagger(10)
            """, at=(3, 4)),
        Bad("""
            import torch
            import torch.nn as nn
            class Head(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    proj = nn.Linear(d, d)
                    gate = nn.Linear(d, 1)
                def forward(self, h):
                    return torch.sigmoid(self.gate(h)) * self.proj(h)
            """, at=(6, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Head(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    proj = nn.Linear(d, d)
                    self.gate = nn.Linear(d, 1)
                    self.body = nn.Sequential(proj, nn.ReLU())
                    self.build(d)
                def build(self, d):
                    self.extra = nn.Linear(d, d)
                def forward(self, h):
                    return torch.sigmoid(self.gate(h)) * self.body(h) + self.extra(h)
            class Lazy(nn.Module):
                def setup(self, d):
                    self.fc = nn.Linear(d, d)
                def forward(self, x):
                    return self.fc(x)
            net = Lazy()
            net.setup(4)
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        info = ctx.analysis.classes.get(node.name)
        if info is None or not info.is_module or info.node is not node:
            return
        # (NOTE [layers never bound])
        if "__init__" not in info.methods:
            yield from self._no_constructor(node, info, ctx)
        else:
            yield from self._locals(node, info, ctx)

    def _no_constructor(self, node: ast.ClassDef, info: ClassInfo, ctx: Context
                        ) -> Iterator[Finding]:
        if not node.bases or any((ctx.qualified_name(b) or "") not in _ROOT_BASES
                                 for b in node.bases):
            return
        called = _generated_init_calls(node, ctx)
        if called is None:
            return  # a class decorator may give the class its constructor
        for m in info.methods.values():
            if m.name == "forward" or m.decorator_list or m.name in called:
                continue
            layers = [s for s in statements(m) if isinstance(s, ast.Assign)
                      and len(s.targets) == 1 and _self_attr(s.targets[0])
                      and _capitalised_call(s.value) and owns_params(s.value, ctx)]
            if not layers:
                continue
            read = _reads(node, m)
            used = [s for s in layers if _self_attr(s.targets[0]) in read]
            if not used or _referenced(ctx.tree, m):
                continue
            if not m.name.startswith("_") and not _built(ctx, node.name):
                continue  # a mixin of other files: they build it and may call its methods
            first = read[_self_attr(used[0].targets[0])]  # type: ignore[index]
            yield self.report(m, ctx, related=(Related(
                ctx.path, first.lineno, "read here; nothing assigned it", ctx.column(first)),),
                detail=(f"`{node.name}` defines no `__init__`: its layers are assigned in "
                        f"`{m.name}`, which nothing calls, so `{node.name}()` runs "
                        "`nn.Module.__init__` and has no parameters (the optimizer gets an "
                        "empty list, `forward` fails on the missing attributes); name this "
                        "method `__init__`"))
            return

    def _locals(self, node: ast.ClassDef, info: ClassInfo, ctx: Context) -> Iterator[Finding]:
        init = info.methods["__init__"]
        made = [s for s in statements(init) if isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and _capitalised_call(s.value)]
        if not made:
            return
        loaded = {n.id for n in of_types(init, (ast.Name,))  # NOTE [walk index]
                  if isinstance(n.ctx, ast.Load)}  # type: ignore[attr-defined]
        dead = [s for s in made if s.targets[0].id not in loaded  # type: ignore[attr-defined]
                and owns_params(s.value, ctx)]
        if not dead:
            return
        stored = _stored(node)
        if stored is not None:
            stored |= MODULE_METHODS
        if stored is None or not _known_bases(node, ctx, stored):
            return
        missing = sorted((n for n in bfs_walk(node) if isinstance(n, ast.Call)
                          and _self_attr(n.func) and _self_attr(n.func) not in stored),
                         key=lambda n: (n.lineno, n.col_offset))
        if not missing:
            return
        names = list(dict.fromkeys(f"`self.{_self_attr(c.func)}`" for c in missing))
        first = dead[0]
        yield self.report(first, ctx, related=(Related(
            ctx.path, missing[0].lineno, "called here; nothing assigned it",
            ctx.column(missing[0])),), detail=(
            f"the layer is bound to the local `{first.targets[0].id}` "  # type: ignore[attr-defined]
            f"and thrown away when `__init__` returns, while the class calls "
            f"{', '.join(names[:3])}, which no method assigns: the module has no such layer "
            "and `parameters()` does not see this one; assign it to an attribute of `self`"))


def _capitalised_call(e: ast.AST) -> bool:
    """``nn.Linear(...)``, ``Block(...)``: a call of a class-like name (cheap pre-filter)."""
    if not isinstance(e, ast.Call):
        return False
    f = e.func
    return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))[:1].isupper()


def _generated_init_calls(cls: ast.ClassDef, ctx: Context) -> frozenset[str] | None:
    """The methods the constructor a class decorator generates calls: none without a
    decorator, ``__post_init__`` under ``@dataclass`` (its ``__init__`` calls it); None for
    any other decorator (what it does to the constructor is unknown)."""
    called: frozenset[str] = frozenset()
    for d in cls.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if (ctx.qualified_name(f) or "") != "dataclasses.dataclass":
            return None
        called = frozenset({"__post_init__"})
    return called


def _built(ctx: Context, name: str) -> bool:
    """Whether the file calls the class ``name`` (``Cls(...)``, ``mod.Cls(...)``): a class
    the file never builds is built elsewhere (OpenFlamingo's ``FlamingoLMMixin``, grafted on
    a language model by another file, which then calls its public ``init_flamingo``)."""
    return ctx.mentions(name + "(") and any(isinstance(n, ast.Call) and (
        isinstance(n.func, ast.Name) and n.func.id == name
        or isinstance(n.func, ast.Attribute) and n.func.attr == name)
        for n in bfs_walk(ctx.tree))


def _referenced(tree: ast.AST, m: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether anything outside ``m`` names it (a call, a callback, a string)."""
    inside = {id(n) for n in bfs_walk(m)}
    for n in bfs_walk(tree):
        if id(n) in inside:
            continue
        if isinstance(n, ast.Attribute) and n.attr == m.name or \
                isinstance(n, ast.Name) and n.id == m.name or \
                isinstance(n, ast.Constant) and n.value == m.name:
            return True
    return False
