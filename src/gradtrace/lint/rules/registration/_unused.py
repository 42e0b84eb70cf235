"""Layers a module class builds in ``__init__`` and never names again (GT422, GT450).

# NOTE [unused layers]
A learnable attribute (a layer with parameters, an ``nn.Parameter``) assigned in ``__init__``
whose name the file's code spells nowhere else, in a class that does not reach its children
without naming them (``children()``, ``getattr``, ``parameters()``...), and not named in a
string (``getattr(self, 'head')``): ``forward`` never runs it, so its parameters are in
``model.parameters()`` but never get a ``.grad`` (verified on torch 2.13: ``p.grad`` stays None
after ``backward``). The name is counted in the file's code tokens, so a use in any method,
script line or subclass keeps the layer.
"""
from __future__ import annotations

import ast
import re
from collections import Counter

from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.analysis.modules import AttrInfo
from gradtrace.lint.context import Context
from gradtrace.lint.rules.leaf._tensors import is_parameter_call
from gradtrace.lint.rules.registration._modules import owns_params

# a class that reaches its submodules without naming them
DYNAMIC_RE = re.compile(r"\b(children|modules|named_children|named_modules|_modules|getattr|"
                        r"__dict__|parameters|named_parameters)\b")
WORD_RE = re.compile(r"\w+")  # the runs `\bname\b` bounds


def _learnable(v: ast.AST | None, ctx: Context) -> bool:
    return v is not None and (owns_params(v, ctx) or is_parameter_call(v, ctx))


def _words(ctx: Context) -> Counter[str]:
    return ctx.memo("unused-layers-words", ctx.tree, lambda: Counter(WORD_RE.findall(ctx.code)))


def unused_layers(cls: ClassInfo, ctx: Context) -> list[tuple[str, AttrInfo]]:
    """The learnable attributes of ``cls`` that ``forward`` never runs (NOTE [unused layers])."""
    def make() -> list[tuple[str, AttrInfo]]:
        text = "\n".join(ctx.code_lines[cls.node.lineno - 1:cls.node.end_lineno])
        if DYNAMIC_RE.search(text):
            return []
        words = _words(ctx)
        out = []
        for name, info in cls.attrs.items():
            if info.later or info.method.name != "__init__" or words[name] != 1 \
                    or f"'{name}'" in ctx.text or f'"{name}"' in ctx.text \
                    or not _learnable(cls.attrs[name].value, ctx):
                continue
            out.append((name, info))
        return out
    return ctx.memo("unused-layers", cls.node, make)
