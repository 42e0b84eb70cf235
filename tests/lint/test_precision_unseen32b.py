"""Shapes that fired wrongly on the projects of docs/triage/unseen32b.md (session 32), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # torchbeast (tests/polybeast_loss_functions_test.py): `self.advantages = np.array([...])`
    # in `setUp` (two test classes store the name), then `t = torch.from_numpy(
    # self.advantages)`, `t.requires_grad_()`, the loss of `t` backpropagated and `t.grad`
    # compared: `torch.from_numpy` takes a NumPy array, which has no history to lose.
    # Twin: the model's losses rebuilt with `torch.tensor(...)`: no parameter gets a gradient
    "numpy-array-of-a-test-case-through-from-numpy": (Shape("""
        def baseline_loss(advantages):
            return 0.5 * torch.sum(advantages ** 2)
        class BaselineLossCase:
            def setUp(self):
                self.advantages = np.array([1.4, 3.43, 5.2])
            def check_grad(self):
                advantages_tensor = torch.from_numpy(self.advantages)
                advantages_tensor.requires_grad_()
                calculated_value = baseline_loss(advantages_tensor)
                calculated_value.backward()
                return advantages_tensor.grad
        class EntropyLossCase:
            def setUp(self):
                self.advantages = np.array([0.5, 0.25])
        case = BaselineLossCase()
        case.setUp()
        g = case.check_grad()
        """, "GT104", holds="np.allclose(g.numpy(), case.advantages)"), Shape("""
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(3, 1)
            def step(self, batches):
                losses = [self.model(x).pow(2).mean() for x in batches]
                loss = torch.tensor(losses, requires_grad=True).mean()
                loss.backward()
        t = Trainer()
        t.step([torch.randn(2, 3), torch.randn(2, 3)])
        """, "GT104", line=6, holds="t.model.weight.grad is None")),
    # the same test, as GT106 reads it: `requires_grad_()` on an array made a tensor is a new
    # leaf on purpose. Twin: `requires_grad_()` on a model output copied out of its graph
    "requires-grad-on-a-numpy-array-made-a-tensor": (Shape("""
        class PolicyLossCase:
            def setUp(self):
                self.logits = np.array([[0.2, 0.7], [0.1, 0.5]])
            def check_grad(self):
                logits = torch.from_numpy(self.logits)
                logits.requires_grad_()
                loss = -F.log_softmax(logits, dim=-1)[:, 0].sum()
                loss.backward()
                return logits.grad
        class OtherCase:
            def setUp(self):
                self.logits = np.array([0.3])
        case = PolicyLossCase()
        case.setUp()
        g = case.check_grad()
        """, "GT106", holds="g is not None and g.shape == (2, 2)"), Shape("""
        def fit(model, x):
            out = torch.tensor(model(x).tolist())
            out.requires_grad_()
            loss = out.pow(2).mean()
            loss.backward()
        net = nn.Linear(3, 2)
        fit(net, torch.randn(4, 3))
        """, "GT106", line=3, holds="net.weight.grad is None")),
    # biva-pytorch (run_deepvae.py): `train_summary = train_agg.data.to('cpu')` (a summary
    # object of an installed package), then `train_summary.log(train_writer, global_step)`:
    # `Tensor.log` takes no argument, so a `.log(writer, step)` is another object's method.
    # Twin: `w.data.log()` as a statement: the weights are not changed
    "summary-logged-to-a-writer": (Shape("""
        class Summary:
            def __init__(self):
                self.rows = []
            def to(self, device):
                return self
            def log(self, writer, step):
                writer.append((step, len(self.rows)))
        from types import SimpleNamespace as Aggregator
        agg, writer = Aggregator(data=Summary()), []
        for step in range(1, 3):
            summary = agg.data.to('cpu')
            summary.log(writer, step)
            count = len(summary.rows)
        """, "GT708", holds="writer == [(1, 0), (2, 0)]"), Shape("""
        w = nn.Parameter(torch.rand(3) + 0.5)
        before = w.detach().clone()
        w.data.log()
        """, "GT708", line=3, holds="torch.equal(w.detach(), before)")),
    # energy_ood (utils/score_calculation.py): an OOD scoring loop with grad on (ODIN needs
    # the input gradient) appends `-np.max(odin_score, 1)`, a NumPy array returned by a
    # helper of the file. Twin: the torch maximum of the softmax, which keeps every batch's
    # graph
    "numpy-scores-collected-in-an-ood-loop": (Shape("""
        def odin(inputs, outputs, model):
            outputs.max(1)[0].sum().backward()
            perturbed = inputs.detach() - 0.01 * inputs.grad.sign()
            return F.softmax(model(perturbed), dim=1).detach().numpy()
        def scores(loader, net):
            out = []
            for batch_idx, data in enumerate(loader):
                data = data.clone().requires_grad_()
                output = net(data)
                s = odin(data, output, net)
                out.append(-np.max(s, 1))
            return out
        got = scores([torch.randn(2, 3)] * 3, nn.Linear(3, 4))
        """, "GT505", holds="isinstance(got[0], np.ndarray)"), Shape("""
        def scores(loader, net):
            out = []
            for batch_idx, data in enumerate(loader):
                output = net(data)
                out.append(-torch.max(F.softmax(output, dim=1), 1)[0])
            return out
        got = scores([torch.randn(2, 3)] * 3, nn.Linear(3, 4))
        """, "GT505", line=5, holds="got[0].grad_fn is not None")),
    # EDAC (lifelong_rl/trainers/q_learning/sac.py): `if self.use_automatic_entropy_tuning:`
    # makes `alpha_loss` a tensor, its `else` arm `alpha_loss = 0`; the backward runs under
    # `if self.use_automatic_entropy_tuning and not self.deterministic_backup:`, where only
    # the tensor arm can have run. Twin: the backward under an `or`: with the tuning off and
    # the other flag on, it runs on the number
    "number-bound-under-a-flag-the-backward-excludes": (Shape("""
        class SAC:
            def __init__(self, auto, fixed):
                self.auto, self.fixed = auto, fixed
                self.log_alpha = torch.zeros(1, requires_grad=True)
            def train(self, log_pi):
                if self.auto:
                    alpha_loss = -(self.log_alpha * log_pi.detach()).mean()
                else:
                    alpha_loss = 0
                if self.auto and not self.fixed:
                    alpha_loss.backward()
                return alpha_loss
        for a, f in [(True, False), (False, True), (False, False)]:
            SAC(a, f).train(torch.randn(4))
        """, "GT101"), Shape("""
        class SAC:
            def __init__(self, auto, fixed):
                self.auto, self.fixed = auto, fixed
                self.log_alpha = torch.zeros(1, requires_grad=True)
            def train(self, log_pi):
                if self.auto:
                    alpha_loss = -(self.log_alpha * log_pi.detach()).mean()
                else:
                    alpha_loss = 0
                if self.auto or self.fixed:
                    alpha_loss.backward()
                return alpha_loss
        SAC(False, True).train(torch.randn(4))
        """, "GT101", line=9, raises=(AttributeError, "has no attribute 'backward'"))),
    # the same settings fact as GT509 reads it (`shared_pairs`): two backward passes under
    # `if self.training:` and `if not self.training:` never both run. Twin: `self.eval()`
    # between the two tests sets the flag, both run, the second raises
    "backward-passes-under-opposite-arms-of-one-flag": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
            def fit(self, x):
                loss = torch.tanh(self.fc(x)).sum()
                if self.training:
                    loss.backward()
                if not self.training:
                    loss.backward()
        Net().fit(torch.randn(2, 3))
        """, "GT509"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
            def fit(self, x):
                loss = torch.tanh(self.fc(x)).sum()
                if self.training:
                    loss.backward()
                self.eval()
                if not self.training:
                    loss.backward()
        Net().fit(torch.randn(2, 3))
        """, "GT509", line=8, raises=(RuntimeError, "backward through the graph a second"))),
    # meta-transfer-learning (pytorch/models/mtl.py): `torch.autograd.grad(loss,
    # self.base_learner.parameters())` in MAML's inner loop runs only the learner's nodes;
    # the encoder's graph of the support features is kept for the later passes and the
    # meta-loss. Twin (GT509, which reads the same fact): the inner gradient taken over the
    # encoder's parameters frees that graph, and the next pass through it raises
    "inner-gradient-over-the-learner-parameters": (Shape("""
        class BaseLearner(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
            def forward(self, x, vars=None):
                w, b = (self.fc.weight, self.fc.bias) if vars is None else vars
                return F.linear(x, w, b)
        class MetaLearner(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
                self.base_learner = BaseLearner()
            def forward(self, shot, label, query):
                embedding_query = self.encoder(query)
                embedding_shot = self.encoder(shot)
                logits = self.base_learner(embedding_shot)
                loss = F.cross_entropy(logits, label)
                grad = torch.autograd.grad(loss, self.base_learner.parameters())
                fast = [p - 0.1 * g for g, p in zip(grad, self.base_learner.parameters())]
                logits_q = self.base_learner(embedding_query, fast)
                for _ in range(2):
                    logits = self.base_learner(embedding_shot, fast)
                    loss = F.cross_entropy(logits, label)
                    grad = torch.autograd.grad(loss, fast)
                    fast = [p - 0.1 * g for g, p in zip(grad, fast)]
                    logits_q = self.base_learner(embedding_query, fast)
                return logits_q
        m = MetaLearner()
        lab = torch.tensor([0, 1, 2])
        F.cross_entropy(m(torch.randn(3, 4), lab, torch.randn(3, 4)), lab).backward()
        """, "GT508", holds="m.encoder[0].weight.grad is not None"), Shape("""
        class BaseLearner(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
            def forward(self, x, vars=None):
                w, b = (self.fc.weight, self.fc.bias) if vars is None else vars
                return F.linear(x, w, b)
        class MetaLearner(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
                self.base_learner = BaseLearner()
            def forward(self, shot, label, query):
                embedding_query = self.encoder(query)
                embedding_shot = self.encoder(shot)
                logits = self.base_learner(embedding_shot)
                loss = F.cross_entropy(logits, label)
                grad = torch.autograd.grad(loss, self.encoder.parameters())
                logits_q = self.base_learner(embedding_query)
                for _ in range(2):
                    logits = self.base_learner(embedding_shot)
                    loss = F.cross_entropy(logits, label)
                    grad = torch.autograd.grad(loss, self.encoder.parameters())
                    logits_q = self.base_learner(embedding_query)
                return logits_q
        m = MetaLearner()
        lab = torch.tensor([0, 1, 2])
        m(torch.randn(3, 4), lab, torch.randn(3, 4))
        """, "GT509", line=18, raises=(RuntimeError, "backward through the graph a second"))),
    # PVD (modules/functional/loss.py, PVCNN's): `def kl_loss(x, y)`: `x` detached (the
    # teacher's distribution), `y = F.log_softmax(y, dim=1)`, the student's logits: what a
    # function turns into log-probabilities is a prediction, whatever its name. Twin: the
    # student's logits detached too: nothing is left to differentiate
    "log-probabilities-of-an-argument-spelled-like-a-target": (Shape("""
        def kl_loss(x, y):
            x = F.softmax(x.detach(), dim=1)
            y = F.log_softmax(y, dim=1)
            return torch.mean(torch.sum(x * (torch.log(x) - y), dim=1))
        student = nn.Linear(3, 4)
        kl_loss(torch.randn(2, 4), student(torch.randn(2, 3))).backward()
        """, "GT107", holds="student.weight.grad is not None"), Shape("""
        def kl_loss(x, y):
            x = F.softmax(x.detach(), dim=1)
            y = F.log_softmax(y.detach(), dim=1)
            return torch.mean(torch.sum(x * (torch.log(x) - y), dim=1))
        student = nn.Linear(3, 4)
        kl_loss(torch.randn(2, 4), student(torch.randn(2, 3))).backward()
        """, "GT107", line=2, raises=(RuntimeError, "does not require grad"))),
    # last_layer_laplace (paper/notebooks/laplace/kfla.py): `opt = KFAC(self.net)`, a K-FAC
    # preconditioner (an `Optimizer` subclass of the project) whose `step()` gathers the
    # layers' inputs and output gradients from hooks and never reads `.grad`: a loop of
    # `loss.backward(); opt.step()` without `zero_grad()` changes nothing it computes.
    # Twin: the same estimator reading `p.grad` in its step: it squares the running sum
    "curvature-estimator-stepped-without-zero-grad": (Shape("""
        class KFAC(torch.optim.Optimizer):
            def __init__(self, net):
                self.mods = [m for m in net.modules() if isinstance(m, nn.Linear)]
                for m in self.mods:
                    m.register_forward_pre_hook(self._save_input)
                    m.register_full_backward_hook(self._save_grad_output)
                super().__init__([{"params": [m.weight], "mod": m} for m in self.mods], {})
            def _save_input(self, mod, i):
                self.state[mod]["x"] = i[0]
            def _save_grad_output(self, mod, grad_input, grad_output):
                self.state[mod]["gy"] = grad_output[0]
            def step(self):
                for group in self.param_groups:
                    st = self.state[group["mod"]]
                    st["xxt"] = st.get("xxt", 0) + st["x"].t() @ st["x"]
                    st["ggt"] = st.get("ggt", 0) + st["gy"].t() @ st["gy"]
        def estimate(net, loader):
            opt = KFAC(net)
            for x in loader:
                out = net(x)
                loss = F.cross_entropy(out, out.argmax(1))
                loss.backward()
                opt.step()
            return opt
        net = nn.Sequential(nn.Linear(3, 4))
        opt = estimate(net, [torch.randn(2, 3)] * 2)
        """, "GT501", holds="opt.state[net[0]]['xxt'].shape == (3, 3)"), Shape("""
        class DiagFisher(torch.optim.Optimizer):
            def __init__(self, net):
                super().__init__(net.parameters(), {})
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        st = self.state[p]
                        st["f"] = st.get("f", 0) + p.grad ** 2
        def estimate(net, loader):
            opt = DiagFisher(net)
            for x in loader:
                out = net(x)
                loss = F.cross_entropy(out, out.argmax(1))
                loss.backward()
                opt.step()
            return opt
        net = nn.Linear(3, 4)
        opt = estimate(net, [torch.randn(2, 3)] * 2)
        """, "GT501", line=14, holds="opt.state[net.weight]['f'].shape == (4, 3)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
