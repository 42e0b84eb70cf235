"""GT521: a tensor computed once in `__init__` from the module's own parameters.

# NOTE [graph built at construction]
``self.scale = torch.exp(self.log_scale)`` in ``__init__`` runs once, with grad enabled: the
attribute is a non-leaf whose graph reaches the Parameter. Every forward then reuses that one
graph: the first ``backward()`` frees its saved tensors, so the second raises ``Trying to
backward through the graph a second time``; and its value never follows the optimizer's
updates of the Parameter. The same holds for a registered submodule called in ``__init__``
(``self.table = self.embed(ids)``): a torch layer with weights, a module class of the file that
holds layers, or a layer every caller of the class passes to the constructor
(``self.embedding = embedding; self.mask_e = self.embedding(mask_id)``, SoftMaskedBert#16). Said only when the attribute is assigned nowhere else and
read by another method, the value reaches the Parameter through operations that keep the
graph (not ``.shape``, ``.detach()``, ``.item()``, ``.data``...), not through views only
(a view of a Parameter shares its storage and saves nothing), and outside ``torch.no_grad()``.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._modules import PARAM_LAYER_RE
from gradtrace.lint.rules.training_loop._init_values import THEN, saves_nothing
from gradtrace.lint.analysis.calls import ascii_code
from gradtrace.lint.nodes import bfs_walk, child_nodes, of_types
from gradtrace.lint.rules.training_loop._init_live import CUT_FUNCS, CUT_METHODS, META_ATTRS, _live


def _called_attrs(init: ast.FunctionDef, ctx: Context) -> frozenset[str]:
    """The ``self.<x>(...)`` that ``__init__`` calls (computed once per ``__init__``): only
    those attributes need to be known as layers."""
    return ctx.memo("gt521-called", init, lambda: frozenset(
        n.func.attr for n in of_types(init, (ast.Call,))
        if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "self"))


def _called(init: ast.FunctionDef, attr: str, ctx: Context) -> bool:
    """Whether ``__init__`` calls ``self.<attr>(...)``, for an ``attr`` it assigns: the call
    and the assignment each write ``.attr`` in ``__init__``'s code, so where it is written
    once, ``__init__`` need not be walked (NOTE [word gates])."""
    if ascii_code(ctx):
        code = ctx.memo("gt521-init-code", init, lambda: "\n".join(
            ctx.code_lines[init.lineno - 1:init.end_lineno]))
        if _dotted_count(code, attr) < 2:
            return False
    return attr in _called_attrs(init, ctx)


def _dotted_count(code: str, attr: str) -> int:
    """How often the whole word ``attr`` follows a ``.`` in ``code`` (up to 2; blanks, line
    ends, continuations and emptied comments may lie between them)."""
    n, size, found = len(code), len(attr), 0
    pos = code.find(attr)
    while pos != -1 and found < 2:
        end = pos + size
        j = pos - 1
        while j >= 0 and code[j] in " \t\n\r\f\\#":
            j -= 1
        if j >= 0 and code[j] == "." and (
                end == n or not (code[end].isalnum() or code[end] == "_")):
            found += 1
        pos = code.find(attr, end)
    return found


def _is_param(init: ast.FunctionDef, name: str) -> bool:
    a = init.args
    return any(x.arg == name for x in (*a.posonlyargs, *a.args, *a.kwonlyargs))


def _module_argument(init: ast.FunctionDef, name: str, ctx: Context) -> bool:
    """``name`` is a parameter of ``__init__`` to which every call of the class in the file
    passes a module with weights (``SoftMaskedBert(embedding, ...)`` with ``embedding =
    BertEmbeddings(...)``): calling it in ``__init__`` runs those weights."""
    if not _is_param(init, name):
        return False
    vals = ctx.analysis.argument_values(init, name)
    if not vals:
        return False
    for v, where in vals:
        k = ctx.analysis.kind_in(v, where, getattr(v, "lineno", 0) or 10 ** 9)
        if k is None or k.what != "module":
            return False
    return True


def _weighted_class(name: str, ctx: Context) -> bool:
    """A module class of this file that registers a layer or a parameter."""
    info = ctx.analysis.classes.get(name)
    return info is not None and info.is_module and any(
        info.registered(a) and (info.attr_kind(a) or None) is not None
        and info.attr_kind(a).what in ("module", "parameter")  # type: ignore[union-attr]
        for a in info.attrs)


def _read_elsewhere(info: ClassInfo, name: str, init: ast.AST,
                    skip: ast.AST | None = None) -> ast.AST | None:
    """A read of ``self.<name>`` in a method other than ``__init__`` (and ``skip``) (None if
    it is also assigned there, or never read)."""
    read = None
    for m in info.methods.values():
        if m is init or m is skip:
            continue
        for n in bfs_walk(m):
            if isinstance(n, ast.Attribute) and n.attr == name and \
                    isinstance(n.value, ast.Name) and n.value.id == "self":
                if not isinstance(n.ctx, ast.Load):
                    return None
                read = read or n
    return read


class GraphBuiltInInit(Rule):
    """A tensor attribute is computed in `__init__` from the module's own parameters (or by
    calling one of its layers), then used by `forward`.

    Why: `__init__` runs once, so `self.scale = torch.exp(self.log_scale)` is one non-leaf
    tensor whose graph every forward reuses: the first `backward()` frees that graph and the
    second raises `RuntimeError: Trying to backward through the graph a second time`; and
    the value never follows the optimizer's updates of the parameter (pytorch/pytorch#7485
    style GP kernels). Compute it where it is used: in `forward`, or in a property.
    Parameters stacked or concatenated (`torch.stack([self.dx, self.dy], 1)`, kornia#682) make
    such a value too: it saves nothing, so nothing raises, and the warp never moves.
    Known limits: the attribute must be assigned only in `__init__` and read in another
    method; values reaching the parameter only through views (`self.w.t()`) are left alone.
    """

    code = "GT521"
    gate_statements = True
    name = "graph-built-in-init"
    message = ("`self.{attr}` is computed once, in `__init__`, from `self.{src}`: every "
               "forward reuses this one value and graph, so it never follows the optimizer's "
               "updates of `self.{src}`{then}; compute it in `forward` (or a property)")
    triggers = ("__init__",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Kernel(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.log_scale = nn.Parameter(torch.zeros(d))
                    self.scale = torch.exp(self.log_scale)
                def forward(self, x):
                    return x / self.scale
            """, at=(7, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Kernel(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.log_scale = nn.Parameter(torch.zeros(d))
                    self.d = self.log_scale.shape[0]
                    self.w_t = self.log_scale.view(1, d)
                    with torch.no_grad():
                        self.init_scale = torch.exp(self.log_scale)
                    self.scale = torch.exp(self.log_scale)
                def forward(self, x):
                    self.scale = torch.exp(self.log_scale)
                    return x / self.scale * self.d + self.w_t.sum() + self.init_scale.sum()
            """),
        Bad("""
            import torch.nn as nn
            class Tagger(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.proj = nn.Linear(n, n)
                    self.setup_prior([self.proj.weight, self.proj.bias])
                def setup_prior(self, tensors):
                    total = 0.0
                    for t in tensors:
                        total = total + t.pow(2).sum()
                    self.prior = 0.5 * total
                def forward(self, x):
                    return self.proj(x).sum() + self.prior
            """, at=(6, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Tagger(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.proj = nn.Linear(n, n)
                    self.setup_prior(self.proj.weight)
                    self.record(self.proj.weight)
                    self.init_weights(self.proj)
                def setup_prior(self, w):
                    with torch.no_grad():
                        self.prior = (w ** 2).sum() * 0.5
                def record(self, w):
                    self.n_out = w.shape[0]
                    self.w0 = w.detach().norm()
                def init_weights(self, m):
                    nn.init.zeros_(m.bias)
                def forward(self, x):
                    return self.proj(x).sum() + self.prior + self.n_out + self.w0
            """),
        Bad("""
            import torch
            import torch.nn as nn
            class Shift(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.dx = nn.Parameter(torch.zeros(1))
                    self.dy = nn.Parameter(torch.zeros(1))
                    self.shift = torch.stack([self.dx, self.dy], 1)
                def forward(self, pts):
                    return pts + self.shift
            """, at=(8, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Shift(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.dx = nn.Parameter(torch.zeros(1))
                    self.dy = nn.Parameter(torch.zeros(1))
                    self.pair = nn.ParameterList([self.dx, self.dy])
                def forward(self, pts):
                    return pts + torch.stack([self.dx, self.dy], 1) + self.pair[0]
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        init = next((m for m in node.body if isinstance(m, ast.FunctionDef)
                     and m.name == "__init__"), None)
        if init is None:
            return
        # (NOTE [graph built at construction])
        seen: set[str] = set()  # `self.a = ...` of __init__'s top level so far
        params: set[str] = set()  # ... of them, the parameters and layers with weights
        mods: set[str] = set()
        nets: dict[str, ast.Call] = {}  # ... built by a class-like call
        for s in init.body:
            if isinstance(s, ast.Expr) and nets:
                yield from _helper_call(self, node, init, s.value, nets, ctx)
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
                continue
            t = s.targets[0]
            if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id == "self") or t.attr in seen:
                continue
            seen.add(t.attr)
            v = s.value
            if not isinstance(v, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Name)):
                continue
            if (params or mods) and "self." in "".join(
                    ctx.code_lines[s.lineno - 1:s.end_lineno]):  # (reads an attribute)
                got = _live(v, params, mods, ctx)  # (before the kind: it rarely reaches one)
                if got is not None and not got[1] and not _builds_module(v, init, s, ctx):
                    yield from self._confirm(node, init, s, t.attr, got[0], ctx)
                    continue
            if isinstance(v, ast.Name) and _is_param(init, v.id) \
                    and _called(init, t.attr, ctx) and _module_argument(init, v.id, ctx):
                mods.add(t.attr)  # `self.embedding = embedding`, given a layer by every caller
                continue
            f = v.func if isinstance(v, ast.Call) else None
            last = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if last[:1].isupper():
                nets[t.attr] = v  # (a torch.nn class? asked only when a helper gets it)
                if isinstance(f, ast.Name) and f.id in ctx.analysis.classes \
                        and _called(init, t.attr, ctx) and _weighted_class(f.id, ctx):
                    mods.add(t.attr)  # a module class of this file holding layers
            if last == "Parameter" or PARAM_LAYER_RE.match(last):  # (before the costly names)
                q = ctx.call_name(v) or ""
                if q == "torch.nn.Parameter":
                    params.add(t.attr)
                elif q.startswith("torch.nn.") and q.count(".") == 2:
                    mods.add(t.attr)  # a torch.nn layer with weights

    def _confirm(self, cls: ast.ClassDef, init: ast.AST, s: ast.Assign, attr: str, src: str,
                 ctx: Context) -> Iterator[Finding]:
        info = ctx.analysis.classes.get(cls.name)
        if info is None or not info.is_module or info.node is not cls:
            return
        a = info.attrs.get(attr)
        if a is None or a.stmt is not s or a.later:
            return
        read = _read_elsewhere(info, attr, init)
        if read is None:  # (a `with torch.no_grad():` block is not a top statement)
            return
        yield self.report(s, ctx, related=(Related(
            ctx.path, read.lineno, "used here on every call", ctx.column(read)),),
            attr=attr, src=src, then="" if saves_nothing(s.value, ctx) else THEN)


def _builds_module(v: ast.AST, init: ast.AST, s: ast.stmt, ctx: Context) -> bool:
    """``v`` constructs a module (``Predictor(w_rels=self.w_rels)``): it keeps the Parameter
    it is given, computes no tensor from it."""
    if not isinstance(v, ast.Call):
        return False
    k = ctx.analysis.kind_in(v, init, s.lineno)
    return k is not None and k.is_module


def _reaches_net(e: ast.AST, nets: set[str]) -> str | None:
    """The module attribute an argument hands over with its graph: ``self.emb``,
    ``self.emb.weight``, ``self.emb.parameters()`` (not ``.shape``, ``.detach()``...)."""
    while True:
        if isinstance(e, (ast.List, ast.Tuple)):
            return next((x for x in (_reaches_net(y, nets) for y in e.elts) if x), None)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and \
                e.func.id in ("list", "tuple") and len(e.args) == 1:
            e = e.args[0]
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                e.func.attr in ("parameters", "values") and not e.args:
            e = e.func.value
        elif isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and \
                e.value.id == "self":
            return e.attr if e.attr in nets else None
        elif isinstance(e, ast.Attribute) and e.attr not in META_ATTRS:
            e = e.value
        else:
            return None


def _tainted(m: ast.FunctionDef | ast.AsyncFunctionDef, start: set[str]) -> set[str]:
    """Local names of ``m`` computed from ``start`` (loop variables over them, assignments
    whose value reads them outside ``no_grad`` and cutting calls), to a fixed point."""
    names = set(start)
    stmts = [n for n in bfs_walk(m) if isinstance(n, (ast.Assign, ast.AugAssign, ast.For))]
    changed = True
    while changed:
        changed = False
        for n in stmts:
            src = n.iter if isinstance(n, ast.For) else n.value
            tgts = [n.target] if isinstance(n, (ast.For, ast.AugAssign)) else n.targets
            if not _reads(src, names):
                continue
            for t in tgts:
                for x in bfs_walk(t):
                    if isinstance(x, ast.Name) and x.id not in names:
                        names.add(x.id)
                        changed = True
    return names


def _reads(e: ast.AST, names: set[str]) -> bool:
    if isinstance(e, ast.Name):
        return e.id in names
    if isinstance(e, ast.Attribute) and e.attr in META_ATTRS:
        return False
    if isinstance(e, ast.Call):
        f = e.func
        if isinstance(f, ast.Attribute) and f.attr in CUT_METHODS - {"parameters"}:
            return False
        if isinstance(f, ast.Name) and f.id in CUT_FUNCS:
            return False
    return any(_reads(c, names) for c in child_nodes(e))


def _helper_call(rule: GraphBuiltInInit, cls: ast.ClassDef, init: ast.AST, call: ast.AST,
                 built: dict[str, ast.Call], ctx: Context) -> Iterator[Finding]:
    """``self.add_penalty(self.emb.parameters())`` in ``__init__``: a method of the class that
    stores, on ``self``, a tensor computed from the module's parameters it was handed
    (NOTE [graph built at construction], one call deep)."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"):
        return
    info = ctx.analysis.classes.get(cls.name)
    if info is None or not info.is_module or info.node is not cls:
        return
    m = info.methods.get(call.func.attr)
    if m is None or m is init or m.decorator_list:
        return
    nets = {a for a, v in built.items()  # any torch.nn module, container or Parameter
            if (ctx.call_name(v) or "").startswith("torch.nn.")}
    formal = [a.arg for a in m.args.posonlyargs + m.args.args][1:]
    start: dict[str, str] = {}
    for name, a in zip(formal, call.args):
        src = _reaches_net(a, nets)
        if src is not None:
            start[name] = src
    for k in call.keywords:
        src = _reaches_net(k.value, nets) if k.arg in formal else None
        if src is not None:
            start[k.arg] = src  # type: ignore[index]
    if not start:
        return
    names = _tainted(m, set(start))
    for s in bfs_walk(m):
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1):
            continue
        t = s.targets[0]
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                and t.value.id == "self") or not _reads(s.value, names):
            continue
        if ctx.scope(m).grad_off_at(s) is not None or _assigned_beyond(info, t.attr, (init, m)):
            continue
        read = _read_elsewhere(info, t.attr, init, skip=m) or _read_outside(ctx, cls, t.attr)
        if read is None:
            continue
        yield rule.report(call, ctx, related=(
            Related(ctx.path, s.lineno, f"`self.{t.attr}` is built here from them",
                    ctx.column(s)),
            Related(ctx.path, read.lineno, "used here on every call", ctx.column(read))),
            attr=t.attr, src=next(iter(start.values())), then=THEN)
        return


def _read_outside(ctx: Context, cls: ast.ClassDef, name: str) -> ast.AST | None:
    """``<obj>.<name>`` read in the file outside the class (``model.penalty``)."""
    inside = {id(n) for n in bfs_walk(cls)}
    return next((n for n in bfs_walk(ctx.tree) if isinstance(n, ast.Attribute)
                 and n.attr == name and isinstance(n.ctx, ast.Load) and id(n) not in inside),
                None)


def _assigned_beyond(info: ClassInfo, name: str, allowed: tuple[ast.AST, ...]) -> bool:
    for m in info.methods.values():
        if any(m is a for a in allowed):
            continue
        for n in bfs_walk(m):
            if isinstance(n, ast.Attribute) and n.attr == name and isinstance(
                    n.value, ast.Name) and n.value.id == "self" and not isinstance(n.ctx, ast.Load):
                return True
    return False
