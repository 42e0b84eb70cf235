"""Real bugs of docs/triage/unseen15.md that the checker missed at first contact (NRI), each
in another spelling than the project's, next to a correct look-alike that stays silent.
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
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
