"""Layers of a wrapped model that only arms its construction rules out would run (GT450).

# NOTE [layers a construction rules out]
A learnable attribute assigned once in ``__init__`` (not itself in an arm the construction
rules out) whose every other spelling in the file is a ``self.<attr>`` read inside an arm of
the class's methods that the wrapped instance's constructor arguments decide is not taken
(NOTE [arms a construction rules out]): ``forward`` never runs it for that instance, so under
DDP its parameters never get a gradient. The class must pass NOTE [unused layers]'s other
conditions (no dynamic access to children, bases of the file, the name in no string).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.built_flags import construction, construction_flags, ruled_out
from gradtrace.lint.context import FUNCTION_TYPES
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.registration._unused import (
    _bases_seen, _dynamic, _learnable, _words,
)

if TYPE_CHECKING:
    from gradtrace.lint.analysis import ClassInfo
    from gradtrace.lint.analysis.modules import AttrInfo
    from gradtrace.lint.context import Context
    from gradtrace.lint.rules.distributed._ddp import Wrap


def ruled_out_layers(w: Wrap, cls: ClassInfo, ctx: Context) -> list[tuple[str, AttrInfo]]:
    """The learnable attributes of ``cls`` that only ruled-out arms read, for the instance
    ``w`` wraps (NOTE [layers a construction rules out])."""
    if not w.call.args:
        return []
    call = construction(w.call.args[0], w.owner, w.call.lineno, ctx, cls)
    flags = construction_flags(ctx, cls, call) if call is not None else {}
    if not flags:
        return []
    text = "\n".join(ctx.code_lines[cls.node.lineno - 1:cls.node.end_lineno])
    if _dynamic(text) or not _bases_seen(cls.node, ctx, set()):
        return []
    reads: dict[str, list[tuple[ast.AST, ast.AST]]] = {}
    for m in cls.node.body:
        if isinstance(m, FUNCTION_TYPES):
            for n in walk(m):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                        and n.value.id == "self" and isinstance(n.ctx, ast.Load):
                    reads.setdefault(n.attr, []).append((n, m))
    words = _words(ctx)
    out = []
    for name, info in cls.attrs.items():
        got = reads.get(name, [])
        if info.later or info.method.name != "__init__" or not got \
                or words[name] != 1 + len(got) or f"'{name}'" in ctx.text \
                or f'"{name}"' in ctx.text or not _learnable(info.value, ctx) \
                or ruled_out(info.stmt, info.method, flags, ctx) \
                or not all(ruled_out(n, m, flags, ctx) for n, m in got):
            continue
        out.append((name, info))
    return out
