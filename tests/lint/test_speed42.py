"""speed42: a cheap first question before a whole-file fact (issue 12), with the answer it must
keep and a test that fails when the cheap path is undone.

- NOTE [test unspelt]: ``read_without_grad`` maps the file's parents only when the code spells
  ``requires_grad`` (in ASCII code).
"""
from __future__ import annotations

import ast
import textwrap

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.analysis import file_parents, grad_values
from gradtrace.lint.engine import FileChecker


def _ctx(src: str):  # type: ignore[no-untyped-def]
    src = textwrap.dedent(src)
    return FileChecker("t.py", src, ast.parse(src), []).ctx


def _found(src: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(textwrap.dedent(src), select=[code])]


# -- NOTE [test unspelt] ------------------------------------------------------------------------
BUGGY = """
    import torch
    import torch.nn as nn

    model = nn.Linear(8, 2)
    x = torch.randn(4, 8)
    scores = model(x).softmax(-1)
    print(scores.numpy())
    """
GUARDED = """
    import torch
    import torch.nn as nn

    model = nn.Linear(8, 2)
    x = torch.randn(4, 8)
    scores = model(x).softmax(-1)
    print(scores.detach().numpy() if scores.requires_grad else scores.numpy())
    """
NOT_GUARDED = """
    import torch
    import torch.nn as nn

    model = nn.Linear(8, 2)
    x = torch.randn(4, 8)
    scores = model(x).softmax(-1)
    print(scores.numpy() if scores.requires_grad else scores.detach().numpy())
    """


def test_buggy_twin_still_found() -> None:
    assert _found(BUGGY, "GT116") == [("GT116", 8)]


def test_arm_without_grad_stays_silent() -> None:
    assert _found(GUARDED, "GT116") == []


def test_arm_with_grad_still_found() -> None:
    assert _found(NOT_GUARDED, "GT116") == [("GT116", 8)]


def _mapped(src: str, monkeypatch: pytest.MonkeyPatch) -> tuple[bool, int]:
    made: list[ast.AST] = []
    real = file_parents.parent_map  # the file's map, NOTE [one parent map]

    def counting(tree: ast.AST) -> dict[int, ast.AST]:
        made.append(tree)
        return real(tree)

    monkeypatch.setattr(file_parents, "parent_map", counting)
    ctx = _ctx(src)
    call = next(n for n in ast.walk(ctx.tree) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute) and n.func.attr == "numpy"
                and isinstance(n.func.value, ast.Name))  # `scores.numpy()`
    return grad_values.read_without_grad(ctx, call.func.value), len(made)


def test_no_parent_map_when_the_flag_is_never_spelt(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _mapped(BUGGY, monkeypatch) == (False, 0)


def test_parent_map_when_the_flag_is_spelt(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _mapped(GUARDED, monkeypatch) == (True, 1)


def test_flag_in_a_comment_or_string_only(monkeypatch: pytest.MonkeyPatch) -> None:
    src = BUGGY.replace("print(scores.numpy())",
                        "print(scores.numpy(), 'requires_grad')  # requires_grad")
    assert _mapped(src, monkeypatch) == (False, 0)


def test_non_ascii_code_still_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    src = BUGGY.replace("scores", "scöres")
    assert _mapped(src, monkeypatch) == (False, 1)
