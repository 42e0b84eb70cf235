"""Whether what a training loop's optimizer changes is ever observed.

# NOTE [unobserved training]
Gradients that add up across steps (GT501, GT502) change the weights an optimizer steps; the
consequence exists only if something looks at those weights or at what they compute. A
function that builds a model and its optimizer for itself and only runs steps on them (a
throughput or memory benchmark: a loop of forward, backward and step on constant tensors,
then the time printed) has no such reader: whatever the steps do to the weights, the
program's output is the same.

:func:`unobserved_training` says so for one optimizer of one function, from the code only:

- the optimizer is a local name of the function, every binding of it an optimizer built from
  ``<name>.parameters()``; that name is local too, bound only to a fresh object (a call of a
  class or function by a plain or imported name, not a method of ``self``), to a part or a
  moved or wrapped copy of another such local (``modul.net``, ``net.cuda()``,
  ``torch.compile(net)``), never a parameter of the function, a global, an attribute, a
  loop, ``with`` or unpacked target, nor what a method of an argument builds
  (``builder.build()``: maybe shared);
- every name that holds the model, the optimizer or a value computed from them (outputs,
  losses, their sums) is read only to compute another such local name (by the model's own
  call, a method of the value, a ``torch`` function or arithmetic), or by the training step's
  own statements: ``backward``, the optimizer's ``step``/``zero_grad``, gradient clipping, a
  scaler's ``update``, ``model.train()``/``.eval()``/``.to()``;
- nothing else reads them: no ``print``, ``return``, ``append``, attribute or item store,
  condition, loop over them, call of another function, nested function or lambda.

Anything else is an observer and the training counts as observed (the rule fires). A toy
training loop that prints its loss, returns its model or saves it is observed; so is a
method's loop on ``self.model``, and an optimizer over anything but one local's
``.parameters()`` (``Adam([z])``).
Known limit: a fresh object is taken as the function's own; one built around a module the
caller also holds (``Net(encoder)`` with ``encoder`` an argument) would train that module for
the caller unseen. Only the arguments' use could tell a module from a configuration.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.nodes import scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Def = (ast.FunctionDef, ast.AsyncFunctionDef)
# methods of the model or optimizer that take part in a training step and show nothing
STEP_METHODS = frozenset({"train", "eval", "to", "cuda", "cpu", "float", "half", "double",
                          "requires_grad_", "zero_grad", "step", "backward"})
# torch's calls that give back the model they are given, wrapped (its parameters shared)
MODEL_WRAPPERS = frozenset({"torch.compile", "torch.nn.DataParallel",
                            "torch.nn.parallel.DataParallel",
                            "torch.nn.parallel.DistributedDataParallel", "torch.jit.script",
                            "torch.jit.trace"})
# builtins that compute a value from their arguments and show nothing
PURE_BUILTINS = frozenset({"len", "float", "int", "abs", "max", "min", "sum", "round", "list",
                           "tuple", "iter", "next", "zip", "enumerate", "range"})


def unobserved_training(ctx: Context, fn: ast.AST, opt: str) -> bool:
    """The optimizer ``opt`` of the function ``fn`` trains a model nothing observes
    (NOTE [unobserved training])."""
    if not isinstance(fn, Def) or "." in opt:
        return False
    memo: dict = ctx.memo("unobserved-training", fn, dict)
    if opt not in memo:
        memo[opt] = _unobserved(ctx, fn, opt)
    return memo[opt]


def _unobserved(ctx: Context, fn: ast.AST, opt: str) -> bool:
    params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}  # type: ignore
    outer: set[str] = set()
    binds: dict[str, list[ast.expr | None]] = {}
    nested: list[ast.AST] = []
    for n in scope_nodes(fn, defs=True):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            outer.update(n.names)
        elif isinstance(n, (*Def, ast.Lambda, ast.ClassDef)):
            nested.append(n)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                for name, value in _bound(t, n.value):
                    binds.setdefault(name, []).append(value)
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr, ast.AugAssign,
                            ast.comprehension)):
            t = n.optional_vars if isinstance(n, ast.withitem) else n.target
            for x in ast.walk(t) if t is not None else ():
                if isinstance(x, ast.Name):  # bound to something not followed
                    binds.setdefault(x.id, []).append(None)
    if opt in params or opt in outer or not binds.get(opt):
        return False
    models: set[str] = set()
    for value in binds[opt]:
        owner = _parameters_owner(value)
        if owner is None:
            return False
        models.add(owner)
    held = {opt}
    todo = list(models)
    while todo:  # the model, and the locals it is a part or a copy of
        name = todo.pop()
        if name in held:
            continue
        if name in params or name in outer or not binds.get(name):
            return False
        held.add(name)
        for value in binds[name]:
            src = _source(ctx, value, params | outer)
            if src is False:
                return False
            if src is not None:
                todo.append(src)
    if any(isinstance(x, ast.Name) and x.id in held for n in nested for x in ast.walk(n)):
        return False  # a nested function or lambda reads them: not followed
    calls = step_calls(ctx, fn)
    own = {id(x.stmt) for group in (calls.backwards, calls.steps, calls.zero_grads,
                                    calls.clips, calls.unscales, calls.updates) for x in group}
    stmts = [n for n in scope_nodes(fn, defs=True) if isinstance(n, ast.stmt) and n is not fn]
    grew = True
    while grew:  # the values computed from them, until no statement adds one
        grew = False
        for s in stmts:
            got = _reader(ctx, s, held, own, params | outer)
            if got is None:
                continue
            if got is False:
                return False
            if not got <= held:
                held |= got
                grew = True
    return True


def _bound(t: ast.expr, value: ast.expr | None):
    if isinstance(t, ast.Name):
        yield t.id, value
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _bound(e.value if isinstance(e, ast.Starred) else e, None)


def _parameters_owner(value: ast.expr | None) -> str | None:
    """``m`` for an optimizer built from ``m.parameters()`` (first argument or ``params=``)."""
    if not isinstance(value, ast.Call):
        return None
    arg = value.args[0] if value.args else next(
        (k.value for k in value.keywords if k.arg == "params"), None)
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) \
            and arg.func.attr == "parameters" and isinstance(arg.func.value, ast.Name):
        return arg.func.value.id
    return None


def _source(ctx: Context, value: ast.expr | None, outside: set[str]) -> str | None | bool:
    """What a binding of the model is made from: another local's name (a part, a moved or
    wrapped copy of it), None (a fresh object), False (anything else: not followed)."""
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return value.value.id  # `net = modul.net`
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    if isinstance(f, ast.Attribute) and f.attr in STEP_METHODS:
        if isinstance(f.value, ast.Name):
            return f.value.id  # `modul = modul.cuda()`
        return _source(ctx, f.value, outside)  # `Net(args).to(device)`
    if value.args and isinstance(value.args[0], ast.Name) and \
            ctx.qualified_name(f) in MODEL_WRAPPERS:
        return value.args[0].id  # `torch.compile(net)`, `nn.DataParallel(net)`
    root = f
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or root.id in {"self", "cls"} or root.id in outside \
            and root is not f:
        return False  # `self.build()`, `builder.build()` of an argument: maybe shared
    return None  # `NormalSelfAttention(args)`, `M(ex)`: a new object


def _reads(node: ast.AST, held: set[str]) -> bool:
    return any(isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load) and x.id in held
               for x in ast.walk(node))


def _reader(ctx: Context, s: ast.stmt, held: set[str], own: set[int],
            outside: set[str]) -> set[str] | None | bool:
    """What statement ``s`` does with the held names: None (reads none, or only as a step of
    the training), the local names it binds from them, or False (it shows them)."""
    if isinstance(s, (*Def, ast.ClassDef)):
        return None
    if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        value = s.value
        if value is None or not _reads(value, held):
            return None
        if not _pure(ctx, value, held):
            return False
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        names: set[str] = set()
        for t in targets:
            if isinstance(t, ast.Name):
                names.add(t.id)
            elif isinstance(t, (ast.Tuple, ast.List)) and all(
                    isinstance(e, ast.Name) for e in t.elts):
                names.update(e.id for e in t.elts)  # type: ignore[attr-defined]
            else:
                return False  # `self.x = loss`, `d[k] = out`: stored where others read
        return False if names & outside else names
    if isinstance(s, ast.Expr):
        if not _reads(s.value, held):
            return None
        if id(s) in own:
            return None  # backward, step, zero_grad, clip, scaler update
        c = s.value
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                and c.func.attr in STEP_METHODS and isinstance(c.func.value, ast.Name) \
                and c.func.value.id in held and not any(_reads(a, held) for a in c.args):
            return None  # `model.train()`, `optimizer.zero_grad()`
        return False
    if isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.If)):
        head = s.iter if isinstance(s, (ast.For, ast.AsyncFor)) else s.test
        return False if _reads(head, held) else None  # the body's statements come on their own
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return False if any(_reads(i, held) for i in s.items) else None
    if isinstance(s, (ast.Try, ast.Pass, ast.Break, ast.Continue, ast.Import, ast.ImportFrom,
                      ast.Global, ast.Nonlocal)):
        return None
    return False if _reads(s, held) else None  # return, raise, assert, del, ...


def _pure(ctx: Context, value: ast.expr, held: set[str]) -> bool:
    """Every call in ``value`` that reads a held name computes a value and shows nothing: the
    model's own call, a method of a held value, a ``torch`` function, a pure builtin."""
    for c in ast.walk(value):
        if isinstance(c, (ast.Lambda, *COMPS)) and _reads(c, held):
            return False
        if not isinstance(c, ast.Call) or not _reads(c, held):
            continue
        f = c.func
        if isinstance(f, ast.Name) and (f.id in held or f.id in PURE_BUILTINS):
            continue
        if isinstance(f, ast.Attribute) and _reads(f.value, held):
            continue  # `loss.mean()`, `out.sum()`, `(a - b).pow(2)`
        q = ctx.qualified_name(f) or ""
        if q.startswith("torch.") and q not in SHOWING_TORCH \
                and not q.startswith("torch.utils.tensorboard"):
            continue  # `F.mse_loss(out, y)`, `torch.optim.SGD(net.parameters())`
        return False
    return True


COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# torch functions that write or show what they are given
SHOWING_TORCH = frozenset({"torch.save", "torch.onnx.export", "torch.jit.save"})
