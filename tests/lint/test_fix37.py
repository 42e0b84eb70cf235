"""Session 37 (fix37): false alarms sessions 35-36's unseen projects left (docs/triage/fix37.md),
each in another spelling than the project's, next to a buggy twin that is still reported. Every
snippet runs on real torch. The facts that need the project (callers in other files) are
checked on small projects in ``tmp_path``."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _found(root: Path, *codes: str) -> list[tuple[str, str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(root)], Settings()).findings
    return sorted((f.code, Path(f.path).name, f.line) for f in got if f.code in codes)


def _run(root: Path, script: str) -> dict:
    import runpy
    import sys
    sys.path.insert(0, str(root))
    try:
        return runpy.run_path(str(root / script), run_name="__main__")
    finally:
        sys.path.remove(str(root))
        for m in list(sys.modules):
            if m.split(".")[0] in ("matcher", "client"):
                sys.modules.pop(m, None)


# --- PointDSC (`models/PointDSC.py:268` GT753): a method's parameter given data at every call
# (NOTE [parameters given data]). `forward` unpacks its record; the positions go to the encoder
# (the module's input, NOTE [batch siblings]), the keypoints beside them are data, and the
# method computing their pairwise distances is called only with them: `sqrt` at a coincident
# pair (the diagonal) never gets a gradient. Twins: the keypoints made by a layer of the
# module; or another file calling the method with a model's output: NaN gradients.

MATCHER = '''
import torch
import torch.nn as nn


class Matcher(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 8)
        self.head = nn.Linear(8, 1)
        self.lift = nn.Linear(6, 6)

    def forward(self, batch):
        pos, src_pts, tgt_pts = batch["pos"], batch["src"], batch["tgt"]
        {lift}
        feats = self.encoder(pos)
        conf = self.head(feats).squeeze(-1)
        seeds = torch.argsort(conf, dim=1, descending=True)[:, :4]
        return conf, self.consensus(seeds, feats, src_pts, tgt_pts)

    def consensus(self, seeds, feats, src_pts, tgt_pts):
        idx = seeds[:, :, None].expand(-1, -1, 3)
        a = src_pts.gather(1, idx)
        b = tgt_pts.gather(1, idx)
        gap = ((a[:, :, None, :] - a[:, None, :, :]) ** 2).sum(-1) ** 0.5 \\
            - ((b[:, :, None, :] - b[:, None, :, :]) ** 2).sum(-1) ** 0.5
        w = torch.clamp(1 - gap ** 2, min=0).sum(-1, keepdim=True)
        return (w * feats.gather(1, seeds[:, :, None].expand(-1, -1, 8))).mean()
'''
TRAIN = '''
import torch
from matcher import Matcher

net = Matcher()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
torch.manual_seed(0)
batch = {{"pos": torch.randn(2, 10, 6), "src": torch.randn(2, 10, 3),
         "tgt": torch.randn(2, 10, 3)}}
conf, score = net(batch)
loss = conf.mean() + score
{extra}
opt.zero_grad()
loss.backward()
finite = all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)
opt.step()
'''


def _matcher(root: Path, lift: str = "", extra: str = "") -> Path:
    return _project(root, {"matcher.py": MATCHER.format(lift=lift),
                           "train.py": TRAIN.format(extra=extra)})


def test_distances_of_keypoints_handed_on_from_the_record_are_silent(tmp_path) -> None:
    root = _matcher(tmp_path)
    assert _found(root, "GT753") == []
    assert _run(root, "train.py")["finite"]


def test_distances_of_keypoints_made_by_a_layer_are_reported(tmp_path) -> None:
    root = _matcher(tmp_path, lift="src_pts, tgt_pts = self.lift(pos).chunk(2, dim=-1)")
    assert _found(root, "GT753") == [("GT753", "matcher.py", 24), ("GT753", "matcher.py", 25)]
    assert not _run(root, "train.py")["finite"]


def test_method_also_called_with_a_graph_from_another_file_is_reported(tmp_path) -> None:
    extra = ("pts = net.lift(batch['pos']).chunk(2, dim=-1)\n"
             "loss = loss + net.consensus(torch.zeros(2, 4, dtype=torch.long), "
             "net.encoder(batch['pos']), *pts)")
    root = _matcher(tmp_path, extra=extra)
    assert _found(root, "GT753") == [("GT753", "matcher.py", 24), ("GT753", "matcher.py", 25)]
    assert not _run(root, "train.py")["finite"]


# --- Single-file shapes (checker and torch, tests/lint/shape_runner.py) ------------------------

from tests.lint.shape_runner import Shape, judge  # noqa: E402

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
'''

# POD-AANets (`inclearn/lib/loops/generators.py:261` GT522): an adversarial autoencoder. The
# critic is cleared, backwarded on its own loss and stepped; then the encoder's adversarial
# loss reads the critic on the encoder's output (NOTE [adversary's share]): the critic's share
# of that gradient is dropped on purpose. The encoder's own step before that loss is the real
# finding (line 14; `train(1.0)` and `train(0.0)` leave the same encoder: the adversarial
# term trains nothing). Twin: a regulariser of the critic on noise backwarded after the
# critic's step: it never trains the critic (the same critic with and without it).
AAE = """
def train(adv):
    torch.manual_seed(0)
    enc, dec, disc = nn.Linear(4, 2), nn.Linear(2, 4), nn.Linear(2, 1)
    opt_e = torch.optim.Adam(enc.parameters(), lr=0.01)
    opt_g = torch.optim.Adam(dec.parameters(), lr=0.01)
    opt_d = torch.optim.Adam(disc.parameters(), lr=0.01)
    bce = F.binary_cross_entropy_with_logits
    for x in [torch.randn(8, 4) for _ in range(3)]:
        opt_e.zero_grad()
        opt_d.zero_grad()
        opt_g.zero_grad()
        noise = torch.randn(8, 2)
        F.mse_loss(dec(enc(x)), x).backward()
        opt_e.step()
        opt_g.step()
        fake = disc(enc(x))
        d_loss = bce(disc(noise), torch.ones(8, 1)) + bce(fake, torch.zeros(8, 1))
        d_loss.backward()
        opt_d.step()
        {late}
        late.backward()
    return enc.weight.detach().clone(), disc.weight.detach().clone()
"""
SHAPES: dict[str, tuple[Shape, Shape]] = {
    "critics-share-of-the-encoders-adversarial-loss": (Shape(
        AAE.format(late="z = enc(x)\n        late = adv * bce(disc(z), torch.ones(8, 1))"),
        "GT522", line=14, holds="torch.equal(train(1.0)[0], train(0.0)[0])"), Shape(
        AAE.format(late="late = adv * disc(noise).pow(2).mean()"),
        "GT522", line=19, holds="torch.equal(train(1.0)[1], train(0.0)[1])")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# --- easyFL (`resources/algorithm/apple.py:87`, `:89` GT103): a method named like a loss whose
# value only weighs a live term of its caller's loss (NOTE [loss weights]): the NumPy it runs
# reads the round number. Twins: the same method handed the model's output (NumPy is handed a
# tensor that requires grad: it raises), or its value added as a term with the prediction.

CLIENT = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Client:
    def __init__(self, rounds):
        torch.manual_seed(0)
        self.net = nn.Linear(4, 2)
        self.anchor = torch.zeros(2)
        self.span = rounds
        self.mu = 0.1
        self.round = 0

    def loss_scheduler(self, r):
        return 0.5 * (np.cos(r * np.pi / self.span) + 1) if r <= self.span else 0.0

    def train(self, x, y):
        p = self.anchor.clone()
        p.requires_grad = True
        opt = torch.optim.SGD([*self.net.parameters(), p], lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            out = self.net(x) + p
            loss = F.cross_entropy(out, y)
            {weight}
            loss.backward()
            opt.step()
        self.round += 1
        return p
'''
SERVER = '''
import torch
from client import Client

client = Client(10)
for _ in range(3):
    moved = client.train(torch.randn(8, 4), torch.randint(0, 2, (8,)))
'''


def test_schedule_named_like_a_loss_weighing_a_term_is_silent(tmp_path) -> None:
    weight = ("coef = 0.5 * self.mu * self.loss_scheduler(self.round)\n"
              "            loss += coef * torch.sum((p - self.anchor) ** 2)")
    root = _project(tmp_path, {"client.py": CLIENT.format(weight=weight), "server.py": SERVER})
    assert _found(root, "GT103") == []
    assert not torch.equal(_run(root, "server.py")["moved"], torch.zeros(2))


def test_schedule_handed_the_models_output_is_reported(tmp_path) -> None:
    weight = ("coef = 0.5 * self.mu * self.loss_scheduler(out.mean())\n"
              "            loss += coef * torch.sum((p - self.anchor) ** 2)")
    root = _project(tmp_path, {"client.py": CLIENT.format(weight=weight), "server.py": SERVER})
    assert _found(root, "GT103") == [("GT103", "client.py", 17)]
    with pytest.raises(RuntimeError, match="requires grad"):
        _run(root, "server.py")
