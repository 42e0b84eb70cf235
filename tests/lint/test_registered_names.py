"""GT417: names torch rejects for a submodule, parameter or buffer. Buggy twins (other spellings
than the rule's examples) are reported on their line and raise on real torch; the look-alikes
(underscored and numbered names, other keys) stay silent and build.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "registered-name-rejected": (Shape("""
        STAGES = ["stem", "body", "head"]

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                for i in range(2):
                    self.register_buffer(f"running_{i}", torch.zeros(3))
                    self.add_module("block_%d" % i, nn.Linear(3, 3))
                self.parts = nn.ModuleDict({s: nn.Linear(3, 3) for s in STAGES})
                self.scales = nn.ParameterDict(dict(kind=nn.Parameter(torch.ones(3))))

        net = Net()
        """, "GT417", holds="len(list(net.parameters())) == 11"), [Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                for i in range(2):
                    self.register_buffer(f"stats.{i}", torch.zeros(3))

        net = Net()
        """, "GT417", 5, "contain"), Shape("""
        STAGES = ["stem", "train", "head"]
        parts = nn.ModuleDict({s: nn.Linear(3, 3) for s in STAGES})
        """, "GT417", 2, "already exists"), Shape("""
        scales = nn.ParameterDict(dict(keys=nn.Parameter(torch.ones(3))))
        """, "GT417", 1, "already exists"), Shape("""
        body = nn.Sequential()
        for i in range(3):
            body.add_module("layer.{}".format(i), nn.Linear(3, 3))
        """, "GT417", 3, "contain")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_builds(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_raise(name: str) -> None:
    _, bads = SHAPES[name]
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
