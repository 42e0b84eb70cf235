"""Held-out 9 mechanisms that no rule read (docs/triage/norule.md): GT533 (a group added after a
scheduler that cannot follow it), GT457/GT458 (an EMA copy that copies nothing), GT710 (a legacy
backward hook reading grad_input), GT711 (a hooked module run through `.forward`).

Each entry: a correct look-alike that must stay silent and run, and buggy twins in spellings
other than the case's and the rule's examples, reported on their line, that really fail on
torch (``raises``) or show the silent symptom (``holds``).
"""
from __future__ import annotations

import textwrap
import warnings

import pytest
from test_heldout_shapes import PRELUDE, Shape

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "gt533-scheduler-after-groups": (Shape("""
        from torch.optim.lr_scheduler import OneCycleLR, StepLR
        net = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1))
        opt = torch.optim.SGD(net[0].parameters(), lr=0.1)
        decay = StepLR(opt, step_size=1)
        opt.add_param_group({"params": net[1].parameters(), "lr": 0.05})
        cycle = OneCycleLR(opt, max_lr=0.1, total_steps=10)
        for _ in range(3):
            net(torch.randn(2, 3)).sum().backward()
            opt.step()
            cycle.step()
            decay.step()
        """, "GT533", holds="len(cycle.base_lrs) == 2"), [Shape("""
        class Finetune:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.SGD(net[1].parameters(), lr=0.1)
                self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, 0.1, total_steps=10)

            def unfreeze(self):
                self.opt.add_param_group({"params": self.net[0].parameters()})

            def epoch(self):
                self.net(torch.randn(2, 3)).sum().backward()
                self.opt.step()
                self.sched.step()

        job = Finetune(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1)))
        job.epoch()
        job.unfreeze()
        job.epoch()
        """, "GT533", 8, "initial_lr"), Shape("""
        from torch.optim import lr_scheduler as S
        head, body = nn.Linear(4, 1), nn.Linear(3, 4)
        opt = torch.optim.Adam(head.parameters(), lr=1e-3)
        mult = S.MultiplicativeLR(optimizer=opt, lr_lambda=lambda e: 0.9)
        for epoch in range(3):
            if epoch == 1:
                opt.add_param_group(dict(params=list(body.parameters())))
            head(body(torch.randn(2, 3))).sum().backward()
            opt.step()
            mult.step()
        """, "GT533", 7, "longer than argument 1"), Shape("""
        def train(net):
            opt = torch.optim.SGD(net[1].parameters(), lr=0.1)
            warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=4)
            opt.add_param_group({"params": net[0].parameters(), "lr": 0.1})
            for _ in range(4):
                net(torch.randn(2, 3)).sum().backward()
                opt.step()
                warm.step()
            return opt
        groups = train(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1))).param_groups
        """, "GT533", 4, holds="groups[1]['lr'] > 0.1 + 1e-9")]),
    "gt457-ema-reads-model": (Shape("""
        class MeanTeacher:
            def __init__(self, student, teacher):
                self.s = list(student.state_dict().values())
                self.t = list(teacher.state_dict().values())

            @torch.no_grad()
            def update(self, d=0.9):
                for t, s in zip(self.t, self.s):
                    t.lerp_(s, 1 - d)

        student, teacher = nn.Linear(3, 2), nn.Linear(3, 2)
        before = teacher.weight.clone()
        MeanTeacher(student, teacher).update()
        """, "GT457", holds="not torch.equal(before, teacher.weight)"), [Shape("""
        student, teacher = nn.Linear(3, 2), nn.Linear(3, 2)
        before = teacher.weight.clone()
        with torch.no_grad():
            for t, s in zip(list(teacher.state_dict().values()),
                            list(student.state_dict().values())):
                t.copy_(t * 0.9 + 0.1 * t)
        """, "GT457", 6, holds="torch.allclose(before, teacher.weight)"), Shape("""
        class MeanTeacher:
            def __init__(self, student, teacher):
                self.s = list(student.parameters())
                self.t = list(student.parameters())

            @torch.no_grad()
            def update(self, d=0.9):
                for t, s in zip(self.t, self.s):
                    t.lerp_(s, 1 - d)

        student, teacher = nn.Linear(3, 2), nn.Linear(3, 2)
        before = teacher.weight.clone()
        MeanTeacher(student, teacher).update()
        """, "GT457", 9, holds="torch.equal(before, teacher.weight)")]),
    "gt458-copy-into-tensor": (Shape("""
        student, teacher = nn.Linear(3, 2), nn.Linear(3, 2)
        sizes = []
        for name, p in teacher.named_parameters():
            p.data.copy_(student.state_dict()[name])
            p = p.detach().flatten()
            sizes.append(p.numel())
        """, "GT458", holds="torch.equal(student.weight, teacher.weight)"), [Shape("""
        student, teacher = nn.Linear(3, 2), nn.Linear(3, 2)
        src = student.state_dict()
        for name, p in teacher.named_parameters():
            p = src[name].clone()
        """, "GT458", 4, holds="not torch.equal(student.weight, teacher.weight)"), Shape("""
        class Ema:
            def __init__(self, model, shadow):
                self.params = list(model.parameters())
                self.shadow = list(shadow.parameters())
                for s, p in zip(self.shadow, self.params):
                    if p.requires_grad:
                        s = p.detach().clone()

        model, shadow = nn.Linear(3, 2), nn.Linear(3, 2)
        Ema(model, shadow)
        """, "GT458", 7, holds="not torch.equal(model.weight, shadow.weight)")]),
    "gt710-full-hook": (Shape("""
        class Gate(nn.Module):
            def forward(self, x, y):
                return torch.sigmoid(x) * y

        got = []
        gate = Gate()
        gate.register_full_backward_hook(lambda m, gin, gout: got.append(len(gin)))
        a, b = torch.randn(2, requires_grad=True), torch.randn(2, requires_grad=True)
        gate(a, b).sum().backward()
        """, "GT710", holds="got == [2]"), [Shape("""
        class Probe:
            def __init__(self, net):
                self.shapes = []
                net.body.register_backward_hook(self.keep)

            def keep(self, module, grad_in, grad_out):
                self.shapes.append(tuple(grad_in[0].shape))

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(3, 5), nn.ReLU())

            def forward(self, x):
                return self.body(x)

        net = Net()
        probe = Probe(net)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            net(torch.randn(4, 3, requires_grad=True)).sum().backward()
        """, "GT710", 4, holds="probe.shapes == [(4, 5)]"), Shape("""
        class Gate(nn.Module):
            def forward(self, x, y):
                return torch.sigmoid(x) * y

        def watch(gate):
            got = []
            def count(module, grad_input, grad_output):
                got.append(len(grad_input))
            gate.register_backward_hook(count)
            return got

        gate = Gate()
        got = watch(gate)
        a, b = torch.randn(2, requires_grad=True), torch.randn(2, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gate(a, b).sum().backward()
        """, "GT710", 9, holds="got == [2]")]),
    "gt711-call-the-module": (Shape("""
        net = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        seen = []
        net.register_forward_hook(lambda m, i, o: seen.append(o.shape))
        net(torch.randn(2, 3))
        net[0].forward(torch.randn(2, 3))
        """, "GT711", holds="len(seen) == 1"), [Shape("""
        net = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        seen = []
        net[0].register_full_backward_hook(lambda m, gi, go: seen.append(go[0].shape))
        out = net[0].forward(torch.randn(2, 3, requires_grad=True))
        out.sum().backward()
        """, "GT711", 4, holds="seen == [] and net[0].weight.grad is not None"), Shape("""
        def encode(enc, x):
            calls = []
            enc.register_forward_pre_hook(lambda m, args: calls.append(1))
            for _ in range(2):
                enc.forward(x)
            return calls
        calls = encode(nn.Linear(3, 2), torch.randn(1, 3))
        """, "GT711", 5, holds="calls == []"), Shape("""
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(3, 4)
                self.feats = []
                self.enc.register_forward_hook(lambda m, i, o: self.feats.append(o))

            def forward(self, x):
                return self.enc.forward(x).sum(1)

        tagger = Tagger()
        tagger(torch.randn(2, 3))
        """, "GT711", 9, holds="tagger.feats == []")]),
}


def _source(shape: Shape) -> str:
    return PRELUDE + "import warnings\n" + textwrap.dedent(shape.src).lstrip("\n")


def _found(shape: Shape) -> list[tuple[int, str]]:
    found = check_source(_source(shape), "shape.py", select=[shape.code])
    offset = PRELUDE.count("\n") + 1
    return sorted((f.line - offset, f.code) for f in found)


def _run(shape: Shape) -> dict:
    env: dict = {}
    code = compile(_source(shape), "shape.py", "exec")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if shape.raises:
            with pytest.raises((RuntimeError, TypeError, KeyError, ValueError),
                               match=shape.raises):
                exec(code, env)
        else:
            exec(code, env)
    if shape.holds:
        assert eval(shape.holds, env), shape.holds
    return env


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_show_the_symptom(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
