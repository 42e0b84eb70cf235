"""Shapes that fired wrongly on the projects of docs/triage/unseen35c.md (session 35: libraries,
courses, Kaggle solutions, notebooks), each in another spelling than the project's and next to a
buggy twin that is still reported. Every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Modern Computer Vision with PyTorch 2E (`Chapter13/CycleGAN`): a sample function puts the
    # generator in eval mode every few batches and nothing puts it back, but the generator's
    # only norm layers are `InstanceNorm2d` without `track_running_stats`: they normalise each
    # sample by its own statistics in both modes, so the mode changes nothing. Twin: the same
    # layers tracking running statistics: from then on the generator trains in eval mode
    "instance-norm-generator-left-in-eval-mode": (Shape("""
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.InstanceNorm2d(2),
                                          nn.ReLU(), nn.Conv2d(2, 1, 3, padding=1))
            def forward(self, x):
                return self.body(x)
        gen = Gen()
        opt = torch.optim.SGD(gen.parameters(), lr=0.1)
        def show_samples():
            gen.eval()
            with torch.no_grad():
                gen(torch.randn(2, 1, 4, 4))
        x = torch.randn(2, 1, 4, 4)
        before = gen(x).detach()
        for i in range(3):
            loss = gen(torch.randn(2, 1, 4, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i % 2 == 0:
                show_samples()
        gen.train()
        a = gen(x)
        gen.eval()
        b = gen(x)
        """, "GT516", holds="torch.allclose(a, b)"), Shape("""
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1),
                                          nn.InstanceNorm2d(2, track_running_stats=True),
                                          nn.ReLU(), nn.Conv2d(2, 1, 3, padding=1))
            def forward(self, x):
                return self.body(x)
        gen = Gen()
        opt = torch.optim.SGD(gen.parameters(), lr=0.1)
        def show_samples():
            gen.eval()
            with torch.no_grad():
                gen(torch.randn(2, 1, 4, 4))
        for i in range(3):
            loss = gen(torch.randn(2, 1, 4, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i % 2 == 0:
                show_samples()
        """, "GT516", line=21, holds="not gen.training")),
    # Deep Learning with PyTorch 1.x (`Chapter02` notebook): one cell per operation,
    # `torch.add(x, y)`, `torch.sub(x, y)`, then `x.dtype` and `x.type(torch.DoubleTensor)`:
    # each line shows a value, no later line keeps `x`, and the `x` of a model's `forward`
    # defined above is that method's own parameter. Twin: a later line keeps `x` (`z = x *
    # 2`): the sum was meant to be kept and is lost
    "notebook-cells-show-tensor-ops-on-a-name": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 1)
            def forward(self, x):
                return self.fc(x)
        x = torch.tensor([5., 3.])
        y = torch.tensor([3., 2.])
        torch.add(x, y)

        torch.sub(x, y)

        x.dtype

        x.type(torch.DoubleTensor)
        """, "GT708", holds="torch.equal(x, torch.tensor([5., 3.]))"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 1)
            def forward(self, x):
                return self.fc(x)
        x = torch.tensor([5., 3.])
        y = torch.tensor([3., 2.])
        torch.add(x, y)

        x.dtype
        z = x * 2
        """, "GT708", line=9, holds="torch.equal(z, torch.tensor([10., 6.]))")),
    # In-Time-Over-Parameterization and sparse_learning (NVIDIA's ImageNet `main.py`): the
    # step closure wraps the batch in `Variable(input)` and calls `model_and_loss`, a module
    # holding the model and its criterion (`loss, output = model_and_loss(x, y)`): named with
    # a loss word, it still runs the model, whose weights are on the graph. Twin: a criterion
    # given the model's output wrapped in `Variable`: backward has no graph
    "model-and-loss-wrapper-called-on-the-wrapped-batch": (Shape("""
        from torch.autograd import Variable
        class ModelAndLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = nn.Linear(3, 2)
                self.loss = nn.CrossEntropyLoss()
            def forward(self, x, y):
                out = self.model(x)
                return self.loss(out, y), out
        def get_train_step(model_and_loss, optimizer):
            def _step(inp, target):
                inp_var = Variable(inp)
                loss, output = model_and_loss(inp_var, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return loss.item()
            return _step
        mal = ModelAndLoss()
        step = get_train_step(mal, torch.optim.SGD(mal.parameters(), lr=0.1))
        w0 = mal.model.weight.clone()
        step(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))
        """, "GT104", holds="not torch.equal(w0, mal.model.weight)"), Shape("""
        from torch.autograd import Variable
        def get_train_step(model, loss_fn, optimizer):
            def _step(inp, target):
                out = model(inp)
                loss = loss_fn(Variable(out), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return loss.item()
            return _step
        net = nn.Linear(3, 2)
        step = get_train_step(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1))
        step(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))
        """, "GT104", line=5, raises=(RuntimeError, "does not require grad"))),
    # federated-learning-public-code (FedDF `unlabeled_training.py`): the labels each local
    # model predicts, `torch.max(torch.softmax(out, dim=1), dim=1).indices`, collected over the
    # loader with grad on: the indices of a (values, indices) pair are an integer tensor
    # without history, no graph is kept. Twin: the values of the pair are collected: each
    # keeps its batch's graph
    "predicted-indices-collected-over-a-loader": (Shape("""
        def extract_labels(models, loader):
            out = {}
            for k, model in models.items():
                model.eval()
                labels = []
                for x, y in loader:
                    o = model(x)
                    labels.append(torch.max(torch.softmax(o, dim=1), dim=1).indices)
                    labels.append(o.max(1)[1])
                out[k] = torch.cat(labels)
            return out
        loader = [(torch.randn(4, 3), torch.zeros(4)) for _ in range(3)]
        got = extract_labels({0: nn.Linear(3, 5)}, loader)
        """, "GT505", holds="not got[0].requires_grad and got[0].dtype == torch.int64"), Shape("""
        def extract_scores(models, loader):
            out = {}
            for k, model in models.items():
                model.eval()
                scores = []
                for x, y in loader:
                    o = model(x)
                    scores.append(torch.max(torch.softmax(o, dim=1), dim=1).values)
                out[k] = torch.cat(scores)
            return out
        loader = [(torch.randn(4, 3), torch.zeros(4)) for _ in range(3)]
        got = extract_scores({0: nn.Linear(3, 5)}, loader)
        """, "GT505", line=8, holds="got[0].requires_grad")),
    # kaggle_rsna2019_3rd_solution (`src/trainer.py`): `optimizer.zero_grad()` at the top of
    # every pass and again after the step every `accumulation_steps` passes: nothing adds up,
    # each step applies the last micro-batch's gradient (GT512 says so), so the loss not being
    # divided by the count scales nothing. Twin: the clear after the step alone: the step
    # applies the sum of the micro-batches' gradients
    "accumulation-cleared-on-every-pass-too": (Shape("""
        net = nn.Linear(2, 1, bias=False)
        opt = torch.optim.SGD(net.parameters(), lr=0.0)
        accum = 2
        data = [(torch.ones(1, 2), torch.zeros(1, 1)) for _ in range(2)]
        for step, (x, y) in enumerate(data):
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            if (step + 1) % accum == 0:
                g = net.weight.grad.clone()
                opt.step()
                opt.zero_grad()
        one = torch.autograd.grad(F.mse_loss(net(data[0][0]), data[0][1]), net.weight)[0]
        """, "GT513", holds="torch.allclose(g, one)"), Shape("""
        net = nn.Linear(2, 1, bias=False)
        opt = torch.optim.SGD(net.parameters(), lr=0.0)
        accum = 2
        data = [(torch.ones(1, 2), torch.zeros(1, 1)) for _ in range(2)]
        for step, (x, y) in enumerate(data):
            loss = F.mse_loss(net(x), y)
            loss.backward()
            if (step + 1) % accum == 0:
                g = net.weight.grad.clone()
                opt.step()
                opt.zero_grad()
        one = torch.autograd.grad(F.mse_loss(net(data[0][0]), data[0][1]), net.weight)[0]
        """, "GT513", line=7, holds="torch.allclose(g, 2 * one)")),
    # MAIR (`mair/attacks/attacks/eaden.py`, `eadl1.py`): an attack's `forward` wraps the
    # images in `nn.Parameter`, backwards the attack cost through the model and steps that
    # Parameter by hand under `no_grad`: a variable optimised inside the call, no optimizer
    # is meant to hold it. Twin: a module that makes a Parameter in `forward` and trains
    # through an optimizer built once over `parameters()`: the new Parameter never moves
    "attack-steps-the-parameter-it-made-in-forward": (Shape("""
        class Attack(nn.Module):
            def __init__(self, model, steps=3, lr=0.1):
                super().__init__()
                self.model = model
                self.steps, self.lr = steps, lr
            def forward(self, images, labels):
                adv = nn.Parameter(images.clone())
                for _ in range(self.steps):
                    cost = -F.cross_entropy(self.model(adv), labels)
                    cost.backward()
                    with torch.no_grad():
                        adv -= self.lr * adv.grad.sign()
                    adv.grad = None
                return adv.detach()
        net = nn.Linear(3, 2)
        x = torch.randn(4, 3)
        adv = Attack(net)(x, torch.tensor([0, 1, 0, 1]))
        """, "GT445", holds="not torch.equal(adv, x)"), Shape("""
        class Scaled(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, 1)
            def forward(self, x):
                self.scale = nn.Parameter(torch.ones(x.shape[1]))
                return self.fc(x * self.scale)
        net = Scaled(3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        net(torch.randn(4, 3)).sum().backward()
        opt.step()
        """, "GT445", line=6, holds="torch.equal(net.scale.data, torch.ones(3))")),
    # Federated-Learning-with-Differential-Privacy (`FLModel.py`): the server module keeps its
    # clients in a plain list; each client module builds its own optimizer over its own model
    # in `update()` and trains itself, the server averages their state dicts into its global
    # model: participants, not layers of the server. Twin: the holder's parts that train only
    # through the holder's optimizer, kept in a plain list: they never train
    "clients-that-train-themselves-in-a-plain-list": (Shape("""
        class Client(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = nn.Linear(2, 1)
            def update(self, x, y):
                opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
                for _ in range(2):
                    opt.zero_grad()
                    F.mse_loss(self.model(x), y).backward()
                    opt.step()
        class Server(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.clients = [Client() for _ in range(n)]
                self.global_model = nn.Linear(2, 1)
            def round(self, x, y):
                for c in self.clients:
                    c.model.load_state_dict(self.global_model.state_dict())
                    c.update(x, y)
                avg = {k: sum(c.model.state_dict()[k] for c in self.clients) / len(self.clients)
                       for k in self.global_model.state_dict()}
                self.global_model.load_state_dict(avg)
        server = Server(2)
        w0 = server.global_model.weight.clone()
        server.round(torch.randn(4, 2), torch.randn(4, 1))
        """, "GT401", holds="not torch.equal(w0, server.global_model.weight)"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 1)
            def forward(self, x):
                return self.fc(x)
        class Multi(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.trunk = nn.Linear(2, 2)
                self.heads = [Head() for _ in range(n)]
            def forward(self, x):
                h = self.trunk(x)
                return sum(head(h) for head in self.heads)
        net = Multi(2)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        w0 = net.heads[0].fc.weight.clone()
        F.mse_loss(net(torch.randn(4, 2)), torch.randn(4, 1)).backward()
        opt.step()
        """, "GT401", line=11, holds="torch.equal(w0, net.heads[0].fc.weight)")),
    # KD_Lib (`KD/vision/DML/dml.py`): deep mutual learning sums the students' losses of one
    # batch, each backwarded and stepped by its own optimizer, into an accumulator made anew
    # for every batch and read as `.item()` after the students' loop: it keeps one batch's
    # graph nodes, never more. Twin: an epoch's sum over the loader, kept in a history list:
    # every batch's graph stays reachable
    "per-batch-sum-over-a-cohort-of-students": (Shape("""
        students = [nn.Linear(3, 2) for _ in range(2)]
        opts = [torch.optim.SGD(s.parameters(), lr=0.1) for s in students]
        train_loader = [(torch.randn(4, 3), torch.tensor([0, 1, 0, 1])) for _ in range(3)]
        epoch_loss = 0.0
        for x, y in train_loader:
            avg_loss = 0
            for i in range(len(students)):
                opts[i].zero_grad()
                loss = F.cross_entropy(students[i](x), y)
                loss.backward()
                opts[i].step()
                avg_loss += loss
            avg_loss /= len(students)
            epoch_loss += avg_loss.item()
        """, "GT505", holds="isinstance(epoch_loss, float)"), Shape("""
        model = nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        train_loader = [(torch.randn(4, 3), torch.tensor([0, 1, 0, 1])) for _ in range(3)]
        history = []
        for epoch in range(2):
            epoch_loss = 0.0
            for x, y in train_loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                epoch_loss += loss
            history.append(epoch_loss)
        """, "GT505", line=12, holds="history[0].grad_fn is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
