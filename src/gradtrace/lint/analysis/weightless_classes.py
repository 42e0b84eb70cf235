"""A module class of the file that holds no weights: a loss written as an ``nn.Module``.

# NOTE [weightless class of the file]
``criterion = MaskedNLL(weight=w)`` with ``class MaskedNLL(nn.Module)`` whose ``__init__``
stores ``self.inner = nn.NLLLoss(weight=weight)`` and whose ``forward`` combines
``self.inner(...)`` with the mask: the module owns no parameter, so its output is as live as
its arguments (NOTE [weightless callee]), like a torch loss. Said of a class of this file
whose bases are ``nn.Module`` alone and whose methods store on ``self`` only weightless torch
modules (:func:`.weightless.weightless_class`: losses, activations, pooling, dropout),
constants, and arguments of ``__init__`` that no method calls (a weight tensor, a margin, a
reduction); that registers nothing (no ``register_buffer``/``register_parameter``/
``add_module``, no ``nn.Parameter``) and makes no tensor that requires grad. Anything else it
stores (a layer with weights, a model handed in and called, an object of an unknown class)
keeps it out: a perceptual loss around a VGG, an ArcFace head. A plain tensor or array made
in ``__init__`` (``self.kernel = torch.from_numpy(np.outer(k, k)).cuda()``: calls of ``numpy``,
of ``torch`` functions that build no layer, of array and tensor methods, of the class's own
methods) is no weight either: a fixed Gaussian or Sobel kernel.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import is_torch_loss

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# torch layers without parameters (their output is a function of their input only)
_FREE = re.compile(r"^torch\.nn\.(ReLU\d?|GELU|SiLU|Tanh|Sigmoid|Softmax\d?d?|LogSoftmax|Softmin|"
                   r"LeakyReLU|ELU|SELU|CELU|Mish|Hardswish|Hardsigmoid|Hardtanh|Softplus|"
                   r"Dropout\w*|Identity|Flatten|Unflatten|\w*Pool\d?d|Upsample\w*)$")
_WEIGHTED_LOSSES = frozenset({"torch.nn.AdaptiveLogSoftmaxWithLoss"})


def weightless_class(cls: str | None) -> bool:
    """``cls`` (qualified) is a torch loss or a torch layer that holds no parameters."""
    if not cls or cls in _WEIGHTED_LOSSES:
        return False
    return is_torch_loss(cls) or bool(_FREE.match(cls))


_REGISTERS = frozenset({"register_buffer", "register_parameter", "add_module",
                        "register_module", "requires_grad_"})


def weightless_file_class(name: str | None, ctx: Context) -> bool:
    """``name`` is a module class of this file that holds no weights
    (NOTE [weightless class of the file])."""
    if not name or "." in name:
        return False
    info = ctx.analysis.classes.get(name)
    if info is None or not info.is_module:
        return False
    return ctx.memo("weightless-file-class", info.node, lambda: _weightless(info.node, ctx))


def weightless_but_leaves(name: str, ctx: Context) -> bool:
    """``name`` is a module class of this file that would hold no weights but for tensors
    its methods other than ``__init__`` make with ``requires_grad=True`` and store nowhere on
    ``self`` (new leaves of one call, NOTE [returned fresh leaves]) and the buffers it
    registers (a fixed kernel): no weights either."""
    info = ctx.analysis.classes.get(name)
    if info is None or not info.is_module:
        return False

    def make() -> bool:
        stored = {id(c) for n in ast.walk(info.node) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Attribute) for t in n.targets) for c in ast.walk(n.value)}
        made = {id(n) for f in info.node.body if isinstance(f, ast.FunctionDef)
                and f.name != "__init__" for n in ast.walk(f) if isinstance(n, ast.Call)
                and id(n) not in stored}
        return _weightless(info.node, ctx, made, buffers=True)
    return ctx.memo("weightless-but-leaves", info.node, make)


def _weightless(cls: ast.ClassDef, ctx: Context, leaves: frozenset[int] | set[int] = frozenset(),
                buffers: bool = False) -> bool:
    if not cls.bases or any(ctx.qualified_name(b) not in ("torch.nn.Module",
                                                          "torch.nn.modules.module.Module")
                            for b in cls.bases):
        return False
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef)
                 and f.name == "__init__"), None)
    args = {a.arg for a in (*init.args.args, *init.args.kwonlyargs)} - {"self"} \
        if init is not None else set()
    called = {n.func.attr for n in ast.walk(cls) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
              and n.func.value.id == "self"}
    own = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
    for n in ast.walk(cls):
        if isinstance(n, ast.Call):
            q = ctx.qualified_name(n.func) or ""
            if isinstance(n.func, ast.Attribute) and n.func.attr in _REGISTERS and not (
                    n.func.attr == "requires_grad_" and id(n) in leaves
                    or n.func.attr == "register_buffer" and buffers) or \
                    q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") or any(
                        k.arg == "requires_grad" for k in n.keywords) and id(n) not in leaves:
                return False
        if not isinstance(n, (ast.Assign, ast.AnnAssign)):
            continue
        targets = n.targets if isinstance(n, ast.Assign) else [n.target]
        pairs: list[tuple[ast.expr, ast.expr | None]] = []
        for t in targets:  # `self.emb, self.out = nn.Embedding(..), nn.Linear(..)`: each pair
            if isinstance(t, (ast.Tuple, ast.List)):
                vs = n.value.elts if isinstance(n.value, (ast.Tuple, ast.List)) \
                    and len(n.value.elts) == len(t.elts) else None
                if vs is None and any(isinstance(e, ast.Attribute) for e in t.elts):
                    return False  # unpacked from a call: unknown
                pairs.extend(zip(t.elts, vs or ()))
            else:
                pairs.append((t, n.value))
        for t, v in pairs:
            if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id == "self"):
                continue
            if v is None or isinstance(v, ast.Constant):
                continue
            if isinstance(v, ast.Name) and v.id in args and t.attr not in called:
                continue  # a weight tensor, a margin: read, never called
            if isinstance(v, ast.Call) and weightless_class(ctx.qualified_name(v.func)) \
                    or _plain_tensor(v, own, ctx):
                continue
            return False
    return True


_ARRAY_METHODS = frozenset({"cuda", "cpu", "to", "float", "double", "half", "astype", "reshape",
                            "view", "unsqueeze", "squeeze", "contiguous", "clone", "numpy",
                            "transpose", "permute", "repeat", "expand", "flip", "copy"})


def _plain_tensor(v: ast.expr, own: set[str], ctx: Context) -> bool:
    """``v`` computes an array or a tensor that is no layer and asks no gradient: every call
    in it is of ``numpy``, of a ``torch`` function outside ``torch.nn``, an array or tensor
    method, or a method of the class (NOTE [weightless class of the file])."""
    calls = [n for n in ast.walk(v) if isinstance(n, ast.Call)]
    for c in calls:
        q = ctx.qualified_name(c.func) or ""
        f = c.func
        if q.startswith("numpy.") or q.startswith("torch.") and not q.startswith("torch.nn."):
            continue
        if isinstance(f, ast.Attribute) and (f.attr in _ARRAY_METHODS and not (
                isinstance(f.value, ast.Name) and f.value.id == "self") or isinstance(
                f.value, ast.Name) and f.value.id == "self" and f.attr in own):
            continue
        return False
    return bool(calls)
