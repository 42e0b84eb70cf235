"""speed41b: cheaper exact paths of the engine and the shared facts (issue 12).

- NOTE [positional True]: an in-place layer spelt with a positional ``True`` is found from
  each ``True )`` backwards, with the regex's answer.
"""
from __future__ import annotations

import re
import textwrap

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.analysis import input_writes
from gradtrace.lint.analysis.input_writes import _positional_inplace

# the regex the backward search replaces (NOTE [positional True])
REGEX = re.compile(r"(?:ReLU6?|ELU|Hardtanh|Hardswish|Hardsigmoid|SiLU|Mish|Threshold"
                   r"|Dropout\w*)\s*\((?:[^()]|\([^()]*\))*\bTrue\s*\)")


def _found(src: str, code: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check_source(textwrap.dedent(src), select=[code])]


@pytest.mark.parametrize("code, expected", [
    ("nn.ReLU(True)", True),
    ("nn.ReLU6 (True )", True),
    ("nn.LeakyReLU(0.2, True)", True),
    ("nn.GELU(approximate, True)", True),
    ("nn.Dropout2d(p=(0.1), True)", True),
    ("nn.xDropoutY\n(\n0.5, True\n)", True),
    ("nn.ReLU(f(a), g(b), True)", True),
    ("nn.ReLU(f(g(a)), True)", False),  # a group two deep: the regex's middle cannot hold it
    ("nn.ReLU(xTrue)", False),  # `\bTrue`
    ("nn.ReLU(True_)", False),
    ("nn.Linear(3, 4, True)", False),
    ("nn.ReLU()\nf(True)", False),
    ("nn.ReLU(False), dict(a=True)", False),
    ("nn.ReLUx(True)", False),
    ("True)", False),
    ("(True)", False),
    ("nn.Mish\u00a0(True)", True),  # `\s` is Unicode whitespace
    ("nn.ReLU((a), (True))", False),  # the inner `(True)` has no layer; the outer `)` no True
    ("nn.Threshold(0.1, 20, (a), True )", True),
])
def test_backward_search_is_the_regex(code: str, expected: bool) -> None:
    assert (REGEX.search(code) is not None) is expected
    assert _positional_inplace(code) is expected


def test_the_regex_is_not_run() -> None:
    # fails if the regex's search over every position comes back under its old name
    assert not hasattr(input_writes, "_POSITIONAL_INPLACE")


POSITIONAL = """
    import torch.nn as nn

    class ResBlock(nn.Module):
        def __init__(self, ch):
            super().__init__()
            self.conv = nn.Sequential(
                nn.ReLU({arg}),
                nn.Conv2d(ch, ch, 3, padding=1),
            )

        def forward(self, x):
            return self.conv(x) + x
    """


def test_gt607_through_a_positional_true_and_its_look_alike() -> None:
    assert _found(POSITIONAL.format(arg="True"), "GT607") == [("GT607", 8)]
    assert _found(POSITIONAL.format(arg="False"), "GT607") == []
