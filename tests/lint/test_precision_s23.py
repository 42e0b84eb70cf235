"""Shapes that fired wrongly on the projects of docs/triage/unseen23.md (session 23), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch; a class "of another file" is a stand-in module put in
`sys.modules` (the checker only reads the import, as for the TensorFlow of unseen22's GT505
pair)."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import sys
import types
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
_other = types.ModuleType("other_file")
exec("""
import torch.nn as nn
class denoiserNet(nn.Sequential):
    def __init__(self, width):
        super().__init__(nn.Linear(width, 16), nn.Tanh(), nn.Linear(16, width))
class Wrapper(nn.Module):
    def __init__(self, scale, net):
        super().__init__()
        self.scale, self.net = scale, net
    def forward(self, x):
        return self.net(x * self.scale)
def denoise_loss(x, trainer):
    return (trainer(x) - x).pow(2).mean()
""", _other.__dict__)
sys.modules["other_file"] = _other
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # tabsyn (baselines/codi/main.py): `model_con = tabularUnet(args)`, a module class of another
    # file spelled in lower case, then `model_con.parameters()` and `model_con.train()`: a
    # model, not an output with a graph. Twin: a probe on features the module computed once
    "module-built-by-a-lower-case-class-of-another-file": (Shape("""
        from other_file import denoiserNet, Wrapper, denoise_loss
        def fit(width, batches):
            net_a = denoiserNet(width)
            opt_a = torch.optim.Adam(net_a.parameters(), lr=1e-3)
            trainer = Wrapper(2.0, net_a)
            for x in batches:
                net_a.train()
                loss = denoise_loss(x, trainer)
                opt_a.zero_grad()
                loss.backward()
                opt_a.step()
            return loss.item()
        last = fit(3, [torch.randn(4, 3) for _ in range(3)])
        """, "GT507", holds="last >= 0"), Shape("""
        from other_file import denoiserNet
        def probe(x, head, steps):
            feats = denoiserNet(3)(x)
            opt = torch.optim.Adam(head.parameters(), lr=1e-3)
            for _ in range(steps):
                loss = head(feats).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        probe(torch.randn(4, 3), nn.Linear(3, 1), 2)
        """, "GT507", line=3, raises=(RuntimeError, "backward through the graph a second time"))),
    # tabsyn (codi/main.py): `clip_grad_norm_(trainer_dis.parameters())` where `trainer_dis =
    # MultinomialDiffusion(..., model_dis, ...)` holds `model_dis`, the module `optim_dis`
    # steps: the clip covers it. Twin: the wrapper is built around another module
    "clip-of-a-wrapper-built-around-the-stepped-module": (Shape("""
        from other_file import Wrapper
        def fit(batches, net):
            opt = torch.optim.SGD(net.parameters(), lr=0.0)
            wrapped = Wrapper(3.0, net).to("cpu")
            for x in batches:
                loss = wrapped(x).pow(2).sum() * 100
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(wrapped.parameters(), 1.0)
                opt.step()
        net = nn.Linear(3, 1)
        fit([torch.randn(4, 3)], net)
        norm = torch.cat([p.grad.flatten() for p in net.parameters()]).norm()
        """, "GT549", holds="norm <= 1.0 + 1e-5"), Shape("""
        from other_file import Wrapper
        def fit(batches, net, other):
            opt = torch.optim.SGD(net.parameters(), lr=0.0)
            wrapped = Wrapper(3.0, other).to("cpu")
            for x in batches:
                loss = (wrapped(x).pow(2).sum() + net(x).pow(2).sum()) * 100
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(wrapped.parameters(), 1.0)
                opt.step()
        net = nn.Linear(3, 1)
        fit([torch.randn(4, 3)], net, nn.Linear(3, 1))
        norm = torch.cat([p.grad.flatten() for p in net.parameters()]).norm()
        """, "GT549", line=9, holds="norm > 1.0")),
    # tabsyn (baselines/goggle/GoggleModel.py): two optimizers over parts of one model,
    # alternating passes, `loss.backward(retain_graph=True)` then a step, and each pass runs
    # `self.model(data, epoch)` afresh: `epoch`, the outer loop's counter, is no part of a
    # kept graph. Twin: the second loss reads the output computed before the first step
    "alternating-steps-each-pass-a-fresh-graph": (Shape("""
        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(3, 3)
                self.gate = nn.Parameter(torch.zeros(3))
            def forward(self, x, it):
                g = torch.sigmoid(self.gate)
                return self.body(x) * (g if it < 1 else g.clamp(min=0.1))
        class Fit:
            def __init__(self, model, epochs):
                self.model = model
                self.epochs = epochs
                body = list(filter(lambda kv: kv[0] != "gate", self.model.named_parameters()))
                gate = list(filter(lambda kv: kv[0] == "gate", self.model.named_parameters()))
                self.opt_body = torch.optim.Adam([kv[1] for kv in body], lr=1e-2)
                self.opt_gate = torch.optim.Adam([kv[1] for kv in gate], lr=1e-2)
            def run(self, batches):
                for epoch in range(self.epochs):
                    for i, x in enumerate(batches):
                        if i % 2 == 0:
                            self.opt_body.zero_grad()
                            loss = self.model(x, epoch).pow(2).mean()
                            loss.backward(retain_graph=True)
                            self.opt_body.step()
                        else:
                            self.opt_gate.zero_grad()
                            loss = self.model(x, epoch).pow(2).mean()
                            loss.backward(retain_graph=True)
                            self.opt_gate.step()
                return loss.item()
        last = Fit(Gated(), 2).run([torch.randn(4, 3) for _ in range(4)])
        """, "GT601", holds="last >= 0"), Shape("""
        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3))
                self.gate = nn.Parameter(torch.zeros(3))
            def forward(self, x, it):
                return self.body(x) * torch.sigmoid(self.gate)
        class Fit:
            def __init__(self, model, epochs):
                self.model = model
                self.epochs = epochs
                body = list(filter(lambda kv: kv[0] != "gate", self.model.named_parameters()))
                self.opt_body = torch.optim.Adam([kv[1] for kv in body], lr=1e-2)
            def run(self, batches):
                for epoch in range(self.epochs):
                    for i, x in enumerate(batches):
                        self.opt_body.zero_grad()
                        out = self.model(x, epoch)
                        loss = out.pow(2).mean()
                        loss.backward(retain_graph=True)
                        self.opt_body.step()
                        again = out.abs().mean()
                        again.backward()
        Fit(Gated(), 1).run([torch.randn(4, 3)])
        """, "GT601", line=22, raises=(RuntimeError, "modified by an inplace operation"))),
    # latent-diffusion's sampler, copied into rcg (ddpm.py `p_sample`): under
    # `@torch.no_grad()`, `noise = F.dropout(noise, p=noise_dropout)`: a sampling knob that
    # runs in eval mode by design. Twin: the same dropout in `forward`, evaluation is random
    "noise-dropout-in-a-no-grad-sampler": (Shape("""
        class Sampler(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(8, 8)
            def forward(self, x):
                return self.net(x)
            @torch.inference_mode()
            def step(self, x, temperature=1.0, drop=0.0):
                noise = torch.randn_like(x) * temperature
                if drop > 0.0:
                    noise = F.dropout(noise, drop)
                return self.net(x) + noise
        model = Sampler()
        model.eval()
        x = torch.zeros(64, 8)
        zeros = (model.step(x, drop=0.5) == model.net(x)).float().mean().item()
        """, "GT548", holds="0.3 < zeros < 0.7"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(8, 8)
            def forward(self, x, drop=0.5):
                return self.net(F.dropout(x, drop))
        model = Head()
        model.eval()
        x = torch.randn(4, 8)
        a, b = model(x), model(x)
        """, "GT548", line=6, holds="not torch.equal(a, b)")),
    # SEDD (graph_lib.py) and mdlm (diffusion.py): `where(sigma < 0.5, expm1(sigma),
    # exp(sigma) - 1)` picks the precise spelling of e**x - 1 for small inputs; the kept branch
    # overflows at the same inputs, so nothing is guarded. Twin: the kept branch is linear
    "expm1-or-exp-minus-one": (Shape("""
        def ratio(sigma):
            em1 = torch.where(sigma < 0.5, torch.expm1(sigma), sigma.exp() - 1)
            return 1.0 / (em1 + 3.0)
        s = torch.tensor([1e-4, 0.3, 2.0, 8.0], requires_grad=True)
        ratio(s).sum().backward()
        """, "GT751", holds="torch.isfinite(s.grad).all()"), Shape("""
        def soft(sigma):
            return torch.where(sigma < 0.5, torch.expm1(sigma), sigma - 0.5 + 0.6487)
        s = torch.tensor([0.3, 2.0, 100.0], requires_grad=True)
        soft(s).sum().backward()
        """, "GT751", line=2, holds="torch.isnan(s.grad[2])")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# BAdam (src/badam/block_optim.py): a no-decay name test inside a `while` loop crashed GT463
# (`While` has no loop target); the same groups with a `for` loop are still judged
NO_DECAY_IN_A_WHILE = '''
import torch
def groups(model, retry):
    no_decay = ["bias", "norm.weight"]
    while retry:
        params = [{"params": [p for n, p in model.named_parameters()
                              if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
        retry = False
    return torch.optim.AdamW(params, lr=1e-3)
'''


def test_no_decay_names_in_a_while_loop_do_not_crash() -> None:
    from gradtrace.lint import check_source
    found = check_source(NO_DECAY_IN_A_WHILE, "shape.py")
    assert [f.code for f in found if f.code == "GT002"] == []
    compile(NO_DECAY_IN_A_WHILE, "shape.py", "exec")
