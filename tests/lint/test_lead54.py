"""The lead's session-54 fact: a training step that hands on what a shared step made under
grad-off (NOTE [returned helper result], NOTE [method of an instance]). The probe
(benchmarks/probes/lead54/q07_shared_step_no_grad.py) crashes on torch 2.13 with "element 0 of
tensors does not require grad"; each buggy twin here is another style of the same chain."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

CASES = {
    # a Lightning-style module: training_step unpacks the shared step's tuple
    "lightning_tuple": ("""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x)

            def _step(self, batch):
                x, y = batch
                with torch.no_grad():
                    out = self(x)
                return F.cross_entropy(out, y), out.argmax(1)

            def training_step(self, batch):
                loss, pred = self._step(batch)
                return loss

        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for batch in [(torch.randn(3, 4), torch.tensor([0, 1, 0]))]:
            loss = net.training_step(batch)
            loss.backward()
            opt.step()
        """, [("GT202", 15)]),
    # a trainer object's method called through its instance, a decorator this time
    "trainer_method": ("""
        import torch
        import torch.nn as nn

        class Runner:
            def __init__(self, model):
                self.model = model

            @torch.no_grad()
            def predict(self, x):
                return self.model(x)

            def loss_of(self, x, y):
                return ((self.predict(x) - y) ** 2).mean()

        model = nn.Linear(3, 1)
        runner = Runner(model)
        opt = torch.optim.Adam(model.parameters())
        x, y = torch.randn(5, 3), torch.randn(5, 1)
        out = runner.predict(x)
        loss = ((out - y) ** 2).mean()
        loss.backward()
        opt.step()
        """, [("GT202", 8)]),
    # look-alike: only the metric is computed under no_grad, the loss keeps its graph
    "metric_only_ok": ("""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x)

            def _step(self, batch):
                x, y = batch
                out = self(x)
                with torch.no_grad():
                    acc = (out.argmax(1) == y).float().mean()
                return F.cross_entropy(out, y), acc

            def training_step(self, batch):
                loss, acc = self._step(batch)
                return loss

        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for batch in [(torch.randn(3, 4), torch.tensor([0, 1, 0]))]:
            loss = net.training_step(batch)
            loss.backward()
            opt.step()
        """, []),
    # look-alike: the no-grad element is the one not used; recursion must not loop
    "other_element_ok": ("""
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                return self.fc(x)

            def both(self, x):
                out = self(x)
                with torch.no_grad():
                    ref = self(x)
                return out, ref

            def again(self, x, n):
                if n:
                    return self.again(x, n - 1)
                return self(x)

            def step(self, x):
                out, ref = self.both(x)
                return (out - ref).pow(2).mean() + self.again(x, 2).mean()

        net = Net()
        loss = net.step(torch.randn(2, 4))
        loss.backward()
        """, []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_off_result_handed_on(name):
    src, want = CASES[name]
    found = sorted((f.code, f.line) for f in check_source(textwrap.dedent(src).lstrip("\n"), "m.py")
                   if f.code.startswith("GT2"))
    assert found == want


NONLEAF = {
    "instance_attr": ("""
        import torch

        class Calibrator:
            def __init__(self):
                self.temperature = torch.ones(1, requires_grad=True) * 1.5

        cal = Calibrator()
        opt = torch.optim.LBFGS([cal.temperature], lr=0.01)
        """, [("GT306", 5)]),
    "instance_attr_leaf_ok": ("""
        import torch

        class Calibrator:
            def __init__(self):
                self.temperature = (torch.ones(1) * 1.5).requires_grad_()
                self.scaled = self.temperature * 2

        cal = Calibrator()
        opt = torch.optim.LBFGS([cal.temperature], lr=0.01)
        """, []),
}


@pytest.mark.parametrize("name", sorted(NONLEAF))
def test_non_leaf_attribute_of_an_instance_given_to_the_optimizer(name):
    """`clf.w` read through an instance of the file's class (the analysis layer's kind)
    is the attribute its `__init__` set; torch 2.13 raises "can't optimize a non-leaf Tensor"
    for the buggy twin and accepts the look-alike."""
    src, want = NONLEAF[name]
    code = textwrap.dedent(src).lstrip("\n")
    found = sorted((f.code, f.line) for f in check_source(code, "m.py") if f.code.startswith("GT3"))
    assert found == want
    try:
        exec(compile(code, name, "exec"), {})
        raised = False
    except ValueError:
        raised = True
    assert raised == bool(want)


BUILDERS = {
    # a builder replaces the head after building the optimizer and hands both back
    "builder_inline": ("""
        import torch
        import torch.nn as nn

        def make(n_out):
            model = nn.Module()
            model.body = nn.Linear(8, 16)
            model.head = nn.Linear(16, 100)
            optim = torch.optim.Adam(model.parameters(), lr=1e-3)
            model.head = nn.Linear(16, n_out)
            return model, optim

        model, optim = make(3)
        """, [("GT404", 9)]),
    # the replacement is in a helper the builder calls: the call leads (the optimizer is
    # built before it: build it after the call), as for a helper called in a loop
    "builder_helper": ("""
        import torch
        import torch.nn as nn

        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(12, 32)
                self.fc = nn.Linear(32, 1000)

            def forward(self, x):
                return self.fc(self.body(x))

        def adapt_head(net, num_classes):
            net.fc = nn.Linear(net.fc.in_features, num_classes)
            return net

        def build(num_classes):
            net = Backbone()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            net = adapt_head(net, num_classes)
            return net, opt
        """, [("GT404", 20)]),
    # look-alike: the head is replaced first, the optimizer built after
    "builder_ok": ("""
        import torch
        import torch.nn as nn

        def make(n_out):
            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 100))
            model[2] = nn.Linear(16, n_out)
            optim = torch.optim.Adam(model.parameters(), lr=1e-3)
            return model, optim
        """, []),
    # look-alike: the builder hands back a fresh optimizer built after the replacement
    "builder_rebuilt_ok": ("""
        import torch
        import torch.nn as nn

        def make(n_out):
            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 100))
            warm = torch.optim.Adam(model.parameters(), lr=1e-3)
            model[2] = nn.Linear(16, n_out)
            optim = torch.optim.Adam(model.parameters(), lr=1e-3)
            return model, optim
        """, []),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_hands_back_a_stale_optimizer(name):
    """NOTE [stale optimizer handed back]; on torch 2.13 the replaced head of the buggy twins
    never moves under the returned optimizer (benchmarks/probes/lead54/q15)."""
    src, want = BUILDERS[name]
    code = textwrap.dedent(src).lstrip("\n")
    assert sorted((f.code, f.line) for f in check_source(code, "m.py")
                  if f.code == "GT404") == want


def test_checking_leaves_the_shared_load_context_without_a_position():
    """CPython shares one `ast.Load()` among every parsed tree of the process; a rule that
    gives positions to a parsed expression's nodes must skip it (it broke test_walk_index when
    both ran in one worker)."""
    src = textwrap.dedent("""
        import torch
        import torch.nn as nn

        def add_scale(model):
            model.scale = nn.Parameter(torch.ones(1))

        model = nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        add_scale(model)
        for _ in range(2):
            model(torch.randn(3, 2)).sum().backward()
            opt.step()
        """).lstrip("\\n")
    import ast
    check_source(src, "m.py")
    assert not hasattr(ast.parse("x").body[0].value.ctx, "lineno")


REBUILT = {
    # a resume helper builds the model again through a builder of the file on one path
    "builder_on_one_path": ("""
        import torch
        import torch.nn as nn

        def build_model(width):
            return nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 1))

        def load_or_init(net, ckpt):
            if ckpt is not None:
                net = build_model(16)
                net.load_state_dict(ckpt)
            return net

        net = build_model(16)
        opt = torch.optim.Adam(net.parameters())
        net = load_or_init(net, build_model(16).state_dict())
        for _ in range(3):
            opt.zero_grad()
            net(torch.randn(2, 4)).sum().backward()
            opt.step()
        """, [("GT404", 15)]),
    # look-alike: the helper only wraps the model it was given (the same tensors)
    "wrapped_ok": ("""
        import torch
        import torch.nn as nn

        def maybe_parallel(model, n_gpus):
            if n_gpus > 1:
                model = nn.DataParallel(model)
            return model

        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model = maybe_parallel(model, 1)
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
        """, []),
    # look-alike: the optimizer is built after the resume
    "built_after_ok": ("""
        import torch
        import torch.nn as nn

        def resume(model, sd):
            if sd is not None:
                model = nn.Linear(4, 1)
                model.load_state_dict(sd)
            return model

        model = nn.Linear(4, 1)
        model = resume(model, nn.Linear(4, 1).state_dict())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
        """, []),
}


@pytest.mark.parametrize("name", sorted(REBUILT))
def test_helper_builds_its_argument_again(name):
    """NOTE [argument built again]: the buggy twin's model never moves on torch 2.13 (the
    optimizer steps the first model's tensors); the look-alikes train."""
    src, want = REBUILT[name]
    code = textwrap.dedent(src).lstrip("\n")
    assert sorted((f.code, f.line) for f in check_source(code, "m.py")
                  if f.code == "GT404") == want
    import torch
    g: dict = {}
    exec(compile(code, name, "exec"), g)
    model = g.get("net") or g.get("model")
    before = [p.detach().clone() for p in model.parameters()]
    g["opt"].zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    g["opt"].step()
    moved = any(not torch.equal(a, p.detach()) for a, p in zip(before, model.parameters()))
    assert moved == (not want)
