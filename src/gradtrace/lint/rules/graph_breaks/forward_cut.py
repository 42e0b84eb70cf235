"""GT115: a submodule reaches what `forward` returns only through a cut, so it never trains."""
from __future__ import annotations

import ast
import bisect
from typing import Callable, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.constructed import constructor_values
from gradtrace.lint.analysis.forward_cuts import forward_cuts
from gradtrace.lint.analysis.grouped_params import param_calls
from gradtrace.lint.analysis.grad_values import weighted
from gradtrace.lint.analysis.keyed_children import keyed_children
from gradtrace.lint.analysis.owners import home
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.resizes import resize_statements
from gradtrace.lint.analysis.trained_abroad import (
    in_project, named_abroad, trained_abroad, trainer_abroad)
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import child_nodes, of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule


def _trained_classes(ctx: Context) -> frozenset[str]:
    """Module classes of the file an optimizer is built over (``opt(model.parameters())``),
    and the module classes their constructors make (three levels down)."""
    def make() -> frozenset[str]:
        a = ctx.analysis
        out: set[str] = set()
        lines = {i for i, text in enumerate(ctx.code_lines, 1) if "optim" in text}
        calls, defs = [], []
        for n in of_types(ctx.tree, (ast.Call, ast.FunctionDef, ast.AsyncFunctionDef)) \
                if lines else ():  # walk's nodes of these types in its order, no generator
            if isinstance(n, ast.Call) and n.lineno in lines:
                q = ctx.qualified_name(n.func) or ""
                if q.startswith("torch.optim.") and "lr_scheduler" not in q:
                    calls.append(n)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defs.append(n)
        innermost = _innermost_def(defs)
        for n in calls:
            where: ast.AST = innermost(n.lineno) or ctx.tree
            for m in param_calls(n, where):  # NOTE [grouped parameters]
                if isinstance(m.func, ast.Attribute):
                    k = a.kind_in(m.func.value, where, n.lineno)
                    if k is not None and k.what == MODULE and k.cls in a.classes:
                        out.add(k.cls)
        todo = list(out)
        for _ in range(3):
            nxt = []
            for c in todo:
                init = a.classes[c].methods.get("__init__")
                for m in ast.walk(init) if init is not None else ():
                    if isinstance(m, ast.Call) and isinstance(m.func, ast.Name) \
                            and m.func.id in a.classes and a.classes[m.func.id].is_module \
                            and m.func.id not in out:
                        out.add(m.func.id)
                        nxt.append(m.func.id)
            todo = nxt
        return frozenset(out)
    return ctx.memo("gt115-trained", ctx.tree, make)


def _innermost_def(defs: list[ast.AST]) -> Callable[[int], ast.AST | None]:
    """line -> the def with the shortest span holding that line (None: no def holds it).

    Two defs never start on one line and their spans nest or are apart, so the defs holding a
    line are the one starting last at or before it and the defs around that one: found
    through each def's nearest enclosing def, not by a scan of every def per line (a
    script of many functions and optimizers made that quadratic)."""
    order = sorted(defs, key=lambda d: d.lineno)  # type: ignore[attr-defined]
    starts = [d.lineno for d in order]  # type: ignore[attr-defined]
    ends = [d.end_lineno or 0 for d in order]  # type: ignore[attr-defined]
    parent: list[int] = []
    stack: list[int] = []
    for i in range(len(order)):
        while stack and ends[stack[-1]] < starts[i]:
            stack.pop()
        parent.append(stack[-1] if stack else -1)
        stack.append(i)

    def find(line: int) -> ast.AST | None:
        i = bisect.bisect_right(starts, line) - 1
        while i >= 0 and ends[i] < line:
            i = parent[i]
        return order[i] if i >= 0 else None
    return find


def _used_elsewhere(ctx: Context, attr: str, walked: list[ast.AST], init: ast.AST | None,
                    keys: dict[str, ast.expr], cls: str = "") -> bool:
    """``.attr`` appears in the file outside ``forward`` (and the methods it runs) and
    outside its assignments in ``__init__`` (frozen, given to an optimizer, trained by
    another method, updated by EMA); ``self.attr`` in a method of another class of the file
    (not derived from ``cls``) is that class's own attribute, not a use."""
    spans = [(f.lineno, f.end_lineno or f.lineno) for f in walked]  # type: ignore[attr-defined]
    foreign = _other_class_spans(ctx, cls) if cls else []
    uses, opened = ctx.memo("gt115-attr-uses", ctx.tree, lambda: _index(ctx))
    holder, _, key = attr.partition(".")
    # a keyed child (NOTE [keyed children]): its key read anywhere else, or its container
    # used whole (not opened by one of its keys) anywhere else
    for n in (*uses.get(key or holder, ()),
              *(u for u in (uses.get(holder, ()) if key else ()) if opened.get(id(u)) not in keys)):
        if any(lo <= n.lineno <= hi for lo, hi in spans):
            continue
        if init is not None and isinstance(n.ctx, ast.Store) and \
                init.lineno <= n.lineno <= (init.end_lineno or 0):  # type: ignore[attr-defined]
            continue
        if isinstance(n.value, ast.Name) and n.value.id == "self" and any(
                lo <= n.lineno <= hi for lo, hi in foreign):
            continue
        return True
    return False


def _derives(classes: dict, name: str, cls: str, depth: int = 0) -> bool:  # type: ignore[type-arg]
    """Class ``name`` of the file derives from ``cls`` through classes of the file."""
    info = classes.get(name)
    if info is None or depth > 5:
        return False
    bases = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute)
             else "" for b in info.node.bases]
    return cls in bases or any(_derives(classes, b, cls, depth + 1) for b in bases if b != name)


def _other_class_spans(ctx: Context, cls: str) -> list[tuple[int, int]]:
    """Line spans of the classes of the file that are not ``cls``, hold no class, and do not
    derive from ``cls`` through classes of the file (their ``self`` is never a ``cls``)."""
    classes = ctx.analysis.classes
    out = []
    for name, info in classes.items():
        node = info.node
        if name == cls or _derives(classes, name, cls) or any(
                isinstance(c, ast.ClassDef) for c in ast.walk(node) if c is not node):
            continue
        out.append((node.lineno, node.end_lineno or node.lineno))
    return out


# reads that only look at a module's weights (a snapshot, a norm, a printout)
LOOKS = frozenset({"grad", "shape", "dtype", "device", "detach", "clone", "norm", "abs", "cpu",
                   "tolist", "item", "numpy", "sum", "mean", "numel"})


def _made_fresh(ctx: Context, info) -> bool:  # type: ignore[no-untyped-def]
    """The attribute is made with random weights in the class: a ``torch.nn`` layer, a
    Parameter or a module class of the file (not a module handed in, loaded or pretrained),
    and assigned once."""
    if info is None or info.later or not isinstance(info.value, ast.Call):
        return False
    v = info.value
    q = ctx.qualified_name(v.func) or ""
    if not (q.startswith("torch.nn.") or (isinstance(v.func, ast.Name)
                                         and v.func.id in ctx.analysis.classes)):
        return False
    return not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr in ("from_pretrained", "load_state_dict") for n in ast.walk(v))


# NOTE [handed a fresh module]
# A submodule handed to the constructor (`self.encoder = encoder`) is often a pretrained or
# separately trained network that a cut in `forward` keeps fixed on purpose, so only modules
# made with random weights in the class count (`_made_fresh`). When every construction site
# of the class in the project (NOTE [construction sites]) hands it a module built right there,
# `Head(Encoder())` or `enc = Encoder()` read by nothing but that call (not loaded, frozen,
# trained by its own loss), the handed module is as fresh as one built in `__init__`: a cut
# on its only path to the outputs leaves it untrained (checked on torch 2.13: `.grad` None).


def _handed_fresh(ctx: Context, cls, info) -> bool:  # type: ignore[no-untyped-def]
    """``self.x = x``, a parameter of ``__init__`` assigned once, handed a fresh module by
    every construction site (NOTE [handed a fresh module])."""
    if info is None or info.later or not isinstance(info.value, ast.Name):
        return False
    sites = constructor_values(ctx, cls, info.value.id)
    return bool(sites) and all(_fresh_value(sctx, v, where) for sctx, v, where in sites)


def _fresh_value(sctx: Context, v: ast.expr, where: ast.AST) -> bool:
    """``v`` (an argument of a construction in ``where`` of ``sctx``'s file) is a module built
    right there with random weights, or a name bound once to one and read only there."""
    if isinstance(v, ast.Name):
        scope = sctx.scope(where)
        bs = scope.bindings.get(v.id, ())
        reads = [n for n in walk(where) if isinstance(n, ast.Name) and n.id == v.id
                 and isinstance(n.ctx, ast.Load)]
        if len(bs) != 1 or reads != [v] or bs[0].value is None:
            return False
        v = bs[0].value  # type: ignore[assignment]
    if not isinstance(v, ast.Call):
        return False
    q = sctx.qualified_name(v.func) or ""
    if isinstance(v.func, ast.Name) and v.func.id in sctx.analysis.classes:
        fresh = weighted(sctx, v.func.id, v)
    elif q.startswith("torch.nn."):
        fresh = weighted(sctx, q, v)
    else:  # a module class of another file of the project (`from models import Encoder`)
        from gradtrace.lint.analysis.project import foreign_class

        info = foreign_class(sctx, v.func)
        fresh = info is not None and weighted(home(sctx, info.node), info.node.name, None)
    return fresh and not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                             and n.func.attr in ("from_pretrained", "load_state_dict")
                             for n in ast.walk(v))


def _fresh(ctx: Context, cls, sub: str) -> bool:  # type: ignore[no-untyped-def]
    """``_made_fresh`` for ``self.<sub>``; a keyed child (``"body.embed"``,
    NOTE [keyed children]) also needs its own construction fresh and a weight to train."""
    attr, _, key = sub.partition(".")
    if not key and _handed_fresh(ctx, cls, cls.attrs.get(attr)):
        return True
    if not _made_fresh(ctx, cls.attrs.get(attr)):
        return False
    if not key:
        return True
    v = keyed_children(ctx, cls, attr).get(key)
    if not isinstance(v, ast.Call):
        return False
    q = ctx.qualified_name(v.func) or ""
    return weighted(ctx, q or None, v) or (
        isinstance(v.func, ast.Name) and weighted(ctx, v.func.id, v))


def _index(ctx: Context) -> tuple[dict[str, list[ast.Attribute]], dict[int, object]]:
    """Every ``.attr`` of the file by name, but those only looked at: inside ``print(...)`` or
    a resize (``m.w = nn.Parameter(m.w[:n])``),
    or read through ``.weight``/``.bias`` down to a ``.grad``, a ``.detach()``, a
    ``.clone()``, or a difference with a snapshot reduced at once (``(m.w - w0).abs()``: how far
    it moved) (inspection, not training); and, by id, the further attribute or constant
    key that opens one (``self.body.embed``, ``self.body["embed"]``)."""
    out: dict[str, list[ast.Attribute]] = {}
    parent: dict[int, ast.AST] = {}
    stack: list[tuple[ast.AST, bool]] = [(ctx.tree, False)]
    found: list[ast.Attribute] = []
    resized = resize_statements(ctx)  # surgery, not training (NOTE [resize is not training])
    while stack:
        n, shown = stack.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print" \
                or id(n) in resized:
            shown = True
        if isinstance(n, ast.Attribute) and not shown:
            found.append(n)
        for c in child_nodes(n):
            parent[id(c)] = n
            stack.append((c, shown))
    opened: dict[int, object] = {}
    for n in found:
        p = parent.get(id(n))
        if isinstance(p, ast.Attribute):
            opened[id(n)] = p.attr
        elif isinstance(p, ast.Subscript) and isinstance(p.slice, ast.Constant):
            opened[id(n)] = p.slice.value
        if isinstance(p, ast.Attribute) and p.attr in ("weight", "bias"):
            p = parent.get(id(p))
            if isinstance(p, ast.BinOp) and isinstance(p.op, ast.Sub):
                p = parent.get(id(p))  # `(m.w - before).abs().max()`: how far it moved
        if isinstance(p, ast.Attribute) and p.attr in LOOKS and isinstance(p.ctx, ast.Load):
            continue
        if isinstance(p, ast.Attribute) and p.attr in ("parameters", "named_parameters") \
                and _looked_over(p, parent):
            continue
        out.setdefault(n.attr, []).append(n)
    return out, opened


def _looked_over(attr: ast.Attribute, parent: dict[int, ast.AST]) -> bool:
    """``[p.detach().clone() for p in m.parameters()]``, ``sum(p.numel() for p in ...)``: a
    comprehension over the parameters that only looks at each one (``LOOKS``)."""
    call = parent.get(id(attr))
    it = parent.get(id(call)) if isinstance(call, ast.Call) and call.func is attr else None
    at = None  # the parameters zipped with other sequences: their place in the target
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "zip" \
            and call in it.args:
        at, call, it = it.args.index(call), it, parent.get(id(it))  # type: ignore[arg-type]
    gen = it
    comp = parent.get(id(gen)) if isinstance(gen, ast.comprehension) and gen.iter is call \
        else None
    if not isinstance(comp, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) \
            or len(comp.generators) != 1:
        return False
    t = gen.target  # type: ignore[union-attr]
    elts = t.elts if isinstance(t, ast.Tuple) else [t]
    if at is not None:
        if not isinstance(t, ast.Tuple) or len(elts) <= at:
            return False
        elts = elts[at:at + 1]
    names = {e.id for e in elts if isinstance(e, ast.Name)}
    uses = [c for part in (comp.elt, *gen.ifs) for c in ast.walk(part)  # type: ignore[union-attr]
            if isinstance(c, ast.Name) and c.id in names]
    return all(isinstance(parent.get(id(c)), ast.Attribute)
               and parent[id(c)].attr in LOOKS for c in uses)  # type: ignore[attr-defined]


class SubmoduleCutInForward(Rule):
    """A submodule's output reaches what `forward` returns only through a cut (`.detach()`,
    `.data`, `argmax`, a comparison, a copy into a new tensor such as `torch.Tensor([a, b])`,
    a value computed under `torch.no_grad()`), and nothing else in the file uses it: it never
    gets a gradient.

    Why: the loss on the model's outputs cannot flow back past the cut, so every parameter of
    that submodule keeps `.grad is None` and the optimizer built over `model.parameters()`
    never moves it, silently (A-GCN's adjacency detached from `W_theta`/`W_phi`, DenseTNT's
    `goals_2D_mlps` output detached before scoring; checked on torch 2.13). Remove the cut,
    or, if the submodule is meant to stay fixed, freeze it explicitly.
    Known limits: the class and its `forward` must be in this file; an optimizer of the file
    must be built over an instance (or its owner), or, in a file that builds none, an
    instance must be called in another file of the project that builds an optimizer and
    runs a backward, the submodule named in no other file (NOTE [trained abroad]); also through parameter groups built from
    its `named_parameters()` in the same function (NOTE [grouped parameters]); the keys of a
    `ModuleDict` built in one statement count as submodules of their own
    (NOTE [keyed children]); a submodule handed to the constructor counts only when every
    construction site hands it a module built there (NOTE [handed a fresh module]); a
    submodule named anywhere else in the
    file (frozen, trained by another method, given to an optimizer, updated as an EMA) is
    left alone; a call of another method of the class counts as keeping every submodule
    that method touches.
    """

    code = "GT115"
    name = "submodule-cut-in-forward"
    message = ("{cut} cuts the only path from `self.{sub}` to what `{cls}.{method}` returns: "
               "no loss on the outputs reaches it, so its parameters get no gradient and "
               "never train; remove the cut, or freeze it on purpose")
    triggers = ("detach", "no_grad", "inference_mode", "argmax", "argmin", ".data", ".long(",
                ".item(", "round", "tensor(", "Tensor(", "Variable(")
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Gated(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.gate = nn.Linear(8, 8)
                    self.body = nn.Linear(8, 8)

                def forward(self, x):
                    g = torch.sigmoid(self.gate(x)).detach()
                    return self.body(x) * g

            model = Gated()
            opt = torch.optim.Adam(model.parameters())
            """, at=(11, 12)),
        Good("""
            import torch
            import torch.nn as nn

            class Gated(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.gate = nn.Linear(8, 8)
                    self.body = nn.Linear(8, 8)

                def forward(self, x):
                    g = torch.sigmoid(self.gate(x))
                    return self.body(x) * g, g.detach()

            model = Gated()
            opt = torch.optim.Adam(model.parameters())
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not (ctx.mentions("forward") or ctx.mentions("__call__")):
            return  # no forward of the file: nothing it could say
        a = ctx.analysis
        if not a.module_classes:
            return
        if ctx.mentions("optim") and ("optim." in ctx.code or "torch.optim" in ctx.code):
            names, abroad = _trained_classes(ctx), False
        elif in_project(ctx) and trainer_abroad(ctx):  # NOTE [trained abroad]: a model file
            names, abroad = a.module_classes, True
        else:
            return
        for name in sorted(names):
            cls = a.classes[name]
            got = forward_cuts(ctx, cls)
            if got is None:
                continue
            init = cls.methods.get("__init__")
            by_cut: dict[int, tuple[ast.AST, list[str]]] = {}
            for sub, at in got.cut.items():
                if sub in got.called and _fresh(ctx, cls, sub) and \
                        not _used_elsewhere(ctx, sub, got.walked, init, keyed_children(
                            ctx, cls, sub.partition(".")[0]) if "." in sub else {}, name) and \
                        not (abroad and named_abroad(ctx, sub.rpartition(".")[2])):
                    group = got.groups.get(id(at), at)
                    first, subs = by_cut.setdefault(id(group), (at, []))
                    if at.lineno < first.lineno:  # type: ignore[attr-defined]
                        by_cut[id(group)] = (at, subs)
                    subs.append(sub)
            if abroad and by_cut and not trained_abroad(ctx, name):
                continue
            for at, subs in sorted(by_cut.values(), key=lambda v: v[0].lineno):  # type: ignore[attr-defined]
                shown = at.items[0].context_expr if isinstance(at, (ast.With, ast.AsyncWith)) \
                    else at
                subs.sort()
                block = got.groups.get(id(at))
                where = block if _only_cut_runs(_decorated(cls, block), subs, cls) else shown
                info = cls.attrs.get(subs[0].partition(".")[0])
                related = (Related(ctx.path, info.stmt.lineno, f"`self.{subs[0]}` is made here",
                                   ctx.column(info.stmt)),) if info is not None else ()
                yield self.report(where, ctx, related=related, cut=_what(ctx, shown, got, at),
                                  sub="`, `self.".join(subs), cls=name,
                                  method=getattr(got.walked[0], "name", "forward"))


def _decorated(cls, block: ast.AST | None) -> ast.AST | None:  # type: ignore[no-untyped-def]
    """The method of ``cls`` that ``block`` decorates when it is a decorator, else ``block``."""
    if block is None or isinstance(block, (ast.With, ast.AsyncWith)):
        return block
    return next((m for m in cls.node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and any(d is block for d in m.decorator_list)), block)


def _only_cut_runs(block: ast.AST | None, subs: list[str], cls) -> bool:  # type: ignore[no-untyped-def]
    """A ``with torch.no_grad():`` block in which every ``self.<x>`` it runs or reads is one
    it cuts (``subs``): nothing in it is meant to run without grad (a frozen encoder), so the
    block itself is the line to change, not the first call in it. The same for a method
    under a no-grad decorator (``@torch.inference_mode()``): the decorator is that line."""
    if not isinstance(block, (ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    roots = {s.partition(".")[0] for s in subs}
    seen = False
    for st in block.body:
        for n in ast.walk(st):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                    and n.value.id == "self":
                if n.attr not in roots:
                    return False  # a frozen submodule, another method, a field
                seen = True
    return seen


def _what(ctx: Context, shown: ast.AST, got, at: ast.AST) -> str:  # type: ignore[no-untyped-def]
    """The cut as the message names it: the call, or the no-grad block a call runs in."""
    group = got.groups.get(id(at))
    if group is not None:  # a `with` block, or a method's `@torch.no_grad()`
        switch = group.items[0].context_expr if isinstance(group, (ast.With, ast.AsyncWith)) \
            else group
        return "`{}{}` (line {}) around `{}`".format(
            "" if switch is not group else "@", ctx.source(switch), group.lineno,
            ctx.source(shown))
    return f"`{ctx.source(shown)}`"
