"""Shapes that fired wrongly on the projects of docs/triage/unseen29e.md (session 29), each in
another spelling than the project's and next to a buggy twin that is still reported. The
snippets whose claim is about torch run on real torch."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import dataclasses
import enum
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # edm2 (training/training_loop.py): `proc.children(recursive=True)` is psutil's method, a
    # list: nn.Module's `children()` takes no argument. Twin: a module's `children()` added
    # to a list raises TypeError
    "children-called-with-an-argument-nn-module-does-not-take": (Shape("""
        Proc = type("Proc", (), {"children": lambda self, recursive=False: [1, 2]})
        def usage(p):
            return [0] + p.children(recursive=True)
        assert usage(Proc()) == [0, 1, 2]
        """, "GT449"), Shape("""
        def layers(model):
            return [model] + model.children()
        try:
            layers(nn.Sequential(nn.Linear(2, 2)))
            failed = False
        except TypeError:
            failed = True
        """, "GT449", line=2, holds="failed")),
    # flow_matching (examples/image/models/unet.py): `@dataclass(eq=False) class
    # UNetModel(nn.Module)` builds its layers in `__post_init__`, which the generated
    # `__init__` calls. Twin: no decorator, the method is never called
    "dataclass-module-built-in-post-init": (Shape("""
        @dataclasses.dataclass(eq=False)
        class Head(nn.Module):
            width: int = 4
            def __post_init__(self):
                super().__init__()
                self.fc = nn.Linear(self.width, 1)
            def forward(self, x):
                return self.fc(x)
        n = len(list(Head().parameters()))
        """, "GT444", holds="n == 2"), Shape("""
        class Head(nn.Module):
            def setup(self):
                self.fc = nn.Linear(4, 1)
            def forward(self, x):
                return self.fc(x)
        n = len(list(Head().parameters()))
        """, "GT444", line=2, holds="n == 0")),
    # psutil-free GT753 look-alike (edm2 toy_example.py): a distance only compared in its own
    # statement (`ok[i] = d.sqrt().min() >= eps`) gives a boolean, never differentiated.
    # Twin: the distance is the loss
    "root-compared-in-its-own-statement": (Shape("""
        def spread(net, x, eps):
            y = net(x)
            ok = torch.ones(len(y), dtype=torch.bool)
            for i in range(1, len(y)):
                ok[i] = ((y[i] - y[:i]) ** 2).sum(-1).sqrt().min() >= eps
            loss = y[ok].pow(2).mean()
            loss.backward()
        spread(nn.Linear(2, 2), torch.randn(5, 2), 0.1)
        """, "GT753"), Shape("""
        def spread(net, x):
            y = net(x)
            loss = ((y[1:] - y[:1]) ** 2).sum(-1).sqrt().mean()
            loss.backward()
        spread(nn.Linear(2, 2), torch.randn(5, 2))
        """, "GT753", line=3)),
    # TxGNN (txgnn/model.py): `self.pred = Predictor(w=self.w)` builds a module that keeps the
    # Parameter (registered under both): no tensor is computed in `__init__`. Twin: a value
    # computed from it there: the second backward raises
    "module-built-from-the-parameter-in-init": (Shape("""
        class Scorer(nn.Module):
            def __init__(self, w):
                super().__init__()
                self.w = w
            def forward(self, h):
                return h @ self.w
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rel = nn.Parameter(torch.randn(3, 2))
                self.pred = Scorer(w=self.rel)
            def forward(self, h):
                return self.pred(h)
        net = Net()
        for _ in range(2):
            net(torch.randn(4, 3)).sum().backward()
        """, "GT521"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rel = nn.Parameter(torch.randn(3, 2))
                self.pred = torch.tanh(self.rel)
            def forward(self, h):
                return h @ self.pred
        net = Net()
        for _ in range(2):
            net(torch.randn(4, 3)).sum().backward()
        """, "GT521", line=5, raises=(RuntimeError, "second time"))),
    # OLMo (olmo/model.py): an override's `F.dropout(w, p=dropout_p)` whose every caller
    # passes `dropout_p=0.0 if not self.training else r`: nothing is dropped after `.eval()`.
    # Twin: a caller passes the rate unconditionally
    "dropout-rate-the-callers-switch-off-in-eval": (Shape("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.rate = 0.5
            def attend(self, w, dropout_p=0.0):
                return w
            def forward(self, w):
                return self.attend(w, dropout_p=0.0 if not self.training else self.rate)
        class Plain(Block):
            def attend(self, w, dropout_p=0.0):
                return F.dropout(w, p=dropout_p)
        m = Plain()
        m.eval()
        x = torch.ones(100)
        same = torch.equal(m(x), x)
        """, "GT548", holds="same"), Shape("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.rate = 0.5
            def attend(self, w, dropout_p=0.0):
                return F.dropout(w, p=dropout_p)
            def forward(self, w):
                return self.attend(w, dropout_p=self.rate)
        m = Block()
        m.eval()
        x = torch.ones(100)
        same = torch.equal(m(x), x)
        """, "GT548", line=6, holds="not same")),
}


@pytest.mark.parametrize("key", sorted(SHAPES))
def test_look_alike_is_silent(key: str) -> None:
    judge(PRELUDE, SHAPES[key][0])


@pytest.mark.parametrize("key", sorted(SHAPES))
def test_buggy_twin_is_reported(key: str) -> None:
    judge(PRELUDE, SHAPES[key][1])


def _codes(src: str, code: str) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in check_source(textwrap.dedent(src), "t.py", select=[code])]


# open-instruct (open_instruct/dpo_utils.py): an enum's property `is_average_loss(self) ->
# bool` returning `self in (A, B)`: a predicate, not a loss. Twin: a loss built from argmax
PREDICATE = """
import enum
import torch.nn.functional as F

class LossType(enum.Enum):
    plain = "plain"
    norm = "norm"

    @property
    def is_average_loss(self) -> bool:
        return self in (LossType.norm,)

def hard_loss(logits, y):
    return F.mse_loss(logits.argmax(1).float(), y.float())
"""


def test_predicate_named_like_a_loss() -> None:
    assert _codes(PREDICATE, "GT108") == [(14, "GT108")]


# VAR (models/quant.py): the VQ commitment loss reads `f_hat` with its history, then the
# straight-through estimator rebinds `f_hat = (f_hat.data - x.detach()).add_(x)`: the
# codebook trains through the loss. Twin: the `.data` output only, no live read before
VQ = """
import torch.nn as nn
import torch.nn.functional as F

class Quant(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(16, 4)

    def forward(self, x, idx):
        x_ng = x.detach()
        q = self.embedding(idx)
        loss = F.mse_loss(q.data, x) + F.mse_loss(q, x_ng)
        q = (q.data - x_ng).add_(x)
        return q, loss
"""
VQ_TWIN = """
import torch.nn as nn

class Quant(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(16, 4)

    def forward(self, x, idx):
        q = self.embedding(idx)
        q = q.data * 2
        return q
"""


def test_straight_through_after_a_live_read() -> None:
    assert _codes(VQ, "GT105") == []
    assert _codes(VQ_TWIN, "GT105") == [(11, "GT105")]


# TxGNN (txgnn/model.py): DGL's `g.nodes[t].data['Wh_%s' % e] = Wh` writes into a mapping
# of node features: a tensor is never indexed by a string. Twin: a tensor's `.data` slice
DGL = """
import torch.nn as nn

class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, g, feats, buf):
        for t, e in zip(g.ntypes, g.etypes):
            g.nodes[t].data['Wh_%s' % e] = self.fc(feats[t])
            g.nodes[t].data[f"h_{e}"] = self.fc(feats[t])
        buf.data[:, :4] = self.fc(feats['x'])
        return g
"""


def test_string_keyed_data_is_a_mapping() -> None:
    assert _codes(DGL, "GT113") == [(13, "GT113")]


# LightningDiT (vavae/ldm/models/autoencoder.py): `self.loss` is built in `__init__` by a
# factory of another package; the two passes call it with optimizer index 0 then 1 and step
# two optimizers: the discriminator branch detaches in that other file. The second call
# does not even take `feat`, unpacked from the same forward as `rec`. Twin: a loss of this
# file: both passes run through the forward's graph
GAN = """
import torch.nn as nn
from ldm.util import instantiate_from_config

class AE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.loss = instantiate_from_config(cfg)

    def training_step(self, x, ae_opt, disc_opt):
        rec, post, feat = self(x)
        ae = self.loss(x, rec, post, 0, feat=feat)
        ae_opt.zero_grad()
        ae.backward()
        ae_opt.step()
        disc = self.loss(x, rec, post, 1)
        disc_opt.zero_grad()
        disc.backward()
        disc_opt.step()
"""


def test_switched_loss_held_by_an_attribute() -> None:
    assert _codes(GAN, "GT509") == []
    twin = GAN.replace("from ldm.util import instantiate_from_config\n", "").replace(
        "self.loss = instantiate_from_config(cfg)", "self.head = nn.Linear(4, 1)").replace(
        "self.loss(x, rec, post, 0, feat=feat)", "(self.head(rec) + feat).mean()").replace(
        "self.loss(x, rec, post, 1)", "self.head(rec).mean()")
    assert _codes(twin, "GT509") == [(13, "GT509")]
