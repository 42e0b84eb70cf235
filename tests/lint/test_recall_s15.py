"""Real bugs of docs/triage/unseen15.md that the checker missed at first contact (NRI,
FactorVAE), each in another spelling than the project's, next to a correct look-alike that
stays silent.
Every snippet runs on real torch."""
from __future__ import annotations

import pytest

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

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # NRI (train.py, train_enc.py, train_dec.py, lstm_baseline.py): `def train(epoch, ...):
    # ...; scheduler.step(); for batch_idx, (data, relations) in enumerate(train_loader): ...
    # optimizer.step()` with module-level `scheduler = lr_scheduler.StepLR(optimizer, ...)`:
    # the first call steps the scheduler before the optimizer ever stepped; PyTorch warns
    # and the first epoch trains at the second value. Here an ExponentialLR and an SGD of other
    # names and a batch loop over a list; the first step uses half the rate. Look-alike: the
    # scheduler stepped on the function's way out
    "scheduler-stepped-on-entry-of-the-epoch-function": (Shape("""
        net = nn.Linear(3, 1)
        base_opt = torch.optim.SGD(net.parameters(), lr=1.0)
        lr_sched = torch.optim.lr_scheduler.ExponentialLR(base_opt, gamma=0.5)
        rates = []
        def one_epoch(batches):
            for xb, yb in batches:
                base_opt.zero_grad()
                F.mse_loss(net(xb), yb).backward()
                rates.append(base_opt.param_groups[0]["lr"])
                base_opt.step()
            lr_sched.step()
        for epoch in range(2):
            one_epoch([(torch.randn(4, 3), torch.randn(4, 1))])
        """, "GT515", holds="rates == [1.0, 0.5]"), Shape("""
        net = nn.Linear(3, 1)
        base_opt = torch.optim.SGD(net.parameters(), lr=1.0)
        lr_sched = torch.optim.lr_scheduler.ExponentialLR(base_opt, gamma=0.5)
        rates = []
        def one_epoch(batches):
            lr_sched.step()
            for xb, yb in batches:
                base_opt.zero_grad()
                F.mse_loss(net(xb), yb).backward()
                rates.append(base_opt.param_groups[0]["lr"])
                base_opt.step()
        for epoch in range(2):
            one_epoch([(torch.randn(4, 3), torch.randn(4, 1))])
        """, "GT515", 6, holds="rates == [0.5, 0.25]")),
    # FactorVAE (solver.py): `x_recon, mu, logvar, z = self.VAE(x)`, `D_z = self.D(z)`,
    # `vae_loss` (from `D_z`) backwarded with `retain_graph=True`, `optim_VAE.step()`, then
    # `D_tc_loss = cross_entropy(D_z, zeros)` backwarded: its graph runs back through the
    # stepped VAE, whose weights the step changed in place; torch raises. Here an encoder
    # output chunked in two and a critic, the kept value read through an indexing. Look-alike:
    # the critic scores the code again after the step, detached from the encoder
    "critic-loss-after-the-encoder-step-reads-the-kept-graph": (Shape("""
        enc = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 6))
        critic = nn.Linear(3, 2)
        opt_e = torch.optim.Adam(enc.parameters(), lr=0.01)
        opt_c = torch.optim.Adam(critic.parameters(), lr=0.01)
        for step in range(2):
            x, y = torch.randn(8, 4), torch.zeros(8, dtype=torch.long)
            code, spread = enc(x).chunk(2, dim=1)
            judged = critic(code)
            loss_e = spread.pow(2).mean() + judged[:, 0].mean()
            opt_e.zero_grad()
            loss_e.backward(retain_graph=True)
            opt_e.step()
            judged_again = critic(code.detach())
            loss_c = F.cross_entropy(judged_again, y)
            opt_c.zero_grad()
            loss_c.backward()
            opt_c.step()
        """, "GT601"), Shape("""
        enc = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 6))
        critic = nn.Linear(3, 2)
        opt_e = torch.optim.Adam(enc.parameters(), lr=0.01)
        opt_c = torch.optim.Adam(critic.parameters(), lr=0.01)
        for step in range(2):
            x, y = torch.randn(8, 4), torch.zeros(8, dtype=torch.long)
            code, spread = enc(x).chunk(2, dim=1)
            judged = critic(code)
            loss_e = spread.pow(2).mean() + judged[:, 0].mean()
            opt_e.zero_grad()
            loss_e.backward(retain_graph=True)
            opt_e.step()
            loss_c = F.cross_entropy(judged[:, :2], y)
            opt_c.zero_grad()
            loss_c.backward()
            opt_c.step()
        """, "GT601", 13, raises=(RuntimeError, "modified by an inplace operation"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
