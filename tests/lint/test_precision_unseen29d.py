"""Shapes that fired wrongly on the projects of docs/triage/unseen29d.md (session 29), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import os
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # kaggle-understanding-clouds (kvt/apis/train.py): `if accum is None: step` / `elif (i+1)
    # % accum == 0: step`: the two steps sit in arms of one `if`, never both in a pass (2
    # Adam steps in 4 passes). Twin: the second step after the branch runs on every pass (4
    # steps: Adam skips the gradients the branch's `zero_grad()` set to None)
    "step-in-the-other-arm-of-the-accumulation-test": (Shape("""
        model = nn.Linear(3, 1)
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        every = 2
        for i in range(4):
            model(torch.randn(2, 3)).sum().backward()
            if every is None:
                opt.step()
                opt.zero_grad()
            elif (i + 1) % every == 0:
                opt.step()
                opt.zero_grad()
        """, "GT519", holds="opt.state[model.weight]['step'] == 2"), Shape("""
        model = nn.Linear(3, 1)
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        every = 2
        for i in range(4):
            model(torch.randn(2, 3)).sum().backward()
            if (i + 1) % every == 0:
                opt.step()
                opt.zero_grad()
            opt.step()
        """, "GT519", line=9, holds="opt.state[model.weight]['step'] == 4")),
    # wtfml (engine/engine.py): a device arm accumulating over `accumulation_steps` passes and
    # another arm (TPU) stepping on every pass: one run takes one arm. Twin: the every-pass
    # step after the arms
    "every-pass-step-in-another-device-arm": (Shape("""
        class Engine:
            def __init__(self, model, on_xla, k):
                self.model, self.on_xla, self.k = model, on_xla, k
                self.opt = torch.optim.Adam(model.parameters(), lr=0.1)
            def epoch(self, batches):
                for b, x in enumerate(batches):
                    loss = self.model(x).sum()
                    if not self.on_xla:
                        loss.backward()
                        if (b + 1) % self.k == 0:
                            self.opt.step()
                            self.opt.zero_grad()
                    else:
                        loss.backward()
                        self.opt.step()
                        self.opt.zero_grad()
        net = nn.Linear(3, 1)
        xla = os.environ.get("PJRT_DEVICE") == "TPU"
        Engine(net, xla, 2).epoch([torch.randn(2, 3) for _ in range(4)])
        """, "GT519"), Shape("""
        class Engine:
            def __init__(self, model, on_xla, k):
                self.model, self.on_xla, self.k = model, on_xla, k
                self.opt = torch.optim.Adam(model.parameters(), lr=0.1)
            def epoch(self, batches):
                for b, x in enumerate(batches):
                    loss = self.model(x).sum()
                    loss.backward()
                    if (b + 1) % self.k == 0:
                        self.opt.step()
                        self.opt.zero_grad()
                    self.opt.step()
        net = nn.Linear(3, 1)
        e = Engine(net, False, 2)
        e.epoch([torch.randn(2, 3) for _ in range(4)])
        """, "GT519", line=12, holds="e.opt.state[net.weight]['step'] == 4")),
    # Getting-Things-Done-with-Pytorch, severstal (notebooks): a cell's last line `x.add(y)`,
    # `torch.sqrt(tm)` shows a value; nothing after reads the name, so no update is lost.
    # Twin: a later line reads `x`, which the dropped `add` left unchanged
    "module-level-op-on-a-name-read-nowhere-after": (Shape("""
        x = torch.ones(2, 2) * 2
        y = torch.tensor([[2., 2.], [5., 1.]])
        x.add(y)

        def show(t):
            return t.sum()
        a = torch.ones(2, 2)
        torch.sqrt(a * 4)
        """, "GT708"), Shape("""
        x = torch.ones(2, 2) * 2
        y = torch.tensor([[2., 2.], [5., 1.]])
        x.add(y)

        def show():
            return x.sum()
        total = show()
        """, "GT708", line=3, holds="total.item() == 8.0")),
    # pytorch-deepdream (playground.py): `z = y * y * 3` of a 2x2 tensor, `z.backward(z)`:
    # a many-valued value seeded with itself is the gradient of (z ** 2).sum() / 2, and
    # `z.backward()` alone would raise. Twin: a mean (one element) seeded with itself
    "many-valued-tensor-seeded-with-itself": (Shape("""
        x = torch.tensor([[-2.0, 1.0], [1.0, 3.0]], requires_grad=True)
        y = x + 2
        z = y * y * 3
        z.backward(z)
        g = x.grad.clone()
        x.grad = None
        ((3 * (x + 2) ** 2) ** 2 / 2).sum().backward()
        """, "GT796", holds="torch.allclose(g, x.grad)"), Shape("""
        w = torch.tensor([1.0, 2.0], requires_grad=True)
        energy = (w * w).mean()
        energy.backward(energy)
        """, "GT796", line=3, holds="torch.allclose(w.grad, 2.5 * torch.tensor([1.0, 2.0]))")),
    # pytorch-deepdream (deepdream loop): `activations = out.relu4_3` of a model's output,
    # `activations.backward(activations)`: DeepDream's L2 objective on a feature map. Twin: the
    # criterion's loss (one element) seeded with itself
    "feature-map-of-a-model-seeded-with-itself": (Shape("""
        class Feats(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)
            def forward(self, x):
                return {"relu": F.relu(self.conv(x))}
        img = torch.rand(1, 3, 8, 8, requires_grad=True)
        net = Feats()
        for _ in range(2):
            act = net(img)["relu"]
            act.backward(act)
            img.data += 0.1 * img.grad / img.grad.std()
            img.grad.zero_()
        """, "GT796"), Shape("""
        net = nn.Linear(3, 1)
        crit = nn.MSELoss()
        x, y = torch.ones(4, 3), torch.zeros(4, 1)
        loss = crit(net(x), y)
        g, = torch.autograd.grad(loss, net.bias, retain_graph=True)
        loss.backward(loss)
        """, "GT796", line=6, holds="torch.allclose(net.bias.grad, loss.item() * g)")),
    # lightning-tutorials (UvA meta-learning, ProtoMAML.adapt_few_shot): `local_optim` over
    # `local_model.parameters()`, an output layer `w = init.detach().requires_grad_()` updated
    # by hand and refilled with `w.grad.fill_(0)` after `local_optim.zero_grad()`: the clear
    # does not reach that leaf's `.grad`. Twin: the leaf is one of the optimizer's parameters
    "leaf-outside-the-cleared-optimizer": (Shape("""
        def adapt(net, init, steps):
            inner = torch.optim.SGD(net.parameters(), lr=0.1)
            head = init.detach().requires_grad_()
            for _ in range(steps):
                loss = (net(torch.ones(1, 3)) @ head).sum()
                loss.backward()
                inner.step()
                head.data -= 0.1 * head.grad
                inner.zero_grad()
                head.grad.fill_(0)
            head = head.detach() + 0
            return head
        out = adapt(nn.Linear(3, 2), torch.ones(2, 2), 3)
        """, "GT553"), Shape("""
        def adapt(net, init, steps):
            head = init.detach().requires_grad_()
            inner = torch.optim.SGD(list(net.parameters()) + [head], lr=0.1)
            for _ in range(steps):
                loss = (net(torch.ones(1, 3)) @ head).sum()
                loss.backward()
                inner.step()
                inner.zero_grad()
                head.grad.fill_(0)
            return head
        out = adapt(nn.Linear(3, 2), torch.ones(2, 2), 3)
        """, "GT553", line=8, raises=(AttributeError, "'NoneType' object has no attribute"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# lightning-tutorials (UvA meta-learning, ProtoMAML): `training_step` calls `outer_loop`, which
# runs `loss.backward()` per task and steps `self.optimizers()` itself, then returns None on
# purpose: under automatic optimization the weights still move. Twin: the method only logs
# its loss: Lightning skips every batch, the weights never move
LIGHTNING = """
import tempfile
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, TensorDataset


class Proto(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)

    def outer(self, batch):
        x, y = batch
        loss = F.mse_loss(self.net(x), y)
        {body}

    def training_step(self, batch, batch_idx):
        self.outer(batch)
        return None

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
model = Proto()
before = [p.detach().clone() for p in model.parameters()]
L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
          enable_model_summary=False, default_root_dir=tempfile.mkdtemp()).fit(model, data)
moved = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
"""
STEPS = "loss.backward()\n        opt = self.optimizers()\n        opt.step()\n        opt.zero_grad()"


@pytest.mark.xdist_group("frameworks")  # lightning imported once (tests/conftest.py)
@pytest.mark.parametrize("body,line", [
    (STEPS, None),  # the look-alike: the method steps `self.optimizers()` itself
    ("self.log('train_loss', loss)", 22),  # the twin: nothing steps, the batch is skipped
])
def test_training_step_that_steps_by_hand(body: str, line: int | None) -> None:
    pytest.importorskip("lightning")
    import warnings
    src = LIGHTNING.replace("{body}", body)
    got = [(f.line, f.code) for f in check_source(src, "t.py") if f.code == "GT530"]
    assert got == ([] if line is None else [(line, "GT530")])
    env: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(src, "t.py", "exec"), env)
    assert env["moved"] is (line is None)
