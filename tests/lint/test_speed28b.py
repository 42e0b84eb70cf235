"""Speed cuts of session 28 (speed28b) that must give the answers of the code they skip."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint import check_source
from gradtrace.lint.code_text import code_text
from gradtrace.lint.analysis.trained_methods import SKIPPED
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rules.inplace._class_writes import _class_pairs
from gradtrace.lint.rules.inplace._saved import _runs_as_forward
from gradtrace.lint.rules.leaf._tensors import node_mentions


def _ctx(text: str):  # type: ignore[no-untyped-def]
    text = textwrap.dedent(text)
    tree = ast.parse(text)
    return FileChecker("x.py", text, tree, [], code_text(text)).ctx


def _codes(text: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(textwrap.dedent(text), "x.py")
            if f.code == code]


# every skipped name is a method of the class, called from `forward` through `self`, holding
# the shape of a pair (`out = self.act(x)` then `out += 1`) and a chained write
SKIPPED_CLASS = "\n".join([
    "import torch",
    "import torch.nn as nn",
    "class M(nn.Module):",
    "    def __init__(self):",
    "        super().__init__()",
    "        self.act = nn.Sigmoid()",
    "        out = self.act(torch.ones(2))",
    "        out += 1",
    "    def forward(self, x):",
    *[f"        self.{m}()" for m in sorted(SKIPPED - {"__init__"})],
    "        return self.act(x)",
    *[line for m in sorted(SKIPPED - {"__init__"}) for line in (
        f"    def {m}(self):",
        "        out = self.act(torch.ones(2))",
        "        out += 1",
        "        self.act(out).mul_(2)")],
    "x = M()(torch.ones(2))",
    "x.sum().backward()",
])


def test_skipped_methods_never_run_as_forward():
    """GT602/GT603's ``_class_pairs`` skips the methods of ``trained_methods.SKIPPED`` before
    scanning them: for each, ``_runs_as_forward`` is false even widened, even when ``forward``
    calls it through ``self`` (the test that made ``_class_pairs`` drop them after the scan)."""
    ctx = _ctx(SKIPPED_CLASS)
    cls = next(n for n in ast.walk(ctx.tree) if isinstance(n, ast.ClassDef))
    for m in SKIPPED:
        assert not _runs_as_forward(cls, m, ctx)
        assert not _runs_as_forward(cls, m, ctx, True)
    assert _runs_as_forward(cls, "forward", ctx, True)
    assert _class_pairs(cls, ctx) == []


def test_pairs_of_forward_still_found():
    """The pair in ``forward`` itself is still reported (GT602), the one in ``__init__`` not."""
    src = """
        import torch
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.Sigmoid()
                out = self.act(torch.ones(2))
                out[0] = 1
            def forward(self, x):
                out = self.act(x)
                out[0] = 1
                return out
        """
    assert _codes(src, "GT602") == [("GT602", 12)]


def test_parameter_gate_of_init():
    """GT302 reads ``init_attrs`` only of a module class whose ``__init__`` spells
    ``Parameter`` in its code: a value whose called name ends with ``Parameter`` spells it
    (``nn.parameter.Parameter`` too); a comment or a string does not count."""
    ctx = _ctx("""
        import torch.nn as nn
        class A(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.parameter.Parameter(torch.zeros(2))
        class B(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.zeros(2)  # Parameter
                self.s = "Parameter"
        """)
    a, b = ctx.analysis.classes["A"], ctx.analysis.classes["B"]
    assert node_mentions(ctx, a.methods["__init__"], "Parameter")
    assert not node_mentions(ctx, b.methods["__init__"], "Parameter")
    assert all(not (ast.unparse(i.value.func) if isinstance(i.value, ast.Call) else "")
               .endswith("Parameter") for i in b.init_attrs.values())


def test_instance_parameter_write_still_found():
    """GT302's write through an instance into a Parameter its class makes in ``__init__``
    (next to a class that makes none) is still reported."""
    src = """
        import torch
        import torch.nn as nn
        class Plain(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
        class Table(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.P = nn.Parameter(torch.zeros(n, 2))
            def forward(self, i):
                return self.P[i]
        model = Table(4)
        model.P[0] = torch.ones(2)
        """
    assert _codes(src, "GT302") == [("GT302", 15)]


def test_fixed_parameter_gate():
    """GT434 reads the attributes only of a module class whose code spells ``requires_grad``:
    the fixed Parameter is still found; a class without the word adds nothing."""
    src = """
        import torch
        from torch import nn
        class Plain(nn.Module):
            def __init__(self):
                super().__init__()
                self.b = nn.Parameter(torch.randn(8, 2))
        class Fourier(nn.Module):
            def __init__(self):
                super().__init__()
                self.b = nn.Parameter(torch.randn(8, 2), requires_grad=False)
        model = nn.Sequential(Fourier(), Plain(), nn.Linear(16, 1))
        model.requires_grad_(True)
        """
    assert _codes(src, "GT434") == [("GT434", 11)]
