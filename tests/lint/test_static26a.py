"""static26a (issue 13 parts 2-3): mechanisms from the graph_breaks, grad_mode and leaf misses,
each with a silent look-alike that trains and buggy twins in other spellings (a script, a
function, a method), reported on the line a maintainer changes, run on real torch."""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT307, mechanism: the binding made the name a non-leaf (a leaf's name rebound to a
    # tensor computed from it, a name bound to a helper's result): reported at the binding,
    # where the fix goes; a view under a new name with the leaf's `.grad` read is correct
    "grad-of-name-made-non-leaf-by-its-binding": (Shape("""
        scale = torch.linspace(0.5, 1.5, 6, requires_grad=True)
        grid = scale.reshape(2, 3)
        (grid * torch.randn(2, 3)).sum().backward()
        g = scale.grad
        """, "GT307", holds="g is not None"), [Shape("""
        def probe(n):
            gain = torch.ones(n, requires_grad=True)
            gain = gain * 2.0
            (gain ** 2).sum().backward()
            return gain.grad

        g = probe(3)
        """, "GT307", 3, holds="g is None"), Shape("""
        class Jitter:
            def __init__(self, sigma):
                self.sigma = sigma

            def apply(self, images):
                return images + self.sigma * torch.randn_like(images)

        net = nn.Linear(4, 2)
        base = torch.rand(3, 4, requires_grad=True)
        jitter = Jitter(0.1)
        noisy = jitter.apply(base)
        net(noisy).sum().backward()
        sal = noisy.grad
        """, "GT307", 11, holds="sal is None and base.grad is not None")]),
    # GT116, mechanism: a NumPy ufunc (`np.log`, `np.exp`, `np.sqrt`) converts each tensor
    # operand through `Tensor.__array__`, which refuses one that requires grad; the value is
    # followed through a tuple unpacked from a module of the file, and to a helper's callers
    "numpy-ufunc-of-tensor-requiring-grad": (Shape("""
        import numpy as np

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.mu, self.logvar = nn.Linear(4, 2), nn.Linear(4, 2)

            def forward(self, x):
                return self.mu(x), self.logvar(x)

        def spread(logvar):
            return np.exp(0.5 * logvar.detach()).mean()

        head = Head()
        mu, logvar = head(torch.randn(3, 4))
        s = spread(logvar)
        (mu.pow(2).mean() + logvar.exp().mean()).backward()
        """, "GT116", holds="head.mu.weight.grad is not None"), [Shape("""
        import numpy as np

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.mu, self.logvar = nn.Linear(4, 2), nn.Linear(4, 2)

            def forward(self, x):
                return self.mu(x), self.logvar(x)

        head = Head()
        mu, logvar = head(torch.randn(3, 4))
        std = np.exp(0.5 * logvar)
        """, "GT116", 13, "Can't call numpy()"), Shape("""
        import numpy as np

        def gaussian_nll(x, mean, var):
            return ((x - mean) ** 2 / var).sum() + np.sqrt(var).sum()

        net = nn.Linear(4, 2)
        out = net(torch.randn(3, 4))
        mean, var = out, out.exp()
        nll = gaussian_nll(torch.zeros(3, 2), mean, var)
        """, "GT116", 4, "Can't call numpy()")]),
    # GT302, mechanism: a recurrent layer's Parameter named by a string
    # (`getattr(self.rnn, f"bias_hh_l{i}")`) written in place with grad enabled; the gate
    # words were only in the string, so the function was never read
    "inplace-write-into-getattr-named-rnn-parameter": (Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 8, num_layers=2)
                with torch.no_grad():
                    for i in range(2):
                        getattr(self.rnn, f"bias_hh_l{i}").chunk(4)[1].fill_(1.0)

        enc = Encoder()
        enc.rnn(torch.randn(5, 1, 4))[0].sum().backward()
        """, "GT302", holds="enc.rnn.bias_hh_l0.grad is not None"), [Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 8, num_layers=2)
                self.reset()

            def reset(self):
                for i in range(self.rnn.num_layers):
                    getattr(self.rnn, f"bias_hh_l{i}").chunk(4)[1].fill_(1.0)

        enc = Encoder()
        enc.rnn(torch.randn(5, 1, 4))[0].sum().backward()
        """, "GT302", 9, "is a view and is being modified inplace"), Shape("""
        gru = nn.GRU(4, 8, num_layers=2)
        for k in range(2):
            getattr(gru, f"weight_hh_l{k}")[:8].zero_()
        gru(torch.randn(5, 1, 4))[0].sum().backward()
        """, "GT302", 3, "leaf Variable that requires grad")]),
    # GT109, mechanism: the loss's backward is in one method (`backward_G`) and the optimizer
    # step in the method that calls it (`optimize_parameters`), the pix2pix/CycleGAN layout;
    # the loss's terms are followed through `self.loss_*` attributes of the same method
    "stepped-model-cut-when-a-caller-steps": (Shape("""
        class GAN:
            def __init__(self):
                self.netG, self.netD = nn.Linear(4, 4), nn.Linear(4, 1)
                self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=1e-3)
                self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=1e-3)

            def backward_D(self, z, real):
                fake = self.netG(z)
                loss_D = F.softplus(self.netD(fake.detach())).mean() + F.softplus(-self.netD(real)).mean()
                loss_D.backward()

            def backward_G(self, z, real):
                self.fake = self.netG(z)
                self.loss_G = F.softplus(-self.netD(self.fake)).mean() + F.l1_loss(self.fake, real)
                self.loss_G.backward()

            def optimize_parameters(self, z, real):
                self.optimizer_D.zero_grad()
                self.backward_D(z, real)
                self.optimizer_D.step()
                self.optimizer_G.zero_grad()
                self.backward_G(z, real)
                self.optimizer_G.step()

        gan = GAN()
        gan.optimize_parameters(torch.randn(2, 4), torch.randn(2, 4))
        """, "GT109", holds="gan.netG.weight.grad is not None"), [Shape("""
        class Pix2Pix:
            def __init__(self):
                self.netG, self.netD = nn.Linear(4, 4), nn.Linear(4, 1)
                self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=1e-3)

            def backward_G(self, z, real):
                self.fake = self.netG(z)
                self.loss_G_GAN = F.softplus(-self.netD(self.fake.detach())).mean()
                self.loss_G_L1 = F.l1_loss(self.fake, real)
                self.loss_G = self.loss_G_GAN + 10.0 * self.loss_G_L1
                self.loss_G.backward()

            def optimize_parameters(self, z, real):
                self.optimizer_G.zero_grad()
                self.backward_G(z, real)
                self.optimizer_G.step()

        model = Pix2Pix()
        model.optimize_parameters(torch.randn(2, 4), torch.randn(2, 4))
        """, "GT109", 8, holds="torch.autograd.grad(model.loss_G_GAN, model.netG.weight, "
                               "allow_unused=True)[0] is None"), Shape("""
        class Adapter:
            def __init__(self):
                self.encoder, self.head = nn.Linear(4, 4), nn.Linear(4, 2)
                self.opt = torch.optim.SGD(self.encoder.parameters(), lr=0.1)

            def compute(self, x, y):
                feats = self.encoder(x)
                self.ce = F.cross_entropy(self.head(feats.detach()), y)
                loss = self.ce + feats.pow(2).mean()
                loss.backward()
                return loss

            def train_step(self, x, y):
                self.opt.zero_grad()
                self.compute(x, y)
                self.opt.step()

        a = Adapter()
        a.train_step(torch.randn(3, 4), torch.tensor([0, 1, 1]))
        """, "GT109", 8, holds="torch.autograd.grad(a.ce, a.encoder.weight, "
                               "allow_unused=True)[0] is None")]),
    # GT117, mechanism: a module's Parameter is read only as the argument of a call that
    # computes everything it returns with grad off (a constraint submodule's `forward` under
    # `torch.no_grad()`, a `@torch.no_grad()` method): it never gets a gradient
    "parameter-read-only-through-grad-off-call": (Shape("""
        class Bounded(nn.Module):
            def __init__(self):
                super().__init__()
                self.log_scale = nn.Parameter(torch.zeros(4))
                self.lin = nn.Linear(4, 4)

            @torch.no_grad()
            def project_(self):
                self.log_scale.clamp_(-3.0, 3.0)

            def forward(self, x):
                return self.lin(x) * self.log_scale.clamp(-3.0, 3.0).exp()

        net = Bounded()
        net(torch.randn(2, 4)).sum().backward()
        net.project_()
        """, "GT117", holds="net.log_scale.grad is not None"), [Shape("""
        class Limit(nn.Module):
            def __init__(self, lo, hi):
                super().__init__()
                self.lo, self.hi = lo, hi

            def forward(self, w):
                with torch.no_grad():
                    return torch.clamp(w, self.lo, self.hi)

        class Filterbank(nn.Module):
            def __init__(self):
                super().__init__()
                self.centers = nn.Parameter(torch.linspace(0.1, 2.0, 4))
                self.limit = Limit(0.0, 3.0)
                self.proj = nn.Linear(4, 4)

            def forward(self, x):
                return self.proj(x) * torch.cos(self.limit(self.centers))

        fb = Filterbank()
        fb(torch.randn(2, 4)).sum().backward()
        """, "GT117", 7, holds="fb.centers.grad is None and fb.proj.weight.grad is not None"),
        Shape("""
        class Scaler(nn.Module):
            def __init__(self):
                super().__init__()
                self.log_scale = nn.Parameter(torch.zeros(4))
                self.lin = nn.Linear(4, 4)

            @torch.no_grad()
            def bounded(self, v):
                return v.clamp(-3.0, 3.0).exp()

            def forward(self, x):
                return self.lin(x) * self.bounded(self.log_scale)

        net = Scaler()
        net(torch.randn(2, 4)).sum().backward()
        """, "GT117", 7, holds="net.log_scale.grad is None and net.lin.weight.grad is not None")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == ([] if bad.line is None else [(bad.line, bad.code)]), bad.src
        _run(bad)
