"""The mutation operator added in session 49: a model hooked, layer by layer, for per-sample
gradients while it holds an in-place activation.

M1-M31 cut a graph or misorder a step. This one wraps the model's own tensors: in a module
class of the file whose ``__init__`` builds an in-place activation (``inplace=True``, or the
first ``ReLU()`` made so by the operator), a helper that puts a full backward hook on every
leaf module is added at the end of the file and called on ``self`` as the last statement of
``__init__``: the hooked in-place activation then writes its wrapped input, and the forward
raises (the per-sample-gradient extensions and attribution tools of docs/triage/recall49a.md).

    M32 per-sample hooks     ``_hook_leaves(self)`` ending ``__init__``      GT606

Each yields ``(kind, expected codes "A|B", function, source, lines)`` as ``mutation_ops29``.
"""

import ast
import re

_EXPECT = "GT606"
_HELPER = """

def _hook_leaves(net):
    for _m in net.modules():
        if not list(_m.children()):
            _m.register_full_backward_hook(lambda *a: None)
"""
_INPLACE = re.compile(r"inplace\s*=\s*True")
_PLAIN = re.compile(r"\bReLU\(\)")


def hook_ops(src, lines, tree):
    """M32 on the first module class of the file with an ``__init__`` that builds layers."""
    if "import torch" not in src or "register_full_backward_hook" in src:
        return
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        init = next((m for m in cls.body if isinstance(m, ast.FunctionDef)
                     and m.name == "__init__"), None)
        if init is None or not init.body or not any(
                isinstance(n, ast.Call) and ast.unparse(n.func).endswith("__init__")
                for n in ast.walk(init)):
            continue
        L = lines[:]
        span = range(init.lineno - 1, init.end_lineno)
        if not any(_INPLACE.search(L[i]) for i in span):
            plain = next((i for i in span if _PLAIN.search(L[i])), None)
            if plain is None:
                continue
            L[plain] = _PLAIN.sub("ReLU(inplace=True)", L[plain], count=1)
        last = init.body[-1]
        ind = re.match(r"\s*", L[last.lineno - 1]).group(0)
        L.insert(last.end_lineno, ind + "_hook_leaves(self)")
        yield "M32-per-sample-hooks", _EXPECT, "__init__", "\n".join(L) + _HELPER, \
            {last.end_lineno + 1}
        break
