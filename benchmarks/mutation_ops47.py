"""The mutation operator added in session 47: a cut inside a module's ``forward``.

M1-M29 put their bug in the training step or one call away from it. This one puts it in the
model: in a module class of the file, the first statement of ``forward`` of the form
``h = self.<sub>(...)`` (one line, ``<sub>`` assigned once in ``__init__`` to a layer that
holds weights or a module class of the file, run once in ``forward``) gets ``.detach()`` on its value, so ``<sub>`` (and whatever ran before it) never
trains: what GT115 reads (and GT107/GT105/GT109 when the step is in the same function).

    M30 cut inside forward   ``h = self.sub(x)`` -> ``h = self.sub(x).detach()``
                             GT115|GT107|GT105|GT109

Each yields ``(kind, expected codes "A|B", function, source, lines)`` as ``mutation_ops29``.
"""

import ast

_EXPECT = "GT115|GT107|GT105|GT109"


# torch.nn layers that hold weights (a cut before them leaves them untrained)
_WEIGHTED = frozenset({
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "Embedding", "EmbeddingBag", "LSTM", "GRU", "RNN", "LSTMCell",
    "GRUCell", "RNNCell", "MultiheadAttention", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer", "Sequential", "ModuleList"})


def _weighted_call(v, classes):
    """``nn.Linear(...)`` (a layer that holds weights) or a module class of the file."""
    f = v.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in _WEIGHTED or name in classes


def _init_attrs(cls, classes=frozenset()):
    """Attributes ``self.<a> = <call>`` assigned exactly once in ``__init__``, to a layer
    that holds weights or a module class of the file."""
    init = next((m for m in cls.body if isinstance(m, ast.FunctionDef)
                 and m.name == "__init__"), None)
    counts = {}
    for n in ast.walk(init) if init is not None else ():
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id == "self":
                    counts[t.attr] = counts.get(t.attr, 0) + (
                        1 if isinstance(n.value, ast.Call)
                        and _weighted_call(n.value, classes) else 2)
    return {a for a, c in counts.items() if c == 1}


def forward_ops(src, lines, tree):
    """M30 on every module class of the file with a ``forward``."""
    if "import torch" not in src:
        return
    classes = frozenset(c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef))
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        fwd = next((m for m in cls.body if isinstance(m, ast.FunctionDef)
                    and m.name == "forward"), None)
        if fwd is None:
            continue
        attrs = _init_attrs(cls, classes)
        runs = {}
        for n in ast.walk(fwd):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                    and n.value.id == "self":
                runs[n.attr] = runs.get(n.attr, 0) + 1
        for st in fwd.body:
            v = st.value if isinstance(st, ast.Assign) else None
            if not (
                isinstance(v, ast.Call) and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name)
                and isinstance(v.func, ast.Attribute) and isinstance(v.func.value, ast.Name)
                and v.func.value.id == "self" and v.func.attr in attrs
                and runs.get(v.func.attr) == 1 and st.lineno == st.end_lineno
                and lines[st.lineno - 1].isascii()
            ):
                continue
            L = lines[:]
            line = L[st.lineno - 1]
            L[st.lineno - 1] = f"{line[:v.end_col_offset]}.detach(){line[v.end_col_offset:]}"
            yield "M30-cut-inside-forward", _EXPECT, "forward", "\n".join(L), {st.lineno}
            break
