"""Facts that carry across a call (session 14, helper "staticho"; docs/triage/staticho.md).

- what a module call gives back is what every `return` of its class's `forward` makes, read
  in `forward` (`self.softmax` is the `nn.Softmax` `__init__` assigned; NOTE [module outputs]):
  GT758 (a softmax into cross_entropy) and GT756 (the log of a sigmoid) at the caller's loss.
- loop protocol (NOTE [first pass], NOTE [stepped through self]): GT515 when the guard of a
  scheduler step is already true on the loop's first pass, when the optimizer steps in a
  method called through `self`, and when the scheduler steps in place of the optimizer (the
  other arm of an `if` no pass changes).
- a helper whose every result is computed under `no_grad` cuts it for every caller
  (NOTE [grad-off returns]), also as a method of an instance of a class of the file: GT202
  when one term of the loss is built only from it.
- `F.relu(x, inplace=True)` (and the other functional ops with `inplace=`) writes `x` in
  place; a cast copy of a new tensor (`torch.from_numpy(a).float()`) made to require grad is
  a leaf: GT302.
- GT751 judges a guard on `x` protecting an op on arithmetic of `x` (`sqrt(1 - x ** 2)`) by
  the values of that arithmetic beyond the guard's bound.
- a class whose `__init__` puts a submodule in eval mode, then `model.train()` before a
  step: GT443 (DeepLab's `freeze_bn()` called from the constructor).
- a gradient clip on every pass of an accumulation loop whose step runs every few passes:
  GT532.
- what `forward` is given is what every call of an instance of its class passes (NOTE
  [instance calls]): GT205 on a reentrant checkpoint of the raw input.
- a state carried across the passes of a loop that backwards with `retain_graph=True` and
  steps an optimizer: GT506 (the kept graph's saved weights were changed in place).

Each entry: a look-alike that must stay silent and run, and buggy twins in other spellings
reported on the given line; all run on real torch (tests/lint/shape_runner.py).
"""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT758: the softmax is a module attribute applied at the end of forward
    "softmax-attribute-ends-forward": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 3)
                self.act = nn.LogSoftmax(dim=1)
            def forward(self, x):
                return self.act(self.fc(x))
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = F.nll_loss(model(torch.randn(4, 6)), torch.tensor([0, 1, 2, 0]))
        loss.backward()
        opt.step()
        """, "GT758"), [Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 3)
                self.act = nn.Softmax(dim=1)
            def forward(self, x):
                probs = self.act(self.fc(x))
                return probs
        model = Net()
        criterion = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        out = model(x=torch.randn(4, 6))
        loss = criterion(out, torch.tensor([0, 1, 2, 0]))
        loss.backward()
        opt.step()
        """, "GT758", 7), Shape("""
        class Student(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 3)
                self.out_act = nn.Softmax(dim=-1)
            def forward(self, x):
                h = self.fc(x)
                return self.out_act(h)
        student = Student()
        kl = nn.KLDivLoss(reduction="batchmean")
        target = F.softmax(torch.randn(4, 3), dim=-1)
        div = kl(student(torch.randn(4, 6)), target)
        div.backward()
        """, "GT758", 8)]),
    # GT756: the log of what a model ending in a sigmoid gives back
    "sigmoid-ends-forward": (Shape("""
        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 1)
            def forward(self, x):
                return self.fc(x).squeeze(-1)
        model = Gate()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        y = torch.tensor([0.0, 1.0, 1.0, 0.0])
        z = model(torch.randn(4, 6))
        loss = -(y * F.logsigmoid(z) + (1 - y) * F.logsigmoid(-z)).mean()
        loss.backward()
        opt.step()
        """, "GT756"), [Shape("""
        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 1)
                self.squash = nn.Sigmoid()
            def forward(self, x):
                return self.squash(self.fc(x)).squeeze(-1)
        model = Gate()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        y = torch.tensor([0.0, 1.0, 1.0, 0.0])
        p = model(torch.randn(4, 6))
        loss = -(y * torch.log(p + 1e-8) + (1 - y) * torch.log(1 - p)).mean()
        loss.backward()
        opt.step()
        """, "GT756", 12)]),

    # GT515: a guard the first pass already passes; the optimizer steps in a method of self
    "scheduler-guard-and-self-method": (Shape("""
        class cfg:
            START = 0
        class Trainer:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
                self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=1)
            def fit(self):
                for epoch in range(3):
                    if epoch > cfg.START:
                        self.sched.step()
                    self.one_epoch()
            def one_epoch(self):
                self.opt.zero_grad()
                self.net(torch.randn(2, 3)).sum().backward()
                self.opt.step()
        Trainer().fit()
        """, "GT515"), [Shape("""
        class cfg:
            START = -1
        class Trainer:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
                self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=1)
            def fit(self):
                for epoch in range(3):
                    if epoch > cfg.START:
                        self.sched.step()
                    self.one_epoch()
            def one_epoch(self):
                self.opt.zero_grad()
                self.net(torch.randn(2, 3)).sum().backward()
                self.opt.step()
        Trainer().fit()
        """, "GT515", 11), Shape("""
        WARMUP = 0
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        for i, x in enumerate([torch.randn(2, 3)] * 3):
            if i >= WARMUP:
                sched.step()
            opt.zero_grad()
            net(x).sum().backward()
            opt.step()
        """, "GT515", 7)]),
    # GT515: the scheduler steps in the arm of an `if` whose other arm steps the optimizer
    "scheduler-in-place-of-optimizer": (Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2) if net.in_features else None
        for i in range(4):
            opt.zero_grad()
            net(torch.randn(2, 3)).sum().backward()
            if i % 2 == 0:
                opt.step()
            else:
                opt.step()
                sched.step()
        """, "GT515"), [Shape("""
        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        use_schedule = True
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2) if use_schedule else None
        for i in range(4):
            opt.zero_grad()
            net(torch.randn(2, 3)).sum().backward()
            if use_schedule:
                sched.step()
            else:
                opt.step()
        """, "GT515", 10, holds="bool((net.weight == w0).all())")]),
    # GT202: one term of the loss is built only from a helper's no_grad result
    "no-grad-helper-term": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc, self.head, self.aux = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)
            def aux_logits(self, h):
                z = self.aux(h)
                with torch.no_grad():
                    self.last_norm = z.norm()
                return z
        class Teacher:
            def __init__(self):
                self.net = nn.Linear(4, 2)
            @torch.no_grad()
            def soft_targets(self, x):
                return F.softmax(self.net(x), dim=-1)
        model, teacher = Net(), Teacher()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(3, 4), torch.tensor([0, 1, 1])
        h = model.enc(x)
        kd = F.kl_div(F.log_softmax(model.head(h), -1), teacher.soft_targets(x), reduction="batchmean")
        loss = F.cross_entropy(model.head(h), y) + F.cross_entropy(model.aux_logits(h), y) + kd
        loss.backward()
        opt.step()
        """, "GT202", holds="model.aux.weight.grad is not None"), [Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc, self.head, self.aux = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)
            def aux_logits(self, h):
                with torch.no_grad():
                    z = self.aux(h)
                return z
        class Trainer:
            def __init__(self):
                self.model = Net()
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def step(self, x, y):
                h = self.model.enc(x)
                aux = self.model.aux_logits(h)
                loss = F.cross_entropy(self.model.head(h), y) + 0.5 * F.cross_entropy(aux, y)
                loss.backward()
                self.opt.step()
        t = Trainer()
        t.step(torch.randn(3, 4), torch.tensor([0, 1, 1]))
        """, "GT202", 6, holds="t.model.aux.weight.grad is None"), Shape("""
        @torch.no_grad()
        def project(layer, h):
            return layer(h).tanh()
        enc, proj = nn.Linear(4, 4), nn.Linear(4, 4)
        opt = torch.optim.SGD([*enc.parameters(), *proj.parameters()], lr=0.1)
        h = enc(torch.randn(3, 4))
        loss = h.pow(2).mean() + F.mse_loss(project(proj, h), torch.zeros(3, 4))
        loss.backward()
        opt.step()
        """, "GT202", 1, holds="proj.weight.grad is None")]),
    # GT506: the hidden state is carried, retain_graph=True hides the first error
    "carried-state-retained-graph": (Shape("""
        rnn, head = nn.GRU(3, 5, batch_first=True), nn.Linear(5, 1)
        opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
        h = torch.zeros(1, 2, 5)
        for x in [torch.randn(2, 4, 3) for _ in range(3)]:
            h = h.detach()
            out, h = rnn(x, h)
            main = out.pow(2).mean()
            aux = head(out).mean()
            opt.zero_grad()
            main.backward(retain_graph=True)
            aux.backward()
            opt.step()
        """, "GT506"), [Shape("""
        rnn, head = nn.GRU(3, 5, batch_first=True), nn.Linear(5, 1)
        opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
        state = torch.zeros(1, 2, 5)
        for x in [torch.randn(2, 4, 3) for _ in range(3)]:
            opt.zero_grad()
            out, state = rnn(x, state)
            head(out).mean().backward(retain_graph=True)
            opt.step()
        """, "GT506", 6, raises=(RuntimeError, "modified by an inplace operation"))]),
    # GT302: a functional op's inplace=True writes a leaf that requires grad
    "inplace-keyword-on-leaf": (Shape("""
        w = torch.randn(4, 3, requires_grad=True)
        h = w * 2
        h = F.relu(h, inplace=True)
        x = torch.randn(4, 3)
        x = F.dropout(x, p=0.1, inplace=True)
        (h + x).sum().backward()
        """, "GT302"), [Shape("""
        import numpy as np
        x = torch.from_numpy(np.random.randn(4, 3)).float().requires_grad_(True)
        x = F.relu(x, inplace=True)
        x.sum().backward()
        """, "GT302", 3, raises=(RuntimeError, "leaf Variable that requires grad")), Shape("""
        w = torch.zeros(4, 3).requires_grad_()
        F.leaky_relu(w, 0.2, inplace=True)
        """, "GT302", 2, raises=(RuntimeError, "leaf Variable that requires grad"))]),
    # GT751: the guard tests x, the singular op consumes arithmetic of x
    "where-guard-on-arithmetic": (Shape("""
        p = nn.Parameter(torch.linspace(-3.0, 3.0, 16))
        r = p * 1.0
        y = torch.where(r > 2, torch.sqrt(2 ** r), r / 3)
        y.sum().backward()
        """, "GT751", holds="bool(torch.isfinite(p.grad).all())"), [Shape("""
        p = nn.Parameter(torch.linspace(0.0, 3.0, 16))
        r = p * 1.0
        y = torch.where(r > 1, torch.sqrt(r * r - 1), torch.zeros_like(r))
        y.sum().backward()
        """, "GT751", 3, holds="bool(torch.isnan(p.grad).any())"), Shape("""
        def f(x):
            inner = torch.log(1 - x / 2)
            outer = x - 2
            return torch.where(x < 2, inner, outer)
        x = torch.linspace(0.5, 3.0, 6, requires_grad=True)
        f(x).sum().backward()
        """, "GT751", 4, holds="not bool(torch.isfinite(x.grad).all())")]),
    # GT443: the eval mode set while the model was built is undone by model.train()
    "eval-at-construction-undone": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
                self.head = nn.Linear(4, 2)
                self.encoder.eval()
            def forward(self, x):
                return self.head(self.encoder(x))
        net = Net()
        opt = torch.optim.SGD(net.head.parameters(), lr=0.1)
        before = net.encoder[1].running_mean.clone()
        for epoch in range(2):
            net.train()
            net.encoder.eval()
            opt.zero_grad()
            net(torch.randn(8, 4) + 3).sum().backward()
            opt.step()
        """, "GT443", holds="torch.equal(net.encoder[1].running_mean, before)"), [Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
                self.head = nn.Linear(4, 2)
                self.encoder.eval()
            def forward(self, x):
                return self.head(self.encoder(x))
        net = Net()
        opt = torch.optim.SGD(net.head.parameters(), lr=0.1)
        before = net.encoder[1].running_mean.clone()
        for epoch in range(2):
            net.train()
            opt.zero_grad()
            net(torch.randn(8, 4) + 3).sum().backward()
            opt.step()
        """, "GT443", 13, holds="not torch.equal(net.encoder[1].running_mean, before)"), Shape("""
        class Seg(nn.Module):
            def __init__(self, freeze_bn=True):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
                if freeze_bn:
                    self._freeze()
            def _freeze(self):
                for m in self.modules():
                    if isinstance(m, nn.BatchNorm2d):
                        m.eval()
            def forward(self, x):
                return self.body(x)
        def train_epoch(model, opt):
            model.train()
            opt.zero_grad()
            model(torch.rand(2, 3, 8, 8)).mean().backward()
            opt.step()
        seg = Seg()
        train_epoch(seg, torch.optim.SGD(seg.parameters(), lr=0.1))
        """, "GT443", 14, holds="seg.body[1].training")]),
    # GT443: the class's own method re-applies the eval right after `net.train()`, the model
    # being the function's parameter (held-out 10's IndexNet fix)
    "eval-at-construction-reapplied-by-method": (Shape("""
        class Seg(nn.Module):
            def __init__(self, freeze_bn=True):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
                if freeze_bn:
                    self.freeze_bn()
            def freeze_bn(self):
                for m in self.modules():
                    if isinstance(m, nn.BatchNorm2d):
                        m.eval()
            def describe(self):
                return sum(p.numel() for p in self.parameters())
            def forward(self, x):
                return self.body(x)
        def train_epoch(net, opt):
            net.train()
            net.freeze_bn()
            opt.zero_grad()
            net(torch.rand(2, 3, 8, 8)).mean().backward()
            opt.step()
        seg = Seg()
        train_epoch(seg, torch.optim.SGD(seg.parameters(), lr=0.1))
        """, "GT443", holds="not seg.body[1].training"), [Shape("""
        class Seg(nn.Module):
            def __init__(self, freeze_bn=True):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
                if freeze_bn:
                    self.freeze_bn()
            def freeze_bn(self):
                for m in self.modules():
                    if isinstance(m, nn.BatchNorm2d):
                        m.eval()
            def describe(self):
                return sum(p.numel() for p in self.parameters())
            def forward(self, x):
                return self.body(x)
        def train_epoch(net, opt):
            net.train()
            net.describe()
            opt.zero_grad()
            net(torch.rand(2, 3, 8, 8)).mean().backward()
            opt.step()
        seg = Seg()
        train_epoch(seg, torch.optim.SGD(seg.parameters(), lr=0.1))
        """, "GT443", 16, holds="seg.body[1].training")]),
    # GT603: the write's target is the output of a module class of the file whose forward
    # returns a ReLU's output (held-out 10's CDC ResnetBlock)
    "inplace-on-output-of-file-block": (Shape("""
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(d, d), nn.ReLU())
            def forward(self, x):
                return self.body(x)
        class Res(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.block = Block(d)
                self.skip = nn.Sequential(nn.Linear(d, d), nn.Dropout(0.0))
            def forward(self, x):
                h = self.block(x)
                h = h + self.skip(x)
                return h
        net = Res(4)
        net(torch.randn(3, 4)).sum().backward()
        """, "GT603", holds="net.skip[0].weight.grad is not None"), [Shape("""
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(d, d), nn.ReLU())
            def forward(self, x):
                return self.body(x)
        class Res(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.block = Block(d)
                self.skip = nn.Sequential(nn.Linear(d, d), nn.Dropout(0.0))
            def forward(self, x):
                h = self.block(x)
                h += self.skip(x)
                return h
        net = Res(4)
        net(torch.randn(3, 4)).sum().backward()
        """, "GT603", 14, raises=(RuntimeError, "modified by an inplace operation"))]),
    # GT532: the clip runs on every pass, the step every few passes
    "clip-every-accumulation-pass": (Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i, x in enumerate([torch.randn(2, 4) for _ in range(4)]):
            (model(x).pow(2).mean() / 2).backward()
            if (i + 1) % 2 == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                opt.step()
                opt.zero_grad()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        """, "GT532"), [Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        accum = 2
        for step, x in enumerate([torch.randn(2, 4) for _ in range(4)]):
            loss = model(x).pow(2).mean() / accum
            loss.backward()
            torch.nn.utils.clip_grad_value_(model.parameters(), 0.1)
            do_step = (step + 1) % accum == 0
            if do_step:
                opt.step()
                opt.zero_grad()
        """, "GT532", 7)]),
    # GT532 look-alike (held-out 8, pytorch-transformers-classification run with one
    # accumulation step): the period is the constant 1, so the step runs on every pass and
    # each clip sees the whole gradient. Twins: the same dict asking for 2, and a 1 written
    # over by key later (the period is then not known to be 1)
    "clip-every-pass-period-one": (Shape("""
        args = {'max_grad_norm': 1.0, 'gradient_accumulation_steps': 1}
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(4):
            model(torch.randn(2, 4)).pow(2).mean().backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args['max_grad_norm'])
            if (step + 1) % args['gradient_accumulation_steps'] == 0:
                opt.step()
                model.zero_grad()
        """, "GT532"), [Shape("""
        args = {'max_grad_norm': 1.0, 'gradient_accumulation_steps': 2}
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(4):
            model(torch.randn(2, 4)).pow(2).mean().backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args['max_grad_norm'])
            if (step + 1) % args['gradient_accumulation_steps'] == 0:
                opt.step()
                model.zero_grad()
        """, "GT532", 6), Shape("""
        cfg = {'accum': 1}
        cfg['accum'] = 4
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(8):
            model(torch.randn(2, 4)).pow(2).mean().backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if (step + 1) % cfg['accum'] == 0:
                opt.step()
                model.zero_grad()
        """, "GT532", 7)]),
    # GT205: forward checkpoints its own input, which every call site passes as raw data
    "checkpoint-of-forward-input": (Shape("""
        from torch.utils.checkpoint import checkpoint
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem, self.head = nn.Linear(4, 4), nn.Linear(4, 2)
            def forward(self, h):
                return self.head(checkpoint(self.stem, h, use_reentrant=True))
        emb = nn.Linear(3, 4)
        model = Net()
        x = torch.randn(2, 3)
        model(emb(x)).sum().backward()
        """, "GT205", holds="model.stem.weight.grad is not None"), [Shape("""
        from torch.utils.checkpoint import checkpoint
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem, self.head = nn.Linear(4, 4), nn.Linear(4, 2)
            def forward(self, x):
                out = checkpoint(self.stem, x, use_reentrant=True)
                return self.head(out)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = [(torch.randn(2, 4), torch.tensor([0, 1]))]
        for images, labels in loader:
            opt.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            opt.step()
        """, "GT205", 7, holds="model.stem.weight.grad is None")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name,i", [(n, i) for n, (_, twins) in sorted(SHAPES.items())
                                    for i in range(len(twins))])
def test_buggy_twin_is_reported(name: str, i: int) -> None:
    judge(PRELUDE, SHAPES[name][1][i])


# GT451 (checker only: DDP needs a process group): an `is None` branch in `forward` counts
# when the training code passes None on some passes only
DDP_MODEL = """
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

class Planner(nn.Module):
    def __init__(self):
        super().__init__()
        self.agents = nn.Linear(6, 8)
        self.route = nn.Linear(4, 8)
    def forward(self, agents, route=None):
        h = self.agents(agents)
        if route is not None:
            h = h + self.route(route)
        return h
"""


@pytest.mark.parametrize("loop,line", [
    ("""
def main(batches):
    model = DDP(Planner())
    for step, (a, r) in enumerate(batches):
        model(a, r if step % 2 else None).sum().backward()
""", 18),
    ("""
def main(batches):
    net = DDP(Planner(), device_ids=None)
    for a, r, has_route in batches:
        lanes = r if has_route else None
        net(agents=a, route=lanes).sum().backward()
""", 18),
    ("""
def main(batches):
    model = DDP(Planner())
    for a, r in batches:
        model(a, r).sum().backward()
""", None),
    ("""
def main(batches):
    model = DDP(Planner())
    for a, r in batches:
        model(a).sum().backward()
""", None),
])
def test_ddp_branch_on_argument_sometimes_none(loop: str, line: int | None) -> None:
    from gradtrace.lint import check_source
    found = check_source(DDP_MODEL + loop, "ddp.py", select=["GT451"])
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT451")])


def test_no_grad_target_handed_to_a_method_that_runs_layers_is_silent() -> None:
    """d3rlpy's FQE (gate corpus c2): the target is computed under `no_grad` by one method and
    handed to another method of the file, whose body runs the Q-function: not the whole
    loss (NOTE [grad-off returns])."""
    from gradtrace.lint import check_source
    src = '''
import torch

class Impl:
    def __init__(self, q, targ_q, opt):
        self._q, self._targ, self._opt = q, targ_q, opt

    def compute_loss(self, batch, q_tpn):
        return self._q.compute_error(batch, target=q_tpn)

    def compute_target(self, batch):
        with torch.no_grad():
            return self._targ.compute_target(batch)

    def inner_update(self, batch):
        q_tpn = self.compute_target(batch)
        loss = self.compute_loss(batch, q_tpn)
        self._opt.zero_grad()
        loss.backward()
        self._opt.step()
'''
    assert [f.code for f in check_source(src, "fqe.py")] == []


@pytest.mark.parametrize("src", [
    # kornia (gate corpus c2): a sample count rounded up; the log1p carries no gradient
    """
import torch
def samples_needed(support, m, confidence, budget):
    probability = torch.ones_like(support)
    needed = torch.ceil(torch.log1p(-confidence) / torch.log1p(-probability))
    bounded = (confidence < 1) & (needed < budget)
    return torch.where(bounded, needed, budget)
""",
    # kornia's Charbonnier loss: the root's input is kept off 0 by `+ 1.0`
    """
import torch
def charbonnier(a, b):
    squared = (a - b) ** 2
    small = squared < 1.0
    small_squared = torch.where(small, squared, 0.0)
    return torch.where(small, small_squared / ((small_squared + 1.0).sqrt() + 1.0),
                       (squared + 1.0).sqrt() - 1.0)
"""])
def test_where_guard_on_arithmetic_look_alikes_are_silent(src: str) -> None:
    from gradtrace.lint import check_source
    assert [f.code for f in check_source(src, "k.py", select=["GT751"])] == []


# GT456 (checker only: DDP needs a process group): a module whose class freezes every
# parameter it has when it is built (NOTE [frozen at construction]), wrapped in DDP
FROZEN_CLS = """
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

class Critic(nn.Module):
    def __init__(self, trainable_head=False):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
        self.head = nn.Linear(4, 1)
        self.body.requires_grad_(False)
        {head}
    def forward(self, x):
        return self.head(self.body(x).mean((2, 3)))
"""


@pytest.mark.parametrize("head,wrap,line", [
    ("self.head.requires_grad_(False)", "crit = DistributedDataParallel(Critic())", 15),
    ("for p in self.head.parameters(): p.requires_grad = False",
     "def main():\n    c = Critic()\n    return DistributedDataParallel(c, device_ids=None)", 17),
    ("pass", "crit = DistributedDataParallel(Critic())", None),
    ("if not trainable_head: self.head.requires_grad_(False)",
     "crit = DistributedDataParallel(Critic(True))", None),
])
def test_ddp_wraps_module_frozen_at_construction(head: str, wrap: str, line: int | None) -> None:
    from gradtrace.lint import check_source
    src = FROZEN_CLS.replace("{head}", head) + "\n" + wrap + "\n"
    found = check_source(src, "ddp.py", select=["GT456"])
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT456")])
