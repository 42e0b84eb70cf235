"""The names ``named_parameters()`` gives for a module the file builds, when the file shows them
all.

# NOTE [parameter names]
``named_parameters()`` joins attribute names with dots, and a container's items by their index
(``layers.0.fc1.weight``). A torch layer with parameters names them ``weight`` and ``bias``
(no ``bias`` with ``bias=False``; none for a norm layer with ``elementwise_affine=False`` or
``affine=False``). The names are read from the ``__init__`` of module classes of the file, the
torch layers they build and ``Sequential``/``ModuleList`` literals (a list comprehension gives
index ``0``, which stands for every index: names are used here for substring tests). Anything
else (a layer of another package, ``*args``, an attribute set twice) makes the answer unknown
(None): a rule must not guess a name. Each name comes with whether it belongs to a
normalisation layer.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE, PARAMETER

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_AFFINE = re.compile(r"^torch\.nn\.(Linear|Bilinear|Conv[123]d|ConvTranspose[123]d|Embedding|"
                     r"LayerNorm|GroupNorm|RMSNorm|BatchNorm[123]d|SyncBatchNorm|PReLU)$")
_NORM = re.compile(r"^torch\.nn\.(LayerNorm|GroupNorm|RMSNorm|BatchNorm[123]d|SyncBatchNorm)$")
_FREE = re.compile(r"^torch\.nn\.(ReLU|GELU|SiLU|Tanh|Sigmoid|Dropout\w*|Identity|Flatten|"
                   r"\w*Pool\w*|Softmax|LogSoftmax|LeakyReLU|ELU|Mish|Hardswish|Upsample)$")
Names = tuple[tuple[str, bool], ...]  # (name, of a normalisation layer)


def _flag(call: ast.Call, name: str) -> bool:
    """A keyword set to the constant False."""
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in call.keywords)


def own_names(qualified: str) -> frozenset[str] | None:
    """Every name a torch layer class may give its own parameters (``weight``, ``bias``; none
    for a parameter-free layer), whatever its arguments; None for another class."""
    if _AFFINE.match(qualified):
        return frozenset({"weight"}) if qualified.endswith(("Embedding", "PReLU")) \
            else frozenset({"weight", "bias"})
    return frozenset() if _FREE.match(qualified) else None


def call_names(call: ast.Call, ctx: Context, depth: int = 0) -> Names | None:
    """The parameter names of the module ``call`` builds (NOTE [parameter names])."""
    if depth > 8:
        return None
    q = ctx.call_name(call) or ""
    if _AFFINE.match(q):
        norm = bool(_NORM.match(q))
        if any(k.arg in ("bias", "affine", "elementwise_affine") and not isinstance(
                k.value, ast.Constant) for k in call.keywords):
            return None  # set by a value the file computes
        if _flag(call, "elementwise_affine") or _flag(call, "affine"):
            return ()
        if q.endswith("Embedding") or q.endswith("PReLU"):
            return (("weight", False),)
        bias = not (_flag(call, "bias") or q.endswith("RMSNorm"))
        return (("weight", norm),) + ((("bias", norm),) if bias else ())
    if _FREE.match(q):
        return ()
    if q in ("torch.nn.Sequential", "torch.nn.ModuleList"):
        items: list[ast.expr] = list(call.args)
        if q == "torch.nn.ModuleList" and len(items) == 1:
            a = items[0]
            if isinstance(a, (ast.List, ast.Tuple)):
                items = list(a.elts)
            elif isinstance(a, ast.ListComp):
                items = [a.elt]
            else:
                return None
        out: list[tuple[str, bool]] = []
        for i, a in enumerate(items):
            if not isinstance(a, ast.Call):
                return None
            sub = call_names(a, ctx, depth + 1)
            if sub is None:
                return None
            out.extend((f"{i}.{n}", norm) for n, norm in sub)
        return tuple(out)
    if isinstance(call.func, ast.Name) and call.func.id in ctx.analysis.classes:
        return class_names(call.func.id, ctx, depth + 1)
    return None


def _plain(value: ast.expr | None, init: ast.AST) -> bool:
    """A constant, a container of constants, or an ``__init__`` argument with a constant
    default: not a module."""
    if value is None or isinstance(value, ast.Constant):
        return True
    if isinstance(value, (ast.List, ast.Tuple)):
        return all(isinstance(e, ast.Constant) for e in value.elts)
    if isinstance(value, ast.Name):
        a = init.args  # type: ignore[attr-defined]
        pos = [*a.posonlyargs, *a.args]
        defaults = dict(zip([x.arg for x in pos[len(pos) - len(a.defaults):]], a.defaults))
        defaults.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        d = defaults.get(value.id)
        return isinstance(d, ast.Constant)
    return False


def class_names(name: str, ctx: Context, depth: int = 0) -> Names | None:
    """The parameter names of an instance of the module class ``name`` of the file."""
    memo: dict[str, Names | None] = ctx.memo("param-names", ctx.tree, dict)
    if name in memo:
        return memo[name]
    memo[name] = None  # recursion guard
    cls = ctx.analysis.classes.get(name)
    if cls is None or not cls.is_module or depth > 8 or any(
            not (isinstance(b, ast.Attribute) and b.attr == "Module"
                 or isinstance(b, ast.Name) and b.id == "Module") for b in cls.node.bases):
        return None
    out: list[tuple[str, bool]] = []
    for attr, info in cls.attrs.items():
        if info.later or info.method.name != "__init__":
            return None
        k = cls.attr_kind(attr)
        if k is None:
            if not _plain(info.value, info.method):
                return None  # an object the file cannot read
            continue
        if k.what == PARAMETER:
            out.append((attr, False))
        elif k.what == MODULE:
            if not isinstance(k.node, ast.Call):
                return None
            sub = call_names(k.node, ctx, depth + 1)
            if sub is None:
                return None
            out.extend((f"{attr}.{n}", norm) for n, norm in sub)
    memo[name] = tuple(out)
    return memo[name]
