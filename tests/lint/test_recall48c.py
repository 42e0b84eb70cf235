"""GT540 through a module carried into a plain class (NOTE [carried modules], NOTE [evaluated
where it was carried]): the class stores the network its constructor is given and runs it under
`no_grad` in a method, and nothing in the file ever switches a module's mode. The file is
written to tmp_path: construction sites are read from the file on disk (NOTE [construction
sites])."""
from __future__ import annotations

import textwrap
from pathlib import Path

from gradtrace.lint import check_source

BUGGY = textwrap.dedent("""
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.3)
            self.proj = nn.Linear(4, 2)

        def forward(self, x):
            return self.proj(self.drop(x))


    class PredNet(Net):
        def forward(self, x):
            return self.proj(self.drop(x)).mean(-1)


    class Predictor:
        def __init__(self, net, batch_size):
            self.net = net
            self.batch_size = batch_size

        def predict(self, data):
            with torch.no_grad():
                for batch in data.split(self.batch_size):
                    yield self.net(batch)


    class Estimator:
        def make(self, trained):
            pred = PredNet()
            pred.load_state_dict(trained.state_dict())
            return Predictor(pred, batch_size=4)

        def train(self, data):
            net = Net()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            net.train()
            for x in data.split(4):
                opt.zero_grad()
                net(x).sum().backward()
                opt.step()
            return self.make(net)


    predictor = Estimator().train(torch.randn(16, 4))
    out = list(predictor.predict(torch.randn(8, 4)))
""")


def _check(tmp_path: Path, text: str) -> list[tuple[str, int]]:
    p = tmp_path / "serve.py"
    compile(text, "serve.py", "exec")  # a look-alike must parse to mean anything
    p.write_text(text)
    return sorted((f.code, f.line) for f in check_source(p.read_text(), path=str(p))
                  if f.code == "GT540")


def test_buggy_twin_names_the_store(tmp_path: Path) -> None:
    assert _check(tmp_path, BUGGY) == [("GT540", 23)]


def test_eval_before_building_the_wrapper_is_silent(tmp_path: Path) -> None:
    fixed = BUGGY.replace("pred.load_state_dict(trained.state_dict())",
                          "pred.load_state_dict(trained.state_dict())\n        pred.eval()")
    assert _check(tmp_path, fixed) == []


def test_eval_on_the_stored_attribute_elsewhere_is_silent(tmp_path: Path) -> None:
    fixed = BUGGY + "predictor.net.eval()\n"
    assert _check(tmp_path, fixed) == []


def test_module_without_mode_layers_is_silent(tmp_path: Path) -> None:
    plain = BUGGY.replace("nn.Dropout(0.3)", "nn.Identity()")
    assert _check(tmp_path, plain) == []


def test_a_site_passing_no_module_is_silent(tmp_path: Path) -> None:
    other = BUGGY + "other = Predictor(lambda x: x, batch_size=2)\n"
    assert _check(tmp_path, other) == []


def test_a_module_class_holding_it_is_not_this_path(tmp_path: Path) -> None:
    wrapped = BUGGY.replace("class Predictor:", "class Predictor(nn.Module):").replace(
        "self.net = net", "super().__init__()\n        self.net = net")
    assert ("GT540", 24) not in _check(tmp_path, wrapped)
