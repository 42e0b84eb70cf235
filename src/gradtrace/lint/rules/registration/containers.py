"""GT401-GT403: learnable things a module holds but does not register."""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.list_elements import container_elements as _elements, rewraps
from gradtrace.lint.analysis.modules import is_module_class
from gradtrace.lint.analysis.vocabulary import OTHER_FRAMEWORKS
from gradtrace.lint.flow import NEW_TENSOR_FUNCS
from gradtrace.lint.rules.leaf._tensors import (
    is_true, grad_factory, is_parameter_call, made_non_leaf, nn_alias, single_assign_of)
from gradtrace.lint.analysis.params import module_ctor
from gradtrace.lint.analysis.self_frozen import freezes_itself
from gradtrace.lint.rules.registration._modules import module_classes, owns_params, statements
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.registration._attrs import (
    _grad_switches, _grouped_elsewhere, _optimized_attrs, _registers_dynamically, _self_attr,
    _wrapped_attrs, hand_listed, input_sized, per_call_input, picked_attrs)
from gradtrace.lint.rules.registration._bound_once import appended_once, bound_once
from gradtrace.lint.rules.registration._callers import call_count, passed_in
from gradtrace.lint.rules.registration._copies import uncopied
from gradtrace.lint.rules.registration._unused import never_named
from gradtrace.lint.rules.registration._foreign_layers import other_file_layer
from gradtrace.lint.rules.registration._helper_built import MAPPED_TEXT, mapped_entries
from gradtrace.lint.rules.registration._returned_lists import returned_entries, stores_built
from gradtrace.lint.rules.registration._local_lists import _is_empty, _local_lists

CONTAINER_TEXT_RE = re.compile(
    r"self\.\w+\s*=\s*(?:\[|\{|\(|list\(|dict\(|None if [^\n]*?else [\[{])")
# `self.layers = layers`: maybe a list the caller builds (then called: `Net([...])`)
PLAIN_TEXT_RE = re.compile(r"self\.\w+\s*=\s*(?:list\(|tuple\()?\w+\)?\s*(?:#.*)?$", re.MULTILINE)
LOCAL_LIST_TEXT = " = ["  # a local list, maybe stored on self later (a literal: fast to find)


MODULE_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16"})


def _learnable(e: ast.AST, ctx: Context) -> str | None:
    """"module" / "parameter" when ``e`` builds a module with parameters / a parameter (a class
    of another file when it owns parameters there); a module moved on too (``Module.to``).
    A module of a class of the file that builds its own optimizer trains itself (a federated
    client, an agent): a participant its holder calls on, not a layer of the holder."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and _trains_itself(e.func.id, ctx):
        return None
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in MODULE_MOVES and isinstance(e.func.value, ast.Call) \
            and module_ctor(e.func.value, ctx):
        e = e.func.value
    if owns_params(e, ctx):
        return "module"
    if other_file_layer(e, ctx):  # NOTE [layer class of another file]
        return "module"
    if is_parameter_call(e, ctx) or grad_factory(e, ctx) is not None:
        return "parameter"
    return None


def _trains_itself(name: str, ctx: Context) -> bool:
    """The class ``name`` of the file builds a ``torch.optim`` optimizer in a method, or
    freezes all its weights when built (NOTE [frozen when built])."""
    cls = ctx.analysis.classes.get(name)
    return cls is not None and (freezes_itself(name, ctx) or any(
        isinstance(n, ast.Call) and (q := ctx.call_name(n) or "").startswith("torch.optim.")
        and not q.startswith("torch.optim.lr_scheduler.") for n in walk(cls.node)))


def _present_arm(value: ast.AST) -> ast.AST:
    """``{...}`` for ``{...} if use_tokens else None``: the container built when on."""
    if isinstance(value, ast.IfExp):
        for arm, other in ((value.body, value.orelse), (value.orelse, value.body)):
            if isinstance(other, ast.Constant) and other.value is None:
                return arm
    return value


def _local_list(value: ast.AST, func: ast.FunctionDef, ctx: Context
                ) -> tuple[list[ast.AST], ast.stmt] | None:
    """Elements of a list built in a local of ``func`` and stored as ``self.x = layers`` (or
    ``list(layers)``), with the statement that makes it (see :func:`_local_lists`)."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in ("list", "tuple") and len(value.args) == 1 and not value.keywords:
        value = value.args[0]
    if not isinstance(value, ast.Name):
        return None
    return ctx.memo("gt401-locals", func, lambda: _local_lists(func)).get(value.id)


class ModulesInPlainContainer(Rule):
    """Layers or parameters kept in a plain Python list/dict on a module are not registered.

    Why: `nn.Module.__setattr__` registers `nn.Module` and `nn.Parameter` values, not lists
    or dicts of them (pytorch-facts.md#registration). The layers in `self.layers =
    [nn.Linear(...), ...]`
    are missing from `parameters()`, `state_dict()`, `.to(device)` and so from the optimizer:
    they never train and are not saved. Use `nn.ModuleList` / `nn.ModuleDict` (or
    `nn.ParameterList` / `nn.ParameterDict`).
    A list of `(name, layer)` pairs (`[(n, nn.Linear(d, k)) for n, k in tasks.items()]`) holds
    its layers as plainly (no fix offered: the pairs belong in an `nn.ModuleDict`).
    Known limits: only containers filled with layers that own parameters (or with parameters)
    in the same class; a list wrapped later in `nn.ModuleList`/`nn.Sequential`, or in a class
    that registers with `add_module`/`setattr` or lists it in its own `parameters()`, is left
    alone; so is a list of modules of a class of this file that visibly owns no parameter or
    buffer (parameter-free layers, data transforms, plain values). A class of another file
    of the project counts as a layer when it owns parameters there; one the project does not
    hold, only when named like one (`CrossLayer`, `ResBlock`, `MLP`). An attribute
    set more than once is checked only when every assignment is in `__init__` (`if` arms). A local
    list of `__init__` stored on `self` (`fns.append(...)`; `self.fns = fns`) counts unless the
    local is also handed to a call (`nn.Sequential(*layers)` registers the same layers). A
    container whose name the file spells nowhere else is left alone (NOTE [unused layers]).
    """

    code = "GT401"
    name = "modules-in-plain-container"
    message = ("`self.{attr}` is a plain Python {kind} of {what}: they are not registered, so "
               "`parameters()`, `state_dict()` and `.to()` miss them; use `nn.{cls}`")
    fix_title = "Wrap the container in `nn.ModuleList`/`nn.ModuleDict`/`nn.ParameterList`"
    fix_safety = "unsafe"
    triggers = ("Module", "forward", "super(")  # `super(`: a subclass of a file's module
    gate_statements = True
    examples = [
        Bad("""
            import torch.nn as nn
            class MLP(nn.Module):
                def __init__(self, sizes):
                    super().__init__()
                    self.layers = [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
                def forward(self, x):
                    for layer in self.layers:
                        x = layer(x)
                    return x
            """, fixed="""
            import torch.nn as nn
            class MLP(nn.Module):
                def __init__(self, sizes):
                    super().__init__()
                    self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])
                def forward(self, x):
                    for layer in self.layers:
                        x = layer(x)
                    return x
            """, at=(5, 8)),
        Bad("""
            import torch.nn as nn
            class Heads(nn.Module):
                def __init__(self, tasks):
                    super().__init__()
                    self.heads = {}
                    for t in tasks:
                        self.heads[t] = nn.Linear(64, 1)
            """, fixed="""
            import torch.nn as nn
            class Heads(nn.Module):
                def __init__(self, tasks):
                    super().__init__()
                    self.heads = nn.ModuleDict()
                    for t in tasks:
                        self.heads[t] = nn.Linear(64, 1)
            """, at=(5, 8)),
        Good("""
            import torch.nn as nn
            class MLP(nn.Module):
                def __init__(self, sizes):
                    super().__init__()
                    layers = [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
                    self.net = nn.Sequential(*layers)
                    self.blocks = [nn.Linear(4, 4), nn.Linear(4, 4)]
                    self.blocks = nn.ModuleList(self.blocks)
                    self.acts = [nn.ReLU(), nn.GELU()]
                    self.sizes = [1, 2, 3]
                    self.anchors = [torch.zeros(4), torch.ones(4)]
                    self.fc = nn.Linear(4, 4)
                    self.order = [self.fc, self.net]
            class Config:
                def __init__(self):
                    self.layers = [nn.Linear(2, 2)]
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if node.name not in module_classes(ctx):
            return
        text = "\n".join(ctx.code_lines[node.lineno - 1:node.end_lineno])
        if not (CONTAINER_TEXT_RE.search(text) or LOCAL_LIST_TEXT in text or (
                    PLAIN_TEXT_RE.search(text) and call_count(node.name, ctx) > 1)
                or MAPPED_TEXT in text or stores_built(text, node.name, ctx)):
            return
        assigns: dict[str, list[ast.Assign]] = {}
        fills: dict[str, list[tuple[ast.stmt, ast.AST]]] = {}
        for n in statements(node):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                t = n.targets[0]
                attr = _self_attr(t)
                if attr is not None:
                    assigns.setdefault(attr, []).append(n)
                elif isinstance(t, ast.Subscript):
                    sub = _self_attr(t.value)
                    if sub is not None:
                        fills.setdefault(sub, []).append((n, n.value))
            elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) \
                    and isinstance(n.value.func, ast.Attribute) \
                    and n.value.func.attr in ("append", "extend", "insert", "update") \
                    and n.value.args:
                sub = _self_attr(n.value.func.value)
                if sub is not None:
                    fills.setdefault(sub, []).append((n, n.value.args[-1]))
        init = next((s for s in node.body if isinstance(s, ast.FunctionDef)
                     and s.name == "__init__"), None)
        lo, hi = (init.lineno, init.end_lineno or 0) if init is not None else (0, -1)  # its lines
        for attr, stmts in assigns.items():
            if len(stmts) != 1 and not all(lo <= st.lineno <= hi for st in stmts):
                continue  # set again in another method: rebuilt or reset there
            if any(not lo <= f.lineno <= hi and _learnable(v, ctx) is None
                   for f, v in fills.get(attr, ()) if isinstance(f, ast.Assign)):
                continue  # slots overwritten by a method with values it computes (FrEIA's
                # `self.variable_list[i] = x`): scratch storage of activations, not weights
            # `self.x = None` then `self.x = []` under `if layers is not None:`: one container
            stmts = [st for st in stmts if not (isinstance(st.value, ast.Constant)
                                                and st.value.value is None)] or stmts
            stmts = [st for st in stmts if not rewraps(st.value, attr)] or stmts  # `list(self.x)`
            # one per branch of an `if` in __init__ (`field_each` variant); with several
            # assignments, the appends may belong to another branch's container: only a
            # list with its layers in it (or a local list) is judged
            filled = fills.get(attr, []) if len(stmts) == 1 else []
            for st in stmts:
                where = init if lo <= st.lineno <= hi else None
                for f in self._check(st, attr, filled, ctx, where, node.name):
                    if attr not in _wrapped_attrs(ctx) and not _registers_dynamically(node) \
                            and attr not in picked_attrs(node) | hand_listed(node) and not \
                            never_named(node, attr, ctx) and not _other_framework(node, ctx, 0):
                        yield f  # last: it may read another file of the project (a parse)

    def _check(self, stmt: ast.Assign, attr: str, fills: list[tuple[ast.stmt, ast.AST]],
               ctx: Context, init: ast.FunctionDef | None = None, cls: str = ""
               ) -> Iterator[Finding]:
        value = _present_arm(stmt.value)
        related: list[Related] = []
        nested: ast.stmt | None = None
        inner_kind = ""
        got = _elements(value) if _is_empty(value) is None else None
        pairs = got is not None and any(isinstance(e, ast.Tuple) for e in got[1])
        if got is not None and pairs:  # `[(name, nn.Linear(...)) for ...]`: a list of pairs
            got = got[0], [x for e in got[1] for x in (e.elts if isinstance(e, ast.Tuple)
                                                       else [e])]
        got = got or mapped_entries(value, ctx)  # NOTE [mapped containers]
        helper = returned_entries(value, cls, ctx) if got is None else None
        if helper is not None:  # NOTE [returned containers]
            got = helper[:2]
            related.append(Related(ctx.path, helper[2].lineno, "the plain container is built "
                                   "and returned here", ctx.column(helper[2])))
        local = _local_list(value, init, ctx) if got is None and init else None
        passed = passed_in(value, init, cls, ctx) if got is None and local is None and init \
            else None
        if passed is not None:
            kind, elts, made = "list", passed[0], passed[1]
            related.append(Related(ctx.path, made.lineno, "the layers are made here and "
                                   "passed in", ctx.column(made)))
        elif got is not None:  # a list with layers in it, maybe appended to later
            kind, elts = got[0], [*got[1], *(bound_once(v, f, init, ctx) for f, v in fills)]
        elif local is not None:  # its appended locals: the call that made each
            kind, elts, made = "list", [appended_once(e, init, ctx) for e in local[0]], local[1]
            related.append(Related(ctx.path, made.lineno, "the list is built here",
                                   ctx.column(made)))
        else:
            empty = _is_empty(value)
            if empty is None or not fills:
                return
            kind = empty
            elts = []
            for s, v in fills:
                v = bound_once(v, s, init, ctx)
                inner = _elements(v)
                if inner is not None and nested is None and any(  # parameters: the inner
                        _learnable(e, ctx) == "parameter" for e in inner[1]):  # line decides
                    nested, inner_kind = s, inner[0]  # `self.w[k] = {'w': nn.Parameter(..)}`
                elts.extend(inner[1] if inner else [v])
                outside = passed_in(v, init, cls, ctx, element=True) if init else None
                if outside is not None:
                    elts.extend(outside[0])
                    related.append(Related(ctx.path, outside[1].lineno, "the layers are made "
                                           "here and passed in", ctx.column(outside[1])))
                related.append(Related(ctx.path, s.lineno, f"`self.{attr}` is filled here",
                                       ctx.column(s)))
        learn = {_learnable(e, ctx) for e in uncopied(elts, init, cls, ctx)} - {None}
        if not learn:
            return
        what = "layers" if "module" in learn else "parameters"
        cls = ("Module" if what == "layers" else "Parameter") + (
            "Dict" if pairs else kind.capitalize())  # pairs: keyed by their names
        nn = nn_alias(ctx)
        fix = None
        str_keys = not isinstance(value, ast.Dict) or all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys)
        if nn is not None and str_keys and not isinstance(value, ast.BinOp) and not pairs:
            src = ctx.source(value)
            inner = "" if _is_empty(value) else (f"[{src[1:-1]}]" if isinstance(
                value, (ast.Tuple, ast.GeneratorExp)) and src.startswith("(") else src)
            fix = self.fix(ctx.edit(value, f"{nn}.{cls}({inner})"))
        shown = "tuple" if isinstance(value, ast.Tuple) else kind  # `(nn.Embedding(...),)`
        if nested is not None:  # the inner plain container is the line to change: a
            # `ModuleDict` cannot hold it; the parameters belong in an `nn.ParameterDict`
            yield self.report(nested, ctx, related=[Related(
                ctx.path, stmt.lineno, f"`self.{attr}` is made here", ctx.column(stmt))],
                attr=f"{attr}[...]", kind=inner_kind, what=what,
                cls=("Module" if what == "layers" else "Parameter") + inner_kind.capitalize())
            return
        yield self.report(stmt, ctx, related=related[:1], fix=fix, attr=attr, kind=shown,
                          what=what, cls=cls)


class LearnableTensorAsPlainAttribute(Rule):
    """A tensor created with `requires_grad=True` is stored on a module as a plain attribute.

    Why: only `nn.Parameter` values (and submodules) are registered by `nn.Module.__setattr__`
    (pytorch-facts.md#registration). A plain tensor attribute gets `.grad` but is missing from
    `parameters()` (so from the optimizer: it never changes), from `state_dict()` and from
    `.to(device)`. Use `self.w = nn.Parameter(torch.randn(...))`; for a constant, use
    `self.register_buffer(...)`.
    Known limits: only tensors made with `requires_grad=True` in a method of an `nn.Module`
    subclass of the same file; a tensor the code hands to an optimizer itself
    (`RMSprop([self.lambda_op])`, or hands out by an accessor: `arch_parameters()`), or that
    another file of the project puts into a parameter group (`{'params': gammas}`:
    NOTE [parameter group built elsewhere]), is left alone.
    """

    code = "GT402"
    gate_statements = True
    name = "learnable-tensor-as-plain-attribute"
    message = ("`self.{attr}` requires grad but is a plain tensor attribute, not an "
               "`nn.Parameter`: it is not in `parameters()`, `state_dict()` or `.to()`")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Scale(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.gamma = torch.ones(n, requires_grad=True)
                def forward(self, x):
                    return x * self.gamma
            """, at=(6, 8)),
        Bad("""
            import torch
            import torch.nn as nn
            class Bias(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.b = torch.zeros(n)
                    self.b.requires_grad = True
            """, at=(6, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Scale(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.gamma = nn.Parameter(torch.ones(n))
                    self.register_buffer("mask", torch.ones(n))
                    self.table = torch.arange(n)
                def forward(self, x):
                    return x * self.gamma * self.mask
            class Probe:
                def __init__(self):
                    self.delta = torch.zeros(3, requires_grad=True)
            """),
    ]

    def visit_Call(self, call: ast.Call, ctx: Context) -> Iterator[Finding]:
        node = single_assign_of(call, ctx)
        if node is None:
            return
        attr = _self_attr(node.targets[0])
        cls = ctx.class_def
        if attr is None or cls is None or ctx.function is None:
            return
        if grad_factory(node.value, ctx) is None and made_non_leaf(node.value, ctx) is None:
            return
        if not _module_class(cls, ctx) or attr in _wrapped_attrs(ctx) \
                or attr in _optimized_attrs(ctx) or attr in _grad_switches(ctx) \
                or per_call_input(call, ctx.function, ctx) or input_sized(call, ctx.function, ctx) \
                or _grouped_elsewhere(attr, ctx):
            return
        yield self.report(node, ctx, attr=attr)

    def visit_Attribute(self, t: ast.Attribute, ctx: Context) -> Iterator[Finding]:
        """``self.w = torch.zeros(n)`` then ``self.w.requires_grad = True``."""
        stmt = ctx.statement
        if t.attr != "requires_grad" or not isinstance(t.ctx, ast.Store) \
                or not isinstance(stmt, ast.Assign) or not is_true(stmt.value):
            return
        attr = _self_attr(t.value)
        cls, fn = ctx.class_def, ctx.function
        if attr is None or cls is None or fn is None or not _module_class(cls, ctx) \
                or attr in _wrapped_attrs(ctx) or attr in _optimized_attrs(ctx) \
                or attr in _grad_switches(ctx) or _grouped_elsewhere(attr, ctx):
            return
        made = None
        for s in statements(fn):
            if s.lineno >= stmt.lineno:
                break
            if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and _self_attr(s.targets[0]) == attr:
                made = s if isinstance(s.value, ast.Call) \
                    and ctx.call_name(s.value) in NEW_TENSOR_FUNCS else None
        if made is not None:
            yield self.report(made, ctx, related=[Related(ctx.path, stmt.lineno, f"`self.{attr}` "
                              "is made to require grad here", ctx.column(stmt))], attr=attr)


def _module_class(cls: ast.ClassDef, ctx: Context) -> bool:
    """An ``nn.Module`` subclass of the file, also one defined inside a function (a class
    factory: ``def _build(size): class Init(nn.Module): ...; return Init()``), which the file's
    class index does not hold."""
    known = module_classes(ctx)
    if cls.name in known:
        return True
    return cls.name not in ctx.analysis.classes and is_module_class(cls, set(known),
                                                                     ctx.qualified_name)


def _other_framework(cls: ast.ClassDef, ctx: Context, depth: int) -> bool:
    """Every base of ``cls`` is another framework's class re-exported by a file of the project
    (xuance's ``from xuance.tensorflow import Module``, whose ``__init__`` binds ``from
    tensorflow.keras import Model as Module``; a Keras model tracks its dicts' layers), or a
    class of the file that is one."""
    from gradtrace.lint.analysis.project import reexported
    if not cls.bases or depth > 3:
        return False
    for b in cls.bases:
        own = ctx.analysis.classes.get(b.id) if isinstance(b, ast.Name) else None
        if own is not None and own.node is not cls:
            if not _other_framework(own.node, ctx, depth + 1):
                return False
            continue
        q = reexported(ctx, b.id) if isinstance(b, ast.Name) else None
        if q is None or q.partition(".")[0] not in OTHER_FRAMEWORKS:
            return False
    return True
