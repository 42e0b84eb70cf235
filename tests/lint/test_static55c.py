"""static55c: the lead's second probe set (benchmarks/probes/lead55b), built as general facts.
Each buggy twin is another style of a probe's bug (each crashes or leaves a layer untrained on torch
2.13); each look-alike is the fixed twin, silent. Codes and lines are asserted."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

CASES = {
    # s01: NOTE [grad left off by a with]: a module-level `with` of a class whose __exit__ never
    # restores grad, training after it (RuntimeError: element 0 of tensors does not require grad)
    "with_class_script": ("""
        import torch
        from torch import nn


        class frozen_grad(object):
            def __enter__(self):
                self.prev = torch.is_grad_enabled()
                torch.autograd.set_grad_enabled(mode=False)

            def __exit__(self, exc_type, exc, tb):
                pass


        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with frozen_grad():
            baseline = model(torch.ones(1, 3)).item()
        for step in range(10):
            opt.zero_grad()
            model(torch.randn(4, 3)).pow(2).mean().backward()
            opt.step()
""", "GT203", [8]),
    # the same class whose __exit__ restores the previous mode
    "with_class_restored": ("""
        import torch
        from torch import nn


        class frozen_grad(object):
            def __enter__(self):
                self.prev = torch.is_grad_enabled()
                torch.autograd.set_grad_enabled(mode=False)

            def __exit__(self, exc_type, exc, tb):
                torch.set_grad_enabled(self.prev)


        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with frozen_grad():
            baseline = model(torch.ones(1, 3)).item()
        for step in range(10):
            opt.zero_grad()
            model(torch.randn(4, 3)).pow(2).mean().backward()
            opt.step()
""", "GT203", []),
    # s18: object.__setattr__ of a new Parameter, vars(self)[...] of a layer bound to a local name
    "object_setattr_parameter": ("""
        import torch
        import torch.nn as nn

        class Gate(nn.Module):
            def __init__(self, d, names):
                super().__init__()
                object.__setattr__(self, "scale", nn.Parameter(torch.ones(d)))
                for n in names:
                    conv = nn.Conv1d(d, d, 1)
                    vars(self)[n] = conv

            def forward(self, x):
                return x * self.scale
        """, "GT498", [7, 10]),
    # registered the normal way; a handed-in teacher and plain values kept out on purpose
    "registered_or_deliberate": ("""
        import torch.nn as nn

        class Student(nn.Module):
            def __init__(self, d, names, teacher):
                super().__init__()
                for n in names:
                    setattr(self, n, nn.Conv1d(d, d, 1))
                object.__setattr__(self, "teacher", teacher)
                self.__dict__["names"] = list(names)
                vars(self)["cache"] = {}
        """, "GT498", []),
    # s09: a trainer method passes `.data` copies through dict(...) straight to functional_call
    "functional_call_data_copies": ("""
        import torch
        import torch.nn as nn
        import torch.func


        class Trainer:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.Adam(net.parameters())

            def step(self, x, y):
                weights = dict((n, p.data.clone()) for n, p in self.net.named_parameters())
                out = torch.func.functional_call(self.net, weights, (x,))
                loss = nn.functional.cross_entropy(out, y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


        t = Trainer(nn.Linear(4, 3))
        t.step(torch.randn(5, 4), torch.randint(0, 3, (5,)))
""", "GT157", [12]),
    "functional_call_live_params": ("""
        import torch
        import torch.nn as nn
        import torch.func


        class Trainer:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.Adam(net.parameters())

            def step(self, x, y):
                weights = dict((n, p) for n, p in self.net.named_parameters())
                out = torch.func.functional_call(self.net, weights, (x,))
                loss = nn.functional.cross_entropy(out, y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


        t = Trainer(nn.Linear(4, 3))
        t.step(torch.randn(5, 4), torch.randint(0, 3, (5,)))
""", "GT157", []),
    # MAML-style fast weights: detached copies made leaves on purpose and differentiated
    "functional_call_fast_weights": ("""
        import torch
        from torch.func import functional_call

        def adapt(model, x, y, steps=1, lr=0.1):
            fast = {k: v.detach() for k, v in model.named_parameters()}
            for t in fast.values():
                t.requires_grad_()
            loss = torch.nn.functional.mse_loss(functional_call(model, fast, (x,)), y)
            grads = torch.autograd.grad(loss, list(fast.values()))
            loss.backward()
            return grads
        """, "GT157", []),
    # s06: a plain class's __init__ rebuilds the loss from .item()
    "field_from_item": ("""
        import torch
        import torch.nn as nn


        class StepResult:
            def __init__(self, loss, n):
                self.n = n
                self.loss = torch.tensor(loss.item() / n)


        def run(model, batches, opt):
            for x, y in batches:
                res = StepResult(nn.functional.mse_loss(model(x), y, reduction="sum"), len(x))
                opt.zero_grad()
                res.loss.backward()
                opt.step()


        m = nn.Linear(2, 1)
        run(m, [(torch.randn(3, 2), torch.randn(3, 1))], torch.optim.SGD(m.parameters(), lr=0.1))
""", "GT155", [8]),
    "field_kept": ("""
        import torch
        import torch.nn as nn


        class StepResult:
            def __init__(self, loss, n):
                self.n = n
                self.loss = loss / n
                self.value = loss.item() / n


        def run(model, batches, opt):
            for x, y in batches:
                res = StepResult(nn.functional.mse_loss(model(x), y, reduction="sum"), len(x))
                opt.zero_grad()
                res.loss.backward()
                opt.step()


        m = nn.Linear(2, 1)
        run(m, [(torch.randn(3, 2), torch.randn(3, 1))], torch.optim.SGD(m.parameters(), lr=0.1))
""", "GT155", []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_static55c(name):
    src, code, want = CASES[name]
    found = sorted(f.line for f in check_source(textwrap.dedent(src).lstrip("\n"), "m.py")
                   if f.code == code)
    assert found == want
