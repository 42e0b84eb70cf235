"""static30h (issue 13, held-out 24 at first contact): shapes of the batch's mechanisms, each a
silent look-alike that trains and buggy twins in two or more spellings reported on the given
line, run on real torch (what the twin raises, or the silent symptom it shows)."""
from __future__ import annotations

import textwrap

import pytest
from test_heldout_shapes import Shape, _found, _source

torch = pytest.importorskip("torch")

# GT213: a custom optimizer's no-grad `step` calls its closure; silent when every `step(...)`
# of the file hands it a closure that only reads a value (dfw PR 5's `lambda: float(loss)`)
SIGN_SGD = """
class SignSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure):
        loss = float(closure())
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    p.add_(p.grad.sign(), alpha=-g["lr"])
        return loss

net = nn.Linear(3, 1)
w0 = net.weight.detach().clone()
opt = SignSGD(net.parameters(), lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 1)
"""



def _sgd(tail: str, head: str = SIGN_SGD) -> str:
    return head + textwrap.dedent(tail)


MOMENTUM = """
class Momentum(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, mu=0.9):
        super().__init__(params, dict(lr=lr, mu=mu))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                buf = self.state[p].setdefault("buf", torch.zeros_like(p))
                buf.mul_(group["mu"]).add_(p.grad.data)
                p.sub_(group["lr"] * buf)
"""

GUARD = "                if p.grad is None:\n                    continue\n"
FROZEN_NET = """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.emb.weight.requires_grad = False
            self.fc = nn.Linear(4, 2)

        def forward(self, t):
            return self.fc(self.emb(t).mean(1))

    net = Net()
    opt = Momentum(net.parameters())
    loss = net(torch.randint(0, 10, (3, 5))).sum()
    loss.backward()
    opt.step()
    """

FORCES = """
net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.Adam(net.parameters())
mse = nn.MSELoss()
pos = torch.randn(6, 3, requires_grad=True)
true_forces = -torch.autograd.grad((pos ** 2).sum(), pos)[0]
for _ in range(2):
    x = pos.detach().clone()
    x.requires_grad_(True)
    energy = net(x).sum()
    forces = -torch.autograd.grad(energy, x, retain_graph=True{cg})[0]
    force_loss = mse(forces, true_forces)
    loss = energy ** 2 + force_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

HEADS = """
def to_heads(t, heads):
    b, hd, x, y = t.shape
    return t.reshape(b, heads, hd // heads, x * y).permute(0, 1, 3, 2)

class Attention(nn.Module):
    def __init__(self, dim=4, heads=2, dim_head=4):
        super().__init__()
        self.heads, self.scale = heads, dim_head ** -0.5
        self.qkv = nn.Conv2d(dim, heads * dim_head * 3, 1, bias=False)

    def forward(self, fmap):
        q, k, v = self.qkv(fmap).chunk(3, dim=1)
        q, k, v = map(lambda t: to_heads(t, self.heads), (q, k, v))
        {write}
        attn = (q @ k.transpose(-1, -2)).softmax(-1)
        return attn @ v

attn = Attention()
attn(torch.randn(2, 4, 3, 3)).sum().backward()
"""

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "closure-that-trains-under-no-grad-step": (Shape(_sgd("""
        for _ in range(3):
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            opt.step(lambda: float(loss))
        """), "GT213", holds="not torch.equal(net.weight, w0)"), [Shape(_sgd("""
        def closure():
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        """), "GT213", 7, raises="does not require grad"), Shape(_sgd("""
        def train_once():
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            return loss

        opt.step(closure=lambda: train_once())
        """), "GT213", 7, raises="does not require grad")]),
    # GT470: a custom optimizer reads `p.grad` of each `p in group["params"]`, and the file hands
    # it all parameters of a module frozen in part (oval-group/dfw#5)
    "custom-optimizer-reads-grad-of-frozen-parameter": (Shape(
        _sgd(FROZEN_NET, MOMENTUM.replace("                buf = ", GUARD + "                buf = ")),
        "GT470", holds="net.emb.weight.grad is None and net.fc.weight.grad is not None"),
        [Shape(_sgd(FROZEN_NET, MOMENTUM), "GT470", 10, raises="NoneType"), Shape("""
        class Base(torch.optim.Optimizer):
            pass

        class Scaled(Base):
            def __init__(self, params, lr=0.1):
                super().__init__(params, dict(lr=lr))

            @torch.no_grad()
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        p.sub_(group["lr"] * p.grad)

        def build():
            model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
            model[0].requires_grad_(False)
            return model, Scaled(model.parameters())

        model, opt = build()
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
        """, "GT470", 12, raises="unsupported operand")]),
    # GT206: forces from `autograd.grad(energy, pos)` without `create_graph` compared in a torch
    # loss with target forces that are plain gradients too: a constant term (torchani PR 238)
    "force-matching-grad-without-create-graph": (Shape(FORCES.format(cg=", create_graph=True"),
        "GT206", holds="force_loss.requires_grad and net[0].weight.grad is not None"), [
        Shape(FORCES.format(cg=""), "GT206", 10,
              holds="not force_loss.requires_grad"),
        Shape("""
        def train_step(net, opt, pos):
            pos = pos.detach().requires_grad_(True)
            ref = -torch.autograd.grad((pos ** 2).sum(), pos)[0]
            energy = net(pos).sum()
            forces = -torch.autograd.grad(energy, pos, retain_graph=True)[0]
            force_loss = nn.L1Loss()(forces, ref)
            opt.zero_grad()
            (energy ** 2 + force_loss).backward()
            opt.step()
            return force_loss

        net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        opt = torch.optim.Adam(net.parameters())
        force_loss = train_step(net, opt, torch.randn(6, 3))
        """, "GT206", 5, holds="not force_loss.requires_grad")]),
    # GT104: `torch.as_tensor` of a list/tuple of losses copies their values (deepxde PR 1379);
    # of one tensor it returns the tensor itself
    "as-tensor-of-loss-list": (Shape("""
        def train_step(model, opt, batches):
            losses = [F.mse_loss(model(x), y) for x, y in batches]
            loss = torch.as_tensor(torch.stack(losses)).mean() + torch.as_tensor(losses[0])
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        net = nn.Linear(3, 1)
        data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
        loss = train_step(net, torch.optim.SGD(net.parameters(), lr=0.1), data)
        """, "GT104", holds="loss.requires_grad and net.weight.grad is not None"), [Shape("""
        def train_step(model, opt, batches):
            losses = [F.mse_loss(model(x), y) for x, y in batches]
            loss = torch.as_tensor(losses).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

        net = nn.Linear(3, 1)
        data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
        train_step(net, torch.optim.SGD(net.parameters(), lr=0.1), data)
        """, "GT104", 3, raises="does not require grad"), Shape("""
        class Solver:
            def __init__(self):
                self.net = nn.Linear(3, 1)

            def loss(self, x, y):
                pred = self.net(x)
                terms = (F.mse_loss(pred, y), pred.pow(2).mean())
                return torch.as_tensor(terms).sum()

        s = Solver()
        s.loss(torch.randn(4, 3), torch.randn(4, 1)).backward()
        """, "GT104", 8, raises="does not require grad")]),
    # GT608: in-place write into a piece of `chunk` made into heads through `map(f, (q, k, v))`
    # (bottleneck-transformer-pytorch PR 14)
    "in-place-on-mapped-chunk-views": (Shape(HEADS.format(write="q = q * self.scale"),
        "GT608", holds="attn.qkv.weight.grad is not None"), [
        Shape(HEADS.format(write="q *= self.scale"), "GT608", 14, raises="multiple views"),
        Shape("""
        def split_heads(t):
            return t.view(t.shape[0], t.shape[1], 2, -1).transpose(1, 2)

        class Attn(nn.Module):
            def __init__(self, dim=8):
                super().__init__()
                self.qkv = nn.Linear(dim, dim * 3)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                q, k, v = map(split_heads, (q, k, v))
                k.mul_(0.5)
                return (q @ k.transpose(-1, -2)).softmax(-1) @ v

        attn = Attn()
        attn(torch.randn(2, 5, 8)).sum().backward()
        """, "GT608", 12, raises="multiple views"), Shape("""
        class Attn(nn.Module):
            def __init__(self, dim=8, heads=2):
                super().__init__()
                self.heads = heads
                self.qkv = nn.Linear(dim, dim * 3)

            def forward(self, x):
                b, n, _ = x.shape
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                q, k, v = map(lambda t: t.reshape(b, n, self.heads, -1).permute(0, 2, 1, 3),
                              (q, k, v))
                v.div_(2.0)
                return (q @ k.transpose(-1, -2)).softmax(-1) @ v

        attn = Attn()
        attn(torch.randn(2, 5, 8)).sum().backward()
        """, "GT608", 12, raises="multiple views")]),
}

# variants the case does not show: a `def` that only reads `.item()`, passed by name (silent),
# and a closure the file does not define (it may train: still reported)
VARIANTS: list[tuple[Shape, list[tuple[int, str]]]] = [
    # a plain gradient as the target of a model's prediction: a stop-gradient (silent)
    (Shape("""
        net = nn.Linear(3, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(2):
            x = torch.randn(4, 3, requires_grad=True)
            target = torch.autograd.grad((x ** 3).sum(), x)[0]
            loss = F.mse_loss(net(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT206", holds="net.weight.grad is not None"), []),
    (Shape(_sgd("""
        loss = F.mse_loss(net(x), y)
        loss.backward()

        def current():
            return loss.item()

        opt.step(current)
        """), "GT213", holds="not torch.equal(net.weight, w0)"), []),
    (Shape(_sgd("""
        def fit(opt, closure):
            return opt.step(closure)
        """, SIGN_SGD.split("net = ")[0]), "GT213"), [(7, "GT213")]),
]


def _run(shape: Shape) -> dict:
    env: dict = {}
    code = compile(_source(shape), "shape.py", "exec")
    if shape.raises:
        with pytest.raises((RuntimeError, TypeError, AttributeError), match=shape.raises):
            exec(code, env)
    else:
        exec(code, env)
    if shape.holds:
        assert eval(shape.holds, env)
    return env


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


@pytest.mark.parametrize("i", range(len(VARIANTS)))
def test_variants(i: int) -> None:
    shape, want = VARIANTS[i]
    assert _found(shape) == want, shape.src
    if shape.holds:
        _run(shape)
