"""What acts differently in train and eval mode in the code of a module or of its constructor call.

# NOTE [mode layers built]
``Module.train()``/``eval()`` change what a model computes only through what reads the mode:
Dropout layers (``nn.Dropout*``, ``nn.AlphaDropout``, ``nn.FeatureAlphaDropout``) draw in
train mode only, BatchNorm (``nn.BatchNorm*``, ``nn.SyncBatchNorm``) updates its running
statistics in train mode and uses them in eval mode (pytorch-facts.md#frozen-norm-statistics),
and code that reads ``self.training`` (``F.dropout(x, p, self.training)``). Read from the code, not
its text (a docstring, a comment or a parameter's name builds nothing):

- ``norm``: a call of (or a reference to, ``partial(nn.BatchNorm2d, ...)``, ``norm=nn.BatchNorm1d``)
  a BatchNorm class;
- ``dropout``: a call of or a reference to a Dropout class, a call of torch's functional
  dropout (``F.dropout``, ``torch.dropout``), or a call given a dropout argument with a value
  (``nn.LSTM(..., dropout=0.2)``, ``nn.TransformerEncoderLayer(d, h, dropout=p)``, a class of
  another file built with ``dropout=0.1``: the callee builds one; a class of this file is
  read from its own code instead). ``dropout=None``, ``False`` or ``0`` builds none;
- ``training``: ``self.training`` read.

A class of another package (``torchvision.models.resnet18()``) is not read here; the callers
look at the classes of the file it calls themselves.
"""
from __future__ import annotations

import ast
import builtins
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.vocabulary import DROPOUT_ARG_RE
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_NORM_RE = re.compile(r"^(Lazy)?(BatchNorm\w*|SyncBatchNorm)$")
_DROPOUT_RE = re.compile(r"^(Dropout\w*|AlphaDropout|FeatureAlphaDropout)$")
_BUILTINS = frozenset(dir(builtins))
_DROPOUT_FN_RE = re.compile(
    r"^torch\.(nn\.functional\.)?(dropout\w*|alpha_dropout|feature_alpha_dropout)$")


def mode_layers(node: ast.AST | None, ctx: Context) -> frozenset[str]:
    """``{"norm", "dropout", "training"}`` as far as the code under ``node`` builds or reads
    them (NOTE [mode layers built])."""
    if node is None:
        return frozenset()
    memo: dict[int, tuple[ast.AST, frozenset[str]]] = ctx.memo("mode-layers", ctx.tree, dict)
    got = memo.get(id(node))
    if got is None or got[0] is not node:
        got = memo[id(node)] = (node, _layers(node, ctx))
    return got[1]


def _layers(node: ast.AST, ctx: Context) -> frozenset[str]:
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            if n.attr == "training" and isinstance(n.ctx, ast.Load) \
                    and isinstance(n.value, ast.Name) and n.value.id == "self":
                out.add("training")
            _named(n.attr, n, ctx, out)
        elif isinstance(n, ast.Name):
            _named(n.id, n, ctx, out)
        elif isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name)
                                              and n.func.id in ctx.analysis.classes):
            if any(k.arg is not None and DROPOUT_ARG_RE.search(k.arg) and not _nothing(k.value)
                   for k in n.keywords):  # (a class of the file: its own code is read)
                out.add("dropout")
    return frozenset(out)


def _named(last: str, n: ast.expr, ctx: Context, out: set[str]) -> None:
    if isinstance(getattr(n, "ctx", None), ast.Store):
        return
    if _NORM_RE.match(last):
        out.add("norm")
    elif _DROPOUT_RE.match(last):
        out.add("dropout")
    elif last.startswith(("dropout", "alpha_dropout", "feature_alpha_dropout")) and \
            _DROPOUT_FN_RE.match(ctx.qualified_name(n) or dotted(n) or ""):
        out.add("dropout")


def _nothing(v: ast.expr) -> bool:
    """``None``, ``False``, ``0`` or ``0.0``: no dropout layer is built."""
    return isinstance(v, ast.Constant) and v.value in (None, False, 0)


# -- what a part put in eval mode holds -------------------------------------------------------
MAX_DEPTH = 3


def part_layers(ev: ast.Call, holder: object, scope: object, ctx: Context
                ) -> frozenset[str] | None:
    """What the module ``ev`` (``x.eval()``) switches holds that acts on the mode
    (NOTE [mode layers built]), when everything it is built from is shown: torch layers and
    classes of the file made of them (``self.<attr>`` built in ``holder`` by one call, or a
    value whose kind the analysis layer knows). None: not known (a class of another package,
    a helper's return)."""
    f = ev.func
    if not isinstance(f, ast.Attribute):
        return None
    recv = f.value
    built: ast.AST | None = None
    if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) \
            and recv.value.id == "self" and holder is not None:
        info = getattr(holder, "attrs", {}).get(recv.attr)
        built = info.value if info is not None and not info.later else None
    else:
        k = ctx.analysis.kind(recv, scope, ev.lineno)  # type: ignore[arg-type]
        if k is not None and k.cls is not None and k.cls in ctx.analysis.classes:
            return _class_layers(k.cls, ctx, 0)
        built = k.node if k is not None else None
    return _call_layers(built, ctx, 0) if isinstance(built, ast.Call) else None


def _call_layers(call: ast.Call, ctx: Context, depth: int) -> frozenset[str] | None:
    if isinstance(call.func, ast.Name) and call.func.id in ctx.analysis.classes:
        own = mode_layers(call, ctx)
        inner = _class_layers(call.func.id, ctx, depth + 1)
        return None if inner is None else own | inner
    return _closed(call, ctx, depth)


def _class_layers(name: str, ctx: Context, depth: int) -> frozenset[str] | None:
    cls = ctx.analysis.classes.get(name)
    if cls is None or not cls.is_module or depth > MAX_DEPTH:
        return None
    out: set[str] = set()
    for c in cls.lineage():
        for b in c.node.bases:
            if not (isinstance(b, ast.Name) and b.id in ctx.analysis.classes) and \
                    (ctx.qualified_name(b) or "") not in ("torch.nn.Module",
                                                          "torch.nn.modules.module.Module"):
                return None  # a base of another package
        got = _closed(c.node, ctx, depth, cls)
        if got is None:
            return None
        out |= got
    return frozenset(out)


def _closed(node: ast.AST, ctx: Context, depth: int, cls: object = None
            ) -> frozenset[str] | None:
    """The mode layers under ``node`` when every layer it builds is shown: a torch call, or a
    class of the file read in turn. None when it builds something not shown: a function of the
    file or of another package, a callable held in a variable (``block(c)``, ``norm(c)``), a
    ``self.<attr>(...)`` of an attribute not built by a call in the class."""
    out = set(mode_layers(node, ctx))
    built = {a: i.value for a, i in getattr(cls, "attrs", {}).items()}
    for n in ast.walk(node):
        if not isinstance(n, ast.Call):
            continue
        q = ctx.call_name(n) or ""
        if q.startswith("torch."):
            continue
        f = n.func
        if isinstance(f, ast.Name) and f.id in ctx.analysis.classes:
            if n is node:
                continue
            got = _class_layers(f.id, ctx, depth + 1)
            if got is None:
                return None
            out |= got
        elif isinstance(f, ast.Name) and f.id not in _BUILTINS:
            return None  # `make_layers(cfg)`, another package's class, `block(c)`
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
                ctx.imports.is_imported(f.value.id) or f.value.id == "self" and (
                    cls is None or cls.method(f.attr) is None) and not isinstance(  # type: ignore
                    built.get(f.attr), ast.Call)):
            return None  # `models.resnet18()`, `self.norm_layer(c)` of a layer handed in
    return frozenset(out)
