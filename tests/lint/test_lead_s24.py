"""The lead's fixes of session 24.

GT415 with a parameter built in several branches: `__init__` builds `self.p` as an
`nn.Parameter` in one branch of an `if` and again in another, then (in the second branch only)
replaces it with a plain tensor (`self.p = self.p.repeat(...)`): `nn.Module.__setattr__`
refuses it. The rule took the first registration only, exclusive with the replacement, and said
nothing (dualprompt's `vision_transformer.py:428`, docs/triage/unseen23.md). Each twin raises
the TypeError on real torch; the look-alike (the replacement in the branch that builds nothing,
or a local name) builds.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

BRANCHES = """
class Prompt(nn.Module):
    def __init__(self, prefix, init):
        super().__init__()
        if not prefix:
            self.p = nn.Parameter(torch.zeros(2, 4))
        else:
            if init == "zero":
                self.p = nn.Parameter(torch.zeros(2, 1, 4))
            elif init == "uniform":
                self.p = nn.Parameter(torch.randn(2, 1, 4))
            self.p = {replace}
"""

TWINS = [
    Shape(BRANCHES.format(replace="self.p.repeat(1, 2, 1)") + "Prompt(True, 'zero')\n",
          "GT415", 11, "cannot assign"),
    Shape(BRANCHES.format(replace="self.p.expand(2, 2, 4) * 1") + "Prompt(True, 'uniform')\n",
          "GT415", 11, "cannot assign"),
]
LOOK_ALIKES = [
    Shape(BRANCHES.format(replace="nn.Parameter(self.p.repeat(1, 2, 1))")
          + "m = Prompt(True, 'zero')\n", "GT415", holds="m.p.shape == (2, 2, 4)"),
    Shape("""
class Prompt(nn.Module):
    def __init__(self, prefix):
        super().__init__()
        if prefix:
            self.p = nn.Parameter(torch.zeros(2, 1, 4))
        else:
            self.p = torch.zeros(2, 4)
m = Prompt(False)
""", "GT415", holds="not isinstance(m.p, nn.Parameter)"),
]


@pytest.mark.parametrize("i", range(len(TWINS)))
def test_twin_is_reported_and_raises(i: int) -> None:
    assert _found(TWINS[i]) == [(TWINS[i].line, "GT415")]
    _run(TWINS[i])


@pytest.mark.parametrize("i", range(len(LOOK_ALIKES)))
def test_look_alike_is_silent_and_builds(i: int) -> None:
    assert _found(LOOK_ALIKES[i]) == []
    _run(LOOK_ALIKES[i])
