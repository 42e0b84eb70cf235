"""Session 50, helper recall50a: loss terms read through a reduction at the backward (NOTE [a
reduction keeps the terms]), a loss helper's returned term turned into a number when a caller
backpropagates it (NOTE [backpropagated across files]), and an unpacked element made a number
(NOTE [unpacked cut element]). Each shape: a buggy twin with its code and lines, silent
look-alikes."""
from __future__ import annotations

import os
import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# a model returns its loss terms; the step sums them and reduces the sum at the backward
TERMS = '''
import torch
import torch.nn as nn


class Coder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 4)
        self.dec = nn.Linear(4, 8)

    def forward(self, x):
        z = self.enc(x)
        rec = ((self.dec(z) - x) ** 2).sum(1)
        return z, (z ** 2).sum(1), rec


def fit(model, opt, batches):
    for x in batches:
        z, kld, rec = model(x)
        loss = {loss}
        opt.zero_grad()
        {reduced}.backward()
        opt.step()
'''


def _terms(loss: str = "kld + rec.detach()", reduced: str = "loss.mean()") -> list[int]:
    return _found(TERMS.format(loss=loss, reduced=reduced), "GT107")


def test_detached_term_of_a_sum_reduced_by_mean():
    assert _terms() == [21]


def test_detached_term_of_a_sum_reduced_by_torch_sum():
    assert _terms(reduced="torch.sum(loss, dim=0)") == [21]


def test_detached_term_in_a_script_reduced_at_the_backward():
    script = TERMS.split("def fit")[0] + textwrap.dedent('''
        model = Coder()
        opt = torch.optim.Adam(model.parameters())
        for x in [torch.randn(2, 8)]:
            z, kld, rec = model(x)
            loss = kld + rec.detach()
            opt.zero_grad()
            loss.sum().backward()
            opt.step()
        ''')
    assert _found(script, "GT107") == [23]


def test_look_alike_every_term_live():
    assert _terms(loss="kld + rec") == []


def test_look_alike_detached_factor_weighs_a_live_term():
    assert _terms(loss="kld * rec.detach()") == []


def test_look_alike_detached_copy_of_a_live_term():
    assert _terms(loss="rec + kld - kld.detach()") == []


def test_look_alike_reduction_not_at_the_backward():
    assert _terms(reduced="loss.max()", loss="kld + rec") == []


# a loss helper returns its terms summed; one of them made a Python number on the way
HELPER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def smooth(flow):
    return (flow[:, 1:] - flow[:, :-1]).abs().mean()


def warp_loss(moved, fixed, flow, lam=0.1):
    return F.mse_loss(moved, fixed) + lam * {reg}


net = nn.Linear(8, 8)
opt = torch.optim.Adam(net.parameters())
for x in [torch.randn(2, 8)]:
    flow = net(x)
    moved = x + flow
    {use}
'''

BACKWARD = "loss = warp_loss(moved, x, flow)\n    opt.zero_grad()\n    loss.backward()"


def _helper(reg: str = "smooth(flow).item()", use: str = BACKWARD) -> list[int]:
    return _found(HELPER.format(reg=reg, use=use), "GT102")


def test_number_term_of_a_backpropagated_helper():
    assert _helper() == [12]


def test_look_alike_helper_term_live():
    assert _helper(reg="smooth(flow)") == []


def test_look_alike_helper_value_only_printed():
    assert _helper(use="print(warp_loss(moved, x, flow))") == []


def test_look_alike_helper_value_only_logged_beside_a_backward():
    use = ("score = warp_loss(moved, x, flow)\n    print(score)\n"
           "    (flow ** 2).mean().backward()")
    assert _helper(use=use) == []


# the helper in one file, the training script in another (NOTE [reverse index])
LOSSES = '''
import torch.nn.functional as F


def smooth(flow):
    return (flow[:, 1:] - flow[:, :-1]).abs().mean()


def warp_loss(moved, fixed, flow, lam=0.01):
    return F.mse_loss(moved, fixed) + lam * smooth(flow){cut}
'''

TRAIN = '''
import torch
import torch.nn as nn
from losses import warp_loss

net = nn.Linear(8, 8)
opt = torch.optim.Adam(net.parameters())
for x in [torch.randn(2, 8)]:
    flow = net(x)
    loss = warp_loss(x + flow, x, flow)
    {run}
'''


def _project(tmp_path, cut: str = ".item()", run: str = "loss.backward()") -> list[int]:
    from gradtrace.lint import check_paths
    (tmp_path / "losses.py").write_text(LOSSES.format(cut=cut))
    (tmp_path / "train.py").write_text(TRAIN.format(run=run))
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        found = check_paths(["losses.py"]).findings
    finally:
        os.chdir(here)
    return sorted(f.line for f in found if f.code == "GT102")


def test_number_term_of_a_helper_backpropagated_in_another_file(tmp_path):
    assert _project(tmp_path) == [10]


def test_abroad_look_alike_helper_value_only_printed(tmp_path):
    assert _project(tmp_path, run="print(loss.item())") == []


def test_abroad_look_alike_term_live(tmp_path):
    assert _project(tmp_path, cut="") == []


# a helper returns its terms as a tuple; the step sums the unpacked elements
PAIR = '''
import torch.nn.functional as F


def terms(out, y, flow):
    sim = F.mse_loss(out, y)
    reg = flow.abs().mean()
    return sim, {second}


def step(net, opt, x, y):
    flow = net(x)
    sim, reg = terms(x + flow, y, flow)
    loss = {loss}
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def _pair(second: str = "reg.item()", loss: str = "sim + reg") -> list[int]:
    return _found(PAIR.format(second=second, loss=loss), "GT102")


def test_unpacked_element_made_a_number_summed_into_the_loss():
    assert _pair() == [8]


def test_look_alike_unpacked_number_only_logged():
    assert _pair(loss="sim") == []


def test_look_alike_unpacked_element_live():
    assert _pair(second="reg") == []


def test_look_alike_unpacked_element_a_count():
    assert _pair(second="len(y)", loss="sim + 0.0 * reg") == []


def test_look_alike_whole_loss_an_unpacked_number_is_gt101s():
    src = PAIR.format(second="reg", loss="sim").replace("return sim, reg", "return sim.item(), reg")
    assert _found(src, "GT102") == []  # a number has no `.backward()` at all: not a cut term
    direct = src.replace("loss.backward()", "sim.backward()")
    found = check_source(textwrap.dedent(direct))
    assert [(f.code, f.line) for f in found if f.code in ("GT101", "GT102")] == [("GT101", 13)]
