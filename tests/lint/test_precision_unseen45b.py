"""Shapes from the projects of docs/triage/unseen45b.md (session 45), each in another spelling
than the project's and next to a buggy twin that is still reported; all run on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # KingshukChatterjee007/Dynamic-Gradient-Balancing-PINNs (pinn_engine/sampling.py): the
    # sampler scores candidate points by a gradient under `no_grad`, inside an inner
    # `enable_grad` block: grad is on where the helper runs (NOTE [grad turned back on
    # inside]). Twin: the helper called after the inner block, grad off again: raises
    "helper-in-an-inner-enable-grad-block": (Shape("""
        def energy(net, x):
            x = x.clone().detach().requires_grad_(True)
            u = net(x)
            du = torch.autograd.grad(u.sum(), x)[0]
            return (du ** 2).detach()
        net = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
        with torch.no_grad():
            with torch.enable_grad():
                e = energy(net, torch.rand(16, 1))
            picked = torch.multinomial(e.flatten() + 1e-6, 4)
        """, "GT210", holds="picked.shape == (4,)"),
        Shape("""
        def energy(net, x):
            x = x.clone().detach().requires_grad_(True)
            u = net(x)
            du = torch.autograd.grad(u.sum(), x)[0]
            return (du ** 2).detach()
        net = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
        with torch.no_grad():
            with torch.enable_grad():
                warm = net(torch.rand(2, 1))
            e = energy(net, torch.rand(16, 1))
        """, "GT210", line=7, raises=(RuntimeError, "does not require grad"))),
    # reward666/diffusion-trajectory-prediction (train_learned_scorer.py): `run_epoch(model,
    # val)` under `no_grad`; the helper runs its forward and backward in `with
    # torch.set_grad_enabled(is_training):`, `is_training = optimizer is not None`: it chooses
    # its own mode. Twin: a helper with no mode of its own, handed the optimizer under
    # `no_grad` (its backward raises)
    "helper-choosing-its-own-grad-mode": (Shape("""
        def run_epoch(net, batches, optimizer=None):
            is_training = optimizer is not None
            losses = []
            for x, y in batches:
                with torch.set_grad_enabled(is_training):
                    loss = F.mse_loss(net(x), y)
                    if is_training:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                losses.append(float(loss))
            return losses
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
        run_epoch(net, data, opt)
        with torch.no_grad():
            val = run_epoch(net, data)
        """, "GT210", holds="len(val) == 3"),
        Shape("""
        def run_epoch(net, batches, optimizer=None):
            losses = []
            for x, y in batches:
                loss = F.mse_loss(net(x), y)
                if optimizer is not None:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                losses.append(float(loss))
            return losses
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
        with torch.no_grad():
            run_epoch(net, data, opt)
        """, "GT210", line=14, raises=(RuntimeError, "does not require grad"))),
    # SarahAlkhateeb/Image-Captioning-with-Different-Decoders (models/attention.py):
    # `pack_padded_sequence(scores, lengths, batch_first=True).data` is the PackedSequence's
    # field, the packed scores with their history, not `Tensor.data`. Twin: `scores.data`
    # taken before packing: the loss has no path to the decoder
    "packed-sequence-data-read-in-place": (Shape("""
        dec = nn.Linear(4, 5)
        scores = dec(torch.randn(2, 3, 4))
        caps = torch.randint(0, 5, (2, 3))
        lengths = [3, 2]
        scores = pack_padded_sequence(scores, lengths, batch_first=True).data
        targets = pack_padded_sequence(caps, lengths, batch_first=True).data
        loss = F.cross_entropy(scores, targets)
        loss.backward()
        """, "GT105", holds="dec.weight.grad is not None"),
        Shape("""
        dec = nn.Linear(4, 5)
        scores = dec(torch.randn(2, 3, 4))
        caps = torch.randint(0, 5, (2, 3))
        lengths = [3, 2]
        scores = scores.data
        scores = pack_padded_sequence(scores, lengths, batch_first=True).data
        targets = pack_padded_sequence(caps, lengths, batch_first=True).data
        loss = F.cross_entropy(scores, targets)
        loss.backward()
        """, "GT105", line=5, raises=(RuntimeError, "does not require grad"))),
    # LeoXinhaoLee/Imbalanced-Source-free-Domain-Adaptation (image_target_multi_lb_2.py):
    # the logits are gathered under `no_grad`, the softmax and its log taken after the block
    # for the entropy of the pseudo-labels: nothing differentiates it (NOTE [logits gathered
    # without grad]). Twin: the entropy of logits computed with grad, backwarded: NaN rows
    "log-of-softmax-of-logits-gathered-without-grad": (Shape("""
        def obtain_entropy(batches, net):
            start = True
            with torch.no_grad():
                for x in batches:
                    out = net(x)
                    if start:
                        all_output = out.float().cpu()
                        start = False
                    else:
                        all_output = torch.cat((all_output, out.float().cpu()), 0)
            all_output = nn.Softmax(dim=1)(all_output)
            return torch.sum(-all_output * torch.log(all_output + 1e-5), dim=1), \\
                torch.log(all_output.float()).numpy()
        def train(net, batches, opt):
            for epoch in range(2):
                ent, logp = obtain_entropy(batches, net)
                for x in batches:
                    loss = net(x).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            return ent
        net = nn.Linear(2, 3)
        ent = train(net, [torch.randn(4, 2) for _ in range(2)],
                    torch.optim.SGD(net.parameters(), lr=0.01))
        """, "GT755", holds="ent.shape == (8,) and not ent.requires_grad"),
        Shape("""
        def train(net, batches, opt):
            for x in batches:
                probs = nn.Softmax(dim=1)(net(x))
                loss = -(probs * torch.log(probs)).sum(1).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        net = nn.Linear(2, 3)
        with torch.no_grad():
            net.weight.copy_(torch.tensor([[200.0, 0.0], [0.0, 0.0], [-200.0, 0.0]]))
        train(net, [torch.ones(4, 2)], torch.optim.SGD(net.parameters(), lr=0.0))
        """, "GT755", line=4, holds="torch.isnan(net.weight.grad).any()")),
    # Osrip/deep_learn_rain_nowcasting (examine_x_entropy_loss notebook): a NumPy
    # `cross_entropy_loss(p, q)` of the file (defined again by a later cell), every call of
    # which hands it arrays from NumPy (a NumPy softmax of the file, `np.zeros`, `np.copy`),
    # next to a torch loss tried at the top level: no tensor reaches NumPy (NOTE [NumPy helper
    # fed arrays]). Twin: a call hands it a model's softmax: NumPy raises
    "numpy-helper-fed-arrays-by-every-call": (Shape("""
        def softmax(z):
            e_z = np.exp(z - np.max(z))
            return e_z / e_z.sum(axis=0)
        def cross_entropy_loss(p, q):
            return -np.sum(p * np.log(q))
        def softmax(z):
            e_z = np.exp(z - np.max(z))
            return e_z / e_z.sum()
        def cross_entropy_loss(p, q):
            return -np.sum(p * np.log(q))
        def bounds(n):
            p = np.zeros(n)
            p[0] = 1
            q = softmax(np.random.rand(n))
            return cross_entropy_loss(p, np.copy(p) + 1e-12), cross_entropy_loss(p, q)
        lo, hi = bounds(5)
        loss = nn.CrossEntropyLoss()
        inp = torch.randn(3, 5, requires_grad=True)
        output = loss(inp, inp)
        """, "GT103", holds="lo < hi"),
        Shape("""
        def softmax(z):
            e_z = np.exp(z - np.max(z))
            return e_z / e_z.sum(axis=0)
        def cross_entropy_loss(p, q):
            return -np.sum(p * np.log(q))
        def softmax(z):
            e_z = np.exp(z - np.max(z))
            return e_z / e_z.sum()
        def cross_entropy_loss(p, q):
            return -np.sum(p * np.log(q))
        def bounds(n, net):
            p = np.zeros(n)
            p[0] = 1
            q = net(torch.randn(n)).softmax(-1)
            return cross_entropy_loss(p, np.copy(p) + 1e-12), cross_entropy_loss(p, q)
        lo, hi = bounds(5, nn.Linear(5, 5))
        loss = nn.CrossEntropyLoss()
        inp = torch.randn(3, 5, requires_grad=True)
        output = loss(inp, inp)
        """, "GT103", line=5, raises=(RuntimeError, "numpy"))),
    # shaunak27/data-free-continual-learning (unseen44a, debatable): each federated round
    # `communicate()` copies the clients' average into every entry of the server's
    # `state_dict()`, then the distillation builds its Adam anew: moments of the replaced
    # weights would be stale (NOTE [weights replaced each pass]). Twin: the round only logs,
    # the weights are the same model's: the Adam state restarts every round
    "optimizer-rebuilt-after-the-weights-are-replaced": (Shape("""
        class Server:
            def __init__(self, clients):
                self.model = nn.Linear(2, 1)
                self.clients = clients
            def communicate(self):
                with torch.no_grad():
                    for key in self.model.state_dict():
                        avg = sum(c.state_dict()[key] for c in self.clients) / len(self.clients)
                        self.model.state_dict()[key].copy_(avg)
            def distill(self, x):
                opt = torch.optim.Adam(self.model.parameters(), lr=0.01)
                for _ in range(3):
                    opt.zero_grad()
                    self.model(x).pow(2).mean().backward()
                    opt.step()
                self.last_step = opt.state[self.model.weight]["step"].item()
            def run(self, rounds, x):
                for r in range(rounds):
                    self.communicate()
                    self.distill(x)
        server = Server([nn.Linear(2, 1), nn.Linear(2, 1)])
        server.run(2, torch.randn(4, 2))
        """, "GT436", holds="server.last_step == 3"),
        Shape("""
        class Server:
            def __init__(self, clients):
                self.model = nn.Linear(2, 1)
                self.clients = clients
            def communicate(self):
                with torch.no_grad():
                    self.norms = [c.weight.norm().item() for c in self.clients]
            def distill(self, x):
                opt = torch.optim.Adam(self.model.parameters(), lr=0.01)
                for _ in range(3):
                    opt.zero_grad()
                    self.model(x).pow(2).mean().backward()
                    opt.step()
                self.last_step = opt.state[self.model.weight]["step"].item()
            def run(self, rounds, x):
                for r in range(rounds):
                    self.communicate()
                    self.distill(x)
        server = Server([nn.Linear(2, 1), nn.Linear(2, 1)])
        server.run(2, torch.randn(4, 2))
        """, "GT436", line=9, holds="server.last_step == 3")),
    # Vitalik-ctrl/speech-enhancement-cmgan (trainer.py): the generator's step, then the
    # metric discriminator reads `gen_outputs["clean_mag"]` (made from the clean input and the
    # settings `__init__` gives `self`, no model) and `gen_outputs["est_mag"].detach()` of the
    # dict the helper returns: no read runs through the freed graph (NOTE [entries read
    # without the graph]). Twin: `est_mag` read without `.detach()`: the second backward raises
    "dict-entries-read-without-the-freed-graph": (Shape("""
        class Disc(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 1)
            def forward(self, a, b):
                return self.fc(torch.cat([a, b], -1))
        class Trainer:
            def __init__(self, gen, disc, config):
                self.gen, self.disc = gen, disc
                self.eps = config["eps"]
                self.opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
                self.opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
            def forward_step(self, clean, noisy):
                clean_mag = torch.sqrt(clean ** 2 + self.eps)
                est_mag = torch.sqrt(self.gen(noisy) ** 2 + self.eps)
                return {"clean_mag": clean_mag, "est_mag": est_mag}
            def train_step(self, clean, noisy):
                self.opt_g.zero_grad()
                out = self.forward_step(clean, noisy)
                fake = self.disc(out["clean_mag"], out["est_mag"])
                loss_g = F.mse_loss(out["est_mag"], out["clean_mag"]) + fake.pow(2).mean()
                loss_g.backward()
                self.opt_g.step()
                self.opt_d.zero_grad()
                enh = self.disc(out["clean_mag"], out["est_mag"].detach())
                real = self.disc(out["clean_mag"], out["clean_mag"])
                loss_d = (enh - 0.5).pow(2).mean() + (real - 1).pow(2).mean()
                loss_d.backward()
                self.opt_d.step()
                return loss_d.item()
        trainer = Trainer(nn.Linear(4, 4), Disc(), {"eps": 1e-8})
        loss_d = trainer.train_step(torch.randn(2, 4), torch.randn(2, 4))
        """, "GT509", holds="loss_d > 0"),
        Shape("""
        class Disc(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 1)
            def forward(self, a, b):
                return self.fc(torch.cat([a, b], -1))
        class Trainer:
            def __init__(self, gen, disc, config):
                self.gen, self.disc = gen, disc
                self.eps = config["eps"]
                self.opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
                self.opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
            def forward_step(self, clean, noisy):
                clean_mag = torch.sqrt(clean ** 2 + self.eps)
                est_mag = torch.sqrt(self.gen(noisy) ** 2 + self.eps)
                return {"clean_mag": clean_mag, "est_mag": est_mag}
            def train_step(self, clean, noisy):
                self.opt_g.zero_grad()
                out = self.forward_step(clean, noisy)
                fake = self.disc(out["clean_mag"], out["est_mag"])
                loss_g = F.mse_loss(out["est_mag"], out["clean_mag"]) + fake.pow(2).mean()
                loss_g.backward()
                self.opt_g.step()
                self.opt_d.zero_grad()
                enh = self.disc(out["clean_mag"], out["est_mag"])
                real = self.disc(out["clean_mag"], out["clean_mag"])
                loss_d = (enh - 0.5).pow(2).mean() + (real - 1).pow(2).mean()
                loss_d.backward()
                self.opt_d.step()
                return loss_d.item()
        trainer = Trainer(nn.Linear(4, 4), Disc(), {"eps": 1e-8})
        loss_d = trainer.train_step(torch.randn(2, 4), torch.randn(2, 4))
        """, "GT509", line=25, raises=(RuntimeError, "backward through the graph a second time"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
