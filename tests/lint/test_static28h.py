"""static28h (issue 13, held-out batch 22 at first contact): one mechanism per miss, each with a
silent look-alike that trains and buggy twins in spellings the case does not show, reported on
the line a maintainer changes, run on real torch."""
from __future__ import annotations

import pytest
import torch
from test_heldout_shapes import Shape, _found, _run

VQ = """
        class VQ(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("embed", torch.randn(8, 4))

            def forward(self, x):
                q = self.embed[torch.cdist(x, self.embed).argmin(-1)]
                q = x + (q - x).detach()
                return q, F.mse_loss(q.detach(), x)

"""

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT795, mechanism: autograd differentiates what `forward` runs and never calls a Module's
    # `backward` method: a gradient rule written there is dead (pitchtron's reversal layer)
    "module-backward-never-called": (Shape("""
        class _Reverse(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, lambd):
                ctx.lambd = lambd
                return x.view_as(x)

            @staticmethod
            def backward(ctx, grad_output):
                return -ctx.lambd * grad_output, None

        class GradReverse(nn.Module):
            def __init__(self, lambd=1.0):
                super().__init__()
                self.lambd = lambd

            def forward(self, x):
                return _Reverse.apply(x, self.lambd)

        x = torch.ones(3, requires_grad=True)
        GradReverse()(x).sum().backward()
        """, "GT795", holds="torch.equal(x.grad, -torch.ones(3))"), [Shape("""
        class GradReverse(nn.Module):
            def __init__(self, lambd=1.0):
                super().__init__()
                self.lambd = lambd

            def forward(self, x):
                return x.view_as(x)

            def backward(self, grad_output):
                return -self.lambd * grad_output

        x = torch.ones(3, requires_grad=True)
        GradReverse()(x).sum().backward()
        """, "GT795", 1, holds="torch.equal(x.grad, torch.ones(3))"), Shape("""
        class Quantizer(nn.Module):
            bits = 8

        class RoundSTE(Quantizer):
            def forward(self, x):
                return torch.round(x)

            def backward(self, grad):
                return grad

        x = torch.randn(4, requires_grad=True)
        RoundSTE()(x).sum().backward()
        """, "GT795", 4, holds="torch.equal(x.grad, torch.zeros(4))")]),
    # GT796, mechanism: the gradient handed to backward is the seed every gradient is
    # multiplied by; seeding a loss with itself scales each .grad by the loss (sotte's tutorial)
    "backward-seeded-with-itself": (Shape("""
        w = torch.tensor([1.0, 2.0], requires_grad=True)
        out = w * 3
        out.backward(torch.ones_like(out))
        first = w.grad.clone()
        w.grad = None
        loss = (w ** 2).sum()
        loss.backward()
        """, "GT796", holds="torch.equal(first, torch.tensor([3.0, 3.0])) "
                            "and torch.equal(w.grad, torch.tensor([2.0, 4.0]))"), [Shape("""
        w = torch.tensor([1.0, 2.0], requires_grad=True)
        loss = (w ** 2).sum()
        loss.backward(gradient=loss)
        """, "GT796", 3, holds="torch.equal(w.grad, 5 * torch.tensor([2.0, 4.0]))"), Shape("""
        def grads(w):
            loss = (w ** 2).sum()
            return torch.autograd.grad(loss, [w], grad_outputs=loss.detach())[0]

        g = grads(torch.tensor([1.0, 2.0], requires_grad=True))
        """, "GT796", 3, holds="torch.equal(g, 5 * torch.tensor([2.0, 4.0]))"), Shape("""
        w = torch.tensor([1.0, 2.0], requires_grad=True)
        loss = (w ** 2).sum()
        torch.autograd.backward([loss], [loss])
        """, "GT796", 3, holds="torch.equal(w.grad, 5 * torch.tensor([2.0, 4.0]))")]),
    # GT475, mechanism: every parameter of a freshly built model already requires grad, so a
    # "freeze" loop that sets True before a new head freezes nothing (PyTorch-Tutorial-2nd)
    "freeze-loop-sets-true": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                return self.fc(torch.relu(self.body(x)))

        model = Net()
        for p in model.parameters():
            p.requires_grad = False
        model.fc = nn.Linear(4, 2)
        n = sum(p.requires_grad for p in model.parameters())
        """, "GT475", holds="n == 2"), [Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Linear(4, 4)
                self.classifier = nn.Sequential(nn.ReLU(), nn.Linear(4, 3))

            def forward(self, x):
                return self.classifier(self.features(x))

        model = Net()
        model.load_state_dict(Net().state_dict())
        for name, param in model.named_parameters():
            param.requires_grad = True
        model.classifier[1] = nn.Linear(4, 2)
        n = sum(p.requires_grad for p in model.parameters())
        """, "GT475", 13, holds="n == 4"), Shape("""
        def build(num_classes):
            net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            for p in net.parameters():
                p.requires_grad_(True)
            net.head = nn.Linear(4, num_classes)
            return net

        model = build(2)
        n = sum(p.requires_grad for p in model.parameters())
        """, "GT475", 4, holds="n == 4")]),
    # GT476, mechanism: an unfreeze gated on the flag it sets only visits parameters that
    # already require grad, so frozen ones stay frozen (byol-a's set_trainable)
    "unfreeze-gated-on-requires-grad": (Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Linear(4, 4)
                self.fc = nn.Linear(4, 2)

            def set_trainable(self, trainable=False):
                for p in self.parameters():
                    p.requires_grad = trainable

            def freeze_except(self, keep):
                for n, p in self.named_parameters():
                    if p.requires_grad:
                        p.requires_grad = n.startswith(keep)

        enc = Encoder()
        enc.set_trainable(False)
        enc.set_trainable(True)
        enc.freeze_except("fc")
        n = sum(p.requires_grad for p in enc.parameters())
        """, "GT476", holds="n == 2"), [Shape("""
        class TrainableMixin:
            def set_trainable(self, trainable=False):
                for p in self.parameters():
                    if p.requires_grad:
                        p.requires_grad_(trainable)

        class Encoder(nn.Module, TrainableMixin):
            def __init__(self):
                super().__init__()
                self.conv = nn.Linear(4, 4)

        enc = Encoder()
        enc.set_trainable(False)
        enc.set_trainable(True)
        n = sum(p.requires_grad for p in enc.parameters())
        """, "GT476", 4, holds="n == 0"), Shape("""
        def unfreeze(model):
            for p in filter(lambda q: q.requires_grad, model.parameters()):
                p.requires_grad = True

        model = nn.Linear(4, 2).requires_grad_(False)
        unfreeze(model)
        n = sum(p.requires_grad for p in model.parameters())
        """, "GT476", 2, holds="n == 0")]),
    # GT105, mechanism: a module's method other than forward returns a value cut with `.data`
    # and forward keeps that result in what it returns (inversecooking's `sample`)
    "data-returned-by-method-forward-keeps": (Shape("""
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.step = nn.Linear(4, 4)

            def sample(self, h, n=3):
                outs = []
                for _ in range(n):
                    h = torch.tanh(self.step(h))
                    outs.append(h)
                return torch.stack(outs, 1)

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.decoder = Decoder()

            def forward(self, x):
                logits = self.decoder.sample(x)
                return logits.pow(2).mean()

        m = Model()
        m(torch.randn(2, 4)).backward()
        """, "GT105", holds="m.decoder.step.weight.grad is not None"), [Shape("""
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.step = nn.Linear(4, 4)

            def decode(self, h, n=3):
                outs = []
                for _ in range(n):
                    h = torch.tanh(self.step(h))
                    outs.append(h)
                return torch.cat(outs, 1).data

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.decoder = Decoder()

            def forward(self, x):
                logits = self.decoder.decode(x)
                return logits.pow(2).mean()

        m = Model()
        m(torch.randn(2, 4)).backward()
        """, "GT105", 11, "does not require grad"), Shape("""
        class AutoEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 3)
                self.head = nn.Linear(3, 4)

            def encode(self, x):
                z = self.proj(x).data
                return z

            def forward(self, x):
                z = self.encode(x)
                return self.head(z)

        m = AutoEncoder()
        m(torch.randn(2, 4)).sum().backward()
        """, "GT105", 8, holds="m.proj.weight.grad is None and m.head.weight.grad is not None")]),
    # GT110, mechanism: a Parameter registered by name (register_parameter / setattr) is read
    # into `torch.tensor([...])` in forward: a new leaf, the parameter never trains (ffjord)
    "parameter-registered-by-name-rebuilt": (Shape("""
        class CNF(nn.Module):
            def __init__(self, train_T=True):
                super().__init__()
                if train_T:
                    self.register_parameter("sqrt_T", nn.Parameter(torch.tensor(1.0)))
                else:
                    self.register_buffer("sqrt_T", torch.tensor(1.0))

            def forward(self, z):
                t = torch.stack([torch.zeros(()), self.sqrt_T * self.sqrt_T])
                return z * t[1]

        m = CNF()
        m(torch.randn(3)).sum().backward()
        """, "GT110", holds="m.sqrt_T.grad is not None"), [Shape("""
        class CNF(nn.Module):
            def __init__(self, train_T=True):
                super().__init__()
                if train_T:
                    self.register_parameter("sqrt_T", nn.Parameter(torch.tensor(1.0)))
                else:
                    self.register_buffer("sqrt_T", torch.tensor(1.0))

            def times(self):
                return torch.tensor([0.0, self.sqrt_T * self.sqrt_T])

            def forward(self, z):
                return z * self.times()[1] + self.lin(z)

        m = CNF()
        m.lin = nn.Linear(3, 3)
        m(torch.randn(3)).sum().backward()
        """, "GT110", 10, holds="m.sqrt_T.grad is None and m.lin.weight.grad is not None"),
        Shape("""
        class Scale(nn.Module):
            def __init__(self, names):
                super().__init__()
                for name in names:
                    setattr(self, name, nn.Parameter(torch.tensor(2.0)))
                setattr(self, "gain", nn.Parameter(torch.tensor(2.0)))

            def forward(self, x):
                return x * torch.tensor([self.gain])

        m = Scale(["a"])
        m(torch.ones(3, requires_grad=True)).sum().backward()
        """, "GT110", 9, holds="m.gain.grad is None")]),
    # GT130, mechanism: a straight-through output `x + (q - x).detach()` has the identity as
    # its gradient w.r.t. `x`; a residual minus it has zero gradient (vector-quantize-pytorch)
    "residual-minus-straight-through": (Shape(VQ + """
        class RVQ(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.layers = nn.ModuleList([VQ() for _ in range(n)])

            def forward(self, x):
                residual, losses = x, []
                for layer in self.layers:
                    q, loss = layer(residual)
                    residual = residual - q.detach()
                    losses.append(loss)
                return losses

        enc = nn.Linear(4, 4)
        RVQ(2)(enc(torch.randn(5, 4)))[1].backward()
        """, "GT130", holds="float(enc.weight.grad.abs().sum()) > 0"), [Shape(VQ + """
        class RVQ(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.layers = nn.ModuleList([VQ() for _ in range(n)])

            def forward(self, x):
                residual, losses = x, []
                for i, layer in enumerate(self.layers):
                    q, loss = layer(residual)
                    residual = residual - q
                    losses.append(loss)
                return losses

        enc = nn.Linear(4, 4)
        RVQ(2)(enc(torch.randn(5, 4)))[1].backward()
        """, "GT130", 21, holds="float(enc.weight.grad.abs().sum()) == 0"), Shape("""
        class STQuant(nn.Module):
            def forward(self, x):
                return x + (torch.round(x * 4) / 4 - x).detach()

        class TwoStage(nn.Module):
            def __init__(self):
                super().__init__()
                self.coarse = STQuant()
                self.fine = STQuant()

            def forward(self, x):
                q = self.coarse(x)
                x = x - q
                return q + self.fine(x * 10) / 10, x

        enc = nn.Linear(4, 4)
        out, rest = TwoStage()(enc(torch.randn(5, 4)))
        rest.pow(2).sum().backward()
        """, "GT130", 13, holds="float(enc.weight.grad.abs().sum()) == 0")]),
    # GT107, mechanism: `map(torch.detach, (...))` cuts every element it unpacks; a loss a
    # module's forward returns beside its output, built only from those, reaches no weight
    # (compressive-transformer's aux loss); a partial of a pure helper is as live as its inputs
    "loss-from-values-detached-by-map": (Shape("""
        from functools import partial

        def attend(q, k, v, dropout_fn=None):
            return torch.softmax(q @ k.transpose(-1, -2), -1) @ v

        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.to_kv = nn.Linear(4, 8)
                self.compress = nn.Linear(4, 4)
                self.drop = nn.Dropout(0.)

            def forward(self, x):
                k, v = self.to_kv(x).chunk(2, dim=-1)
                ck, cv = self.to_kv(self.compress(x)).chunk(2, dim=-1)
                q, k, v = map(torch.detach, (x, k, v))
                attn_fn = partial(attend, dropout_fn=self.drop)
                aux_loss = F.mse_loss(attn_fn(q, k, v), attn_fn(q, ck, cv))
                return x, aux_loss

        m = Memory()
        out, aux = m(torch.randn(2, 3, 4))
        aux.backward()
        """, "GT107", holds="m.compress.weight.grad is not None"), [Shape("""
        from functools import partial

        def attend(q, k, v, dropout_fn=None):
            return torch.softmax(q @ k.transpose(-1, -2), -1) @ v

        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.to_kv = nn.Linear(4, 8)
                self.compress = nn.Linear(4, 4)
                self.drop = nn.Dropout(0.)

            def forward(self, x):
                k, v = self.to_kv(x).chunk(2, dim=-1)
                ck, cv = self.to_kv(self.compress(x)).chunk(2, dim=-1)
                q, k, v, ck, cv = map(torch.detach, (x, k, v, ck, cv))
                attn_fn = partial(attend, dropout_fn=self.drop)
                aux_loss = F.mse_loss(attn_fn(q, k, v), attn_fn(q, ck, cv))
                return x, aux_loss

        m = Memory()
        out, aux = m(torch.randn(2, 3, 4))
        aux.backward()
        """, "GT107", 16, "does not require grad"), Shape("""
        def train_step(model, x, y):
            out, feats = model(x), model[0](x)
            out, feats = map(lambda t: t.detach(), (out, feats))
            loss = F.mse_loss(out, y) + feats.pow(2).mean()
            loss.backward()

        train_step(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), torch.randn(3, 4),
                   torch.randn(3, 2))
        """, "GT107", 3, "does not require grad")]),
}


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    yield
    torch.set_grad_enabled(True)


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
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)


def test_hand_written_backprop_calling_backward_methods_is_silent() -> None:
    """Layers whose `backward` the code calls itself (a NumPy-style course network built on
    nn.Module) are not dead code: GT795 stays silent."""
    shape = Shape("""
        class Linear(nn.Module):
            def __init__(self, w):
                super().__init__()
                self.w = w

            def forward(self, x):
                self.x = x
                return x @ self.w

            def backward(self, grad):
                self.dw = self.x.t() @ grad
                return grad @ self.w.t()

        layers = [Linear(torch.ones(3, 2)), Linear(torch.ones(2, 1))]
        h = torch.ones(4, 3)
        for layer in layers:
            h = layer(h)
        g = torch.ones_like(h)
        for layer in reversed(layers):
            g = layer.backward(g)
        """, "GT795", holds="layers[0].dw.shape == (3, 2)")
    assert _found(shape) == []
    _run(shape)
