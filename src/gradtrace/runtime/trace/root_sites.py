"""The line the user changes, when the line the tracer sees is only where the symptom showed
(issue 13 §2): read from the source file and the live objects, no torch patching.

# NOTE [in-place layer]
When a tensor saved for backward is changed in place inside a layer (``nn.ReLU(inplace=True)``,
``nn.LeakyReLU(0.1, True)``...), the user line the tracer sees is the call of the layer
(``x = relu2(x)``, ``return self.net(x)``), which writes nothing itself: the line to change is
the constructor that asked for ``inplace=True``. Read from the file: the statement at the call
site must spell no in-place write of its own (no augmented or subscript assignment, no
``*_()`` method, no ``inplace=``); the constructors are the calls with ``inplace=True`` whose
class is the op's (``relu_`` -> ``ReLU``; ``hardtanh_`` -> ``ReLU6``/``Hardtanh``). The one
assigned to the name or attribute the call site calls (directly or inside a container built
there) is it; failing that, the only such constructor of the file. Anything ambiguous: None.

The same idea, for other symptoms:
- an in-place update of an inference tensor outside ``inference_mode`` spelt as an augmented
  assignment (``total /= n``, read as a rebinding) is said there (not at the ``with`` block);
- an in-place write on a leaf that requires grad, made by a helper into one of its own
  arguments, is said at the user line that called the helper with that Parameter;
- a non-scalar loss is said at the one ``.sum(dim)``/``.mean(dim)`` that kept a dimension,
  reached from the loss through elementwise ops only (a helper's per-sample return).
"""
from __future__ import annotations

import ast
import linecache
import re
import sys
from typing import Any, Iterator

from gradtrace.runtime.frames import Site

_SAME_OP = {"hardtanh": ("relu6", "hardtanh"), "elu": ("elu", "celu"), "threshold": ("threshold",)}


def _norm(name: str) -> str:
    return name.rstrip("_").replace("_", "").lower()


def _inplace_ctor(n: ast.AST, op: str) -> bool:
    if not (isinstance(n, ast.Call) and any(
            k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in n.keywords)):
        return False
    f = n.func
    last = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    if not last[:1].isupper():
        return False  # F.relu(x, inplace=True) writes on its own line
    return _norm(last) in _SAME_OP.get(op, (op,))


def _writes(stmt: ast.AST) -> bool:
    for n in ast.walk(stmt):
        if isinstance(n, ast.AugAssign) or (isinstance(n, ast.Subscript)
                                            and isinstance(n.ctx, ast.Store)):
            return True
        if isinstance(n, ast.Call) and (any(k.arg == "inplace" for k in n.keywords) or (
                isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_")
                and not n.func.attr.startswith("_"))):
            return True
    return False


def _statement_at(tree: ast.Module, line: int) -> ast.stmt | None:
    best: ast.stmt | None = None
    for n in ast.walk(tree):
        if isinstance(n, ast.stmt) and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                          ast.ClassDef, ast.For, ast.While,
                                                          ast.If, ast.With, ast.Try)) \
                and n.lineno <= line <= (n.end_lineno or n.lineno):
            if best is None or n.lineno >= best.lineno:
                best = n
    return best


def _called(stmt: ast.stmt) -> set[tuple[str, str]]:
    """("name", n) / ("attr", a) for every ``n(...)`` / ``<obj>.a(...)`` of the statement."""
    out: set[tuple[str, str]] = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name):
                out.add(("name", n.func.id))
            elif isinstance(n.func, ast.Attribute):
                out.add(("attr", n.func.attr))
    return out


def _bound(tree: ast.Module) -> Iterator[tuple[tuple[str, str], ast.AST]]:
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    yield ("name", t.id), n.value
                elif isinstance(t, ast.Attribute):
                    yield ("attr", t.attr), n.value


def layer_switched_inplace(where: Site | None) -> Site | None:
    """# NOTE [layer switched to in-place after construction]
    A layer's in-place write reported at ``where`` (a line that calls a layer and writes
    nothing itself) when no constructor in the file asked for ``inplace=True``: the layer's
    ``inplace`` attribute was turned on afterwards (``for m in self.modules(): m.inplace =
    True``, ``setattr(m, "inplace", True)``). The one statement of the file that does so is the
    line to change; none or several: None."""
    if where is None:
        return None
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(where.path)
    stmt = _statement_at(tree, where.line) if tree is not None else None
    if stmt is None or _writes(stmt) or not any(isinstance(n, ast.Call) for n in ast.walk(stmt)):
        return None
    found = [n for n in ast.walk(tree) if _turns_inplace_on(n)]
    if len(found) != 1:
        return None
    return Site(where.path, found[0].lineno, "", found[0].col_offset)


def _turns_inplace_on(n: ast.AST) -> bool:
    """``<obj>.inplace = True`` or ``setattr(<obj>, "inplace", True)``."""
    if isinstance(n, ast.Assign):
        return isinstance(n.value, ast.Constant) and n.value.value is True and any(
            isinstance(t, ast.Attribute) and t.attr == "inplace" for t in n.targets)
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" \
        and len(n.args) == 3 and isinstance(n.args[1], ast.Constant) \
        and n.args[1].value == "inplace" and isinstance(n.args[2], ast.Constant) \
        and n.args[2].value is True


def layer_built_inplace(where: Site | None, op: str) -> Site | None:
    """The line that built, with ``inplace=True``, the layer whose forward ran the in-place
    ``op`` reported at ``where`` (NOTE [in-place layer]); None when ``where`` writes itself or
    the constructor is not clear."""
    if where is None or not op:
        return None
    text = "".join(linecache.getlines(where.path))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    stmt = _statement_at(tree, where.line)
    if stmt is None or _writes(stmt):
        return None
    op = _norm(op)
    ctors = [n for n in ast.walk(tree) if _inplace_ctor(n, op)]
    if not ctors:
        return None
    called = _called(stmt)
    hits: list[ast.AST] = []
    for key, value in _bound(tree):
        if key in called:
            hits.extend(c for c in ctors if any(c is x for x in ast.walk(value)))
    found = {(c.lineno, c.col_offset): c for c in hits}
    if not found and len(ctors) == 1:
        found = {(ctors[0].lineno, ctors[0].col_offset): ctors[0]}
    if len(found) != 1:
        return None
    c = next(iter(found.values()))
    return Site(where.path, c.lineno, "", c.col_offset)


def writes_at(site: Site | None) -> bool:
    """Whether the statement at ``site`` spells an in-place write itself (``x /= n``,
    ``x[i] = v``, ``x.add_(y)``)."""
    if site is None:
        return False
    try:
        tree = ast.parse("".join(linecache.getlines(site.path)))
    except (SyntaxError, ValueError):
        return False
    stmt = _statement_at(tree, site.line)
    return stmt is not None and _writes(stmt)


def _aug_assign_at(site: Site | None) -> bool:
    """Whether the statement at ``site`` is an augmented assignment (``total /= n``): Python
    operator syntax that reads as a rebinding, unlike an explicit ``t.add_()``."""
    if site is None:
        return False
    try:
        tree = ast.parse("".join(linecache.getlines(site.path)))
    except (SyntaxError, ValueError):
        return False
    return isinstance(_statement_at(tree, site.line), ast.AugAssign)


def inplace_update_of_inference(pat: Any, exc: BaseException, func: Any, args: tuple,
                                kwargs: dict, site: Site | None, state: Any) -> list[Any]:
    """``Inplace update to inference tensor outside InferenceMode`` raised by an augmented
    assignment (``test_loss /= len(loader)`` after the ``with torch.inference_mode():`` that
    summed it): that update is the line to change (``x = x / n``, or inside the block), not
    the block. An explicit ``t.add_()`` mutates on purpose: there the block that made the
    tensor stays the cause. [] otherwise (the caller's analysis runs)."""
    from gradtrace.runtime.build import code_for, make, src

    if "Inplace update to inference tensor" not in str(exc) or not _aug_assign_at(site):
        return []
    block = None
    for t in (a for a in args if hasattr(a, "is_inference")):
        cut = state.cut_of(t) if t.is_inference() else None
        block = block or (cut.grad_off if cut is not None else None)
    blocks = list(state.inference_blocks)
    block = block or (blocks[-1] if blocks else None)
    return [make(code_for("inference-tensor", pat.code), site,
                 f"{src(site)} updates in place a tensor made inside torch.inference_mode(): "
                 "an inference tensor cannot be changed outside inference mode",
                 fix="write it out of place (`x = x / n`), or do the update inside the block",
                 related=[(block, "the tensor was made under this inference_mode()")])]


def caller_of_argument_write(exc: BaseException, site: Site | None) -> Site | None:
    """The user line that called the function where ``site`` writes in place into one of
    the function's own arguments, when that argument is a leaf that requires grad
    (``def init(t): t[:] = ...`` called as ``init(conv.weight)``): the call hands the
    Parameter to a helper that edits it with grad mode on, so the call is where grad mode
    must be off. None when the written tensor is not an argument, or no user caller is seen."""
    from gradtrace.runtime.fuse import is_user_file

    if site is None:
        return None
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    if not any(fr.f_code.co_filename == site.path for fr, _ in frames):
        live = sys._getframe(1)  # diagnosed while the op runs: the user frames are live
        while live is not None:
            frames.insert(0, (live, live.f_lineno))
            live = live.f_back
    at = next((i for i, (fr, ln) in enumerate(frames) if ln == site.line
               and fr.f_code.co_filename == site.path), None)
    if not at:
        return None
    frame = frames[at][0]
    code = frame.f_code
    args = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    try:
        stmt = _statement_at(ast.parse("".join(linecache.getlines(site.path))), site.line)
    except (SyntaxError, ValueError):
        return None
    written = _written_names(stmt) & args if stmt is not None else set()
    if not any(getattr(frame.f_locals.get(n), "is_leaf", False)
               and getattr(frame.f_locals.get(n), "requires_grad", False) for n in written):
        return None
    if _sets_autograd_state(code, written):  # NOTE [helper that owns the leaf]
        return None
    for fr, ln in reversed(frames[:at]):
        if is_user_file(fr.f_code.co_filename):
            return Site(fr.f_code.co_filename, ln, fr.f_code.co_name)
    return None


def _sets_autograd_state(code: Any, names: set[str]) -> bool:
    """# NOTE [helper that owns the leaf]
    The helper's own body changes the autograd state of one of the argument names it writes
    (``E.detach_()``, ``E.requires_grad = False``, ``E.requires_grad_(...)``): it is written to
    receive a leaf that requires grad (it freezes it after filling it), so the caller handing
    it a Parameter is its contract and the write inside it is the line to change (put it under
    ``torch.no_grad()``). A generic initialiser (``def init(t): t[:] = ...``) does none of
    this: there the caller is named, as before. Read from the function's source (the code
    object's first line); anything unreadable: False."""
    try:
        tree = ast.parse("".join(linecache.getlines(code.co_filename)))
    except (SyntaxError, ValueError):
        return False
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and code.co_firstlineno in (n.lineno, *(d.lineno for d in n.decorator_list))
               and n.name == code.co_name), None)
    if fn is None:
        return False
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("detach_", "requires_grad_") \
                and isinstance(n.func.value, ast.Name) and n.func.value.id in names:
            return True
        if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                and isinstance(t.value, ast.Name) and t.value.id in names for t in n.targets):
            return True
    return False


def _written_names(stmt: ast.stmt) -> set[str]:
    """Names written in place by ``stmt``: ``t[...] = v``, ``t += v``, ``t.add_(v)``."""
    out: set[str] = set()
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = [t.value for t in stmt.targets if isinstance(t, ast.Subscript)]
    elif isinstance(stmt, ast.AugAssign):
        targets = [stmt.target.value if isinstance(stmt.target, ast.Subscript) else stmt.target]
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr.endswith("_") and not n.func.attr.startswith("_"):
            targets.append(n.func.value)
    out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


_ELEMENTWISE = re.compile(r"^(Add|Sub|Rsub|Mul|Div|Neg|Pow|Exp|Log|Sqrt|Rsqrt|Abs|Clamp|"
                          r"ClampMin|ClampMax|Where|Sigmoid|Tanh|Relu|Square)Backward\d+$")
_PARTIAL = re.compile(r"^(Sum|Mean)Backward1$")  # a sum/mean over given dims


def kept_dim_site(root: Any) -> Site | None:
    """Where a non-scalar loss got its shape: the one line of ``.sum(dim)``/``.mean(dim)``
    (a reduction that kept a dimension) reached from ``root`` through elementwise ops only
    (``2 - 2 * (p * z).sum(dim=-1)`` in a helper, summed with another term by the caller).
    None when there is none, or several lines."""
    from gradtrace.runtime.trace.records import created_site

    queue, seen, found = [getattr(root, "grad_fn", None)], set(), set()
    while queue and len(seen) < 200:
        node = queue.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        kind = type(node).__name__
        if _PARTIAL.match(kind):
            found.add(created_site(node)[0])
        elif _ELEMENTWISE.match(kind):
            queue.extend(n for n, _ in node.next_functions)
    found.discard(None)
    return next(iter(found)) if len(found) == 1 else None


def init_built_attribute(used: Site | None) -> Site | None:
    """A graph built once in a constructor and reused by every step: the statement at
    ``used`` (the first line after an optimizer step, or after a backward, that consumed a
    stale value) reads ``self.<attr>``, and the file assigns ``self.<attr>`` exactly once, in
    an ``__init__``, from a computation (``self.mask_e = self.embedding(ids)``; not a constant,
    a class being built, or a ``Parameter``). That assignment, else None."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(used.path) if used is not None else None
    stmt = _statement_at(tree, used.line) if tree is not None else None
    if stmt is None:
        return None
    read = {n.attr for n in ast.walk(stmt) if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name)
            and n.value.id == "self"}
    found: dict[str, list[tuple[str, ast.Assign]]] = {}
    for fn in ast.walk(tree) if read else ():
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    for t in (e for tg in (n.targets if isinstance(n, ast.Assign) else [n.target])
                              for e in ast.walk(tg)):  # (lstm_out, self.hidden) = ... too
                        if isinstance(t, ast.Attribute) and t.attr in read and \
                                isinstance(t.value, ast.Name) and t.value.id == "self":
                            found.setdefault(t.attr, []).append((fn.name, n))
    hits = []
    for attr, binds in found.items():
        (fn_name, node), computed = binds[0], _computed(binds[0][1].value)
        if len(binds) == 1 and fn_name == "__init__" and computed:
            hits.append(Site(used.path, node.lineno, "__init__", node.col_offset))
    return hits[0] if len(hits) == 1 else None


def _computed(value: ast.AST | None) -> bool:
    """A value computed from the object's own layers or tensors: a call of a ``self``
    attribute (``self.embedding(ids)``, ``self.encode(x)``) or an operator on ``self``
    attributes; not a constant, a class being built (``nn.Linear``, ``nn.Parameter``) or a
    plain function of numbers (``math.sqrt(d)``)."""
    if isinstance(value, ast.Call):
        f = value.func
        while isinstance(f, ast.Attribute):
            f = f.value
        return isinstance(value.func, ast.Attribute) and isinstance(f, ast.Name) \
            and f.id == "self" and not value.func.attr[:1].isupper()
    return isinstance(value, (ast.BinOp, ast.UnaryOp)) and any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
        for n in ast.walk(value))
