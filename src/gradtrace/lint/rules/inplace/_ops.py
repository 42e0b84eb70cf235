"""Which ops and modules save their output for backward, and what a module call of a class
returns (through :func:`gradtrace.lint.analysis.module_outputs.built`, NOTE [module results]).

Shared by :mod:`._saved` (GT602/GT603); see the package docstring for the op table.
"""
from __future__ import annotations

import ast
from typing import Any, Iterator

from gradtrace.lint.analysis.appended import first_block
from gradtrace.lint.analysis.module_results import EXPR, INPUT, LIB, Built, built
from gradtrace.lint.analysis.vocabulary import METRIC_LIBRARIES, OTHER_FRAMEWORKS
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.leaf._tensors import node_mentions

SAVED_OUT = {  # op -> family ("sig": GT602 for any write, "relu": GT603 for +=, GT602 else)
    "sigmoid": "sig", "tanh": "sig", "exp": "sig", "expm1": "sig", "softmax": "sig",
    "log_softmax": "sig", "sqrt": "sig", "rsqrt": "sig", "reciprocal": "sig", "expit": "sig",
    "sigmoid_": "sig", "tanh_": "sig", "exp_": "sig", "sqrt_": "sig",
    "relu": "relu", "relu_": "relu", "leaky_relu": "relu", "leaky_relu_": "relu",
    "elu": "relu", "elu_": "relu", "eigh": "sig",
}
# library layers whose backward reads their output (checked on torch 2.13 with `y = m(h);
# y += 1; y.sum().backward()`, which raises "... which is output 0 of <Op>"; see
# docs/triage/modret.md). LeakyReLU and ELU save their output only when in place
# (`inplace=True`, `F.leaky_relu_`): out of place they save their input, like GELU, SiLU,
# ReLU6/Hardtanh, Softplus, SELU, CELU, Mish, PReLU, LogSigmoid, Hardsigmoid, GLU.
SAVED_MODULES = {"torch.nn.Sigmoid": "sigmoid", "torch.nn.Tanh": "tanh",
                 "torch.nn.Softmax": "softmax", "torch.nn.LogSoftmax": "log_softmax",
                 "torch.nn.Softmin": "softmax", "torch.nn.ReLU": "relu",
                 "torch.nn.LeakyReLU": "leaky_relu", "torch.nn.ELU": "elu"}
ONLY_INPLACE = frozenset({"leaky_relu", "elu"})  # functional or module: saved when in place
VIEW_METHODS = frozenset({"view", "view_as", "squeeze", "unsqueeze", "permute", "transpose",
                          "t", "flatten", "unflatten", "narrow", "select", "expand"})
MODULE_WORDS = ("ReLU", "Sigmoid", "Tanh", "Softmax", "ELU")
PASS = "=input"  # a module that gives back its input (or a view of it): the argument decides


class _LazyModules:
    """``self.<attr>`` -> op of activation modules in a class, each attribute read on its first
    lookup (NOTE [module results]); ``elem(...)`` for the blocks of an ``nn.ModuleList``/
    ``ModuleDict`` attribute."""

    def __init__(self, cls: ast.ClassDef | None, ctx: Context, file_ok: bool) -> None:
        self.cls, self.ctx, self.file_ok = cls, ctx, file_ok
        self._entries: dict[str, tuple[str | None, bool, str | Built | None]] = {}
        self._inplace: dict[str, bool] = {}

    def _entry(self, name: str | None) -> tuple[str | None, bool, str | Built | None]:
        """(op, a container, the op some block ends in) of ``self.<name>``."""
        if not name or not name.startswith("self.") or not self.file_ok:
            return None, False, None
        got = self._entries.get(name)
        if got is None:
            self._entries[name] = (None, False, None)  # a class that builds itself saves nothing
            got = self._entries[name] = _module_attr(self.cls, name[5:], self.ctx)
        return got

    def inplace(self, name: str | None) -> bool:
        """Whether ``self.<name>`` writes its input in place: an activation module built with
        ``inplace=True`` (or another layer of :data:`INPLACE_LAYERS`: ``nn.Dropout(p,
        inplace=True)``), or a Sequential that starts with one."""
        if not name or not name.startswith("self.") or not self.file_ok:
            return False
        got = self._inplace.get(name)
        if got is None and not self._init_says_true():
            got = self._inplace[name] = False  # no `inplace=True` / `ReLU(True)` possible
        if got is None:
            v = _init_value(self.cls, name[5:], self.ctx)
            first = _first_layer(v, self.ctx) if v is not None else None
            got = self._inplace[name] = first is not None and (bool(SAVED_MODULES.get(
                self.ctx.qualified_name(first.func) or "")) and _inplace_flag(
                first, len(first.args) - 1 if first.args else 0)
                or _writes_input(first, self.ctx))  # `nn.Dropout(p, inplace=True)` too
        return got

    def _init_says_true(self) -> bool:
        """Whether the class's ``__init__`` (where :func:`_init_value` finds every value)
        spells ``True`` in its code: an in-place flag is a literal ``True`` there, so without
        one no attribute is built in place, and the class's attributes need not be read."""
        cls, ctx = self.cls, self.ctx
        info = ctx.analysis.classes.get(cls.name) if cls is not None else None
        init = info.methods.get("__init__") if info is not None else None
        return init is not None and node_mentions(ctx, init, "True")

    def get(self, name: str | None) -> str | None:
        op, container, _ = self._entry(name)
        return None if container else op

    def elem(self, name: str | None) -> str | None:
        """The op each block of the container ``self.<name>`` ends in."""
        op, container, _ = self._entry(name)
        return op if container else None

    def first(self, name: str | None) -> str | None:
        """The op block 0 of the container ``self.<name>`` ends in, the container made empty in
        ``__init__`` and filled by ``append`` (NOTE [first appended block])."""
        if not name or not name.startswith("self.") or not self.file_ok or self.cls is None:
            return None
        v = _init_value(self.cls, name[5:], self.ctx)
        info = self.ctx.analysis.classes.get(self.cls.name)
        init = info.methods.get("__init__") if info is not None else None
        if v is None or v.args or v.keywords or init is None:
            return None
        block = first_block(v, self.ctx, init)
        got = built(block, self.ctx, init) if block is not None else None
        return built_op(got, self.ctx) if got is not None and not got.container else None

    def some(self, name: str | None) -> str | None:
        """The op one block of the container ``self.<name>`` ends in, when the others end in
        no op that saves its output (a loop over every block runs that one too)."""
        _, container, op = self._entry(name)
        if isinstance(op, Built):  # read on first use: few containers are written in a loop
            op = _some_op(op, self.ctx)
            self._entries[name] = (*self._entries[name][:2], op)  # type: ignore[index]
        return op if container else None  # type: ignore[return-value]


def _has_module_word(text: str) -> bool:
    return any(w in text for w in MODULE_WORDS)


def _init_value(cls: ast.ClassDef | None, attr_name: str, ctx: Context) -> ast.Call | None:
    """The call ``__init__`` assigns once to ``self.<attr_name>`` (``self.fc, self.act =
    nn.Linear(c, c), nn.ReLU()`` too), else None."""
    info = ctx.analysis.classes.get(cls.name) if cls is not None else None
    init = info.methods.get("__init__") if info is not None else None
    attr = info.attrs.get(attr_name) if info is not None and info.node is cls else None
    if attr is None or init is None or attr.method is not init or attr.later:
        return None
    if isinstance(attr.value, ast.Name):
        return _default_module(init, attr.value.id, ctx)  # NOTE [module given by a default]
    return attr.value if isinstance(attr.value, ast.Call) else None


def _default_module(init: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                    ctx: Context) -> ast.Call | None:
    """# NOTE [module given by a default]
    ``def __init__(self, c_in, c_out, act=ReLU()): ... self.act = act``: the module the
    parameter's default builds is ``self.act`` of every instance the file builds without
    passing it; an instance given a constant None runs no module (the class tests
    ``self.act is not None`` before calling it). The default call, when every construction of
    the class in the file passes nothing or None for the parameter (None when one passes
    another value, or arguments unpacked with ``*``/``**``)."""
    a = init.args
    pos = [x.arg for x in (*a.posonlyargs, *a.args)]
    if name in pos:
        i = pos.index(name)
        d = a.defaults[i - (len(pos) - len(a.defaults))] if i >= len(pos) - len(a.defaults) \
            else None
    else:
        kw = [x.arg for x in a.kwonlyargs]
        d = a.kw_defaults[kw.index(name)] if name in kw else None
        i = -1
    if not isinstance(d, ast.Call):
        return None
    for call, _ in ctx.analysis.call_sites(init):
        if any(isinstance(x, ast.Starred) for x in call.args) \
                or any(k.arg is None for k in call.keywords):
            return None
        given = [k.value for k in call.keywords if k.arg == name]
        if 0 < i <= len(call.args):
            given.append(call.args[i - 1])  # `Cls(a, b)` binds from the parameter after self
        if any(not (isinstance(g, ast.Constant) and g.value is None) for g in given):
            return None
    return d


def given_module(init: ast.FunctionDef | ast.AsyncFunctionDef, name: str, ctx: Context,
                 depth: int = 0) -> tuple[ast.Call, ast.AST | None] | None:
    """# NOTE [module given by the builder]
    ``def __init__(self, d, act): ... self.act = act``, the class built in the file as
    ``Block(d, nn.ReLU())``: (the module every construction of the class in the file passes
    for ``name``, the function the value is read in). A site that passes a constant None
    runs no module (the class tests ``self.act is not None``); a site that passes a
    parameter of its own ``__init__`` (``ARMAConv(d, h, activation)`` in ``Net.__init__``)
    is that class's given module, one level further (at most 2). None when a site passes
    nothing, unpacks arguments, or two sites pass modules built differently."""
    a = init.args
    pos = [x.arg for x in (*a.posonlyargs, *a.args)]
    kw = {x.arg for x in a.kwonlyargs}
    if (name not in pos or pos.index(name) == 0) and name not in kw:
        return None
    i = pos.index(name) if name in pos else -1
    found: list[tuple[ast.Call, ast.AST | None]] = []
    for call, where in ctx.analysis.call_sites(init):
        if any(isinstance(x, ast.Starred) for x in call.args) \
                or any(k.arg is None for k in call.keywords):
            return None
        given = [k.value for k in call.keywords if k.arg == name]
        if 0 < i <= len(call.args):
            given.append(call.args[i - 1])
        if len(given) != 1:
            return None  # left to its default (NOTE [module given by a default]) or unknown
        g = given[0]
        fn = where if isinstance(where, FUNCTION_TYPES) else None
        if isinstance(g, ast.Constant) and g.value is None:
            continue
        if isinstance(g, ast.Name):
            outer = ctx.analysis.class_of(fn)
            scope = ctx.scope(fn or ctx.tree)
            b = scope.binding_before(g.id, call.lineno)
            if b is not None and isinstance(b.stmt, ast.Assign) and isinstance(b.value, ast.Call):
                g = b.value
            elif b is None and fn is not None and fn.name == "__init__" and outer is not None \
                    and depth < 1:
                got = given_module(fn, g.id, ctx, depth + 1)
                if got is None:
                    return None
                found.append(got)
                continue
        if not isinstance(g, ast.Call):
            return None
        found.append((g, fn))
    if not found or len({ast.dump(c) for c, _ in found}) > 1:
        return None
    return found[0]


def _module_attr(cls: ast.ClassDef | None, attr_name: str,
                 ctx: Context) -> tuple[str | None, bool, str | Built | None]:
    """(saved-output op, container, the op of some block, or what the blocks build when it is
    still to be read) for the module of
    ``self.<attr_name>`` (:func:`_init_value`, else NOTE [module given by the builder]),
    whose result an op that saves it makes (NOTE [module results])."""
    info = ctx.analysis.classes.get(cls.name) if cls is not None else None  # None: nested
    init = info.methods.get("__init__") if info is not None else None
    v: ast.AST | None = _init_value(cls, attr_name, ctx)
    where: ast.AST | None = init
    if v is None and info is not None and init is not None:
        attr = info.attrs.get(attr_name) if info.node is cls else None
        given = given_module(init, attr.value.id, ctx) if attr is not None \
            and attr.method is init and not attr.later and isinstance(attr.value, ast.Name) \
            else None
        if given is not None:
            v, where = given
    if v is None:
        return None, False, None
    got = built(v, ctx, where)
    if got is None:
        return None, False, None
    op = built_op(got, ctx)
    return op, got.container, op if op is not None or not got.container else got


def _some_op(got: Built, ctx: Context) -> str | None:
    """The one saved-output op that some of the possible results make, the others making
    none (their op unknown, or not one that saves its output); None when two differ."""
    ops = {built_op(Built((m,), False), ctx) for m in got.makes} - {None, PASS}
    return ops.pop() if len(ops) == 1 else None


def built_op(got: Built, ctx: Context) -> str | None:
    """The saved-output op that makes every possible result of a module (the same op on every
    ``return`` the constructor leaves possible), :data:`PASS` when every one is the module's
    input, else None."""
    ops: set[str | None] = set()
    for m in got.makes:
        if m.how == LIB:
            op = SAVED_MODULES.get(m.qname)
            ops.add(None if op in ONLY_INPLACE and not _inplace_flag(m.node, 1) else op)
        elif m.how == INPUT:
            ops.add(PASS)
        elif m.how == EXPR:
            info = ctx.analysis.class_of(m.fn)
            mods = ctx.memo("gt6-modules-all", info.node, lambda: _LazyModules(
                info.node, ctx, True)) if info is not None else _LazyModules(None, ctx, False)
            ops.add(_op_of_call(m.node, ctx, mods))
        if None in ops or len(ops) > 1:
            return None
    return ops.pop() if ops else None


def _inplace_flag(call: ast.AST, pos: int) -> bool:
    """``inplace=True`` given to ``call`` (or ``True`` as its ``pos``-th positional argument)."""
    if not isinstance(call, ast.Call):
        return False
    for k in call.keywords:
        if k.arg == "inplace":
            return isinstance(k.value, ast.Constant) and k.value.value is True
    return len(call.args) > pos and isinstance(call.args[pos], ast.Constant) \
        and call.args[pos].value is True


def _first_layer(call: ast.Call, ctx: Context) -> ast.Call | None:
    """``nn.Sequential(nn.ReLU(inplace=True), conv)`` -> the ``nn.ReLU(...)`` call (what
    first touches the Sequential's input); any other call is itself (None: not a call)."""
    while ctx.qualified_name(call.func) == "torch.nn.Sequential" and call.args \
            and not call.keywords:
        if not isinstance(call.args[0], ast.Call):
            return None
        call = call.args[0]
    return call


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body, nested blocks included, nested defs excluded."""
    for s in body:
        yield s
        if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
            continue
        for f in ("body", "orelse", "finalbody"):
            sub = getattr(s, f, None)
            if sub:
                yield from _statements(sub)
        for h in getattr(s, "handlers", ()):
            yield from _statements(h.body)


def module_call_op(call: ast.Call, ctx: Context, modules: _LazyModules,
                   scope: object = None, within: ast.stmt | None = None) -> str | None:
    """The op whose output a module call gives back: ``self.act(x)``, ``self.blocks[i](x)``,
    ``blk(x)`` with ``for blk in self.blocks`` (or ``for i, blk in enumerate(self.blocks)``;
    ``scope``: the function's data flow; with ``within``, a statement inside that loop, the op
    of one block is enough: the loop runs every block); through a module that returns its
    input, the argument's op."""
    f = call.func
    if isinstance(f, ast.Subscript):
        op = modules.elem(dotted(f.value))
        if op is None and isinstance(f.slice, ast.Constant) and f.slice.value == 0:
            op = modules.first(dotted(f.value))  # NOTE [first appended block]
    elif isinstance(f, ast.Name) and scope is not None:
        b = scope.binding_before(f.id, call.lineno + 1)  # type: ignore[attr-defined]
        loop = b.stmt if b is not None and isinstance(b.stmt, (ast.For, ast.AsyncFor)) else None
        it = _blocks_iterated(loop, f.id) if loop is not None else None
        every = within is not None and loop is not None \
            and loop.lineno <= within.lineno <= (loop.end_lineno or 0)
        op = None if it is None else modules.some(dotted(it)) if every \
            else modules.elem(dotted(it))
        if loop is None:
            op = local_module_op(local_module(f, call.lineno, scope), ctx, scope)
    else:
        op = modules.get(dotted(f))
    if op == PASS:
        return _op_of_call(call.args[0], ctx, modules, scope) if len(call.args) == 1 else None
    return op


def local_module(f: ast.Name, line: int, scope: object) -> ast.Call | None:
    """The call a local name is bound to before ``line`` (``relu1 = nn.ReLU(inplace=True)``,
    ``net = Net()`` in a script or a function), when one plain assignment binds it there."""
    b = scope.binding_before(f.id, line + 1)  # type: ignore[attr-defined]
    if b is None or not isinstance(b.stmt, ast.Assign) or len(b.stmt.targets) != 1 \
            or not isinstance(b.stmt.targets[0], ast.Name) or not isinstance(b.value, ast.Call):
        return None
    return b.value


def local_module_op(v: ast.Call | None, ctx: Context, scope: object) -> str | None:
    """The saved-output op whose output the module built by ``v`` gives back
    (NOTE [module results]); None when not known or a container."""
    if v is None:
        return None
    fn = scope.node  # type: ignore[attr-defined]
    got = built(v, ctx, None if isinstance(fn, ast.Module) else fn)
    return built_op(got, ctx) if got is not None and not got.container else None


def _blocks_iterated(loop: ast.For | ast.AsyncFor, name: str) -> ast.expr | None:
    """What ``loop`` takes the block ``name`` from: ``for name in X`` or ``for i, name in
    enumerate(X)`` give ``X``."""
    t, it = loop.target, loop.iter
    if isinstance(t, ast.Name):
        return it if t.id == name else None
    if isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[1], ast.Name) \
            and t.elts[1].id == name and isinstance(it, ast.Call) \
            and dotted(it.func) == "enumerate" and len(it.args) == 1 and not it.keywords:
        return it.args[0]
    return None


# roots of array libraries whose functions of the same names (`np.exp`, `math.sqrt`) compute
# on their own arrays or numbers: no autograd node saves their output
ARRAY_LIBRARIES = frozenset({"numpy", "math", "cupy", *METRIC_LIBRARIES, *OTHER_FRAMEWORKS})


def _op_of_call(call: ast.AST, ctx: Context, modules: _LazyModules,
                scope: object = None) -> str | None:
    """The saved-output op a call applies (through views), or None."""
    while isinstance(call, (ast.Call, ast.Subscript)):
        if isinstance(call, ast.Subscript):
            call = call.value
            continue
        f = call.func
        q = ctx.qualified_name(f) or ""
        last = q.rpartition(".")[2]
        if (q.startswith(("torch.", "torch.nn.functional.", "torch.special."))
                and last in SAVED_OUT):
            return None if last in ONLY_INPLACE and not _inplace_flag(call, 2) else last
        if isinstance(f, ast.Attribute):
            if f.attr in SAVED_OUT and not q.startswith("torch.") and \
                    not (dotted(f) or "").startswith("self.") and \
                    q.partition(".")[0] not in ARRAY_LIBRARIES:  # `np.exp(a)`: no tensor
                return None if f.attr in ONLY_INPLACE else f.attr  # tensor method: x.sigmoid()
            if f.attr in VIEW_METHODS:
                call = f.value
                continue
        return module_call_op(call, ctx, modules, scope)
    return None


# library layers that write their input in place when built with ``inplace=True`` (the
# argument's position): on torch 2.13 each raises at backward when it follows a layer that
# saved its output (ReLU, Sigmoid...), Dropout in training mode (AlphaDropout and
# FeatureAlphaDropout do not write in place)
INPLACE_LAYERS = {"torch.nn." + k: v for k, v in {
    "ReLU": 0, "ReLU6": 0, "SiLU": 0, "Mish": 0, "SELU": 0, "Hardswish": 0, "Hardsigmoid": 0,
    "LeakyReLU": 1, "ELU": 1, "CELU": 1, "Hardtanh": 2, "Threshold": 2, "RReLU": 2,
    "Dropout": 1, "Dropout1d": 1, "Dropout2d": 1, "Dropout3d": 1}.items()}


def _writes_input(layer: ast.AST, ctx: Context) -> bool:
    """``layer`` builds a library layer that writes its input in place (``nn.Dropout(p,
    inplace=True)`` with ``p`` not a literal 0, ``nn.ReLU(inplace=True)``...)."""
    if not isinstance(layer, ast.Call):
        return False
    pos = INPLACE_LAYERS.get(ctx.qualified_name(layer.func) or "")
    if pos is None or not _inplace_flag(layer, pos):
        return False
    p = next((k.value for k in layer.keywords if k.arg == "p"),
             layer.args[0] if layer.args and pos == 1 else None)
    return not ("Dropout" in (ctx.qualified_name(layer.func) or "")
                and isinstance(p, ast.Constant) and not p.value)


def inplace_local(f: ast.Name, line: int, ctx: Context, scope: Any) -> ast.Call | None:
    """The layer that writes its input in place (``nn.ReLU(inplace=True)``, ``nn.Dropout(p,
    inplace=True)``, a Sequential starting with one) that the local name ``f`` is bound to."""
    v = local_module(f, line, scope)
    first = _first_layer(v, ctx) if v is not None else None
    return first if first is not None and _writes_input(first, ctx) else None
