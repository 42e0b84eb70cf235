"""The mutation operators added in session 50: a part of a model built anew, then frozen.

M1-M32 cut a graph, misorder a step or wrap the model's tensors. These freeze the one part of
a model that a script (or a method) has just replaced with a new layer: after a single-line
``<obj>.<attr> = nn.<Layer>(...)`` (``<obj>`` not the method's own ``self``; a layer that holds
parameters), a freeze of that same attribute is inserted; the optimizer the file builds over
the model still gets it, and the only randomly initialised part never trains (the injected
bug of docs/triage/unseen49a.md, NOTE [new part frozen]).

    M33 new part frozen        ``<obj>.<attr>.requires_grad_(False)`` right after   GT408
    M34 new part frozen, loop  ``for _p in <obj>.<attr>.parameters(): _p.requires_grad = False``

Each yields ``(kind, expected codes "A|B", function, source, lines)`` as ``mutation_ops29``.
"""

import ast
import re

_LAYER = re.compile(r"^(torch\.)?nn\.(Linear|Conv[123]d|ConvTranspose[123]d|Sequential|Embedding"
                    r"|LSTM|GRU|RNN|Bilinear|LazyLinear)$")


def _enclosing(tree):
    """id(statement) -> name of the function holding it ("<module>" at top level)."""
    out = {}
    def visit(body, name):
        for s in body:
            out[id(s)] = name
            inner = s.name if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(s, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    visit(sub, inner)
            for h in getattr(s, "handlers", ()):
                visit(h.body, inner)
    visit(tree.body, "<module>")
    return out


def head_ops(src, lines, tree):
    """M33/M34 on every single-line assignment of a new parameter-holding layer to an
    attribute of an object other than ``self``."""
    if "import torch" not in src:
        return
    where = _enclosing(tree)
    for s in ast.walk(tree):
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and s.lineno == s.end_lineno
                and isinstance(s.targets[0], ast.Attribute) and isinstance(s.value, ast.Call)
                and _LAYER.match(ast.unparse(s.value.func))):
            continue
        target = ast.unparse(s.targets[0])
        if target.count(".") == 1 and target.startswith("self."):
            continue
        row = lines[s.lineno - 1]
        if not row.isascii():
            continue
        ind = re.match(r"\s*", row).group(0)
        fname = where.get(id(s), "<module>")
        L = lines[:]
        L.insert(s.lineno, f"{ind}{target}.requires_grad_(False)")
        yield "M33-new-part-frozen", "GT408", fname, "\n".join(L), {s.lineno + 1}
        L = lines[:]
        L[s.lineno:s.lineno] = [f"{ind}for _p in {target}.parameters():",
                                f"{ind}    _p.requires_grad = False"]
        yield "M34-new-part-frozen-loop", "GT408", fname, "\n".join(L), {s.lineno + 1}
