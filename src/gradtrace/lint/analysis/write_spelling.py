"""Whether a function's code can hold an in-place write at all, read from its text alone.

# NOTE [write spelling]
An in-place write is spelt: ``x[i] = v`` closes a subscript then assigns (``]``, maybe a
closing parenthesis or a line continuation, then ``=`` that is no ``==``); ``x += v`` writes an
augmented operator (``+=`` ... ``//=``, ``**=``, ``@=``, ``<<=``); ``x.add_(v)``,
``torch.relu_(x)``, ``conv(x).unsqueeze_(1)`` call a name ending in ``_`` (``_(``, spaces,
a continuation or a closing parenthesis between); ``F.relu(x, inplace=True)`` says
``inplace``. Two writes are not spelt in the function: a torch function imported under another
name (``from torch import relu_ as r``, then ``r(x)``: :func:`aliased_inplace`), and a layer
built in place elsewhere (``self.act = nn.ReLU(True)`` in ``__init__``, then ``self.act(x)``);
a caller rules those out first. Comments and strings are blanked (NOTE [code text]), so a
function whose body code matches none of these spellings holds no such write, and a rule that
only pairs such writes can pass it without reading its statements. Code that is not ASCII is
always read: Python normalises identifiers (NFKC), so ``x.add\uff3f(1)`` calls ``add_``.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import ascii_code

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# an augmented operator (`+=` ... `>>=`; `<=`, `>=` match too) or a subscript, then `=`
ASSIGNED = re.compile(r"[-+*/%@&|^<>\]][\s\\)#]*=(?!=)")
CALLED = re.compile(r"_[\s\\)#]*\(")  # a call of a name ending in `_`
# each search starts from a set of characters or a literal: three fast scans, where one
# pattern of alternatives tries each of them at every character (3.6x slower, measured)


def body_may_write(ctx: Context, fn: ast.AST) -> bool:
    """Whether the code of ``fn``'s body (from its first statement's line) spells one of the
    in-place writes of NOTE [write spelling] (once per function: GT602/GT603 and GT622 ask it
    of the same ``forward``)."""
    return ctx.memo("write-spelt", fn, lambda: _spelt(ctx, fn))  # type: ignore[no-any-return]


def _spelt(ctx: Context, fn: ast.AST) -> bool:
    body = getattr(fn, "body", None)
    if not body or not ascii_code(ctx):
        return bool(body)
    end = getattr(fn, "end_lineno", None) or body[0].lineno
    lines = ctx.code_lines[body[0].lineno - 1:end]
    text = "\n".join(lines)
    return "inplace" in text or ASSIGNED.search(text) is not None \
        or CALLED.search(text) is not None


def aliased_inplace(ctx: Context) -> bool:
    """The file imports, under a name not ending in ``_``, something whose qualified name
    ends in one (``from torch import relu_ as r``): a call ``r(x)`` writes in place unspelt.
    Read at each ask: the imports grow while the engine walks the file."""
    return any(v.endswith("_") and not v.endswith("__") and not k.endswith("_")
               for k, v in ctx.imports.aliases.items())
