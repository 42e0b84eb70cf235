"""Speed cuts of session 29 (speed29b) that must give the answers of the code they skip."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint import check_source
from gradtrace.lint.analysis.write_spelling import body_may_write
from gradtrace.lint.code_text import code_text
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rules.inplace._class_writes import _class_pairs


def _ctx(text: str):  # type: ignore[no-untyped-def]
    text = textwrap.dedent(text)
    tree = ast.parse(text)
    return FileChecker("x.py", text, tree, [], code_text(text)).ctx


def _pairs(text: str) -> list[tuple[str, int]]:
    """(name, line) of each write ``_class_pairs`` pairs in the file's first class."""
    ctx = _ctx(text)
    for s in ctx.tree.body:  # the imports, as the engine collects them before the walk
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            ctx.imports.add(s)
    cls = next(n for n in ast.walk(ctx.tree) if isinstance(n, ast.ClassDef))
    return [(w[0], s.lineno) for _, s, w, *_ in _class_pairs(cls, ctx)]


def _codes(text: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(textwrap.dedent(text), "x.py")
            if f.code == code]


def _spelt(line: str) -> bool:
    ctx = _ctx(f"def f(x, y):\n    {line}\n")
    return body_may_write(ctx, ctx.tree.body[0])


def test_write_spellings():
    """NOTE [write spelling]: every in-place write shape is matched; reads, comparisons and
    annotated defaults are not (the gate is a superset: it may open, never wrongly close)."""
    for s in ("x[i] = v", "x[i]=v", "(x[i]) = v", "x[i] \\\n    = v", "x += 1", "x //= 2",
              "x **= 2", "x @= w", "x <<= 1", "x |= m", "x.add_(1)", "x.add_ (1)",
              "(x.add_)(1)", "x.add_\\\n(1)", "(x.add_  # c\n)(1)", "conv(x).unsqueeze_(1)",
              "torch.relu_(x)",
              "F.relu(x, inplace=True)"):
        assert _spelt(s), s
    for s in ("y = x[i]", "x[0] == y", "a != b", "y = f(x, dim=-1)", "y = self._shape(x)",
              "y = x + 1  # x += 1", "y = 'x.add_(1)'", "y = x[0] if a == b else f(x)"):
        assert not _spelt(s), s


def test_body_may_write_reads_the_body_only():
    """An annotated default of the signature (``mask: Optional[T] = None``) is no write."""
    ctx = _ctx("""
        def forward(self, x, mask: Optional[T] = None,
                    *, scale: List[int] = None):
            return self.f(x)

        def step(self, x):
            x[0] = 1
        """)
    fns = [n for n in ctx.tree.body if isinstance(n, ast.FunctionDef)]
    assert [body_may_write(ctx, f) for f in fns] == [False, True]
    ctx = _ctx("def f(x):\n    x.add\uff3f(1)\n")  # NFKC: `add_`; non-ASCII code is read
    assert ast.dump(ctx.tree).count("'add_'") == 1 and body_may_write(ctx, ctx.tree.body[0])


UNSPELT_INIT = """
    import torch
    import torch.nn as nn

    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Sigmoid()
            self.act = nn.ReLU(True)

        def forward(self, x):
            out = self.gate(x)
            self.act(out)
            return out
    """


def test_layer_built_in_place_elsewhere_still_found():
    """``self.act(out)`` writes in place with no in-place spelling in ``forward``: the layer
    was built with ``ReLU(True)`` in ``__init__`` (the class stays open to the scan)."""
    assert _codes(UNSPELT_INIT, "GT602") != []
    assert _pairs(UNSPELT_INIT) == [("out", 13)]
    assert _codes(UNSPELT_INIT.replace("nn.ReLU(True)", "nn.ReLU()"), "GT602") == []


UNSPELT_ALIAS = """
    import torch
    import torch.nn as nn
    from torch import clamp_ as clip

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.ReLU()

        def forward(self, x):
            out = self.act(x)
            clip(out, min=0.5)
            return out
    """


def test_torch_inplace_function_under_an_alias_still_found():
    """``clip(out, min=0.5)`` is ``torch.clamp_`` imported under another name: no in-place
    spelling in ``forward``, the file's imports keep the class open to the scan."""
    assert _codes(UNSPELT_ALIAS, "GT602") != []
    assert _pairs(UNSPELT_ALIAS) == [("out", 13)]
    assert _codes(UNSPELT_ALIAS.replace("clamp_ as clip", "clamp as clip"), "GT602") == []


def test_spelt_write_next_to_a_quiet_method():
    """A method with no write spelt is passed; the spelt write of ``forward`` is found."""
    found = _codes("""
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Sigmoid()

            def helper(self, x):
                return self.gate(x) * 2

            def forward(self, x):
                p = self.gate(x)
                p[p < 0.5] = 0
                return p + self.helper(x)
        """, "GT602")
    assert [line for _, line in found] == [14]


PRODUCED = """
    import torch

    def train_step(model, x, opt):
        p = torch.sigmoid(model(x))
        q = p * 2
        {write}
        q.sum().backward()
        opt.step()
    """


def test_op_read_only_when_a_write_follows(monkeypatch):
    """GT602's ``_candidate_writes`` asks which op a call is (its scope, its modules) only
    when a statement after it may write the name; the twin with a write is still found."""
    import gradtrace.lint.rules.inplace._saved as saved
    asked: list[int] = []
    real = saved._producer

    def producer(call, ctx, modules):  # type: ignore[no-untyped-def]
        asked.append(call.lineno)
        return real(call, ctx, modules)
    monkeypatch.setattr(saved, "_producer", producer)
    assert _codes(PRODUCED.format(write="print(q)"), "GT602") == [] and asked == []
    assert _codes(PRODUCED.format(write="p[p < 0.5] = 0"), "GT602") == [("GT602", 7)]
    assert asked == [5]
