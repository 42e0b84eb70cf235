"""Speed cuts of session 27 (speed27) that must give the answers of the code they replace."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint import check_source
from gradtrace.lint.analysis.param_attrs import file_freezes, forward_methods
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.inplace._listed import view_aliases

CLASSES = textwrap.dedent("""
    import torch
    import torch.nn as nn
    class A(nn.Module):
        def reset(self):
            self.w = nn.Parameter(torch.ones(2))
            self.late = 1
        def __init__(self, n):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(n))
            self.g, self.d = nn.Linear(2, 2), nn.Linear(2, 2)
            self.register_buffer("mask", torch.ones(n))
            if n:
                self.w = nn.Parameter(torch.ones(n))
            self.x: int = n
        def __init__(self, n, m):  # the later __init__ is the class's
            super().__init__()
            self.v = nn.Parameter(torch.zeros(n))
            self.v = 2
        def forward(self, x):
            self.seen = x
            return self.b(x) + self.a(x)
        def a(self, x):
            return self.c(x)
        def b(self, x):
            return x
        def c(self, x):
            return self.b(x)
    class B:
        def forward(self):
            self.y = 1
""")


def _ctx(text: str):  # type: ignore[no-untyped-def]
    tree = ast.parse(text)
    return FileChecker("x.py", text, tree, [], text).ctx


def _fields(infos):  # type: ignore[no-untyped-def]
    return {a: (i.name, i.value, i.stmt, i.method, i.buffer) for a, i in infos.items()}


def test_init_attrs_are_the_entries_of_attrs_made_in_init():
    """GT302's Parameter attributes: ``ClassInfo.init_attrs`` read from ``__init__`` alone are
    the entries of ``attrs`` whose method is ``__init__`` (the same values, in the same
    order), whether ``attrs`` was computed before or not."""
    for attrs_first in (False, True):
        ctx = _ctx(CLASSES)
        for c in ctx.analysis.classes.values():
            if attrs_first:
                c.attrs  # noqa: B018 - computed first
            got = _fields(c.init_attrs)
            init = c.methods.get("__init__")
            want = _fields({a: i for a, i in c.attrs.items() if i.method.name == "__init__"})
            assert got == want and list(got) == list(want)
            assert all(i.method is init for i in c.init_attrs.values())
        assert list(ctx.analysis.classes["A"].init_attrs) == ["v"]


def test_parameter_write_through_an_instance_still_found():
    bad = textwrap.dedent("""
        import torch
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.P = nn.Parameter(torch.zeros(3))
            def forward(self, x):
                return x * self.P
        m = M()
        m.P[0] = 1.0
    """)
    assert [(f.code, f.line) for f in check_source(bad, select=["GT302"])] == [("GT302", 11)]
    good = bad.replace("m.P[0] = 1.0", "with torch.no_grad():\n    m.P[0] = 1.0")
    assert check_source(good, select=["GT302"]) == []


def _old_view_aliases(stmts, written):  # type: ignore[no-untyped-def]
    """The names each assignment binds, found by ``ast.walk`` of every target."""
    bound: dict[str, list[int]] = {}
    for j, st in enumerate(stmts):
        if isinstance(st, ast.Assign):
            for t in st.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) \
                            and n.id in written:
                        bound.setdefault(n.id, []).append(j)
    return bound


def test_view_aliases_bind_only_through_names_tuples_lists_and_starred():
    """An attribute or subscript target binds no name (its names are read); a tuple, list or
    starred target binds the names in it: the names the old walk of every target found."""
    body = textwrap.dedent("""
        w = out[:, :2]
        self.w = out
        w[0] = 1
        x.y[w] = 2
        a, (b, *c) = f()
        [d, e] = g()
        w += 1
        b += 1
    """)
    stmts = ast.parse(body).body
    written = {"w": [6], "b": [7]}
    assert _old_view_aliases(stmts, written) == {"w": [0], "b": [4]}
    assert view_aliases(stmts, {k: list(v) for k, v in written.items()}) == {"w": "out"}
    stmts2 = ast.parse(body.replace("a, (b, *c) = f()", "a, (w, *c) = f()")).body
    assert view_aliases(stmts2, {"w": [6]}) == {}  # bound twice: no alias


def test_file_freezes_needs_requires_grad_in_the_code():
    base = "import torch\nm = torch.nn.Linear(2, 2)\n"
    assert not file_freezes(_ctx(base))
    assert not file_freezes(_ctx(base + "# p.requires_grad = False\ns = 'requires_grad_(False)'\n"))
    assert file_freezes(_ctx(base + "for p in m.parameters():\n    p.requires_grad = False\n"))
    assert file_freezes(_ctx(base + "m.weight.requires_grad_(False)\n"))
    assert not file_freezes(_ctx(base + "m.weight.requires_grad = True\n"))


def test_forward_methods_in_the_order_of_the_walk():
    ctx = _ctx(CLASSES)
    cls = ctx.analysis.classes["A"]
    out, todo, seen = [], ["forward"], set()
    while todo:  # the walk-based computation it replaced
        m = cls.methods.get(todo.pop())
        if m is None or m.name in seen or m.name == "__init__":
            continue
        seen.add(m.name)
        out.append(m)
        todo.extend(n.func.attr for n in walk(m) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == "self")
    assert [m.name for m in forward_methods(cls)] == [m.name for m in out]
    assert len(out) == 4
