"""What the tests of a loop over a model's modules (``for v in model.modules(): if isinstance(v,
nn.BatchNorm2d): ...``) decide for one kind of module, and which lists that module's parameters
are appended to (GT557, GT562; NOTE [parameter gathered twice]).

A subject is one module the loop meets: a torch layer built by a known call, a module class of
the file, or the model itself (the root: ``modules()`` yields it first, with all its children).
A test is True, False, None (unknown: the walk stops) or NAME (a test of the class's spelling,
``'model' in str(v.__class__)``: it says nothing of the module's structure, so both arms are
possible)."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call

# NOTE [parameter gathered twice]
# `modules()` yields every module once, the model itself first, and a Parameter is reachable
# from more than one of them in two ways: `parameters()` is recursive (a module with children
# hands out theirs), and a module class may expose a child's parameter under its own name (a
# `weight` property returning `self.bn.weight`). A loop that appends per module therefore
# gathers one tensor twice unless its tests keep one of the two holders out; torch rejects a
# tensor in two groups and warns of (and steps twice) one repeated in a group. The tests are
# read per subject (`truth`, `run`), the lists followed to an optimizer, through the
# function's return to its callers (`given_lists`).
NAME = "name"
MODULE_ITERS = frozenset({"modules", "named_modules"})
_NORMS = ("BatchNorm", "SyncBatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm")
_WEIGHTED = ("Conv", "Linear", "Embedding", "Bilinear", "PReLU") + _NORMS
_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
_CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})


@dataclass(frozen=True)
class Subject:
    """One module of the loop: ``torch`` (a torch layer's qualified name, ``call`` building
    it), ``cls`` (a module class of the file) or ``root`` (the model, its class if known)."""
    torch: str | None = None
    call: ast.Call | None = None
    cls: ClassInfo | None = None
    root: bool = False
    home: Context | None = None  # the context of ``cls``'s file, when another file's


@dataclass
class Run:
    """What one pass of the loop body does for a subject: ``(list, attr or None, statement)``
    appends (attr None: the module's recursive ``parameters()``), and ``(If, truth)`` tests."""
    appends: list[tuple[str, str | None, ast.stmt]] = field(default_factory=list)
    tests: list[tuple[ast.If, object]] = field(default_factory=list)


def module_loop_var(node: ast.For, ctx: Context) -> tuple[str, str] | None:
    """``(model, var)`` for ``for v in M.modules()`` / ``for k, v in M.named_modules()``, or a
    loop over a name the function binds to ``[*M.modules()]`` / ``list(M.modules())``."""
    t = node.target
    var = t.elts[1].id if isinstance(t, ast.Tuple) and len(t.elts) == 2 \
        and isinstance(t.elts[1], ast.Name) else t.id if isinstance(t, ast.Name) else None
    it = node.iter
    if isinstance(it, ast.Name):
        name, fn = it.id, ctx.scope().node
        for n in walk(fn):
            if isinstance(n, ast.Assign) and n.lineno < node.lineno and any(
                    isinstance(x, ast.Name) and x.id == name for x in n.targets):
                it = next((c for c in walk(n.value) if _modules_call(c)), it)
    if var is None or not _modules_call(it):
        return None
    model = dotted(it.func.value)  # type: ignore[union-attr]
    return (model, var) if model else None


def _modules_call(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
        and n.func.attr in MODULE_ITERS and not n.args


def _torch_has(q: str, call: ast.Call | None, attr: str) -> object:
    """Does torch layer ``q`` built by ``call`` hold a Parameter ``attr``? (None: unknown)."""
    last = q.rpartition(".")[2]
    if attr not in ("weight", "bias") or not last.startswith(_WEIGHTED):
        return None
    off = {"bias": False} if attr == "bias" and not last.startswith(_NORMS) else {}
    off.update({"affine": False, "elementwise_affine": False} if last.startswith(_NORMS) else {})
    for k in (call.keywords if call is not None else []):
        if k.arg in off and isinstance(k.value, ast.Constant) and k.value.value is False:
            return False
        if k.arg in off and not isinstance(k.value, ast.Constant):
            return None
    if last.startswith("InstanceNorm"):
        return None  # affine=False by default
    return True


def _class_bases(cls: ClassInfo, ctx: Context) -> set[str] | None:
    """The qualified torch bases of a file class and its file bases; None if one is unknown."""
    out: set[str] = set()
    for c in cls.lineage():
        for b in c.node.bases:
            if isinstance(b, ast.Name) and b.id in ctx.analysis.classes:
                continue
            q = ctx.qualified_name(b)
            if q is None or not q.startswith("torch.nn."):
                return None
            out.add(q)
    return out


def _isinstance(subj: Subject, types: ast.expr, ctx: Context) -> object:
    elts = types.elts if isinstance(types, ast.Tuple) else [types]
    found: object = False
    for t in elts:
        r = _is_type(subj, t, ctx)
        if r is True:
            return True
        if r is None:
            found = None
    return found


def _is_type(subj: Subject, t: ast.expr, ctx: Context) -> object:
    classes = ctx.analysis.classes
    if isinstance(t, ast.Name) and t.id in classes:
        if subj.cls is not None:
            return any(c.name == t.id for c in subj.cls.lineage())
        return False if subj.torch else None
    q = ctx.qualified_name(t)
    if q is None:
        return None
    if not q.startswith("torch.nn."):  # a class of another file (`from .dbb import PadBN`)
        if subj.torch:
            return False
        if subj.cls is None:
            return None
        if any(c.name == q.rpartition(".")[2] for c in subj.cls.lineage()):
            return True
        bases = _class_bases(subj.cls, subj.home or ctx)
        return False if bases is not None and bases <= _BASES else None
    if q in _BASES:
        return True
    if subj.torch:
        last = q.rpartition(".")[2]
        if last.startswith("_") or "." in q[len("torch.nn."):] and not q.startswith(
                "torch.nn.modules."):
            return None  # `_BatchNorm`, private bases: not followed
        return subj.torch == q or subj.torch.rpartition(".")[2] == last
    if subj.cls is not None:
        bases = _class_bases(subj.cls, subj.home or ctx)
        if bases is None:
            return None
        return True if q in bases else (False if bases <= _BASES else None)
    # the root of unknown class: not a weighted layer (it has children), maybe a container
    return False if q.rpartition(".")[2].startswith(_WEIGHTED) else None


def _prop_target(cls: ClassInfo, attr: str) -> tuple[str, str] | None:
    """``(sub, attr2)`` when ``attr`` is a property of ``cls`` returning ``self.sub.attr2``."""
    for c in cls.lineage():
        m = c.methods.get(attr)
        if m is None:
            continue
        if not any(dotted(d) in ("property", "functools.cached_property")
                   for d in m.decorator_list):
            return None
        body = [s for s in m.body
                if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) == 1 and isinstance(body[0], ast.Return):
            v = body[0].value
            if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Attribute) \
                    and isinstance(v.value.value, ast.Name) and v.value.value.id == "self":
                return v.value.attr, v.attr
        return None
    return None


def child_layer(cls: ClassInfo, sub: str, ctx: Context) -> Subject | None:
    """The torch layer ``self.<sub>`` of ``cls`` is built as (``self.bn = nn.BatchNorm2d(c)``)."""
    for c in cls.lineage():
        info = c.attrs.get(sub)
        if info is not None and not info.later and isinstance(info.value, ast.Call):
            q = ctx.call_name(info.value) or ""
            if q.startswith("torch.nn.") and q.rpartition(".")[2][:1].isupper():
                return Subject(torch=q, call=info.value)
            return None
    return None


def has_param(subj: Subject, attr: str, ctx: Context) -> object:
    """Does the subject hold a Parameter under ``attr`` (its own or a property's)?"""
    if subj.torch:
        return _torch_has(subj.torch, subj.call, attr)
    if subj.cls is not None:
        target = _prop_target(subj.cls, attr)
        if target is not None:
            child = child_layer(subj.cls, target[0], subj.home or ctx)
            return None if child is None else has_param(child, target[1], ctx)
        return None
    return None


def _has_attr(subj: Subject, attr: str, ctx: Context) -> object:
    if subj.torch:
        r = _torch_has(subj.torch, subj.call, attr)
        return True if r is not None else None  # `bias=False` layers still hold `bias = None`
    if subj.cls is not None:
        if any(attr in c.methods or attr in c.attrs for c in subj.cls.lineage()):
            return True
        bases = _class_bases(subj.cls, subj.home or ctx)
        return False if bases is not None and bases <= _BASES else None
    return None


def _names_class(e: ast.AST, var: str) -> bool:
    """``str(v.__class__)``, ``type(v).__name__``, ``v.__class__.__name__``: the spelling."""
    for n in walk(e):
        if isinstance(n, ast.Attribute) and n.attr in ("__class__", "__name__", "__qualname__") \
                and any(isinstance(x, ast.Name) and x.id == var for x in walk(n)):
            return True
    return False


def truth(test: ast.expr, var: str, subj: Subject, ctx: Context) -> object:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        r = truth(test.operand, var, subj, ctx)
        return (not r) if isinstance(r, bool) else r
    if isinstance(test, ast.BoolOp):
        rs = [truth(v, var, subj, ctx) for v in test.values]
        stop = isinstance(test.op, ast.Or)
        if stop in rs:
            return stop
        if None in rs:
            return None
        return NAME if NAME in rs else (not stop)
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and len(test.args) == 2:
        a, b = test.args
        if test.func.id == "isinstance" and isinstance(a, ast.Name) and a.id == var:
            return _isinstance(subj, b, ctx)
        if test.func.id == "isinstance" and isinstance(a, ast.Attribute) \
                and isinstance(a.value, ast.Name) and a.value.id == var \
                and ctx.qualified_name(b) == "torch.nn.Parameter":
            return has_param(subj, a.attr, ctx)
        if test.func.id == "hasattr" and isinstance(a, ast.Name) and a.id == var \
                and isinstance(b, ast.Constant) and isinstance(b.value, str):
            return _has_attr(subj, b.value, ctx)
    if isinstance(test, ast.Compare) and _names_class(test, var):
        return NAME
    return None


def run(body: list[ast.stmt], var: str, subj: Subject, ctx: Context,
        out: Run | None = None) -> Run | None:
    """The appends one pass of ``body`` makes for ``subj`` (None: a test or a statement it
    cannot follow). A NAME test takes its ``else`` arm: the spelling is not taken to keep the
    module out (its ``continue``), nor to let it into a branch of its own."""
    out = out if out is not None else Run()
    for s in body:
        if isinstance(s, ast.If):
            r = truth(s.test, var, subj, ctx)
            if r is None:
                return None
            out.tests.append((s, r))
            arm = s.body if r is True else s.orelse
            if run(arm, var, subj, ctx, out) is None:
                return None
            if _skips(arm):
                return out
            continue
        if isinstance(s, (ast.Continue, ast.Break, ast.Return, ast.Raise)):
            return out
        got = _append(s, var)
        if got is not None:
            out.appends.append((got[0], got[1], s))
            continue
        if isinstance(s, (ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef)):
            return None
        if any(isinstance(n, ast.Name) and n.id == var for n in walk(s)):
            return None  # the module read some other way
    return out


def _skips(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Continue, ast.Break, ast.Return, ast.Raise))


def _append(s: ast.stmt, var: str) -> tuple[str, str | None] | None:
    """``(list, attr)`` for ``L.append(v.attr)``; ``(list, None)`` for ``L.extend(v.parameters())``,
    ``L.extend([*v.parameters()])``, ``L += list(v.parameters())``, a comprehension over them,
    ``L.append({"params": v.parameters()})`` (the recursive ones)."""
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
            and isinstance(s.value.func, ast.Attribute) and len(s.value.args) == 1:
        lst, a = dotted(s.value.func.value), s.value.args[0]
        if not lst:
            return None
        if s.value.func.attr == "append" and isinstance(a, ast.Attribute) \
                and isinstance(a.value, ast.Name) and a.value.id == var:
            return lst, a.attr
        if s.value.func.attr == "extend" and _recursive_params(a, var):
            return lst, None
        if s.value.func.attr == "append" and isinstance(a, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "params" and _recursive_params(v, var)
                for k, v in zip(a.keys, a.values)):
            return lst, None  # `groups.append({"params": v.parameters(), ...})`
    if isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add) and dotted(s.target) \
            and _recursive_params(s.value, var):
        return dotted(s.target), None
    lists = param_loop_lists(s, var)
    return (lists[0], None) if lists else None


def param_loop_lists(s: ast.stmt, var: str) -> list[str]:
    """The lists ``for p in v.parameters(): L.append(p)`` (``for n, p in
    v.named_parameters()``, recursive: no arguments) appends each parameter to, in order."""
    if not isinstance(s, ast.For) or s.orelse:
        return []
    it, t = s.iter, s.target
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
            and it.func.attr == "named_parameters" and not it.args and not it.keywords \
            and isinstance(t, ast.Tuple) and len(t.elts) == 2:
        it, t = ast.Call(func=ast.Attribute(value=it.func.value, attr="parameters"), args=[],
                         keywords=[]), t.elts[1]
    if not (_recursive_params(it, var) and isinstance(t, ast.Name)):
        return []
    out: list[str] = []
    for n in walk(s):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "append" and len(n.args) == 1 \
                and isinstance(n.args[0], ast.Name) and n.args[0].id == t.id:
            lst = dotted(n.func.value)
            if lst and lst not in out:
                out.append(lst)
    return out


def _recursive_params(e: ast.expr, var: str) -> bool:
    if isinstance(e, ast.List) and len(e.elts) == 1 and isinstance(e.elts[0], ast.Starred):
        e = e.elts[0].value
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "list" \
            and len(e.args) == 1:
        e = e.args[0]
    if isinstance(e, (ast.ListComp, ast.GeneratorExp)) and len(e.generators) == 1:
        e = e.generators[0].iter  # `[p for p in v.parameters() if p.requires_grad]`
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
        and e.func.attr == "parameters" and isinstance(e.func.value, ast.Name) \
        and e.func.value.id == var and not e.args and not e.keywords


def given_lists(fn: ast.AST, lists: set[str], ctx: Context) -> set[str]:
    """The names of ``lists`` an optimizer of the function is built from (its call or an
    ``add_param_group``), or, when the function returns them, those its callers in the file
    hand an optimizer under the names they unpack them to."""
    out = _in_optimizer(fn, lists, ctx)
    if out or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return out
    order = _returned(fn, lists)
    if not order:
        return out
    for st in walk(ctx.tree):
        if len(order) == 1 and isinstance(st, ast.Call) and (is_optimizer_call(st, ctx) or (
                isinstance(st.func, ast.Attribute) and st.func.attr == "add_param_group")) \
                and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                        and c.func.id == fn.name for c in walk(st)):
            out.add(order[0])  # type: ignore[arg-type]  # `SGD(groups_of(net), lr=0.1)`
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) \
                and isinstance(st.value.func, ast.Name) and st.value.func.id == fn.name \
                and len(st.targets) == 1:
            tg = st.targets[0]
            elts = tg.elts if isinstance(tg, ast.Tuple) else [tg] if len(order) == 1 else []
            if len(elts) != len(order):
                continue
            names = {dotted(t): mine for t, mine in zip(elts, order) if dotted(t) and mine}
            got = _in_optimizer(ctx.tree, set(names), ctx,  # type: ignore[arg-type]
                                after=st.lineno)
            out |= {names[g] for g in got}  # type: ignore[misc]
    return out


def _returned(fn: ast.AST, lists: set[str]) -> list[str | None]:
    """Which of ``lists`` each returned value is: itself, a value built from it, or a local the
    function builds once from it (``groups = [{"params": g} for g in (decay, no_decay)]``)."""
    built: dict[str, set[str]] = {}
    for st in walk(fn):
        if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                and isinstance(st.targets[0], ast.Name):
            name = st.targets[0].id
            built[name] = set() if name in built else {
                x.id for x in walk(st.value) if isinstance(x, ast.Name) and x.id in lists}
    for st in walk(fn):
        if isinstance(st, ast.Return) and st.value is not None:
            elts = st.value.elts if isinstance(st.value, ast.Tuple) else [st.value]
            order = [dotted(e) if dotted(e) in lists else None for e in elts]
            if not any(order) and len(elts) == 1:  # `return [{"params": decay}, ...]` too
                got = {x.id for x in walk(elts[0]) if isinstance(x, ast.Name)
                       and x.id in lists} | (built.get(elts[0].id, set()) if isinstance(
                           elts[0], ast.Name) else set())
                order = list(got) if len(got) == 1 else order  # type: ignore[assignment]
            if any(order):
                return order
    return []


def _in_optimizer(fn: ast.AST, lists: set[str], ctx: Context, after: int = 0) -> set[str]:
    out: set[str] = set()
    for n in walk(fn):
        if isinstance(n, ast.Call) and n.lineno > after and (is_optimizer_call(n, ctx) or (
                isinstance(n.func, ast.Attribute) and n.func.attr == "add_param_group")):
            out |= {x.id for x in ast.walk(n) if isinstance(x, ast.Name) and x.id in lists}
    return out
