"""Detections that need facts across functions, ``self`` attributes and script variables (the
analysis layer): each buggy shape is reported at its root line, and the correct look-alike
next to it stays silent, so a silent rule cannot pass."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source


def codes(src: str, select: str) -> list[tuple[int, str]]:
    found = check_source(textwrap.dedent(src).lstrip("\n"), "shape.py", select=[select])
    return sorted((f.line, f.code) for f in found)


HELPER_LOSS = """
    import torch
    import torch.nn.functional as F

    def compute_loss(out, y):
        return torch.tensor(F.mse_loss(out, y){cut}, requires_grad=True)

    def train(model, opt, loader):
        for x, y in loader:
            opt.zero_grad()
            loss = compute_loss(model(x), y)
            loss.backward()
            opt.step()
    """

# (source, family selected, expected findings) for the buggy twins
BUGGY = {
    # a: a helper one call away cuts the graph (the same code inline is caught)
    "helper-rewraps-item": (HELPER_LOSS.format(cut=".item()"), "GT1", [(5, "GT102")]),
    "method-helper-rewraps-item": ("""
        import torch
        import torch.nn.functional as F

        class Trainer:
            def compute_loss(self, out, y):
                value = F.cross_entropy(out, y).item()
                return torch.tensor(value, requires_grad=True)

            def fit(self, model, opt, loader):
                for x, y in loader:
                    loss = self.compute_loss(model(x), y)
                    loss.backward()
                    opt.step()
        """, "GT102", [(6, "GT102")]),
    "helper-returns-detached-features": ("""
        import torch.nn.functional as F

        def features(model, x):
            return model(x).detach()

        def train(model, opt, loader):
            for x, y in loader:
                loss = F.mse_loss(features(model, x), y)
                loss.backward()
                opt.step()
        """, "GT1", [(4, "GT107")]),
    # b: `model.head.requires_grad = False` on a submodule made in __init__
    "submodule-of-file-class-frozen-by-attribute": ("""
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 8)
                self.head = nn.Linear(8, 1)

        model = Net()
        model.head.requires_grad = False
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        """, "GT407", [(11, "GT407")]),
    "nested-submodule-through-trainer-attribute": ("""
        import torch.nn as nn

        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Conv2d(3, 8, 3)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = Backbone()

        def build():
            return Net()

        class Trainer:
            def __init__(self):
                self.model = build()

            def freeze(self):
                self.model.backbone.stem.requires_grad = False
        """, "GT407", [(21, "GT407")]),
    # c: the optimizer built by a helper, the model re-created after it
    "model-recreated-after-helper-built-optimizer": ("""
        import torch
        import torch.nn as nn

        def make_optimizer(model, lr=0.1):
            return torch.optim.SGD(model.parameters(), lr=lr)

        def train(model, opt, loader):
            for x, y in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()

        def main(loader):
            model = nn.Linear(4, 1)
            opt = make_optimizer(model)
            model = nn.Linear(4, 1)
            train(model, opt, loader)
        """, "GT404", [(16, "GT404")]),
    # c: the model re-created in another method than the one that built the optimizer
    "model-recreated-in-another-method": ("""
        import torch
        import torch.nn as nn

        class Trainer:
            def __init__(self):
                self.model = nn.Linear(4, 1)
                self.opt = torch.optim.Adam(self.model.parameters())

            def reset(self):
                self.model = nn.Linear(4, 1)

            def fit(self, loader):
                for x, y in loader:
                    self.opt.zero_grad()
                    self.model(x).sum().backward()
                    self.opt.step()
        """, "GT404", [(10, "GT404")]),
    # c: a script re-creates the model after the optimizer; a function of the file steps the
    # script's optimizer itself
    "model-recreated-in-script-stepped-by-function": ("""
        import torch
        import torch.nn as nn

        rnn = nn.RNN(4, 8)
        optimizer = torch.optim.SGD(rnn.parameters(), lr=0.01)

        def train(x):
            optimizer.zero_grad()
            out, h = rnn(x)
            out.sum().backward()
            optimizer.step()

        rnn = nn.RNN(4, 8)
        for _ in range(3):
            train(torch.randn(5, 1, 4))
        """, "GT404", [(13, "GT404")]),
    # d: a random weight kept as a plain attribute and used in forward
    "random-weight-plain-attribute": ("""
        import torch
        import torch.nn as nn

        class Memory(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.proj = nn.Linear(d, d)
                self.values = torch.randn(n, d) * 0.1

            def read(self, attn):
                return attn @ self.values

            def forward(self, x):
                return self.read(torch.softmax(self.proj(x), -1))

        mem = Memory(8, 8)
        opt = torch.optim.Adam(mem.parameters())
        mem(torch.randn(4, 8)).sum().backward()
        """, "GT412", [(8, "GT412")]),
    # d: a plain tensor attribute handed to the optimizer as if it were a parameter
    "plain-tensor-attribute-given-to-optimizer": ("""
        import torch
        import torch.nn as nn

        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.memory = torch.randn(16, 4)

            def forward(self, x):
                return self.fc(x) @ self.memory.t()

        def main():
            model = Memory()
            opt = torch.optim.SGD(list(model.parameters()) + [model.memory], lr=0.1)
        """, "GT411", [(8, "GT411")]),
    # e: grad left off by an evaluation helper called from the script
    "grad-off-helper-called-from-script": ("""
        import torch
        import torch.nn.functional as F

        def evaluate(model, x, y):
            torch.set_grad_enabled(False)
            return F.mse_loss(model(x), y).item()

        def train_one(model, opt, x, y):
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()

        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        for epoch in range(3):
            train_one(model, opt, x, y)
            print(evaluate(model, x, y))
        """, "GT203", [(5, "GT203")]),
}

SILENT = {
    # a: the helper keeps the graph; helpers that cut on purpose feed logs or targets
    "helper-keeps-graph": ("""
        import torch.nn.functional as F

        def compute_loss(out, y):
            return F.mse_loss(out, y) + 0.1 * out.abs().mean()

        def train(model, opt, loader):
            for x, y in loader:
                loss = compute_loss(model(x), y)
                loss.backward()
                opt.step()
        """, "GT1"),
    "cutting-helpers-for-targets-and-logs": ("""
        import torch.nn.functional as F

        def targets(target_net, s2, r, gamma=0.99):
            return (r + gamma * target_net(s2).max(1)[0]).detach()

        def accuracy(out, y):
            return (out.argmax(1) == y).float().mean().item()

        def embed(model, x):
            return model(x).detach()

        def train(model, target_net, opt, loader):
            for s, a, r, s2 in loader:
                q = model(s).gather(1, a)
                loss = F.mse_loss(q, targets(target_net, s2, r))
                opt.zero_grad()
                loss.backward()
                opt.step()
                print(accuracy(q, a), embed(model, s).norm())
        """, "GT1"),
    "training-step-helper-returns-number": ("""
        def step(model, opt, x, y, criterion):
            loss = criterion(model(x), y)
            loss.backward()
            opt.step()
            return loss.detach()

        def fit(model, opt, loader, criterion):
            total = 0.0
            for x, y in loader:
                total = total + step(model, opt, x, y, criterion)
            return total
        """, "GT1"),
    # b: a Parameter attribute of a class of the file is a tensor: the flag works on it
    "parameter-attribute-frozen": ("""
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 1)
                self.temperature = nn.Parameter(torch.ones(1))

        model = Net()
        model.temperature.requires_grad = False
        model.head.weight.requires_grad = False
        model.head.requires_grad_(False)
        """, "GT407"),
    # c: the optimizer is rebuilt after the model, or the re-creation is set-up
    "optimizer-rebuilt-by-helper": ("""
        import torch
        import torch.nn as nn

        def make_optimizer(model, lr=0.1):
            return torch.optim.SGD(model.parameters(), lr=lr)

        def train(model, opt, loader):
            for x, y in loader:
                model(x).sum().backward()
                opt.step()

        def main(loader):
            model = nn.Linear(4, 1)
            opt = make_optimizer(model)
            model.fc = nn.Linear(4, 1)
            opt = make_optimizer(model)
            train(model, opt, loader)
        """, "GT404"),
    "model-built-by-a-setup-method-or-rebuilt-with-optimizer": ("""
        import copy
        import torch
        import torch.nn as nn

        class Trainer:
            def __init__(self):
                self.build_model()
                self.opt = torch.optim.Adam(self.model.parameters())

            def build_model(self):
                self.model = nn.Linear(4, 1)

            def to_device(self, dev):
                self.model = nn.DataParallel(self.model.to(dev))

            def fit(self, loader):
                for x, y in loader:
                    self.opt.zero_grad()
                    self.model(x).sum().backward()
                    self.opt.step()
                self.model = copy.deepcopy(self.best)

        class Trainer2:
            def __init__(self):
                self.model = nn.Linear(4, 1)
                self.opt = torch.optim.Adam(self.model.parameters())

            def reset(self):
                self.model = nn.Linear(4, 1)
                self.setup_optimizer()

            def setup_optimizer(self):
                self.opt = torch.optim.Adam(self.model.parameters())

            def fit(self, loader):
                for x, y in loader:
                    self.model(x).sum().backward()
                    self.opt.step()
        """, "GT404"),
    # d: a fixed random projection stays a plain tensor; a trained one requires grad
    "fixed-projection-and-trained-temperature": ("""
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.proj = torch.randn(4, 4)
                self.log_t = torch.zeros(1)
                self.log_t.requires_grad_()

            def forward(self, x):
                return self.fc(x @ self.proj) / self.log_t.exp()

        model = Head()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        t_opt = torch.optim.LBFGS([model.log_t], lr=0.01)
        """, "GT411"),
    # c: the script's train() builds and steps its own optimizer
    "function-steps-its-own-optimizer": ("""
        import torch
        import torch.nn as nn

        rnn = nn.RNN(4, 8)
        optimizer = torch.optim.SGD(rnn.parameters(), lr=0.01)

        def train(x):
            optimizer = torch.optim.SGD(rnn.parameters(), lr=0.01)
            out, h = rnn(x)
            out.sum().backward()
            optimizer.step()

        rnn = nn.RNN(4, 8)
        train(torch.randn(5, 1, 4))
        """, "GT404"),
    # d: fixed random features kept as a buffer, random noise added (not a weight), a
    # sinusoidal table, a random weight that is re-drawn on every call
    "random-buffers-noise-and-tables": ("""
        import math
        import torch
        import torch.nn as nn

        class Features(nn.Module):
            def __init__(self, d, m):
                super().__init__()
                self.register_buffer("B", torch.randn(d, m))
                self.noise = torch.randn(1, m)
                self.pe = torch.zeros(16, m)
                self.pe[:, 0::2] = torch.sin(torch.arange(16.0)[:, None] / 100)
                self.w = torch.randn(m, m)
                self.fc = nn.Linear(m, 1)

            def forward(self, x):
                self.w = torch.randn_like(self.w)
                h = torch.cos(x @ self.B) + self.noise + self.pe[: x.shape[0]]
                return self.fc(h @ self.w)

        model = Features(4, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(4, 4)).sum().backward()
        """, "GT412"),
    # e: grad turned back on at module level before training, or evaluation after it
    "grad-restored-in-script": ("""
        import torch
        import torch.nn.functional as F

        def evaluate(model, x, y):
            torch.set_grad_enabled(False)
            return F.mse_loss(model(x), y).item()

        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        print(evaluate(model, x, y))
        torch.set_grad_enabled(True)
        F.mse_loss(model(x), y).backward()
        opt.step()
        """, "GT203"),
    "evaluation-after-training-in-script": ("""
        import torch
        import torch.nn.functional as F

        def evaluate(model, x, y):
            torch.set_grad_enabled(False)
            return F.mse_loss(model(x), y).item()

        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        for epoch in range(3):
            F.mse_loss(model(x), y).backward()
            opt.step()
        print(evaluate(model, x, y))
        """, "GT203"),
}


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_buggy_twin_is_reported(name: str) -> None:
    src, select, expected = BUGGY[name]
    assert codes(src, select) == expected


@pytest.mark.parametrize("name", sorted(SILENT))
def test_look_alike_is_silent(name: str) -> None:
    src, select = SILENT[name]
    assert codes(src, select) == []


def test_helper_cut_is_reported_once_for_several_callers() -> None:
    src = textwrap.dedent(HELPER_LOSS.format(cut=".item()")) + textwrap.dedent("""
        def train_again(model, opt, x, y):
            compute_loss(model(x), y).backward()
        """)
    assert codes(src, "GT102") == [(5, "GT102")]


def test_bundled_runtime_example_is_caught_statically() -> None:
    import pathlib
    path = pathlib.Path(__file__).parents[2] / "examples" / "runtime" / "grad_mode_left_off.py"
    found = check_source(path.read_text(), str(path))
    assert [(f.line, f.code) for f in found] == [(8, "GT203")]
