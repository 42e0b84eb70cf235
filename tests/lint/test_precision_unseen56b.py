"""Shapes from the projects of docs/triage/unseen56b.md (session 56), each in another
spelling than the project's and next to a buggy twin that is still reported; all run on real
torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

# a weight-normalised conv (Dino-Tracker's `NormalizedConv2d`): the magnitude of the summed
# kernel is only compared to pick the entries to patch, then the sum is patched in place
# (NOTE [output never differentiated]): nothing the magnitude's op saved is ever read. Twin:
# the magnitude also scales the output, so backward reads what `abs` saved: it raises.
NORM_CONV = '''
class NormConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3, 2, 2))

    def forward(self, x):
        w_sum = self.weight.sum(dim=[2, 3])[:, :, None, None]
        scale = torch.abs(w_sum)
        tiny = scale < 10.0
        w_sum[tiny] = torch.sign(w_sum[tiny]) * 1e-8
        return F.conv2d(x, self.weight / w_sum){tail}


NormConv()(torch.randn(1, 3, 5, 5)).sum().backward()
'''

# an optical-flow outlier rate (KITTI's Fl-all) added to a training loss: the root of the
# flow's squared magnitude is kept off 0 after the root, but its value reaches only
# comparisons (a boolean comes out): no gradient ever reaches the root. Twin: the relative
# error itself is returned and trained: the zero flow gives NaN weights.
OUTLIERS = '''
def outlier_rate(flow, target):
    epe = torch.sqrt(((flow - target) ** 2).sum(1))
    mag = torch.sqrt((flow ** 2).sum(1))
    rel = epe / (mag + 1e-6)
    return {ret}


net = nn.Conv2d(2, 2, 1, bias=False)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.zeros(1, 2, 4, 4)
for _ in range(2):
    flow = net(x)
    loss = (flow - x).abs().mean() + outlier_rate(flow, x)
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

# an adversarial autoencoder whose encoder is an LSTM (Adversarial-Behavior-Cloning): the
# critic is cleared, trained on its own loss and stepped; the encoder's adversarial loss then
# reads the critic on a state unpacked from the encoder's output (`_, (h, _) = enc(x)`): the
# critic's share of it is dropped on purpose (NOTE [adversary's share]). Twin: a penalty of
# the critic on noise backwarded after the critic's step never trains the critic.
AAE = '''
class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 2, batch_first=True)

    def forward(self, x):
        return self.lstm(x)


def train(adv):
    torch.manual_seed(0)
    enc, dec, disc = Enc(), nn.Linear(2, 4), nn.Linear(2, 1)
    opt_e = torch.optim.Adam(enc.parameters(), lr=0.01)
    opt_g = torch.optim.Adam(dec.parameters(), lr=0.01)
    opt_d = torch.optim.Adam(disc.parameters(), lr=0.01)
    bce = F.binary_cross_entropy_with_logits
    for x in [torch.randn(8, 5, 4) for _ in range(3)]:
        enc.zero_grad()
        dec.zero_grad()
        disc.zero_grad()
        out, _ = enc(x)
        F.mse_loss(dec(out), x).backward()
        opt_g.step()
        _, (h, _) = enc(x)
        noise = torch.randn(1, 8, 2)
        d_loss = bce(disc(noise), torch.ones(1, 8, 1)) + bce(disc(h.detach()), torch.zeros(1, 8, 1))
        d_loss.backward()
        opt_d.step()
        {late}
        late.backward()
        opt_e.step()
    return enc.lstm.weight_ih_l0.detach().clone(), disc.weight.detach().clone()
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    "magnitude-only-compared-then-the-sum-patched-in-place": (
        Shape(NORM_CONV.format(tail=""), "GT605"),
        Shape(NORM_CONV.format(tail=" * scale.mean()"), "GT605", line=10,
              raises=(RuntimeError, "modified by an inplace operation"))),
    "root-of-a-magnitude-read-only-by-comparisons": (
        Shape(OUTLIERS.format(ret="((epe > 3.0) & (rel > 0.05)).float().mean()"), "GT766",
              holds="torch.isfinite(net.weight).all()"),
        Shape(OUTLIERS.format(ret="rel.mean()"), "GT766", line=3,
              holds="torch.isnan(net.weight).any()")),
    "critics-share-of-an-unpacked-encoder-state": (
        Shape(AAE.format(late="_, (z, _) = enc(x)\n        late = adv * bce(disc(z), "
                         "torch.ones(1, 8, 1))"), "GT522",
              holds="not torch.equal(train(1.0)[0], train(0.0)[0])"),
        Shape(AAE.format(late="late = adv * disc(noise).pow(2).mean()"), "GT522", line=28,
              holds="torch.equal(train(1.0)[1], train(0.0)[1])")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


# recall (conditional-musegan's generator step): two terms of one loss, each cut by its own
# grad-off block (a frozen encoder's embedding under `inference_mode`, the critic's score
# under `no_grad`): each is named at its block, not the first only. Look-alike: both terms
# with grad on (the encoder frozen by `requires_grad_(False)`): silent; the generator trains.
TWO_TERMS = '''
gen, enc, critic = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 1)
enc.requires_grad_(False)
opt_g = torch.optim.Adam(gen.parameters())
opt_c = torch.optim.Adam(critic.parameters())
for z, cond in [(torch.randn(8, 4), torch.randn(8, 2))]:
    fake = gen(z)
    {emb}
    emb_loss = F.cosine_similarity(emb, cond).mean()
    {score}
    loss = F.mse_loss(fake, z) - emb_loss - score.mean()
    opt_g.zero_grad()
    loss.backward()
    opt_g.step()
    opt_c.zero_grad()
    critic(fake.detach()).mean().backward()
    opt_c.step()
'''


@pytest.mark.parametrize("cut,lines", [(False, []), (True, [7, 10])])
def test_every_grad_off_term_of_one_loss_is_named(cut: bool, lines: list[int]) -> None:
    import textwrap

    from gradtrace.lint import check_source
    emb, score = "emb = enc(fake)", "score = critic(fake)"
    if cut:
        emb = "with torch.inference_mode():\n        emb = enc(fake)"
        score = "with torch.no_grad():\n        score = critic(fake)"
    src = PRELUDE + textwrap.dedent(TWO_TERMS.format(emb=emb, score=score)).lstrip("\n")
    found = check_source(src, "shape.py", select=["GT218"])
    assert sorted(f.line - PRELUDE.count("\n") for f in found) == lines
    env: dict = {}
    exec(compile(src, "shape.py", "exec"), env)
    assert env["gen"].weight.grad is not None


# Precipitation_Downscaling's `shared_step` (and GNNs_precipitation_merging's metrics helper):
# the loss and an RMSE computed together and returned as one tuple; the caller unpacks it,
# backpropagates the loss and reads the RMSE only as a number (NOTE [metric element of a
# returned tuple]). The model predicts its zero target exactly: the root is at 0. Twin: the
# caller trains on `loss + rmse`: reported at the root, the weights become NaN.
STEPPER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Stepper:
    def __init__(self):
        self.net = nn.Linear(3, 2)
        nn.init.zeros_(self.net.weight)
        nn.init.zeros_(self.net.bias)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.rmse_sum = 0.0

    def shared_step(self, x, y):
        pred = self.net(x)
        loss = F.l1_loss(pred, y)
        rmse = torch.sqrt(F.mse_loss(pred, y))
        return loss, rmse

    def train(self, x, y):
        loss, rmse = self.shared_step(x, y)
        self.opt.zero_grad()
        {backward}
        self.opt.step()
        self.rmse_sum += rmse if isinstance(rmse, float) else rmse.detach().item()
'''
RUN = '''
import torch
from stepper import Stepper

s = Stepper()
s.train(torch.randn(4, 3), torch.zeros(4, 2))
'''


@pytest.mark.parametrize("backward,line", [("loss.backward()", None),
                                           ("(loss + rmse).backward()", 18)])
def test_metric_element_of_a_returned_tuple(tmp_imports, backward: str,
                                            line: int | None) -> None:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    (tmp_imports / "stepper.py").write_text(STEPPER.format(backward=backward))
    (tmp_imports / "run.py").write_text(RUN)
    found = check_paths([str(tmp_imports)], Settings(select=("GT753",))).findings
    assert [f.line for f in found] == ([] if line is None else [line])
    env: dict = {}
    exec(compile(RUN, "run.py", "exec"), env)
    assert torch.isnan(env["s"].net.weight).any() == (line is not None)
