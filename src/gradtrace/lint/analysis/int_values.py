"""Values of a function that are integer (or bool) tensors by how they are made: integer
tensors never require grad, so autograd gives them no ``grad_fn`` and never differentiates
through them (the outputs of an index kernel's ``Function.forward``)."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.cuts import INTEGER_METHODS
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import peel, walk

INT_TENSOR_CLASSES = frozenset({"IntTensor", "LongTensor", "ShortTensor", "ByteTensor",
                                "CharTensor", "BoolTensor"})
INT_DTYPES = frozenset({"int", "int8", "int16", "int32", "int64", "long", "short", "uint8",
                        "bool"})
# methods whose result has the receiver's dtype
SAME_DTYPE = frozenset({"zero_", "fill_", "unsqueeze", "squeeze", "view", "reshape",
                        "contiguous", "permute", "transpose", "flatten", "cuda", "cpu",
                        "clone", "expand", "repeat", "narrow"})
JOINS = frozenset({"torch.cat", "torch.stack", "torch.concat"})
# ops that return ``(values, indices)``
VALUES_INDICES = frozenset({"topk", "sort", "kthvalue", "mode", "cummax", "cummin"})


def integer_valued(e: ast.expr | None, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                   depth: int = 0) -> bool:
    """Whether ``e``, read in ``fn``, is an integer tensor: built by ``torch.cuda.IntTensor(...)``
    or with an integer ``dtype=``, given by an integer method (``argmax``, ``.long()``), a
    same-dtype method of one (``idx.unsqueeze(2)``, ``.zero_()``), a comparison (a bool
    tensor), a ``torch.cat``/``stack`` of such values only, a name every binding of ``fn``
    gives one (writes through an index, ``idx[mask] = 0``, keep the dtype), or a parameter
    annotated ``torch.IntTensor``/``LongTensor``."""
    if e is None or depth > 6:
        return False
    if isinstance(e, ast.Subscript):
        return integer_valued(e.value, fn, depth + 1)
    if isinstance(e, ast.Name):
        return _name_integer(e.id, fn, depth)
    if isinstance(e, ast.Compare):  # `idx[:, 0] == -1`: a bool tensor (or a Python bool)
        return True
    if not isinstance(e, ast.Call):
        return False
    f = e.func
    name = dotted(f) or ""
    if name.rpartition(".")[2] in INT_TENSOR_CLASSES and name.startswith("torch."):
        return True
    if any(k.arg == "dtype" and (dotted(k.value) or "").rpartition(".")[2] in INT_DTYPES
           and (dotted(k.value) or "").startswith("torch.") for k in e.keywords):
        return True
    if name in JOINS and e.args and isinstance(e.args[0], (ast.List, ast.Tuple)):
        return bool(e.args[0].elts) and all(integer_valued(x, fn, depth + 1)
                                            for x in e.args[0].elts)
    if isinstance(f, ast.Attribute):
        if f.attr in INTEGER_METHODS:
            return True
        if f.attr in SAME_DTYPE:
            return integer_valued(f.value, fn, depth + 1)
    return False


def _name_integer(name: str, fn: ast.FunctionDef | ast.AsyncFunctionDef, depth: int) -> bool:
    args = fn.args
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        if a.arg == name:
            ann = dotted(a.annotation) if a.annotation is not None else ""
            return bool(ann) and ann.startswith("torch.") \
                and ann.rpartition(".")[2] in INT_TENSOR_CLASSES
    values = []
    for n in walk(fn):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if isinstance(n, ast.Assign) and all(isinstance(t, ast.Subscript) for t in targets):
                continue  # `idx[mask] = 0` writes values in place: the dtype stays idx's
            if any(name in {x.id for x in walk(t) if isinstance(x, ast.Name)} for t in targets):
                if _indices_half(n, name):
                    values.append(None)
                    continue
                if not (isinstance(n, ast.Assign) and len(targets) == 1
                        and isinstance(targets[0], ast.Name)):
                    return False
                values.append(n.value)
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.NamedExpr)) \
                and any(isinstance(x, ast.Name) and x.id == name for x in walk(
                    getattr(n, "target", None) or ast.Pass())):
            return False
    # `idx = idx[:n]`, `idx = idx.view(-1)`: a rebinding from the name itself keeps its dtype
    made = [v for v in values if v is None or _root_name(v) != name]
    return bool(made) and all(v is None or integer_valued(v, fn, depth + 1) for v in made)


def _indices_half(n: ast.stmt, name: str) -> bool:
    """``_, idx = dist.max(1)``, ``vals, idx = torch.topk(x, k)``: ``name`` is the second of
    two names unpacked from an op that returns ``(values, indices)`` (reduced over a dim: a
    ``max``/``min`` without one returns one tensor); the indices are int64."""
    if not (isinstance(n, ast.Assign) and len(n.targets) == 1
            and isinstance(n.targets[0], (ast.Tuple, ast.List)) and len(n.targets[0].elts) == 2
            and isinstance(n.targets[0].elts[1], ast.Name) and n.targets[0].elts[1].id == name
            and isinstance(n.value, ast.Call)):
        return False
    c = n.value
    op = c.func.attr if isinstance(c.func, ast.Attribute) else ""
    own = 0 if (dotted(c.func) or "").startswith("torch.") else 1  # the tensor is an argument
    if op in VALUES_INDICES:
        return True
    dim = c.args[1 - own] if len(c.args) > 1 - own else None  # `max(x, other)`: one tensor
    return op in ("max", "min") and (any(k.arg == "dim" for k in c.keywords) or isinstance(
        dim, ast.Constant) and isinstance(dim.value, int) or isinstance(dim, ast.UnaryOp))


def _root_name(e: ast.expr) -> str | None:
    """``idx`` for ``idx[:n]``, ``idx.view(-1)``, ``idx[:n].clone()``: the name a chain of
    slices and same-dtype methods reads."""
    root = peel(e, SAME_DTYPE)
    return root.id if isinstance(root, ast.Name) else None
