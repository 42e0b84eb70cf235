"""PackedSequence values: names bound to one, and a packing call read in place
(``pack_padded_sequence(scores, lengths, batch_first=True).data``). The ``.data`` of a
``PackedSequence`` is the field holding the packed values, with their history, not
``Tensor.data``."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import statements

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

PACKERS = frozenset({"pack_padded_sequence", "pack_sequence", "PackedSequence"})


def _packed_names(scope: Scope) -> set[str]:
    """Names bound to a ``PackedSequence``: made by ``pack_padded_sequence``/``pack_sequence``/
    ``PackedSequence(...)``, or the first value a layer run on one returns (an RNN fed a packed
    input returns a packed output, ``out, _ = rnn(packed, h0)``); its ``.data`` is the field
    holding the packed values, with their history. A ``torch`` function fed one
    (``pad_packed_sequence``) gives tensors back."""
    out: set[str] = set()
    for s in sorted(statements(scope.node), key=lambda s: s.lineno):
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.value, ast.Call)):
            continue
        t, v = s.targets[0], s.value
        if isinstance(t, ast.Tuple) and t.elts:
            t = t.elts[0]
        if not isinstance(t, ast.Name):
            continue
        callee = dotted(v.func) or ""
        qual = scope.ctx.qualified_name(v.func) or callee
        if callee.rpartition(".")[2] in PACKERS or (
                not qual.startswith("torch.") and v.args and isinstance(v.args[0], ast.Name)
                and v.args[0].id in out):
            out.add(t.id)
    return out


def packed_values(e: ast.expr, ctx: Context) -> ast.expr | None:
    """The values ``e`` packs when it is a call of torch's own packer
    (``torch.nn.utils.rnn.pack_padded_sequence``, ``pack_sequence``, ``PackedSequence``, by
    the qualified name of its import): its value is a ``PackedSequence``, whose ``.data`` is
    those values, packed, with their history."""
    q = ctx.qualified_name(e.func) if isinstance(e, ast.Call) else None
    if q is None or not q.startswith("torch.nn.utils.rnn.") or q.rpartition(".")[2] not in PACKERS:
        return None
    assert isinstance(e, ast.Call)
    return e.args[0] if e.args else next((k.value for k in e.keywords if k.arg in (
        "input", "sequences", "data")), None)
