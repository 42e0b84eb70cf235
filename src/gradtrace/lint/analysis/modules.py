"""The classes of a file: which are ``nn.Module`` subclasses, what each stores on ``self``
(registered or not), and what ``forward`` reads.

# NOTE [registration]
``nn.Module.__setattr__`` registers a value assigned to an attribute only when it is an
``nn.Module`` or an ``nn.Parameter`` (buffers go through ``register_buffer``); a plain tensor,
or a plain list/dict of modules, is an ordinary Python attribute: not in ``parameters()``,
``state_dict()`` or ``.to()`` (pytorch-facts.md#registration).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.inherited_attrs import inherited_kind
from gradtrace.lint.analysis.kinds import BUFFER, REGISTERED, SCHEDULER, Kind
from gradtrace.lint.analysis.vocabulary import OTHER_FRAMEWORKS
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.facts import Analysis
    from gradtrace.lint.context import Context

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# bases of custom autograd operations: a `forward` there is no module's
AUTOGRAD_FUNCTION_BASES = frozenset({
    "torch.autograd.Function", "torch.autograd.function.Function",
    "torch.autograd.function.InplaceFunction", "torch.autograd.InplaceFunction"})
NOT_MODULES = frozenset({"torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.ParameterList",
                         "torch.nn.ParameterDict"})


@dataclass
class AttrInfo:
    """``self.<name> = value`` in a method of a class (the first assignment; others in
    ``later``)."""

    name: str
    value: ast.expr | None
    stmt: ast.stmt
    method: ast.FunctionDef | ast.AsyncFunctionDef
    later: list[ast.stmt] = field(default_factory=list)
    buffer: bool = False  # made by ``self.register_buffer("name", ...)``


def _method_owners(a: Analysis) -> dict[str, list[ClassInfo]]:
    """Method name -> the classes of the file defining it, in the file's class order; once per
    file (a script asks about each of its classes' ``self.name(...)`` calls: a scan of every
    class per name made it quadratic)."""
    def make() -> dict[str, list[ClassInfo]]:
        out: dict[str, list[ClassInfo]] = {}
        for c in a.classes.values():
            for m in c.methods:
                out.setdefault(m, []).append(c)
        return out
    return a.ctx.memo("method-owners", a.ctx.tree, make)


class ClassInfo:
    """One class of the file."""

    def __init__(self, node: ast.ClassDef, is_module: bool, analysis: Analysis) -> None:
        self.node = node
        self.name = node.name
        self.is_module = is_module
        self._analysis = analysis
        self.methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {
            s.name: s for s in node.body if isinstance(s, DEFS)}
        self._attrs: dict[str, AttrInfo] | None = None
        self._init_attrs: dict[str, AttrInfo] | None = None
        self._kinds: dict[str, Kind | None] = {}
        self._forward_uses: frozenset[str] | None = None
        self._looked_up: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | None] = {}

    def method(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """# NOTE [inherited methods]
        The method ``name`` an instance of this class runs: its own, else the one it inherits
        from a base class of the file, nearest first (:meth:`lineage`).
        ``class SSIMMetric(IterationMetric)`` with ``__call__`` defined on ``IterationMetric``
        only: ``SSIMMetric(...)(x, y)`` runs the base's ``__call__`` (Python's attribute
        lookup walks the bases). A base that is not a class of the file (``nn.Module``, a
        class of another package) is not read: what it defines is unknown here, so a name
        only such a base could define gives None. A name the class and its bases do not
        define, called on ``self`` in one of its methods (a template method: the base's
        ``__call__`` runs ``self._compute_tensor(...)``), is the subclass's: when exactly
        one subclass of the file defines it, that one (two or more: unknown)."""
        own = self.methods.get(name)
        if own is not None or self._analysis is None:
            return own
        if name in self._looked_up:  # `self.encoder(x)` asks for every attribute call
            return self._looked_up[name]
        got = next((c.methods[name] for c in self.lineage() if name in c.methods), None)
        if got is None:  # `self._compute(x)` in a base, defined by its one subclass
            subs = [c.methods[name] for c in _method_owners(self._analysis).get(name, ())
                    if c is not self and self in c.lineage()]
            got = subs[0] if len(subs) == 1 else None
        self._looked_up[name] = got
        return got

    def release(self) -> None:
        self._analysis = None  # type: ignore[assignment]
        self._attrs = self._init_attrs = None
        self._kinds.clear()
        self._looked_up.clear()

    @property
    def attrs(self) -> dict[str, AttrInfo]:
        """``self.<name>`` assignments of every method, ``__init__``'s first (computed on
        first use)."""
        if self._attrs is None:
            self._attrs = {}
            init = self.methods.get("__init__")
            order = ([init] if init is not None else []) + [
                m for m in self.methods.values() if m is not init]
            for m in order:
                for s in _own_statements(m):
                    self._record(s, m, self._attrs)
        return self._attrs

    @property
    def init_attrs(self) -> dict[str, AttrInfo]:
        """The entries of :attr:`attrs` whose first assignment is in ``__init__``, read from
        ``__init__`` alone (``attrs`` reads it first, so the same entries with the same
        values; ``later`` lists only ``__init__``'s own later assignments here). For a
        question about ``__init__`` only, without reading every method of every class."""
        if self._init_attrs is None:
            init = self.methods.get("__init__")
            if self._attrs is not None:
                self._init_attrs = {a: i for a, i in self._attrs.items() if i.method is init}
            else:
                self._init_attrs = {}
                if init is not None:
                    for s in _own_statements(init):
                        self._record(s, init, self._init_attrs)
        return self._init_attrs

    def _record(self, s: ast.stmt, m: ast.FunctionDef | ast.AsyncFunctionDef,
                attrs: dict[str, AttrInfo]) -> None:
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            pairs = [(t, s.value) for t in targets]
            if len(targets) == 1 and isinstance(targets[0], ast.Tuple) and \
                    isinstance(s.value, ast.Tuple) and \
                    len(targets[0].elts) == len(s.value.elts) and not any(
                        isinstance(e, ast.Starred) for e in (*targets[0].elts, *s.value.elts)):
                pairs = list(zip(targets[0].elts, s.value.elts))  # `self.g, self.d = G(), D()`
            for t, v in pairs:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id == "self":
                    self._add(attrs, t.attr, v, s, m)
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            c = s.value
            f = c.func
            if isinstance(f, ast.Attribute) and dotted(f.value) == "self" and \
                    f.attr == "register_buffer" and c.args and \
                    isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str):
                info = self._add(attrs, c.args[0].value, c.args[1] if len(c.args) > 1 else None,
                                 s, m)
                info.buffer = True

    @staticmethod
    def _add(attrs: dict[str, AttrInfo], name: str, value: ast.expr | None, s: ast.stmt,
             m: ast.FunctionDef | ast.AsyncFunctionDef) -> AttrInfo:
        got = attrs.get(name)
        if got is None:
            got = attrs[name] = AttrInfo(name, value, s, m)
        else:
            got.later.append(s)
        return got

    def lineage(self) -> Iterator[ClassInfo]:
        """This class and its bases that are classes of the file, nearest first (each once)."""
        classes = self._analysis.classes
        seen: set[str] = set()
        todo: list[ClassInfo] = [self]
        while todo:
            c = todo.pop(0)
            if c.name in seen:
                continue
            seen.add(c.name)
            yield c
            todo.extend(classes[b.id] for b in c.node.bases
                        if isinstance(b, ast.Name) and b.id in classes)

    def attr_kind(self, name: str) -> Kind | None:
        """The kind of ``self.<name>`` as its first assignment makes it (None: unknown)."""
        if name not in self._kinds:
            self._kinds[name] = None  # recursion guard
            info = self.attrs.get(name)
            k = None
            if info is not None:
                if info.buffer:
                    k = Kind(BUFFER, node=info.value)
                elif info.value is not None:
                    # `self.model = model`: what the method's callers pass (`Cls(...)`)
                    k = self._analysis.kind_in(info.value, info.method, info.stmt.lineno + 1)
            elif self.node.bases:  # set by a base only (NOTE [inherited attributes])
                k = inherited_kind(self._analysis.ctx, self, name)
            self._kinds[name] = k
        return self._kinds[name]

    def registered(self, name: str) -> bool | None:
        """Whether ``self.<name>`` is registered on the module (None: unknown)."""
        if not self.is_module:
            return False
        k = self.attr_kind(name)
        return None if k is None else k.what in REGISTERED

    @property
    def forward_uses(self) -> frozenset[str]:
        """Attributes ``self.<x>`` that ``forward`` (and the methods it calls) reads."""
        if self._forward_uses is None:
            self._forward_uses = self.uses("forward")
        return self._forward_uses

    def uses(self, method: str) -> frozenset[str]:
        """Attributes ``self.<x>`` that ``method`` (and the methods it calls) reads."""
        seen: set[str] = set()
        out: set[str] = set()
        todo = [method]
        while todo:
            m = self.methods.get(todo.pop())
            if m is None or m.name in seen:
                continue
            seen.add(m.name)
            for n in bfs_walk(m):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                        and n.value.id == "self":
                    if n.attr in self.methods:
                        todo.append(n.attr)
                    elif isinstance(n.ctx, ast.Load):
                        out.add(n.attr)
        return frozenset(out)


def _own_statements(fn: ast.AST) -> Iterator[ast.stmt]:
    """The statements of a function, nested blocks included, nested defs and classes not."""
    stack = list(reversed(getattr(fn, "body", [])))
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, (*DEFS, ast.ClassDef)):
            continue
        for f in ("body", "orelse", "finalbody"):
            sub = getattr(s, f, None)
            if sub and isinstance(sub[0], ast.stmt):
                stack.extend(reversed(sub))
        for h in getattr(s, "handlers", ()):
            stack.extend(reversed(h.body))
        for c in getattr(s, "cases", ()):
            stack.extend(reversed(c.body))


def class_defs(body: list[ast.stmt]) -> Iterator[ast.ClassDef]:
    """Classes at module level, nested in classes, or under if/try (not inside functions)."""
    for s in body:
        if isinstance(s, ast.ClassDef):
            yield s
            yield from class_defs(s.body)
        elif isinstance(s, (ast.If, ast.Try)):
            yield from class_defs(s.body)
            yield from class_defs(s.orelse)
            for h in getattr(s, "handlers", ()):
                yield from class_defs(h.body)


def function_defs(body: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions at module level or under if/try (not methods, not nested functions)."""
    for s in body:
        if isinstance(s, DEFS):
            yield s
        elif isinstance(s, (ast.If, ast.Try)):
            yield from function_defs(s.body)
            yield from function_defs(s.orelse)
            for h in getattr(s, "handlers", ()):
                yield from function_defs(h.body)


def is_module_class(c: ast.ClassDef, known: set[str], qualified) -> bool:  # type: ignore[no-untyped-def]
    """An ``nn.Module`` subclass: a base is ``torch.nn.<Layer>``, named ``*Module``, or a module
    class of the file; or the class has bases and defines ``forward``, unless a base is
    ``torch.autograd.Function`` (its ``forward`` is an operation's, it holds no parameters)."""
    quals = [qualified(b) or "" for b in c.bases]
    if any(q in AUTOGRAD_FUNCTION_BASES for q in quals):
        return False
    if quals and all(q.partition(".")[0] in OTHER_FRAMEWORKS for q in quals):
        return False  # `class Lm(mlx.nn.Module)`: another framework's module registers lists
    for q in quals:
        last = q.rpartition(".")[2]
        if (q.startswith("torch.nn.") and last[:1].isupper() and q not in NOT_MODULES) \
                or last.endswith("Module") or last in known:
            return True
    return bool(c.bases) and any(isinstance(s, ast.FunctionDef) and s.name == "forward"
                                 for s in c.body)


def torch_base(ctx: Context, classes: dict[str, ClassInfo], node: ast.ClassDef,
               depth: int = 0) -> str | None:
    """SCHEDULER for a class of the file that subclasses a torch scheduler (``class
    WarmupLR(lr_scheduler.LambdaLR)``), also through classes of the file; else None."""
    for b in node.bases:
        q = ctx.qualified_name(b) or ""
        if q.startswith("torch.optim.lr_scheduler."):
            return SCHEDULER
        own = classes.get(b.id) if isinstance(b, ast.Name) else None
        if own is not None and own.node is not node and depth < 3:
            got = torch_base(ctx, classes, own.node, depth + 1)
            if got is not None:
                return got
    return None



def plain_class(name: str, ctx: Context) -> bool:
    """``name`` is a class of the file with no base but ``object`` (a ``@dataclass`` record,
    a plain holder): whatever it is called (``Block``, ``Layer``), it is no ``nn.Module``."""
    info = ctx.analysis.classes.get(name)
    return info is not None and all(isinstance(b, ast.Name) and b.id == "object"
                                    for b in info.node.bases) and not info.node.keywords
