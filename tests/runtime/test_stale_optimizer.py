"""NOTE [replaced under the optimizer]: the optimizer's tensors are replaced after it was built
(GT849 at run time; the static GT404 leads when it reads the replacement)."""
from __future__ import annotations

import pytest

REMADE_IN_SCRIPT = """
import torch
w = torch.zeros(3, requires_grad=True)
opt = torch.optim.Adam([w], lr=0.1)
target = torch.tensor([1.0, 2.0, 3.0])
def loss_of(v):
    return ((v - target) ** 2).sum()
for i in range(12):
    if i == 4:
        w = w.detach().clone(){make}
    opt.zero_grad()
    loss_of(w).backward()
    opt.step()
"""

REMADE_IN_METHOD = """
import torch

class Fitter:
    def __init__(self, n):
        self.coef = torch.randn(n).requires_grad_()
        self.opt = torch.optim.SGD([self.coef], lr=0.05)

    def fit(self, xs, ys, steps):
        for _ in range(steps):
            self.opt.zero_grad()
            ((xs @ self.coef - ys) ** 2).mean().backward()
            self.opt.step()

    def as_double(self):
        self.coef = self.coef.detach().double().requires_grad_()
        return self

f = Fitter(4)
xs, ys = torch.randn(16, 4), torch.randn(16)
f.fit(xs, ys, 3)
f.as_double().fit(xs.double(), ys.double(), 3)
"""


@pytest.mark.parametrize("make", [".requires_grad_(True)", ".requires_grad_()"])
def test_tensor_remade_in_the_loop_is_named(run_script, make):
    res = run_script(REMADE_IN_SCRIPT.format(make=make))
    assert [(f["code"], f["line"]) for f in res.findings] == [("GT849", 9)], res.err
    assert "made here, after the optimizer was built" in res.findings[0]["message"]


def test_remade_in_a_method_names_the_method_line(run_script):
    res = run_script(REMADE_IN_METHOD)
    assert [(f["code"], f["line"]) for f in res.findings] == [("GT849", 15)], res.err


SYNTH = """
import torch


class Synth:
    def __init__(self, seed_img):
        self.img = seed_img.clone().requires_grad_()
        self.goal = torch.ones_like(seed_img)

    def run(self, n):
        self.opt = torch.optim.Adam([self.img], lr=0.05)
        for _ in range(n):
            self.opt.zero_grad()
            ((self.img - self.goal) ** 2).sum().backward()
            self.opt.step()

    def cast(self, dtype):
        self.img = self.img.detach().to(dtype).requires_grad_()
        self.goal = self.goal.to(dtype)
        return self


s = Synth(torch.zeros(2, 2))
s.run(4)
s.cast(torch.float64)
s.run(4)
"""


def test_optimizer_built_once_over_a_recast_tensor(run_script):
    res = run_script(SYNTH.replace(
        "        self.opt = torch.optim.Adam([self.img], lr=0.05)",
        "        if not hasattr(self, 'opt'):\n            self.opt = torch.optim.Adam([self.img], lr=0.05)"))
    assert [(f["code"], f["line"]) for f in res.findings] == [("GT849", 18)], res.err


def test_optimizer_rebuilt_on_every_run_is_silent(run_script):
    res = run_script(SYNTH)
    assert res.findings == [], res.err


def test_optimizer_re_created_with_the_new_tensor_is_silent(run_script):
    res = run_script(REMADE_IN_SCRIPT.format(make=".requires_grad_()").replace(
        "clone().requires_grad_()",
        "clone().requires_grad_()\n        opt = torch.optim.Adam([w], lr=0.1)"))
    assert res.findings == [], res.err


def test_a_phase_whose_optimizer_stops_stepping_is_silent(run_script):
    res = run_script("""
        import torch
        import torch.nn as nn
        enc, head = nn.Linear(4, 4), nn.Linear(4, 1)
        opt_enc = torch.optim.SGD(enc.parameters(), lr=0.1)
        opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
        x, y = torch.randn(6, 4), torch.randn(6, 1)
        for i in range(8):
            opt_enc.zero_grad()
            opt_head.zero_grad()
            feats = enc(x) if i < 4 else enc(x).detach()
            nn.functional.mse_loss(head(feats), y).backward()
            opt_head.step()
            if i < 4:
                opt_enc.step()
    """)
    assert res.findings == [], res.err


def test_module_to_keeps_the_parameters_and_is_silent(run_script):
    res = run_script("""
        import torch
        import torch.nn as nn
        net = nn.Linear(4, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        net = net.to(torch.float32)
        x, y = torch.randn(6, 4), torch.randn(6, 1)
        for i in range(8):
            opt.zero_grad()
            nn.functional.mse_loss(net(x), y).backward()
            opt.step()
    """)
    assert res.findings == [], res.err


def test_model_re_created_is_left_to_gt821(run_script):
    res = run_script("""
        import torch
        import torch.nn as nn
        def make():
            return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        net = make()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        data = [(torch.randn(6, 4), torch.randn(6, 1)) for _ in range(4)]
        for epoch in range(3):
            if epoch == 1:
                net = make()
            for x, y in data:
                opt.zero_grad()
                nn.functional.mse_loss(net(x), y).backward()
                opt.step()
    """)
    assert [f["code"] for f in res.findings].count("GT849") == 0, res.err
    assert res.findings[0]["line"] == 10, res.err


def test_head_output_thrown_away_without_ddp_is_silent(run_script):
    # the twin of tests/distributed/scripts/spawn_silent.py (declared_unused): no DDP, nothing declared;
    # a head that ran and whose output the program drops (BERT's pooler unpacked into `_`) is
    # never graded by design, no cut (NOTE [never graded by design] in runtime/build.py)
    res = run_script("""
        import torch
        import torch.nn as nn

        class TwoOutputs(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 8)
                self.main_out = nn.Linear(8, 1)
                self.aux_out = nn.Linear(8, 3)

            def forward(self, x):
                h = torch.tanh(self.body(x))
                return self.main_out(h), self.aux_out(h)

        model = TwoOutputs()
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(3):
            pred, _aux = model(torch.randn(8, 4))
            loss = pred.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    """)
    assert res.code == 0 and res.findings == [], res.err
