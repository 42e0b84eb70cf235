"""Functions of the file that cut some of their parameters, followed from their callers.

# NOTE [parameter cuts]
``def penalty(real, fake): x = Variable(real.data, requires_grad=True) ...`` reads ``real``
only inside calls that cut the graph (``.detach()``, ``.item()``, ``Variable(...)``,
``torch.tensor(...)``, ``.data``, or under ``no_grad``): a graph passed there is not carried
into the result. A name read only inside a subscript's brackets (an index, a slice's bounds:
``x[i, :, start:end]``) carries none either: indexing differentiates the indexed tensor only
(an integer or bool index has no gradient; a float one is refused by PyTorch). A function
whose every ``return`` holds no graph (NOTE [graphless by construction]) cuts every parameter.
:class:`CutParams` gives, by the function's name, the positions of such parameters, and
for ``self.<attr>(...)`` running a module of the file the ``forward`` parameters some path
leaves unread, and for ``crit(...)`` on an instance of a module class of another file of the
project the same (:func:`instance_skips`). The counterpart of :mod:`.helper_cuts` (functions
that cut what they *return*); the GT5 dependency walk reads both through
:func:`gradtrace.lint.analysis.graph_deps.loads`.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import DETACHING_METHODS, LEAF_CALLS, NON_VALUE_ATTRS
from gradtrace.lint.analysis.project import foreign_callee, foreign_def, home
from gradtrace.lint.analysis.reach import decorated_off, defs_by_name
from gradtrace.lint.flow_kinds import NEW_TENSOR_FUNCS
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def cut_params(ctx: Context) -> CutParams:
    """The (cached) :class:`CutParams` of the file."""
    return ctx.memo("gt5-cut-params", ctx.tree, lambda: CutParams(ctx))


class CutParams:
    """Functions of this file (by name) and the positions of their parameters whose every
    use in the body is inside a call that cuts the graph (``.detach()``, ``.item()``,
    ``Variable(...)``, ``torch.tensor(...)``, ``.data``): passing a graph there passes none
    (a WGAN-GP penalty helper that wraps its inputs in ``Variable(..., requires_grad=True)``).

    Computed per name on first ask: only the helpers a traced value calls are read (a dense
    file has thousands of functions, and reading them all cost half a parse)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._cuts: dict[str, frozenset[int] | None] = {}
        self._foreign: dict[str, frozenset[int] | None] = {}

    def get(self, name: str) -> frozenset[int] | None:
        """The cut positions of the functions named ``name`` (their common ones when several
        share the name; None: no function of the file by that name cuts any)."""
        if name not in self._cuts:
            out: frozenset[int] | None = None
            for fn in defs_by_name(self._ctx).get(name, ()):
                params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                free = set() if _graphless(self._ctx, fn) else _live_reads(fn, self._ctx)
                cut = frozenset(i for i, p in enumerate(params) if p not in free)
                if cut:
                    out = cut if out is None else out & cut
            self._cuts[name] = out
        return self._cuts[name]

    def foreign_cuts(self, func: ast.expr) -> frozenset[int] | None:
        """The cut positions of the function of another file of the project that ``func``
        names (``commons.slice_segments``, an imported ``helper``), computed in that file
        (NOTE [project index]); None: not such a function, or it cuts none."""
        key = dotted(func)
        if key is None:
            return None
        if key not in self._foreign:
            self._foreign[key] = None
            ctx = self._ctx
            if not (isinstance(func, ast.Name) and func.id in defs_by_name(ctx)):
                got = foreign_def(ctx, func)
                if got is not None and isinstance(got[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self._foreign[key] = cut_params(got[0]).get(got[1].name)
        return self._foreign[key]

    def forward_skips(self, attr: str) -> tuple[list[str], frozenset[str]] | None:
        """(parameters, skipped ones) of the ``forward`` that ``self.<attr>(...)`` runs, when
        every class of the file that stores ``self.<attr>`` stores one ``Cls(...)`` of the same
        module class of this file: the parameters some path through that forward leaves unread
        or reads only cut (``if idx == 0: return l1 + kl`` then ``return d(x.detach())``:
        neither ``kl`` nor ``x`` carries the call's graph on every path). None when the forward
        is not known or reads every parameter."""
        key = "self." + attr
        if key not in self._cuts:
            self._cuts[key] = self._forward_skips(attr)  # type: ignore[assignment]
        return self._cuts[key]  # type: ignore[return-value]

    def method_cuts(self, attr: str) -> frozenset[int] | None:
        """The cut positions (among the call's arguments) of ``self.<attr>(...)`` running a
        method of a class of this file (SAC's ``self._alpha_and_alpha_loss(obs, log_pi)``
        reading ``log_pi`` only as ``(log_pi + target).detach()``); their common ones when
        several classes define it; None when none is cut or ``<attr>`` is a stored value."""
        key = "self()." + attr
        if key not in self._cuts:
            out: frozenset[int] | None = None
            classes = self._ctx.analysis.classes.values()
            if not any(attr in info.attrs for info in classes):
                for info in classes:
                    fn = info.methods.get(attr)
                    if fn is None or any(dotted(d) in ("staticmethod", "classmethod")
                                         for d in fn.decorator_list):
                        continue
                    params = [a.arg for a in fn.args.posonlyargs + fn.args.args][1:]
                    free = _live_reads(fn, self._ctx)
                    cut = frozenset(i for i, p in enumerate(params) if p not in free)
                    if not cut:
                        out = None
                        break
                    out = cut if out is None else out & cut
            self._cuts[key] = out or None
        return self._cuts[key]

    def _forward_skips(self, attr: str) -> tuple[list[str], frozenset[str]] | None:
        classes = self._ctx.analysis.classes
        fwds = set()
        fn = None
        for info in classes.values():
            a = info.attrs.get(attr)
            if a is None:
                continue
            v = a.value
            target = classes.get(v.func.id) if isinstance(v, ast.Call) \
                and isinstance(v.func, ast.Name) else None
            fn = target.methods.get("forward") if target is not None else None
            if fn is None:
                return None
            fwds.add(id(fn))
        if fn is None or len(fwds) != 1:
            return None
        return _forward_skips_of(fn, self._ctx)


def _graphless(ctx: Context, fn: ast.AST) -> bool:
    from gradtrace.lint.analysis.graphless_returns import returns_graphless
    return returns_graphless(ctx, fn)


def instance_skips(ctx: Context, scope: object, call: ast.Call, line: int
                   ) -> tuple[list[str], frozenset[str]] | None:
    """(parameters, skipped ones) of the ``forward`` a bare-name call runs on an instance of a
    module class of another file (``vq_loss = DDP(VQLoss(...))``, then ``vq_loss(codebook,
    imgs, recons, optimizer_idx=1)`` whose forward reads ``recons`` only as
    ``recons.detach()`` on that path: LlamaGen's discriminator loss), as
    :meth:`CutParams.forward_skips` reads ``self.<attr>(...)`` (NOTE [project index])."""
    if not isinstance(call.func, ast.Name) or any(isinstance(a, ast.Starred)
                                                  for a in call.args):
        return None
    fn = foreign_callee(ctx, call, scope, line)
    if fn is None or fn.name != "forward":
        return None
    octx = home(ctx, fn)
    return octx.memo("forward-skips", fn, lambda: _forward_skips_of(fn, octx))


def _forward_skips_of(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context
                      ) -> tuple[list[str], frozenset[str]] | None:
    """(parameters after ``self``, those some path of ``fn`` leaves unread or reads cut)."""
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args][1:]
    read = _live_reads(fn, ctx)
    skip = frozenset(p for p in params if p not in read)
    return (params, skip) if skip else None


def _live_reads(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> set[str]:
    """Names ``fn`` reads outside graph-cutting calls, on every path through it that returns
    a value (an ``if`` splits the paths; loops, ``with`` and ``try`` blocks count as read
    whole; a body that only falls off its end: every name read anywhere)."""
    anywhere = _uncut_loads(fn, ctx) - _dead_params(fn, ctx)
    must, returned = _paths(fn.body, ctx, fn)
    if not returned or must is None:
        return anywhere
    return anywhere & must


def _dead_params(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> set[str]:
    """Parameters read, outside cuts, only on the way to local names that are themselves only
    cut later (``x = mix(real, fake)``; ``x = x.to(device)``; ``x = Variable(x,
    requires_grad=True)``: tab-ddpm's gradient penalty). Only assignments of the body's own
    straight line, and of the straight line of a ``for``/``while`` body in it, pass a value
    on (in a loop, a read may see every binding of its name: the next pass reads this one's);
    every read in another nested block or statement keeps what it reads (and all its earlier
    bindings). VITS's ``slice_segments(x, ids_str, n)``: ``idx_str = ids_str[i]`` in its loop,
    read only as slice bounds (NOTE [parameter cuts]), leaves ``ids_str`` dead."""
    scope = ctx.scope(fn)
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    top = {id(s) for s in fn.body}
    edges: dict[object, list[object]] = {}  # a value's source -> the bindings it flows to
    live: list[object] = []
    by_stmt: dict[int, list[object]] = {}
    fresh: set[int] = set()  # bindings to a new tensor, list or dict made here
    for bs in scope.bindings.values():
        for b in bs:
            by_stmt.setdefault(id(b.stmt), []).append(id(b))
            if isinstance(b.stmt, ast.Assign) and _new_object(b.value, ctx):
                fresh.add(id(b))

    def sources(name: str, line: int, looped: bool) -> list[object]:
        out: list[object] = []
        for b in reversed(scope.bindings.get(name, ())):
            if looped or b.line < line:
                out.append(id(b))
                if id(b.stmt) in top and not looped:
                    return out
        return [*out, "p:" + name]
    todo: list[tuple[ast.stmt, bool]] = [(s, False) for s in reversed(fn.body)]
    while todo:
        s, looped = todo.pop()
        if isinstance(s, (ast.For, ast.While)) and not s.orelse:
            head = [s.iter] if isinstance(s, ast.For) else [s.test]
            live.extend(src for name in _uncut_loads(fn, ctx, head)
                        for src in sources(name, s.lineno, looped))
            todo.extend((c, True) for c in reversed(s.body))
            continue
        if isinstance(s, ast.Assign) and all(isinstance(n, ast.Name) for t in s.targets
                                             for n in (t.elts if isinstance(t, ast.Tuple)
                                                       else [t])):
            made = by_stmt.get(id(s), [])
            for name in _uncut_loads(fn, ctx, [s.value]):
                for src in sources(name, s.lineno, looped):
                    edges.setdefault(src, []).extend(made)
            if made:
                continue
        into = _stored_into(s, params, sources, looped, fresh)
        if into:  # `out[t, ...] = value`: the value flows into the local `out` only
            for name in _uncut_loads(fn, ctx, [s.value]):  # type: ignore[attr-defined]
                for src in sources(name, s.lineno, looped):
                    edges.setdefault(src, []).extend(into)
            continue
        end = (s.end_lineno or s.lineno) + 1
        live.extend(src for name in _uncut_loads(fn, ctx, [s])
                    for src in sources(name, end, looped))
    seen = set(live)
    back: dict[object, list[object]] = {}
    for src, dsts in edges.items():
        for d in dsts:
            back.setdefault(d, []).append(src)
    while live:
        for src in back.get(live.pop(), ()):
            if src not in seen:
                seen.add(src)
                live.append(src)
    return {p for p in params if "p:" + p not in seen}


def _stored_into(s: ast.stmt, params: set[str], sources: object, looped: bool,
                 fresh: set[int]) -> list[object]:
    """The bindings of the local that ``name[index] = value`` writes into (compose_image's
    ``image_sh[t, ...] = fg * a + (1 - a) * bg`` into ``image_sh = torch.zeros(...)``), when
    every one of them binds a new object made in this function (a parameter's, a loop
    variable's or an alias's object is someone else's: the write reaches it); else []."""
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Subscript)
            and isinstance(s.targets[0].value, ast.Name)) or s.targets[0].value.id in params:
        return []
    got = [g for g in sources(s.targets[0].value.id, s.lineno, looped)  # type: ignore[operator]
           if not isinstance(g, str)]  # the unbound-before marker of a name read in a loop
    return got if got and all(g in fresh for g in got) else []


def _new_object(v: ast.expr | None, ctx: Context) -> bool:
    """``torch.zeros(...)``, ``x.new_zeros(...)``, ``[]``, ``{}``: a new tensor or container."""
    if isinstance(v, (ast.List, ast.Dict, ast.ListComp, ast.DictComp)):
        return True
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in (
            "to", "cuda", "cpu", "float", "double", "half", "long", "contiguous"):
        v = v.func.value  # `torch.zeros(shape).cuda()`: the same new tensor, moved
    if not isinstance(v, ast.Call):
        return False
    f = v.func
    return (ctx.qualified_name(f) or "") in NEW_TENSOR_FUNCS or isinstance(
        f, ast.Attribute) and f.attr in ("new_zeros", "new_ones", "new_empty", "new_full",
                                         "zeros_like", "clone") or dotted(f) in ("list", "dict")


def _reads(s: ast.stmt, ctx: Context, fn: ast.AST) -> set[str]:
    return _uncut_loads(fn, ctx, [s])


_ALL = None  # the reads of a path that raises: it makes no value, so it constrains nothing


def _paths(body: list[ast.stmt], ctx: Context, fn: ast.AST) -> tuple[set[str] | None, bool]:
    """(names read on every path through ``body`` that returns, whether every path returns or
    raises); ``None`` for the names: every path raises."""
    acc: set[str] = set()
    for i, s in enumerate(body):
        if isinstance(s, ast.Return):
            return acc | _reads(s, ctx, fn), True
        if isinstance(s, ast.Raise):
            return _ALL, True
        if not isinstance(s, ast.If):
            acc |= _reads(s, ctx, fn)
            continue
        acc |= _reads(ast.Expr(s.test), ctx, fn)
        rest: tuple[set[str] | None, bool] | None = None  # read once: sequential `if`s stay linear
        ways = []
        for branch in (s.body, s.orelse):
            m, done = _paths(branch, ctx, fn)
            if not done:  # the branch falls through to the statements after the `if`
                rest = rest or _paths(body[i + 1:], ctx, fn)
                r = rest[0]
                m = _ALL if m is _ALL or r is _ALL else m | r
            ways.append(m)
        known = [w for w in ways if w is not _ALL]
        if not known:
            return _ALL, True
        return acc | set.intersection(*known), True
    return acc, False


def _uncut_loads(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context,
                 within: list[ast.AST] | None = None) -> set[str]:
    """Names read in ``fn`` (or in the part ``within`` of it) outside any graph-cutting call
    (sizes and integer results included) or ``.data`` (``.shape``, ``.device``: no value of
    the tensor); where grad is off (the function's :class:`~gradtrace.lint.flow.Scope` says
    so: the decorator, a ``with`` block, ``enable_grad`` inside them) a name an operation reads
    (``output.topk(k)``, ``x * 2``, ``torch.cat([x])``) is cut too: only the bare name
    (``return x``) keeps its graph."""
    scope = ctx.scope(fn)
    off = decorated_off(fn, ctx)
    out: set[str] = set()
    stack: list[tuple[ast.AST, ast.AST, bool]] = [(c, fn, off) for c in within or child_nodes(fn)]
    while stack:
        n, parent, off = stack.pop()
        if isinstance(n, ast.stmt) and id(n) in scope.loops:  # a statement of fn itself
            off = id(n) in scope.no_grad
        if isinstance(n, ast.Call):
            f = n.func
            if (isinstance(f, ast.Attribute) and f.attr in DETACHING_METHODS) \
                    or dotted(f) in LEAF_CALLS:
                continue  # `x.detach()`, `x.size()`, `x.argmax(1)`: a result with no history
            index = _index_argument(n, ctx)
            if index is not None:  # `torch.gather(x, 2, idx)`: the index carries no graph
                stack.extend((c, n, off) for c in child_nodes(n) if c is not index
                             and not (isinstance(c, ast.keyword) and c.value is index))
                continue
        elif isinstance(n, ast.Attribute) and n.attr in NON_VALUE_ATTRS:
            continue  # `x.data`, `x.shape`, `x.device`
        elif isinstance(n, ast.Subscript):  # `x[i, :, start:end]`: indices carry no graph
            stack.append((n.value, n, off))
            continue
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            if not (off and _operand(n, parent)):
                out.add(n.id)
        stack.extend((c, n, off) for c in child_nodes(n))
    return out


# torch functions that read one argument only as integer positions: (its place among the
# arguments of the function, of the tensor method, its keyword)
INDEX_ARGS = {"gather": (2, 1, "index"), "index_select": (2, 1, "index"),
              "take_along_dim": (1, 0, "indices"), "take": (1, 0, "index")}


def _index_argument(call: ast.Call, ctx: Context) -> ast.expr | None:
    """The argument ``call`` reads as indices (``torch.gather(x, 2, idx)``, ``x.gather(2,
    idx)``, ``torch.index_select(x, 0, idx)``): indexing differentiates the indexed tensor
    only; an integer index has no gradient (NOTE [parameter cuts])."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else ""
    spec = INDEX_ARGS.get(name)
    if spec is None:
        return None
    qual = ctx.qualified_name(f) or ""
    if qual.startswith("torch."):
        pos = spec[0]
    elif not qual:
        pos = spec[1]  # a tensor method: `x.gather(2, idx)`
    else:
        return None
    kw = next((k.value for k in call.keywords if k.arg == spec[2]), None)
    return kw if kw is not None else call.args[pos] if len(call.args) > pos else None


def _operand(n: ast.Name, parent: ast.AST) -> bool:
    """``n`` is read by an operation (its result is new), not passed on as it is."""
    if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare)):
        return True
    if isinstance(parent, ast.Subscript) or (isinstance(parent, ast.Attribute)
                                             and parent.attr not in ("append", "extend")):
        return parent.value is n
    return isinstance(parent, ast.Call) and n in parent.args and (
        dotted(parent.func) or "").startswith(("torch.", "F."))
