"""Custom-Function gradient counts (GT701), checkpoints of frozen outputs (GT205), unreduced
losses returned by forward (GT703), log-probabilities of reparameterised samples (GT704) and
weights a module never registers (GT401 with layers passed in, GT420, GT421): each buggy twin is reported on its line and *run* on real
torch, where it fails (or silently does not train) as the finding says; each look-alike is
silent and runs."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function
torch.manual_seed(0)
"""
COUNT = "returned an incorrect number of gradients"
EMPTY = "optimizer got an empty parameter list"




SHAPES: dict[str, Shape] = {
    # a flag given to every apply() call needs its (None) gradient too
    "flag-input-one-gradient": Shape("""
        class Sign(Function):
            @staticmethod
            def forward(ctx, x, training=True):
                return x.sign() if not training else (x + torch.rand_like(x) - 0.5).sign()
            @staticmethod
            def backward(ctx, g):
                return g
        class Binarizer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return Sign.apply(torch.tanh(self.fc(x)), self.training)
        Binarizer()(torch.randn(2, 4)).sum().backward()
        """, "GT701", 7, (RuntimeError, COUNT)),
    "flag-input-one-gradient-through-alias": Shape("""
        class Sign(Function):
            @staticmethod
            def forward(ctx, x, stochastic=False):
                return x.sign()
            @staticmethod
            def backward(ctx, g):
                return g.clamp(-1, 1)
        sign = Sign.apply
        x = torch.randn(3, requires_grad=True)
        sign(x, True).sum().backward()
        """, "GT701", 7, (RuntimeError, COUNT)),
    "flag-input-none-gradient-ok": Shape("""
        class Sign(Function):
            @staticmethod
            def forward(ctx, x, training=True):
                return x.sign()
            @staticmethod
            def backward(ctx, g):
                return g, None
        x = torch.randn(3, requires_grad=True)
        Sign.apply(x, False).sum().backward()
        """, "GT701", holds="x.grad is not None"),
    "backward-never-returns": Shape("""
        class Adder(Function):
            @staticmethod
            def forward(ctx, w, x):
                ctx.save_for_backward(w, x)
                return -(w.unsqueeze(1) - x.unsqueeze(0)).abs().sum(-1)
            @staticmethod
            def backward(ctx, g):
                w, x = ctx.saved_tensors
                grad_w = ((x.unsqueeze(0) - w.unsqueeze(1)) * g.unsqueeze(-1)).sum(1)
                grad_x = ((w.unsqueeze(1) - x.unsqueeze(0)) * g.unsqueeze(-1)).sum(0)
        w = torch.randn(3, 4, requires_grad=True)
        Adder.apply(w, torch.randn(5, 4)).pow(2).mean().backward()
        """, "GT701", 7, (RuntimeError, COUNT)),
    "backward-returns-on-every-used-path-ok": Shape("""
        class Scale(Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(x, w)
                return x * w
            @staticmethod
            def backward(ctx, g):
                x, w = ctx.saved_tensors
                grad_x = g * w
                if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
                    return grad_x, g * x
        x, w = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
        Scale.apply(x, w).sum().backward()
        """, "GT701", holds="w.grad is not None"),
    # reentrant checkpoint over the output of a frozen encoder on token ids
    "checkpoint-of-frozen-encoder-output": Shape("""
        from torch.utils.checkpoint import checkpoint
        encoder = nn.Embedding(16, 8).requires_grad_(False)
        block = nn.Linear(8, 8)
        ids = torch.randint(0, 16, (2, 5))
        hidden = encoder(ids)
        hidden = checkpoint(block, hidden, use_reentrant=True)
        hidden.sum().backward() if hidden.requires_grad else None
        """, "GT205", 6, holds="block.weight.grad is None"),
    "checkpoint-of-trainable-encoder-output-ok": Shape("""
        from torch.utils.checkpoint import checkpoint
        encoder = nn.Embedding(16, 8)
        frozen = nn.Embedding(16, 8).requires_grad_(False)
        block = nn.Linear(8, 8)
        ids = torch.randint(0, 16, (2, 5))
        hidden = encoder(ids)
        hidden = checkpoint(block, hidden, use_reentrant=True)
        other = checkpoint(block, frozen(ids), use_reentrant=False)
        (hidden.sum() + other.sum()).backward()
        """, "GT205", holds="block.weight.grad is not None"),
    # forward returns a per-token loss; the caller backpropagates it as if it were a scalar
    "forward-returns-unreduced-loss": Shape("""
        class Tagger(nn.Module):
            def __init__(self, reduction="none"):
                super().__init__()
                self.fc = nn.Linear(8, 5)
                self.loss_fct = nn.CrossEntropyLoss(reduction=reduction)
            def forward(self, x, y):
                out = self.loss_fct(self.fc(x), y)
                return out
        model = Tagger()
        loss = model(torch.randn(6, 8), torch.randint(0, 5, (6,)))
        loss.backward()
        """, "GT703", 5, (RuntimeError, "grad can be implicitly created only for scalar")),
    "forward-returns-reduced-loss-ok": Shape("""
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 5)
                self.loss_fct = nn.CrossEntropyLoss(reduction="none")
            def forward(self, x, y):
                return self.loss_fct(self.fc(x), y)
        model = Tagger()
        loss = model(torch.randn(6, 8), torch.randint(0, 5, (6,)))
        loss.mean().backward()
        per_token = model(torch.randn(6, 8), torch.randint(0, 5, (6,)))
        per_token.backward(torch.ones_like(per_token))
        """, "GT703", holds="model.fc.weight.grad is not None"),
    # the log-probability of a reparameterised sample: the mean head gets a zero gradient
    "log-prob-of-rsample": Shape("""
        from torch.distributions import Normal
        mean_head, logvar_head = nn.Linear(3, 1), nn.Linear(3, 1)
        x = torch.randn(4, 3)
        d = Normal(mean_head(x), torch.exp(0.5 * logvar_head(x)))
        action = d.rsample()
        loss = -(d.log_prob(action) * torch.randn(4, 1)).mean()
        loss.backward()
        """, "GT704", 5, holds="torch.allclose(mean_head.weight.grad, torch.zeros(1, 3))"),
    "log-prob-of-rsample-inline": Shape("""
        from torch.distributions import Independent, Normal
        mean_head = nn.Linear(3, 2)
        def loss_of(x):
            dist = Independent(Normal(mean_head(x), torch.ones(4, 2)), 1)
            return -dist.log_prob(dist.rsample()).mean()
        loss_of(torch.randn(4, 3)).backward()
        """, "GT704", 5, holds="torch.allclose(mean_head.weight.grad, torch.zeros(2, 3))"),
    "log-prob-of-sample-and-sac-rsample-ok": Shape("""
        from torch.distributions import Normal
        mean_head, critic = nn.Linear(3, 1), nn.Linear(4, 1)
        x = torch.randn(4, 3)
        d = Normal(mean_head(x), torch.ones(4, 1))
        a = d.sample()
        reinforce = -(d.log_prob(a) * torch.randn(4, 1)).mean()
        a2 = d.rsample()
        sac = (0.2 * d.log_prob(a2) - critic(torch.cat([x, a2], -1))).mean()
        (reinforce + sac).backward()
        """, "GT704", holds="mean_head.weight.grad.abs().sum() > 0"),
    # layers built in forward: new random weights every call, never in parameters()
    "layers-built-in-forward": Shape("""
        class Net(torch.nn.Module):
            def __init__(self, d_in, h, d_out):
                super().__init__()
                self.d_in, self.h, self.d_out = d_in, h, d_out
            def forward(self, x):
                h = torch.nn.Linear(self.d_in, self.h)(x).clamp(min=0)
                return torch.nn.Linear(self.h, self.d_out)(h)
        model = Net(4, 8, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        """, "GT420", 6, (ValueError, EMPTY)),
    "layer-built-in-a-helper-of-forward": Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 8)
            def head(self, h):
                fc = nn.Linear(8, 2)
                return fc(h)
            def forward(self, x):
                return self.head(torch.relu(self.body(x)))
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        out1 = model(torch.ones(1, 4))
        out2 = model(torch.ones(1, 4))
        """, "GT420", 6, holds="not torch.equal(out1, out2) and len(list(model.parameters())) == 2"),
    "layers-built-once-lazily-ok": Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = None
            def forward(self, x):
                x = nn.ReLU()(x)
                if self.head is None:
                    self.head = nn.Linear(x.shape[-1], 2)
                return self.head(x)
        model = Net()
        model(torch.ones(1, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        """, "GT420", holds="len(list(model.parameters())) == 2"),
    # weights copied from a state dict / another layer as plain tensors
    "state-dict-weights-as-plain-tensors": Shape("""
        class Decomposed(nn.Module):
            def __init__(self, pretrained):
                super().__init__()
                sd = pretrained.state_dict()
                self.w = sd['weight'].view(3, 4)
            def forward(self, x):
                return x @ self.w.t()
        model = Decomposed(nn.Linear(4, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        """, "GT421", 5, (ValueError, EMPTY)),
    "weight-data-as-plain-tensor": Shape("""
        class Student(nn.Module):
            def __init__(self, teacher):
                super().__init__()
                self.kernel = teacher.weight.data.clone()
            def forward(self, x):
                return F.linear(x, self.kernel)
        student = Student(nn.Linear(4, 3))
        optimizer = torch.optim.Adam(student.parameters())
        """, "GT421", 4, (ValueError, EMPTY)),
    "state-dict-weights-wrapped-ok": Shape("""
        class Decomposed(nn.Module):
            def __init__(self, pretrained):
                super().__init__()
                sd = pretrained.state_dict()
                self.w = nn.Parameter(sd['weight'].view(3, 4).clone())
                self.whiten = torch.eye(4)
            def forward(self, x):
                return (x @ self.whiten) @ self.w.t()
        model = Decomposed(nn.Linear(4, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        """, "GT421", holds="len(list(model.parameters())) == 1"),
    # layers handed in by the caller and kept in a plain list
    "layers-passed-in-appended-to-list": Shape("""
        class Merge(nn.Module):
            def __init__(self, layers=None):
                super().__init__()
                self._layers = None
                if layers is not None:
                    self._layers = []
                    for layer in layers:
                        self._layers.append(layer)
            def forward(self, x):
                return torch.cat([layer(x) for layer in self._layers], -1)
        branches = [nn.Linear(4, 3), nn.Linear(4, 3)]
        model = nn.Sequential(Merge(branches), nn.Linear(6, 1))
        """, "GT401", 6, holds="len(list(model.parameters())) == 2"),
    "layers-passed-in-stored-as-list": Shape("""
        class Stack(nn.Module):
            def __init__(self, blocks):
                super().__init__()
                self.blocks = blocks
            def forward(self, x):
                for b in self.blocks:
                    x = b(x)
                return x
        def build():
            return Stack([nn.Linear(4, 4), nn.Linear(4, 4)])
        model = build()
        """, "GT401", 4, holds="len(list(model.parameters())) == 0"),
    "layers-passed-in-registered-ok": Shape("""
        class Stack(nn.Module):
            def __init__(self, blocks):
                super().__init__()
                self.blocks = nn.ModuleList(blocks)
                self.names = [type(b).__name__ for b in blocks]
            def forward(self, x):
                for b in self.blocks:
                    x = b(x)
                return x
        class Merge(nn.Module):
            def __init__(self, layers):
                super().__init__()
                self.layers = layers
            def forward(self, x):
                return sum(layer(x) for layer in self.layers)
        model = Stack([nn.Linear(4, 4), nn.Linear(4, 4)])
        shared = nn.ModuleList([nn.Linear(4, 4)])
        merge = Merge(shared)
        """, "GT401", holds="len(list(model.parameters())) == 4"),
    # a data transform with a `forward` is no nn.Module: its plain list registers nothing
    "transforms-passed-to-a-plain-class-ok": Shape("""
        class Base:
            def __call__(self, data):
                return self.forward(data)
        class Shift(Base):
            def __init__(self):
                self.offset = nn.Linear(2, 2)
            def forward(self, data):
                return data + 1
        class FirstThatWorks(Base):
            def __init__(self, transforms):
                self.transforms = transforms
            def forward(self, data):
                for t in self.transforms:
                    return t(data)
        pipeline = FirstThatWorks([Shift(), Shift()])
        """, "GT401", holds="pipeline(torch.zeros(2)).sum() == 2"),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_is_judged_as_torch_behaves(name: str) -> None:
    judge(PRELUDE, SHAPES[name])
