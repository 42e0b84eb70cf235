"""The mutation operator added in session 48: a model's mode switches taken out of a step.

M1-M30 cut a graph or misorder a step. This one takes the evaluation mode away: in a function
that trains (a backward and an optimizer step) and, after ``X.eval()``, runs ``X`` inside a
``with torch.no_grad():`` (or ``inference_mode``) block, every ``X.eval()`` and ``X.train(...)``
statement of that function becomes ``pass``: the evaluation then runs in the mode the
training ran in, what GT550 reads (GT540 when the evaluation is a function of its own).

    M31 mode switches removed   ``X.eval()`` / ``X.train()`` -> ``pass``   GT550|GT540

Each yields ``(kind, expected codes "A|B", function, source, lines)`` as ``mutation_ops29``.
"""

import ast

_EXPECT = "GT550|GT540"
_OFF = ("no_grad", "inference_mode")


def _switch(st):
    """The receiver text of ``X.eval()`` / ``X.train(...)`` as a statement of one line."""
    v = st.value if isinstance(st, ast.Expr) else None
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and v.func.attr in ("eval", "train") and st.lineno == st.end_lineno:
        return ast.unparse(v.func.value)
    return None


def _runs_off(f, model, after):
    """``model(...)`` inside a no-grad ``with`` of ``f`` on a line after ``after``."""
    for w in ast.walk(f):
        if isinstance(w, ast.With) and w.lineno > after and any(
                any(o in ast.unparse(i.context_expr) for o in _OFF) for i in w.items):
            for n in ast.walk(w):
                if isinstance(n, ast.Call) and ast.unparse(n.func) == model:
                    return True
    return False


def mode_ops(lines, f):
    """M31 on the training function ``f``."""
    switches = [(st, _switch(st)) for st in ast.walk(f) if isinstance(st, ast.Expr)]
    switches = [(st, m) for st, m in switches if m]
    evals = [st for st, m in switches if st.value.func.attr == "eval"]
    for ev in evals:
        model = _switch(ev)
        if not _runs_off(f, model, ev.lineno):
            continue
        L = lines[:]
        gone = set()
        for st, m in switches:
            if m == model:
                line = L[st.lineno - 1]
                L[st.lineno - 1] = line[:len(line) - len(line.lstrip())] + "pass"
                gone.add(st.lineno)
        yield "M31-mode-switches-removed", _EXPECT, f.name, "\n".join(L), gone
        break
