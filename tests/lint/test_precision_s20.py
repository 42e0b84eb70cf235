"""Shapes that fired wrongly on the projects of docs/triage/unseen20.md (session 20), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import copy
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # BigVGAN (alias_free_activation/cuda/activation1d.py): the fused kernel's `backward`
    # opens with `raise NotImplementedError` (inference only); the `return` of 3 gradients
    # after it never runs. Here a message on the raise and other inputs. Twin: the raise is
    # conditional, so the short return runs: backward raises the count error
    "backward-that-raises-before-a-short-return": (Shape("""
        class FusedAct(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, up, down, alpha, beta):
                return torch.sin(alpha * x) ** 2 / beta + x
            @staticmethod
            def backward(ctx, grad_out):
                raise NotImplementedError("inference kernel")
                return grad_out, None
        alpha = torch.ones(3)
        with torch.no_grad():
            y = FusedAct.apply(torch.randn(3), None, None, alpha, alpha)
        """, "GT701", holds="y.shape == (3,)"), Shape("""
        class FusedAct(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, up, down, alpha, beta):
                return x * 2
            @staticmethod
            def backward(ctx, grad_out):
                if ctx.needs_input_grad[3]:
                    raise NotImplementedError("alpha is frozen here")
                return grad_out * 2, None, None
        x = torch.randn(3, requires_grad=True)
        FusedAct.apply(x, None, None, torch.ones(3), torch.ones(3)).sum().backward()
        """, "GT701", line=9, raises=(RuntimeError, "incorrect number of gradients"))),
    # tab-ddpm (CTAB-GAN-Plus ctabgan_synthesizer.py): `layers_D =
    # determine_layers_disc(...)` before the loop returns a list of new `Conv2d`/`LayerNorm`
    # layers that `Discriminator(side, layers_D)` is built from, and the loss comes from a
    # helper handed that model: no graph. Here a list extended with `+=` in a function.
    # Twin: the helper returns the outputs of a layer, reused every pass: the second
    # backward raises
    "layers-returned-by-a-helper-before-the-loop": (Shape("""
        def critic_layers(width):
            layers = [nn.Linear(width, width), nn.Tanh()]
            layers += [nn.Linear(width, 1)]
            return layers
        class Critic(nn.Module):
            def __init__(self, layers):
                super().__init__()
                self.body = nn.Sequential(*layers)
            def forward(self, x):
                return self.body(x)
        def energy(net, x):
            return net(x).pow(2).mean()
        def fit(width):
            layers_c = critic_layers(width)
            critic = Critic(layers_c)
            opt = torch.optim.SGD(critic.parameters(), lr=0.1)
            for step in range(3):
                opt.zero_grad()
                loss = energy(critic, torch.randn(5, width))
                loss.backward()
                opt.step()
            return loss.item()
        last = fit(4)
        """, "GT507", holds="last >= 0.0"), Shape("""
        enc = nn.Linear(4, 4)
        def critic_layers(x):
            return [torch.tanh(enc(x)), torch.tanh(enc(2 * x))]
        def fit(x):
            head = nn.Linear(4, 1)
            opt = torch.optim.SGD(head.parameters(), lr=0.1)
            layers_c = critic_layers(x)
            for step in range(3):
                opt.zero_grad()
                loss = sum(head(h).pow(2).mean() for h in layers_c)
                loss.backward()
                opt.step()
        fit(torch.randn(5, 4))
        """, "GT507", line=7, raises=(RuntimeError, "backward through the graph a second"))),
    # tab-ddpm (CTAB-GAN-Plus `calc_gradient_penalty_slerp`): the fake batch is mixed into
    # `interpolates`, rebound twice, then wrapped in `Variable(interpolates,
    # requires_grad=True)`: a new leaf, so the penalty's backward never reaches the
    # generator's graph that `d_fake.backward()` freed. Here `mix`, a `.view` rebinding.
    # Twin: the helper also adds the raw mix to what it returns: the penalty's backward
    # reaches the freed generator graph and raises
    "penalty-mix-rebound-then-wrapped-in-a-new-leaf": (Shape("""
        G = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 4))
        D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
        def penalty(netD, real, fake):
            w = torch.rand(real.shape[0], 1)
            mix = real * (1 - w) + fake * w
            mix = mix.view(real.shape[0], -1)
            mix = torch.autograd.Variable(mix, requires_grad=True)
            out = netD(mix)
            g = torch.autograd.grad(out, mix, torch.ones_like(out), create_graph=True)[0]
            return ((g.norm(2, dim=1) - 1) ** 2).mean()
        for step in range(2):
            real = torch.randn(8, 4)
            fake = G(torch.randn(8, 2))
            opt_d.zero_grad()
            d_fake = D(fake).mean()
            d_fake.backward()
            pen = penalty(D, real, fake)
            pen.backward()
            opt_d.step()
        """, "GT509", holds="pen.item() >= 0.0"), Shape("""
        G = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 4))
        D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
        def penalty(netD, real, fake):
            w = torch.rand(real.shape[0], 1)
            mix = real * (1 - w) + fake * w
            raw = mix
            mix = torch.autograd.Variable(mix, requires_grad=True)
            out = netD(mix)
            g = torch.autograd.grad(out, mix, torch.ones_like(out), create_graph=True)[0]
            return ((g.norm(2, dim=1) - 1) ** 2).mean() + 0.0 * raw.mean()
        for step in range(2):
            real = torch.randn(8, 4)
            fake = G(torch.randn(8, 2))
            opt_d.zero_grad()
            d_fake = D(fake).mean()
            d_fake.backward()
            pen = penalty(D, real, fake)
            pen.backward()
            opt_d.step()
        """, "GT509", line=17, raises=(RuntimeError, "backward through the graph a second"))),
    # tab-ddpm (CTAB-GAN ctabgan_synthesizer.py): after `g.backward(retain_graph=True)` and
    # `optimizerG.step()`, `loss_cc` from `classifier(real)` is backwarded; the classifier is
    # `Classifier(..., st_ed).to(device)` with `st_ed` from a config argument, `real` comes
    # through `torch.from_numpy`: no stepped parameter is in its graph. Here a probe built
    # from a settings dict, rows from a NumPy argument. Twin: the probe reads the
    # generator's output made before the step: the probe's backward raises
    "probe-of-this-file-built-from-settings-after-the-generator-step": (Shape("""
        class Probe(nn.Module):
            def __init__(self, dim, cols):
                super().__init__()
                self.cols = cols
                self.net = nn.Sequential(nn.Linear(dim - 1, 8), nn.Tanh(), nn.Linear(8, 2))
            def forward(self, x):
                return self.net(x[:, :-1]), (x[:, -1] > 0).long()
        def fit(settings, rows):
            G = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 4))
            opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
            probe = Probe(4, settings["cols"]).to("cpu")
            opt_p = torch.optim.Adam(probe.parameters(), lr=1e-3)
            ce = nn.CrossEntropyLoss()
            for step in range(2):
                real = torch.from_numpy(rows[step])
                z = torch.randn(8, 2)
                g = G(z).pow(2).mean()
                g.backward(retain_graph=True)
                real_pre, real_lab = probe(real)
                fake_pre, fake_lab = probe(torch.tanh(G(z)))
                loss_real = ce(real_pre, real_lab)
                loss_fake = ce(fake_pre, fake_lab)
                opt_g.zero_grad()
                loss_fake.backward()
                opt_g.step()
                opt_p.zero_grad()
                loss_real.backward()
                opt_p.step()
            return loss_real.item()
        last = fit({"cols": 3}, [np.random.randn(8, 4).astype("float32") for _ in range(2)])
        """, "GT601", holds="last > 0.0"), Shape("""
        class Probe(nn.Module):
            def __init__(self, dim, cols):
                super().__init__()
                self.cols = cols
                self.net = nn.Sequential(nn.Linear(dim - 1, 8), nn.Tanh(), nn.Linear(8, 2))
            def forward(self, x):
                return self.net(x[:, :-1]), (x[:, -1] > 0).long()
        def fit(settings, rows):
            G = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 4))
            opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
            probe = Probe(4, settings["cols"]).to("cpu")
            opt_p = torch.optim.Adam(probe.parameters(), lr=1e-3)
            ce = nn.CrossEntropyLoss()
            for step in range(2):
                real = torch.from_numpy(rows[step])
                z = torch.randn(8, 2)
                g = G(z).pow(2).mean()
                g.backward(retain_graph=True)
                real_pre, real_lab = probe(real + G(z))
                fake_pre, fake_lab = probe(torch.tanh(G(z)))
                loss_real = ce(real_pre, real_lab)
                loss_fake = ce(fake_pre, fake_lab)
                opt_g.zero_grad()
                loss_fake.backward()
                opt_g.step()
                opt_p.zero_grad()
                loss_real.backward()
                opt_p.step()
        fit({"cols": 3}, [np.random.randn(8, 4).astype("float32") for _ in range(2)])
        """, "GT601", line=25, raises=(RuntimeError, "modified by an inplace operation"))),
    # Deformable-DETR (models/deformable_detr.py): without box refinement the class and box
    # heads are shared by every decoder layer (`nn.ModuleList([self.class_embed for _ in
    # range(num_pred)])`), with it they are cloned by `_get_clones` (deepcopy) in the other
    # arm: the sharing is chosen. Here `copy.deepcopy` in a helper and a flag argument.
    # Twin: the cloning helper repeats the module it is given: one layer's parameters
    "module-shared-in-one-arm-cloned-in-the-other": (Shape("""
        def clones(m, n):
            return nn.ModuleList([copy.deepcopy(m) for _ in range(n)])
        class Heads(nn.Module):
            def __init__(self, n, refine):
                super().__init__()
                self.cls = nn.Linear(4, 3)
                if refine:
                    self.cls = clones(self.cls, n)
                else:
                    self.cls = nn.ModuleList([self.cls for _ in range(n)])
            def forward(self, hs):
                return torch.stack([h(x) for h, x in zip(self.cls, hs)])
        m = Heads(3, refine=False)
        out = m([torch.randn(2, 4) for _ in range(3)])
        """, "GT446", holds="out.shape == (3, 2, 3) and len(list(m.parameters())) == 2"),
        Shape("""
        def clones(m, n):
            return nn.ModuleList([m for _ in range(n)])
        class Heads(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.cls = nn.Linear(4, 3)
                self.cls = clones(self.cls, n)
        m = Heads(3)
        """, "GT446", line=2, holds="len(list(m.cls.parameters())) == 2")),
    # Comprehensive-Transformer-TTS (model/modules.py): `self.gru_hidden = torch.zeros((B,
    # 2 * d_model), requires_grad=True)` in `init_state(x)`, with `B, _, d_model = x.shape`:
    # the initial hidden state of this call, sized by its batch, not a weight. Here
    # `x.size(0)` inline. Twin: a weight made lazily in such a method from the input's
    # feature size (`x.size(1)`): `parameters()` misses it
    "input-sized-state-made-on-each-call": (Shape("""
        class Decoder(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.d = d
                self.cell = nn.GRUCell(d, d)
            def init_state(self, x):
                self.h = torch.zeros(x.size(0), self.d, requires_grad=True)
            def forward(self, x):
                self.init_state(x)
                for t in range(x.shape[1]):
                    self.h = self.cell(x[:, t], self.h)
                return self.h
        dec = Decoder(3)
        out = dec(torch.randn(2, 5, 3))
        """, "GT402", holds="out.shape == (2, 3) and len(list(dec.parameters())) == 4"),
        Shape("""
        class Lazy(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = None
            def build(self, x):
                self.w = torch.randn(x.size(1), 2, requires_grad=True)
            def forward(self, x):
                if self.w is None:
                    self.build(x)
                return x @ self.w
        m = Lazy()
        out = m(torch.randn(4, 3))
        """, "GT402", line=6, holds="out.shape == (4, 2) and len(list(m.parameters())) == 0")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
