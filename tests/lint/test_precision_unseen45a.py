"""Shapes from the projects of docs/triage/unseen45a.md (session 45) and the two shapes
unseen44 left (a freeze by a method inherited from another file; FCOS targets), each in
another spelling than the project's and next to a buggy twin that is still reported; the
single-file ones run on real torch, the two-file ones are small projects in tmp_path (run
too, imported from there)."""
from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

GAN = """
    G, D = nn.Linear(2, 2), nn.Linear(2, 1)
    optG = torch.optim.SGD(G.parameters(), lr=0.1)
    optD = torch.optim.SGD(D.parameters(), lr=0.1)
    """

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # hariharannatesh/Action-Recognition-using-Pytorch-Geometric: a residual projection made
    # in `forward` as `nn.Parameter(torch.empty(...)).cuda()`, initialised and multiplied,
    # nothing else: GT403 said an attribute or an optimizer would get a non-leaf copy; the
    # value never leaves the function. Twin: the moved copy handed to an optimizer (raises)
    "moved-parameter-spent-in-forward": (Shape("""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
        def forward(self, x):
            proj = nn.Parameter(torch.empty(3, 2)).double()
            same = nn.init.xavier_normal_(proj)
            return self.fc(x).double() @ same + x.double().sum() * torch.mean(proj)
    out = Block()(torch.randn(4, 3))
    """, "GT403", holds="out.shape == (4, 2)"),
        Shape("""
    def make():
        proj = nn.Parameter(torch.empty(3, 2)).double()
        nn.init.xavier_normal_(proj)
        return torch.optim.SGD([proj], lr=0.1)
    opt = make()
    """, "GT403", line=2, raises=(ValueError, "non-leaf"))),
    # Barry0121/graph-neural-net-benchmark: the discriminator's loop clears the generator's
    # optimizer and steps its own; the generator's step after the loop follows a backward of
    # its own loss there. GT518 said the step applies the loop's last batch ("step inside that
    # loop"). Twin: no backward after the loop: the generator's step applies what the
    # discriminator's last pass left in it (reported; the gradient is that pass's)
    "other-optimizer-loop-before-a-later-backward": (Shape(GAN + """
    for it in range(2):
        for k in range(3):
            optG.zero_grad()
            optD.zero_grad()
            D(G(torch.randn(4, 2)).detach()).mean().backward()
            optD.step()
        z = torch.randn(4, 2)
        lossG = -D(G(z)).mean()
        want = torch.autograd.grad(lossG, G.weight, retain_graph=True)[0]
        lossG.backward()
        optG.step()
    """, "GT518", holds="torch.allclose(G.weight.grad, want)"),
        Shape(GAN + """
    for it in range(2):
        for k in range(3):
            optG.zero_grad()
            optD.zero_grad()
            lossD = D(G(torch.randn(4, 2))).mean()
            want = torch.autograd.grad(lossD, G.weight, retain_graph=True)[0]
            lossD.backward()
            optD.step()
        optG.step()
    """, "GT518", line=13, holds="torch.allclose(G.weight.grad, want)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"))


def _run(root: Path, module: str, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.syspath_prepend(str(root))
    for m in [m for m in sys.modules if m in ("layers", "flow", "base", "child")]:
        del sys.modules[m]
    return importlib.import_module(module)


LAYERS = """
    import torch
    import torch.nn as nn
    class Halves(nn.Module):
        def forward(self, z, logdet):
            a, b = z.chunk(2, dim=1)
            return torch.cat([b, a * 2], dim=1), logdet + z.shape[1] // 2 * 0.6931
        def backward(self, z, logdet):
            b, a2 = z.chunk(2, dim=1)
            return torch.cat([a2 / 2, b], dim=1), logdet - z.shape[1] // 2 * 0.6931
    class Reverse(nn.Module):
        def forward(self, x):
            return x
        def backward(self, grad_output):
            return -grad_output
    """
FLOW = """
    import torch
    from layers import Halves, Reverse
    def roundtrip(z):
        layer = Halves()
        y, ld = layer(z, torch.zeros(z.shape[0]))
        {inverse}
    def reversed_grad(x):
        x = x.clone().requires_grad_(True)
        Reverse()(x).sum().backward()
        return x.grad
    """


@pytest.mark.parametrize("inverse, reported", [
    ("return layer.backward(y, ld)", ["Reverse"]),
    ("return y, ld", ["Halves", "Reverse"])])
@pytest.mark.usefixtures("tmp_imports")  # its project's modules gone afterwards
def test_flow_layer_inverse_called_from_another_file(tmp_path: Path, inverse: str,
                                                     reported: list,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """tatsy/normalizing-flows-pytorch: a flow layer's `backward(self, z, log_df_dz)` is the
    inverse transform the flow of another file calls by hand; GT795 read it as a gradient rule
    autograd never calls. Twin: a gradient-reversal module's `backward(grad)` in the same file
    (reported, and real torch gives the unreversed gradient); with no call of the inverse,
    the flow layer is reported too (as before)."""
    _write(tmp_path, {"layers.py": LAYERS, "flow.py": FLOW.format(inverse=inverse)})
    found = check_paths([str(tmp_path / "layers.py")], Settings()).findings
    lines = {3: "Halves", 10: "Reverse"}
    assert [lines.get(f.line) for f in found if f.code == "GT795"] == reported
    flow = _run(tmp_path, "flow", monkeypatch)
    z = torch.randn(4, 6)
    if "backward" in inverse:
        back, ld = flow.roundtrip(z)  # type: ignore[attr-defined]
        assert torch.allclose(back, z) and torch.allclose(ld, torch.zeros(4))
    assert torch.equal(flow.reversed_grad(z), torch.ones(4, 6))  # type: ignore[attr-defined]


BASE = """
    import torch.nn as nn
    class Interactive:
        def __init__(self, model):
            self.model = model
        def eval_mode(self):
            self.model.eval()
            {freeze}
        def train_mode(self):
            self.model.train()
            for w in self.model.parameters():
                w.requires_grad = True
    """
CHILD = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from base import Interactive
    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
        def forward(self, idx):
            return self.emb(idx).sum(-1)
        def loss(self, pred, y):
            return F.mse_loss(pred, y)
    class Retrainer(Interactive):
        def retrain(self, batches):
            {first}
            before = 0
            for x, y in batches:
                before += self.model.loss(self.model(x), y)
            self.train_mode()
            opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            for x, y in batches:
                opt.zero_grad()
                self.model.loss(self.model(x), y).backward()
                opt.step()
            return before
    def run():
        batches = [(torch.randint(0, 10, (8,)), torch.randn(8)) for _ in range(3)]
        return Retrainer(Scorer()).retrain(batches)
    """
FREEZE = "for p in self.model.parameters():\n                p.requires_grad = False"


@pytest.mark.parametrize("freeze, first, line", [
    (FREEZE, "self.eval_mode()", None),
    ("pass", "self.eval_mode()", 18),
    (FREEZE, "self.eval_mode()\n            self.train_mode()", 19)])
@pytest.mark.usefixtures("tmp_imports")  # its project's modules gone afterwards
def test_model_frozen_by_an_inherited_method(tmp_path: Path, freeze: str, first: str,
                                             line: int | None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """dicee (Fattehh/BPE-for-Knowledge-Graph-Embeddings, unseen44b's left shape): the base
    class of another file freezes every weight of `self.model` in `set_model_eval_mode()`,
    called before the first evaluation loop; the summed losses hold no graph. Twins: the base
    method only switches the mode, or the train-mode method unfreezes in between (reported;
    the sum then requires grad)."""
    _write(tmp_path, {"base.py": BASE.format(freeze=freeze),
                      "child.py": CHILD.format(first=first)})
    found = check_paths([str(tmp_path / "child.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT505"] == (
        [] if line is None else [(line, "GT505")])
    before = _run(tmp_path, "child", monkeypatch).run()  # type: ignore[attr-defined]
    assert before.requires_grad == (line is not None)
