"""One file's facts, computed on first use and shared by every rule: ``ctx.analysis``.

# NOTE [kinds]
:meth:`Analysis.kind` says what a value is (:mod:`.kinds`) from the code, never from its name:
constructors (``nn.Linear(...)``, ``torch.optim.SGD(...)``, ``DataLoader(...)``, a class of
this file), assignments and unpacking inside the function (through :class:`flow.Scope`),
attribute chains through the classes of the file (``model.encoder.fc`` where ``Net.__init__``
says ``self.encoder = Encoder()`` and ``Encoder.__init__`` says ``self.fc = nn.Linear(...)``),
``self.x`` set in one method and read in another, and the returns of the file's own functions
(``opt = make_optimizer(model)``: an optimizer over ``model``'s parameters). Unknown stays
None: rules that need a guess use :mod:`.vocabulary`, in one place.

# NOTE [optimizer class given]
``self.optim = optim(param_groups, **args.optimizer_params)`` in a method whose parameter
``optim`` is the optimizer class its caller chose (3DInfomax's trainers: ``globals()[name]``
in another file): a callable handed the parameters of modules (``.parameters()``,
``.named_parameters()``, through the names and lists built from them) is an optimizer over
them, whatever class it is. Only a parameter of the function is read so: a name of the file
or an import is what it is. So is a torch optimizer class chosen at run time in the function:
``optim_cls = {"sgd": torch.optim.SGD, ...}[key]`` (every value a ``torch.optim`` class) or
``getattr(torch.optim, name)`` (torchdistill's ``get_optimizer``), called on such parameters.

Everything is computed lazily and memoised per file, so a file whose rules never ask costs
nothing, and each fact costs one pass over the code it depends on.
"""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import handed_class, param_kind, unpacked_return
from gradtrace.lint.analysis.elements import layer_element, loop_kind, unwrapped_kind
from gradtrace.lint.analysis.foreign_kinds import (
    foreign_asked, foreign_attr_kind, foreign_module_kind)
from gradtrace.lint.analysis.foreign_params import carried_attr_kind
from gradtrace.lint.analysis.function_facts import FunctionFacts
from gradtrace.lint.analysis.instance_methods import held_method
from gradtrace.lint.analysis.kinds import (
    BUFFER, CONTAINER, LOADER, MODULE, NUMBER, OBJECT, OPTIMIZER, PARAMETER, PARAMS, SCHEDULER,
    TENSOR, Kind,
)
from gradtrace.lint.analysis.modules import (
    DEFS, NOT_MODULES, ClassInfo, class_defs, function_defs, is_module_class, torch_base,
)
from gradtrace.lint.analysis.undefined import is_undefined
from gradtrace.lint.analysis.vocabulary import MODEL_FACTORIES, is_pretrained_model_class
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.statement_shapes import argument_default, inside_own_value

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding, Scope

# module methods that return the module itself
SELF_RETURNING = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "double", "half",
                            "bfloat16", "requires_grad_", "apply", "type", "to_empty"})
TENSOR_FACTORIES = frozenset({
    "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor", "torch.FloatTensor",
    "torch.zeros", "torch.ones", "torch.randn", "torch.rand", "torch.empty", "torch.full",
    "torch.arange", "torch.linspace", "torch.eye", "torch.randint", "torch.zeros_like",
    "torch.ones_like", "torch.randn_like", "torch.rand_like", "torch.empty_like",
    "torch.full_like", "torch.normal",
})
LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# Lua torch's objects (PyTorch < 1.0): `load_lua(path)` and `torch.legacy.nn` layers are not
# `nn.Module`s (their `parameters()` returns the two lists `(weights, gradWeights)`)
LEGACY = ("torch.utils.serialization.", "torch.legacy.")
MAX_DEPTH = 24


class Analysis(FunctionFacts):
    """The facts of one file (see NOTE [kinds]). Read-only for rules."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._classes: dict[str, ClassInfo] | None = None
        self._method_class: dict[int, ClassInfo] = {}
        self._functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None
        self._returns: dict[int, Kind | None] = {}
        self._stepped: dict[int, frozenset[str]] = {}
        self._module_classes: frozenset[str] | None = None
        self._kinds: dict[tuple[int, int, int], tuple[ast.AST, Scope, Kind | None]] = {}

    def release(self) -> None:
        """Drop every cached fact (ClassInfo and Analysis refer to each other: NOTE [gc])."""
        for c in (self._classes or {}).values():
            c.release()
        self._classes = None
        self._method_class.clear()
        self._functions = None
        self._returns.clear()
        self._stepped.clear()
        self._module_classes = None
        self._kinds.clear()

    # -- the file's definitions --------------------------------------------------------------
    @property
    def classes(self) -> dict[str, ClassInfo]:
        """The classes of the file by name (module level, nested in classes, under if/try)."""
        if self._classes is None:
            defs = list(class_defs(self.ctx.tree.body))
            known: set[str] = set()
            changed = True
            while changed:
                changed = False
                for c in defs:
                    if c.name not in known and is_module_class(c, known,
                                                               self.ctx.qualified_name):
                        known.add(c.name)
                        changed = True
            known -= _object_rooted(defs)  # NOTE [plain classes]
            self._classes = {}
            for c in defs:
                info = self._classes[c.name] = ClassInfo(c, c.name in known, self)
                for m in info.methods.values():
                    self._method_class[id(m)] = info
        return self._classes

    @property
    def module_classes(self) -> frozenset[str]:
        """Names of the ``nn.Module`` subclasses of the file (transitively)."""
        if self._module_classes is None:
            self._module_classes = frozenset(n for n, c in self.classes.items() if c.is_module)
        return self._module_classes

    @property
    def functions(self) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        """The file's top-level functions by name (the last definition wins)."""
        if self._functions is None:
            self._functions = {f.name: f for f in function_defs(self.ctx.tree.body)}
        return self._functions

    def class_of(self, fn: ast.AST | None) -> ClassInfo | None:
        """The class whose method ``fn`` is, if any."""
        if fn is None:
            return None
        self.classes  # noqa: B018 - builds the method index
        return self._method_class.get(id(fn))

    def callee(self, call: ast.Call, where: ast.AST | None = None
               ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The function of this file that ``call`` runs: ``helper(...)`` or, inside a method,
        ``self.method(...)`` (None: anything else)."""
        f = call.func
        if isinstance(f, ast.Name):
            return self.functions.get(f.id)
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "self":
            cls = self.class_of(where)
            return cls.method(f.attr) if cls is not None else None  # NOTE [inherited methods]
        return None

    def local_callee(self, call: ast.Call, scope: Scope, line: int
                     ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """:meth:`callee`, unless the called name is rebound in ``scope`` before ``line``."""
        f = call.func
        if isinstance(f, ast.Name) and self._rebound(f.id, scope, line):
            return None
        return self.callee(call, scope.node)

    # -- kinds -------------------------------------------------------------------------------
    def kind(self, expr: ast.AST, scope: Scope | None = None, line: int | None = None
             ) -> Kind | None:
        """What ``expr`` is when read at ``line`` in ``scope`` (default: the function being
        visited, the line of ``expr``). None: unknown."""
        scope = scope or self.ctx.scope()
        line = line or getattr(expr, "lineno", 0) or 0
        key = (id(expr), id(scope), line)  # asked again and again for one call (GT443...)
        got = self._kinds.get(key)
        if got is None or got[0] is not expr or got[1] is not scope:
            # the entry keeps ``expr`` and ``scope`` alive: their ids are never reused (a
            # rule may ask about a node it parsed on the fly)
            got = self._kinds[key] = (expr, scope, self._kind(expr, scope, line, 0))
        return got[2]

    def kind_in(self, expr: ast.AST, fn: ast.AST, line: int) -> Kind | None:
        """:meth:`kind` in the scope of the function (or module) ``fn``."""
        return self._kind(expr, self.ctx.scope(fn), line, 0)

    def is_module(self, expr: ast.AST, scope: Scope | None = None,
                  line: int | None = None) -> bool:
        k = self.kind(expr, scope, line)
        return k is not None and k.what == MODULE

    def _kind(self, e: ast.AST, scope: Scope, line: int, depth: int) -> Kind | None:
        if depth > MAX_DEPTH:
            return None
        if isinstance(e, ast.Call):
            return self._call_kind(e, scope, line, depth)
        if isinstance(e, (ast.Name, ast.Attribute)):
            return self._name_kind(e, scope, line, depth)
        if isinstance(e, ast.Subscript) and not isinstance(e.slice, ast.Slice):  # `self.m[0]`
            k = self._kind(e.value, scope, line, depth + 1)
            return layer_element(self._kind, k, scope, line, depth, e.slice) if k else None
        if isinstance(e, ast.IfExp):  # `m.module if hasattr(m, "module") else m`
            return unwrapped_kind(self._kind, e, scope, line, depth)
        if isinstance(e, ast.Constant):
            v = e.value
            return Kind(NUMBER) if isinstance(v, (int, float)) and not isinstance(v, bool) \
                else None
        if isinstance(e, (ast.List, ast.Tuple, ast.Dict)):
            elts = e.values if isinstance(e, ast.Dict) else e.elts
            kinds = [self._kind(x, scope, line, depth + 1) for x in elts]
            if kinds and all(k is not None and k.what in (MODULE, PARAMETER) for k in kinds):
                return Kind(CONTAINER, node=e)
        return None

    def _name_kind(self, e: ast.Name | ast.Attribute, scope: Scope, line: int,
                   depth: int) -> Kind | None:
        name = dotted(e)
        b = scope.binding_before(name, line) if name is not None else None
        if b is not None and inside_own_value(e, b.stmt):
            b = scope.binding_before(name, b.line)  # `w = nn.Parameter(f(w))`: the old `w`
        if b is not None:
            if isinstance(b.stmt, (ast.For, ast.AsyncFor)):
                return loop_kind(self._kind, b.stmt, name, scope, depth)
            value = unpacked_value(b, name)
            if value is None and isinstance(b.stmt, ast.Assign):  # `model, opt = setup()`
                return unpacked_return(self, b.stmt, name, scope, b.line)
            if isinstance(b.stmt, ast.AugAssign) or value is None:
                return None
            if isinstance(b.stmt, DEFS) or isinstance(b.stmt, ast.ClassDef):
                return None
            return self._kind(value, scope, b.line, depth + 1)
        if isinstance(e, ast.Name):
            if e.id == "self":
                cls = self.class_of(scope.node)
                if cls is not None:
                    return Kind(MODULE if cls.is_module else OBJECT, cls=cls.name)
            elif scope.node is not self.ctx.tree and not self._is_param(scope.node, e.id):
                # a global of the module, read inside a function
                return self._kind(e, self.ctx.scope(self.ctx.tree), 10**9, depth + 1)
            elif scope.node is not self.ctx.tree:  # what the callers pass (NOTE [parameter kinds])
                return param_kind(self, scope.node, e.id)
            return None
        owner = self._kind(e.value, scope, line, depth + 1)
        if owner is not None and owner.what in (MODULE, OBJECT) and owner.cls in self.classes:
            return _in_caller_terms(self.classes[owner.cls].attr_kind(e.attr), e.value)
        if owner is not None and owner.what == MODULE and owner.node is not None:
            return foreign_attr_kind(self.ctx, owner.node, e.attr)  # a class of another file
        if owner is not None and owner.what == MODULE and owner.node is None and owner.cls:
            return carried_attr_kind(owner.cls, e.attr)  # NOTE [kinds by the callers]
        return None

    @staticmethod
    def _is_param(fn: ast.AST, name: str) -> bool:
        a = getattr(fn, "args", None)
        if a is None:
            return False
        names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                 if x is not None]
        return name in names

    def _call_kind(self, e: ast.Call, scope: Scope, line: int, depth: int) -> Kind | None:
        f = e.func
        if isinstance(f, ast.Attribute):
            if f.attr in SELF_RETURNING:
                inner = self._kind(f.value, scope, line, depth + 1)
                if inner is not None and inner.what == MODULE:
                    return inner
            if f.attr in ("parameters", "named_parameters"):
                owner = dotted(f.value)
                return Kind(PARAMS, over=frozenset({owner}) if owner else frozenset(), node=e)
        q = self.ctx.qualified_name(f) or ""
        if isinstance(f, ast.Name) and scope.binding_before(f.id, line) is None and \
                (d := argument_default(f.id, scope.node)) is not None:
            q = self.ctx.qualified_name(d) or q  # `optimizer_class=optim.Adam`, called
        last = q.rpartition(".")[2]
        if q.startswith("torch."):
            return self._torch_kind(q, last, e, scope, line, depth)
        if q in LOADERS:
            return Kind(LOADER, node=e)
        local = isinstance(f, ast.Name) and self._rebound(f.id, scope, line)
        chosen = scope.binding_before(f.id, line) if local else None  # type: ignore[union-attr]
        if self._optimizer_class_chosen(chosen.value if chosen is not None else f):
            over = self._param_owners(e, scope, line, depth)  # NOTE [optimizer class given]
            return Kind(OPTIMIZER, over=over, node=e)
        if isinstance(f, ast.Name) and not local:
            cls = self.classes.get(f.id)
            if cls is None and scope.node is not self.ctx.tree \
                    and self._is_param(scope.node, f.id) \
                    and (handed := handed_class(self, scope.node, f.id)) is not None:
                cls = self.classes[handed]  # NOTE [class handed in]
            if cls is not None:
                if torch_base(self.ctx, self.classes, cls.node) == SCHEDULER:
                    return Kind(SCHEDULER, node=e)  # `class WarmupLR(LambdaLR)`
                return Kind(MODULE if cls.is_module else OBJECT, cls=cls.name, node=e)
        if isinstance(f, ast.Name) and is_undefined(self.ctx, f.id):
            return Kind(OBJECT, node=e)  # raises NameError: no value, no module
        if q.startswith(MODEL_FACTORIES) and last[:1].islower():
            return Kind(MODULE, cls=q, node=e)
        if last == "from_pretrained" and isinstance(f, ast.Attribute):
            owner = (dotted(f.value) or "").rpartition(".")[2]
            if is_pretrained_model_class(owner):
                return Kind(MODULE, cls=q.rpartition(".")[0], node=e)
        fn = self.callee(e, scope.node) or held_method(self, e, scope, line, depth)
        if fn is not None and not local:
            return self._through(fn, e, scope, line, depth)
        if not local and fn is None and isinstance(f, (ast.Name, ast.Attribute)) and \
                foreign_asked(self.class_of(scope.node), e) and \
                (k := foreign_module_kind(self.ctx, e, scope, line)) is not None:
            return k  # NOTE [foreign module kinds]
        if isinstance(f, ast.Name) and (e.args or e.keywords) and scope.node is not \
                self.ctx.tree and self._is_param(scope.node, f.id) and not local and \
                (over := self._param_owners(e, scope, line, depth)):
            return Kind(OPTIMIZER, over=over, node=e)  # NOTE [optimizer class given]
        return None

    def _optimizer_class_chosen(self, v: ast.AST | None) -> bool:
        """``{"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[key]`` or
        ``getattr(torch.optim, name)``: a torch optimizer class chosen at run time."""
        if isinstance(v, ast.Subscript) and isinstance(v.value, ast.Dict) and v.value.values:
            return all((self.ctx.qualified_name(x) or "").startswith("torch.optim.")
                       and (self.ctx.qualified_name(x) or "").count(".") == 2
                       for x in v.value.values)
        return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) \
            and v.func.id == "getattr" and len(v.args) >= 2 \
            and self.ctx.qualified_name(v.args[0]) == "torch.optim"

    @staticmethod
    def _rebound(name: str, scope: Scope, line: int) -> bool:
        """Whether ``name`` is bound in ``scope`` to something else than a def or class."""
        b = scope.binding_before(name, line)
        return b is not None and not isinstance(b.stmt, (*DEFS, ast.ClassDef))

    def _torch_kind(self, q: str, last: str, e: ast.Call, scope: Scope, line: int,
                    depth: int) -> Kind | None:
        if q == "torch.nn.Parameter":
            return Kind(PARAMETER, node=e)
        if q.startswith(LEGACY):
            return Kind(OBJECT, cls=q, node=e)
        if q == "torch.nn.Buffer":
            return Kind(BUFFER, node=e)
        if q.startswith("torch.nn.") and last[:1].isupper() and q not in NOT_MODULES \
                and ".functional." not in q and ".init." not in q and ".utils." not in q:
            return Kind(MODULE, cls=q, node=e)
        if q.startswith("torch.optim.lr_scheduler."):
            return Kind(SCHEDULER, node=e)
        if q.startswith("torch.optim.") and last[:1].isupper() and q.count(".") == 2:
            return Kind(OPTIMIZER, over=self._param_owners(e, scope, line, depth), node=e)
        if q in LOADERS:
            return Kind(LOADER, node=e)
        if q in TENSOR_FACTORIES:
            asks = any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                       and k.value.value is True for k in e.keywords)
            return Kind(TENSOR, requires_grad=asks, node=e)
        return None

    def _param_owners(self, e: ast.Call, scope: Scope, line: int, depth: int
                      ) -> frozenset[str]:
        """Dotted owners of the parameters an optimizer call is given (``model``,
        ``self.enc``), also through a name bound to ``list(model.parameters())``."""
        out: set[str] = set()
        todo = [*e.args[:1], *(k.value for k in e.keywords if k.arg == "params")]
        seen: set[str] = set()
        while todo:
            for n in bfs_walk(todo.pop()):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr in ("parameters", "named_parameters"):
                    owner = dotted(n.func.value)
                    if owner:
                        out.add(owner)
                elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) \
                        and n.id not in seen:
                    seen.add(n.id)  # `params = list(model.parameters())`
                    todo += _grown_values(scope, n.id, line)
        return frozenset(out)


def _grown_values(scope: Scope, name: str, line: int) -> list[ast.expr]:
    """The values a list name holds at ``line`` (NOTE [grown parameter list])."""
    # NOTE [grown parameter list]
    # ``ps = list(model.named_parameters())``, then ``ps += list(head.named_parameters())``
    # (under a flag, maybe): the optimizer built over ``ps`` holds both. The last binding
    # alone is the last ``+=``; every earlier one back to the plain assignment it grows
    # counts too (yin-gz's group link prediction: a clip of ``model`` read as the clip of
    # parameters the optimizer does not hold, GT549).
    out: list[ast.expr] = []
    for b in reversed(scope.bindings_before(name, line)):
        if b.value is not None:
            out.append(b.value)
        if not isinstance(b.stmt, ast.AugAssign):
            break
    return out


def unpacked_value(b: Binding, name: str) -> ast.expr | None:
    """The value of binding ``b``; for ``a, b = X(), Y()`` the element paired with ``name``."""
    if b.value is not None:
        return b.value
    s = b.stmt
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and \
            isinstance(s.targets[0], (ast.Tuple, ast.List)) and \
            isinstance(s.value, (ast.Tuple, ast.List)) and \
            len(s.targets[0].elts) == len(s.value.elts) and \
            not any(isinstance(e, ast.Starred) for e in (*s.targets[0].elts, *s.value.elts)):
        for t, v in zip(s.targets[0].elts, s.value.elts):
            if dotted(t) == name:
                return v
    return None


__all__ = ["Analysis", "BUFFER", "CONTAINER", "TENSOR", "PARAMETER"]


def _in_caller_terms(k: Kind | None, receiver: ast.expr) -> Kind | None:
    """An attribute's kind read through an instance (``self.critic.optimizer``, its class
    making ``self.optimizer = Adam(self.parameters())``): the owners its class names as
    ``self``/``self.<x>`` are the receiver's (``self.critic``), not the reader's ``self``."""
    r = dotted(receiver)
    if k is None or not k.over or r is None or r == "self":
        return k
    over = frozenset(r + o[4:] if o == "self" or o.startswith("self.") else o for o in k.over)
    return k if over == k.over else replace(k, over=over)


def _object_rooted(defs: list[ast.ClassDef]) -> set[str]:
    """The classes whose every base is ``object`` or such a class of the file: ``class
    Attack(object)`` with a ``forward`` of its own and ``class PGD(Attack)`` are no modules,
    whatever their methods are called (NOTE [plain classes])."""
    by_name = {c.name: c for c in defs}
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for c in defs:
            if c.name not in out and c.bases and not c.keywords and all(
                    isinstance(b, ast.Name) and (b.id == "object" or b.id in out
                                                 and b.id in by_name) for b in c.bases):
                out.add(c.name)
                changed = True
    return out
